"""The information-gain (IG) signal of A²TGPO / IGPO: how much a turn raised the model's
probability of the gold answer.

    gold log-probs [B, T+1] --information_gain--> IG [B, T]

:func:`gold_answer_logprobs` reads the gold answer's log-probability after each turn's
context from a causal LM, :func:`information_gain` turns those into per-turn gains, and
:func:`information_gain_from_model` chains the two. The advantages built on IG are
:mod:`trainer_hooks.advantages.a2tgpo`'s (which re-exports these names).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from trainer_hooks.ops.segments import compute_dtype

__all__ = ["INFO_GAIN_TYPES", "gold_answer_logprobs", "information_gain", "information_gain_from_model"]

INFO_GAIN_TYPES = ("prob_diff", "log_prob_diff")


def information_gain(gold_logprobs: Tensor, turn_mask: Tensor, *, info_gain_type: str = "prob_diff") -> Tensor:
    """Per-turn information gain ``IG_t = p_t - p_{t-1}`` of the gold answer.

    Args:
        gold_logprobs: ``[B, T+1]`` log-probability of the gold answer given the context
            after turn ``k`` (column 0: the prompt alone, before any turn).
        turn_mask: ``[B, T]`` bool, the valid turns (column ``t`` is turn ``t+1``, whose IG
            compares columns ``t+1`` and ``t`` of ``gold_logprobs``).
        info_gain_type: ``"prob_diff"`` (default, the paper's definition: ``p = exp(logp)``)
            or ``"log_prob_diff"`` (``p = logp``; IGPO's alternative).

    Returns:
        ``[B, T]`` IG, exactly 0 on masked turns (whatever ``gold_logprobs`` holds there).
    """
    if info_gain_type not in INFO_GAIN_TYPES:
        raise ValueError(f"unknown info_gain_type {info_gain_type!r}; known: {', '.join(INFO_GAIN_TYPES)}")
    if gold_logprobs.dim() != 2 or turn_mask.shape != (gold_logprobs.shape[0], gold_logprobs.shape[1] - 1):
        raise ValueError(
            f"gold_logprobs must be [B, T+1] and turn_mask [B, T]; got {tuple(gold_logprobs.shape)} "
            f"and {tuple(turn_mask.shape)}"
        )
    logp = gold_logprobs.to(compute_dtype(gold_logprobs))
    p = logp.exp() if info_gain_type == "prob_diff" else logp
    mask = turn_mask.to(torch.bool)
    ig = p[:, 1:] - p[:, :-1]
    return torch.where(mask, ig, torch.zeros_like(ig)).to(gold_logprobs.dtype)


def _logits_of(output: Any) -> Tensor:
    return output if isinstance(output, Tensor) else output.logits


def gold_answer_logprobs(
    model: Any,
    context_ids: Tensor,
    context_mask: Tensor,
    answer_ids: Tensor,
    answer_mask: Tensor | None = None,
    *,
    reduction: str = "mean",
    pad_token_id: int = 0,
    chunk_size: int | None = None,
) -> Tensor:
    """Log-probability of the gold answer after each per-turn context, from a causal LM.

    All ``B * K`` (trajectory, context) pairs go through the model as one batch (or in
    row chunks of ``chunk_size`` to bound memory): the one extra forward per turn that IG
    costs, batched. Pairs whose context is empty are skipped (their result is 0).

    Args:
        model: causal LM called as ``model(input_ids=[N, S], attention_mask=[N, S])``,
            returning logits ``[N, S, V]`` or an object with ``.logits`` (HF models).
        context_ids: ``[B, K, C] int``, the context after turn ``k`` (``k = 0``: prompt
            only), tokens anywhere in the row where ``context_mask`` is set.
        context_mask: ``[B, K, C]`` bool/0-1.
        answer_ids: ``[B, A] int``, the gold answer tokens.
        answer_mask: ``[B, A]`` bool/0-1 (default: all valid).
        reduction: ``"mean"`` (default; per-token mean, i.e. the log of the geometric-mean
            token probability, so long answers are not penalized) or ``"sum"`` (log of the
            answer's joint probability).
        pad_token_id: id written into padding positions (never attended).
        chunk_size: rows per forward; ``None`` = all at once.

    Returns:
        ``[B, K]`` float32 (float64 if the model computes in float64), no gradient.

    Each sequence is laid out as ``context tokens ++ answer tokens`` left-aligned with
    right padding, so causal attention and default position ids see exactly the
    unpadded sequence.
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    B, K, C = context_ids.shape
    A = answer_ids.shape[-1]
    device = context_ids.device
    if answer_mask is None:
        answer_mask = torch.ones_like(answer_ids, dtype=torch.bool)
    ctx = context_ids.reshape(B * K, C).long()
    cmask = context_mask.reshape(B * K, C).to(torch.bool)
    ans = answer_ids.long().unsqueeze(1).expand(B, K, A).reshape(B * K, A)
    amask = answer_mask.to(torch.bool).unsqueeze(1).expand(B, K, A).reshape(B * K, A)
    n_ctx = cmask.sum(-1)
    rows = torch.nonzero(n_ctx > 0).squeeze(1)
    step = rows.numel() if chunk_size is None else max(int(chunk_size), 1)
    pieces: list[Tensor] = []
    # Chunking bounds memory; the trip count is rows / chunk_size (1 by default).
    for start in range(0, rows.numel(), max(step, 1)):
        r = rows[start : start + step]
        pieces.append(_answer_logprob_rows(model, ctx[r], cmask[r], ans[r], amask[r], reduction, pad_token_id))
    out_dtype = pieces[0].dtype if pieces else torch.float32
    result = torch.zeros(B * K, dtype=out_dtype, device=device)
    if pieces:
        result[rows] = torch.cat(pieces)
    return result.view(B, K)


@torch.no_grad()
def _answer_logprob_rows(
    model: Any, ctx: Tensor, cmask: Tensor, ans: Tensor, amask: Tensor, reduction: str, pad_token_id: int
) -> Tensor:
    n = ctx.shape[0]
    n_ctx = cmask.sum(-1)
    n_ans = amask.sum(-1)
    total = n_ctx + n_ans
    width = int(total.max())
    # Left-align both parts; masked tokens are scattered into a throw-away last column.
    pos_ctx = torch.where(cmask, cmask.long().cumsum(-1) - 1, width)
    pos_ans_valid = n_ctx.unsqueeze(1) + amask.long().cumsum(-1) - 1
    pos_ans = torch.where(amask, pos_ans_valid, width)
    buf = torch.full((n, width + 1), pad_token_id, dtype=torch.long, device=ctx.device)
    buf.scatter_(1, pos_ctx, ctx)
    buf.scatter_(1, pos_ans, ans)
    input_ids = buf[:, :width]
    attention_mask = (torch.arange(width, device=ctx.device).unsqueeze(0) < total.unsqueeze(1)).long()
    logits = _logits_of(model(input_ids=input_ids, attention_mask=attention_mask))
    # Logits at position p predict token p + 1.
    pred_pos = (pos_ans_valid - 1).clamp(0, width - 1)
    V = logits.shape[-1]
    picked = logits.gather(1, pred_pos.unsqueeze(-1).expand(-1, -1, V))
    logp = F.log_softmax(picked.to(compute_dtype(picked)), dim=-1).gather(-1, ans.unsqueeze(-1)).squeeze(-1)
    logp = torch.where(amask, logp, torch.zeros_like(logp))
    summed = logp.sum(-1)
    return summed if reduction == "sum" else summed / n_ans.clamp_min(1).to(summed.dtype)


def information_gain_from_model(
    model: Any,
    context_ids: Tensor,
    context_mask: Tensor,
    answer_ids: Tensor,
    answer_mask: Tensor | None = None,
    *,
    turn_mask: Tensor | None = None,
    info_gain_type: str = "prob_diff",
    reduction: str = "mean",
    pad_token_id: int = 0,
    chunk_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    """IG straight from a causal LM: :func:`gold_answer_logprobs` then :func:`information_gain`.

    Shapes as :func:`gold_answer_logprobs` with ``K = T + 1`` contexts per trajectory;
    ``turn_mask: [B, T]`` defaults to "context ``t + 1`` is non-empty".

    Returns:
        ``(ig [B, T], gold_logprobs [B, T+1])``, no gradient.
    """
    gold = gold_answer_logprobs(
        model,
        context_ids,
        context_mask,
        answer_ids,
        answer_mask,
        reduction=reduction,
        pad_token_id=pad_token_id,
        chunk_size=chunk_size,
    )
    if turn_mask is None:
        turn_mask = context_mask[:, 1:].to(torch.bool).any(-1)
    return information_gain(gold, turn_mask, info_gain_type=info_gain_type), gold
