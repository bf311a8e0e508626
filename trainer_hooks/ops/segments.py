"""Segment (group) reductions over padded batches: group statistics, per-turn pooling of
token values, turn → token broadcast and the reverse discounted sum over turns.

Everything is a scatter / gather / matmul over the whole batch; no Python loop runs over
rows, groups, turns or tokens. Layouts used throughout ``trainer_hooks``:

* ``values: [N]`` with ``index: [N] int64`` in ``[0, S)`` (a flattened batch and its
  segment of each element) and ``mask: [N] bool`` (elements that take part);
* ``turn_ids: [B, L] int`` — the turn (column of a ``[B, K]`` per-turn tensor) that each
  token belongs to; any negative id (``-1``) marks a token outside every turn (prompt,
  tool output, padding). Turn membership is always read from this tensor, never inferred
  from changes in token values, so two adjacent turns with equal values stay two turns.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

__all__ = [
    "SegmentStats",
    "TurnIndex",
    "broadcast_turns",
    "compute_dtype",
    "dense_index",
    "discount_matrix",
    "reverse_discounted_sum",
    "segment_normalize",
    "segment_stats",
    "segment_sum",
    "to_compute_dtype",
    "turn_index",
    "turn_reduce",
    "valid_turn_tokens",
]


def compute_dtype(x: Tensor) -> torch.dtype:
    """float64 stays float64 (gradcheck, reference comparisons); everything else runs in
    float32 because bf16/fp16 sums over hundreds of tokens lose whole units of mass."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def to_compute_dtype(x: Tensor) -> Tensor:
    """``x`` in :func:`compute_dtype` (half precision -> float32; float64 and float32 kept)."""
    return x.to(compute_dtype(x))


def dense_index(group_ids: Tensor) -> tuple[Tensor, int]:
    """Map arbitrary integer ids ``[B]`` to a dense ``[B] int64`` index in ``[0, G)``.

    Returns ``(index, G)``. ``G`` is a Python int (one host sync, needed to size scatters).
    """
    if group_ids.dim() != 1:
        raise ValueError(f"group ids must be [B], got shape {tuple(group_ids.shape)}")
    if group_ids.is_floating_point() or group_ids.is_complex():
        raise TypeError(f"group ids must be an integer tensor, got {group_ids.dtype}")
    unique, index = torch.unique(group_ids, return_inverse=True)
    return index, int(unique.numel())


def segment_sum(values: Tensor, index: Tensor, num_segments: int, mask: Tensor | None = None) -> Tensor:
    """Differentiable ``[N] -> [S]`` sum of ``values`` per segment (masked elements skipped)."""
    if mask is not None:
        values = torch.where(mask, values, torch.zeros_like(values))
    return values.new_zeros(num_segments).index_add(0, index, values)


class SegmentStats(NamedTuple):
    """Per-segment statistics, each ``[S]``.

    ``std`` follows the A²TGPO / IGPO source: ``sqrt(var + var_eps)`` with ``var`` the
    biased (``/n``) or unbiased (``/(n-1)``) variance, and ``1`` for segments with at most
    one element. ``informative`` is False for segments whose members are all equal
    (singletons and empty segments included).
    """

    # Shadows tuple.count on purpose: ``.count`` is this public result's field name.
    count: Tensor  # type: ignore[assignment]
    mean: Tensor
    std: Tensor
    informative: Tensor


def segment_stats(
    values: Tensor,
    index: Tensor,
    num_segments: int,
    mask: Tensor,
    *,
    unbiased: bool = False,
    var_eps: float = 1e-8,
) -> SegmentStats:
    """Count / mean / std / informative of ``values: [N]`` per segment ``index: [N]``.

    Only elements with ``mask: [N] bool`` take part. Two-pass variance (no cancellation).
    """
    m = _segment_moments(values, index, num_segments, mask, unbiased)
    std = torch.where(m.n > 1, torch.sqrt(m.var + var_eps), 1.0)
    S = num_segments
    return SegmentStats(count=m.n[:S], mean=m.mean[:S], std=std[:S], informative=m.informative[:S])


class _Moments(NamedTuple):
    n: Tensor  # [S + 1] element count; slot S collects the masked-out elements
    mean: Tensor  # [S + 1]
    var: Tensor  # [S + 1]
    informative: Tensor  # [S + 1] bool; never True for slot S
    centered: Tensor  # [N], x - mean of its segment (0 for masked-out elements)
    slot: Tensor  # [N] int64, the segment of each element, S where masked out


def _segment_moments(values: Tensor, index: Tensor, num_segments: int, mask: Tensor | None, unbiased: bool) -> _Moments:
    """Two-pass segment moments in about fifteen 1-D ops.

    Masked-out elements are zeroed (garbage, even inf/nan, stays out) and sent to one
    extra slot ``num_segments`` rather than masked out of every reduction; that slot
    holds only zeros, so it is never informative. ``mask=None``: every element takes part
    (two ops fewer). A segment is informative iff its min is below its max (exact, unlike
    a variance threshold).
    """
    S = num_segments
    if mask is None:
        slot, x = index, values
    else:
        mask = mask.to(torch.bool)
        slot = torch.where(mask, index, S)
        x = torch.where(mask, values, 0.0)
    # index_add, not bincount: bincount sizes its output from the data (a device sync on CUDA).
    count = x.new_zeros(S + 1).index_add_(0, slot, torch.ones_like(x))
    n1 = count.clamp_min(1.0)
    mean = x.new_zeros(S + 1).index_add_(0, slot, x) / n1
    centered = x - mean.index_select(0, slot)
    ss = x.new_zeros(S + 1).index_add_(0, slot, centered * centered)
    var = ss / ((count - 1.0).clamp_min(1.0) if unbiased else n1)
    d = x.detach()
    top = d.new_full((S + 1,), float("-inf")).scatter_reduce_(0, slot, d, "amax")
    bottom = d.new_full((S + 1,), float("inf")).scatter_reduce_(0, slot, d, "amin")
    return _Moments(count, mean, var, bottom < top, centered, slot)


def segment_normalize(
    values: Tensor,
    index: Tensor,
    num_segments: int,
    mask: Tensor | None,
    *,
    use_std: bool = True,
    eps: float = 1e-6,
    unbiased: bool = False,
    var_eps: float = 1e-8,
    single: str = "zero",
) -> Tensor:
    """GRPO-style normalization within segments: ``(x - mean_s) / (std_s + eps)``.

    Args:
        values: ``[N]`` float.
        index: ``[N] int64`` segment of each element, in ``[0, num_segments)``.
        mask: ``[N] bool``; only these elements enter the statistics (None: all).
        use_std: divide by the segment std (else center only).
        eps: added to the std (IGPO / verl ``epsilon``, default ``1e-6``).
        unbiased, var_eps: see :class:`SegmentStats`.
        single: a one-element segment gives ``"zero"`` (default: it is not informative)
            or ``"score"`` (verl's GRPO: mean 0 and std 1, i.e. ``x / (1 + eps)``, or
            ``x`` when centering only).

    Returns:
        ``[N]``: normalized values; exactly ``0`` outside ``mask`` and for every element of
        a non-informative segment (all members equal; singletons too unless
        ``single="score"``) — centering such a segment leaves only rounding residue, which
        the std division would blow up.
    """
    m = _segment_moments(values, index, num_segments, mask, unbiased)
    if single not in ("zero", "score"):
        raise ValueError(f"single must be 'zero' or 'score', got {single!r}")
    # Dividing by +inf zeroes the non-informative segments (and the masked-out slot) with
    # one gather, and their gradient with it.
    scale = torch.sqrt(m.var + var_eps) + eps if use_std else torch.ones_like(m.var)
    denom = torch.where(m.informative, scale, float("inf"))
    numer = m.centered
    if single == "score":
        alone = m.n == 1
        denom = torch.where(alone, 1.0 + eps if use_std else 1.0, denom)
        x = values if mask is None else torch.where(mask.to(torch.bool), values, 0.0)
        numer = torch.where(alone.index_select(0, m.slot), x, numer)
    return numer / denom.index_select(0, m.slot)


def valid_turn_tokens(turn_ids: Tensor, num_turns: int, mask: Tensor | None = None) -> Tensor:
    """``[B, L] bool``: tokens with a turn id in ``[0, num_turns)`` (and in ``mask`` if given)."""
    valid = (turn_ids >= 0) & (turn_ids < num_turns)
    return valid if mask is None else valid & mask.to(torch.bool)


class TurnIndex(NamedTuple):
    """Flat scatter index of tokens into ``B * K`` turn slots (see :func:`turn_index`)."""

    flat: Tensor  # [B * L] int64; tokens of no turn point at the sentinel slot B * K
    valid: Tensor  # [B, L] bool
    num_turns: int


def turn_index(turn_ids: Tensor, num_turns: int, mask: Tensor | None = None) -> TurnIndex:
    """Precompute where each token goes in a ``[B, K]`` per-turn table.

    ``turn_ids: [B, L] int``; tokens with an id outside ``[0, num_turns)`` or outside the
    optional ``mask: [B, L]`` go to one extra sentinel slot (index ``B * K``), which is
    cheaper than masking the values. Reuse the result for pooling and for broadcasting back.
    """
    B = turn_ids.shape[0]
    valid = valid_turn_tokens(turn_ids, num_turns, mask)
    rows = torch.arange(B, device=turn_ids.device).unsqueeze(1)
    flat = torch.where(valid, rows * num_turns + turn_ids.long(), B * num_turns).reshape(-1)
    return TurnIndex(flat, valid, num_turns)


def turn_reduce(
    token_values: Tensor | Sequence[Tensor],
    turn_ids: Tensor,
    num_turns: int,
    mask: Tensor | None = None,
    *,
    reduce: str = "mean",
    index: TurnIndex | None = None,
) -> tuple[Tensor, Tensor]:
    """Pool token values into their turns: ``[B, L, *C] -> [B, K, *C]``.

    Args:
        token_values: ``[B, L]`` float, or ``[B, L, C...]`` (or a sequence of ``C``
            ``[B, L]`` tensors, pooled as if stacked on a last dim) to pool several
            quantities over one index.
        turn_ids: ``[B, L] int``; ids outside ``[0, num_turns)`` (e.g. ``-1``) are skipped.
        num_turns: ``K``, the width of the per-turn output.
        mask: optional ``[B, L]`` bool/0-1; tokens outside it are skipped.
        reduce: ``"sum"`` or ``"mean"`` (mean is ``0`` for a turn without tokens).
        index: a :func:`turn_index` of the same ``turn_ids, num_turns, mask`` to reuse.

    Returns:
        ``(pooled [B, K, *C], token_count [B, K])``. Differentiable in ``token_values``.

    Each quantity is pooled by its own 1-D ``scatter_add`` (on the CPU two of them cost a
    third of one ``[N, 2]`` ``index_add`` with the stack it needs), the count by one more
    of a stride-0 ones (half a ``bincount``).
    """
    if reduce not in ("sum", "mean"):
        raise ValueError(f"reduce must be 'sum' or 'mean', got {reduce!r}")
    B, L = turn_ids.shape
    if isinstance(token_values, Tensor):
        trailing = token_values.shape[2:]
        columns = [token_values] if not trailing else list(token_values.reshape(B, L, -1).unbind(-1))
    else:
        columns, trailing = list(token_values), torch.Size([len(token_values)])
    if index is None:
        index = turn_index(turn_ids, num_turns, mask)
    slots = B * num_turns + 1
    sums = [c.new_zeros(slots).scatter_add_(0, index.flat, c.reshape(B * L)) for c in columns]
    first = columns[0]
    count = first.new_zeros(slots).scatter_add_(0, index.flat, first.new_ones(()).expand(B * L).detach())[:-1]
    pooled = (sums[0] if len(sums) == 1 and not trailing else torch.stack(sums, -1))[:-1]
    pooled, count = pooled.view(B, num_turns, *trailing), count.view(B, num_turns)
    if reduce == "mean":
        pooled = pooled / count.clamp_min(1.0).view(B, num_turns, *([1] * len(trailing)))
    return pooled, count


def broadcast_turns(turn_values: Tensor, turn_ids: Tensor, mask: Tensor | None = None, *, fill: float = 0.0) -> Tensor:
    """Give every token its turn's value: ``turn_values [B, K]``, ``turn_ids [B, L]`` -> ``[B, L]``.

    Tokens whose id is outside ``[0, K)`` or outside ``mask`` (optional ``[B, L]``) get ``fill``.
    Differentiable in ``turn_values``.
    """
    K = turn_values.shape[1]
    valid = valid_turn_tokens(turn_ids, K, mask)
    gathered = turn_values.gather(1, turn_ids.long().clamp(0, max(K - 1, 0)))
    return torch.where(valid, gathered, torch.full_like(gathered, fill))


@functools.lru_cache(maxsize=64)
def _discount_matrices(K: int, gamma: float, dtype: torch.dtype, device: torch.device) -> Tensor:
    """``[2, K, K]``: the transposed ``gamma^(j - t)`` (``j >= t``) and all-ones upper
    triangles. Cached: every training step asks for the same few."""
    j = torch.arange(K, device=device)
    lag = (j.unsqueeze(1) - j.unsqueeze(0)).to(dtype)  # [j, t] = j - t
    upper = lag >= 0
    # pow on a clamped exponent: 0 ** 0 = 1 gives gamma = 0 its one-step meaning.
    powers = torch.where(upper, torch.pow(torch.tensor(gamma, dtype=dtype, device=device), lag.clamp_min(0)), 0.0)
    return torch.stack([powers, upper.to(dtype)])


def discount_matrix(K: int, gamma: float, dtype: torch.dtype, device: torch.device) -> Tensor:
    """``[K, K]`` with ``[j, t] = gamma^(j - t)`` for ``j >= t`` and 0 below: ``values [B, K]
    @ discount_matrix`` is the reverse discounted sum ``sum_{j >= t} gamma^(j - t) values_j``.
    Cached per ``(K, gamma, dtype, device)``."""
    return _discount_matrices(K, float(gamma), dtype, torch.device(device))[0]


def reverse_discounted_sum(values: Tensor, mask: Tensor, gamma: float) -> tuple[Tensor, Tensor]:
    """``D[b, t] = sum_{j >= t, mask[b, j]} gamma^(j - t) * values[b, j]`` and the term count.

    Args:
        values: ``[B, K]`` float, per-turn values (turn ``j`` is column ``j``).
        mask: ``[B, K]`` bool, the valid turns of each (ragged) row.
        gamma: discount in ``[0, 1]``.

    Returns:
        ``(D [B, K], n_terms [B, K])`` where ``n_terms[b, t]`` counts the valid ``j >= t``;
        both ``0`` on columns past the last valid turn.

    Computed as one ``[B, K] @ [K, K]`` product with the upper-triangular matrix of
    ``gamma^(j - t)``: no ``gamma^-t`` rescaling (which overflows for ``gamma < 1`` over
    long horizons) and no recurrence; powers that underflow just become 0. ``O(B K^2)``,
    which is nothing for the tens of turns an agent trajectory has.
    """
    matrices = _discount_matrices(values.shape[-1], float(gamma), values.dtype, values.device)
    kept = torch.where(mask, values, 0.0)
    discounted, n_terms = torch.bmm(torch.stack([kept, mask.to(values.dtype)]), matrices).unbind(0)
    return discounted, n_terms
