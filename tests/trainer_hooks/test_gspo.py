"""GSPO (sequence), GSPO-token and verl's "gspo": verl parity, hand-worked numbers,
equivalence of the two with sequence-constant advantages, loop reference, gradcheck, dtypes."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer_hooks import registry
from trainer_hooks.losses.aggregation import LOSS_AGG_MODES
from trainer_hooks.losses.gspo import gspo_policy_loss, gspo_sequence_policy_loss, gspo_token_policy_loss

try:  # tests/trainer_hooks may or may not be a package
    from . import loop_reference as ref
except ImportError:  # pragma: no cover - depends on the rootdir layout
    import loop_reference as ref

HYPOTHESIS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
F64 = torch.float64
LOSSES = {"gspo_seq": gspo_sequence_policy_loss, "gspo_token": gspo_token_policy_loss}


def verl_gspo(old_log_prob, log_prob, advantages, response_mask, clip_ratio_low, clip_ratio_high):
    """verl's compute_policy_loss_gspo (+ its seq-mean-token-mean agg_loss), written out."""
    mask = response_mask.to(log_prob.dtype)
    negative_approx_kl = log_prob - old_log_prob
    seq_lengths = torch.sum(mask, dim=-1).clamp(min=1)
    negative_approx_kl_seq = torch.sum(negative_approx_kl * mask, dim=-1) / seq_lengths
    log_seq_importance_ratio = log_prob - log_prob.detach() + negative_approx_kl_seq.detach().unsqueeze(-1)
    log_seq_importance_ratio = torch.clamp(log_seq_importance_ratio, max=10.0)
    seq_importance_ratio = torch.exp(log_seq_importance_ratio)
    pg_losses1 = -advantages * seq_importance_ratio
    pg_losses2 = -advantages * torch.clamp(seq_importance_ratio, 1 - clip_ratio_low, 1 + clip_ratio_high)
    pg_losses = torch.maximum(pg_losses1, pg_losses2)
    token_count = mask.sum(-1)
    seq_losses = (pg_losses * mask).sum(-1) / (token_count + 1e-8)
    seq_mask = (token_count > 0).float()
    loss = (seq_losses * seq_mask).sum() / seq_mask.sum()
    pg_clipfrac = (torch.gt(pg_losses2, pg_losses1).float() * mask).sum() / (mask.sum() + 1e-8)
    ppo_kl = (-negative_approx_kl * mask).sum() / (mask.sum() + 1e-8)
    return loss, pg_clipfrac, ppo_kl


def batch(seed: int, B: int = 5, L: int = 8, spread: float = 1e-3, seq_constant_adv: bool = False):
    g = torch.Generator().manual_seed(seed)
    log_prob = -torch.rand(B, L, generator=g, dtype=F64)
    old = log_prob + spread * torch.randn(B, L, generator=g, dtype=F64)
    adv = torch.randn(B, 1 if seq_constant_adv else L, generator=g, dtype=F64).expand(B, L).clone()
    mask = torch.rand(B, L, generator=g) < 0.8
    mask[:, 0] = True
    return old, log_prob, adv, mask


@pytest.mark.parametrize("bounds", [(3e-4, 4e-4), (0.2, 0.2)])
def test_gspo_token_equals_verl_gspo(bounds):
    old, lp, adv, mask = batch(0)
    lp1, lp2 = lp.clone().requires_grad_(True), lp.clone().requires_grad_(True)
    loss, tel = gspo_token_policy_loss(old, lp1, adv, mask, clip_ratio_low=bounds[0], clip_ratio_high=bounds[1])
    vloss, clipfrac, ppo_kl = verl_gspo(old, lp2, adv, mask, *bounds)
    torch.testing.assert_close(loss, vloss, rtol=1e-14, atol=1e-15)
    loss.backward()
    vloss.backward()
    torch.testing.assert_close(lp1.grad, lp2.grad, rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(tel["clipfrac_low"] + tel["clipfrac_high"], clipfrac, rtol=1e-7, atol=0)
    torch.testing.assert_close(tel["approx_kl"], ppo_kl, rtol=1e-7, atol=0)
    if bounds[0] < 0.01:
        assert 0 < clipfrac < 1  # the GSPO bounds do bite on log-ratios of ~1e-3
    else:
        assert clipfrac == 0  # verl's 0.2 / 0.2 never clips a length-normalized ratio here


def test_hand_worked_sequence_ratio_and_default_bounds():
    # one sequence, log-ratios 0.001 and 0.003 -> s = exp(0.002) = 1.002002...
    # (rel 1e-8: seq-mean-token-mean divides by 2 + 1e-8 tokens, as verl)
    old = torch.tensor([[-0.001, -0.003]], dtype=F64)
    mask = torch.ones(1, 2, dtype=torch.bool)
    for name, fn in LOSSES.items():
        lp = torch.zeros(1, 2, dtype=F64, requires_grad=True)
        # A = +1: s > 1 + 4e-4 -> clipped: loss = -(1 + 4e-4), no gradient
        loss, tel = fn(old, lp, torch.ones(1, 2, dtype=F64), mask)
        assert loss.item() == pytest.approx(-1.0004, rel=1e-8), name
        loss.backward()
        assert (lp.grad == 0).all() and tel["clipfrac_high"].item() == 1.0
        # A = -1: max(s, 1.0004) = s (unclipped): loss = e^0.002, gradient -(-1) s / 2 per token
        lp.grad = None
        loss, _ = fn(old, lp, -torch.ones(1, 2, dtype=F64), mask)
        assert loss.item() == pytest.approx(math.exp(0.002), rel=1e-8)
        loss.backward()
        torch.testing.assert_close(lp.grad, torch.full((1, 2), math.exp(0.002) / 2, dtype=F64))
        # with verl's generic 0.2 / 0.2 the A = +1 case is not clipped: loss = -e^0.002
        wide, _ = fn(old, lp, torch.ones(1, 2, dtype=F64), mask, clip_ratio_low=0.2, clip_ratio_high=0.2)
        assert wide.item() == pytest.approx(-math.exp(0.002), rel=1e-8)


def test_dual_clip_off_by_default_and_on_when_asked():
    # mean log-ratio 2 -> s = e^2 = 7.389, A = -1: off -> loss e^2; c = 3 -> min(e^2, 3) = 3
    old = torch.full((1, 3), -2.0, dtype=F64)
    lp = torch.zeros(1, 3, dtype=F64)
    adv = -torch.ones(1, 3, dtype=F64)
    mask = torch.ones(1, 3, dtype=torch.bool)
    for fn in LOSSES.values():
        off, tel_off = fn(old, lp, adv, mask)
        on, tel_on = fn(old, lp, adv, mask, clip_ratio_c=3.0)
        assert off.item() == pytest.approx(math.exp(2.0)) and tel_off["clipfrac_dual"].item() == 0
        assert on.item() == pytest.approx(3.0) and tel_on["clipfrac_dual"].item() == 1


def test_log_ratio_clamped_at_10_like_verl():
    old = torch.full((1, 2), -30.0, dtype=F64)
    lp = torch.zeros(1, 2, dtype=F64)
    for fn in LOSSES.values():
        loss, tel = fn(old, lp, -torch.ones(1, 2, dtype=F64), torch.ones(1, 2, dtype=torch.bool))
        assert loss.item() == pytest.approx(math.exp(10.0)) and tel["ratio_max"].item() == pytest.approx(math.exp(10))


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_sequence_and_token_variants_agree_for_sequence_advantages(mode):
    old, lp, adv, mask = batch(1, seq_constant_adv=True)
    lp1, lp2 = lp.clone().requires_grad_(True), lp.clone().requires_grad_(True)
    seq, _ = gspo_sequence_policy_loss(old, lp1, adv, mask, mode)
    tok, _ = gspo_token_policy_loss(old, lp2, adv, mask, mode)
    torch.testing.assert_close(seq, tok, rtol=1e-13, atol=1e-15)
    seq.backward()
    tok.backward()
    torch.testing.assert_close(lp1.grad, lp2.grad, rtol=1e-12, atol=1e-15)


def test_clip_scale_widens_the_sequence_bounds():
    old = torch.tensor([[-0.001, -0.003]], dtype=F64)
    lp = torch.zeros(1, 2, dtype=F64)
    adv = torch.ones(1, 2, dtype=F64)
    mask = torch.ones(1, 2, dtype=torch.bool)
    # scale 10 -> upper 1 + 4e-3 > e^0.002: no clip; scale 2 -> 1.0008: clipped at 1.0008
    for fn in LOSSES.values():
        assert fn(old, lp, adv, mask, clip_scale=torch.full((1, 2), 10.0, dtype=F64))[0].item() == pytest.approx(
            -math.exp(0.002)
        )
        assert fn(old, lp, adv, mask, clip_scale=torch.full((1, 2), 2.0, dtype=F64))[0].item() == pytest.approx(-1.0008)


@HYPOTHESIS
@given(
    seed=st.integers(0, 2**31),
    B=st.integers(1, 5),
    L=st.integers(1, 8),
    name=st.sampled_from(sorted(LOSSES)),
    mode=st.sampled_from(LOSS_AGG_MODES),
    dual=st.sampled_from([None, 3.0]),
    use_scale=st.booleans(),
    dtype=st.sampled_from([torch.float64, torch.float32]),
)
def test_matches_loop_reference(seed, B, L, name, mode, dual, use_scale, dtype):
    old, lp, adv, mask = batch(seed, B, L, spread=0.3 if dual else 1e-3)
    scale = (
        (1 + 0.5 * torch.rand(B, L, generator=torch.Generator().manual_seed(seed), dtype=F64)) if use_scale else None
    )
    conv = lambda x: None if x is None else x.to(dtype)  # noqa: E731
    loss, _ = LOSSES[name](conv(old), conv(lp), conv(adv), mask, mode, clip_ratio_c=dual, clip_scale=conv(scale))
    as_list = lambda x: None if x is None else x.to(dtype).double().tolist()  # noqa: E731
    reference = ref.gspo_seq_loss if name == "gspo_seq" else ref.gspo_token_loss
    expected = reference(
        as_list(old), as_list(lp), as_list(adv), mask.tolist(), mode=mode, clip_ratio_c=dual, clip_scale=as_list(scale)
    )
    tol = dict(rel=1e-6, abs=1e-6) if dtype == torch.float64 else dict(rel=1e-4, abs=1e-4)
    assert loss.item() == pytest.approx(expected, **tol)


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_gradcheck(name, mode):
    old, lp, adv, mask = batch(2, B=3, L=5, spread=0.05, seq_constant_adv=True)
    lp = lp.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: LOSSES[name](old, x, adv, mask, mode, clip_ratio_c=3.0)[0], (lp,))


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_bf16_inputs_and_fully_masked_rows(name):
    old, lp, adv, mask = batch(3, spread=0.05)
    mask[2] = False
    lp16 = lp.bfloat16().requires_grad_(True)
    l16, _ = LOSSES[name](old.bfloat16(), lp16, adv.bfloat16(), mask)
    l32, _ = LOSSES[name](old.bfloat16().float(), lp.bfloat16().float(), adv.bfloat16().float(), mask)
    assert l16.dtype == torch.float32
    torch.testing.assert_close(l16, l32, rtol=1e-6, atol=1e-7)
    l16.backward()
    assert torch.isfinite(lp16.grad.float()).all() and (lp16.grad[2] == 0).all()
    empty, tel = LOSSES[name](old, lp, adv, torch.zeros_like(mask))
    assert empty.item() == 0.0 and all(torch.isfinite(v) for v in tel.values())


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_verls_gspo_aggregates_seq_mean_token_mean_whatever_the_mode(mode):
    # verl b178a3cd's compute_policy_loss_gspo passes loss_agg_mode="seq-mean-token-mean" to
    # agg_loss, and takes its bounds from the actor config (clip_ratio 0.2 by default)
    old, lp, adv, mask = batch(5, spread=0.3)
    lp1, lp2 = lp.clone().requires_grad_(True), lp.clone().requires_grad_(True)
    loss, _ = gspo_policy_loss(old, lp1, adv, mask, mode)
    vloss, _, _ = verl_gspo(old, lp2, adv, mask, 0.2, 0.2)
    torch.testing.assert_close(loss, vloss, rtol=1e-14, atol=1e-15)
    loss.backward()
    vloss.backward()
    torch.testing.assert_close(lp1.grad, lp2.grad, rtol=1e-14, atol=1e-15)
    # verl 0.9.1 uses the mode it is given
    for kwargs in ({"honor_loss_agg_mode": True}, {"compat": "verl-0.9.1"}):
        honoured, _ = gspo_policy_loss(old, lp, adv, mask, mode, clip_ratio_low=3e-4, clip_ratio_high=4e-4, **kwargs)
        same = gspo_token_policy_loss(old, lp, adv, mask, mode, compat=kwargs.get("compat"))[0]
        torch.testing.assert_close(honoured, same)


def test_rollout_correction_weights_multiply_the_token_loss():
    old, lp, adv, mask = batch(6)
    plain, _ = gspo_token_policy_loss(old, lp, adv, mask, "token-sum")
    doubled, _ = gspo_token_policy_loss(old, lp, adv, mask, "token-sum", rollout_is_weights=torch.full_like(lp, 2.0))
    assert doubled.item() == pytest.approx(2 * plain.item(), rel=1e-12)
    weights = torch.ones_like(lp)
    weights[0] = 0.0  # row 0 out: the rest's token sum (each row's ratio is its own)
    rest, _ = gspo_token_policy_loss(old[1:], lp[1:], adv[1:], mask[1:], "token-sum")
    assert gspo_token_policy_loss(old, lp, adv, mask, "token-sum", rollout_is_weights=weights)[0].item() == (
        pytest.approx(rest.item(), rel=1e-12)
    )


def test_a_per_sequence_advantage_is_an_error_not_a_broadcast():
    # B == L: a [B] advantage would broadcast as a row, silently
    old, lp, adv, mask = batch(7, B=4, L=4)
    for fn in (gspo_policy_loss, gspo_token_policy_loss, gspo_sequence_policy_loss):
        with pytest.raises(ValueError, match=r"advantages must be \[B, L\] = \(4, 4\), got \(4,\); a per-sequence"):
            fn(old, lp, adv[:, 0], mask)
    with pytest.raises(ValueError, match=r"log_prob \(4, 3\) must match old_log_prob \(4, 4\)"):
        gspo_token_policy_loss(old, lp[:, :3], adv, mask)


def test_registered_and_telemetry_keys():
    assert registry.get_policy_loss("gspo") is gspo_policy_loss
    assert registry.get_policy_loss("gspo_seq") is gspo_sequence_policy_loss
    assert registry.get_policy_loss("gspo_token") is gspo_token_policy_loss
    old, lp, adv, mask = batch(4)
    _, tel = gspo_token_policy_loss(old, lp, adv, mask)
    assert {
        "clipfrac_low",
        "clipfrac_high",
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
    } <= set(tel)
    assert all(v.dim() == 0 for v in tel.values())
