"""A-3PO: staleness alpha, the approximate proximal policy and the decoupled PPO loss."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer_hooks import registry
from trainer_hooks.losses import a3po as P
from trainer_hooks.losses.ppo import ppo_policy_loss

HYPOTHESIS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def t(values, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype)


# ---------------------------------------------------------------------------------------
# A plain per-token loop reference (floats only)
# ---------------------------------------------------------------------------------------


def ref_token_loss(old, new, adv, version, current, *, low, high, c, cap, fresh_alpha):
    """(loss, d loss / d new) of one token; prox and w are constants (stop-gradient)."""
    d = current - version
    if version < 0:
        alpha = 1.0
    elif d >= 1:
        alpha = 1.0 / d
    else:
        alpha = fresh_alpha
    prox = alpha * old + (1 - alpha) * new
    w = math.exp(prox - old)
    if cap is not None and w > cap:
        return 0.0, 0.0
    r = math.exp(new - prox)
    unclipped, clipped = -adv * r, -adv * min(max(r, 1 - low), 1 + high)
    loss, grad = (unclipped, -adv * r) if unclipped >= clipped else (clipped, 0.0)
    if c is not None and adv < 0 and -adv * c < loss:
        loss, grad = -adv * c, 0.0
    return w * loss, w * grad


def ref_loss(rows, current, mode, **kw):
    """rows: per sequence a list of (old, new, adv, version); returns (loss, grads)."""
    per_token = [[ref_token_loss(o, n, a, v, current, **kw) for o, n, a, v in row] for row in rows]
    grads = [[g for _, g in row] for row in per_token]
    n_tok = sum(len(r) for r in rows)
    n_rows = sum(1 for r in rows if r)
    if mode == "token-mean":
        total = sum(l for row in per_token for l, _ in row)
        return total / max(n_tok, 1), [[g / max(n_tok, 1) for g in row] for row in grads]
    # seq-mean-token-mean
    total = sum(sum(l for l, _ in row) / len(row) for row in per_token if row)
    return total / max(n_rows, 1), [[g / len(row) / max(n_rows, 1) for g in row] for row in grads]


# ---------------------------------------------------------------------------------------
# alpha and the proximal policy
# ---------------------------------------------------------------------------------------


def test_staleness_alpha_by_hand():
    # current 5: versions [5, 4, 3, 1, 7, -1] -> d [0, 1, 2, 4, -2, -] -> alpha [0, 1, 1/2, 1/4, 0, 1]
    versions = torch.tensor([5, 4, 3, 1, 7, -1])
    alpha = P.staleness_alpha(versions, 5, dtype=torch.float64)
    torch.testing.assert_close(alpha, t([0.0, 1.0, 0.5, 0.25, 0.0, 1.0]))


def test_fresh_alpha_setting_covers_zero_and_negative_staleness():
    versions = torch.tensor([5, 4, 7])
    torch.testing.assert_close(P.staleness_alpha(versions, 5, fresh_alpha=1.0, dtype=torch.float64), t([1.0, 1.0, 1.0]))


def test_staleness_alpha_divides_in_floating_point():
    # the "integer division" failure mode: 1 // 3 would be 0
    alpha = P.staleness_alpha(torch.tensor([2], dtype=torch.int32), torch.tensor(5))
    assert alpha.dtype == torch.float32 and alpha.item() == pytest.approx(1 / 3)


def test_proximal_log_prob_interpolates_and_carries_no_gradient():
    # old -2, new -1: alpha 1/2 -> -1.5; alpha 1 -> -2 (behaviour); alpha 0 -> -1 (current)
    new = t([-1.0, -1.0, -1.0]).requires_grad_(True)
    prox = P.approximate_proximal_log_prob(t([-2.0, -2.0, -2.0]), new, t([0.5, 1.0, 0.0]))
    torch.testing.assert_close(prox, t([-1.5, -2.0, -1.0]))
    assert not prox.requires_grad


def test_proximal_log_prob_is_sandwiched():
    torch.manual_seed(0)
    old, new, alpha = -torch.rand(100) * 5, -torch.rand(100) * 5, torch.rand(100)
    prox = P.approximate_proximal_log_prob(old, new, alpha)
    assert (prox >= torch.minimum(old, new) - 1e-6).all() and (prox <= torch.maximum(old, new) + 1e-6).all()


def test_float_versions_are_rejected():
    with pytest.raises(TypeError, match="integers"):
        P.a3po_policy_loss(
            t([[-1.0]]),
            t([[-1.0]]),
            t([[1.0]]),
            torch.ones(1, 1, dtype=torch.bool),
            behaviour_versions=t([1.0]),
            current_version=2,
        )


# ---------------------------------------------------------------------------------------
# The loss
# ---------------------------------------------------------------------------------------


def test_loss_by_hand():
    # token 0: old -2, new -1, A = +1, d = 2 -> alpha 1/2, prox -1.5: w = e^0.5 = 1.648721,
    #   r = e^0.5 > 1.2 -> clipped: l = w * -1.2 = -1.978466, no gradient
    # token 1: old -1, new -1.4, A = -1, d = 4 -> alpha 1/4, prox = -1 + 0.75 (-0.4) = -1.3:
    #   r = e^-0.1 = 0.904837 (inside [0.8, 1.2]), w = e^-0.3 = 0.740818, l = w r = 0.670320,
    #   dl/dnew = w r = 0.670320
    # token-mean: (-1.978466 + 0.670320) / 2 = -0.654073; grad [0, 0.335160]
    new = t([[-1.0, -1.4]]).requires_grad_(True)
    loss, tel = P.a3po_policy_loss(
        t([[-2.0, -1.0]]),
        new,
        t([[1.0, -1.0]]),
        torch.ones(1, 2, dtype=torch.bool),
        behaviour_versions=torch.tensor([[3, 1]]),
        current_version=5,
    )
    loss.backward()
    w0, l1 = math.exp(0.5), math.exp(-0.3) * math.exp(-0.1)
    assert loss.item() == pytest.approx((-1.2 * w0 + l1) / 2, rel=1e-9)
    torch.testing.assert_close(new.grad, t([[0.0, l1 / 2]]))
    assert tel["clipfrac_high"].item() == 0.5 and tel["clipfrac_low"].item() == 0.0
    assert tel["a3po_alpha_mean"].item() == pytest.approx(0.375)
    assert tel["a3po_staleness_mean"].item() == 3.0 and tel["a3po_staleness_max"].item() == 4.0
    assert tel["behav_weight_max"].item() == pytest.approx(w0)
    assert tel["approx_kl"].item() == pytest.approx((-0.5 + 0.1) / 2)  # mean(prox - new)


@pytest.mark.parametrize(
    ("fresh_alpha", "expected_loss", "expected_grad"),
    [(0.0, -2 * math.exp(0.5), -2 * math.exp(0.5)), (1.0, -2 * 1.2, 0.0)],
)
def test_fresh_data_under_both_fresh_alpha_settings(fresh_alpha, expected_loss, expected_grad):
    # d = 0, old -1, new -0.5, A = 2.
    # fresh_alpha 0: prox = new -> r = 1 (never clipped), w = e^0.5: l = -2 e^0.5, grad = -2 e^0.5
    # fresh_alpha 1: prox = old -> r = e^0.5 > 1.2 clipped, w = 1: l = -2.4, grad 0
    new = t([[-0.5]]).requires_grad_(True)
    loss, _ = P.a3po_policy_loss(
        t([[-1.0]]),
        new,
        t([[2.0]]),
        torch.ones(1, 1, dtype=torch.bool),
        behaviour_versions=torch.tensor([7]),
        current_version=7,
        fresh_alpha=fresh_alpha,
    )
    loss.backward()
    assert loss.item() == pytest.approx(expected_loss)
    assert new.grad.item() == pytest.approx(expected_grad)


@pytest.mark.parametrize(("clip_ratio_c", "expected"), [(None, math.exp(2.0)), (3.0, 3.0)])
def test_dual_clip_setting(clip_ratio_c, expected):
    # d = 1 -> prox = old: A = -1, r = e^2 = 7.389: plain PPO keeps 7.389, dual clip caps at c = 3
    loss, tel = P.a3po_policy_loss(
        t([[-2.0]]),
        t([[0.0]]),
        t([[-1.0]]),
        torch.ones(1, 1, dtype=torch.bool),
        behaviour_versions=torch.tensor([4]),
        current_version=5,
        clip_ratio_c=clip_ratio_c,
    )
    assert loss.item() == pytest.approx(expected)
    assert tel["clipfrac_dual"].item() == (0.0 if clip_ratio_c is None else 1.0)


def test_behaviour_weight_cap_drops_tokens_from_the_numerator():
    # same batch as test_loss_by_hand; cap 1.5 drops token 0 (w = 1.6487): (0 + 0.670320) / 2
    loss, tel = P.a3po_policy_loss(
        t([[-2.0, -1.0]]),
        t([[-1.0, -1.4]]),
        t([[1.0, -1.0]]),
        torch.ones(1, 2, dtype=torch.bool),
        behaviour_versions=torch.tensor([[3, 1]]),
        current_version=5,
        behav_imp_weight_cap=1.5,
    )
    assert loss.item() == pytest.approx(math.exp(-0.4) / 2)
    assert tel["behav_capped_frac"].item() == 0.5


# AReaL @ 4aef98d8, ppo_actor_loss_fn: without rejection sampling the loss is plain PPO
# against the proximal policy (no behaviour weight); with it, pg_loss *= behave_imp_weight,
# where action="clamp" clamps the weight into [lower or 0, upper] and action="mask" zeroes
# the token (its count stays in the denominator: loss_mask_count is taken before).
# One token: behav -1, prox -0.5, theta -0.4, A = 1: r = e^0.1 = 1.105171 (inside the
# clip), w = e^0.5 = 1.648721.
AREAL_TOKEN = dict(old=t([[-1.0]]), new=t([[-0.4]]), adv=t([[1.0]]), prox=t([[-0.5]]))


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, -math.exp(0.5) * math.exp(0.1)),  # ours: w always in the objective
        ({"compat": "areal"}, -math.exp(0.1)),  # AReaL: no rejection sampling, no w
        ({"behav_weight": "with_rejection"}, -math.exp(0.1)),
        ({"compat": "areal", "rejection": "clamp", "rejection_upper": 1.5}, -1.5 * math.exp(0.1)),
        ({"compat": "areal", "rejection": "clamp", "rejection_upper": 2.0}, -math.exp(0.5) * math.exp(0.1)),
        (
            {"compat": "areal", "rejection": "clamp", "rejection_upper": 5.0, "rejection_lower": 1.7},
            -1.7 * math.exp(0.1),
        ),
        ({"compat": "areal", "rejection": "mask", "rejection_upper": 1.5}, 0.0),
        ({"compat": "areal", "behav_imp_weight_cap": 1.5}, 0.0),
    ],
)
def test_areal_behaviour_weight_only_with_rejection_sampling_and_clamp_action(kwargs, expected):
    a = AREAL_TOKEN
    loss, tel = P.decoupled_ppo_loss(
        a["old"], a["new"], a["adv"], torch.ones(1, 1, dtype=torch.bool), proximal_log_prob=a["prox"], **kwargs
    )
    assert loss.item() == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_areal_sequence_level_rejection_uses_the_rows_geometric_mean_weight():
    # Row: behav [-1, -1], prox [-0.5, -1.1] -> log w [0.5, -0.1], mean 0.2: both tokens take
    # w = e^0.2 = 1.221403 (in bounds for upper 1.5, agg mean); with agg "max" the row's
    # metric is e^0.5 > 1.5, so "clamp" clamps e^0.2 into [0, 1.5] (unchanged) and "mask"
    # drops the row.
    old, prox = t([[-1.0, -1.0]]), t([[-0.5, -1.1]])
    new, adv, mask = prox.clone(), t([[1.0, 2.0]]), torch.ones(1, 2, dtype=torch.bool)  # r = 1

    def loss(**kw):
        return P.decoupled_ppo_loss(
            old,
            new,
            adv,
            mask,
            proximal_log_prob=prox,
            compat="areal",
            rejection_level="sequence",
            rejection_upper=1.5,
            **kw,
        )[0].item()

    assert loss(rejection="mask") == pytest.approx(-math.exp(0.2) * 3 / 2)
    assert loss(rejection="clamp", rejection_agg="max") == pytest.approx(-math.exp(0.2) * 3 / 2)
    assert loss(rejection="mask", rejection_agg="max") == 0.0
    with pytest.raises(ValueError, match="rejection_agg"):
        loss(rejection="mask", rejection_agg="median")
    with pytest.raises(ValueError, match="behav_imp_weight_cap or rejection"):
        loss(rejection="mask", behav_imp_weight_cap=2.0)


def test_areal_preset_of_a3po_uses_alpha_1_for_fresh_data():
    # d = 0: AReaL's loglinear approximation takes the behaviour policy as proximal (alpha 1)
    old, new = t([[-1.0]]), t([[-0.8]])
    kw = dict(behaviour_versions=torch.tensor([5]), current_version=5)
    _, ours = P.a3po_policy_loss(old, new, t([[1.0]]), torch.ones(1, 1, dtype=torch.bool), **kw)
    _, areal = P.a3po_policy_loss(old, new, t([[1.0]]), torch.ones(1, 1, dtype=torch.bool), compat="areal", **kw)
    assert ours["a3po_alpha_mean"].item() == 0.0 and areal["a3po_alpha_mean"].item() == 1.0
    assert areal["ratio_mean"].item() == pytest.approx(math.exp(0.2))


def test_a_per_token_loss_refuses_a_mismatched_advantage():
    mask = torch.ones(3, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"advantages must be \[B, L\] = \(3, 3\), got \(2, 3\)"):
        P.decoupled_ppo_loss(
            t([[0.0] * 3] * 3), t([[0.0] * 3] * 3), t([[1.0] * 3] * 2), mask, proximal_log_prob=t([[0.0] * 3] * 3)
        )


def test_one_step_staleness_is_standard_ppo():
    # d = 1 everywhere: alpha 1, prox = behaviour, w = 1 -> verl's vanilla PPO loss
    torch.manual_seed(1)
    old, new = -torch.rand(4, 6, dtype=torch.float64) * 2, -torch.rand(4, 6, dtype=torch.float64) * 2
    adv, mask = torch.randn(4, 6, dtype=torch.float64), torch.rand(4, 6) > 0.3
    ours, tel = P.a3po_policy_loss(old, new, adv, mask, behaviour_versions=torch.full((4,), 9), current_version=10)
    theirs, ref_tel = ppo_policy_loss(old, new, adv, mask, clip_ratio_c=None)
    torch.testing.assert_close(ours, theirs)
    for key in ("clipfrac_low", "clipfrac_high", "approx_kl", "ratio_mean", "ratio_max"):
        torch.testing.assert_close(tel[key], ref_tel[key])


def test_per_sequence_versions_broadcast_over_tokens():
    torch.manual_seed(2)
    old, new = -torch.rand(3, 4, dtype=torch.float64), -torch.rand(3, 4, dtype=torch.float64)
    adv, mask = torch.randn(3, 4, dtype=torch.float64), torch.ones(3, 4, dtype=torch.bool)
    seq = torch.tensor([1, 5, 8])
    a, _ = P.a3po_policy_loss(old, new, adv, mask, behaviour_versions=seq, current_version=9)
    b, _ = P.a3po_policy_loss(old, new, adv, mask, behaviour_versions=seq[:, None].expand(3, 4), current_version=9)
    torch.testing.assert_close(a, b)


def test_staler_data_gets_ratios_closer_to_one():
    old, new = t([[-2.0]]), t([[-1.0]])
    ratios = []
    for version in (9, 8, 6, 1):  # d = 1, 2, 4, 9
        _, tel = P.a3po_policy_loss(
            old,
            new,
            t([[1.0]]),
            torch.ones(1, 1, dtype=torch.bool),
            behaviour_versions=torch.tensor([version]),
            current_version=10,
        )
        ratios.append(tel["ratio_max"].item())
    assert ratios == sorted(ratios, reverse=True)
    assert ratios[2] == pytest.approx(math.exp(1.0 / 4))  # r = (pi / pi_behav)^(1/d)


def test_future_versions_are_reported():
    # d = [7, -2, 0]: only the -2 is a version from the future
    _, tel = P.a3po_policy_loss(
        t([[-1.0, -1.0, -1.0]]),
        t([[-1.0, -1.0, -1.0]]),
        t([[1.0, 1.0, 1.0]]),
        torch.ones(1, 3, dtype=torch.bool),
        behaviour_versions=torch.tensor([[3, 12, 10]]),
        current_version=10,
    )
    assert tel["a3po_future_frac"].item() == pytest.approx(1 / 3)


def test_registry_serves_a3po():
    assert registry.get_policy_loss("a3po") is P.a3po_policy_loss


def test_masked_tokens_and_empty_batches_are_finite():
    new = t([[-1.0, -float("inf")], [-float("inf"), -float("inf")]]).requires_grad_(True)
    old = t([[-1.5, -float("inf")], [float("nan"), -float("inf")]])
    mask = torch.tensor([[True, False], [False, False]])
    adv = t([[1.0, 9.0], [9.0, 9.0]])
    loss, tel = P.a3po_policy_loss(
        old, new, adv, mask, behaviour_versions=torch.tensor([[2, -1], [-1, -1]]), current_version=4
    )
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(new.grad).all()
    assert all(torch.isfinite(v) for v in tel.values())
    nothing = torch.zeros(2, 2, dtype=torch.bool)
    empty, tel = P.a3po_policy_loss(
        old, new.detach(), adv, nothing, behaviour_versions=torch.tensor([3, 3]), current_version=4
    )
    assert empty.item() == 0.0 and all(torch.isfinite(v) for v in tel.values())


def test_bfloat16_close_to_float32():
    torch.manual_seed(3)
    old, new = -torch.rand(8, 16) * 3, -torch.rand(8, 16) * 3
    adv, mask = torch.randn(8, 16), torch.rand(8, 16) > 0.2
    versions = torch.randint(0, 6, (8, 16))
    full, _ = P.a3po_policy_loss(old, new, adv, mask, behaviour_versions=versions, current_version=6)
    half, _ = P.a3po_policy_loss(
        old.bfloat16(), new.bfloat16(), adv.bfloat16(), mask, behaviour_versions=versions, current_version=6
    )
    assert half.dtype == torch.float32
    torch.testing.assert_close(half, full, atol=3e-2, rtol=3e-2)


# ---------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("clip_ratio_c", [None, 3.0])
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_decoupled_loss_gradcheck_float64(clip_ratio_c, mode):
    torch.manual_seed(4)
    old = -torch.rand(3, 5, dtype=torch.float64) * 2
    prox = old + 0.3 * torch.randn(3, 5, dtype=torch.float64)
    new = (prox + 0.1 * torch.randn(3, 5, dtype=torch.float64)).requires_grad_(True)
    adv = torch.randn(3, 5, dtype=torch.float64)
    mask = torch.rand(3, 5) > 0.3

    def fn(lp):
        return P.decoupled_ppo_loss(old, lp, adv, mask, mode, proximal_log_prob=prox, clip_ratio_c=clip_ratio_c)[0]

    assert torch.autograd.gradcheck(fn, (new,))


def test_a3po_gradcheck_float64_with_one_step_staleness():
    # d = 1 -> the proximal policy does not depend on log_prob, so finite differences apply
    torch.manual_seed(5)
    old = -torch.rand(3, 4, dtype=torch.float64) * 2
    new = (old + 0.1 * torch.randn(3, 4, dtype=torch.float64)).requires_grad_(True)
    adv, mask = torch.randn(3, 4, dtype=torch.float64), torch.rand(3, 4) > 0.2

    def fn(lp):
        return P.a3po_policy_loss(old, lp, adv, mask, behaviour_versions=torch.tensor([2, 2, 2]), current_version=3)[0]

    assert torch.autograd.gradcheck(fn, (new,))


def test_a3po_gradient_treats_the_approximation_as_a_constant_anchor():
    # For any staleness the gradient equals that of decoupled PPO with the proximal
    # log-prob frozen at its approximated value (the stop-gradient of the method).
    torch.manual_seed(6)
    old = -torch.rand(4, 5, dtype=torch.float64) * 2
    new = (old + 0.3 * torch.randn(4, 5, dtype=torch.float64)).requires_grad_(True)
    adv, mask = torch.randn(4, 5, dtype=torch.float64), torch.rand(4, 5) > 0.2
    versions = torch.randint(0, 8, (4, 5))
    loss, _ = P.a3po_policy_loss(old, new, adv, mask, behaviour_versions=versions, current_version=8)
    (grad,) = torch.autograd.grad(loss, new)
    prox = P.approximate_proximal_log_prob(old, new, P.staleness_alpha(versions, 8, dtype=torch.float64))
    frozen = new.detach().clone().requires_grad_(True)
    ref, _ = P.decoupled_ppo_loss(old, frozen, adv, mask, proximal_log_prob=prox)
    (ref_grad,) = torch.autograd.grad(ref, frozen)
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(grad, ref_grad)


# ---------------------------------------------------------------------------------------
# Against the loop reference
# ---------------------------------------------------------------------------------------


@st.composite
def ragged(draw):
    n = draw(st.integers(1, 5))
    rows = []
    for _ in range(n):
        k = draw(st.integers(0, 5))
        rows.append(
            [
                (
                    draw(st.floats(-4.0, -0.01)),
                    draw(st.floats(-4.0, -0.01)),
                    draw(st.sampled_from([-1.5, -0.5, 0.0, 0.4, 2.0])),
                    draw(st.integers(-1, 10)),
                )
                for _ in range(k)
            ]
        )
    return rows


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@HYPOTHESIS
@given(
    rows=ragged(),
    mode=st.sampled_from(["token-mean", "seq-mean-token-mean"]),
    clip=st.sampled_from([(0.2, 0.2), (0.2, 0.28)]),
    c=st.sampled_from([None, 3.0]),
    cap=st.sampled_from([None, 2.0]),
    fresh_alpha=st.sampled_from([0.0, 1.0]),
)
def test_loss_and_gradient_match_loop_reference(dtype, rows, mode, clip, c, cap, fresh_alpha):
    current = 8
    width = max(1, max(len(r) for r in rows))

    def column(i, fill, kind=dtype):
        return torch.tensor([[tok[i] for tok in r] + [fill] * (width - len(r)) for r in rows], dtype=kind)

    mask = torch.tensor([[True] * len(r) + [False] * (width - len(r)) for r in rows])
    new = column(1, -float("inf")).requires_grad_(True)
    loss, tel = P.a3po_policy_loss(
        column(0, float("nan")),
        new,
        column(2, 0.0),
        mask,
        mode,
        behaviour_versions=column(3, -1, torch.long),
        current_version=current,
        clip_ratio_low=clip[0],
        clip_ratio_high=clip[1],
        clip_ratio_c=c,
        behav_imp_weight_cap=cap,
        fresh_alpha=fresh_alpha,
    )
    (grad,) = torch.autograd.grad(loss, new)
    expected, expected_grad = ref_loss(
        rows, current, mode, low=clip[0], high=clip[1], c=c, cap=cap, fresh_alpha=fresh_alpha
    )
    tol = dict(atol=1e-6, rtol=1e-6) if dtype == torch.float64 else dict(atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(loss, torch.tensor(expected, dtype=dtype), **tol)
    padded_grad = torch.tensor([g + [0.0] * (width - len(g)) for g in expected_grad], dtype=dtype)
    torch.testing.assert_close(grad, padded_grad, **tol)
    assert all(torch.isfinite(v) for v in tel.values())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_runs_on_cuda_like_on_cpu():
    torch.manual_seed(7)
    old, new = -torch.rand(4, 6) * 2, -torch.rand(4, 6) * 2
    adv, mask, versions = torch.randn(4, 6), torch.rand(4, 6) > 0.2, torch.randint(0, 5, (4,))
    cpu, _ = P.a3po_policy_loss(old, new, adv, mask, behaviour_versions=versions, current_version=5)
    gpu, tel = P.a3po_policy_loss(
        old.cuda().bfloat16(),
        new.cuda().bfloat16(),
        adv.cuda(),
        mask.cuda(),
        behaviour_versions=versions.cuda(),
        current_version=5,
    )
    assert gpu.device.type == "cuda" and all(v.device.type == "cuda" for v in tel.values())
    torch.testing.assert_close(gpu.cpu(), cpu, atol=3e-2, rtol=3e-2)
