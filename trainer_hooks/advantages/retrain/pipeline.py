"""retrain's pipeline: the one function that chains estimator, uncertainty and transforms.

:func:`compose_advantages` runs ``advantage -> uncertainty -> (SEPA, GTPO) -> HICRA`` from
the names in a :class:`RetrainAdvantageConfig` (estimators and transforms are fetched from
:mod:`trainer_hooks.registry`), and returns a :class:`RetrainAdvantages`.
:func:`parse_transform_mode` reads retrain's ``transform_mode`` names.

Telemetry of :func:`compose_advantages` (flat ``dict[str, Tensor]``, 0-dim float):
    ``groups``, ``groups_informative``, ``groups_skipped_all_correct``,
    ``groups_skipped_all_wrong`` (counts; a group is skipped when it is uniform — rewards
    tied within ``uniform_tolerance``, two or more completions, retrain's rule — and
    "correct" when its first reward is > ``correct_threshold``),
    ``correct_rate`` (fraction of completions with reward > ``correct_threshold``),
    ``episode_adv_mean``, ``episode_adv_abs_mean`` (over completions),
    ``token_adv_mean``, ``token_adv_abs_mean`` (over ``loss_mask`` tokens),
    ``planning_token_frac`` (when a planning mask is given),
    ``uncertainty_exec_mean/var``, ``uncertainty_plan_mean/var`` (before SEPA) and
    ``uncertainty_exec_var_post`` (after SEPA) when GTPO runs, ``sepa_lambda``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, cast

import torch
from torch import Tensor

from trainer_hooks.advantages.retrain.estimators import CORRECT_THRESHOLD, group_reward_stats, uniform_groups
from trainer_hooks.advantages.retrain.uncertainty import token_uncertainty
from trainer_hooks.ops.masked import masked_mean, masked_var
from trainer_hooks.ops.segments import to_compute_dtype
from trainer_hooks.ops.shapes import check_token_shapes
from trainer_hooks.registry import get_advantage_estimator, get_advantage_transform

__all__ = [
    "RETRAIN_ADVANTAGE_MODES",
    "SEPA_STAGES",
    "RetrainAdvantageConfig",
    "RetrainAdvantages",
    "compose_advantages",
    "parse_transform_mode",
]

_STAGES = ("sepa", "gtpo", "hicra")
#: The SEPA variants (one at most): pool toward the mean, or amplify away from it.
SEPA_STAGES = ("sepa", "sepa_amp", "sepa_amp_c")

#: retrain's ``advantage_mode`` names whose registry entry has another name here (the
#: registry's ``"grpo"`` is verl's GRPO, which divides by the group std).
RETRAIN_ADVANTAGE_MODES = {"grpo": "retrain_grpo"}


def parse_transform_mode(mode: str) -> frozenset[str]:
    """Stages named by a retrain ``transform_mode``.

    ``"none"``, ``"gtpo"``, ``"gtpo_hicra"``, ``"gtpo_sepa"``, ``"gtpo_sepa_amp"``,
    ``"gtpo_sepa_amp_c"`` (retrain's names) or any ``_``/``+``/``,``-joined subset of
    ``{gtpo, sepa, sepa_amp, sepa_amp_c, hicra}`` with at most one SEPA variant. The
    stages always run in the order sepa -> gtpo -> hicra whatever the spelling. A SEPA
    stage needs ``gtpo`` (it only reshapes the uncertainty GTPO consumes).
    """
    text = mode.strip().lower()
    if text in ("", "none"):
        return frozenset()
    words = [p for p in re.split(r"[_+,\s]+", text) if p]
    parts: set[str] = set()
    i = 0
    while i < len(words):
        word = words[i]
        if word == "sepa" and words[i + 1 : i + 2] == ["amp"]:
            clamped = words[i + 2 : i + 3] == ["c"]
            word, i = ("sepa_amp_c", i + 3) if clamped else ("sepa_amp", i + 2)
        else:
            i += 1
        parts.add(word)
    unknown = parts - set(_STAGES) - set(SEPA_STAGES)
    if unknown:
        raise ValueError(
            f"unknown transform stage(s) {sorted(unknown)} in {mode!r}; known: gtpo, sepa, sepa_amp, sepa_amp_c, hicra"
        )
    sepa = parts & set(SEPA_STAGES)
    if len(sepa) > 1:
        raise ValueError(f"transform_mode {mode!r} names more than one SEPA variant: {sorted(sepa)}")
    if sepa and "gtpo" not in parts:
        raise ValueError(f"transform_mode {mode!r}: sepa reshapes the uncertainty that gtpo consumes; use 'gtpo_sepa'")
    return frozenset(parts)


@dataclass(frozen=True)
class RetrainAdvantageConfig:
    """Names and knobs of the pipeline (retrain's ``[algorithm]`` / ``[gtpo]`` / ``[hicra]``).

    Attributes:
        advantage_mode: retrain's names — ``"grpo"`` is *retrain's* GRPO (mean-centred,
            the registry's ``"retrain_grpo"``), ``"maxrl"`` — or any other registered
            estimator (``"astar_po"``; the registry's ``"grpo"``, verl's, is reached here
            as ``advantage_params={"compat": "verl"}``) or a dotted path to
            ``fn(rewards [B], group_ids [B], **advantage_params) -> [B]``.
        advantage_params: keyword arguments of the estimator, e.g.
            ``{"normalize_by_std": True}`` to divide retrain's GRPO by the group std.
        transform_mode: see :func:`parse_transform_mode`; ``"none"`` broadcasts A_i.
        uncertainty_kind: ``surprisal`` | ``predictive_variance`` | ``shannon_entropy``.
        gtpo_beta: GTPO strength (0.1). hicra_alpha: HICRA amplification (0.2).
        skip_uninformative: drop uniform groups from ``loss_mask`` (True), as retrain
            skips them; False keeps their tokens in the loss.
        uniform_tolerance: a group is uniform when its rewards tie within this
            (``max - min <= tol``; retrain's 1e-6, the default). 0: exact ties only.
        single_completion_uniform: whether a group of one completion counts as uniform
            (skipped). False (default): retrain keeps it, with advantage ``r - r = 0``
            under its GRPO; True drops its tokens from the loss mask.
        correct_threshold: reward above which a completion counts as correct (0.5).
    """

    advantage_mode: str = "grpo"
    advantage_params: Mapping[str, Any] = field(default_factory=dict)
    transform_mode: str = "none"
    uncertainty_kind: str = "surprisal"
    gtpo_beta: float = 0.1
    hicra_alpha: float = 0.2
    skip_uninformative: bool = True
    uniform_tolerance: float = 1e-6
    single_completion_uniform: bool = False
    correct_threshold: float = CORRECT_THRESHOLD

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RetrainAdvantageConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown retrain advantage config key(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**dict(values))


@dataclass
class RetrainAdvantages:
    """Output of :func:`compose_advantages`.

    Attributes:
        token_advantages: ``[B, L]`` float, 0 outside ``response_mask``.
        episode_advantages: ``[B]`` float, the estimator's output.
        informative: ``[B]`` bool, False for completions of uniform groups (rewards tied
            within ``uniform_tolerance``; see :class:`RetrainAdvantageConfig`).
        loss_mask: ``[B, L]`` bool, ``response_mask`` minus skipped groups (pass it to the
            loss so skipped tokens do not dilute a token-mean).
        telemetry: flat ``dict[str, Tensor]`` (keys in the module docstring).
    """

    token_advantages: Tensor
    episode_advantages: Tensor
    informative: Tensor
    loss_mask: Tensor
    telemetry: dict[str, Tensor]


def _masked_mean_var(values: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    # Population variance, as retrain's entropy statistics report it.
    return masked_mean(values, mask), masked_var(values, mask, unbiased=False)


def compose_advantages(
    rewards: Tensor,
    group_ids: Tensor,
    response_mask: Tensor,
    *,
    config: RetrainAdvantageConfig | Mapping[str, Any] | None = None,
    logprobs: Tensor | None = None,
    entropy: Tensor | None = None,
    planning_mask: Tensor | None = None,
    sepa_lambda: float | Tensor = 0.0,
) -> RetrainAdvantages:
    """retrain's pipeline: advantage -> uncertainty -> transform (SEPA, GTPO) -> HICRA.

    Args:
        rewards: ``[B]`` reward per completion.
        group_ids: ``[B]`` int prompt group per completion.
        response_mask: ``[B, L]`` bool, True on generated tokens.
        config: :class:`RetrainAdvantageConfig` or a mapping of its fields (default: GRPO,
            no transform).
        logprobs: ``[B, L]`` sampled-token log-probs (GTPO with surprisal /
            predictive_variance).
        entropy: ``[B, L]`` full-distribution entropy (GTPO with shannon_entropy).
        planning_mask: ``[B, L]`` bool planning tokens (needed by sepa and hicra;
            see :func:`planning_mask_from_token_ids` / :func:`planning_mask_from_token_strs`).
        sepa_lambda: pooling strength, usually ``SEPAController.resolve_lambda(step)``.

    Returns:
        :class:`RetrainAdvantages`.
    """
    if config is None:
        cfg = RetrainAdvantageConfig()
    elif isinstance(config, RetrainAdvantageConfig):
        cfg = config
    else:
        cfg = RetrainAdvantageConfig.from_mapping(config)
    mask = response_mask.bool()
    if mask.dim() != 2 or mask.shape[0] != rewards.shape[0]:
        raise ValueError(f"response_mask must be [B, L] with B={rewards.shape[0]}, got {tuple(mask.shape)}")
    check_token_shapes(
        "compose_advantages", response_mask=mask, logprobs=logprobs, entropy=entropy, planning_mask=planning_mask
    )
    stages = parse_transform_mode(cfg.transform_mode)
    sepa_stage = next(iter(stages & set(SEPA_STAGES)), None)
    if (sepa_stage or "hicra" in stages) and planning_mask is None:
        raise ValueError(f"transform_mode {cfg.transform_mode!r} needs planning_mask=[B, L] bool")

    estimator = get_advantage_estimator(RETRAIN_ADVANTAGE_MODES.get(cfg.advantage_mode, cfg.advantage_mode))
    episode = to_compute_dtype(torch.as_tensor(estimator(rewards, group_ids, **dict(cfg.advantage_params))))
    if episode.shape != rewards.shape:
        raise ValueError(f"advantage_mode {cfg.advantage_mode!r} returned shape {tuple(episode.shape)}, expected [B]")
    index, stats = group_reward_stats(rewards, group_ids)
    telemetry: dict[str, Tensor] = {}

    planning = planning_mask.bool() & mask if planning_mask is not None else None
    if "gtpo" in stages:
        # Padding may hold -inf / nan log-probs; zero it before any op whose backward
        # would multiply a zero gradient by a non-finite local derivative.
        lp = None if logprobs is None else torch.where(mask, to_compute_dtype(logprobs), 0.0)
        ent = None if entropy is None else torch.where(mask, to_compute_dtype(entropy), 0.0)
        raw = token_uncertainty(cfg.uncertainty_kind, logprobs=lp, entropy=ent)
        raw = torch.where(mask, raw, torch.zeros_like(raw))
        plan = planning if planning is not None else torch.zeros_like(mask)
        exec_tokens = mask & ~plan
        exec_mean, exec_var = _masked_mean_var(raw.detach(), exec_tokens)
        plan_mean, plan_var = _masked_mean_var(raw.detach(), plan)
        telemetry |= {
            "uncertainty_exec_mean": exec_mean,
            "uncertainty_exec_var": exec_var,
            "uncertainty_plan_mean": plan_mean,
            "uncertainty_plan_var": plan_var,
        }
        uncertainty = raw
        # The registry types its entries' results as object; the advantage transforms return tensors.
        if sepa_stage is not None:
            uncertainty = cast(Tensor, get_advantage_transform(sepa_stage)(raw, plan, mask, lam=sepa_lambda))
        telemetry["uncertainty_exec_var_post"] = _masked_mean_var(uncertainty.detach(), exec_tokens)[1]
        token_adv = cast(Tensor, get_advantage_transform("gtpo")(episode, uncertainty, mask, beta=cfg.gtpo_beta))
    else:
        token_adv = torch.where(mask, episode[:, None], torch.zeros((), dtype=episode.dtype, device=episode.device))
    if "hicra" in stages:
        token_adv = cast(Tensor, get_advantage_transform("hicra")(token_adv, planning, alpha=cfg.hicra_alpha))

    num_groups = stats.count.numel()
    skipped = uniform_groups(
        rewards, index, num_groups, tolerance=cfg.uniform_tolerance, single_is_uniform=cfg.single_completion_uniform
    )
    informative = ~skipped[index]
    loss_mask = mask & informative[:, None] if cfg.skip_uninformative else mask

    # Group-level counts: the first completion of each group stands for it.
    fdtype = episode.dtype
    order = torch.arange(index.numel(), device=mask.device)
    first_of_group = torch.zeros(num_groups, dtype=torch.long, device=mask.device)
    first_of_group = first_of_group.scatter_reduce(0, index, order, "amin", include_self=False)
    r = to_compute_dtype(rewards).detach()
    # A skipped group's rewards tie: its first member's reward is the group's (retrain's
    # rewards_G[0]).
    group_correct = r[first_of_group] > cfg.correct_threshold
    telemetry |= {
        "groups": torch.tensor(float(num_groups), dtype=fdtype, device=mask.device),
        "groups_informative": (~skipped).sum().to(fdtype),
        "groups_skipped_all_correct": (skipped & group_correct).sum().to(fdtype),
        "groups_skipped_all_wrong": (skipped & ~group_correct).sum().to(fdtype),
        "correct_rate": (r > cfg.correct_threshold).to(fdtype).mean(),
        "episode_adv_mean": episode.detach().mean(),
        "episode_adv_abs_mean": episode.detach().abs().mean(),
        "token_adv_mean": masked_mean(token_adv.detach(), loss_mask),
        "token_adv_abs_mean": masked_mean(token_adv.detach().abs(), loss_mask),
        "sepa_lambda": torch.as_tensor(sepa_lambda, dtype=fdtype, device=mask.device).clamp(0.0, 1.0)
        if sepa_stage is not None
        else torch.zeros((), dtype=fdtype, device=mask.device),
    }
    if planning is not None:
        telemetry["planning_token_frac"] = masked_mean(planning.to(fdtype), mask)
    return RetrainAdvantages(
        token_advantages=token_adv,
        episode_advantages=episode,
        informative=informative,
        loss_mask=loss_mask,
        telemetry=telemetry,
    )
