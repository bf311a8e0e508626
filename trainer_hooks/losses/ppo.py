"""PPO clipped policy loss with a per-token clip scale, dual clip and token- or turn-level
importance ratio — verl's ``vanilla`` loss generalised for A²TGPO's adaptive turn clipping.

Registered policy losses (``trainer_hooks.registry``):
    ``"ppo"`` / ``"vanilla"`` — :func:`ppo_policy_loss` (token-level ratio, no clip scale
    unless given). With ``clip_scale=None`` (or all ones) and ``clip_ratio_c=3.0`` it is
    verl's ``compute_policy_loss_vanilla`` exactly: log-ratio clamped to ±20 before
    ``exp``, dual clip on negative advantages.
    ``"a2tgpo"`` — :func:`a2tgpo_policy_loss`: the same loss with ``ratio_level="turn"``
    and the adaptive clip scale from :func:`~trainer_hooks.advantages.a2tgpo.
    compute_a2tgpo_advantages` (verl_atgpo's ``dynamic_clip``); without ``clip_scale`` it
    raises rather than silently being ``"ppo"``.

The loss per token (``r`` = ratio, ``A`` = advantage, ``s`` = clip scale)::

    lower = 1 - clip_ratio_low * s,   upper = 1 + clip_ratio_high * s
    l = max(-A r, -A clamp(r, lower, upper))
    l = min(l, -A c)   where A < 0, if dual clip (c = clip_ratio_c) is on

and the scalar is :func:`~trainer_hooks.losses.aggregation.agg_loss` over ``response_mask``.

Dual clip: on by default (``clip_ratio_c=3.0``, verl's default; it bounds the loss of a
negative-advantage token whose ratio exploded); ``clip_ratio_c=None`` turns it off.

Turn-level ratio (``ratio_level="turn"``, needs ``turn_ids``): every token of a turn takes
the value ``exp(mean over the turn's tokens of the clamped log-ratio)``; tokens of no turn
(negative id) keep their token ratio. Gradient construction (decided here, as GSPO-token):
``log r_t = log_ratio_t + sg[mean_turn(log_ratio) - log_ratio_t]`` — the value is the
turn's, the gradient is token-local (that of the token's own clamped log-ratio, i.e.
GSPO-token's ``sg[log r_turn] + log pi_t - sg[log pi_t]`` inside the ±20 clamp). Every
aggregation mode weights the tokens of one row equally, and when the advantage is
constant over a turn (A²TGPO's case) all its tokens share ratio, advantage and clip
branch, so the total gradient then equals that of the plainly differentiated turn mean
(tested); with per-token advantages inside a turn each token's own advantage picks its
own clip branch.

Gradient: :func:`clipped_surrogate` takes the loss's elementwise derivative in the forward
pass (a custom autograd function), so the backward is one multiplication instead of the
replayed max / min / clamp / where chain; it equals autograd's through the formula except
at exact ties of a clip with the unclipped term (kinks), and the clip scale is a constant
of the loss. With the turn-level ratio the turn means are pooled by 1-D scatters and the
ratio's value goes in with the gradient routed to the token's own log-ratio, so no
autograd op runs per turn.

Telemetry (flat ``dict[str, Tensor]``, 0-dim, detached):
    ``clipfrac_high`` — fraction of ``response_mask`` tokens with ``A > 0`` whose clipped
        term wins (``r > upper``: the upper clip is active); ``clipfrac_low`` — the same
        with ``A < 0`` (``r < lower``). ``clipfrac_low + clipfrac_high`` is verl's
        ``pg_clipfrac`` (``pg_losses2 > pg_losses1``) exactly.
    ``clipfrac_dual`` — ``A < 0`` and the dual clip active (verl's ``pg_clipfrac_lower``).
    ``approx_kl`` — masked mean of ``old_log_prob - log_prob`` (clamped; verl's ``ppo_kl``).
    ``ratio_mean``, ``ratio_min``, ``ratio_max`` — of the ratio used, over masked tokens.
    ``clip_scale_mean/std/min/max``, ``clip_scale_frac_low/high`` — over turns when
        ``turn_ids`` is given (one value per turn with masked tokens), else over tokens;
        "at bound" = within ``1e-3 * clip_beta`` of ``1 ± clip_beta``
        (:mod:`trainer_hooks.ops.stats`).
    ``ig_mean``, ``ig_std`` — only when per-turn ``ig`` / ``ig_mask`` are passed.
    ``pg_loss`` — the returned loss, detached.

``with_telemetry=False`` skips all of it (returns ``{}``): the adaptive clip itself costs
about what the plain clipped loss costs, the statistics add passes over ``[B, L]``.
``with_telemetry="basic"`` computes only ``pg_loss``, ``clipfrac_low/high/dual`` and
``approx_kl`` (what verl reports as ``pg_clipfrac``, ``pg_clipfrac_lower``, ``ppo_kl``)
in two reductions.

Dtypes: bf16/fp16 inputs are computed in float32 and the loss is returned in float32
(the optimizer's loss scale wants it); float64 stays float64 (gradcheck).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from trainer_hooks.losses.aggregation import agg_loss, agg_options
from trainer_hooks.ops.segments import TurnIndex, compute_dtype, turn_index, turn_reduce
from trainer_hooks.ops.shapes import check_token_shapes, token_advantages
from trainer_hooks.ops.stats import clip_scale_entries, clip_scale_stats, masked_moments
from trainer_hooks.registry import register_policy_loss

__all__ = [
    "LOG_RATIO_CLAMP",
    "a2tgpo_policy_loss",
    "basic_policy_telemetry",
    "clipped_surrogate",
    "policy_telemetry",
    "ppo_policy_loss",
    "turn_level_log_ratio",
]

#: verl clamps ``log_prob - old_log_prob`` to ±20 before ``exp`` (ratio stays finite).
LOG_RATIO_CLAMP = 20.0


def _num_turns(turn_ids: Tensor) -> int:
    # One host sync per loss call, to size the per-turn scatter.
    return max(int(turn_ids.max().item()) + 1, 1) if turn_ids.numel() else 1


def turn_level_log_ratio(
    log_ratio: Tensor, turn_ids: Tensor, mask: Tensor, turn_mean: Tensor | None = None, index: TurnIndex | None = None
) -> Tensor:
    """Turn-level log importance ratio with token-local gradient.

    Args:
        log_ratio: ``[B, L]`` clamped token log-ratios ``log pi - log pi_old`` (with grad).
        turn_ids: ``[B, L] int``, ``-1`` outside turns. mask: ``[B, L]`` tokens that count.
        turn_mean: optional precomputed ``[B, K]`` turn means of ``log_ratio`` over ``mask``.
        index: optional :func:`~trainer_hooks.ops.segments.turn_index` to reuse.

    Returns:
        ``[B, L]``: value ``mean over the turn of log_ratio`` on turn tokens (``log_ratio``
        elsewhere); gradient that of the token's own ``log_ratio``, i.e.
        ``log_ratio + sg[turn_mean - log_ratio]``.
    """
    value = _turn_log_ratio_value(log_ratio.detach(), turn_ids, mask, turn_mean, index)
    return log_ratio + (value - log_ratio.detach())


def _turn_log_ratio_value(
    log_ratio: Tensor, turn_ids: Tensor, mask: Tensor, turn_mean: Tensor | None, index: TurnIndex | None
) -> Tensor:
    """The value of :func:`turn_level_log_ratio` (no gradient): ``[B, L]``."""
    if index is None:
        index = turn_index(turn_ids, _num_turns(turn_ids) if turn_mean is None else turn_mean.shape[1], mask)
    if turn_mean is None:
        turn_mean, _ = turn_reduce(log_ratio, turn_ids, index.num_turns, mask, index=index)
    # The sentinel slot (tokens of no turn) reads a 0 that the where() then discards.
    table = F.pad(turn_mean.detach().reshape(-1), (0, 1))
    per_token = table.index_select(0, index.flat).view_as(log_ratio)
    return torch.where(index.valid, per_token, log_ratio)


class _Surrogate(torch.autograd.Function):
    """The clipped loss ``[B, L]`` of :func:`clipped_surrogate` with its elementwise
    derivative taken in the forward pass: the backward is one multiplication, where
    autograd would replay the max / min / clamp / where chain (most of the loss's cost)."""

    @staticmethod
    def forward(
        ctx: Any,
        x: Tensor,
        ratio: Tensor,
        advantages: Tensor,
        lower: Any,
        upper: Any,
        clip_ratio_c: float | None,
        x_is_log_ratio: bool,
        with_maps: bool,
    ) -> tuple[Tensor, ...]:
        clamped = torch.clamp(ratio, lower, upper)
        neg_adv = -advantages
        pg1 = neg_adv * ratio
        pg2 = neg_adv * clamped
        clip1 = torch.maximum(pg1, pg2)
        clipped = pg2 > pg1  # the clipped term is in the loss (the upper or lower clip is active)
        negative = advantages < 0
        if clip_ratio_c is None:
            loss, dual, through = clip1, None, ~clipped
        else:
            pg3 = neg_adv * clip_ratio_c
            loss = torch.where(negative, torch.minimum(pg3, clip1), clip1)
            dual = negative & (clip1 > pg3)
            through = ~(clipped | dual)
        # d loss / d ratio: -A where the unclipped term is the loss, 0 where a clip is
        # (at an exact tie, a point with no derivative, the unclipped side's). A product,
        # not a where(): CPU where() branches per element, slow on a scattered mask.
        slope = neg_adv * through
        adv_slope = None
        if ctx.needs_input_grad[2]:  # d loss / d A: -r, -clamp(r) or -c by branch
            adv_slope = -torch.where(clipped, clamped, ratio)
            if dual is not None and clip_ratio_c is not None:  # dual is set iff clip_ratio_c is
                adv_slope = torch.where(dual, -clip_ratio_c, adv_slope)
        ctx.save_for_backward(slope * ratio if x_is_log_ratio else slope, adv_slope)
        if not with_maps:
            return (loss,)
        if dual is None:
            dual = torch.zeros_like(clipped)
        # clipped implies A != 0, so "not negative" is "positive" here.
        maps = (clipped & ~negative, clipped & negative, dual)
        ctx.mark_non_differentiable(*maps)
        return (loss, *maps)

    @staticmethod
    def backward(ctx: Any, grad: Tensor, *unused: Any) -> tuple[Tensor | None, ...]:
        slope, adv_slope = ctx.saved_tensors
        return (
            grad * slope if ctx.needs_input_grad[0] else None,
            None,
            grad * adv_slope if adv_slope is not None else None,
            None,
            None,
            None,
            None,
            None,
        )


def clipped_surrogate(
    ratio: Tensor,
    advantages: Tensor,
    *,
    clip_ratio_low: float,
    clip_ratio_high: float,
    clip_ratio_c: float | None,
    clip_scale: Tensor | None = None,
    with_maps: bool = True,
    log_ratio: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Per-token PPO clipped loss ``[B, L]`` and the boolean maps telemetry needs.

    ``ratio, advantages, clip_scale: [B, L]`` (any equal shapes). Bounds ``1 - low * s`` /
    ``1 + high * s``; with ``clip_scale=None`` Python-float bounds are used so that the
    result is bitwise verl's. Returns ``(loss_mat, maps)`` with bool maps ``clip_high``
    (``A > 0`` and the clipped term wins: the upper clip is active), ``clip_low`` (the same
    with ``A < 0``: lower clip) and ``dual`` (``A < 0`` and the dual clip is active); the
    first two are verl's ``pg_losses2 > pg_losses1`` split by the advantage's sign.
    ``with_maps=False`` skips them (empty dict).

    Gradients flow into ``ratio`` and ``advantages``; the clip scale is a constant of the
    loss. ``log_ratio``: ``[B, L]``, when given the gradient flows into it instead, as
    ``d ratio / d log_ratio = ratio`` (``ratio``'s value is taken as given: the turn-level
    ratio, whose gradient is token-local). The derivative is computed in the forward pass
    (:class:`_Surrogate`); it equals autograd's through the formula, except at exact ties
    of a clip with the unclipped term, where it takes the unclipped side's.
    """
    if clip_ratio_c is not None and not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 for dual-clip PPO, got {clip_ratio_c}")
    if clip_scale is None:
        lower: Any = 1.0 - clip_ratio_low
        upper: Any = 1.0 + clip_ratio_high
    else:
        s = clip_scale.detach().to(ratio.dtype)
        lower, upper = 1.0 - clip_ratio_low * s, 1.0 + clip_ratio_high * s
    x = ratio if log_ratio is None else log_ratio
    out = _Surrogate.apply(x, ratio.detach(), advantages, lower, upper, clip_ratio_c, log_ratio is not None, with_maps)
    if not with_maps:
        return out[0], {}
    loss, clip_high, clip_low, dual = out
    return loss, {"clip_high": clip_high, "clip_low": clip_low, "dual": dual}


def policy_telemetry(
    *,
    loss: Tensor,
    ratio: Tensor,
    log_ratio: Tensor,
    mask: Tensor,
    maps: dict[str, Tensor],
    clip_scale: Tensor | None,
    clip_beta: float,
    turn_ids: Tensor | None = None,
    turn_scale: Tensor | None = None,
    turn_count: Tensor | None = None,
    ig: Tensor | None = None,
    ig_mask: Tensor | None = None,
) -> dict[str, Tensor]:
    """The flat telemetry dict shared by every policy loss here (see module docstring).

    ``ratio, log_ratio, mask, maps, clip_scale: [B, L]``. Clip-scale statistics are per
    turn — from ``turn_scale, turn_count: [B, K]`` when the caller already pooled them,
    else pooled here through ``turn_ids: [B, L]`` — and per token without turn ids.
    """
    with torch.no_grad():
        if clip_scale is not None and turn_scale is None and turn_ids is not None:
            turn_scale, turn_count = turn_reduce(clip_scale.detach(), turn_ids, _num_turns(turn_ids), mask)
        # Reduce over the selected tokens only: one nonzero, then plain (unmasked) reductions
        # on the compacted values — far fewer full-size passes than masking each quantity.
        m = mask.to(torch.bool)
        selected = m.reshape(-1).nonzero().squeeze(1)
        r = ratio.detach().reshape(-1).index_select(0, selected)
        f = r.dtype
        n = torch.tensor(float(selected.numel()), dtype=f, device=r.device)
        n1 = n.clamp_min(1.0)
        one = torch.ones((), dtype=f, device=r.device)
        has = selected.numel() > 0
        picked = (
            torch.stack([maps["clip_low"], maps["clip_high"], maps["dual"]]).reshape(3, -1).index_select(1, selected)
        )
        fractions = picked.sum(1).to(f) / n1
        r_min, r_max = r.aminmax() if has else (one, one)
        out: dict[str, Tensor] = {
            "pg_loss": loss.detach(),
            "clipfrac_low": fractions[0],
            "clipfrac_high": fractions[1],
            "clipfrac_dual": fractions[2],
            "approx_kl": -log_ratio.detach().reshape(-1).index_select(0, selected).to(f).sum() / n1,
            "ratio_mean": r.sum() / n1 if has else one,
            "ratio_min": r_min,
            "ratio_max": r_max,
        }
        if clip_scale is None:
            zero = one * 0
            out.update(clip_scale_entries(one, zero, one, one, zero, zero))
        elif turn_scale is not None and turn_count is not None:
            out.update(clip_scale_stats(turn_scale, turn_count > 0, clip_beta))
        else:
            scale = clip_scale.detach().reshape(-1).index_select(0, selected).to(f)
            out.update(clip_scale_stats(scale, torch.ones_like(scale, dtype=torch.bool), clip_beta))
        if ig is not None:
            ig_valid = torch.ones_like(ig, dtype=torch.bool) if ig_mask is None else ig_mask.to(torch.bool)
            moments = masked_moments(ig.detach().to(f), ig_valid, "ig")
            out.update({"ig_mean": moments["ig_mean"], "ig_std": moments["ig_std"]})
        return out


def basic_policy_telemetry(loss: Tensor, log_ratio: Tensor, mask: Tensor, maps: dict[str, Tensor]) -> dict[str, Tensor]:
    """``pg_loss``, ``clipfrac_low/high/dual`` and ``approx_kl`` alone (``[B, L]`` inputs):
    the clip counts in one reduction of the stacked maps, the KL in another."""
    with torch.no_grad():
        m = mask.to(torch.bool)
        n = m.sum().to(log_ratio.dtype).clamp_min(1.0)
        counts = (torch.stack([maps["clip_low"], maps["clip_high"], maps["dual"]]) & m).sum((1, 2)).to(log_ratio.dtype)
        fractions = counts / n
        return {
            "pg_loss": loss.detach(),
            "clipfrac_low": fractions[0],
            "clipfrac_high": fractions[1],
            "clipfrac_dual": fractions[2],
            "approx_kl": -torch.where(m, log_ratio.detach(), 0.0).sum() / n,
        }


@register_policy_loss("vanilla")
@register_policy_loss("ppo")
def ppo_policy_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float | None = 3.0,
    clip_scale: Tensor | None = None,
    ratio_level: str = "token",
    turn_ids: Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: Mapping[str, Any] | None = None,
    clip_beta: float = 0.3,
    ig: Tensor | None = None,
    ig_mask: Tensor | None = None,
    with_telemetry: bool | str = True,
    rollout_is_weights: Tensor | None = None,
    compat: str | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO clipped policy loss (verl ``vanilla`` + per-token clip scale + turn-level ratio).

    Args:
        old_log_prob, log_prob: ``[B, L]`` log-probs of the sampled tokens (behaviour /
            current policy); gradients flow through ``log_prob`` only.
        advantages: ``[B, L]``.
        response_mask: ``[B, L]`` bool/0-1, the tokens in the loss.
        loss_agg_mode: an :func:`agg_loss` mode (default ``"token-mean"``).
        clip_ratio: symmetric clip ``eps`` (default 0.2, verl); ``clip_ratio_low`` /
            ``clip_ratio_high`` override either side (DAPO clip-higher).
        clip_ratio_c: dual-clip constant ``c > 1`` (default 3.0); ``None`` disables.
        clip_scale: optional ``[B, L]`` per-token clip multiplier ``s`` (A²TGPO).
        ratio_level: ``"token"`` (default) or ``"turn"`` (needs ``turn_ids``).
        turn_ids: ``[B, L] int`` turn of each token, ``-1`` outside turns; also makes the
            ``clip_scale_*`` telemetry per turn.
        loss_scale_factor: for ``seq-mean-token-sum-norm`` (default ``L``).
        global_batch: verl's ``global_batch_info`` (``dp_size``, ``batch_num_tokens``,
            ``global_batch_size``): normalise over the global batch (see :func:`agg_loss`).
        clip_beta: amplitude used to define "at bound" in the telemetry (default 0.3).
        ig, ig_mask: optional per-turn IG ``[B, T]`` and mask, for ``ig_mean`` / ``ig_std``.
        with_telemetry: compute the telemetry dict (default); ``"basic"`` only the clip
            fractions and ``approx_kl``; ``False`` returns ``{}`` and skips its cost.
        rollout_is_weights: optional ``[B, L]`` weights multiplying the per-token loss
            before aggregation (verl's rollout correction).
        compat: ``"verl"`` (b178a3cd, the default) or ``"verl-0.9.1"``: which verl's
            ``seq-mean-token-sum-norm`` (see :func:`agg_loss`); the loss is otherwise the same.

    Raises:
        ValueError: a tensor that is not ``[B, L]`` like ``log_prob`` (a ``[B]``
            advantage included: it would broadcast as a row when ``B == L``).

    Returns:
        ``(loss, telemetry)``: 0-dim loss (float32 for half inputs) and the flat dict.
    """
    if ratio_level not in ("token", "turn"):
        raise ValueError(f"ratio_level must be 'token' or 'turn', got {ratio_level!r}")
    if ratio_level == "turn" and turn_ids is None:
        raise ValueError("ratio_level='turn' needs turn_ids [B, L]")
    check_token_shapes(
        "ppo_policy_loss",
        log_prob=log_prob,
        old_log_prob=old_log_prob,
        response_mask=response_mask,
        clip_scale=clip_scale,
        turn_ids=turn_ids,
        rollout_is_weights=rollout_is_weights,
    )
    low = clip_ratio if clip_ratio_low is None else clip_ratio_low
    high = clip_ratio if clip_ratio_high is None else clip_ratio_high
    dt = compute_dtype(log_prob)
    lp = log_prob.to(dt)
    # contiguous: a strided view (a column of the advantage pipeline's output, say) makes
    # every elementwise op below several times slower
    adv = token_advantages("ppo_policy_loss", advantages, log_prob).to(dt).contiguous()
    mask = response_mask.to(torch.bool)
    log_ratio = torch.clamp(lp - old_log_prob.to(dt), min=-LOG_RATIO_CLAMP, max=LOG_RATIO_CLAMP)
    scale = None if clip_scale is None else clip_scale.to(dt).contiguous()

    # One scatter pools everything needed per turn: the log-ratio (turn-level ratio) and
    # the clip scale (per-turn telemetry).
    turn_scale = turn_count = None
    used = log_ratio.detach()
    if with_telemetry not in (True, False, "basic"):
        raise ValueError(f"with_telemetry must be True, False or 'basic', got {with_telemetry!r}")
    pool_scale = with_telemetry is True and scale is not None and turn_ids is not None
    # Both reasons to pool imply turn_ids (checked above) and pool_scale a scale: the
    # "is not None" tests are always true here, for the type checker.
    if turn_ids is not None and (ratio_level == "turn" or pool_scale):
        index = turn_index(turn_ids, _num_turns(turn_ids), mask)
        columns = ([log_ratio.detach()] if ratio_level == "turn" else []) + (
            [scale] if scale is not None and pool_scale else []
        )
        pooled, turn_count = turn_reduce(columns, turn_ids, index.num_turns, mask, index=index)
        if ratio_level == "turn":
            used = _turn_log_ratio_value(used, turn_ids, mask, pooled[..., 0], index)
        if pool_scale:
            turn_scale = pooled[..., -1]

    # The ratio's value (turn-level or not); the gradient goes into the token's own
    # log-ratio (turn_level_log_ratio's rule), d ratio / d log_ratio = ratio.
    ratio = torch.exp(used)
    loss_mat, maps = clipped_surrogate(
        ratio,
        adv,
        clip_ratio_low=low,
        clip_ratio_high=high,
        clip_ratio_c=clip_ratio_c,
        clip_scale=scale,
        with_maps=bool(with_telemetry),
        log_ratio=log_ratio,
    )
    if rollout_is_weights is not None:
        loss_mat = loss_mat * rollout_is_weights.to(dt)
    loss = agg_loss(loss_mat, mask, loss_agg_mode, **agg_options(global_batch, loss_scale_factor, compat))
    if not with_telemetry:
        return loss, {}
    if with_telemetry == "basic":
        return loss, basic_policy_telemetry(loss, log_ratio, mask, maps)
    telemetry = policy_telemetry(
        loss=loss,
        ratio=ratio,
        log_ratio=log_ratio,
        mask=mask,
        maps=maps,
        clip_scale=scale,
        clip_beta=clip_beta,
        turn_scale=turn_scale,
        turn_count=turn_count,
        ig=ig,
        ig_mask=ig_mask,
    )
    return loss, telemetry


@register_policy_loss("a2tgpo")
def a2tgpo_policy_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    clip_scale: Tensor | None = None,
    turn_ids: Tensor | None = None,
    ratio_level: str | None = None,
    **kwargs: Any,
) -> tuple[Tensor, dict[str, Tensor]]:
    """A²TGPO's PPO loss: :func:`ppo_policy_loss` with the adaptive per-token ``clip_scale``
    (``[B, L]``, from ``compute_a2tgpo_advantages(...).clip_scale``) and, when ``turn_ids``
    is given, the turn-level importance ratio (``ratio_level`` defaults to ``"turn"`` then,
    else ``"token"``). Other keyword arguments and defaults as :func:`ppo_policy_loss`.

    Raises:
        ValueError: no ``clip_scale``: without it the loss would silently be PPO's (use
            ``"ppo"`` for that), as the verl adapter ``ledger_a2tgpo`` refuses too.
    """
    if clip_scale is None:
        raise ValueError(
            "a2tgpo needs clip_scale=[B, L], A²TGPO's adaptive clip scale "
            "(compute_a2tgpo_advantages(...).clip_scale); without it the loss would silently be PPO's: "
            "pass it, or use the 'ppo' loss"
        )
    if ratio_level is None:
        ratio_level = "turn" if turn_ids is not None else "token"
    return ppo_policy_loss(
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        loss_agg_mode,
        clip_scale=clip_scale,
        turn_ids=turn_ids,
        ratio_level=ratio_level,
        **kwargs,
    )
