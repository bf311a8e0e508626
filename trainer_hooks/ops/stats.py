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

import functools

import torch
from torch import Tensor

__all__ = [
    "BOUND_TOLERANCE",
    "bound_fractions",
    "clip_scale_bounds",
    "clip_scale_entries",
    "clip_scale_stats",
    "masked_moments",
    "masked_row_stats",
    "stacked_moments",
]

#: A clip scale within ``BOUND_TOLERANCE * beta`` of ``1 ± beta`` counts as at the bound.
BOUND_TOLERANCE = 1e-3


def stacked_moments(values: Tensor, mask: Tensor, *, empty: float = 0.0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Mean, biased std, min, max of each row of ``values: [k, N]`` over ``mask: [k, N]``.

    One pass of a couple of dozen ops for all ``k`` quantities (telemetry runs every step,
    so it should not cost more than the thing it measures). Each result is ``[k]``,
    detached, float32 (float64 for float64 input); rows with nothing selected report
    ``empty`` everywhere. Values outside the mask never matter, inf / nan included.
    """
    n, stats, _ = masked_row_stats(values, mask)
    out = torch.where(n > 0, stats, empty)
    return tuple(out.t().contiguous())


@functools.cache
def _bit_patterns(dtype: torch.dtype) -> tuple[torch.dtype, int, int]:
    """The integer dtype of ``dtype``'s width and the bit patterns of +inf and -inf in it."""
    ints = torch.int64 if dtype == torch.float64 else torch.int32
    inf = torch.tensor([float("inf"), float("-inf")], dtype=dtype).view(ints)
    return ints, int(inf[0]), int(inf[1])


def masked_row_stats(
    values: Tensor, mask: Tensor, bounds: tuple[float, float] | None = None
) -> tuple[Tensor, Tensor, Tensor | None]:
    """``(n [k, 1], [mean, std, min, max] [k, 4], [n_low, n_high] [k, 2] or None)`` of the
    rows of ``values: [k, N]`` over ``mask: [k, N]``; ``n_low`` / ``n_high`` count the
    selected values ``<= bounds[0]`` / ``>= bounds[1]``. Rows with ``n = 0`` hold junk.

    Masking is done on the bit patterns: ``bits & ~0`` keeps a value, ``bits & 0`` makes
    it +0.0 whatever it was (inf / nan under the mask stay out), and ``| bits(+-inf)``
    pushes masked-out entries out of the min / max. On a CPU, ``where`` / ``masked_fill``
    over a bool mask run scalar loops several times slower than these integer passes, and
    the full-size temporaries are three buffers reused in place.
    """
    with torch.no_grad():
        v = values.detach().to(torch.float64 if values.dtype == torch.float64 else torch.float32)
        ints, inf_bits, neg_inf_bits = _bit_patterns(v.dtype)
        keep = mask.to(torch.bool).to(ints).neg_()  # ~0 where selected, 0 elsewhere
        n = keep.sum(-1, keepdim=True).neg_().to(v.dtype)
        n1 = n.clamp_min(1.0)
        kept = v.view(ints).bitwise_and(keep).view(v.dtype)
        mean = kept.sum(-1, keepdim=True) / n1
        scratch = kept - mean
        scratch.view(ints).bitwise_and_(keep)
        var = scratch.square_().sum(-1, keepdim=True) / n1
        if not v.shape[-1]:
            counts = None if bounds is None else n.new_zeros(n.shape[0], 2)
            return n, torch.cat([mean, var.sqrt_(), n * 0, n * 0], -1), counts
        drop = keep.bitwise_not_()  # ~0 where masked out
        low_side = scratch.view(ints).copy_(drop).bitwise_and_(inf_bits).bitwise_or_(kept.view(ints)).view(v.dtype)
        high_side = drop.bitwise_and_(neg_inf_bits).bitwise_or_(kept.view(ints)).view(v.dtype)
        stats = torch.cat([mean, var.sqrt_(), low_side.amin(-1, keepdim=True), high_side.amax(-1, keepdim=True)], -1)
        if bounds is None:
            return n, stats, None
        low, high = (low_side <= bounds[0]).sum(-1, keepdim=True), (high_side >= bounds[1]).sum(-1, keepdim=True)
        counts = torch.cat([low, high], -1)
        return n, stats, counts.to(v.dtype)


def masked_moments(values: Tensor, mask: Tensor, prefix: str, *, empty: float = 0.0) -> dict[str, Tensor]:
    """``{prefix}_mean/_std/_min/_max`` of ``values`` where ``mask`` (any equal shapes).

    Biased std. Every entry is ``empty`` when nothing is selected.
    """
    mean, std, vmin, vmax = stacked_moments(values.reshape(1, -1), mask.reshape(1, -1), empty=empty)
    return {f"{prefix}_mean": mean[0], f"{prefix}_std": std[0], f"{prefix}_min": vmin[0], f"{prefix}_max": vmax[0]}


def clip_scale_bounds(beta: float) -> tuple[float, float]:
    """The "at the bound" thresholds (module docstring); none can be met when ``beta <= 0``."""
    if beta <= 0:  # no adaptive clip at all: nothing is "at a bound"
        return float("-inf"), float("inf")
    tol = BOUND_TOLERANCE * beta
    return 1.0 - beta + tol, 1.0 + beta - tol


def bound_fractions(scale: Tensor, mask: Tensor, beta: float) -> tuple[Tensor, Tensor]:
    """``(clip_scale_frac_low, clip_scale_frac_high)`` of ``scale`` over ``mask`` (module docstring)."""
    entries = clip_scale_stats(scale, mask, beta)
    return entries["clip_scale_frac_low"], entries["clip_scale_frac_high"]


def clip_scale_entries(
    mean: Tensor, std: Tensor, vmin: Tensor, vmax: Tensor, low: Tensor, high: Tensor
) -> dict[str, Tensor]:
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
    an empty population reports mean/min/max ``1``, std and fractions ``0``. One pass for
    the moments and the bound fractions together.
    """
    n, stats, counts = masked_row_stats(scale.reshape(1, -1), mask.reshape(1, -1), clip_scale_bounds(beta))
    assert counts is not None
    has = n > 0
    empty = stats.new_tensor([1.0, 0.0, 1.0, 1.0])
    mean, std, vmin, vmax = torch.where(has, stats, empty)[0].unbind()
    low, high = (counts / n.clamp_min(1.0))[0].unbind()
    return clip_scale_entries(mean, std, vmin, vmax, low, high)
