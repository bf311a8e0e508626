"""Masked moments: sum, mean and variance of values where a mask selects them.

Shapes: ``x`` and ``mask`` have the same shape (typically ``[B, L]``); ``mask`` is bool or
0/1 numbers. With ``dim=None`` the reduction runs over every element (a 0-dim result),
otherwise over ``dim`` (that dimension removed). Every function is differentiable in ``x``
and reads masked-out slots through ``torch.where``, so a NaN/inf there never leaks in.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["masked_mean", "masked_sum", "masked_var"]


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Sum of ``x`` where ``mask`` (same shape, bool or 0/1); all dims when ``dim`` is None."""
    kept = torch.where(mask.to(torch.bool), x, torch.zeros_like(x))
    return kept.sum() if dim is None else kept.sum(dim=dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``x`` where ``mask``; ``0`` where nothing is selected."""
    n = mask.to(x.dtype).sum() if dim is None else mask.to(x.dtype).sum(dim=dim)
    return masked_sum(x, mask, dim) / n.clamp_min(1.0)


def masked_var(x: Tensor, mask: Tensor, dim: int | None = None, unbiased: bool = True) -> Tensor:
    """Variance of ``x`` where ``mask`` (two-pass, so no catastrophic cancellation).

    ``unbiased=True`` divides by ``n - 1`` (``torch.std``'s default, as verl's GRPO uses);
    returns ``0`` where fewer than 2 (unbiased) or 1 (biased) elements are selected.
    """
    n = mask.to(x.dtype).sum() if dim is None else mask.to(x.dtype).sum(dim=dim)
    mean = masked_mean(x, mask, dim)
    centered = x - (mean if dim is None else mean.unsqueeze(dim))
    ss = masked_sum(centered * centered, mask, dim)
    denom = n - 1.0 if unbiased else n
    return torch.where(denom > 0, ss / denom.clamp_min(1.0), torch.zeros_like(ss))
