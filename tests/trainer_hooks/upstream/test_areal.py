"""trainer_hooks.losses.a3po under ``compat="areal"`` against the real AReaL (areal 1.0.4,
whose ``areal/utils/functional/functional.py`` is byte-identical to AReaL @ 4aef98d8):
``ppo_actor_loss_fn`` with and without rejection sampling (mask / clamp, token / sequence
level, mean / sum / max), and A-3PO's proximal approximation against AReaL's loglinear one
(derived from its source: the module holding it imports AReaL's whole trainer stack).

AReaL computes the behaviour weight in float32 even for float64 inputs; ours keeps
float64, so with rejection sampling the two agree to ~1e-8, not to float64 rounding.
"""

from __future__ import annotations

import pytest
import torch

from tests.trainer_hooks.upstream.upstreams import F64, ragged_batch, upstream
from trainer_hooks.losses import a3po as P

functional = upstream("areal.utils.functional", "areal")
cli_args = upstream("areal.api.cli_args", "areal")

SEEDS = range(6)
REJECTION = [
    None,
    ("mask", "token", "mean"),
    ("clamp", "token", "mean"),
    ("mask", "sequence", "mean"),
    ("clamp", "sequence", "mean"),
    ("mask", "sequence", "sum"),
    ("clamp", "sequence", "max"),
]


def decoupled_batch(seed):
    old, new, adv, mask = ragged_batch(seed, empty_row=False)
    g = torch.Generator().manual_seed(seed + 100)
    prox = old + 0.6 * torch.randn(*old.shape, generator=g, dtype=F64)
    new = prox + 0.3 * torch.randn(*old.shape, generator=g, dtype=F64)
    return old, prox, new, adv, mask


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rejection", REJECTION)
@pytest.mark.parametrize("c_clip", [None, 3.0])
@pytest.mark.parametrize("lower", [None, 0.6])
def test_decoupled_loss_equals_areals_ppo_actor_loss(seed, rejection, c_clip, lower):
    old, prox, new, adv, mask = decoupled_batch(seed)
    config = None
    ours_kw = {}
    if rejection is not None:
        action, level, agg = rejection
        config = cli_args.RejectionSamplingConfig(action=action, level=level, agg=agg, upper=1.6, lower=lower)
        ours_kw = dict(
            rejection=action, rejection_level=level, rejection_agg=agg, rejection_upper=1.6, rejection_lower=lower
        )
    new_a, new_o = new.clone().requires_grad_(True), new.clone().requires_grad_(True)
    theirs, _ = functional.ppo_actor_loss_fn(
        new_a, prox, old, adv, 0.2, mask, eps_clip_higher=0.28, c_clip=c_clip, rejection_sampling=config
    )
    ours, _ = P.decoupled_ppo_loss(
        old,
        new_o,
        adv,
        mask,
        "token-mean",
        proximal_log_prob=prox,
        clip_ratio_low=0.2,
        clip_ratio_high=0.28,
        clip_ratio_c=c_clip,
        compat="areal",
        **ours_kw,
    )
    tol = dict(rtol=1e-6, atol=1e-6) if rejection is not None else dict(rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(ours, theirs.to(F64), **tol)
    theirs.backward()
    ours.backward()
    torch.testing.assert_close(new_o.grad, new_a.grad, **tol)


def areal_loglinear_proximal(old, new, versions, current):
    """AReaL @ 4aef98d8, areal/trainer/ppo/actor.py::compute_prox_logp_approximations
    (method "loglinear"), derived from its source: that module imports AReaL's trainer stack
    (datasets, swanlab, ...), which the 'upstream' extra does not install.

        v_proximal = current - 1;  diff = current - v_behave;  gap = v_proximal - v_behave
        alpha = gap / diff  where diff > 0 and v_behave >= 0, else 0;  alpha = clamp(alpha, 0, 1)
        log p_prox = old + alpha * (new - old)       (new = logprobs.detach())

    i.e. with staleness d = diff the weight of the behaviour policy is 1 - (d - 1) / d = 1 / d,
    and 1 for fresh data (d <= 0) and prompt tokens (v < 0)."""
    v = versions.to(F64)
    diff, gap = float(current) - v, float(current - 1) - v
    alpha = torch.where((diff > 0) & (versions >= 0), gap / torch.where(diff > 0, diff, 1.0), 0.0).clamp(0.0, 1.0)
    return old + alpha * (new.detach() - old)


def test_areal_loglinear_derivation_by_hand():
    # d = 1: alpha 0 -> prox = old; d = 4: alpha 3/4 -> old + 0.75 (new - old); fresh / prompt: old
    old, new = torch.tensor([[-1.0, -1.0, -1.0, -1.0]], dtype=F64), torch.tensor([[-0.2] * 4], dtype=F64)
    prox = areal_loglinear_proximal(old, new, torch.tensor([[8, 5, 9, -1]]), 9)
    assert prox[0].tolist() == pytest.approx([-1.0, -1.0 + 0.75 * 0.8, -1.0, -1.0])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("staleness", [[0, 1, 2, 5], [1, 1, 1, 1], [3, 0, 7, 1]])
def test_a3po_areal_preset_equals_areals_loss_on_its_loglinear_proximal(seed, staleness):
    old, _, new, adv, mask = decoupled_batch(seed)
    rows = old.shape[0]
    current = 9
    versions = torch.tensor([current - staleness[i % len(staleness)] for i in range(rows)])
    token_versions = torch.where(mask, versions[:, None], -1)
    prox = areal_loglinear_proximal(old, new, token_versions, current)
    new_a, new_o = new.clone().requires_grad_(True), new.clone().requires_grad_(True)
    theirs, _ = functional.ppo_actor_loss_fn(new_a, prox, old, adv, 0.2, mask)
    ours, _ = P.a3po_policy_loss(
        old, new_o, adv, mask, behaviour_versions=versions, current_version=current, compat="areal"
    )
    torch.testing.assert_close(ours, theirs.to(F64), rtol=1e-12, atol=1e-14)
    theirs.backward()
    ours.backward()
    torch.testing.assert_close(new_o.grad, new_a.grad, rtol=1e-12, atol=1e-14)
