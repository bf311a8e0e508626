"""GSPO policy losses (Zheng et al. 2025, arXiv 2507.18071), named as their upstreams name them.

All use the length-normalized sequence importance ratio
``s_i = exp(mean_t (log pi(y_it) - log pi_old(y_it)))`` over the sequence's masked tokens.

``"gspo"`` — :func:`gspo_policy_loss`, verl's ``gspo`` policy loss
    (``verl/trainer/ppo/core_algos.py::compute_policy_loss_gspo``): the GSPO-token ratio
    below, and the aggregation forced to ``"seq-mean-token-mean"`` whatever
    ``loss_agg_mode`` says, as verl b178a3cd does (``honor_loss_agg_mode=True`` or
    ``compat="verl-0.9.1"`` uses the mode given, as the 0.9.1 release does). Clip bounds are verl's config's (``clip_ratio`` 0.2 unless overridden; the
    GSPO recipe sets 3e-4 / 4e-4).
``"gspo_token"`` — :func:`gspo_token_policy_loss`, the paper's GSPO-token: per token
    ``log s_it = sg[log s_i] + log pi_t - sg[log pi_t]`` (value = the sequence ratio,
    gradient token-local) with per-token advantages, ``clamp(max=10)`` of the log ratio
    before ``exp`` (verl's), aggregated with the ``loss_agg_mode`` given.
``"gspo_seq"`` — :func:`gspo_sequence_policy_loss`, the paper's sequence-level GSPO:
    ``s_i`` is differentiated as is, the advantage is the sequence's (masked mean of the
    per-token advantages, which GSPO sets constant per sequence) and every token of the
    sequence carries the sequence's clipped loss, so ``seq-mean-token-mean`` is the
    paper's ``1/G sum_i``. With advantages constant per sequence its value and gradient
    equal ``"gspo_token"``'s. (This was ``"gspo"`` before; that name is verl's.)

Defaults chosen where sources disagree (all are arguments):
    * clip bounds of ``gspo_token`` / ``gspo_seq``: ``clip_ratio_low=3e-4``,
      ``clip_ratio_high=4e-4`` — the GSPO paper's and verl's GSPO recipe. verl's
      actor-config default (0.2 / 0.2) is a *token*-ratio range; a length-normalized
      ratio moves by ~|mean log-ratio| (1e-4 .. 1e-3 per step), so 0.2 never clips.
      ``gspo`` takes verl's ``clip_ratio`` (0.2) with ``clip_ratio_low/high`` overrides,
      as verl's config does.
    * aggregation: ``"seq-mean-token-mean"`` by default everywhere (the paper); only
      ``gspo`` ignores the argument (verl b178a3cd), unless ``honor_loss_agg_mode``.
    * dual clip off (``clip_ratio_c=None``), as verl's GSPO; pass a ``c > 1`` to enable.
    * ``clip_scale``: optional ``[B, L]`` multiplier of the clip bounds (the SmallGain–KL
      allocator's clip shaping, :mod:`trainer_hooks.allocator`); the sequence variant uses
      its masked mean over the sequence.
    * ``rollout_is_weights``: optional ``[B, L]`` weights multiplying the per-token loss
      (verl's rollout correction), applied before aggregation as verl does.

Returns ``(loss, telemetry)`` with the keys of :mod:`trainer_hooks.losses.ppo`
(``clipfrac_low/high/dual``, ``approx_kl`` = masked mean of the *token* ``old - new``
log-ratio (verl's ``ppo_kl``), ``ratio_mean/min/max`` of the ratio used,
``clip_scale_*``, ``pg_loss``). bf16/fp16 inputs are computed in float32.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from trainer_hooks.compat import resolve_options
from trainer_hooks.losses.aggregation import agg_loss, agg_options
from trainer_hooks.losses.ppo import clipped_surrogate, policy_telemetry
from trainer_hooks.ops.masked import masked_mean
from trainer_hooks.ops.segments import compute_dtype
from trainer_hooks.ops.shapes import check_token_shapes, token_advantages
from trainer_hooks.registry import register_policy_loss

__all__ = [
    "GSPO_LOG_RATIO_MAX",
    "gspo_policy_loss",
    "gspo_sequence_policy_loss",
    "gspo_token_policy_loss",
    "sequence_log_ratio",
]

#: verl clamps the (sequence) log ratio from above at 10 before ``exp``.
GSPO_LOG_RATIO_MAX = 10.0


def sequence_log_ratio(log_prob: Tensor, old_log_prob: Tensor, response_mask: Tensor) -> Tensor:
    """``[B]`` length-normalized log ratio ``mean_t(log_prob - old_log_prob)`` over the mask
    (0 for a fully masked row). Differentiable in ``log_prob``."""
    return masked_mean(log_prob - old_log_prob, response_mask.to(torch.bool), dim=-1)


@register_policy_loss("gspo_token")
def gspo_token_policy_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    *,
    clip_ratio_low: float = 3e-4,
    clip_ratio_high: float = 4e-4,
    clip_ratio_c: float | None = None,
    clip_scale: Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: Mapping[str, Any] | None = None,
    clip_beta: float = 0.3,
    rollout_is_weights: Tensor | None = None,
    compat: str | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """GSPO-token loss.

    Args:
        old_log_prob, log_prob, advantages, response_mask: ``[B, L]`` (mask bool/0-1).
        loss_agg_mode: :func:`agg_loss` mode, default ``"seq-mean-token-mean"``.
        clip_ratio_low, clip_ratio_high: clip range of the sequence ratio (3e-4 / 4e-4).
        clip_ratio_c: dual-clip constant, ``None`` (default) = off.
        clip_scale: optional ``[B, L]`` per-token multiplier of both clip ranges.
        loss_scale_factor: for ``seq-mean-token-sum-norm``.
        global_batch: verl's ``global_batch_info`` (``dp_size``, ``batch_num_tokens``,
            ``global_batch_size``): normalise over the global batch (see :func:`agg_loss`).
        clip_beta: amplitude for the ``clip_scale_frac_*`` telemetry.
        rollout_is_weights: optional ``[B, L]`` per-token weights of the loss (verl's).
        compat: passed to :func:`agg_loss` (which verl's ``seq-mean-token-sum-norm``).

    Returns:
        ``(loss, telemetry)``.
    """
    check_token_shapes(
        "gspo_token_policy_loss",
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        response_mask=response_mask,
        clip_scale=clip_scale,
        rollout_is_weights=rollout_is_weights,
    )
    dt = compute_dtype(log_prob)
    lp, old = log_prob.to(dt), old_log_prob.to(dt)
    adv = token_advantages("gspo_token_policy_loss", advantages, lp).to(dt)
    mask = response_mask.to(torch.bool)
    seq = sequence_log_ratio(lp.detach(), old, mask)
    log_ratio = torch.clamp(lp - lp.detach() + seq.unsqueeze(-1), max=GSPO_LOG_RATIO_MAX)
    ratio = torch.exp(log_ratio)
    loss_mat, maps = clipped_surrogate(
        ratio,
        adv,
        clip_ratio_low=clip_ratio_low,
        clip_ratio_high=clip_ratio_high,
        clip_ratio_c=clip_ratio_c,
        clip_scale=clip_scale,
    )
    if rollout_is_weights is not None:
        loss_mat = loss_mat * rollout_is_weights.to(dt)
    loss = agg_loss(loss_mat, mask, loss_agg_mode, **agg_options(global_batch, loss_scale_factor, compat))
    telemetry = policy_telemetry(
        loss=loss, ratio=ratio, log_ratio=lp - old, mask=mask, maps=maps, clip_scale=clip_scale, clip_beta=clip_beta
    )
    return loss, telemetry


@register_policy_loss("gspo")
def gspo_policy_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    honor_loss_agg_mode: bool | None = None,
    compat: str | None = None,
    **kwargs: Any,
) -> tuple[Tensor, dict[str, Tensor]]:
    """verl's ``gspo`` policy loss: :func:`gspo_token_policy_loss` with verl's clip config
    and aggregation.

    Args:
        old_log_prob, log_prob, advantages, response_mask: ``[B, L]``.
        loss_agg_mode: ignored — ``"seq-mean-token-mean"`` is used, as verl b178a3cd —
            unless ``honor_loss_agg_mode`` (verl 0.9.1 honours it).
        clip_ratio: verl's ``actor.clip_ratio`` (0.2); ``clip_ratio_low`` /
            ``clip_ratio_high`` override either side (verl's GSPO recipe: 3e-4 / 4e-4).
        honor_loss_agg_mode: use ``loss_agg_mode`` (default False).
        compat: ``"verl"`` (force seq-mean-token-mean) or ``"verl-0.9.1"`` (honour it).
        **kwargs: further :func:`gspo_token_policy_loss` keywords (``clip_scale``,
            ``rollout_is_weights``, ``global_batch``, ``loss_scale_factor``, ...).
    """
    honour = resolve_options(
        "gspo_policy_loss",
        compat,
        {"verl": {"honour": False}, "verl-0.9.1": {"honour": True}},
        {"honour": False},
        {"honour": honor_loss_agg_mode},
    )["honour"]
    return gspo_token_policy_loss(
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        loss_agg_mode if honour else "seq-mean-token-mean",
        clip_ratio_low=clip_ratio if clip_ratio_low is None else clip_ratio_low,
        clip_ratio_high=clip_ratio if clip_ratio_high is None else clip_ratio_high,
        compat=compat,
        **kwargs,
    )


@register_policy_loss("gspo_seq")
def gspo_sequence_policy_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    *,
    clip_ratio_low: float = 3e-4,
    clip_ratio_high: float = 4e-4,
    clip_ratio_c: float | None = None,
    clip_scale: Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: Mapping[str, Any] | None = None,
    clip_beta: float = 0.3,
    compat: str | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The paper's sequence-level GSPO loss (registered as ``"gspo_seq"``); arguments and
    defaults as :func:`gspo_token_policy_loss`.

    The per-sequence loss ``max(-A_i s_i, -A_i clip(s_i))`` (``A_i`` = masked mean of the
    row's advantages, ``s_i`` differentiated through all its tokens) is written on every
    masked token of the row, then aggregated with ``loss_agg_mode``; telemetry fractions
    are over tokens (each token inherits its sequence's clip state).

    ``compat`` is passed to :func:`agg_loss` (which verl's ``seq-mean-token-sum-norm``).
    """
    check_token_shapes(
        "gspo_sequence_policy_loss",
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        response_mask=response_mask,
        clip_scale=clip_scale,
    )
    dt = compute_dtype(log_prob)
    lp, old = log_prob.to(dt), old_log_prob.to(dt)
    adv = token_advantages("gspo_sequence_policy_loss", advantages, lp).to(dt)
    mask = response_mask.to(torch.bool)
    seq_log_ratio = torch.clamp(sequence_log_ratio(lp, old, mask), max=GSPO_LOG_RATIO_MAX)
    seq_ratio = torch.exp(seq_log_ratio).unsqueeze(-1)
    seq_adv = masked_mean(adv, mask, dim=-1).unsqueeze(-1)
    seq_scale = None
    if clip_scale is not None:
        seq_scale = masked_mean(clip_scale.to(dt), mask, dim=-1).unsqueeze(-1)
    seq_loss, seq_maps = clipped_surrogate(
        seq_ratio,
        seq_adv,
        clip_ratio_low=clip_ratio_low,
        clip_ratio_high=clip_ratio_high,
        clip_ratio_c=clip_ratio_c,
        clip_scale=seq_scale,
    )
    loss_mat = seq_loss.expand_as(lp)
    loss = agg_loss(loss_mat, mask, loss_agg_mode, **agg_options(global_batch, loss_scale_factor, compat))
    maps = {k: v.expand_as(mask) for k, v in seq_maps.items()}
    telemetry = policy_telemetry(
        loss=loss,
        ratio=seq_ratio.expand_as(lp),
        log_ratio=lp - old,
        mask=mask,
        maps=maps,
        clip_scale=None if seq_scale is None else seq_scale.expand_as(lp),
        clip_beta=clip_beta,
    )
    return loss, telemetry
