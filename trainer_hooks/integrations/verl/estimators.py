"""The advantage-estimator adapters: our estimators with verl's signature
``fn(token_level_rewards=[B, L], response_mask=[B, L], config=AlgoConfig, index=uids)`` ->
``(advantages, returns)`` (:mod:`trainer_hooks.integrations.verl`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from trainer_hooks.advantages.a2tgpo import compute_a2tgpo_advantages
from trainer_hooks.advantages.retrain import compose_advantages, grpo_dense
from trainer_hooks.integrations.verl.settings import OPTIONS, config_value
from trainer_hooks.losses.astar_po import astar_po_advantages
from trainer_hooks.ops.segments import dense_index

__all__ = ["a2tgpo_advantage", "astar_po_advantage", "grpo_outcome_advantage", "retrain_advantage", "turns_of"]


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
        by_std = bool(config_value(config, "norm_adv_by_std_in_grpo", True))
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
            config=OPTIONS.get("ledger_retrain") or None,
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
            **OPTIONS.get("ledger_astar_po_advantage", {}),
        )
        out = adv.to(scores.dtype).unsqueeze(-1) * response_mask
    return out, out


def turns_of(response_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
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
    keywords) with turns, per-turn IG and outcome read from verl's batch (package docstring).

    Returns:
        ``(advantages, clip_scale)``, both ``[B, L]``: the clip scale rides in verl's
        ``returns`` slot, which verl stores with the batch and hands to the actor, where
        :mod:`trainer_hooks.integrations.verl.actor` gives it to the ``ledger_a2tgpo``
        loss (1 outside the response mask). A critic would read it as its returns: this
        estimator is critic-free, as GRPO is.
    """
    rewards = _token_rewards(token_level_rewards, response_mask, "ledger_a2tgpo")
    with torch.no_grad():
        turn_ids, is_end, turns = turns_of(response_mask)
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
            **{"with_telemetry": False, **OPTIONS.get("ledger_a2tgpo_advantage", {})},
        )
        adv = result.advantages.contiguous().to(rewards.dtype)
        scale = result.clip_scale.contiguous().to(rewards.dtype)
    return adv, scale
