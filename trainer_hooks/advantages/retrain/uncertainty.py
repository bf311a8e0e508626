"""Token uncertainty and the token-level transforms that consume it (retrain's GTPO, HICRA, SEPA).

``token_uncertainty`` turns sampled-token log-probs (or a full-distribution entropy) into
``H(t) [B, L]``; ``sepa_pool`` pulls execution-token uncertainty toward its per-completion
mean; ``gtpo_weighting`` scales each token's advantage by its relative uncertainty;
``hicra_amplify`` amplifies planning tokens; ``sepa_amplify`` pushes execution-token
uncertainty away from its mean instead (retrain's ``gtpo_sepa_amp``). The transforms are
registered as ``"sepa"``, ``"sepa_amp"``, ``"sepa_amp_c"``, ``"gtpo"`` and ``"hicra"``.

Shapes: ``[B, L]`` float tensors with a ``response_mask: [B, L]`` bool; outputs are 0
outside the mask. Half precision runs in float32; float64 stays float64.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainer_hooks.ops.distributions import categorical_entropy
from trainer_hooks.ops.masked import masked_mean
from trainer_hooks.ops.segments import to_compute_dtype
from trainer_hooks.ops.shapes import check_token_shapes, token_advantages
from trainer_hooks.registry import register_advantage_transform

__all__ = [
    "MAX_UNCERTAINTY",
    "canonical_uncertainty_kind",
    "entropy_from_logits",
    "gtpo_weighting",
    "hicra_amplify",
    "sepa_amplify",
    "sepa_amplify_clamped",
    "sepa_pool",
    "token_uncertainty",
]

#: Uncertainty values are capped: a -inf log-prob (or a huge surprisal from a sampler
#: tail) would otherwise dominate GTPO's per-sequence mean. Same cap as retrain.
MAX_UNCERTAINTY = 50.0

_UNCERTAINTY_ALIASES = {
    "surprisal": "surprisal",
    "token_surprisal": "surprisal",
    "neg_logprob": "surprisal",
    "negative_logprob": "surprisal",
    "nll": "surprisal",
    "predictive_variance": "predictive_variance",
    "pred_var": "predictive_variance",
    "bernoulli_variance": "predictive_variance",
    "shannon_entropy": "shannon_entropy",
    "shannon": "shannon_entropy",
    "entropy": "shannon_entropy",
    "token_entropy": "shannon_entropy",
}


def canonical_uncertainty_kind(kind: str) -> str:
    """Canonical name of an uncertainty kind (accepts retrain's aliases)."""
    try:
        return _UNCERTAINTY_ALIASES[kind.strip().lower()]
    except KeyError:
        known = ", ".join(sorted(_UNCERTAINTY_ALIASES))
        raise ValueError(f"unknown uncertainty_kind {kind!r}; known: {known}") from None


def entropy_from_logits(logits: Tensor, *, temperature: float = 1.0) -> Tensor:
    """Shannon entropy of the full next-token distribution, ``[B, L, V]`` -> ``[B, L]``.

    Computed in float32 (float64 kept) so bf16 logits do not lose the tail mass. Tokens
    with probability 0 (``-inf`` logits) add 0, as retrain's ``p > 0`` filter and
    ``torch.special.entr`` have it (see :mod:`trainer_hooks.ops.distributions`).
    """
    x = to_compute_dtype(logits) / temperature
    return categorical_entropy(torch.log_softmax(x, dim=-1))


def token_uncertainty(
    kind: str = "surprisal",
    *,
    logprobs: Tensor | None = None,
    entropy: Tensor | None = None,
) -> Tensor:
    """Per-token uncertainty signal fed to GTPO, capped at :data:`MAX_UNCERTAINTY`.

    Args:
        kind: ``"surprisal"`` (default, ``-logprob``), ``"predictive_variance"``
            (``p (1 - p)``, ``p = exp(logprob)``) or ``"shannon_entropy"`` (precomputed
            full-vocabulary entropy, e.g. :func:`entropy_from_logits`); aliases accepted.
        logprobs: ``[B, L]`` log-prob of each sampled token (surprisal, predictive_variance).
        entropy: ``[B, L]`` full-distribution entropy (shannon_entropy).

    Returns:
        ``[B, L]`` float tensor (padding positions are whatever the inputs hold there).
    """
    kind = canonical_uncertainty_kind(kind)
    if kind == "shannon_entropy":
        if entropy is None:
            raise ValueError(
                "uncertainty_kind='shannon_entropy' needs the per-token entropy of the full "
                "distribution (entropy=...; see entropy_from_logits); use 'surprisal' when "
                "only sampled-token log-probs are available"
            )
        return to_compute_dtype(entropy).clamp(max=MAX_UNCERTAINTY)
    if logprobs is None:
        raise ValueError(f"uncertainty_kind={kind!r} needs logprobs=[B, L] sampled-token log-probs")
    lp = to_compute_dtype(logprobs)
    if kind == "surprisal":
        return (-lp).clamp(max=MAX_UNCERTAINTY)
    p = lp.clamp(min=-MAX_UNCERTAINTY).exp().clamp(0.0, 1.0)
    return p * (1.0 - p)


@register_advantage_transform("gtpo")
def gtpo_weighting(
    advantages: Tensor,
    uncertainty: Tensor,
    response_mask: Tensor,
    *,
    beta: float = 0.1,
) -> Tensor:
    """GTPO: scale each token's advantage by its relative uncertainty.

    ``w(t) = max(0, 1 + beta * (H(t) / (mean_i(H) + 1e-8) - 1))`` where ``mean_i`` is over
    completion i's response tokens. The weight is 1 everywhere when ``beta == 0`` or
    ``mean_i(H) < 1e-7`` (retrain's guards).

    Args:
        advantages: ``[B]`` episode advantages (broadcast over tokens) or ``[B, L]``.
        uncertainty: ``[B, L]`` H(t) (see :func:`token_uncertainty`); capped at 50.
        response_mask: ``[B, L]`` bool.
        beta: strength; 0 disables (retrain default 0.1).

    Returns:
        ``[B, L]`` token advantages, 0 outside ``response_mask``.
    """
    check_token_shapes("gtpo_weighting", uncertainty=uncertainty, response_mask=response_mask)
    mask = response_mask.bool()
    adv = token_advantages("gtpo_weighting", to_compute_dtype(advantages), mask, per_sequence=True)
    h = torch.where(mask, to_compute_dtype(uncertainty).clamp(max=MAX_UNCERTAINTY), torch.zeros_like(adv))
    mean_h = masked_mean(h, mask, dim=-1)
    uniform = mean_h < 1e-7
    if beta == 0.0:
        uniform = torch.ones_like(uniform)
    weight = (1.0 + beta * (h / (mean_h + 1e-8)[:, None] - 1.0)).clamp_min(0.0)
    weight = torch.where(uniform[:, None], torch.ones_like(weight), weight)
    return torch.where(mask, adv * weight, torch.zeros_like(weight))


@register_advantage_transform("hicra")
def hicra_amplify(
    token_advantages: Tensor,
    planning_mask: Tensor,
    *,
    alpha: float = 0.2,
) -> Tensor:
    """HICRA: ``A(t) + alpha * |A(t)| * planning(t)``; amplifies planning tokens, keeps sign.

    Args:
        token_advantages: ``[B, L]``.
        planning_mask: ``[B, L]`` bool, True on planning tokens (see ``planning_mask_*``).
        alpha: amplification; 0 disables (retrain default 0.2).

    Returns:
        ``[B, L]``; positions where ``token_advantages`` is 0 stay 0.
    """
    check_token_shapes("hicra_amplify", token_advantages=token_advantages, planning_mask=planning_mask)
    adv = to_compute_dtype(token_advantages)
    return adv + alpha * adv.abs() * planning_mask.to(adv.dtype)


@register_advantage_transform("sepa")
def sepa_pool(
    uncertainty: Tensor,
    planning_mask: Tensor,
    response_mask: Tensor,
    *,
    lam: float | Tensor = 0.0,
) -> Tensor:
    """SEPA: pull execution-token uncertainty toward its per-completion mean.

    ``H'(t) = lam * mean_i(H_exec) + (1 - lam) * H(t)`` on execution tokens (response and
    not planning); planning tokens keep ``H(t)``. ``lam`` is clamped to ``[0, 1]``; get it
    from :class:`SEPAController`. Run before GTPO so that GTPO's differentiation falls on
    planning tokens.

    Args:
        uncertainty: ``[B, L]``; planning_mask, response_mask: ``[B, L]`` bool.
        lam: pooling strength (float or 0-dim tensor).

    Returns:
        ``[B, L]`` pooled uncertainty, 0 outside ``response_mask``.
    """
    check_token_shapes("sepa_pool", uncertainty=uncertainty, planning_mask=planning_mask, response_mask=response_mask)
    mask = response_mask.bool()
    h = to_compute_dtype(uncertainty).clamp(max=MAX_UNCERTAINTY)
    h = torch.where(mask, h, torch.zeros_like(h))
    lam_t = torch.as_tensor(lam, dtype=h.dtype, device=h.device).clamp(0.0, 1.0)
    execution = mask & ~planning_mask.bool()
    mean_exec = masked_mean(h, execution, dim=-1)
    pooled = lam_t * mean_exec[:, None] + (1.0 - lam_t) * h
    return torch.where(execution, pooled, h)


@register_advantage_transform("sepa_amp")
def sepa_amplify(
    uncertainty: Tensor,
    planning_mask: Tensor,
    response_mask: Tensor,
    *,
    lam: float | Tensor = 0.0,
    clamp_at_zero: bool = False,
) -> Tensor:
    """SEPA amplification: push execution-token uncertainty *away* from its mean.

    retrain's ``apply_sepa_amplification`` (transform mode ``gtpo_sepa_amp``):
    ``H'(t) = (1 + lam) H(t) - lam * mean_i(H_exec)`` on execution tokens, planning tokens
    keep ``H(t)``; with ``clamp_at_zero`` (``gtpo_sepa_amp_c``,
    ``apply_sepa_amplification_clamped``, registered as ``"sepa_amp_c"``) the result is
    floored at 0. ``lam`` is clamped to ``[0, 1]``.

    Args:
        uncertainty: ``[B, L]``; planning_mask, response_mask: ``[B, L]`` bool.
        lam: amplification strength (float or 0-dim tensor).

    Returns:
        ``[B, L]``, 0 outside ``response_mask``.
    """
    check_token_shapes(
        "sepa_amplify", uncertainty=uncertainty, planning_mask=planning_mask, response_mask=response_mask
    )
    mask = response_mask.bool()
    h = to_compute_dtype(uncertainty).clamp(max=MAX_UNCERTAINTY)
    h = torch.where(mask, h, torch.zeros_like(h))
    lam_t = torch.as_tensor(lam, dtype=h.dtype, device=h.device).clamp(0.0, 1.0)
    execution = mask & ~planning_mask.bool()
    mean_exec = masked_mean(h, execution, dim=-1)
    pushed = (1.0 + lam_t) * h - lam_t * mean_exec[:, None]
    if clamp_at_zero:
        pushed = pushed.clamp_min(0.0)
    return torch.where(execution, pushed, h)


@register_advantage_transform("sepa_amp_c")
def sepa_amplify_clamped(
    uncertainty: Tensor, planning_mask: Tensor, response_mask: Tensor, *, lam: float | Tensor = 0.0
) -> Tensor:
    """:func:`sepa_amplify` floored at 0 (retrain's ``gtpo_sepa_amp_c``)."""
    return sepa_amplify(uncertainty, planning_mask, response_mask, lam=lam, clamp_at_zero=True)
