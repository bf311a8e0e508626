"""SmallGain–KL allocator: knapsack, hand-worked steps, loop reference, invariants,
rollback, adaptive budget, application options and telemetry."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer_hooks import allocator as AL
from trainer_hooks.losses.gspo import gspo_token_policy_loss

try:  # tests/trainer_hooks may or may not be a package
    from . import loop_reference as ref
except ImportError:  # pragma: no cover - depends on the rootdir layout
    import loop_reference as ref

HYPOTHESIS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
F64 = torch.float64


def t(values, dtype=F64):
    return torch.tensor(values, dtype=dtype)


# ---------------------------------------------------------------------------------------
# Fractional knapsack
# ---------------------------------------------------------------------------------------


def test_knapsack_hand_worked():
    # order by score: item 0 (cost 0.2, left 0.3), item 2 (cost 0.4 -> 0.3/0.4 = 0.75), item 1 -> 0
    frac = AL.fractional_knapsack(t([3.0, 1.0, 2.0]), t([0.2, 0.5, 0.4]), 0.5, torch.ones(3, dtype=torch.bool))
    torch.testing.assert_close(frac, t([1.0, 0.0, 0.75]))
    # zero-cost items are funded only while budget remains when their turn comes
    on = torch.ones(3, dtype=torch.bool)
    torch.testing.assert_close(
        AL.fractional_knapsack(t([3.0, 2.0, 1.0]), t([0.6, 0.0, 0.0]), 0.5, on), t([0.5 / 0.6, 0.0, 0.0])
    )
    torch.testing.assert_close(
        AL.fractional_knapsack(t([3.0, 2.0, 1.0]), t([0.6, 0.0, 0.0]), 1.0, on), t([1.0, 1.0, 1.0])
    )
    # inactive items get nothing and spend nothing: item 0 skipped, item 2 funded fully
    active = torch.tensor([False, True, True])
    torch.testing.assert_close(
        AL.fractional_knapsack(t([3.0, 1.0, 2.0]), t([0.2, 0.5, 0.4]), 0.5, active), t([0.0, 0.2, 1.0])
    )


@HYPOTHESIS
@given(seed=st.integers(0, 2**31), G=st.integers(1, 12), budget=st.floats(0.0, 3.0))
def test_knapsack_matches_greedy_loop(seed, G, budget):
    rng = random.Random(seed)
    score = [rng.uniform(0, 5) for _ in range(G)]
    cost = [rng.choice([0.0, rng.uniform(0, 1)]) for _ in range(G)]
    active = [rng.random() < 0.8 for _ in range(G)]
    frac = AL.fractional_knapsack(t(score), t(cost), budget, torch.tensor(active))
    torch.testing.assert_close(frac, t(ref.fractional_knapsack(score, cost, budget, active)), rtol=1e-9, atol=1e-9)
    assert (frac * t(cost)).sum().item() <= budget + 1e-12


# ---------------------------------------------------------------------------------------
# The allocator
# ---------------------------------------------------------------------------------------


def two_group_step_inputs():
    # group 0: A = [2, 2], log-ratio 0.1 -> value 4, cost 0.01, score ~400
    # group 1: A = [1],    log-ratio 0.1 -> value 1, cost 0.01, score ~100;  last token: no group
    adv = t([[2.0, 2.0, 1.0, 5.0]])
    log_ratio = t([[0.1, 0.1, 0.1, 3.0]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    groups = torch.tensor([[0, 0, 1, -1]])
    return adv, log_ratio, mask, groups


def test_three_steps_hand_worked():
    al = AL.SmallGainKLAllocator(2, rho=0.5, dtype=F64)
    inputs = two_group_step_inputs()
    # both costs equal their mean -> c_hat = 1 (up to eps). rho * B = 0.5 * 0.2 = 0.1.
    # step 1: up = 0.1 each, dKL = 0.1 each; group 0 takes the whole budget -> [1.1, 1.0]
    s1 = al.step(*inputs, budget=0.2)
    torch.testing.assert_close(s1.lam, t([1.1, 1.0]))
    assert s1.spent.item() == pytest.approx(0.1)
    # step 2: group 0 proposes 1.21, up 0.11, dKL = 0.11 / 1.1 = 0.1 -> funded; group 1 again 0
    s2 = al.step(*inputs, budget=0.2)
    torch.testing.assert_close(s2.lam, t([1.21, 1.0]))
    # step 3: group 0 capped at 1.25: up 0.04, dKL 0.04 / 1.21; group 1 gets the rest:
    #   frac = (0.1 - 0.04 / 1.21) / 0.1 -> lambda_1 = 1 + 0.1 * frac
    s3 = al.step(*inputs, budget=0.2)
    frac1 = (0.1 - 0.04 / 1.21) / 0.1
    torch.testing.assert_close(s3.lam, t([1.25, 1.0 + 0.1 * frac1]))
    assert s3.spent.item() == pytest.approx(0.1)
    # per-token multipliers: the ungrouped token gets 1
    torch.testing.assert_close(s3.token_lambda, t([[1.25, 1.25, 1.0 + 0.1 * frac1, 1.0]]))
    tel = s3.telemetry
    assert tel["budget_global"].item() == pytest.approx(0.1) and tel["spent_global"].item() == pytest.approx(0.1)
    assert tel["alloc:group:0"].item() == pytest.approx(1.25)
    assert tel["cost:group:1"].item() == pytest.approx(0.01)
    assert tel["score:group:0"].item() == pytest.approx(4 / 0.01, rel=1e-6)
    assert all(v.dim() == 0 for v in tel.values())


def random_allocator_inputs(rng: random.Random, G: int):
    B, L = rng.randint(1, 4), rng.randint(1, 8)
    adv = [[rng.gauss(0, 1) for _ in range(L)] for _ in range(B)]
    log_ratio = [[rng.choice([0.0, rng.gauss(0, 0.1)]) for _ in range(L)] for _ in range(B)]
    mask = [[rng.random() < 0.8 for _ in range(L)] for _ in range(B)]
    groups = [[rng.randint(-1, G - 1) for _ in range(L)] for _ in range(B)]
    return adv, log_ratio, mask, groups


@HYPOTHESIS
@given(seed=st.integers(0, 2**31), G=st.integers(1, 6), steps=st.integers(1, 4))
def test_allocator_matches_loop_reference_and_keeps_its_invariants(seed, G, steps):
    rng = random.Random(seed)
    al = AL.SmallGainKLAllocator(G, dtype=F64)
    loop = ref.Allocator(G)
    for _ in range(steps):
        adv, log_ratio, mask, groups = random_allocator_inputs(rng, G)
        budget = rng.choice([0.0, rng.uniform(0, 1), 5.0])
        before = al.lam.clone()
        out = al.step(t(adv), t(log_ratio), torch.tensor(mask), torch.tensor(groups), budget)
        lam_ref, spent_ref = loop.step(adv, log_ratio, mask, groups, budget)
        torch.testing.assert_close(out.lam, t(lam_ref), rtol=1e-9, atol=1e-9)
        assert out.spent.item() == pytest.approx(spent_ref, rel=1e-9, abs=1e-9)
        assert out.spent.item() <= 0.7 * budget + 1e-9
        assert ((out.lam >= 0.8 - 1e-12) & (out.lam <= 1.25 + 1e-12)).all()
        assert ((out.lam - before).abs() <= 0.10 * before + 1e-12).all()


def test_groups_without_tokens_keep_their_state():
    al = AL.SmallGainKLAllocator(3, dtype=F64)
    adv, log_ratio, mask, groups = two_group_step_inputs()
    al.step(adv, log_ratio, mask, groups, budget=1.0)
    assert al.lam[2].item() == 1.0 and al.score[2].item() == 0.0 and not al.seen[2]


def test_unfunded_groups_relax_toward_the_target():
    al = AL.SmallGainKLAllocator(2, dtype=F64)
    inputs = two_group_step_inputs()
    for _ in range(3):
        al.step(*inputs, budget=10.0)  # ample: both widen to 1.1, 1.21, 1.25
    torch.testing.assert_close(al.lam, t([1.25, 1.25]))
    al.step(*inputs, budget=0.0)  # nothing to spend: both relax by <= 10% toward 1
    torch.testing.assert_close(al.lam, t([1.125, 1.125]))
    narrow = AL.SmallGainKLAllocator(2, unfunded_target=0.8, dtype=F64)
    narrow.step(*inputs, budget=0.0)
    torch.testing.assert_close(narrow.lam, t([0.9, 0.9]))  # losers may be narrowed toward lam_min


def test_rollback_restores_multipliers_and_decays_scores():
    al = AL.SmallGainKLAllocator(2, rho=0.5, dtype=F64)
    inputs = two_group_step_inputs()
    al.step(*inputs, budget=0.2)
    al.step(*inputs, budget=0.2)  # lam [1.21, 1.0]
    score = al.score.clone()
    assert al.accept_or_rollback(AL.kl_guard(0.01, kl_target=0.02)).item() is True
    torch.testing.assert_close(al.lam, t([1.21, 1.0]))
    assert al.accept_or_rollback(AL.kl_guard(0.05, kl_target=0.02)).item() is False
    torch.testing.assert_close(al.lam, t([1.1, 1.0]))  # group 0 changed -> restored
    torch.testing.assert_close(al.score, t([score[0].item() * 0.5, score[1].item()]))  # only it decays
    assert al.telemetry()["rollbacks"].item() == 1
    # explicit implicated groups
    al.step(*inputs, budget=0.2)
    al.accept_or_rollback(False, implicated=torch.tensor([False, True]))
    assert al.lam[0].item() == pytest.approx(1.21)


def test_adaptive_budget_from_contraction_margin():
    assert AL.contraction_margin(0.01, kl_target=0.02).item() == pytest.approx(0.5)
    assert AL.contraction_margin(0.05, kl_target=0.02).item() == 0.0
    budgets = [AL.budget_from_margin(m, 2.0).item() for m in (1.0, 0.5, 0.25, 0.0)]
    assert budgets == pytest.approx([2.0, 2.0, 1.0, 0.0])  # full at margin >= 0.5, linear below
    assert AL.budget_from_margin(0.0, 2.0, min_fraction=0.1).item() == pytest.approx(0.2)
    # zero margin -> zero budget -> nothing widens
    al = AL.SmallGainKLAllocator(2, dtype=F64)
    al.step(*two_group_step_inputs(), budget=AL.budget_from_margin(0.0, 1.0))
    assert (al.lam == 1.0).all() and al.spent.item() == 0.0
    assert AL.kl_guard(0.021, 0.02, tolerance=0.1).item() and not AL.kl_guard(0.023, 0.02, tolerance=0.1).item()


def test_position_groups():
    mask = torch.tensor([[1, 1, 0, 1, 1, 1, 1]], dtype=torch.bool)
    # positions among masked tokens: 0 1 - 2 3 4 5; bucket 2 -> 0 0 - 1 1 2 2, capped at G - 1 = 1
    assert AL.position_group_ids(mask, num_groups=2, bucket_size=2).tolist() == [[0, 0, -1, 1, 1, 1, 1]]
    assert AL.position_group_ids(mask, num_groups=8).tolist() == [[0, 1, -1, 2, 3, 4, 5]]


def test_application_options():
    lam = t([[1.2, 0.8, 1.0]])
    assert AL.apply_allocation(lam, "clip") == (lam, None)
    assert AL.apply_allocation(lam, "lr") == (lam, None)[::-1]
    clip, grad = AL.apply_allocation(lam, "mixture", mix=0.25)
    torch.testing.assert_close(clip * grad, lam)
    torch.testing.assert_close(clip, lam**0.25)
    with pytest.raises(ValueError, match="mixture"):
        AL.apply_allocation(lam, "both")
    # scale_grad: value unchanged bit for bit, gradient multiplied
    x = t([[0.3, -1.7, 2.0]]).requires_grad_(True)
    y = AL.scale_grad(x, lam)
    assert torch.equal(y, x.detach())
    y.sum().backward()
    torch.testing.assert_close(x.grad, lam)


def test_allocator_drives_gspo_token():
    g = torch.Generator().manual_seed(0)
    B, L = 3, 6
    lp = -torch.rand(B, L, generator=g, dtype=F64)
    old = lp + 1e-3 * torch.randn(B, L, generator=g, dtype=F64)
    adv = torch.randn(B, 1, generator=g, dtype=F64).expand(B, L)
    mask = torch.ones(B, L, dtype=torch.bool)
    groups = AL.position_group_ids(mask, num_groups=3, bucket_size=2)
    al = AL.SmallGainKLAllocator(3, dtype=F64)
    step = al.step(adv, lp - old, mask, groups, budget=0.3)
    assert not torch.allclose(step.token_lambda, torch.ones_like(step.token_lambda))
    # Option B: per-token gradient shaping; GSPO-token's gradient is token-local so it scales exactly
    clip, grad_scale = AL.apply_allocation(step.token_lambda, "lr")
    x1, x2 = lp.clone().requires_grad_(True), lp.clone().requires_grad_(True)
    gspo_token_policy_loss(old, AL.scale_grad(x1, grad_scale), adv, mask, clip_ratio_high=1.0)[0].backward()
    gspo_token_policy_loss(old, x2, adv, mask, clip_ratio_high=1.0)[0].backward()
    torch.testing.assert_close(x1.grad, x2.grad * step.token_lambda)
    # Option A: clip shaping goes through the loss's clip_scale
    clip, _ = AL.apply_allocation(step.token_lambda, "clip")
    shaped, tel = gspo_token_policy_loss(old, lp, adv, mask, clip_scale=clip)
    assert torch.isfinite(shaped) and tel["clip_scale_max"].item() == pytest.approx(step.token_lambda.max().item())


def test_telemetry_per_group_keys_are_capped():
    al = AL.SmallGainKLAllocator(100, max_groups=64)
    tel = al.telemetry()
    assert {"budget_global", "spent_global", "alloc_mean", "alloc_min", "alloc_max", "rollbacks"} <= set(tel)
    assert not any(k.startswith("score:group:") for k in tel)
    assert len([k for k in AL.SmallGainKLAllocator(3).telemetry() if ":group:" in k]) == 9


def test_state_dict_round_trip():
    al = AL.SmallGainKLAllocator(2, dtype=F64)
    al.step(*two_group_step_inputs(), budget=1.0)
    other = AL.SmallGainKLAllocator(2, dtype=F64)
    other.load_state_dict(al.state_dict())
    a = al.step(*two_group_step_inputs(), budget=1.0)
    b = other.step(*two_group_step_inputs(), budget=1.0)
    torch.testing.assert_close(a.lam, b.lam)


def test_invalid_configuration():
    with pytest.raises(ValueError, match="rho"):
        AL.SmallGainKLAllocator(2, rho=0.0)
    with pytest.raises(ValueError, match="lam_min"):
        AL.SmallGainKLAllocator(2, lam_min=1.1)
