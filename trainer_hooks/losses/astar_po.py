"""A*-PO as TinyZero runs it: weighted supervised learning against a smooth V*.

Owns the V* estimator, the advantage -> example-weight schemes, the weighted-SFT loss
with its KL to the reference policy, the adaptive V*-sample schedule and the V* cache::

    V*(x)  = beta * log mean_j exp(r_j / beta)          (over samples j of prompt x; beta 0.5)
    A_i    = r_i - V*(x_i)
    A_norm = clamp((A - mean_B A) / (std_B A + 1e-6), -adv_clip, adv_clip)     (adv_clip 3)
    w_i    = clamp(A_norm + 1, 0.1, 5)                  ("normalized_advantage", the default)
    loss   = agg_b,t  w_b * (-log pi(y_bt) + kl_coef * KL_bt(pi || pi_ref))  (kl_coef 0.02)

This is *not* a policy gradient: every completion is imitated, good ones more (weights
stay positive), so nothing is "unlearned"; the gradient flows only through the policy's
log-probs, never through the weights.

Shapes: ``log_prob, old_log_prob, ref_log_prob, ref_kl, response_mask: [B, L]``;
``advantages, rewards, group_ids, vstar: [B]``. bf16/fp16 inputs are computed in float32.

Where sources disagree (TinyZero revisions, the new_ragen port), choices made here:
    * KL: weighted together with the CE (``weight_kl=True``, TinyZero's code multiplies
      ``CE + kl_coef * KL`` by the weight); ``weight_kl=False`` adds it unweighted, as
      the written formula ``CE + kl_coef * KL`` reads.
    * KL source: pass ``ref_kl`` (exact full-vocabulary KL, see :func:`full_vocab_kl`,
      what TinyZero computes) when you have both logits; otherwise it is estimated from
      sampled-token log-probs with the low-variance k3 estimator (``kl_estimator``).
    * Weight renormalisation to mean 1: always for ``exp`` (every revision), optional for
      the other schemes (``normalize_weights=False``, the revision the seed quotes; a
      later one divides by the mean).
    * Reduction: ``seq-mean-token-mean`` (TinyZero's per-example mean CE, then the batch
      mean); any :func:`~trainer_hooks.losses.aggregation.agg_loss` mode is accepted.
    * A batch whose advantages are all equal normalises to exactly 0 (TinyZero would keep
      the float residue divided by 1e-6).

Telemetry keys of :func:`astar_po_loss` (0-dim, detached): ``loss``, ``nll`` (token-mean
-log pi), ``kl_ref`` (token-mean KL to the reference), ``adv_mean/std/min/max`` (raw
advantages over non-empty rows; population std), ``adv_norm_mean``, ``adv_clipfrac``
(fraction of rows at the +-adv_clip clamp), ``weight_mean/std/min/max``, ``vstar_mean``
(when ``vstar`` is given), the shared contract's ``clipfrac_low/high`` (0: nothing is
clipped) and ``clip_scale_*`` (the neutral scale 1) and, when ``old_log_prob`` is given,
``approx_kl`` (token-mean ``old - new``) and ``ratio_mean/min/max`` of ``pi / pi_old``.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from trainer_hooks.losses.aggregation import agg_loss, agg_options
from trainer_hooks.ops.distributions import categorical_kl
from trainer_hooks.ops.masked import masked_mean, masked_var
from trainer_hooks.ops.segments import dense_index, segment_sum, to_compute_dtype
from trainer_hooks.ops.stats import clip_scale_entries, masked_moments
from trainer_hooks.registry import register_advantage_estimator, register_policy_loss

__all__ = [
    "WEIGHTING_SCHEMES",
    "VStarCache",
    "advantage_weights",
    "astar_po_advantages",
    "astar_po_loss",
    "full_vocab_kl",
    "normalize_advantages",
    "sampled_token_kl",
    "smooth_vstar",
    "vstar_num_samples",
    "vstar_per_group",
]

WEIGHTING_SCHEMES = ("normalized_advantage", "shifted_advantage", "exp")


# ---------------------------------------------------------------------------------------
# V*
# ---------------------------------------------------------------------------------------


def vstar_per_group(rewards: Tensor, group_ids: Tensor, *, beta: float = 0.5) -> tuple[Tensor, Tensor]:
    """Smooth maximum of each prompt's rewards: ``V* = beta * log mean exp(r / beta)``.

    Computed as ``max + beta * log mean exp((r - max) / beta)`` so it never overflows.
    ``beta <= 0`` gives the hard maximum. V* lies between the group mean and its max.

    Args:
        rewards: ``[N]`` rewards of the V* samples (TinyZero: binary rewards of
            reference-policy samples); group_ids: ``[N]`` int prompt of each sample.
        beta: temperature (0.5).

    Returns:
        ``(unique_group_ids [G], vstar [G])``, groups in ascending id order.
    """
    r = to_compute_dtype(rewards)
    index, num_groups = dense_index(group_ids)
    unique_ids = torch.unique(group_ids)
    gmax = r.new_empty(num_groups).scatter_reduce(0, index, r.detach(), "amax", include_self=False)
    if beta <= 0:
        # The gather keeps the result differentiable (gradient to the arg-max sample).
        top = r.new_full((num_groups,), -math.inf).scatter_reduce(0, index, r, "amax", include_self=True)
        return unique_ids, top
    count = segment_sum(torch.ones_like(r), index, num_groups)
    mean_exp = segment_sum(torch.exp((r - gmax[index]) / beta), index, num_groups) / count
    return unique_ids, gmax + beta * torch.log(mean_exp)


def smooth_vstar(rewards: Tensor, group_ids: Tensor, *, beta: float = 0.5) -> Tensor:
    """:func:`vstar_per_group` broadcast back to every sample: ``[B]`` -> ``[B]``."""
    index, _ = dense_index(group_ids)
    return vstar_per_group(rewards, group_ids, beta=beta)[1][index]


@register_advantage_estimator("astar_po")
def astar_po_advantages(
    rewards: Tensor,
    group_ids: Tensor,
    *,
    beta: float = 0.5,
    vstar: Tensor | None = None,
) -> Tensor:
    """A*-PO advantage ``A_i = r_i - V*(x_i)``.

    Args:
        rewards: ``[B]`` rewards of the training completions.
        group_ids: ``[B]`` int prompt of each completion.
        beta: V* temperature (0.5).
        vstar: ``[B]`` precomputed V* per completion (from separate reference samples or
            :class:`VStarCache`); default: :func:`smooth_vstar` over the batch's own groups.

    Returns:
        ``[B]`` raw (unnormalised) advantages; mostly <= 0 since V* is a soft maximum.
    """
    r = to_compute_dtype(rewards)
    v = smooth_vstar(r, group_ids, beta=beta) if vstar is None else to_compute_dtype(vstar).to(r.device)
    if v.shape != r.shape:
        raise ValueError(f"vstar {tuple(v.shape)} must match rewards {tuple(r.shape)}")
    return r - v


def vstar_num_samples(
    step: int,
    *,
    adaptive: bool = True,
    fixed_samples: int = 5,
    boundaries: Sequence[int] = (30, 70),
    samples: Sequence[int] = (5, 3, 2),
) -> int:
    """How many reference samples to draw per prompt for V* at training step ``step``.

    Adaptive (TinyZero default): 5 before step 30, 3 before step 70, then 2 (V* needs
    fewer samples once the cache is warm and the policy has moved). Non-adaptive:
    ``fixed_samples`` (TinyZero's ``v_star_samples``, 5).
    """
    if not adaptive:
        return fixed_samples
    if len(samples) != len(boundaries) + 1 or list(boundaries) != sorted(boundaries):
        raise ValueError("need len(samples) == len(boundaries) + 1 and increasing boundaries")
    return samples[bisect.bisect_right(list(boundaries), step)]


class VStarCache:
    """V* per prompt, so a prompt seen again costs no reference sampling.

    Keys are any hashables (prompt text, dataset index); a ``signature`` (e.g.
    ``(beta, num_samples, ref_model_version)``) is part of the key, so changing how V*
    is estimated never serves a stale value (TinyZero keys on prompt + sample count +
    temperature + reference model). Host-side dictionary state::

        vstar, hit = cache.lookup(prompts, signature=sig)      # [P] float64, [P] bool
        ... sample the reference for prompts where ~hit, then
        cache.store([p for p, h in zip(prompts, hit.tolist()) if not h], new_vstar, signature=sig)
    """

    def __init__(self) -> None:
        self._table: dict[tuple[Hashable, Hashable], float] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._table)

    def lookup(self, keys: Sequence[Hashable], *, signature: Hashable = None) -> tuple[Tensor, Tensor]:
        """``(vstar [P] float64 (nan on a miss), hit [P] bool)`` for ``keys``."""
        found = list(map(self._table.get, zip(itertools.repeat(signature), keys), itertools.repeat(math.nan)))
        values = torch.tensor(found, dtype=torch.float64)
        hit = ~torch.isnan(values)
        n_hit = int(hit.sum())
        self.hits += n_hit
        self.misses += len(found) - n_hit
        return values, hit

    def store(self, keys: Iterable[Hashable], vstar: Tensor | Sequence[float], *, signature: Hashable = None) -> None:
        """Remember ``vstar[i]`` for ``keys[i]`` (overwrites)."""
        values = torch.as_tensor(vstar, dtype=torch.float64).reshape(-1).tolist()
        keys = list(keys)
        if len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys but {len(values)} V* values")
        self._table.update(zip(zip(itertools.repeat(signature), keys), values))

    def stats(self) -> dict[str, float]:
        """Hit / miss counts since construction, hit rate and size (plain floats)."""
        total = self.hits + self.misses
        return {
            "vstar_cache_hits": float(self.hits),
            "vstar_cache_misses": float(self.misses),
            "vstar_cache_hit_rate": self.hits / total if total else 0.0,
            "vstar_cache_size": float(len(self._table)),
        }

    def clear(self) -> None:
        """Forget every V* (e.g. after the reference model changes)."""
        self._table.clear()

    def state_dict(self) -> dict[str, Any]:
        """Entries and counters, for checkpoints (keys must be picklable)."""
        return {"table": list(self._table.items()), "hits": self.hits, "misses": self.misses}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output."""
        self._table = {tuple(k): float(v) for k, v in state["table"]}
        self.hits = int(state.get("hits", 0))
        self.misses = int(state.get("misses", 0))


# ---------------------------------------------------------------------------------------
# Advantages -> weights
# ---------------------------------------------------------------------------------------


def normalize_advantages(
    advantages: Tensor,
    valid: Tensor | None = None,
    *,
    adv_clip: float = 3.0,
    eps: float = 1e-6,
) -> Tensor:
    """Batch-normalise and clamp: ``clamp((A - mean) / (std + eps), -adv_clip, adv_clip)``.

    Args:
        advantages: ``[B]``.
        valid: ``[B]`` bool rows that count (default all); others get 0.
        adv_clip: clamp bound (TinyZero 3.0; the new_ragen port used 5.0).
        eps: added to the unbiased std (TinyZero 1e-6).

    Returns:
        ``[B]``; exactly 0 when fewer than two valid rows or all valid advantages equal.
    """
    a = to_compute_dtype(advantages)
    valid = torch.ones_like(a, dtype=torch.bool) if valid is None else valid.bool()
    mean = masked_mean(a, valid)
    var = masked_var(a, valid, unbiased=True)
    # sqrt'(0) = inf would turn the zero gradient of a constant batch into nan.
    std = torch.where(var > 0, torch.sqrt(torch.where(var > 0, var, torch.ones_like(var))), torch.zeros_like(var))
    # Equal advantages carry no relative signal; test equality exactly, since the std of
    # the rounding residue is not 0 and residue / (residue + eps) is not small.
    detached = a.detach()
    top = torch.where(valid, detached, torch.full_like(detached, -math.inf)).amax()
    bottom = torch.where(valid, detached, torch.full_like(detached, math.inf)).amin()
    spread = top > bottom
    normed = (a - mean) / (std + eps)
    normed = torch.where(valid & spread, normed, torch.zeros_like(normed))
    return normed.clamp(-adv_clip, adv_clip)


def advantage_weights(
    advantages: Tensor,
    valid: Tensor | None = None,
    *,
    scheme: str = "normalized_advantage",
    beta: float = 0.5,
    adv_clip: float = 3.0,
    min_weight: float = 0.1,
    max_weight: float = 5.0,
    normalize_weights: bool = False,
) -> Tensor:
    """Per-example weights of the weighted-SFT loss (no gradient).

    Schemes (TinyZero):
        ``normalized_advantage`` (default): ``clamp(A_norm + 1, min_weight, max_weight)``.
        ``shifted_advantage``: ``A_norm + adv_clip`` (in ``[0, 2 adv_clip]``).
        ``exp``: ``exp(A / beta)`` on the *raw* advantage, divided by its mean (the original
        A* weighting; shifted by the max before exp so it cannot overflow).
    ``A_norm`` is :func:`normalize_advantages`. ``normalize_weights`` divides the first two
    by their mean (clamped at 1e-6) too.

    Args:
        advantages: ``[B]`` raw advantages ``r - V*``; valid: ``[B]`` bool rows that count.

    Returns:
        ``[B]`` detached weights, 0 on invalid rows.
    """
    a = to_compute_dtype(advantages).detach()
    valid = torch.ones_like(a, dtype=torch.bool) if valid is None else valid.bool()
    if scheme == "exp":
        logits = torch.where(valid, a / (beta + 1e-8), torch.full_like(a, -math.inf))
        w = torch.exp(logits - logits.max().clamp_min(-1e30))  # all-invalid: max is -inf
        return w / masked_mean(w, valid).clamp_min(1e-6)
    normed = normalize_advantages(a, valid, adv_clip=adv_clip)
    if scheme == "normalized_advantage":
        w = (normed + 1.0).clamp(min_weight, max_weight)
    elif scheme == "shifted_advantage":
        w = normed + adv_clip
    else:
        raise ValueError(f"unknown weighting scheme {scheme!r}; known: {', '.join(WEIGHTING_SCHEMES)}")
    w = torch.where(valid, w, torch.zeros_like(w))
    if normalize_weights:
        w = w / masked_mean(w, valid).clamp_min(1e-6)
    return w


# ---------------------------------------------------------------------------------------
# KL to the reference
# ---------------------------------------------------------------------------------------


def full_vocab_kl(logits: Tensor, ref_logits: Tensor, *, temperature: float = 1.0) -> Tensor:
    """Exact per-token ``KL(pi || pi_ref) = sum_v p (log p - log q)``: ``[B, L, V]`` -> ``[B, L]``.

    What TinyZero computes; differentiable in ``logits`` (``ref_logits`` is detached).
    Tokens the policy cannot emit (``-inf`` logits) add 0 instead of NaN.
    """
    logp = torch.log_softmax(to_compute_dtype(logits) / temperature, dim=-1)
    logq = torch.log_softmax(to_compute_dtype(ref_logits).detach() / temperature, dim=-1)
    return categorical_kl(logp, logq)


def sampled_token_kl(logprobs: Tensor, ref_logprobs: Tensor, *, estimator: str = "k3") -> Tensor:
    """KL(pi || pi_ref) estimated from the sampled tokens' log-probs, ``[B, L]``.

    ``k1``: ``log p - log q`` (unbiased, signed, high variance). ``k3`` (a.k.a.
    ``low_var_kl``): ``exp(q - p) - (q - p) - 1`` >= 0, its exponent clamped to
    ``[-20, 20]`` so one very unlikely reference token cannot overflow.
    """
    lp, ref = to_compute_dtype(logprobs), to_compute_dtype(ref_logprobs).detach()
    if estimator == "k1":
        return lp - ref
    if estimator in ("k3", "low_var_kl"):
        log_ratio = (ref - lp).clamp(-20.0, 20.0)
        return torch.exp(log_ratio) - log_ratio - 1.0
    raise ValueError(f"unknown KL estimator {estimator!r}; known: k1, k3 (low_var_kl)")


# ---------------------------------------------------------------------------------------
# The loss
# ---------------------------------------------------------------------------------------


@register_policy_loss("astar_po")
def astar_po_loss(
    old_log_prob: Tensor | None,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    *,
    ref_log_prob: Tensor | None = None,
    ref_kl: Tensor | None = None,
    vstar: Tensor | None = None,
    weighting_scheme: str = "normalized_advantage",
    beta: float = 0.5,
    adv_clip: float = 3.0,
    min_weight: float = 0.1,
    max_weight: float = 5.0,
    normalize_weights: bool = False,
    kl_coef: float = 0.02,
    kl_estimator: str = "k3",
    weight_kl: bool = True,
    loss_scale_factor: float | None = None,
    global_batch: Mapping[str, Any] | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Weighted-SFT A*-PO loss with KL to the reference policy.

    Same positional convention as every policy loss here (verl's):
    ``(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode)``.

    Args:
        old_log_prob: ``[B, L]`` rollout log-probs or None; telemetry only (A*-PO has no
            importance ratio).
        log_prob: ``[B, L]`` current policy log-probs of the completion tokens (grad flows).
        advantages: ``[B]`` raw advantages ``r - V*`` (:func:`astar_po_advantages`);
            ``[B, L]`` is accepted when constant along tokens (its first column is used).
        response_mask: ``[B, L]`` bool completion tokens (prompt and padding False).
        loss_agg_mode: :func:`agg_loss` mode (default ``seq-mean-token-mean``: TinyZero's
            per-example mean CE, then the batch mean).
        ref_log_prob: ``[B, L]`` reference log-probs of the same tokens (KL estimate).
        ref_kl: ``[B, L]`` exact per-token KL (:func:`full_vocab_kl`); wins over ref_log_prob.
        vstar: ``[B]`` V* per example, for the ``vstar_mean`` telemetry only.
        weighting_scheme, beta, adv_clip, min_weight, max_weight, normalize_weights:
            see :func:`advantage_weights` (defaults normalized_advantage, 0.5, 3, 0.1, 5, False).
        kl_coef: KL coefficient (0.02); 0 disables (then no reference is needed).
        kl_estimator: ``k3`` (default) or ``k1``, used when only ``ref_log_prob`` is given.
        weight_kl: multiply the KL by the example weight too (True, TinyZero's code).
        loss_scale_factor: for ``seq-mean-token-sum-norm``.
        global_batch: verl's ``global_batch_info`` (``dp_size``, ``batch_num_tokens``,
            ``global_batch_size``): normalise over the global batch (see :func:`agg_loss`).

    Returns:
        ``(loss, telemetry)``: 0-dim loss (float32 for half inputs) and the flat dict
        (keys in the module docstring).
    """
    mask = response_mask.bool()
    lp = to_compute_dtype(log_prob)
    adv = to_compute_dtype(advantages)
    if adv.dim() == 2:
        adv = adv[:, 0]
    valid = mask.any(-1)
    weights = advantage_weights(
        adv,
        valid,
        scheme=weighting_scheme,
        beta=beta,
        adv_clip=adv_clip,
        min_weight=min_weight,
        max_weight=max_weight,
        normalize_weights=normalize_weights,
    )
    # Padding may hold -inf log-probs: zero them before they meet a 0 weight (0 * inf).
    lp = torch.where(mask, lp, torch.zeros_like(lp))
    nll = -lp
    if kl_coef != 0.0:
        if ref_kl is not None:
            kl = to_compute_dtype(ref_kl)
        elif ref_log_prob is not None:
            ref = torch.where(mask, to_compute_dtype(ref_log_prob), torch.zeros_like(lp))
            kl = sampled_token_kl(lp, ref, estimator=kl_estimator)
        else:
            raise ValueError("kl_coef != 0 needs ref_log_prob=[B, L] or ref_kl=[B, L] (or set kl_coef=0)")
        kl = torch.where(mask, kl, torch.zeros_like(kl))
    else:
        kl = torch.zeros_like(nll)
    w = weights[:, None]
    loss_mat = w * (nll + kl_coef * kl) if weight_kl else w * nll + kl_coef * kl
    loss = agg_loss(loss_mat, mask, loss_agg_mode, **agg_options(global_batch, loss_scale_factor))

    with torch.no_grad():
        normed = normalize_advantages(adv, valid, adv_clip=adv_clip)
        tel: dict[str, Tensor] = {
            "loss": loss.detach(),
            "nll": masked_mean(nll, mask),
            "kl_ref": masked_mean(kl, mask),
            "adv_norm_mean": masked_mean(normed, valid),
            "adv_clipfrac": masked_mean((normed.abs() >= adv_clip).to(normed.dtype), valid),
        }
        tel |= masked_moments(adv, valid, "adv")
        tel |= masked_moments(weights, valid, "weight")
        # The shared loss telemetry contract: A*-PO clips no ratio, so nothing is clipped
        # and every token's clip scale is the neutral 1.
        zero, one = torch.zeros((), device=loss.device), torch.ones((), device=loss.device)
        tel |= {"clipfrac_low": zero, "clipfrac_high": zero}
        tel |= clip_scale_entries(one, zero, one, one, zero, zero)
        if vstar is not None:
            tel["vstar_mean"] = masked_mean(to_compute_dtype(vstar), valid)
        if old_log_prob is not None:
            log_ratio = lp - torch.where(mask, to_compute_dtype(old_log_prob), torch.zeros_like(lp))
            tel["approx_kl"] = masked_mean(-log_ratio, mask)
            ratio = masked_moments(torch.exp(log_ratio), mask, "ratio", empty=1.0)
            tel |= {k: ratio[k] for k in ("ratio_mean", "ratio_min", "ratio_max")}
    return loss, tel
