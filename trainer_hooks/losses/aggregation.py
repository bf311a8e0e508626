"""Reduce a per-token loss matrix to a scalar (verl's ``agg_loss``).

Shapes: ``loss_mat: [B, L]`` float, ``loss_mask: [B, L]`` bool or 0/1 numbers (True / nonzero
on the tokens that count; it is a selection, not a weight — fold weights into ``loss_mat``).
``agg_loss`` is differentiable in ``loss_mat``. (Masked moments live in
:mod:`trainer_hooks.ops.masked`.)

The modes follow verl's ``agg_loss`` (``verl/trainer/ppo/core_algos.py``), including its
global-batch arguments: under micro-batching or data parallelism pass the *global* counts
(``batch_num_tokens`` for token-mean, ``global_batch_size`` = number of non-empty rows for
the seq-mean modes) and ``dp_size``, so every micro-batch is normalised over the global
batch and the gradient scale equals verl's (it multiplies by ``dp_size`` because FSDP/DDP
average gradients over ranks). Without them the counts are this call's own. verl's actor
passes exactly these as ``config.global_batch_info``; the losses here take that dict as
``global_batch=``.

``token-mean``
    ``sum(loss * mask) / batch_num_tokens * dp_size`` — every token of the batch weighs the
    same (DAPO).
``seq-mean-token-sum``
    ``sum over rows of sum_t(loss * mask) / global_batch_size * dp_size``.
``seq-mean-token-mean``
    ``sum over rows of [sum_t(loss * mask) / (n_t + 1e-8)] / global_batch_size * dp_size``
    (GRPO / GSPO; verl's ``+ 1e-8`` kept for bit-exact parity).
``seq-mean-token-sum-norm``
    Dr. GRPO's constant normaliser, in one of two versions of verl (``seq_sum_norm=``):

    * ``"batch"`` (default; verl b178a3cd, ``compat="verl"``): ``sum over rows of
      sum_t(loss * mask) / loss_scale_factor`` — the row sums are *summed*, not averaged,
      and ``dp_size`` / ``global_batch_size`` are not used.
    * ``"rows"`` (verl 0.9.1, ``compat="verl-0.9.1"``): the ``seq-mean-token-sum`` value
      ``/ loss_scale_factor`` — averaged over the (global) rows and scaled by ``dp_size``.

    ``loss_scale_factor`` defaults to ``L = loss_mask.shape[-1]`` in both; keep it constant
    over a run (e.g. the max response length) or the effective learning rate drifts with
    padding.
``token-sum``
    ``sum(loss * mask) * dp_size`` (verl 0.9.1's addition).

Fully masked rows (and fully masked batches)
    A row with no unmasked token is *excluded* from every "seq-mean" (it is padding, e.g.
    added to make a micro-batch divisible, and must not dilute the mean) and contributes
    nothing to ``token-mean`` — as verl. Local token and row counts are clamped to
    ``>= 1``, so the result equals verl's bit for bit on any batch with at least one token
    and is exactly ``0`` with zero, finite gradients when everything is masked, where
    verl divides by zero (the one deliberate difference; it cannot change a finite value).
    With ``dp_size > 1`` the global counts are required (a ``ValueError`` names the
    missing one), as verl 0.9.1; verl b178a3cd silently used the local counts there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from trainer_hooks.compat import resolve_options

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm", "token-sum")
SEQ_SUM_NORMS = ("batch", "rows")

# retrain and AReaL aggregate with token-mean only (no seq-mean-token-sum-norm): no-ops, so a
# loss can pass its compat= through.
_PRESETS = {"verl": {"seq_sum_norm": "batch"}, "verl-0.9.1": {"seq_sum_norm": "rows"}, "retrain": {}, "areal": {}}


def agg_loss(
    loss_mat: Tensor,
    loss_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    dp_size: int = 1,
    batch_num_tokens: float | Tensor | None = None,
    global_batch_size: float | Tensor | None = None,
    loss_scale_factor: float | None = None,
    seq_sum_norm: str | None = None,
    compat: str | None = None,
) -> Tensor:
    """Aggregate ``loss_mat [B, L]`` over ``loss_mask [B, L]`` into a 0-dim tensor.

    Args:
        loss_mat: ``[B, L]`` float.
        loss_mask: ``[B, L]`` bool or 0/1, same shape.
        loss_agg_mode: one of :data:`LOSS_AGG_MODES` (default ``"token-mean"``).
        dp_size: data-parallel world size (verl's; default 1).
        batch_num_tokens: tokens in the global batch (token-mean); default this call's.
        global_batch_size: non-empty rows in the global batch (seq-mean modes); default
            this call's.
        loss_scale_factor: ``seq-mean-token-sum-norm``'s constant (default ``L``).
        seq_sum_norm: ``"batch"`` (default, verl b178a3cd) or ``"rows"`` (verl 0.9.1); see
            the module docstring.
        compat: ``"verl"`` or ``"verl-0.9.1"`` selects ``seq_sum_norm`` (see
            :mod:`trainer_hooks.compat`); ``"retrain"`` / ``"areal"`` change nothing here.

    Raises:
        ValueError: an unknown mode or ``seq_sum_norm``, mismatched shapes, or
            ``dp_size > 1`` without the global count the mode needs.

    Returns:
        0-dim tensor of ``loss_mat.dtype``.
    """
    if loss_mat.shape != loss_mask.shape or loss_mat.dim() != 2:
        raise ValueError(
            f"agg_loss: loss_mat {tuple(loss_mat.shape)} and loss_mask {tuple(loss_mask.shape)} must both be [B, L]"
        )
    if loss_agg_mode not in LOSS_AGG_MODES:
        raise ValueError(f"unknown loss_agg_mode {loss_agg_mode!r}; known: {', '.join(LOSS_AGG_MODES)}")
    if compat is not None or seq_sum_norm is not None:
        seq_sum_norm = resolve_options(
            "agg_loss", compat, _PRESETS, {"seq_sum_norm": "batch"}, {"seq_sum_norm": seq_sum_norm}
        )["seq_sum_norm"]
        if seq_sum_norm not in SEQ_SUM_NORMS:
            raise ValueError(f"seq_sum_norm must be one of {SEQ_SUM_NORMS}, got {seq_sum_norm!r}")
    mask = loss_mask if loss_mask.dtype == torch.bool else loss_mask != 0
    # where(), not multiply: a NaN/inf in a masked slot must not leak into the sum.
    masked = torch.where(mask, loss_mat, 0.0)
    dtype = loss_mat.dtype
    if loss_agg_mode == "token-sum":
        return masked.sum() * dp_size
    if loss_agg_mode == "token-mean":
        if batch_num_tokens is None:
            _need_global("batch_num_tokens", loss_agg_mode, dp_size)
            batch_num_tokens = mask.sum().to(dtype).clamp_min(1.0)
        return masked.sum() / batch_num_tokens * dp_size
    if loss_agg_mode == "seq-mean-token-sum-norm":
        scale = float(loss_mask.shape[-1]) if loss_scale_factor is None else float(loss_scale_factor)
        if seq_sum_norm in (None, "batch"):
            return masked.sum(dim=-1).sum() / scale
        return _seq_mean(masked.sum(dim=-1), mask, dp_size, global_batch_size, loss_agg_mode) / scale
    n_tok = mask.sum(dim=-1).to(dtype)
    seq_sum = masked.sum(dim=-1)
    if loss_agg_mode == "seq-mean-token-sum":
        return _seq_mean(seq_sum, mask, dp_size, global_batch_size, loss_agg_mode)
    # seq-mean-token-mean; verl's 1e-8 (harmless on empty rows: 0 / 1e-8 = 0).
    return _seq_mean(seq_sum / (n_tok + 1e-8), mask, dp_size, global_batch_size, loss_agg_mode)


def _need_global(name: str, mode: str, dp_size: int) -> None:
    if dp_size > 1:
        raise ValueError(f"agg_loss: {name} (the global batch's count) is required for {mode!r} when dp_size > 1")


def _seq_mean(
    per_row: Tensor, mask: Tensor, dp_size: int, global_batch_size: float | Tensor | None, mode: str
) -> Tensor:
    """``sum(per_row over non-empty rows) / global_batch_size * dp_size`` (``per_row: [B]``)."""
    if global_batch_size is None:
        _need_global("global_batch_size", mode, dp_size)
        global_batch_size = mask.any(dim=-1).sum().to(per_row.dtype).clamp_min(1.0)
    # Empty rows hold 0 already (masked sums), so a plain sum equals verl's masked_sum.
    return per_row.sum() / global_batch_size * dp_size


_GLOBAL_BATCH_KEYS = ("dp_size", "batch_num_tokens", "global_batch_size", "loss_scale_factor")


def agg_options(
    global_batch: Mapping[str, Any] | None, loss_scale_factor: float | None = None, compat: str | None = None
) -> dict[str, Any]:
    """:func:`agg_loss` keyword arguments from a loss's ``global_batch``, ``loss_scale_factor``
    and ``compat`` (passed through: it picks ``seq-mean-token-sum-norm``'s verl version).

    ``global_batch`` is verl's ``config.global_batch_info`` dict as the actor fills it
    (``dp_size``, ``batch_num_tokens``, ``global_batch_size``, optionally
    ``loss_scale_factor``); an explicit ``loss_scale_factor`` wins over its entry.

    Raises:
        ValueError: ``global_batch`` holds a key :func:`agg_loss` does not take.
    """
    options: dict[str, Any] = {}
    if global_batch:
        unknown = sorted(set(global_batch) - set(_GLOBAL_BATCH_KEYS))
        if unknown:
            raise ValueError(f"global_batch: unknown key(s) {unknown}; known: {', '.join(_GLOBAL_BATCH_KEYS)}")
        options.update({k: v for k, v in global_batch.items() if v is not None})
    if loss_scale_factor is not None:
        options["loss_scale_factor"] = loss_scale_factor
    if compat is not None:
        options["compat"] = compat
    return options
