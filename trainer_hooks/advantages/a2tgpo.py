"""A²TGPO advantages as composable primitives, plus the information-gain (IG) signal.

A²TGPO (arXiv 2605.06200, ``verl_atgpo``) keeps IGPO's per-turn information gain as a
process reward and changes how it is normalized, accumulated and consumed::

    gold log-probs [B, T+1] --information_gain--> IG [B, T]
    IG --turn_group_normalize--> normed_ig [B, T]      (i)   per (prompt, turn index)
       --variance_rescaled_accumulation--> D [B, T]    (ii)  sum_j gamma^(j-t) ig_j / sqrt(n)
       --adaptive_clip_scale--> c [B, T]               (iii) 1 + beta (2 sigmoid(ig) - 1)
    turn advantage = alpha * D + outcome advantage;  outcome turn: outcome advantage, c = 1
    --gather by turn_ids--> advantages, clip_scale [B, L]

:func:`compute_a2tgpo_advantages` (registered as advantage estimator ``"a2tgpo"``; the
``"a2tgpo_turn_group"`` entry runs it with ``info_gain_norm_mode="turn-group"``) chains
them for each ``info_gain_norm_mode``, fused for speed (it runs every training step) in one
``[B, T+3]`` working layout (:func:`_turn_layout`): the outcome reward and the IG turns
share one normalization pool, every per-row mask is one row of a cached table picked by
the row's IG-turn count ``n_b`` (the turns are left-aligned, so ``n_terms`` is
``n_b - t``), the accumulation is one ``[B, T+3] @ [T+3, T+3]`` product, and the two
token outputs come from one gather of a complex table. The tests check the estimator
against the loop reference and against the chain of the public primitives.

Batch layout
    ``B`` trajectories. Per-turn tensors are ``[B, T]``: column ``t`` is the ``t``-th
    tool-calling ("IG") turn, ``ig_mask: [B, T] bool`` marks the turns a trajectory has
    and must be left-aligned (trajectory ``b`` has IG turns ``0 .. n_b - 1``; rows are
    ragged). After its IG turns every trajectory has one final-answer ("outcome") turn,
    which is turn ``n_b``. Per-turn *outputs* are ``[B, T + 1]`` (room for the outcome turn
    of the longest trajectory). Tokens are ``[B, L]``: ``turn_ids: [B, L] int`` gives each
    token's turn (``0 .. n_b``, the outcome turn's tokens carry ``n_b``) and ``-1`` on
    tokens of no turn (prompt, tool outputs, padding); ``response_mask: [B, L]`` is
    optional and further restricts the tokens. Ids that break this layout are refused
    (:func:`~trainer_hooks.advantages.turn_ids.check_turn_ids`): 1-based ids, ids past
    ``n_b``, a trajectory whose outcome turn has no token. Turn boundaries come only from
    ``turn_ids``: the released code found them by spotting changes of the advantage
    value between neighbouring tokens, which merges two adjacent turns whose advantages
    happen to be equal.

``info_gain_norm_mode`` (the four strata of the seed article, each a superset of the last)
    ``"joint"`` — ATPO / IGPO: IG rewards and the outcome reward of all trajectories of a
        prompt are normalized together as one pool, then each turn's advantage is the
        discounted return over the turn chain ``A_t = r_t + gamma A_{t+1}`` whose last
        link is the outcome turn.
    ``"separate"`` — as joint, but outcome rewards and IG rewards are normalized in
        separate per-prompt pools (IG at every depth still shares one pool).
    ``"turn-group"`` — as separate, but IG is normalized per composite group
        ``prompt_group * T + turn_index`` (primitive i): turn 3 is compared only with
        turn 3 of the same prompt. (The released code's turn-group branch also rescales
        IG to the outcome's sigma, accumulates *before* normalizing and adds 1.5x the
        outcome advantage; those ablation details are not reproduced.)
    ``"turn-group-v1d"`` (default) — A²TGPO: turn-group normalization, then
        ``D_t = sum_{valid j >= t} gamma^(j-t) normed_ig_j / sqrt(n_terms)`` over the
        trajectory's valid IG turns (primitive ii), turn advantage
        ``alpha * D_t + outcome_adv`` (outcome turn: ``outcome_adv``), and the adaptive
        clip scale ``1 + beta (2 sigmoid(normed_ig_t) - 1)`` (primitive iii; 1.0 on the
        outcome turn). In the other modes the clip scale is 1 unless ``dynamic_clip=True``.

Normalization (as the released code): mean and biased std per group, ``std =
sqrt(var + 1e-8)``, ``(x - mean) / (std + eps)`` with ``eps = 1e-6``; groups whose members
are all equal (singletons included) give exactly 0. ``norm_adv_by_std=False`` centers
only; ``unbiased_std=True`` uses ``n - 1`` (verl's GRPO).

Dtypes: bf16/fp16 inputs are computed in float32 and the ``[B, L]`` / ``[B, T]`` outputs
are cast back to the promoted input dtype; float64 stays float64. No Python loop runs
over trajectories, turns or tokens.

The IG signal itself (gold log-probs -> IG) is :mod:`trainer_hooks.advantages.information_gain`'s,
re-exported here.

Telemetry (flat ``dict[str, Tensor]``, 0-dim, see :mod:`trainer_hooks.ops.stats`):
``ig_mean``, ``ig_std`` (raw IG over valid turns), ``normed_ig_mean``, ``normed_ig_std``,
``clip_scale_mean/std/min/max``, ``clip_scale_frac_low/high`` (over the valid turns,
outcome turns included), ``turn_adv_mean``, ``turn_adv_std`` (over the valid turns).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from trainer_hooks.advantages.information_gain import (
    INFO_GAIN_TYPES,
    gold_answer_logprobs,
    information_gain,
    information_gain_from_model,
)
from trainer_hooks.advantages.turn_ids import check_turn_ids
from trainer_hooks.ops.segments import (
    compute_dtype,
    dense_index,
    discount_matrix,
    reverse_discounted_sum,
    segment_normalize,
)
from trainer_hooks.ops.stats import clip_scale_bounds, clip_scale_entries, masked_row_stats
from trainer_hooks.registry import register_advantage_estimator

__all__ = [
    "INFO_GAIN_NORM_MODES",
    "INFO_GAIN_TYPES",
    "A2TGPOAdvantages",
    "adaptive_clip_scale",
    "assemble_turns",
    "check_turn_ids",
    "compute_a2tgpo_advantages",
    "discounted_turn_returns",
    "gold_answer_logprobs",
    "information_gain",
    "information_gain_from_model",
    "turn_group_ids",
    "turn_group_normalize",
    "variance_rescaled_accumulation",
]

INFO_GAIN_NORM_MODES = ("joint", "separate", "turn-group", "turn-group-v1d")


# ---------------------------------------------------------------------------------------
# Primitives (i)-(iii)
# ---------------------------------------------------------------------------------------


def turn_group_ids(prompt_group: Tensor, num_turns: int) -> tuple[Tensor, int]:
    """Composite group id ``prompt_group * num_turns + turn_index``.

    Args:
        prompt_group: ``[B] int`` (any integers; densified first).
        num_turns: ``T``, the number of per-turn columns.

    Returns:
        ``(ids [B, T] int64, num_groups = G * T)``.
    """
    index, G = dense_index(prompt_group)
    return index.unsqueeze(1) * num_turns + torch.arange(num_turns, device=index.device), G * num_turns


def turn_group_normalize(
    ig: Tensor,
    ig_mask: Tensor,
    prompt_group: Tensor,
    *,
    norm_adv_by_std: bool = True,
    eps: float = 1e-6,
    unbiased_std: bool = False,
) -> Tensor:
    """Primitive (i): normalize IG within each (prompt group, turn index) group.

    Args:
        ig: ``[B, T]`` float. ig_mask: ``[B, T]`` bool. prompt_group: ``[B] int``.
        norm_adv_by_std: divide by the group std (default) or only center.
        eps, unbiased_std: see module docstring.

    Returns:
        ``[B, T]`` in the compute dtype; 0 on masked turns and in all-equal groups.
    """
    x = ig.to(compute_dtype(ig))
    ids, n_groups = turn_group_ids(prompt_group, ig.shape[1])
    mask = ig_mask.to(torch.bool)
    out = segment_normalize(
        x.reshape(-1),
        ids.reshape(-1),
        n_groups,
        mask.reshape(-1),
        use_std=norm_adv_by_std,
        eps=eps,
        unbiased=unbiased_std,
    )
    return out.view_as(x)


def variance_rescaled_accumulation(normed_ig: Tensor, ig_mask: Tensor, gamma: float = 1.0) -> Tensor:
    """Primitive (ii): ``D_t = sum_{valid j >= t} gamma^(j-t) ig_j / sqrt(n_terms_t)``.

    Args:
        normed_ig: ``[B, T]`` float. ig_mask: ``[B, T]`` bool (ragged valid turns).
        gamma: turn discount (default 1.0, the published recipe).

    Returns:
        ``[B, T]``; ``n_terms_t`` counts the valid turns ``j >= t``, so the sum's spread does
        not grow with trajectory depth. 0 on masked turns.
    """
    mask = ig_mask.to(torch.bool)
    discounted, n_terms = reverse_discounted_sum(normed_ig, mask, gamma)
    out = discounted / n_terms.clamp_min(1.0).sqrt()
    return torch.where(mask, out, torch.zeros_like(out))


def discounted_turn_returns(rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """IGPO's turn chain ``A_t = r_t + gamma A_{t+1}`` over the valid turns (no rescaling).

    ``rewards, mask: [B, K]``; returns ``[B, K]``, 0 on masked turns.
    """
    m = mask.to(torch.bool)
    out, _ = reverse_discounted_sum(rewards, m, gamma)
    return torch.where(m, out, torch.zeros_like(out))


def adaptive_clip_scale(normed_ig: Tensor, ig_mask: Tensor, beta: float = 0.3) -> Tensor:
    """Primitive (iii): per-turn clip scale ``c = 1 + beta (2 sigmoid(normed_ig) - 1)``.

    ``normed_ig, ig_mask: [B, T]``. Returns ``[B, T]`` strictly inside ``(1 - beta, 1 + beta)``
    for finite inputs (mathematically; in floating point a saturated sigmoid can touch the
    bound), ``1`` on masked turns. ``2 sigmoid(x) - 1 = tanh(x / 2)``, computed as tanh for
    accuracy near 0.
    """
    return torch.where(ig_mask.to(torch.bool), _clip_scale_of(normed_ig, beta), 1.0)


def _clip_scale_of(x: Tensor, beta: float) -> Tensor:
    """``1 + beta tanh(x / 2)`` elementwise; exactly 1 where ``x == 0``."""
    return torch.tanh(x * 0.5).mul(beta).add_(1.0)


def assemble_turns(ig_turn_values: Tensor, ig_mask: Tensor, outcome_values: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Append each trajectory's outcome turn after its IG turns.

    Args:
        ig_turn_values: ``[B, T]``. ig_mask: ``[B, T]`` bool, left-aligned.
        outcome_values: ``[B]``, the value of the outcome turn.

    Returns:
        ``(values [B, T+1], valid [B, T+1] bool, outcome_turn [B] int64)`` where
        ``outcome_turn[b] = n_b`` (the number of IG turns) holds ``outcome_values[b]``;
        values are 0 on invalid columns.
    """
    mask = ig_mask.to(torch.bool)
    outcome_turn = mask.sum(-1)
    is_outcome = torch.arange(mask.shape[1] + 1, device=mask.device) == outcome_turn.unsqueeze(1)
    padded = F.pad(torch.where(mask, ig_turn_values, 0.0), (0, 1))
    values = torch.where(is_outcome, outcome_values.to(padded.dtype).unsqueeze(1), padded)
    return values, F.pad(mask, (0, 1)) | is_outcome, outcome_turn


# ---------------------------------------------------------------------------------------
# The composed estimator
# ---------------------------------------------------------------------------------------


class A2TGPOAdvantages(NamedTuple):
    """Output of :func:`compute_a2tgpo_advantages`.

    ``advantages: [B, L]`` (0 on tokens outside every valid turn), ``clip_scale: [B, L]``
    (1 there), ``turn_advantages / turn_clip_scale / turn_valid: [B, T+1]``,
    ``normed_ig: [B, T]``, ``outcome_advantages: [B]``, ``telemetry``.

    In float32 / float64 the tensors are views: ``advantages`` and ``clip_scale`` are the
    two halves of one ``[B, L, 2]`` buffer (stride 2 along ``L``), the per-turn fields
    columns of the ``[B, T+3]`` working tensors. Call ``.contiguous()`` where a consumer
    needs dense memory.
    """

    advantages: Tensor
    clip_scale: Tensor
    turn_advantages: Tensor
    turn_clip_scale: Tensor
    turn_valid: Tensor
    normed_ig: Tensor
    outcome_advantages: Tensor
    telemetry: dict[str, Tensor]


@register_advantage_estimator("a2tgpo")
def compute_a2tgpo_advantages(
    outcome_rewards: Tensor,
    prompt_group: Tensor,
    ig: Tensor,
    ig_mask: Tensor,
    turn_ids: Tensor,
    response_mask: Tensor | None = None,
    *,
    info_gain_norm_mode: str = "turn-group-v1d",
    gamma: float = 1.0,
    adv_rescale_alpha: float = 0.3,
    clip_beta: float = 0.3,
    dynamic_clip: bool | None = None,
    norm_adv_by_std: bool = True,
    eps: float = 1e-6,
    unbiased_std: bool = False,
    with_telemetry: bool = True,
) -> A2TGPOAdvantages:
    """A²TGPO / IGPO per-token advantages and adaptive clip scale (see module docstring).

    Args:
        outcome_rewards: ``[B]`` trajectory-level reward (e.g. EM).
        prompt_group: ``[B] int``, the prompt (GRPO group) of each trajectory.
        ig: ``[B, T]`` raw per-turn information gain (:func:`information_gain`).
        ig_mask: ``[B, T]`` bool, left-aligned valid IG turns.
        turn_ids: ``[B, L] int``; IG turn ``t`` -> ``t``, outcome turn -> ``n_b``, else ``-1``.
        response_mask: optional ``[B, L]``; tokens outside it get advantage 0, scale 1.
        info_gain_norm_mode: ``"joint" | "separate" | "turn-group" | "turn-group-v1d"``.
        gamma: turn discount, default 1.0.
        adv_rescale_alpha: ``alpha`` weighting ``D`` in v1d, default 0.3 (published recipe).
        clip_beta: ``beta`` of the adaptive clip scale, default 0.3.
        dynamic_clip: emit the adaptive clip scale; default: only in ``turn-group-v1d``.
        norm_adv_by_std, eps, unbiased_std: normalization (module docstring).
        with_telemetry: compute the telemetry dict (about a third of the cost at
            256 x 8 x 512 on a CPU); ``False`` leaves it empty.

    Returns:
        :class:`A2TGPOAdvantages`.

    Raises:
        ValueError: bad shapes, an unknown mode, a ``ig_mask`` that is not left-aligned, or
            turn ids that break the layout (:func:`check_turn_ids`).
    """
    if info_gain_norm_mode not in INFO_GAIN_NORM_MODES:
        raise ValueError(
            f"unknown info_gain_norm_mode {info_gain_norm_mode!r}; known: {', '.join(INFO_GAIN_NORM_MODES)}"
        )
    B, T = ig.shape
    if outcome_rewards.shape != (B,) or prompt_group.shape != (B,) or ig_mask.shape != (B, T):
        raise ValueError(
            f"expected outcome_rewards/prompt_group [B]={B}, ig/ig_mask [B, T]; got "
            f"{tuple(outcome_rewards.shape)}, {tuple(prompt_group.shape)}, {tuple(ig.shape)}, {tuple(ig_mask.shape)}"
        )
    if turn_ids.dim() != 2 or turn_ids.shape[0] != B:
        raise ValueError(f"turn_ids must be [B, L] with B={B}, got {tuple(turn_ids.shape)}")
    out_dtype = torch.promote_types(ig.dtype, outcome_rewards.dtype)
    dt = torch.float64 if out_dtype == torch.float64 else torch.float32
    lay = _turn_layout(T, float(gamma), dt, ig.device)
    W = T + 3

    # Every per-row mask comes from one lookup by the row's IG-turn count n_b.
    mask = ig_mask.to(torch.bool)
    n_ig = mask.sum(-1)
    rows_f = lay.rows_f.index_select(0, n_ig)  # [B, 5, W]
    rows_b = lay.rows_b.index_select(0, n_ig)  # [B, 4W]
    pool_f, ig_f, turn_f, outcome_f, inv_sqrt_terms = rows_f.unbind(1)
    pool_b2, ig_b, turn_b = rows_b[:, : 2 * W], rows_b[:, 2 * W : 3 * W], rows_b[:, 3 * W :]
    if not torch.equal(mask, ig_b[:, 1 : T + 1]):
        # The outcome turn sits at n_b: a hole in the mask would put it on an IG turn.
        raise ValueError("ig_mask must be left-aligned: each trajectory's valid IG turns are 0 .. n_b - 1")
    check_turn_ids(turn_ids, n_ig, response_mask)

    # (i) Normalization pool [B, W]: the outcome reward in column 0, IG turn t in column
    # t + 1; masked-out entries are zeroed (garbage, even inf/nan, stays out).
    x = F.pad(ig.to(dt), (1, 2))
    x[:, 0] = outcome_rewards
    x = torch.where(pool_b2[:, :W], x, lay.zero)
    prompt_index, G = dense_index(prompt_group)
    normed = _normalize_pool(
        x,
        pool_f,
        pool_b2,
        prompt_index,
        G,
        lay.merges[info_gain_norm_mode],
        use_std=norm_adv_by_std,
        eps=eps,
        unbiased=unbiased_std,
    )
    outcome_adv = normed[:, :1]  # [B, 1]

    if info_gain_norm_mode == "turn-group-v1d":
        # (ii) Column 0 and the columns past n_b hold no IG (discount_ig ignores column 0),
        # so n_terms_t = n_b - t; the outcome turn gets the outcome advantage alone.
        turn_adv = (
            torch.addcmul(outcome_adv, normed @ lay.discount_ig, inv_sqrt_terms, value=adv_rescale_alpha) * turn_f
        )
    else:
        # IGPO's turn chain A_t = r_t + gamma A_{t+1}, whose last link is the outcome turn.
        turn_adv = torch.addcmul(normed * ig_f, outcome_adv, outcome_f) @ lay.discount_chain

    if dynamic_clip is None:
        dynamic_clip = info_gain_norm_mode == "turn-group-v1d"
    # (iii) ig_f = 0 off the IG turns gives exactly 1 there (outcome turn and sentinels included).
    turn_scale = (
        torch.addcmul(lay.one, torch.tanh(normed * 0.5), ig_f, value=clip_beta)
        if dynamic_clip
        else (torch.ones_like(normed))
    )

    advantages, clip_scale = _broadcast_to_tokens(turn_adv, turn_scale, turn_ids, response_mask)
    telemetry = _telemetry(x, normed, turn_scale, turn_adv, ig_b, turn_b, clip_beta) if with_telemetry else {}
    turns = slice(1, T + 2)
    return A2TGPOAdvantages(
        advantages=advantages.to(out_dtype),
        clip_scale=clip_scale.to(out_dtype),
        turn_advantages=turn_adv[:, turns].to(out_dtype),
        turn_clip_scale=turn_scale[:, turns].to(out_dtype),
        turn_valid=turn_b[:, turns],
        normed_ig=normed[:, 1 : T + 1].to(out_dtype),
        outcome_advantages=normed[:, 0].to(out_dtype),
        telemetry=telemetry,
    )


class _TurnLayout(NamedTuple):
    """Constants of the ``[B, W = T + 3]`` working layout (see :func:`_turn_layout`)."""

    rows_f: Tensor  # [T + 1, 5, W] float, row n: pool, IG-turn, turn, outcome-turn masks; 1/sqrt(n_terms)
    rows_b: Tensor  # [T + 1, 4W] bool, row n: pool mask twice, IG-turn mask, turn mask
    discount_ig: Tensor  # [W, W] gamma^(j - t) between IG-turn columns
    discount_chain: Tensor  # [W, W] gamma^(j - t) between turn columns
    merges: dict[
        str, tuple[Tensor, Tensor] | None
    ]  # per mode: [W, W] "same pool" as 0/1 and as 0/-inf; None = per column
    zero: Tensor  # 0-dim constants of the compute dtype
    one: Tensor


@functools.lru_cache(maxsize=64)
def _turn_layout(T: int, gamma: float, dtype: torch.dtype, device: torch.device) -> _TurnLayout:
    """The working layout of :func:`compute_a2tgpo_advantages`, cached per ``(T, gamma, dtype,
    device)`` (every training step asks for the same one).

    Columns ``W = T + 3``: column 0 holds the outcome reward in the normalization pool and
    is the (advantage 0, clip scale 1) sentinel for tokens of no turn; column ``t + 1`` is
    turn ``t`` (IG turns ``0 .. n_b - 1``, the outcome turn ``n_b``); column ``T + 2`` is
    never a turn, the sentinel for turn ids past ``T``. Whatever depends on a row only
    through its IG-turn count ``n_b`` is a table row ``n_b``, so one ``index_select`` per
    table gives every mask of the batch.
    """
    W = T + 3
    n = torch.arange(T + 1, device=device).unsqueeze(1)  # table rows: n_b
    col = torch.arange(W, device=device)
    c = col.unsqueeze(0)
    ig_turn = (c >= 1) & (c <= n)
    pool = ig_turn | (c == 0)
    turn = (c >= 1) & (c <= n + 1)
    outcome_turn = c == n + 1
    inv_sqrt_terms = torch.where(ig_turn, (n - c + 1).clamp_min(1).to(dtype).rsqrt(), 0.0)
    masks = torch.stack([pool, ig_turn, turn, outcome_turn], 1).to(dtype)
    rows_f = torch.cat([masks, inv_sqrt_terms.unsqueeze(1)], 1).contiguous()
    rows_b = torch.cat([pool, pool, ig_turn, turn], 1).contiguous()

    def between(cols: Tensor) -> Tensor:
        return (discount_matrix(W, gamma, dtype, device) * (cols.unsqueeze(1) & cols.unsqueeze(0))).contiguous()

    is_ig, is_turn = (col >= 1) & (col <= T), (col >= 1) & (col <= T + 1)
    same_pool = {
        "joint": col <= T,  # the outcome reward and every IG turn of a prompt
        "separate": is_ig,  # the IG turns of a prompt; column 0 stays alone
    }
    merges: dict[str, tuple[Tensor, Tensor] | None] = {"turn-group": None, "turn-group-v1d": None}
    for mode, together in same_pool.items():
        same = (together.unsqueeze(1) & together.unsqueeze(0)) | torch.eye(W, dtype=torch.bool, device=device)
        merges[mode] = same.to(dtype), torch.where(same, 0.0, float("-inf")).to(dtype)
    return _TurnLayout(
        rows_f=rows_f,
        rows_b=rows_b,
        discount_ig=between(is_ig),
        discount_chain=between(is_turn),
        merges=merges,
        zero=torch.zeros((), dtype=dtype, device=device),
        one=torch.ones((), dtype=dtype, device=device),
    )


def _normalize_pool(
    x: Tensor,
    pool_f: Tensor,
    pool_b2: Tensor,
    prompt_index: Tensor,
    G: int,
    merge: tuple[Tensor, Tensor] | None,
    *,
    use_std: bool,
    eps: float,
    unbiased: bool,
    var_eps: float = 1e-8,
) -> Tensor:
    """Normalize ``x: [B, W]`` within pools of (prompt, column group).

    ``pool_f: [B, W]`` float 0/1 and ``pool_b2: [B, 2W]`` bool (the pool mask, twice) mark
    the members; ``prompt_index: [B]`` in ``[0, G)``. Rows of one prompt are summed with one
    ``index_add`` over ``[G, W]`` (each column its own pool: turn-group); ``merge``, the
    ``[W, W]`` "same pool" matrix as 0/1 and as 0/-inf, then pools columns together (joint,
    separate). Same rules as
    :func:`~trainer_hooks.ops.segments.segment_normalize`: two-pass variance, biased
    unless ``unbiased``, ``std = sqrt(var + var_eps)``, exactly 0 outside the pool and in
    pools whose members are all equal (min == max, singletons included).
    """
    B, W = x.shape
    sums = x.new_zeros(G, 2 * W).index_add_(0, prompt_index, torch.cat([x, pool_f], 1))
    if merge is not None:
        sums = (sums.view(G, 2, W) @ merge[0]).view(G, 2 * W)
    total, count = sums[:, :W], sums[:, W:]
    n1 = count.clamp_min(1.0)
    centered = (x - (total / n1).index_select(0, prompt_index)) * pool_f
    ss = x.new_zeros(G, W).index_add_(0, prompt_index, centered * centered)
    if merge is not None:
        ss = ss @ merge[0]
    # max(x) and max(-x) of each pool in one scatter; a pool is informative iff max > min.
    d = x.detach()
    spread = torch.where(pool_b2, torch.cat([d, -d], 1), float("-inf"))
    top = d.new_full((G, 2 * W), float("-inf")).scatter_reduce_(
        0, prompt_index.unsqueeze(1).expand(B, 2 * W), spread, "amax"
    )
    if merge is not None:
        top = (top.view(G, 2, 1, W) + merge[1]).amax(-1).view(G, 2 * W)
    informative = (top[:, :W] + top[:, W:]) > 0
    if not use_std:
        return centered * informative.to(x.dtype).index_select(0, prompt_index)
    var = ss / ((count - 1.0).clamp_min(1.0) if unbiased else n1)
    # Dividing by +inf zeroes the non-informative pools, and their gradient with it.
    denom = torch.where(informative, torch.sqrt(var + var_eps) + eps, float("inf"))
    return centered / denom.index_select(0, prompt_index)


def _broadcast_to_tokens(
    turn_adv: Tensor, turn_scale: Tensor, turn_ids: Tensor, response_mask: Tensor | None
) -> tuple[Tensor, Tensor]:
    """``turn_adv, turn_scale: [B, W]`` in the working layout -> ``(advantages, clip_scale): [B, L]``.

    Turn ``t`` is column ``t + 1``; columns 0 and ``W - 1`` (and every column past a row's
    outcome turn) hold ``(0, 1)``, so ids below 0 (shifted to 0), ids past ``T`` (clamped
    to ``W - 1``) and tokens outside ``response_mask`` (index 0) land on a sentinel.

    This is the only ``[B, L]`` work, kept to one int64 index and one gather: the two
    per-turn tables travel as the real and imaginary parts of one complex table, so the
    outputs are the two halves of one ``[B, L, 2]`` buffer (``advantages`` and
    ``clip_scale`` are strided views of it). On a CPU, ``where`` / ``masked_fill`` over a
    bool mask run scalar loops several times slower than integer passes, so the mask is
    applied as ``index & -mask``.
    """
    W = turn_adv.shape[1]
    index = turn_ids.long().add(1).clamp_(0, W - 1)
    if response_mask is not None:
        # & 0 or & ~0; the int8 view keeps the mask at one byte per token (sign-extended).
        index.bitwise_and_(response_mask.to(torch.bool).view(torch.int8).neg())
    both = torch.view_as_real(torch.complex(turn_adv, turn_scale).gather(1, index))
    return both[..., 0], both[..., 1]


def _telemetry(
    x: Tensor, normed: Tensor, turn_scale: Tensor, turn_adv: Tensor, ig_turn: Tensor, turn: Tensor, beta: float
) -> dict[str, Tensor]:
    """All ``[B, W]`` in the working layout: ``x`` the pool (raw IG on the IG-turn columns),
    ``ig_turn`` / ``turn`` bool masks of the IG turns and of every turn."""
    with torch.no_grad():
        # One stacked reduction for every quantity, the clip scale's bound counts included.
        values = torch.stack([x, normed, turn_scale, turn_adv]).flatten(1)
        masks = torch.stack([ig_turn, ig_turn, turn, turn]).flatten(1)
        n, stats, counts = masked_row_stats(values, masks, clip_scale_bounds(beta))
        assert counts is not None
        fractions = (counts[2] / n[2].clamp_min(1.0)).unbind()
        stats = torch.where(n > 0, stats, 0.0)
        if x.shape[0] == 0:  # every trajectory has its outcome turn: only B = 0 has no turns
            stats[2] = stats.new_tensor([1.0, 0.0, 1.0, 1.0])
        ig, normed_stats, scale, adv = (row.unbind() for row in stats.unbind())  # (mean, std, min, max) each
        return {
            "ig_mean": ig[0],
            "ig_std": ig[1],
            "normed_ig_mean": normed_stats[0],
            "normed_ig_std": normed_stats[1],
            **clip_scale_entries(*scale, *fractions),
            "turn_adv_mean": adv[0],
            "turn_adv_std": adv[1],
        }


@register_advantage_estimator("a2tgpo_turn_group")
def compute_a2tgpo_turn_group_advantages(*args: Any, **kwargs: Any) -> A2TGPOAdvantages:
    """:func:`compute_a2tgpo_advantages` with ``info_gain_norm_mode="turn-group"`` (primitive
    i only: no variance-rescaled accumulation, clip scale 1 unless ``dynamic_clip``)."""
    kwargs.setdefault("info_gain_norm_mode", "turn-group")
    return compute_a2tgpo_advantages(*args, **kwargs)
