"""agg_loss (verl's modes, global-batch arguments, both verl versions of sum-norm) and the masked moments."""

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
        # verl b178a3cd sums the row sums (it does not average them): (6 + 4) / L = 3
        ("seq-mean-token-sum-norm", 10.0 / 3),
        # 1 + 2 + 3 + 4
        ("token-sum", 10.0),
    ],
)
def test_agg_loss_hand_worked(mode, expected):
    assert agg_loss(LOSS, MASK, mode).item() == pytest.approx(expected, rel=1e-8)


def test_sum_norm_uses_the_given_constant_scale():
    # (6 + 4) / 10
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", loss_scale_factor=10).item() == pytest.approx(1.0)


def test_sum_norm_of_verl_0_9_1_averages_the_rows():
    # (6 + 4) / 2 non-empty rows / 3, and / 10 with the constant given
    for kwargs in ({"seq_sum_norm": "rows"}, {"compat": "verl-0.9.1"}):
        assert agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", **kwargs).item() == pytest.approx(5.0 / 3)
    rows = agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", loss_scale_factor=10, compat="verl-0.9.1")
    assert rows.item() == pytest.approx(0.5)
    # an explicit argument wins over the preset
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", seq_sum_norm="batch", compat="verl-0.9.1").item() == (
        pytest.approx(10.0 / 3)
    )


def test_unknown_compat_and_seq_sum_norm_are_errors_naming_them():
    with pytest.raises(
        ValueError, match="compat='trl' is not a preset.*known: 'verl', 'verl-0.9.1', 'retrain', 'areal'"
    ):
        agg_loss(LOSS, MASK, "token-mean", compat="trl")
    with pytest.raises(ValueError, match="seq_sum_norm"):
        agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", seq_sum_norm="mean")


@pytest.mark.parametrize(
    "mode, kwargs, expected",
    [
        # verl: masked sum / global count * dp_size
        ("token-mean", {"batch_num_tokens": 8, "dp_size": 2}, 10.0 / 8 * 2),
        ("seq-mean-token-sum", {"global_batch_size": 4, "dp_size": 2}, 10.0 / 4 * 2),
        ("seq-mean-token-mean", {"global_batch_size": 4, "dp_size": 2}, 6.0 / 4 * 2),
        ("token-sum", {"dp_size": 2}, 20.0),
        ("seq-mean-token-sum-norm", {"global_batch_size": 4, "dp_size": 2, "compat": "verl-0.9.1"}, 10.0 / 4 * 2 / 3),
        # b178a3cd's sum-norm ignores dp_size and global_batch_size
        ("seq-mean-token-sum-norm", {"global_batch_size": 4, "dp_size": 2}, 10.0 / 3),
    ],
)
def test_global_batch_counts_and_dp_size_as_verl(mode, kwargs, expected):
    assert agg_loss(LOSS, MASK, mode, **kwargs).item() == pytest.approx(expected, rel=1e-8)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_data_parallel_without_the_global_count_is_an_error(mode):
    with pytest.raises(ValueError, match="required for .* when dp_size > 1"):
        agg_loss(LOSS, MASK, mode, dp_size=2)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_micro_batches_with_global_counts_add_up_to_the_whole_batch(mode):
    torch.manual_seed(0)
    loss = torch.randn(6, 5, dtype=F64)
    mask = torch.rand(6, 5) < 0.6
    mask[2] = False  # an empty row
    whole = agg_loss(loss, mask, mode, compat="verl-0.9.1")
    counts = {"batch_num_tokens": mask.sum(), "global_batch_size": mask.any(-1).sum()}
    parts = sum(agg_loss(loss[i : i + 2], mask[i : i + 2], mode, compat="verl-0.9.1", **counts) for i in (0, 2, 4))
    assert parts.item() == pytest.approx(whole.item(), rel=1e-12)


def test_mismatched_shapes_are_an_error():
    with pytest.raises(ValueError, match=r"loss_mat \(3,\) and loss_mask \(3, 3\) must both be \[B, L\]"):
        agg_loss(LOSS[:, 0], MASK, "token-mean")


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


def test_every_loss_takes_verls_global_batch_info():
    from trainer_hooks.registry import get_policy_loss

    torch.manual_seed(1)
    old, new = -torch.rand(4, 6, dtype=F64), -torch.rand(4, 6, dtype=F64)
    adv, mask = torch.randn(4, 6, dtype=F64), torch.rand(4, 6) < 0.7
    mask[0, 0] = True
    local, _ = get_policy_loss("ppo")(old, new, adv, mask, "token-mean")
    info = {"dp_size": 2, "batch_num_tokens": 2 * mask.sum(), "global_batch_size": 8}
    shared, _ = get_policy_loss("ppo")(old, new, adv, mask, "token-mean", global_batch=info)
    assert shared.item() == pytest.approx(local.item(), rel=1e-12)  # half the tokens here, times two ranks
    with pytest.raises(ValueError, match=r"global_batch: unknown key\(s\) \['dp'\]"):
        get_policy_loss("ppo")(old, new, adv, mask, "token-mean", global_batch={"dp": 2})
