"""Reduce a per-token loss matrix to a scalar (verl's ``agg_loss``).

Shapes: ``loss_mat: [B, L]`` float, ``loss_mask: [B, L]`` bool or 0/1 numbers (True / nonzero
on the tokens that count; it is a selection, not a weight — fold weights into ``loss_mat``).
``agg_loss`` is differentiable in ``loss_mat``. (Masked moments live in
:mod:`trainer_hooks.ops.masked`.)

The four modes follow current verl (``verl/trainer/ppo/core_algos.py::agg_loss`` without
data-parallel arguments; pass a global ``loss_scale_factor`` yourself when sharding):

``token-mean``
    ``sum(loss * mask) / sum(mask)`` — every token of the batch weighs the same (DAPO).
``seq-mean-token-sum``
    mean over sequences of ``sum_t(loss * mask)`` (each row's token *sum*).
``seq-mean-token-mean``
    mean over sequences of ``sum_t(loss * mask) / sum_t(mask)`` (GRPO / GSPO).
``seq-mean-token-sum-norm``
    mean over sequences of ``sum_t(loss * mask) / loss_scale_factor`` (Dr. GRPO);
    ``loss_scale_factor`` defaults to ``L = loss_mask.shape[-1]`` — keep it constant over a
    run (e.g. the max response length) or the effective learning rate drifts with padding.
    Older verl summed (not averaged) over rows here; current verl and Dr. GRPO average.

Fully masked rows (and fully masked batches)
    A row with no unmasked token is *excluded* from every "seq-mean" (it is padding, e.g.
    added to make a micro-batch divisible, and must not dilute the mean) and contributes
    nothing to ``token-mean`` — as current verl. Token and row counts are clamped to
    ``>= 1``, so the result equals verl's bit for bit on any batch with at least one token
    (``seq-mean-token-mean`` keeps verl's ``+ 1e-8`` in the per-row token count) and is
    exactly ``0`` with zero, finite gradients when everything is masked, where verl
    divides by zero.
"""

from __future__ import annotations

import torch
from torch import Tensor

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def agg_loss(
    loss_mat: Tensor,
    loss_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    loss_scale_factor: float | None = None,
) -> Tensor:
    """Aggregate ``loss_mat [B, L]`` over ``loss_mask [B, L]`` into a 0-dim tensor.

    ``loss_agg_mode`` is one of :data:`LOSS_AGG_MODES` (default ``"token-mean"``);
    ``loss_scale_factor`` is used by ``seq-mean-token-sum-norm`` only (default ``L``).
    Raises ``ValueError`` on an unknown mode. Result dtype = ``loss_mat.dtype``.
    """
    mask = loss_mask if loss_mask.dtype == torch.bool else loss_mask != 0
    # where(), not multiply: a NaN/inf in a masked slot must not leak into the sum.
    masked = torch.where(mask, loss_mat, 0.0)
    if loss_agg_mode == "token-mean":
        return masked.sum() / mask.sum().to(loss_mat.dtype).clamp_min(1.0)
    if loss_agg_mode not in LOSS_AGG_MODES:
        raise ValueError(f"unknown loss_agg_mode {loss_agg_mode!r}; known: {', '.join(LOSS_AGG_MODES)}")
    n_tok = mask.sum(dim=-1).to(loss_mat.dtype)
    n_rows = (n_tok > 0).sum().to(loss_mat.dtype).clamp_min(1.0)
    seq_sum = masked.sum(dim=-1)
    if loss_agg_mode == "seq-mean-token-sum":
        return seq_sum.sum() / n_rows
    if loss_agg_mode == "seq-mean-token-mean":
        # verl's own 1e-8 (kept for bit-exact parity; harmless on empty rows: 0 / 1e-8 = 0).
        return (seq_sum / (n_tok + 1e-8)).sum() / n_rows
    scale = float(loss_mask.shape[-1]) if loss_scale_factor is None else float(loss_scale_factor)
    return seq_sum.sum() / n_rows / scale
