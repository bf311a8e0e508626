"""Drop-in adapters: our policy losses and advantage estimators in verl's own registries.

:func:`register` adds them to ``verl.trainer.ppo.core_algos``'s registries under names of
our own (``ledger_*``; a name verl already holds with another function is an error, so
verl's own entries are never replaced), after which verl selects them like its own::

    from trainer_hooks.integrations import verl as ledger_verl
    ledger_verl.register()                 # in every process that builds verl's actor
    # actor_rollout_ref.actor.policy_loss.loss_mode=ledger_gspo_token
    # algorithm.adv_estimator=ledger_grpo

verl calls a policy loss as ``fn(old_log_prob, log_prob, advantages, response_mask,
loss_agg_mode, config=ActorConfig, rollout_is_weights=None)`` and an estimator as
``fn(token_level_rewards=[B, L], response_mask=[B, L], config=AlgoConfig, index=uids)``
(``index`` a numpy array of uid strings, the GRPO group of each row) expecting
``(advantages, returns)``, both ``[B, L]``. The adapters here have exactly those
signatures; from the actor config they read verl's fields ``clip_ratio``,
``clip_ratio_low``, ``clip_ratio_high``, ``clip_ratio_c`` and ``global_batch_info`` (which
verl's actor fills with ``dp_size``, ``batch_num_tokens``, ``global_batch_size``,
``loss_scale_factor``), and return verl's metrics as floats under verl's names —
``actor/pg_clipfrac``, ``actor/ppo_kl``, ``actor/pg_clipfrac_lower`` — plus ours under
``actor/ledger/<key>``. Knobs verl's config has no field for are :func:`register`'s
``options`` (per name).

Policy losses
    ``ledger_ppo``           :func:`~trainer_hooks.losses.ppo.ppo_policy_loss` (equals verl's
                             ``vanilla``).
    ``ledger_a2tgpo``        A²TGPO's adaptive-clip loss. It needs the per-token clip scale
                             (and turn ids) from ``ledger_a2tgpo``'s advantages, which
                             verl's stock actor does not pass to a policy loss: call it
                             with ``clip_scale=`` / ``turn_ids=`` from a patched actor; without
                             them it raises instead of silently being PPO.
    ``ledger_gspo_token``    :func:`~trainer_hooks.losses.gspo.gspo_token_policy_loss` (the
                             paper's GSPO-token, honouring ``loss_agg_mode``).
    ``ledger_gspo_smallgain`` GSPO-token with the SmallGain–KL allocator's per-position
                             shaping (:mod:`trainer_hooks.allocator`); one allocator per
                             process, stepped once per loss call (micro-batch), its cost
                             measured against ``old_log_prob``.
    ``ledger_a3po``          A-3PO's decoupled loss with a constant staleness (option
                             ``staleness``, default 1 = verl's synchronous PPO): verl's
                             batch carries no per-token policy versions.
    ``ledger_astar_po``      A*-PO's weighted NLL; its KL term is verl's own
                             (``actor.use_kl_loss``), so ``kl_coef`` is 0 here.

Advantage estimators
    ``ledger_grpo``          GRPO (:func:`~trainer_hooks.advantages.retrain.grpo_advantages`,
                             verl's semantics, one-completion groups included), vectorised;
                             ``norm_adv_by_std_in_grpo`` from the config (default True).
    ``ledger_retrain``       retrain's pipeline (:func:`~trainer_hooks.advantages.retrain.
                             compose_advantages`, options = its config); tokens of skipped
                             (uniform) groups get advantage 0, since verl's batch has no
                             loss-mask channel. GTPO stages use ``old_log_probs`` when
                             verl passes them.
    ``ledger_astar_po``      A*-PO's ``r - V*`` (V* smoothed over the row's group).
    ``ledger_a2tgpo``        A²TGPO / IGPO advantages under verl's multi-turn layout: a
                             turn is a run of ``response_mask`` tokens (tool output is
                             masked out), each turn's information gain is the
                             ``token_level_rewards`` entry on its last token, and the last
                             turn's is the outcome reward.

Nothing here imports verl except :func:`register`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from trainer_hooks.advantages.a2tgpo import compute_a2tgpo_advantages
from trainer_hooks.advantages.retrain import compose_advantages, grpo_dense
from trainer_hooks.allocator import (
    SmallGainKLAllocator,
    apply_allocation,
    budget_from_margin,
    contraction_margin,
    position_group_ids,
    scale_grad,
)
from trainer_hooks.losses.a3po import a3po_policy_loss
from trainer_hooks.losses.astar_po import astar_po_advantages, astar_po_loss
from trainer_hooks.losses.gspo import gspo_token_policy_loss
from trainer_hooks.losses.ppo import a2tgpo_policy_loss, ppo_policy_loss
from trainer_hooks.ops.segments import dense_index

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "POLICY_LOSSES",
    "grpo_outcome_advantage",
    "register",
    "verl_compat",
    "verl_metrics",
]

#: Options per registered name, set by :func:`register` (knobs verl's config lacks).
_OPTIONS: dict[str, dict[str, Any]] = {}
#: Which verl's semantics the losses follow where verl versions differ (``agg_loss``'s
#: ``seq-mean-token-sum-norm``): set by :func:`register` from the installed verl's
#: version — ``"verl"`` (b178a3cd, 0.8.x) below 0.9, ``"verl-0.9.1"`` from 0.9 on.
_SETTINGS: dict[str, Any] = {"compat": "verl"}
_ALLOCATORS: dict[str, SmallGainKLAllocator] = {}
_GLOBAL_BATCH_KEYS = ("dp_size", "batch_num_tokens", "global_batch_size", "loss_scale_factor")


def _get(config: Any, key: str, default: Any = None) -> Any:
    """``config[key]`` for verl's dataclass configs, DictConfig, a dict, or None."""
    if config is None:
        return default
    if isinstance(config, Mapping):
        return config.get(key, default)
    getter = getattr(config, "get", None)
    if callable(getter):
        return getter(key, default)
    return getattr(config, key, default)


def _clip(config: Any) -> dict[str, Any]:
    """verl's clip fields: ``clip_ratio_low/high`` default to ``clip_ratio`` (0.2)."""
    ratio = _get(config, "clip_ratio", 0.2)
    low, high = _get(config, "clip_ratio_low"), _get(config, "clip_ratio_high")
    return {"clip_ratio_low": ratio if low is None else low, "clip_ratio_high": ratio if high is None else high}


def _global_batch(config: Any) -> dict[str, Any]:
    info = _get(config, "global_batch_info") or {}
    return {key: info[key] for key in _GLOBAL_BATCH_KEYS if key in info and info[key] is not None}


def verl_metrics(telemetry: Mapping[str, Tensor]) -> dict[str, float]:
    """verl's three policy-loss metrics (floats) from our telemetry, plus ours as
    ``actor/ledger/<key>``: ``pg_clipfrac`` = low + high clip fractions, ``ppo_kl`` =
    ``approx_kl``, ``pg_clipfrac_lower`` = the dual-clip fraction."""

    def value(key: str) -> float:
        found = telemetry.get(key)
        return 0.0 if found is None else float(found)

    out = {
        "actor/pg_clipfrac": value("clipfrac_low") + value("clipfrac_high"),
        "actor/ppo_kl": value("approx_kl"),
        "actor/pg_clipfrac_lower": value("clipfrac_dual"),
    }
    out.update({f"actor/ledger/{k}": float(v) for k, v in telemetry.items() if v.numel() == 1})
    return out


# ---------------------------------------------------------------------------------------
# Policy losses (verl's signature)
# ---------------------------------------------------------------------------------------


def ppo_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """``ledger_ppo``: our PPO loss, verl's ``vanilla`` semantics (all ``[B, L]``), with
    verl's three metrics (option ``telemetry=True`` adds all of ours)."""
    loss, tel = ppo_policy_loss(
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        loss_agg_mode,
        **_clip(config),
        clip_ratio_c=_get(config, "clip_ratio_c", 3.0),
        global_batch=_global_batch(config),
        compat=_SETTINGS["compat"],
        rollout_is_weights=rollout_is_weights,
        with_telemetry=True if _OPTIONS.get("ledger_ppo", {}).get("telemetry") else "basic",
    )
    return loss, verl_metrics(tel)


def a2tgpo_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: Tensor | None = None,
    *,
    clip_scale: Tensor | None = None,
    turn_ids: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """``ledger_a2tgpo``: A²TGPO's adaptive-clip PPO loss; ``clip_scale`` (``[B, L]``, from
    ``compute_a2tgpo_advantages``) is required, ``turn_ids`` turns on the turn-level ratio."""
    if clip_scale is None:
        raise ValueError(
            "ledger_a2tgpo needs clip_scale=[B, L] (A²TGPO's adaptive clip scale); verl's stock actor passes "
            "only (old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config, rollout_is_weights). "
            "Pass it from a patched actor, or use ledger_ppo with the ledger_a2tgpo advantages."
        )
    loss, tel = a2tgpo_policy_loss(
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        loss_agg_mode,
        clip_scale=clip_scale,
        turn_ids=turn_ids,
        **_clip(config),
        clip_ratio_c=_get(config, "clip_ratio_c", 3.0),
        global_batch=_global_batch(config),
        compat=_SETTINGS["compat"],
        rollout_is_weights=rollout_is_weights,
    )
    return loss, verl_metrics(tel)


def gspo_token_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    config: Any = None,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """``ledger_gspo_token``: GSPO-token with verl's clip config, honouring ``loss_agg_mode``."""
    loss, tel = gspo_token_policy_loss(
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        loss_agg_mode,
        **_clip(config),
        global_batch=_global_batch(config),
        compat=_SETTINGS["compat"],
        rollout_is_weights=rollout_is_weights,
    )
    return loss, verl_metrics(tel)


_SMALLGAIN_DEFAULTS = {"num_groups": 32, "bucket_size": 16, "mode": "clip", "kl_target": 0.01, "base_budget": 1.0}


def gspo_smallgain_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    config: Any = None,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """``ledger_gspo_smallgain``: GSPO-token shaped by the SmallGain–KL allocator.

    Options (``register(options={"ledger_gspo_smallgain": {...}})``): ``num_groups`` (32)
    position buckets of ``bucket_size`` (16) tokens, ``mode`` (``"clip"``, ``"lr"`` or
    ``"mixture"``), ``kl_target`` (0.01) and ``base_budget`` (1.0) of the adaptive budget,
    and any :class:`~trainer_hooks.allocator.SmallGainKLAllocator` keyword.
    """
    opts = {**_SMALLGAIN_DEFAULTS, **_OPTIONS.get("ledger_gspo_smallgain", {})}
    knobs = {k: v for k, v in opts.items() if k not in _SMALLGAIN_DEFAULTS}
    allocator = _ALLOCATORS.get("ledger_gspo_smallgain")
    if allocator is None or allocator.lam.device != log_prob.device:
        allocator = SmallGainKLAllocator(opts["num_groups"], device=log_prob.device, **knobs)
        _ALLOCATORS["ledger_gspo_smallgain"] = allocator
    mask = response_mask.to(torch.bool)
    groups = position_group_ids(mask, opts["num_groups"], opts["bucket_size"])
    log_ratio = (log_prob - old_log_prob).detach()
    measured = (-log_ratio * mask).sum() / mask.sum().clamp_min(1)
    budget = budget_from_margin(contraction_margin(measured, opts["kl_target"]), opts["base_budget"])
    step = allocator.step(advantages, log_ratio, mask, groups, budget.to(log_prob.device))
    shaping = apply_allocation(step.token_lambda, opts["mode"])
    lp = log_prob if shaping.grad_scale is None else scale_grad(log_prob, shaping.grad_scale)
    loss, tel = gspo_token_policy_loss(
        old_log_prob,
        lp,
        advantages,
        response_mask,
        loss_agg_mode,
        **_clip(config),
        clip_scale=shaping.clip_scale,
        global_batch=_global_batch(config),
        compat=_SETTINGS["compat"],
        rollout_is_weights=rollout_is_weights,
    )
    return loss, verl_metrics({**tel, **{k: v for k, v in step.telemetry.items() if ":" not in k}})


def a3po_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """``ledger_a3po``: A-3PO with every token ``staleness`` versions old (option, default 1);
    other options are :func:`~trainer_hooks.losses.a3po.a3po_policy_loss` keywords."""
    if rollout_is_weights is not None:
        raise ValueError("ledger_a3po corrects the behaviour policy itself; turn verl's rollout correction off")
    opts = dict(_OPTIONS.get("ledger_a3po", {}))
    staleness = int(opts.pop("staleness", 1))
    versions = torch.zeros(log_prob.shape[0], dtype=torch.long, device=log_prob.device)
    loss, tel = a3po_policy_loss(
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        loss_agg_mode,
        behaviour_versions=versions,
        current_version=staleness,
        **_clip(config),
        clip_ratio_c=opts.pop("clip_ratio_c", _get(config, "clip_ratio_c")),
        global_batch=_global_batch(config),
        compat=opts.pop("compat", _SETTINGS["compat"]),
        **opts,
    )
    return loss, verl_metrics(tel)


def astar_po_loss_verl(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    config: Any = None,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """``ledger_astar_po``: A*-PO's weighted NLL (options: its weighting keywords); the KL
    to the reference is verl's ``use_kl_loss`` term."""
    if rollout_is_weights is not None:
        raise ValueError("ledger_astar_po has no importance ratio to correct; turn verl's rollout correction off")
    opts = {"kl_coef": 0.0, **_OPTIONS.get("ledger_astar_po", {})}
    loss, tel = astar_po_loss(
        old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, global_batch=_global_batch(config), **opts
    )
    return loss, verl_metrics(tel)


# ---------------------------------------------------------------------------------------
# Advantage estimators (verl's signature)
# ---------------------------------------------------------------------------------------


def _group_ids(index: Any, rows: int, device: torch.device) -> tuple[Tensor, int]:
    """verl's ``index`` (uids: numpy array of str / int, or a tensor) numbered densely:
    ``([B] int64 in 0 .. G - 1, G)``, in first-seen order."""
    if index is None:
        raise ValueError("index (verl's per-row uid, the GRPO group) is required")
    if isinstance(index, Tensor):
        ids, groups = dense_index(index.to(device=device, dtype=torch.long).reshape(-1))
    else:
        try:  # verl depends on pandas; its hash factorize is 4x np.unique's sort of strings
            import pandas as pd

            codes, uniques = pd.factorize(np.asarray(index, dtype=object).reshape(-1), sort=False)
            ids, groups = torch.from_numpy(codes.astype(np.int64, copy=False)).to(device), len(uniques)
        except ImportError:
            seen: dict[Any, int] = {}
            ids = torch.tensor(
                [seen.setdefault(u, len(seen)) for u in np.asarray(index).reshape(-1).tolist()],
                dtype=torch.long,
                device=device,
            )
            groups = len(seen)
    if ids.shape != (rows,):
        raise ValueError(f"index must hold one uid per row ({rows}), got shape {tuple(ids.shape)}")
    return ids, groups


def _token_rewards(token_level_rewards: Tensor, response_mask: Tensor, function: str) -> Tensor:
    if token_level_rewards.dim() != 2 or token_level_rewards.shape != response_mask.shape:
        raise ValueError(
            f"{function}: token_level_rewards {tuple(token_level_rewards.shape)} and response_mask "
            f"{tuple(response_mask.shape)} must both be [B, L]"
        )
    return token_level_rewards


def grpo_outcome_advantage(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    index: Any = None,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool | None = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[Tensor, Tensor]:
    """``ledger_grpo``: verl's ``compute_grpo_outcome_advantage``, vectorised.

    Args:
        token_level_rewards: ``[B, L]``; the score of a row is its sum.
        response_mask: ``[B, L]``.
        index: ``[B]`` uids (the GRPO group of each row).
        epsilon: added to the std (1e-6).
        norm_adv_by_std_in_grpo: default: the config's, else True.

    Returns:
        ``(advantages, returns)``, the same ``[B, L]`` tensor, ``score * response_mask``-shaped.
    """
    rewards = _token_rewards(token_level_rewards, response_mask, "ledger_grpo")
    by_std = norm_adv_by_std_in_grpo
    if by_std is None:
        by_std = bool(_get(config, "norm_adv_by_std_in_grpo", True))
    with torch.no_grad():
        scores = rewards.sum(dim=-1)
        ids, groups = _group_ids(index, scores.shape[0], scores.device)
        adv = grpo_dense(scores, ids, groups, normalize_by_std=by_std, eps=epsilon, compat="verl").to(scores.dtype)
        out = adv.unsqueeze(-1) * response_mask
    return out, out


def retrain_advantage(
    token_level_rewards: Tensor, response_mask: Tensor, index: Any = None, config: Any = None, **kwargs: Any
) -> tuple[Tensor, Tensor]:
    """``ledger_retrain``: retrain's pipeline on the row scores (options: its config)."""
    rewards = _token_rewards(token_level_rewards, response_mask, "ledger_retrain")
    mask = response_mask.to(torch.bool)
    with torch.no_grad():
        scores = rewards.sum(dim=-1)
        out = compose_advantages(
            scores,
            _group_ids(index, scores.shape[0], scores.device)[0],
            mask,
            config=_OPTIONS.get("ledger_retrain") or None,
            logprobs=kwargs.get("old_log_probs"),
        )
        adv = torch.where(out.loss_mask, out.token_advantages, 0.0).to(rewards.dtype)
    return adv, adv


def astar_po_advantage(
    token_level_rewards: Tensor, response_mask: Tensor, index: Any = None, config: Any = None, **kwargs: Any
) -> tuple[Tensor, Tensor]:
    """``ledger_astar_po``: ``r - V*(group)`` broadcast over the row (option ``beta``)."""
    rewards = _token_rewards(token_level_rewards, response_mask, "ledger_astar_po")
    with torch.no_grad():
        scores = rewards.sum(dim=-1)
        adv = astar_po_advantages(
            scores,
            _group_ids(index, scores.shape[0], scores.device)[0],
            **_OPTIONS.get("ledger_astar_po_advantage", {}),
        )
        out = adv.to(scores.dtype).unsqueeze(-1) * response_mask
    return out, out


def _turns_of(response_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """verl's multi-turn layout: turn = run of masked tokens. Returns ``turn_ids [B, L]``
    (-1 outside), ``is_end [B, L]`` (last token of a turn) and ``turns [B]``."""
    mask = response_mask.to(torch.bool)
    before = F.pad(mask[:, :-1], (1, 0), value=False)
    after = F.pad(mask[:, 1:], (0, 1), value=False)
    starts = mask & ~before
    turn_ids = torch.where(mask, starts.long().cumsum(-1) - 1, torch.full_like(mask, -1, dtype=torch.long))
    return turn_ids, mask & ~after, starts.sum(-1)


def a2tgpo_advantage(
    token_level_rewards: Tensor, response_mask: Tensor, index: Any = None, config: Any = None, **kwargs: Any
) -> tuple[Tensor, Tensor]:
    """``ledger_a2tgpo``: A²TGPO advantages (options: ``compute_a2tgpo_advantages``
    keywords) with turns, per-turn IG and outcome read from verl's batch (module docstring)."""
    rewards = _token_rewards(token_level_rewards, response_mask, "ledger_a2tgpo")
    with torch.no_grad():
        turn_ids, is_end, turns = _turns_of(response_mask)
        rows = rewards.shape[0]
        width = max(int(turns.max().item()) if rows else 0, 1)
        per_turn = rewards.new_zeros(rows, width + 1)
        slot = torch.where(is_end, turn_ids, width)
        per_turn.scatter_add_(1, slot, torch.where(is_end, rewards, 0.0))
        n_ig = (turns - 1).clamp_min(0)
        ig_mask = torch.arange(width, device=rewards.device) < n_ig.unsqueeze(1)
        outcome = per_turn.gather(1, n_ig.unsqueeze(1)).squeeze(1)
        groups = _group_ids(index, rows, rewards.device)[0]
        result = compute_a2tgpo_advantages(
            outcome,
            groups,
            torch.where(ig_mask, per_turn[:, :width], 0.0),
            ig_mask,
            turn_ids,
            response_mask,
            **{"with_telemetry": False, **_OPTIONS.get("ledger_a2tgpo_advantage", {})},
        )
        adv = result.advantages.contiguous().to(rewards.dtype)
    return adv, adv


#: verl name -> adapter
POLICY_LOSSES: dict[str, Callable[..., tuple[Tensor, dict[str, float]]]] = {
    "ledger_ppo": ppo_loss,
    "ledger_a2tgpo": a2tgpo_loss,
    "ledger_gspo_token": gspo_token_loss,
    "ledger_gspo_smallgain": gspo_smallgain_loss,
    "ledger_a3po": a3po_loss,
    "ledger_astar_po": astar_po_loss_verl,
}
ADVANTAGE_ESTIMATORS: dict[str, Callable[..., tuple[Tensor, Tensor]]] = {
    "ledger_grpo": grpo_outcome_advantage,
    "ledger_retrain": retrain_advantage,
    "ledger_astar_po": astar_po_advantage,
    "ledger_a2tgpo": a2tgpo_advantage,
}


def verl_compat(version: str) -> str:
    """The ``compat`` preset of a verl version string: ``"verl"`` before 0.9 (b178a3cd is
    0.8.0.dev), ``"verl-0.9.1"`` from 0.9 on (an unparsable version counts as new)."""
    parts = version.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return "verl-0.9.1"
    return "verl" if (major, minor) < (0, 9) else "verl-0.9.1"


def register(options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, list[str]]:
    """Add every adapter to verl's registries; returns the names added, per registry
    (``{"policy_losses": [...], "advantage_estimators": [...]}``).

    Args:
        options: per name, the knobs verl's config has no field for, e.g.
            ``{"ledger_a3po": {"staleness": 2}, "ledger_retrain": {"transform_mode": "none"}}``
            (estimator options of the names that are both: ``ledger_astar_po_advantage``,
            ``ledger_a2tgpo_advantage``). Calling again replaces them.

    Raises:
        ImportError: verl is not installed.
        ValueError: verl already holds one of the names with another function, or an
            option names nothing registered here.
    """
    import verl
    from verl.trainer.ppo import core_algos

    known = set(POLICY_LOSSES) | set(ADVANTAGE_ESTIMATORS) | {"ledger_astar_po_advantage", "ledger_a2tgpo_advantage"}
    unknown = sorted(set(options or {}) - known)
    if unknown:
        raise ValueError(f"register: options for unknown name(s) {unknown}; known: {sorted(known)}")
    for table, existing in (
        (POLICY_LOSSES, core_algos.POLICY_LOSS_REGISTRY),
        (ADVANTAGE_ESTIMATORS, core_algos.ADV_ESTIMATOR_REGISTRY),
    ):
        clash = [name for name, fn in table.items() if name in existing and existing[name] is not fn]
        if clash:
            raise ValueError(f"register: verl already has {clash} with another function; not replacing them")
    _OPTIONS.clear()
    _OPTIONS.update({name: dict(values) for name, values in (options or {}).items()})
    _ALLOCATORS.clear()
    _SETTINGS["compat"] = verl_compat(getattr(verl, "__version__", ""))
    for name, fn in POLICY_LOSSES.items():
        core_algos.register_policy_loss(name)(fn)
    for name, estimator in ADVANTAGE_ESTIMATORS.items():
        core_algos.register_adv_est(name)(estimator)
    return {"policy_losses": list(POLICY_LOSSES), "advantage_estimators": list(ADVANTAGE_ESTIMATORS)}
