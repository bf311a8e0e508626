"""PPO / A²TGPO clipped loss: verl parity, hand-worked numbers, the loop reference,
turn-level ratio, gradcheck, dtypes and degenerate masks."""

from __future__ import annotations

import math
import random

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer_hooks import registry
from trainer_hooks.losses.aggregation import LOSS_AGG_MODES, agg_loss
from trainer_hooks.losses.ppo import a2tgpo_policy_loss, clipped_surrogate, ppo_policy_loss
from trainer_hooks.ops.segments import turn_reduce

try:  # tests/trainer_hooks may or may not be a package
    from . import loop_reference as ref
except ImportError:  # pragma: no cover - depends on the rootdir layout
    import loop_reference as ref

HYPOTHESIS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
F64 = torch.float64
TELEMETRY_KEYS = {
    "pg_loss",
    "clipfrac_low",
    "clipfrac_high",
    "clipfrac_dual",
    "approx_kl",
    "ratio_mean",
    "ratio_min",
    "ratio_max",
    "clip_scale_mean",
    "clip_scale_std",
    "clip_scale_min",
    "clip_scale_max",
    "clip_scale_frac_low",
    "clip_scale_frac_high",
}


def verl_vanilla(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, clip_ratio=0.2, clip_ratio_c=3.0):
    """verl's compute_policy_loss_vanilla + agg_loss (dp_size 1) at b178a3cd, written out
    plainly (token-sum: verl 0.9.1's extra mode)."""
    mask = response_mask.to(log_prob.dtype)
    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = (-negative_approx_kl * mask).sum() / (mask.sum() + 1e-8)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - clip_ratio, 1 + clip_ratio)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = (torch.gt(pg_losses2, pg_losses1).float() * mask).sum() / (mask.sum() + 1e-8)
    pg_losses3 = -advantages * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    lower = (torch.gt(clip_pg_losses1, pg_losses3) * (advantages < 0)).float()
    pg_clipfrac_lower = (lower * mask).sum() / (mask.sum() + 1e-8)
    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    if loss_agg_mode == "token-mean":
        loss = (pg_losses * mask).sum() / mask.sum()
    elif loss_agg_mode == "token-sum":
        loss = (pg_losses * mask).sum()
    elif loss_agg_mode == "seq-mean-token-sum":
        seq_losses = (pg_losses * mask).sum(-1)
        seq_mask = (mask.sum(-1) > 0).float()
        loss = (seq_losses * seq_mask).sum() / seq_mask.sum()
    elif loss_agg_mode == "seq-mean-token-sum-norm":
        loss = (pg_losses * mask).sum(-1).sum() / mask.shape[-1]
    else:
        token_count = mask.sum(-1)
        seq_losses = (pg_losses * mask).sum(-1) / (token_count + 1e-8)
        seq_mask = (token_count > 0).float()
        loss = (seq_losses * seq_mask).sum() / seq_mask.sum()
    return loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower


def random_turns(rng: random.Random, L: int) -> list[int]:
    """A row of turn ids: runs of equal ids (adjacent turns included), some -1 gaps/padding."""
    ids, turn = [], 0
    while len(ids) < L:
        if rng.random() < 0.25:
            ids.append(-1)
            continue
        ids.extend([turn] * rng.randint(1, 3))
        turn += 1
    return ids[:L]


def policy_batch(seed: int, B: int, L: int, *, constant_adv_per_turn: bool = False, spread: float = 0.3):
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    turn_ids = torch.tensor([random_turns(rng, L) for _ in range(B)])
    mask = torch.rand(B, L, generator=g) < 0.8
    mask[0, 0] = True
    log_prob = -torch.rand(B, L, generator=g, dtype=F64) * 2
    old = log_prob + spread * torch.randn(B, L, generator=g, dtype=F64)
    if constant_adv_per_turn:
        per_turn = torch.randn(B, L + 1, generator=g, dtype=F64)
        adv = per_turn.gather(1, (turn_ids + 1).clamp(min=0))
    else:
        adv = torch.randn(B, L, generator=g, dtype=F64)
    scale = 1 + 0.3 * torch.tanh(torch.randn(B, L + 1, generator=g, dtype=F64)).gather(1, (turn_ids + 1).clamp(min=0))
    return dict(old=old, log_prob=log_prob, adv=adv, mask=mask, turn_ids=turn_ids, scale=scale)


# ---------------------------------------------------------------------------------------
# verl parity
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_equals_verl_vanilla_to_float64_precision(mode):
    b = policy_batch(0, B=6, L=9, spread=0.6)
    old = b["old"].clone()
    old[0, 1] = b["log_prob"][0, 1] - 30.0  # log-ratio +30 -> clamped at +20
    old[1, 2] = b["log_prob"][1, 2] + 30.0  # log-ratio -30 -> clamped at -20
    b["adv"][0, 1] = -1.0  # ratio e^20 with A < 0: dual clip territory
    b["mask"][3] = False  # a fully masked row
    lp_ours = b["log_prob"].clone().requires_grad_(True)
    lp_verl = b["log_prob"].clone().requires_grad_(True)
    loss, tel = ppo_policy_loss(old, lp_ours, b["adv"], b["mask"], mode)
    vloss, clipfrac, ppo_kl, clipfrac_lower = verl_vanilla(old, lp_verl, b["adv"], b["mask"], mode)
    torch.testing.assert_close(loss, vloss, rtol=1e-14, atol=1e-15)
    loss.backward()
    vloss.backward()
    torch.testing.assert_close(lp_ours.grad, lp_verl.grad, rtol=1e-14, atol=1e-15)
    assert clipfrac > 0 and clipfrac_lower > 0  # the case exercises both clips
    torch.testing.assert_close(tel["clipfrac_low"] + tel["clipfrac_high"], clipfrac, rtol=1e-7, atol=0)
    torch.testing.assert_close(tel["clipfrac_dual"], clipfrac_lower, rtol=1e-7, atol=0)
    torch.testing.assert_close(tel["approx_kl"], ppo_kl, rtol=1e-7, atol=0)
    # an all-ones clip scale takes the tensor-bound path and still equals verl
    loss1, _ = ppo_policy_loss(old, b["log_prob"], b["adv"], b["mask"], mode, clip_scale=torch.ones_like(old))
    torch.testing.assert_close(loss1, vloss.detach(), rtol=1e-14, atol=1e-15)


def test_asymmetric_clip_and_dual_clip_constant_match_verl_formula():
    b = policy_batch(1, B=4, L=8, spread=0.8)
    # verl with clip_ratio_low = 0.2, clip_ratio_high = 0.28 (DAPO), c = 5
    mask = b["mask"].to(F64)
    ratio = torch.exp(torch.clamp(b["log_prob"] - b["old"], -20, 20))
    clip1 = torch.maximum(-b["adv"] * ratio, -b["adv"] * torch.clamp(ratio, 0.8, 1.28))
    per_token = torch.where(b["adv"] < 0, torch.min(-b["adv"] * 5.0, clip1), clip1)
    expected = (per_token * mask).sum() / mask.sum()
    loss, _ = ppo_policy_loss(b["old"], b["log_prob"], b["adv"], b["mask"], clip_ratio_high=0.28, clip_ratio_c=5.0)
    torch.testing.assert_close(loss, expected, rtol=1e-14, atol=1e-15)


# ---------------------------------------------------------------------------------------
# Hand-worked
# ---------------------------------------------------------------------------------------

# five tokens, eps = 0.2, c = 3:
#  1: A= 1, r=1.1 -> inside             -> -1.1
#  2: A= 1, r=1.5 -> upper clip 1.2     -> -1.2   (clipfrac_high)
#  3: A=-1, r=0.5 -> lower clip 0.8     ->  0.8   (clipfrac_low)
#  4: A=-1, r=4   -> max(4, 1.2) = 4, dual: min(4, 3) = 3   (clipfrac_dual)
#  5: A= 2, r=0.5 -> max(-1, -1.6) = -1 (ratio below 1 - eps but A > 0: no clip)
HAND_RATIO = [1.1, 1.5, 0.5, 4.0, 0.5]
HAND_ADV = [1.0, 1.0, -1.0, -1.0, 2.0]


def hand_inputs():
    log_prob = torch.zeros(1, 5, dtype=F64)
    old = -torch.log(torch.tensor([HAND_RATIO], dtype=F64))
    return old, log_prob, torch.tensor([HAND_ADV], dtype=F64), torch.ones(1, 5, dtype=torch.bool)


def test_hand_worked_loss_and_telemetry():
    old, lp, adv, mask = hand_inputs()
    loss, tel = ppo_policy_loss(old, lp, adv, mask)
    assert loss.item() == pytest.approx((-1.1 - 1.2 + 0.8 + 3.0 - 1.0) / 5)  # 0.1
    assert tel["clipfrac_high"].item() == pytest.approx(0.2)
    assert tel["clipfrac_low"].item() == pytest.approx(0.2)
    assert tel["clipfrac_dual"].item() == pytest.approx(0.2)
    assert tel["ratio_min"].item() == pytest.approx(0.5) and tel["ratio_max"].item() == pytest.approx(4.0)
    assert tel["ratio_mean"].item() == pytest.approx(sum(HAND_RATIO) / 5)
    # approx_kl = mean(old - new) = mean(-log r)
    assert tel["approx_kl"].item() == pytest.approx(-sum(math.log(r) for r in HAND_RATIO) / 5)
    assert set(tel) == TELEMETRY_KEYS
    assert all(v.dim() == 0 and not v.requires_grad for v in tel.values())


def test_dual_clip_off_and_on():
    old, lp, adv, mask = hand_inputs()
    off, tel_off = ppo_policy_loss(old, lp, adv, mask, clip_ratio_c=None)
    # token 4 keeps its unbounded loss 4: (-1.1 - 1.2 + 0.8 + 4 - 1) / 5 = 0.3
    assert off.item() == pytest.approx(0.3) and tel_off["clipfrac_dual"].item() == 0.0
    # c = 5 > r = 4: dual clip inactive -> same as off
    assert ppo_policy_loss(old, lp, adv, mask, clip_ratio_c=5.0)[0].item() == pytest.approx(0.3)
    with pytest.raises(ValueError, match="clip_ratio_c"):
        ppo_policy_loss(old, lp, adv, mask, clip_ratio_c=1.0)


def test_clip_scale_moves_the_bounds():
    old, lp, adv, mask = hand_inputs()
    # token 2: s = 1.3 -> upper 1 + 0.2*1.3 = 1.26 -> -1.26; token 3: s = 0.5 -> lower 0.9 -> 0.9
    scale = torch.tensor([[1.0, 1.3, 0.5, 1.0, 1.0]], dtype=F64)
    loss, tel = ppo_policy_loss(old, lp, adv, mask, clip_scale=scale)
    assert loss.item() == pytest.approx((-1.1 - 1.26 + 0.9 + 3.0 - 1.0) / 5)  # 0.108
    # token 2 with s = 2.6 -> upper 1.52 > r = 1.5: no longer clipped
    wide = scale.clone()
    wide[0, 1] = 2.6
    assert ppo_policy_loss(old, lp, adv, mask, clip_scale=wide)[1]["clipfrac_high"].item() == 0.0
    # scale stats over the 5 tokens (no turn ids): mean (1 + 1.3 + 0.5 + 1 + 1) / 5 = 0.96
    assert tel["clip_scale_mean"].item() == pytest.approx(0.96)
    assert tel["clip_scale_min"].item() == pytest.approx(0.5) and tel["clip_scale_max"].item() == pytest.approx(1.3)


def test_clip_scale_frac_at_bound_definition():
    # beta = 0.3: "at lower bound" <=> s <= 0.7 + 3e-4; "at upper bound" <=> s >= 1.3 - 3e-4.
    # Turns: 0.7001 (low), 0.7004 (not), 1.0, 1.2999 (high), 1.2995 (not)
    turn_scale = [0.7001, 0.7004, 1.0, 1.2999, 1.2995]
    turn_ids = torch.tensor([[0, 0, 1, 2, 2, 3, 4, -1]])
    scale = torch.tensor([[turn_scale[max(i, 0)] if i >= 0 else 1.0 for i in turn_ids[0].tolist()]], dtype=F64)
    z = torch.zeros(1, 8, dtype=F64)
    _, tel = ppo_policy_loss(z, z, z, torch.ones(1, 8, dtype=torch.bool), clip_scale=scale, turn_ids=turn_ids)
    assert tel["clip_scale_frac_low"].item() == pytest.approx(1 / 5)  # fractions of the 5 turns
    assert tel["clip_scale_frac_high"].item() == pytest.approx(1 / 5)
    assert tel["clip_scale_mean"].item() == pytest.approx(sum(turn_scale) / 5)


# ---------------------------------------------------------------------------------------
# Turn-level ratio
# ---------------------------------------------------------------------------------------


def test_turn_level_ratio_hand_worked():
    # turn 0: log-ratios 0.1, 0.3 -> mean 0.2 -> r = e^0.2 = 1.2214 > 1.2 -> clipped: -1.2 each
    # turn 1: log-ratios -0.2, 0.0 -> mean -0.1 -> r = e^-0.1 = 0.9048 inside: -0.9048 each
    # token-mean = (2 * -1.2 + 2 * -e^-0.1) / 4. Gradient: 0 on the clipped turn, -e^-0.1 / 4 on turn 1.
    lp = torch.zeros(1, 4, dtype=F64, requires_grad=True)
    old = -torch.tensor([[0.1, 0.3, -0.2, 0.0]], dtype=F64)
    ids = torch.tensor([[0, 0, 1, 1]])
    loss, tel = ppo_policy_loss(
        old, lp, torch.ones(1, 4, dtype=F64), torch.ones(1, 4, dtype=torch.bool), ratio_level="turn", turn_ids=ids
    )
    assert loss.item() == pytest.approx((-2.4 - 2 * math.exp(-0.1)) / 4)
    loss.backward()
    torch.testing.assert_close(lp.grad, torch.tensor([[0, 0, -math.exp(-0.1) / 4, -math.exp(-0.1) / 4]], dtype=F64))
    assert tel["clipfrac_high"].item() == 0.5
    # Adjacent turns with equal advantages are still two turns (two distinct ratios):
    assert tel["ratio_min"].item() == pytest.approx(math.exp(-0.1))
    assert tel["ratio_max"].item() == pytest.approx(math.exp(0.2))


def plain_turn_ratio_loss(old, log_prob, adv, mask, turn_ids, mode, scale):
    """Turn ratio differentiated plainly: exp(turn mean of log ratio), gradient through the mean."""
    log_ratio = torch.clamp(log_prob - old, -20, 20)
    K = int(turn_ids.max()) + 1
    in_turn = (turn_ids >= 0) & mask
    mean, _ = turn_reduce(log_ratio, turn_ids, K, in_turn)
    used = torch.where(in_turn, mean.gather(1, turn_ids.clamp(min=0)), log_ratio)
    loss_mat, _ = clipped_surrogate(
        torch.exp(used), adv, clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=3.0, clip_scale=scale
    )
    return agg_loss(loss_mat, mask, mode)


@HYPOTHESIS
@given(seed=st.integers(0, 2**31), mode=st.sampled_from(LOSS_AGG_MODES))
def test_turn_ratio_gradient_equals_plain_mean_when_advantage_is_constant_per_turn(seed, mode):
    b = policy_batch(seed, B=4, L=10, constant_adv_per_turn=True)
    lp1 = b["log_prob"].clone().requires_grad_(True)
    lp2 = b["log_prob"].clone().requires_grad_(True)
    ours, _ = ppo_policy_loss(
        b["old"], lp1, b["adv"], b["mask"], mode, ratio_level="turn", turn_ids=b["turn_ids"], clip_scale=b["scale"]
    )
    plain = plain_turn_ratio_loss(b["old"], lp2, b["adv"], b["mask"], b["turn_ids"], mode, b["scale"])
    torch.testing.assert_close(ours, plain, rtol=1e-12, atol=1e-14)
    ours.backward()
    plain.backward()
    torch.testing.assert_close(lp1.grad, lp2.grad, rtol=1e-10, atol=1e-13)


def autograd_surrogate(ratio, adv, scale, clip_ratio_c):
    """The clipped loss written out with autograd through every op (what the derivative
    taken in the forward pass must equal away from ties)."""
    clamped = torch.clamp(ratio, 1 - 0.2 * scale, 1 + 0.28 * scale)
    clip1 = torch.maximum(-adv * ratio, -adv * clamped)
    if clip_ratio_c is None:
        return clip1
    return torch.where(adv < 0, torch.minimum(-adv * clip_ratio_c, clip1), clip1)


@pytest.mark.parametrize("clip_ratio_c", [None, 3.0])
@pytest.mark.parametrize("into", ["ratio", "log_ratio"])
def test_the_surrogates_derivative_equals_autograd_through_the_formula(clip_ratio_c, into):
    g = torch.Generator().manual_seed(7)
    log_ratio = 1.5 * torch.randn(16, 24, generator=g, dtype=F64)  # ratios far outside the bounds too
    adv = torch.randn(16, 24, generator=g, dtype=F64)
    scale = 1 + 0.3 * torch.tanh(torch.randn(16, 24, generator=g, dtype=F64))
    upstream = torch.randn(16, 24, generator=g, dtype=F64)
    x1, x2 = log_ratio.clone().requires_grad_(True), log_ratio.clone().requires_grad_(True)
    a1, a2 = adv.clone().requires_grad_(True), adv.clone().requires_grad_(True)
    if into == "ratio":
        ours, maps = clipped_surrogate(
            torch.exp(x1), a1, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=clip_ratio_c, clip_scale=scale
        )
    else:  # the ratio's value given, the gradient into the log-ratio (the turn-level ratio's route)
        ours, maps = clipped_surrogate(
            torch.exp(x1.detach()),
            a1,
            clip_ratio_low=0.2,
            clip_ratio_high=0.28,
            clip_ratio_c=clip_ratio_c,
            clip_scale=scale,
            log_ratio=x1,
        )
    theirs = autograd_surrogate(torch.exp(x2), a2, scale, clip_ratio_c)
    assert torch.equal(ours, theirs)
    assert maps["clip_low"].any() and maps["clip_high"].any() and (maps["dual"].any() or clip_ratio_c is None)
    (ours * upstream).sum().backward()
    (theirs * upstream).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(a1.grad, a2.grad, rtol=1e-14, atol=1e-15)


def test_the_surrogate_passes_gradcheck_away_from_its_kinks():
    g = torch.Generator().manual_seed(3)
    ratio = torch.exp(torch.randn(6, 7, generator=g, dtype=F64)).requires_grad_(True)
    adv = torch.randn(6, 7, generator=g, dtype=F64).requires_grad_(True)

    def loss(r, a):
        return clipped_surrogate(r, a, clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=3.0, with_maps=False)[0]

    assert torch.autograd.gradcheck(loss, (ratio, adv), eps=1e-7, atol=1e-6)


def test_turn_reduce_pools_a_list_of_columns_as_their_stack():
    turn_ids = torch.tensor([[0, 0, 1, -1, 1], [-1, 2, 2, 0, 3]])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    a = torch.arange(10, dtype=F64).view(2, 5)
    b = a * a
    pooled, count = turn_reduce([a, b], turn_ids, 4, mask)
    stacked, count2 = turn_reduce(torch.stack([a, b], -1), turn_ids, 4, mask)
    assert torch.equal(pooled, stacked) and torch.equal(count, count2)
    assert count.tolist() == [[2, 1, 0, 0], [1, 0, 2, 1]]
    assert pooled[..., 0].tolist() == [[0.5, 2.0, 0.0, 0.0], [8.0, 0.0, 6.5, 9.0]]
    assert pooled[..., 1].tolist() == [[0.5, 4.0, 0.0, 0.0], [64.0, 0.0, 42.5, 81.0]]
    alone, _ = turn_reduce(a, turn_ids, 4, mask, reduce="sum")
    assert alone.tolist() == [[1.0, 2.0, 0.0, 0.0], [8.0, 0.0, 13.0, 9.0]]


def test_turn_level_needs_turn_ids():
    old, lp, adv, mask = hand_inputs()
    with pytest.raises(ValueError, match="turn_ids"):
        ppo_policy_loss(old, lp, adv, mask, ratio_level="turn")
    with pytest.raises(ValueError, match="ratio_level"):
        ppo_policy_loss(old, lp, adv, mask, ratio_level="sequence")


# ---------------------------------------------------------------------------------------
# Loop reference, gradcheck, dtypes, degenerate masks
# ---------------------------------------------------------------------------------------


@HYPOTHESIS
@given(
    seed=st.integers(0, 2**31),
    B=st.integers(1, 5),
    L=st.integers(1, 9),
    mode=st.sampled_from(LOSS_AGG_MODES),
    ratio_level=st.sampled_from(["token", "turn"]),
    use_scale=st.booleans(),
    dual=st.sampled_from([None, 3.0]),
    dtype=st.sampled_from([torch.float64, torch.float32]),
)
def test_matches_loop_reference(seed, B, L, mode, ratio_level, use_scale, dual, dtype):
    b = policy_batch(seed, B, L, spread=0.5)
    scale = b["scale"] if use_scale else None
    loss, _ = ppo_policy_loss(
        b["old"].to(dtype),
        b["log_prob"].to(dtype),
        b["adv"].to(dtype),
        b["mask"],
        mode,
        clip_ratio_c=dual,
        clip_scale=None if scale is None else scale.to(dtype),
        ratio_level=ratio_level,
        turn_ids=b["turn_ids"],
    )
    # the reference sees exactly the (possibly float32-rounded) inputs
    as_list = lambda x: x.to(dtype).double().tolist()  # noqa: E731
    expected = ref.ppo_loss(
        as_list(b["old"]),
        as_list(b["log_prob"]),
        as_list(b["adv"]),
        b["mask"].tolist(),
        mode=mode,
        clip_ratio_c=dual,
        clip_scale=None if scale is None else as_list(scale),
        turn_ids=b["turn_ids"].tolist(),
        ratio_level=ratio_level,
    )
    tol = dict(rel=1e-6, abs=1e-6) if dtype == torch.float64 else dict(rel=1e-4, abs=1e-4)
    assert loss.item() == pytest.approx(expected, **tol)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("variant", ["ppo", "a2tgpo_turn", "no_dual"])
def test_gradcheck(mode, variant):
    b = policy_batch(7, B=3, L=6, constant_adv_per_turn=True)
    kwargs = {"no_dual": dict(clip_ratio_c=None), "ppo": {}}.get(
        variant, dict(clip_scale=b["scale"], turn_ids=b["turn_ids"])
    )
    fn = a2tgpo_policy_loss if variant == "a2tgpo_turn" else ppo_policy_loss
    lp = b["log_prob"].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: fn(b["old"], x, b["adv"], b["mask"], mode, **kwargs)[0], (lp,))


@pytest.mark.parametrize("ratio_level", ["token", "turn"])
def test_bf16_inputs_computed_in_fp32(ratio_level):
    b = policy_batch(3, B=4, L=12)
    args16 = [b["old"].bfloat16(), b["log_prob"].bfloat16().requires_grad_(True), b["adv"].bfloat16()]
    args32 = [x.detach().float() for x in args16]
    args32[1].requires_grad_(True)
    kw = dict(ratio_level=ratio_level, turn_ids=b["turn_ids"], clip_scale=b["scale"].bfloat16())
    l16, t16 = ppo_policy_loss(*args16, b["mask"], **kw)
    l32, t32 = ppo_policy_loss(*args32, b["mask"], **dict(kw, clip_scale=b["scale"].bfloat16().float()))
    assert l16.dtype == torch.float32
    torch.testing.assert_close(l16, l32, rtol=1e-6, atol=1e-7)
    l16.backward()
    l32.backward()
    assert args16[1].grad.dtype == torch.bfloat16
    torch.testing.assert_close(args16[1].grad.float(), args32[1].grad, rtol=1e-2, atol=1e-4)
    torch.testing.assert_close(t16["ratio_mean"], t32["ratio_mean"])


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("ratio_level", ["token", "turn"])
def test_fully_masked_rows_and_batches_stay_finite(mode, ratio_level):
    b = policy_batch(5, B=3, L=7)
    b["mask"][1] = False
    lp = b["log_prob"].clone().requires_grad_(True)
    loss, tel = ppo_policy_loss(
        b["old"], lp, b["adv"], b["mask"], mode, ratio_level=ratio_level, turn_ids=b["turn_ids"], clip_scale=b["scale"]
    )
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(lp.grad).all() and (lp.grad[1] == 0).all()
    lp.grad = None
    empty, tel = ppo_policy_loss(
        b["old"], lp, b["adv"], torch.zeros_like(b["mask"]), mode, ratio_level=ratio_level, turn_ids=b["turn_ids"]
    )
    empty.backward()
    assert empty.item() == 0.0 and (lp.grad == 0).all()
    assert all(torch.isfinite(v) for v in tel.values())


def test_ig_telemetry_when_given():
    old, lp, adv, mask = hand_inputs()
    ig = torch.tensor([[0.1, 0.3, 9.0]], dtype=F64)
    scale = torch.ones_like(lp)
    _, tel = a2tgpo_policy_loss(
        old, lp, adv, mask, clip_scale=scale, ig=ig, ig_mask=torch.tensor([[True, True, False]])
    )
    assert tel["ig_mean"].item() == pytest.approx(0.2) and tel["ig_std"].item() == pytest.approx(0.1)
    assert set(tel) == TELEMETRY_KEYS | {"ig_mean", "ig_std"}


def test_registered_under_ppo_vanilla_and_a2tgpo():
    assert registry.get_policy_loss("ppo") is ppo_policy_loss
    assert registry.get_policy_loss("vanilla") is ppo_policy_loss
    assert registry.get_policy_loss("a2tgpo") is a2tgpo_policy_loss
    # a2tgpo defaults to the turn-level ratio when turn ids are given
    b = policy_batch(2, B=3, L=8)
    a, _ = a2tgpo_policy_loss(
        b["old"], b["log_prob"], b["adv"], b["mask"], clip_scale=b["scale"], turn_ids=b["turn_ids"]
    )
    p, _ = ppo_policy_loss(
        b["old"], b["log_prob"], b["adv"], b["mask"], clip_scale=b["scale"], turn_ids=b["turn_ids"], ratio_level="turn"
    )
    assert a.item() == p.item()


def test_a2tgpo_without_a_clip_scale_is_refused_not_silently_ppo():
    b = policy_batch(2, B=3, L=8)
    for call in (registry.get_policy_loss("a2tgpo"), a2tgpo_policy_loss):
        with pytest.raises(ValueError, match=r"a2tgpo needs clip_scale=\[B, L\].*silently be PPO"):
            call(b["old"], b["log_prob"], b["adv"], b["mask"])
        with pytest.raises(ValueError, match="clip_scale"):
            call(b["old"], b["log_prob"], b["adv"], b["mask"], turn_ids=b["turn_ids"])


def test_without_telemetry_same_loss_and_gradient():
    b = policy_batch(11, B=4, L=9)
    for kw in (dict(ratio_level="token"), dict(ratio_level="turn", turn_ids=b["turn_ids"], clip_scale=b["scale"])):
        lp1, lp2 = b["log_prob"].clone().requires_grad_(True), b["log_prob"].clone().requires_grad_(True)
        with_t, tel = ppo_policy_loss(b["old"], lp1, b["adv"], b["mask"], **kw)
        without, empty = ppo_policy_loss(b["old"], lp2, b["adv"], b["mask"], with_telemetry=False, **kw)
        assert empty == {} and set(tel) == TELEMETRY_KEYS
        assert with_t.item() == without.item()
        with_t.backward()
        without.backward()
        assert torch.equal(lp1.grad, lp2.grad)


def test_a_per_sequence_advantage_is_an_error_not_a_row_broadcast():
    # B == L == 4: adv[:, 0] of shape [4] would broadcast against [4, 4] as a row (token j of
    # every sequence getting sequence j's advantage) without a word
    b = policy_batch(3, B=4, L=4)
    for name in ("ppo", "vanilla", "a2tgpo"):
        with pytest.raises(ValueError, match=r"advantages must be \[B, L\] = \(4, 4\), got \(4,\); a per-sequence"):
            registry.get_policy_loss(name)(b["old"], b["log_prob"], b["adv"][:, 0], b["mask"], clip_scale=b["scale"])
    with pytest.raises(ValueError, match=r"clip_scale \(4, 3\) must match log_prob \(4, 4\)"):
        ppo_policy_loss(b["old"], b["log_prob"], b["adv"], b["mask"], clip_scale=b["scale"][:, :3])
    with pytest.raises(ValueError, match=r"old_log_prob must be \[B, L\], got \(4,\)"):
        ppo_policy_loss(b["old"][:, 0], b["log_prob"], b["adv"], b["mask"])


def test_rollout_is_weights_scale_the_token_loss_as_verl():
    b = policy_batch(4, B=3, L=5)
    plain, _ = ppo_policy_loss(b["old"], b["log_prob"], b["adv"], b["mask"], "token-sum")
    half, _ = ppo_policy_loss(
        b["old"], b["log_prob"], b["adv"], b["mask"], "token-sum", rollout_is_weights=torch.full((3, 5), 0.5, dtype=F64)
    )
    assert half.item() == pytest.approx(plain.item() / 2, rel=1e-12)


def test_basic_telemetry_is_the_full_telemetrys_verl_subset():
    b = policy_batch(5, B=5, L=7, spread=0.6)
    loss, full = ppo_policy_loss(b["old"], b["log_prob"], b["adv"], b["mask"])
    same, basic = ppo_policy_loss(b["old"], b["log_prob"], b["adv"], b["mask"], with_telemetry="basic")
    assert set(basic) == {"pg_loss", "clipfrac_low", "clipfrac_high", "clipfrac_dual", "approx_kl"}
    for key in basic:
        torch.testing.assert_close(basic[key], full[key], rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(same, loss)
    with pytest.raises(ValueError, match="with_telemetry must be True, False or 'basic'"):
        ppo_policy_loss(b["old"], b["log_prob"], b["adv"], b["mask"], with_telemetry="some")
