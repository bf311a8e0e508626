"""A-3PO: decoupled PPO with a staleness-aware approximate proximal policy (arXiv 2512.06547).

Decoupled PPO separates the policy that *sampled* a token (behaviour, version
``v_behav``, stale in asynchronous training) from the trust-region anchor (the proximal
policy, one update behind the current one). A-3PO replaces the proximal policy's extra
forward pass with an interpolation in log space::

    d            = v_theta - v_behav                      (staleness, in policy versions)
    alpha        = 1 / d            if d >= 1             (weight of the behaviour policy)
                 = fresh_alpha      if d <= 0             (paper: 0)
    log pi_prox  = alpha * log pi_behav + (1 - alpha) * sg[log pi_theta]

    w  = exp(log pi_prox - log pi_behav)                  (behaviour importance weight, no grad)
    r  = exp(log pi_theta - log pi_prox) = (pi_theta / pi_behav)^alpha   in value
    l  = w * max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high))  [min with -A c if A < 0, dual clip]

so the trust region sits between behaviour and current policy ("sandwich"), and the
staler a token the closer its ratio is to 1. ``sg`` (stop-gradient) makes the proximal
policy a fixed anchor, as in AReaL where it comes from ``logprobs.detach()``: the
gradient of ``l`` is ``w * r * A * grad log pi_theta`` inside the clip range. The clipped
surrogate and the shared telemetry are :mod:`trainer_hooks.losses.ppo`'s; the reduction
is :func:`~trainer_hooks.losses.aggregation.agg_loss`.

Shapes: ``old_log_prob`` (behaviour), ``log_prob`` (current), ``advantages``,
``response_mask``: ``[B, L]``; ``behaviour_versions``: ``[B, L]`` (per token, AReaL) or
``[B]`` (per sequence) int; ``current_version``: int or 0-dim tensor. Tokens with a
negative version (prompt, tool output) have no behaviour policy: ``alpha = 1`` (proximal =
behaviour, ``w = 1``), and they are outside the loss mask anyway.

Where sources disagree (each is a keyword; ``compat="areal"`` selects AReaL @ 4aef98d8's
``ppo_actor_loss_fn`` / ``compute_prox_logp_approximations`` for all of them):
    * ``fresh_alpha`` (``d = 0``, data from the current version): 0 as in the paper's
      code (proximal = current, so ``r = 1`` and only ``w`` corrects the inference /
      training mismatch); AReaL's loglinear approximation uses 1 (proximal = behaviour).
    * ``behav_weight``: ``"always"`` (default; ``w`` is part of the decoupled objective,
      as the papers write it); AReaL multiplies by ``w`` only when rejection sampling is
      configured (``"with_rejection"``) and is otherwise plain PPO against the proximal
      policy.
    * Rejection sampling (AReaL's ``RejectionSamplingConfig``, ratio metric): off by
      default; ``rejection="mask"`` drops tokens (or rows, ``rejection_level="sequence"``)
      whose ``w`` is outside ``[rejection_lower, rejection_upper]`` from the numerator
      (not the token count), ``rejection="clamp"`` clamps their ``w`` instead.
      ``behav_imp_weight_cap=c`` is the token-level mask with upper bound ``c``.
    * ``log_ratio_clamp``: 20 (verl's clamp of the log ratio before ``exp``); AReaL
      clamps nothing (None).
    * Dual clip: off (``clip_ratio_c=None``), AReaL's decoupled-loss default; verl's PPO
      default is 3.0. AReaL writes it as ``min(l, c |A|)`` on every token, the same loss.

Telemetry (0-dim, detached): :func:`~trainer_hooks.losses.ppo.policy_telemetry`'s keys
(``pg_loss``, ``clipfrac_low``, ``clipfrac_high``, ``clipfrac_dual``, ``approx_kl`` =
token-mean ``log pi_prox - log pi_theta``, ``ratio_mean/min/max`` of ``r``, and the
constant ``clip_scale_*``) plus ``a3po_alpha_mean``, ``a3po_staleness_mean``,
``a3po_staleness_max``, ``a3po_future_frac`` (tokens whose behaviour version is newer
than the current one: a version-tracking bug), ``behav_approx_kl`` (token-mean
``log pi_behav - log pi_theta``), ``behav_weight_mean/std/min/max`` of ``w`` and
``behav_capped_frac``; all over ``response_mask``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from trainer_hooks.compat import resolve_options
from trainer_hooks.losses.aggregation import agg_loss, agg_options
from trainer_hooks.losses.ppo import LOG_RATIO_CLAMP, clipped_surrogate, policy_telemetry
from trainer_hooks.ops.masked import masked_mean
from trainer_hooks.ops.segments import compute_dtype
from trainer_hooks.ops.shapes import check_token_shapes, token_advantages
from trainer_hooks.ops.stats import masked_moments
from trainer_hooks.registry import register_policy_loss

__all__ = [
    "BEHAV_WEIGHT_RULES",
    "REJECTION_ACTIONS",
    "a3po_policy_loss",
    "behaviour_weight",
    "approximate_proximal_log_prob",
    "decoupled_ppo_loss",
    "staleness",
    "staleness_alpha",
]


def _versions_like(behaviour_versions: Tensor, like: Tensor) -> Tensor:
    versions = torch.as_tensor(behaviour_versions, device=like.device)
    if versions.is_floating_point():
        raise TypeError(f"behaviour_versions must be integers, got {versions.dtype}")
    return versions[:, None].expand_as(like) if versions.dim() == 1 else versions


def staleness(behaviour_versions: Tensor, current_version: int | Tensor) -> Tensor:
    """``d = current_version - behaviour_versions`` as int64 (same shape as the versions)."""
    current = torch.as_tensor(current_version, device=behaviour_versions.device, dtype=torch.long)
    return current - behaviour_versions.long()


def staleness_alpha(
    behaviour_versions: Tensor,
    current_version: int | Tensor,
    *,
    fresh_alpha: float = 0.0,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Interpolation weight of the behaviour policy, ``alpha = 1 / d`` for ``d >= 1``.

    Args:
        behaviour_versions: int tensor (any shape) of the policy version that sampled each
            token / sequence; negative = no version (alpha 1).
        current_version: version of the policy being trained (``v_theta``).
        fresh_alpha: alpha where ``d <= 0`` (0: the paper; 1: AReaL).
        dtype: float dtype of the result (the division happens in it, never in integers).

    Returns:
        ``alpha`` with the versions' shape, in ``[0, 1]``.
    """
    d = staleness(behaviour_versions, current_version).to(dtype)
    stale = d >= 1
    inverse = torch.reciprocal(torch.where(stale, d, torch.ones_like(d)))
    alpha = torch.where(stale, inverse, torch.full_like(d, fresh_alpha))
    return torch.where(behaviour_versions < 0, torch.ones_like(alpha), alpha)


def approximate_proximal_log_prob(old_log_prob: Tensor, log_prob: Tensor, alpha: Tensor) -> Tensor:
    """``alpha * log pi_behav + (1 - alpha) * sg[log pi_theta]``, all ``[B, L]``.

    Written as ``old + (1 - alpha) * (sg[new] - old)`` so that ``alpha = 1`` returns the
    behaviour log-prob exactly. No gradient flows (the proximal policy is an anchor).
    """
    old = old_log_prob.detach()
    return old + (1.0 - alpha) * (log_prob.detach() - old)


BEHAV_WEIGHT_RULES = ("always", "with_rejection")
REJECTION_ACTIONS = ("mask", "clamp")
REJECTION_LEVELS = ("token", "sequence")
REJECTION_AGGS = ("mean", "sum", "max")

_DECOUPLED_DEFAULTS: dict[str, Any] = {"behav_weight": "always", "log_ratio_clamp": LOG_RATIO_CLAMP}
_DECOUPLED_PRESETS: dict[str, dict[str, Any]] = {
    "areal": {"behav_weight": "with_rejection", "log_ratio_clamp": None},
    # verl has no decoupled loss; these only pick agg_loss's seq-mean-token-sum-norm
    "verl": {},
    "verl-0.9.1": {},
}


def behaviour_weight(
    proximal_log_prob: Tensor,
    old_log_prob: Tensor,
    mask: Tensor,
    *,
    rejection: str | None = None,
    upper: float = 5.0,
    lower: float | None = None,
    level: str = "token",
    agg: str = "mean",
    log_ratio_clamp: float | None = LOG_RATIO_CLAMP,
) -> tuple[Tensor, Tensor]:
    """Behaviour importance weight ``w = pi_prox / pi_behav`` and which tokens rejection touched.

    Without ``rejection``: ``w = exp(clamp(prox - behav, +-log_ratio_clamp))`` per token.
    With it, AReaL's ``apply_rejection_sampling`` (``metric="ratio"``): the log ratio is
    taken in float32 or wider (AReaL: always float32, so its float64 results differ from
    these by ~1e-8) with non-finite values read as 0 and no clamp; at
    ``level="sequence"`` every token of a row takes the row's geometric-mean weight
    ``exp(mean log ratio)`` and the bound is tested on the row's ``agg`` of the log ratio
    (``mean``, ``sum`` or ``max``, in ratio space); ``rejection="mask"`` zeroes ``w`` where
    the ratio (or the row's) is outside ``[lower, upper]`` (the token leaves the numerator,
    not the token count), ``"clamp"`` clamps ``w`` into ``[lower or 0, upper]`` there.

    Args:
        proximal_log_prob, old_log_prob: ``[B, L]`` (no gradient flows).
        mask: ``[B, L]`` bool tokens in the loss.

    Returns:
        ``(w, touched)``: ``[B, L]`` weight (0 outside ``mask``) and ``[B, L]`` bool tokens
        whose weight rejection zeroed or changed.
    """
    if rejection is None:
        log_ratio = proximal_log_prob.detach() - old_log_prob.detach()
        if log_ratio_clamp is not None:
            log_ratio = log_ratio.clamp(-log_ratio_clamp, log_ratio_clamp)
        w = torch.where(mask, torch.exp(log_ratio), torch.zeros_like(log_ratio))
        return w, torch.zeros_like(mask)
    for name, value, known in (
        ("rejection", rejection, REJECTION_ACTIONS),
        ("rejection_level", level, REJECTION_LEVELS),
        ("rejection_agg", agg, REJECTION_AGGS),
    ):
        if value not in known:
            raise ValueError(f"{name} must be one of {known}, got {value!r}")
    wide = torch.promote_types(proximal_log_prob.dtype, torch.float32)
    log_ratio = proximal_log_prob.detach().to(wide) - old_log_prob.detach().to(wide)
    log_ratio = torch.where(torch.isfinite(log_ratio) & mask, log_ratio, torch.zeros_like(log_ratio))
    w = torch.exp(log_ratio)
    if level == "sequence":
        count = mask.sum(-1, keepdim=True).clamp(min=1).to(wide)
        row_mean = log_ratio.sum(-1, keepdim=True) / count
        w = torch.exp(row_mean).expand_as(log_ratio)
        if agg == "mean":
            row = row_mean
        elif agg == "sum":
            row = log_ratio.sum(-1, keepdim=True)
        else:
            row = torch.where(mask, log_ratio, float("-inf")).amax(-1, keepdim=True)
            row = torch.where(mask.any(-1, keepdim=True), row, torch.zeros_like(row))
        metric = torch.exp(row).expand_as(log_ratio)
    else:
        metric = w
    inside = metric <= upper
    if lower is not None:
        inside = inside & (metric >= lower)
    if rejection == "mask":
        kept = mask & inside
        touched = mask & ~inside
        w = torch.where(kept, w, torch.zeros_like(w))
    else:
        clamped = torch.where(inside, w, w.clamp(min=0.0 if lower is None else lower, max=upper))
        touched = mask & (clamped != w)
        w = torch.where(mask, clamped, torch.zeros_like(clamped))
    return w.to(proximal_log_prob.dtype), touched


def decoupled_ppo_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    proximal_log_prob: Tensor,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float | None = None,
    behav_imp_weight_cap: float | None = None,
    behav_weight: str | None = None,
    rejection: str | None = None,
    rejection_upper: float = 5.0,
    rejection_lower: float | None = None,
    rejection_level: str = "token",
    rejection_agg: str = "mean",
    log_ratio_clamp: float | None = None,
    compat: str | None = None,
    loss_scale_factor: float | None = None,
    global_batch: Mapping[str, Any] | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Decoupled PPO with a given proximal policy (recomputed, or A-3PO's approximation).

    ``l = w * clipped_surrogate(exp(log pi_theta - log pi_prox), A)`` with the behaviour
    weight ``w`` of :func:`behaviour_weight`; ``proximal_log_prob`` and ``old_log_prob``
    are treated as constants. Arguments as :func:`a3po_policy_loss` (``proximal_log_prob:
    [B, L]``), and:

    Args:
        behav_weight: ``"always"`` (default: ``w`` is part of the decoupled objective, as
            the decoupled-PPO and A-3PO papers write it) or ``"with_rejection"`` (AReaL:
            ``w`` multiplies the loss only when rejection sampling is configured, i.e.
            ``rejection`` is given; otherwise the loss is plain PPO against the proximal
            policy).
        rejection: AReaL's rejection-sampling ``action``: None (off), ``"mask"`` (tokens
            or rows whose ratio is outside ``[rejection_lower, rejection_upper]`` leave the
            numerator) or ``"clamp"`` (their ``w`` is clamped into those bounds).
            ``behav_imp_weight_cap=c`` is ``rejection="mask", rejection_upper=c``.
        rejection_upper, rejection_lower, rejection_level, rejection_agg: AReaL's
            ``upper`` (5.0), ``lower`` (None), ``level`` (``"token"`` / ``"sequence"``) and
            ``agg`` (``"mean"`` / ``"sum"`` / ``"max"``); the metric is the ratio.
        log_ratio_clamp: clamp of ``log pi_theta - log pi_prox`` (and of the unrejected
            ``w``'s log) before ``exp``: verl's 20 by default; None (AReaL) clamps nothing.
        compat: ``"areal"`` sets ``behav_weight="with_rejection"`` and
            ``log_ratio_clamp=None``.

    Telemetry: ``policy_telemetry``'s keys plus ``behav_approx_kl``, ``behav_capped_frac``
    (tokens whose ``w`` rejection zeroed or changed), ``behav_weight_mean/std/min/max``
    (of the ``w`` applied; 1 where none is).
    """
    opts = resolve_options(
        "decoupled_ppo_loss",
        compat,
        _DECOUPLED_PRESETS,
        _DECOUPLED_DEFAULTS,
        {"behav_weight": behav_weight, "log_ratio_clamp": log_ratio_clamp},
    )
    if opts["behav_weight"] not in BEHAV_WEIGHT_RULES:
        raise ValueError(f"behav_weight must be one of {BEHAV_WEIGHT_RULES}, got {opts['behav_weight']!r}")
    if behav_imp_weight_cap is not None:
        if rejection is not None:
            raise ValueError("give behav_imp_weight_cap or rejection, not both (the cap is rejection='mask')")
        rejection, rejection_upper = "mask", behav_imp_weight_cap
    clamp = opts["log_ratio_clamp"]
    low = clip_ratio if clip_ratio_low is None else clip_ratio_low
    high = clip_ratio if clip_ratio_high is None else clip_ratio_high
    dt = compute_dtype(log_prob)
    check_token_shapes(
        "decoupled_ppo_loss",
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        response_mask=response_mask,
        proximal_log_prob=proximal_log_prob,
    )
    mask = response_mask.to(torch.bool)
    zero = torch.zeros((), dtype=dt, device=log_prob.device)
    # Padding may hold -inf log-probs; give it finite values before any subtraction.
    lp = torch.where(mask, log_prob.to(dt), zero)
    old = torch.where(mask, old_log_prob.detach().to(dt), zero)
    prox = torch.where(mask, proximal_log_prob.detach().to(dt), zero)
    adv = token_advantages("decoupled_ppo_loss", advantages, lp, per_sequence=True).to(dt)

    log_ratio = lp - prox if clamp is None else torch.clamp(lp - prox, min=-clamp, max=clamp)
    ratio = torch.exp(log_ratio)
    loss_mat, maps = clipped_surrogate(ratio, adv, clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=clip_ratio_c)
    applied = rejection is not None or opts["behav_weight"] == "always"
    if applied:
        behav_w, touched = behaviour_weight(
            prox,
            old,
            mask,
            rejection=rejection,
            upper=rejection_upper,
            lower=rejection_lower,
            level=rejection_level,
            agg=rejection_agg,
            log_ratio_clamp=clamp,
        )
        loss_mat = behav_w * loss_mat
    else:
        behav_w, touched = torch.where(mask, torch.ones_like(prox), zero), torch.zeros_like(mask)
    loss = agg_loss(loss_mat, mask, loss_agg_mode, **agg_options(global_batch, loss_scale_factor, compat))

    telemetry = policy_telemetry(
        loss=loss,
        ratio=ratio,
        log_ratio=log_ratio,
        mask=mask,
        maps=maps,
        clip_scale=None,
        turn_ids=None,
        clip_beta=0.3,
        ig=None,
        ig_mask=None,
    )
    with torch.no_grad():
        weighted = mask & ~(touched & (behav_w == 0))
        telemetry |= {
            "behav_approx_kl": masked_mean(old - lp, mask),
            "behav_capped_frac": masked_mean(touched.to(dt), mask),
            **masked_moments(behav_w, weighted, "behav_weight", empty=1.0),
        }
    return loss, telemetry


@register_policy_loss("a3po")
def a3po_policy_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    behaviour_versions: Tensor,
    current_version: int | Tensor,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float | None = None,
    behav_imp_weight_cap: float | None = None,
    fresh_alpha: float | None = None,
    behav_weight: str | None = None,
    rejection: str | None = None,
    rejection_upper: float = 5.0,
    rejection_lower: float | None = None,
    rejection_level: str = "token",
    rejection_agg: str = "mean",
    log_ratio_clamp: float | None = None,
    compat: str | None = None,
    loss_scale_factor: float | None = None,
    global_batch: Mapping[str, Any] | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Decoupled PPO loss with A-3PO's approximate proximal policy.

    Args:
        old_log_prob: ``[B, L]`` behaviour log-probs (recorded at rollout).
        log_prob: ``[B, L]`` current log-probs (gradient flows through these only).
        advantages: ``[B, L]`` (a ``[B]`` tensor is broadcast over tokens).
        response_mask: ``[B, L]`` bool/0-1 tokens in the loss.
        loss_agg_mode: :func:`agg_loss` mode (default ``"token-mean"``, AReaL's).
        behaviour_versions: ``[B, L]`` or ``[B]`` int policy version of each token/sequence.
        current_version: int version of the policy being trained.
        clip_ratio: symmetric clip (0.2); ``clip_ratio_low`` / ``clip_ratio_high`` override.
        clip_ratio_c: dual-clip constant ``c > 1``; None (default) disables.
        behav_imp_weight_cap: drop tokens whose behaviour weight ``w`` exceeds it (None: keep).
        fresh_alpha: alpha for zero staleness (0, see module docstring; AReaL 1).
        behav_weight, rejection, rejection_upper, rejection_lower, rejection_level,
            rejection_agg, log_ratio_clamp: see :func:`decoupled_ppo_loss`.
        compat: ``"areal"``: AReaL's decoupled loss (``fresh_alpha=1``,
            ``behav_weight="with_rejection"``, ``log_ratio_clamp=None``).
        loss_scale_factor: for ``seq-mean-token-sum-norm``.
        global_batch: verl's ``global_batch_info`` (``dp_size``, ``batch_num_tokens``,
            ``global_batch_size``): normalise over the global batch (see :func:`agg_loss`).

    Returns:
        ``(loss, telemetry)``: 0-dim loss (float32 for half inputs) and the flat dict.
    """
    fresh = resolve_options(
        "a3po_policy_loss",
        compat,
        {"areal": {"fresh_alpha": 1.0}, "verl": {}, "verl-0.9.1": {}},
        {"fresh_alpha": 0.0},
        {"fresh_alpha": fresh_alpha},
    )["fresh_alpha"]
    dt = compute_dtype(log_prob)
    mask = response_mask.to(torch.bool)
    versions = _versions_like(behaviour_versions, log_prob)
    alpha = staleness_alpha(versions, current_version, fresh_alpha=fresh, dtype=dt)
    zero = torch.zeros((), dtype=dt, device=log_prob.device)
    old = torch.where(mask, old_log_prob.to(dt), zero)
    prox = approximate_proximal_log_prob(old, torch.where(mask, log_prob.to(dt), zero), alpha)
    loss, telemetry = decoupled_ppo_loss(
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        loss_agg_mode,
        proximal_log_prob=prox,
        clip_ratio=clip_ratio,
        clip_ratio_low=clip_ratio_low,
        clip_ratio_high=clip_ratio_high,
        clip_ratio_c=clip_ratio_c,
        behav_imp_weight_cap=behav_imp_weight_cap,
        behav_weight=behav_weight,
        rejection=rejection,
        rejection_upper=rejection_upper,
        rejection_lower=rejection_lower,
        rejection_level=rejection_level,
        rejection_agg=rejection_agg,
        log_ratio_clamp=log_ratio_clamp,
        compat=compat,
        loss_scale_factor=loss_scale_factor,
        global_batch=global_batch,
    )
    with torch.no_grad():
        d = staleness(versions, current_version).to(dt)
        generated = mask & (versions >= 0)
        telemetry |= {
            "a3po_alpha_mean": masked_mean(alpha, mask),
            "a3po_staleness_mean": masked_mean(d, generated),
            "a3po_staleness_max": torch.where(generated, d, torch.zeros_like(d)).amax()
            if d.numel()
            else d.new_zeros(()),
            "a3po_future_frac": masked_mean((d < 0).to(dt), generated),
        }
    return loss, telemetry
