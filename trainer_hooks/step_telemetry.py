"""Telemetry the loss modules do not produce: per-turn statistics, advantage, ratio and
entropy statistics of a step. Flat dicts of detached tensors, ready for
:meth:`trainer_hooks.client.LedgerClient.log` / ``log_turns``.

Per turn (:func:`turn_telemetry`, each value ``[T+1]``: column ``k`` is turn ``k`` over the
trajectories that have it, the outcome turn of the longest trajectory included):
``ig_mean``, ``ig_std`` (raw IG; 0 on a column no trajectory has as an IG turn),
``normed_ig_mean``, ``clip_scale_mean/std/min/max``, ``clip_scale_frac_low/high`` (at a
bound as in :mod:`trainer_hooks.ops.stats`), ``turn_adv_mean``, ``turn_adv_std``,
``turn_count``. Logged with ``log_turns`` they are the per-turn series of the trial page;
the step-level series with the same names (the estimator's telemetry) stay separate
(``turn`` null), and only those feed the trial's clip-scale summary.

Per turn, over tokens (:func:`turn_token_telemetry`, each ``[K]``, ``K`` = the largest
turn id + 1): ``approx_kl`` (mean of ``-log_ratio``), ``ratio_mean`` and ``entropy_mean``
over the response tokens of turn ``k`` of every trajectory.

Per step (:func:`step_telemetry`, 0-dim): ``adv_mean/std/min/max`` over the response
tokens, ``ratio_std`` (with ``log_ratio``), ``entropy_mean`` (with ``entropy``, e.g.
:func:`token_entropy` of the logits).
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainer_hooks.ops.distributions import categorical_entropy
from trainer_hooks.ops.stats import BOUND_TOLERANCE, masked_moments, stacked_moments

__all__ = ["step_telemetry", "token_entropy", "turn_telemetry", "turn_token_telemetry"]


def turn_telemetry(
    turn_clip_scale: Tensor,
    turn_advantages: Tensor,
    turn_valid: Tensor,
    ig: Tensor,
    ig_mask: Tensor,
    normed_ig: Tensor | None = None,
    *,
    clip_beta: float = 0.3,
) -> dict[str, Tensor]:
    """Per-turn statistics (module doc).

    Args:
        turn_clip_scale, turn_advantages: ``[B, T+1]`` (``A2TGPOAdvantages`` fields).
        turn_valid: ``[B, T+1]`` bool, the turns each trajectory has.
        ig, ig_mask: ``[B, T]`` raw IG and its valid turns; ``normed_ig``: ``[B, T]`` or None.
        clip_beta: the clip-scale amplitude (what "at a bound" means).

    Returns:
        ``name -> [T+1]`` tensors.
    """
    with torch.no_grad():
        B, K = turn_valid.shape
        dt = torch.float64 if turn_clip_scale.dtype == torch.float64 else torch.float32
        pad = torch.nn.functional.pad
        valid = turn_valid.to(torch.bool)
        ig_valid = pad(ig_mask.to(torch.bool), (0, K - ig_mask.shape[1]))
        scale = turn_clip_scale.detach().to(dt)
        tol = BOUND_TOLERANCE * clip_beta
        low = scale <= 1.0 - clip_beta + tol if clip_beta > 0 else torch.zeros_like(valid)
        high = scale >= 1.0 + clip_beta - tol if clip_beta > 0 else torch.zeros_like(valid)
        z = (
            pad(normed_ig.detach().to(dt), (0, K - normed_ig.shape[1]))
            if normed_ig is not None
            else torch.zeros_like(scale)
        )
        values = torch.stack(
            [
                pad(ig.detach().to(dt), (0, K - ig.shape[1])),
                z,
                scale,
                turn_advantages.detach().to(dt),
                low.to(dt),
                high.to(dt),
            ]
        )  # [6, B, K]
        masks = torch.stack([ig_valid, ig_valid, valid, valid, valid, valid])
        mean, std, vmin, vmax = stacked_moments(
            values.transpose(1, 2).reshape(6 * K, B), masks.transpose(1, 2).reshape(6 * K, B)
        )
        mean, std, vmin, vmax = (x.view(6, K) for x in (mean, std, vmin, vmax))
        out = {
            "ig_mean": mean[0],
            "ig_std": std[0],
            "normed_ig_mean": mean[1],
            "clip_scale_mean": mean[2],
            "clip_scale_std": std[2],
            "clip_scale_min": vmin[2],
            "clip_scale_max": vmax[2],
            "clip_scale_frac_low": mean[4],
            "clip_scale_frac_high": mean[5],
            "turn_adv_mean": mean[3],
            "turn_adv_std": std[3],
            "turn_count": valid.sum(0).to(dt),
        }
        if normed_ig is None:
            del out["normed_ig_mean"]
        return out


def token_entropy(logits: Tensor) -> Tensor:
    """Entropy of each position's next-token distribution: ``logits [B, L, V]`` -> ``[B, L]``
    (``-inf`` logits add 0)."""
    with torch.no_grad():
        return categorical_entropy(torch.log_softmax(logits.detach().float(), dim=-1))


def step_telemetry(
    advantages: Tensor, response_mask: Tensor, *, log_ratio: Tensor | None = None, entropy: Tensor | None = None
) -> dict[str, Tensor]:
    """Per-step statistics over the response tokens (module doc); all inputs ``[B, L]``."""
    with torch.no_grad():
        mask = response_mask.to(torch.bool)
        out = masked_moments(advantages.detach().float(), mask, "adv")
        if log_ratio is not None:
            out["ratio_std"] = masked_moments(log_ratio.detach().float().exp(), mask, "ratio")["ratio_std"]
        if entropy is not None:
            out["entropy_mean"] = masked_moments(entropy.detach().float(), mask, "entropy")["entropy_mean"]
        return out


def turn_token_telemetry(
    turn_ids: Tensor, response_mask: Tensor, *, log_ratio: Tensor | None = None, entropy: Tensor | None = None
) -> dict[str, Tensor]:
    """Per-turn token means (module doc). ``turn_ids: [B, L] int`` (-1 outside turns),
    ``response_mask, log_ratio, entropy: [B, L]``. Returns ``name -> [K]`` (0 for a turn
    with no tokens); empty when no token is in a turn."""
    with torch.no_grad():
        valid = response_mask.to(torch.bool) & (turn_ids >= 0)
        if not bool(valid.any()):
            return {}
        index = turn_ids.long().masked_fill(~valid, 0).reshape(-1)
        K = int(turn_ids.max()) + 1
        weight = valid.reshape(-1).to(torch.float32)
        count = torch.zeros(K, device=turn_ids.device).scatter_add_(0, index, weight)
        values: dict[str, Tensor] = {}
        if log_ratio is not None:
            values["approx_kl"] = -log_ratio.detach().float()
            values["ratio_mean"] = log_ratio.detach().float().exp()
        if entropy is not None:
            values["entropy_mean"] = entropy.detach().float()
        n = count.clamp_min(1.0)
        return {
            name: torch.zeros(K, device=turn_ids.device).scatter_add_(
                0, index, v.reshape(-1).masked_fill(~valid.reshape(-1), 0.0)
            )
            / n
            for name, v in values.items()
        }
