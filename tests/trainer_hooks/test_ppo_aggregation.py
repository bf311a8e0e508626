"""agg_loss (verl's four modes) and the masked moments."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer_hooks.losses.aggregation import LOSS_AGG_MODES, agg_loss
from trainer_hooks.ops.masked import masked_mean, masked_var

try:  # tests/trainer_hooks may or may not be a package
    from . import loop_reference as ref
except ImportError:  # pragma: no cover - depends on the rootdir layout
    import loop_reference as ref

F64 = torch.float64

# Row 0: losses [1, 2, 3] all valid; row 1: [4, x, x] one valid; row 2: fully masked.
LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 100.0, 100.0], [7.0, 7.0, 7.0]], dtype=F64)
MASK = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]], dtype=torch.bool)


@pytest.mark.parametrize(
    "mode, expected",
    [
        # (1 + 2 + 3 + 4) / 4 tokens
        ("token-mean", 10.0 / 4),
        # row sums 6 and 4; the empty row is left out: (6 + 4) / 2
        ("seq-mean-token-sum", 5.0),
        # row means 2 and 4: (2 + 4) / 2 (verl's + 1e-8 in the token count is below 1e-8 rel.)
        ("seq-mean-token-mean", 3.0),
        # (6 + 4) / 2 rows / L = 3
        ("seq-mean-token-sum-norm", 5.0 / 3),
    ],
)
def test_agg_loss_hand_worked(mode, expected):
    assert agg_loss(LOSS, MASK, mode).item() == pytest.approx(expected, rel=1e-8)


def test_sum_norm_uses_the_given_constant_scale():
    # (6 + 4) / 2 rows / 10
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", loss_scale_factor=10).item() == pytest.approx(0.5)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_fully_masked_batch_is_zero_with_zero_finite_gradient(mode):
    loss = torch.randn(3, 4, dtype=F64, requires_grad=True)
    out = agg_loss(loss, torch.zeros(3, 4, dtype=torch.bool), mode)
    assert out.item() == 0.0
    out.backward()
    assert (loss.grad == 0).all()


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_nan_in_masked_slot_does_not_leak(mode):
    loss = LOSS.clone()
    loss[1, 1] = float("nan")
    loss[2, 0] = float("inf")
    assert torch.isfinite(agg_loss(loss, MASK, mode))


def test_unknown_mode_lists_the_known_ones():
    with pytest.raises(ValueError, match="seq-mean-token-sum-norm"):
        agg_loss(LOSS, MASK, "seq-mean")


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), B=st.integers(1, 6), L=st.integers(1, 7), mode=st.sampled_from(LOSS_AGG_MODES))
def test_agg_loss_matches_loop_reference(seed, B, L, mode):
    rng = random.Random(seed)
    loss = [[rng.uniform(-3, 3) for _ in range(L)] for _ in range(B)]
    mask = [[rng.random() < 0.6 for _ in range(L)] for _ in range(B)]
    got = agg_loss(torch.tensor(loss, dtype=F64), torch.tensor(mask), mode).item()
    # 1e-6: the brief's float64 tolerance; seq-mean-token-mean also carries verl's 1e-8
    assert got == pytest.approx(ref.agg_loss(loss, mask, mode), rel=1e-6, abs=1e-6)
    got32 = agg_loss(torch.tensor(loss), torch.tensor(mask).float(), mode).item()
    assert got32 == pytest.approx(ref.agg_loss(loss, mask, mode), rel=1e-4, abs=1e-5)


def test_masked_mean_and_var_hand_worked():
    x = torch.tensor([[1.0, 3.0, 100.0], [5.0, 0.0, 0.0]], dtype=F64)
    m = torch.tensor([[True, True, False], [True, False, False]])
    # row 0: {1, 3} mean 2, unbiased var 2, biased var 1; row 1: {5} -> var 0 (undefined)
    torch.testing.assert_close(masked_mean(x, m, dim=-1), torch.tensor([2.0, 5.0], dtype=F64))
    torch.testing.assert_close(masked_var(x, m, dim=-1), torch.tensor([2.0, 0.0], dtype=F64))
    torch.testing.assert_close(masked_var(x, m, dim=-1, unbiased=False), torch.tensor([1.0, 0.0], dtype=F64))
    # all three: {1, 3, 5} mean 3, unbiased var 4
    assert masked_mean(x, m).item() == 3.0 and masked_var(x, m).item() == 4.0
    assert masked_mean(x, torch.zeros_like(m)).item() == 0.0
