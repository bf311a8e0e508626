"""Telemetry reductions shared by the advantage estimators and the losses.

Every telemetry dict in ``trainer_hooks`` is flat ``dict[str, Tensor]`` whose values are
0-dim, detached, float tensors on the input's device (the telemetry client turns them into
JSON numbers). The key names are a contract with that client:

``clip_scale_mean``, ``clip_scale_std``, ``clip_scale_min``, ``clip_scale_max``
    moments of the adaptive clip scale over the population given (turns when turn ids
    are known, else tokens). ``std`` is the biased (population) std; all ``1``/``0``
    defaults when the population is empty.
``clip_scale_frac_low``, ``clip_scale_frac_high``
    fraction of that population *at the bound*: a scale ``c`` counts as at the lower
    bound when ``c <= 1 - beta + 1e-3 * beta`` and at the upper bound when
    ``c >= 1 + beta - 1e-3 * beta`` (``beta`` = the clip-scale amplitude, 0.3 by
    default). With ``c = 1 + beta (2 sigmoid(x) - 1)`` that is ``|x| >= ~7.6``: the turns
    whose normalized IG saturates the sigmoid.
``ig_mean``, ``ig_std``
    mean and biased std of the raw per-turn information gain over the valid turns.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "BOUND_TOLERANCE",
    "bound_fractions",
    "clip_scale_entries",
    "clip_scale_stats",
    "masked_moments",
    "stacked_moments",
]

#: A clip scale within ``BOUND_TOLERANCE * beta`` of ``1 ± beta`` counts as at the bound.
BOUND_TOLERANCE = 1e-3


def stacked_moments(values: Tensor, mask: Tensor, *, empty: float = 0.0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Mean, biased std, min, max of each row of ``values: [k, N]`` over ``mask: [k, N]``.

    One pass of a dozen ops for all ``k`` quantities (telemetry runs every step, so it
    should not cost more kernel launches than the thing it measures). Each result is
    ``[k]``, detached, float32 (float64 for float64 input); rows with nothing selected
    report ``empty`` everywhere.
    """
    with torch.no_grad():
        v = values.detach().to(torch.float64 if values.dtype == torch.float64 else torch.float32)
        m = mask.to(torch.bool)
        n = m.sum(-1).to(v.dtype)
        n1 = n.clamp_min(1.0)
        zero = torch.zeros((), dtype=v.dtype, device=v.device)
        mean = torch.where(m, v, zero).sum(-1) / n1
        var = torch.where(m, (v - mean.unsqueeze(-1)).square(), zero).sum(-1) / n1
        vmin = torch.where(m, v, float("inf")).amin(-1) if v.shape[-1] else n * 0
        vmax = torch.where(m, v, float("-inf")).amax(-1) if v.shape[-1] else n * 0
        has = n > 0
        fill = torch.full_like(mean, empty)
        return tuple(torch.where(has, x, fill) for x in (mean, var.sqrt(), vmin, vmax))  # type: ignore[return-value]


def masked_moments(values: Tensor, mask: Tensor, prefix: str, *, empty: float = 0.0) -> dict[str, Tensor]:
    """``{prefix}_mean/_std/_min/_max`` of ``values`` where ``mask`` (any equal shapes).

    Biased std. Every entry is ``empty`` when nothing is selected.
    """
    mean, std, vmin, vmax = stacked_moments(values.reshape(1, -1), mask.reshape(1, -1), empty=empty)
    return {f"{prefix}_mean": mean[0], f"{prefix}_std": std[0], f"{prefix}_min": vmin[0], f"{prefix}_max": vmax[0]}


def bound_fractions(scale: Tensor, mask: Tensor, beta: float) -> tuple[Tensor, Tensor]:
    """``(clip_scale_frac_low, clip_scale_frac_high)`` of ``scale`` over ``mask`` (module docstring)."""
    with torch.no_grad():
        m = mask.to(torch.bool)
        v = scale.detach()
        n = m.sum().clamp_min(1).to(torch.float64 if v.dtype == torch.float64 else torch.float32)
        if beta <= 0:  # no adaptive clip at all: nothing is "at a bound"
            zero = n * 0
            return zero, zero
        tol = BOUND_TOLERANCE * beta
        low = (m & (v <= 1.0 - beta + tol)).sum() / n
        high = (m & (v >= 1.0 + beta - tol)).sum() / n
        return low, high


def clip_scale_entries(mean: Tensor, std: Tensor, vmin: Tensor, vmax: Tensor, low: Tensor, high: Tensor) -> dict[str, Tensor]:
    """The six ``clip_scale_*`` entries from already reduced values."""
    return {
        "clip_scale_mean": mean,
        "clip_scale_std": std,
        "clip_scale_min": vmin,
        "clip_scale_max": vmax,
        "clip_scale_frac_low": low,
        "clip_scale_frac_high": high,
    }


def clip_scale_stats(scale: Tensor, mask: Tensor, beta: float) -> dict[str, Tensor]:
    """The six ``clip_scale_*`` entries (see module docstring) over ``scale`` where ``mask``.

    ``scale`` and ``mask`` have any equal shape (``[B, K]`` per turn or ``[B, L]`` per token);
    an empty population reports mean/min/max ``1``, std and fractions ``0``.
    """
    mean, std, vmin, vmax = stacked_moments(scale.reshape(1, -1), mask.reshape(1, -1), empty=1.0)
    std = torch.where(mask.any(), std, torch.zeros_like(std))
    return clip_scale_entries(mean[0], std[0], vmin[0], vmax[0], *bound_fractions(scale, mask, beta))
