"""A*-PO: V*, advantage weights, the weighted-SFT loss, the sample schedule and the cache."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer_hooks import registry
from trainer_hooks.advantages import retrain
from trainer_hooks.losses import astar_po as A

HYPOTHESIS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def t(values, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype)


# ---------------------------------------------------------------------------------------
# A plain per-example loop reference of TinyZero's train step (lists and floats only)
# ---------------------------------------------------------------------------------------


def ref_vstar(rewards: list[float], beta: float) -> float:
    if beta <= 0:
        return max(rewards)
    top = max(rewards)
    return top + beta * math.log(sum(math.exp((r - top) / beta) for r in rewards) / len(rewards))


def ref_weights(advs: list[float], scheme: str, beta: float, adv_clip: float, normalize_weights: bool) -> list[float]:
    n = len(advs)
    if scheme == "exp":
        w = [math.exp(a / (beta + 1e-8)) for a in advs]
        m = sum(w) / n
        return [x / max(m, 1e-6) for x in w]
    mean = sum(advs) / n
    std = math.sqrt(sum((a - mean) ** 2 for a in advs) / (n - 1)) if n > 1 else 0.0
    spread = max(advs) > min(advs)
    normed = [max(-adv_clip, min(adv_clip, (a - mean) / (std + 1e-6))) if spread else 0.0 for a in advs]
    if scheme == "normalized_advantage":
        w = [min(5.0, max(0.1, x + 1.0)) for x in normed]
    else:
        w = [x + adv_clip for x in normed]
    if normalize_weights:
        m = sum(w) / n
        w = [x / max(m, 1e-6) for x in w]
    return w


def ref_loss(logprobs, ref_logprobs, advs, *, scheme, beta, adv_clip, normalize_weights, kl_coef, weight_kl, estimator):
    """Per-example mean over tokens, weighted, then the mean over examples (TinyZero)."""
    rows = [i for i, lp in enumerate(logprobs) if lp]
    if not rows:
        return 0.0
    weights = ref_weights([advs[i] for i in rows], scheme, beta, adv_clip, normalize_weights)
    total = 0.0
    for w, i in zip(weights, rows):
        ce = sum(-x for x in logprobs[i]) / len(logprobs[i])
        kls = []
        for p, q in zip(logprobs[i], ref_logprobs[i]):
            if estimator == "k1":
                kls.append(p - q)
            else:
                d = max(-20.0, min(20.0, q - p))
                kls.append(math.exp(d) - d - 1.0)
        kl = sum(kls) / len(kls)
        total += w * (ce + kl_coef * kl) if weight_kl else w * ce + kl_coef * kl
    return total / max(len(rows), 1)


# ---------------------------------------------------------------------------------------
# V*
# ---------------------------------------------------------------------------------------


def test_smooth_vstar_by_hand():
    # [1, 0], beta 0.5: 0.5 * log((e^2 + e^0) / 2) = 0.5 * log(4.194528) = 0.716890
    # [0.3, 0.3]: a constant group's V* is that constant; singleton [0.8] -> 0.8
    v = A.smooth_vstar(t([1.0, 0.0, 0.3, 0.3, 0.8]), torch.tensor([4, 4, 2, 2, 9]))
    expected = 0.5 * math.log((math.e**2 + 1.0) / 2.0)
    torch.testing.assert_close(v, t([expected, expected, 0.3, 0.3, 0.8]))
    assert expected == pytest.approx(0.716890, abs=1e-6)


def test_vstar_with_zero_beta_is_the_hard_max():
    ids, v = A.vstar_per_group(t([0.2, 0.9, 0.4]), torch.tensor([1, 1, 0]), beta=0.0)
    assert ids.tolist() == [0, 1]
    torch.testing.assert_close(v, t([0.4, 0.9]))


def test_vstar_does_not_overflow_for_large_rewards():
    v = A.smooth_vstar(torch.tensor([1000.0, 999.0]), torch.tensor([0, 0]), beta=0.01)
    assert torch.isfinite(v).all() and v[0].item() == pytest.approx(1000 + 0.01 * math.log(0.5), abs=1e-3)


@HYPOTHESIS
@given(
    rewards=st.lists(st.floats(-5.0, 5.0), min_size=1, max_size=12),
    groups=st.lists(st.integers(0, 3), min_size=12, max_size=12),
    beta=st.sampled_from([0.0, 0.05, 0.5, 2.0]),
)
def test_vstar_matches_loop_and_lies_between_mean_and_max(rewards, groups, beta):
    groups = groups[: len(rewards)]
    ids, v = A.vstar_per_group(t(rewards), torch.tensor(groups), beta=beta)
    for gid, value in zip(ids.tolist(), v.tolist()):
        members = [r for r, g in zip(rewards, groups) if g == gid]
        assert value == pytest.approx(ref_vstar(members, beta), abs=1e-6)
        assert sum(members) / len(members) - 1e-9 <= value <= max(members) + 1e-9


def test_astar_po_advantage_is_reward_minus_vstar():
    rewards = t([1.0, 0.0])
    v = 0.5 * math.log((math.e**2 + 1.0) / 2.0)
    adv = A.astar_po_advantages(rewards, torch.tensor([0, 0]))
    torch.testing.assert_close(adv, t([1.0 - v, -v]))
    given_v = A.astar_po_advantages(rewards, torch.tensor([0, 0]), vstar=t([0.25, 0.25]))
    torch.testing.assert_close(given_v, t([0.75, -0.25]))


def test_astar_po_estimator_runs_in_the_retrain_pipeline():
    out = retrain.compose_advantages(
        t([1.0, 0.0]), torch.tensor([0, 0]), torch.ones(2, 3, dtype=torch.bool), config={"advantage_mode": "astar_po"}
    )
    v = 0.5 * math.log((math.e**2 + 1.0) / 2.0)
    torch.testing.assert_close(out.token_advantages[:, 0], t([1.0 - v, -v]))


def test_registry_serves_astar_po():
    assert registry.get_policy_loss("astar_po") is A.astar_po_loss
    assert registry.get_advantage_estimator("astar_po") is A.astar_po_advantages


# ---------------------------------------------------------------------------------------
# Normalisation and weights
# ---------------------------------------------------------------------------------------


def test_normalize_advantages_by_hand():
    # [1, 2, 3, 10]: mean 4, unbiased std sqrt(50 / 3) = 4.082483
    # -> [-0.734847, -0.489898, -0.244949, 1.469694]; with adv_clip 1 the last is clamped to 1
    std = math.sqrt(50.0 / 3.0) + 1e-6
    out = A.normalize_advantages(t([1.0, 2.0, 3.0, 10.0]), adv_clip=1.0)
    torch.testing.assert_close(out, t([-3 / std, -2 / std, -1 / std, 1.0]))


def test_normalize_advantages_ignores_invalid_rows_and_constant_batches():
    # valid [1, 3]: mean 2, unbiased std sqrt(2) -> [-1, 1] / (sqrt 2 + 1e-6); invalid row -> 0
    out = A.normalize_advantages(t([1.0, 3.0, 100.0]), torch.tensor([True, True, False]))
    s = math.sqrt(2.0) + 1e-6
    torch.testing.assert_close(out, t([-1 / s, 1 / s, 0.0]))
    # float32 mean of seven 0.3s is off by ~3e-8; / (0 + 1e-6) that residue would be 0.03
    assert torch.equal(A.normalize_advantages(torch.full((7,), 0.3)), torch.zeros(7))
    assert torch.equal(A.normalize_advantages(t([2.0])), t([0.0]))


def test_normalized_advantage_weights_by_hand():
    # A = [-3, 1, 1, 1]: mean 0, std = sqrt(12 / 3) = 2 -> A_norm = [-1.5, .5, .5, .5] (/2.000001)
    # normalized_advantage: clamp(A_norm + 1, 0.1, 5) = [0.1, 1.5, 1.5, 1.5]
    adv = t([-3.0, 1.0, 1.0, 1.0])
    s = 2.0 + 1e-6
    torch.testing.assert_close(A.advantage_weights(adv), t([0.1, 1 + 1 / s, 1 + 1 / s, 1 + 1 / s]))
    # shifted_advantage: A_norm + 3 = [1.5, 3.5, 3.5, 3.5]
    shifted = A.advantage_weights(adv, scheme="shifted_advantage")
    torch.testing.assert_close(shifted, t([3 - 3 / s, 3 + 1 / s, 3 + 1 / s, 3 + 1 / s]))


def test_exp_weights_by_hand_are_mean_one():
    # A = [0, -0.5], beta 0.5: exp([0, -1]) = [1, 0.367879], mean 0.683940 -> [1.462117, 0.537883]
    w = A.advantage_weights(t([0.0, -0.5]), scheme="exp")
    torch.testing.assert_close(w, t([1.0, math.exp(-1.0)]) / ((1.0 + math.exp(-1.0)) / 2.0), rtol=1e-7, atol=1e-7)
    assert A.advantage_weights(t([800.0, 0.0]), scheme="exp").isfinite().all()  # exp(1600) overflows unshifted


@pytest.mark.parametrize("normalize_weights", [False, True])
def test_normalize_weights_setting(normalize_weights):
    adv = t([-3.0, 1.0, 1.0, 1.0])
    w = A.advantage_weights(adv, normalize_weights=normalize_weights)
    s = 2.0 + 1e-6
    raw = t([0.1, 1 + 1 / s, 1 + 1 / s, 1 + 1 / s])
    torch.testing.assert_close(w, raw / raw.mean() if normalize_weights else raw)


def test_unknown_weighting_scheme_is_rejected():
    with pytest.raises(ValueError, match="weighting scheme"):
        A.advantage_weights(t([1.0, 0.0]), scheme="softmax")


# ---------------------------------------------------------------------------------------
# KL
# ---------------------------------------------------------------------------------------


def test_full_vocab_kl_by_hand():
    # p = softmax([0, 0]) = [.5, .5], q = softmax([0, ln 3]) = [.25, .75]
    # KL = .5 ln(.5/.25) + .5 ln(.5/.75) = .5 (0.693147 - 0.405465) = 0.143841
    kl = A.full_vocab_kl(t([[[0.0, 0.0]]]), t([[[0.0, math.log(3.0)]]]))
    torch.testing.assert_close(kl, t([[0.5 * math.log(2.0) + 0.5 * math.log(2.0 / 3.0)]]))
    assert A.full_vocab_kl(t([[[1.0, -2.0, 0.5]]]), t([[[1.0, -2.0, 0.5]]])).abs().max() < 1e-12


def test_full_vocab_kl_ignores_tokens_the_policy_cannot_emit():
    # p = [.5, .5, 0] (a -inf logit), q uniform over 3: KL = .5 ln(1.5) * 2 = ln 1.5, not NaN
    ninf = float("-inf")
    logits = torch.tensor([[[0.0, 0.0, ninf]]], dtype=torch.float64, requires_grad=True)
    kl = A.full_vocab_kl(logits, torch.zeros(1, 1, 3, dtype=torch.float64))
    torch.testing.assert_close(kl, torch.tensor([[math.log(1.5)]], dtype=torch.float64))
    kl.sum().backward()
    assert torch.isfinite(logits.grad).all()


def test_sampled_token_kl_estimators_by_hand():
    lp, ref = t([[-1.0, -2.0]]), t([[-1.5, -1.5]])
    torch.testing.assert_close(A.sampled_token_kl(lp, ref, estimator="k1"), t([[0.5, -0.5]]))
    # k3: exp(d) - d - 1 with d = ref - lp = [-0.5, 0.5] -> [0.106531, 0.148721]
    expected = t([[math.exp(-0.5) - 0.5, math.exp(0.5) - 1.5]])
    torch.testing.assert_close(A.sampled_token_kl(lp, ref, estimator="k3"), expected)


# ---------------------------------------------------------------------------------------
# The loss
# ---------------------------------------------------------------------------------------


def _two_example_batch():
    logprobs = t([[-1.0, -2.0], [-0.5, -float("inf")]]).requires_grad_(True)
    ref = t([[-1.5, -1.5], [-0.5, 0.0]])
    mask = torch.tensor([[True, True], [True, False]])
    return logprobs, ref, mask


def test_loss_without_kl_by_hand():
    # A = [1, -1]: A_norm = +-1/(sqrt 2 + 1e-6) -> w = [1.707107, 0.292893]
    # seq-mean-token-mean: (1.707107 * mean(1, 2) + 0.292893 * 0.5) / 2 = 1.353553
    logprobs, _, mask = _two_example_batch()
    loss, tel = A.astar_po_loss(None, logprobs, t([1.0, -1.0]), mask, kl_coef=0.0)
    n = 1.0 / (math.sqrt(2.0) + 1e-6)
    expected = ((1 + n) * 1.5 + (1 - n) * 0.5) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-7)  # agg_loss divides by n_tok + 1e-8 (verl)
    assert tel["weight_max"].item() == pytest.approx(1 + n)
    assert tel["nll"].item() == pytest.approx((1.0 + 2.0 + 0.5) / 3)


@pytest.mark.parametrize("weight_kl", [True, False])
def test_loss_with_kl_by_hand(weight_kl):
    # k3 per token: row 0 [0.106531, 0.148721] -> mean 0.127626; row 1 [0]
    logprobs, ref, mask = _two_example_batch()
    loss, tel = A.astar_po_loss(None, logprobs, t([1.0, -1.0]), mask, ref_log_prob=ref, weight_kl=weight_kl)
    n = 1.0 / (math.sqrt(2.0) + 1e-6)
    kl0 = (math.exp(-0.5) - 0.5 + math.exp(0.5) - 1.5) / 2
    if weight_kl:
        expected = ((1 + n) * (1.5 + 0.02 * kl0) + (1 - n) * 0.5) / 2
    else:
        expected = ((1 + n) * 1.5 + 0.02 * kl0 + (1 - n) * 0.5) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-7)  # agg_loss divides by n_tok + 1e-8 (verl)
    assert tel["kl_ref"].item() == pytest.approx(2 * kl0 / 3)


def test_loss_gradient_is_minus_weight_over_tokens_and_never_reaches_the_advantages():
    logprobs, _, mask = _two_example_batch()
    adv = t([1.0, -1.0]).requires_grad_(True)
    loss, _ = A.astar_po_loss(None, logprobs, adv, mask, kl_coef=0.0)
    loss.backward()
    n = 1.0 / (math.sqrt(2.0) + 1e-6)
    # d/d lp[b, t] = -w_b / (tokens_b * rows)
    torch.testing.assert_close(logprobs.grad, t([[-(1 + n) / 4, -(1 + n) / 4], [-(1 - n) / 2, 0.0]]))
    assert adv.grad is None or torch.equal(adv.grad, torch.zeros(2, dtype=torch.float64))


def test_kl_needs_a_reference():
    logprobs, _, mask = _two_example_batch()
    with pytest.raises(ValueError, match="ref_log_prob"):
        A.astar_po_loss(None, logprobs, t([1.0, -1.0]), mask)


def test_exact_ref_kl_wins_over_the_estimate():
    logprobs, ref, mask = _two_example_batch()
    ref_kl = t([[1.0, 1.0], [1.0, 1.0]])
    a, _ = A.astar_po_loss(None, logprobs, t([1.0, -1.0]), mask, ref_log_prob=ref, ref_kl=ref_kl, weight_kl=False)
    b, _ = A.astar_po_loss(None, logprobs, t([1.0, -1.0]), mask, kl_coef=0.0, weight_kl=False)
    assert (a - b).item() == pytest.approx(0.02)  # mean over rows of 0.02 * 1


def test_telemetry_is_flat_scalars_with_vstar_and_ratio():
    logprobs, ref, mask = _two_example_batch()
    old = t([[-1.0, -1.0], [-0.5, 0.0]])
    _, tel = A.astar_po_loss(old, logprobs, t([1.0, -1.0]), mask, ref_log_prob=ref, vstar=t([0.7, 0.7]))
    assert {"approx_kl", "ratio_mean", "ratio_min", "ratio_max", "vstar_mean", "weight_mean"} <= set(tel)
    assert all(v.dim() == 0 and torch.isfinite(v) for v in tel.values())
    # log ratio over tokens [0, -1, 0] -> approx_kl = mean(old - new) = 1/3; min ratio e^-1
    assert tel["approx_kl"].item() == pytest.approx(1 / 3)
    assert tel["ratio_min"].item() == pytest.approx(math.exp(-1.0))
    assert tel["vstar_mean"].item() == pytest.approx(0.7)


@pytest.mark.parametrize("scheme", A.WEIGHTING_SCHEMES)
@pytest.mark.parametrize("weight_kl", [True, False])
@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_loss_gradcheck_float64(scheme, weight_kl, estimator):
    torch.manual_seed(0)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [0, 0, 0], [1, 0, 0]], dtype=torch.bool)
    logprobs = (-torch.rand(4, 3, dtype=torch.float64) * 2).requires_grad_(True)
    ref = -torch.rand(4, 3, dtype=torch.float64) * 2
    adv = t([0.3, -0.2, 0.9, -0.6])

    def fn(lp):
        return A.astar_po_loss(
            None, lp, adv, mask, ref_log_prob=ref, weighting_scheme=scheme, weight_kl=weight_kl, kl_estimator=estimator
        )[0]

    assert torch.autograd.gradcheck(fn, (logprobs,))


def test_fully_masked_rows_and_singleton_batches_are_finite():
    logprobs = torch.full((3, 2), -float("inf"), dtype=torch.float64)
    logprobs[0, 0] = -0.4
    logprobs.requires_grad_(True)
    mask = torch.tensor([[True, False], [False, False], [False, False]])
    ref = torch.zeros(3, 2, dtype=torch.float64)
    loss, tel = A.astar_po_loss(None, logprobs, t([0.5, 7.0, -3.0]), mask, ref_log_prob=ref)
    loss.backward()
    # one valid row: A_norm = 0 -> weight 1; loss = 0.4 + 0.02 * (e^0.4 - 0.4 - 1)
    assert loss.item() == pytest.approx(0.4 + 0.02 * (math.exp(0.4) - 1.4))
    assert torch.isfinite(logprobs.grad).all()
    assert all(torch.isfinite(v) for v in tel.values())
    empty, _ = A.astar_po_loss(None, logprobs, t([0.5, 7.0, -3.0]), torch.zeros(3, 2, dtype=torch.bool), kl_coef=0.0)
    assert empty.item() == 0.0


def test_bfloat16_close_to_float32():
    torch.manual_seed(3)
    mask = torch.rand(8, 16) > 0.2
    lp = -torch.rand(8, 16) * 3
    ref = lp + 0.1 * torch.randn(8, 16)
    adv = torch.randn(8)
    full, _ = A.astar_po_loss(None, lp, adv, mask, ref_log_prob=ref)
    half, _ = A.astar_po_loss(None, lp.bfloat16(), adv.bfloat16(), mask, ref_log_prob=ref.bfloat16())
    assert half.dtype == torch.float32
    torch.testing.assert_close(half, full, atol=2e-2, rtol=2e-2)


@st.composite
def ragged(draw):
    n = draw(st.integers(1, 6))
    lengths = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    lp = [draw(st.lists(st.floats(-6.0, -0.01), min_size=k, max_size=k)) for k in lengths]
    ref = [draw(st.lists(st.floats(-6.0, -0.01), min_size=k, max_size=k)) for k in lengths]
    adv = draw(st.lists(st.sampled_from([-1.0, -0.5, -0.25, 0.0, 0.3, 0.75]), min_size=n, max_size=n))
    return lp, ref, adv


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@HYPOTHESIS
@given(
    batch=ragged(),
    scheme=st.sampled_from(A.WEIGHTING_SCHEMES),
    normalize_weights=st.booleans(),
    weight_kl=st.booleans(),
    estimator=st.sampled_from(["k1", "k3"]),
    adv_clip=st.sampled_from([0.5, 3.0]),
)
def test_loss_matches_loop_reference(dtype, batch, scheme, normalize_weights, weight_kl, estimator, adv_clip):
    lp, ref, adv = batch
    width = max(1, max(len(r) for r in lp))
    pad = lambda rows, fill: torch.tensor([r + [fill] * (width - len(r)) for r in rows], dtype=dtype)  # noqa: E731
    mask = torch.tensor([[True] * len(r) + [False] * (width - len(r)) for r in lp])
    loss, tel = A.astar_po_loss(
        None,
        pad(lp, -float("inf")),
        torch.tensor(adv, dtype=dtype),
        mask,
        ref_log_prob=pad(ref, float("nan")),
        weighting_scheme=scheme,
        adv_clip=adv_clip,
        normalize_weights=normalize_weights,
        weight_kl=weight_kl,
        kl_estimator=estimator,
    )
    expected = ref_loss(
        lp,
        ref,
        adv,
        scheme=scheme,
        beta=0.5,
        adv_clip=adv_clip,
        normalize_weights=normalize_weights,
        kl_coef=0.02,
        weight_kl=weight_kl,
        estimator=estimator,
    )
    tol = 1e-6 if dtype == torch.float64 else 1e-4
    assert loss.item() == pytest.approx(expected, rel=tol, abs=tol)
    assert all(torch.isfinite(v) for v in tel.values())


# ---------------------------------------------------------------------------------------
# V* sample schedule and cache
# ---------------------------------------------------------------------------------------


def test_adaptive_vstar_schedule():
    steps = [0, 29, 30, 69, 70, 10_000]
    assert [A.vstar_num_samples(s) for s in steps] == [5, 5, 3, 3, 2, 2]
    assert [A.vstar_num_samples(s, adaptive=False) for s in steps] == [5] * 6
    assert A.vstar_num_samples(3, adaptive=False, fixed_samples=4) == 4
    with pytest.raises(ValueError):
        A.vstar_num_samples(3, boundaries=(10,), samples=(5, 3, 2))


def test_vstar_cache_serves_hits_and_counts_them():
    cache = A.VStarCache()
    values, hit = cache.lookup(["p1", "p2"], signature=(0.5, 5))
    assert hit.tolist() == [False, False] and torch.isnan(values).all()
    cache.store(["p1"], torch.tensor([0.72]), signature=(0.5, 5))
    values, hit = cache.lookup(["p1", "p2", "p1"], signature=(0.5, 5))
    assert hit.tolist() == [True, False, True]
    assert values[0].item() == pytest.approx(0.72) and values[2].item() == pytest.approx(0.72)
    assert cache.stats()["vstar_cache_hits"] == 2.0 and cache.stats()["vstar_cache_misses"] == 3.0


def test_vstar_cache_keys_include_the_signature():
    cache = A.VStarCache()
    cache.store(["p"], [0.9], signature=(0.5, 5))
    assert cache.lookup(["p"], signature=(0.5, 3))[1].tolist() == [False]
    restored = A.VStarCache()
    restored.load_state_dict(cache.state_dict())
    assert restored.lookup(["p"], signature=(0.5, 5))[0].tolist() == [0.9]
    with pytest.raises(ValueError):
        cache.store(["a", "b"], [1.0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_runs_on_cuda_like_on_cpu():
    torch.manual_seed(8)
    lp, mask = -torch.rand(4, 6) * 2, torch.rand(4, 6) > 0.2
    ref, rewards, groups = lp + 0.1, torch.rand(4).round(), torch.tensor([0, 0, 1, 1])
    adv = A.astar_po_advantages(rewards, groups)
    cpu, _ = A.astar_po_loss(None, lp, adv, mask, ref_log_prob=ref)
    gpu_adv = A.astar_po_advantages(rewards.cuda(), groups.cuda())
    gpu, tel = A.astar_po_loss(None, lp.cuda().bfloat16(), gpu_adv, mask.cuda(), ref_log_prob=ref.cuda().bfloat16())
    assert gpu.device.type == "cuda" and all(v.device.type == "cuda" for v in tel.values())
    torch.testing.assert_close(gpu.cpu(), cpu, atol=3e-2, rtol=3e-2)
