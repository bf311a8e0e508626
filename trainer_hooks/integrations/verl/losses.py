"""The policy-loss adapters: our losses with verl's signature ``fn(old_log_prob, log_prob,
advantages, response_mask, loss_agg_mode, config, rollout_is_weights)`` and verl's metric
names (:mod:`trainer_hooks.integrations.verl`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from trainer_hooks.allocator import (
    SmallGainKLAllocator,
    apply_allocation,
    budget_from_margin,
    contraction_margin,
    position_group_ids,
    scale_grad,
)
from trainer_hooks.integrations.verl.settings import (
    ALLOCATORS,
    CARRIED,
    OPTIONS,
    SETTINGS,
    clip_fields,
    config_value,
    global_batch,
    verl_metrics,
)
from trainer_hooks.losses.a3po import a3po_policy_loss
from trainer_hooks.losses.astar_po import astar_po_loss
from trainer_hooks.losses.gspo import gspo_token_policy_loss
from trainer_hooks.losses.ppo import a2tgpo_policy_loss, ppo_policy_loss

__all__ = ["a2tgpo_loss", "a3po_loss", "astar_po_loss_verl", "gspo_smallgain_loss", "gspo_token_loss", "ppo_loss"]


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
        **clip_fields(config),
        clip_ratio_c=config_value(config, "clip_ratio_c", 3.0),
        global_batch=global_batch(config),
        compat=SETTINGS["compat"],
        rollout_is_weights=rollout_is_weights,
        with_telemetry=True if OPTIONS.get("ledger_ppo", {}).get("telemetry") else "basic",
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
    ``compute_a2tgpo_advantages``) is required, ``turn_ids`` turns on the turn-level ratio.
    In verl's stock actor both come from the batch through the actor extension
    (:mod:`trainer_hooks.integrations.verl.actor`); without either route it raises."""
    carried = CARRIED.get()
    if clip_scale is None and carried is not None:
        clip_scale = carried.get("clip_scale")
        if turn_ids is None and OPTIONS.get("ledger_a2tgpo", {}).get("ratio_level", "turn") == "turn":
            turn_ids = carried.get("turn_ids")
    if clip_scale is None:
        raise ValueError(
            "ledger_a2tgpo needs clip_scale=[B, L] (A²TGPO's adaptive clip scale); verl's stock actor passes "
            "only (old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config, rollout_is_weights). "
            "Install the actor extension (VERL_USE_EXTERNAL_MODULES=trainer_hooks.integrations.verl.actor), "
            "or use ledger_ppo with the ledger_a2tgpo advantages."
        )
    if clip_scale.shape != log_prob.shape:
        raise ValueError(
            f"ledger_a2tgpo: clip_scale {tuple(clip_scale.shape)} must match log_prob {tuple(log_prob.shape)}"
        )
    loss, tel = a2tgpo_policy_loss(
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        loss_agg_mode,
        clip_scale=clip_scale,
        turn_ids=turn_ids,
        **clip_fields(config),
        clip_ratio_c=config_value(config, "clip_ratio_c", 3.0),
        global_batch=global_batch(config),
        compat=SETTINGS["compat"],
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
        **clip_fields(config),
        global_batch=global_batch(config),
        compat=SETTINGS["compat"],
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
    opts = {**_SMALLGAIN_DEFAULTS, **OPTIONS.get("ledger_gspo_smallgain", {})}
    knobs = {k: v for k, v in opts.items() if k not in _SMALLGAIN_DEFAULTS}
    allocator = ALLOCATORS.get("ledger_gspo_smallgain")
    if allocator is None or allocator.lam.device != log_prob.device:
        allocator = SmallGainKLAllocator(opts["num_groups"], device=log_prob.device, **knobs)
        ALLOCATORS["ledger_gspo_smallgain"] = allocator
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
        **clip_fields(config),
        clip_scale=shaping.clip_scale,
        global_batch=global_batch(config),
        compat=SETTINGS["compat"],
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
    opts = dict(OPTIONS.get("ledger_a3po", {}))
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
        **clip_fields(config),
        clip_ratio_c=opts.pop("clip_ratio_c", config_value(config, "clip_ratio_c")),
        global_batch=global_batch(config),
        compat=opts.pop("compat", SETTINGS["compat"]),
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
    opts = {"kl_coef": 0.0, **OPTIONS.get("ledger_astar_po", {})}
    loss, tel = astar_po_loss(
        old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, global_batch=global_batch(config), **opts
    )
    return loss, verl_metrics(tel)
