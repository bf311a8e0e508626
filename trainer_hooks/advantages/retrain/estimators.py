"""retrain's episode-level advantages: one scalar per completion from its group's rewards.

``grpo`` (:func:`grpo_advantages`) and ``maxrl`` (:func:`maxrl_advantages`), registered as
advantage estimators; :func:`group_reward_stats` (the per-group reward statistics the
pipeline's telemetry and skip rule read) and :data:`CORRECT_THRESHOLD`.

Shapes: ``rewards: [B]`` float, ``group_ids: [B]`` int (any integers, any order); every
output is ``[B]``. bf16/fp16 rewards are computed in float32; float64 stays float64.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainer_hooks.ops.segments import SegmentStats, dense_index, segment_normalize, segment_stats, to_compute_dtype
from trainer_hooks.registry import register_advantage_estimator

__all__ = ["CORRECT_THRESHOLD", "group_reward_stats", "grpo_advantages", "maxrl_advantages"]

#: A completion counts as correct when its reward exceeds this (retrain's trainer).
CORRECT_THRESHOLD = 0.5


def group_reward_stats(rewards: Tensor, group_ids: Tensor) -> tuple[Tensor, SegmentStats]:
    """Dense group index ``[B]`` and per-group reward statistics (each ``[G]``)."""
    r = to_compute_dtype(rewards)
    if r.dim() != 1 or r.shape != group_ids.shape:
        raise ValueError(f"rewards {tuple(r.shape)} and group_ids {tuple(group_ids.shape)} must both be [B]")
    index, num_groups = dense_index(group_ids)
    return index, segment_stats(r, index, num_groups, torch.ones_like(r, dtype=torch.bool), unbiased=True)


@register_advantage_estimator("grpo")
def grpo_advantages(
    rewards: Tensor,
    group_ids: Tensor,
    *,
    normalize_by_std: bool = False,
    eps: float = 1e-6,
    var_eps: float = 1e-8,
) -> Tensor:
    """Group-relative advantage ``A_i = r_i - mean_g(r)``, optionally ``/ (std_g + eps)``.

    Args:
        rewards: ``[B]`` scalar reward per completion.
        group_ids: ``[B]`` int prompt group of each completion (any integers).
        normalize_by_std: divide by the group std (verl / DeepSeekMath GRPO). Default
            False: retrain's GRPO centers only (see the package docstring of
            :mod:`trainer_hooks.advantages.retrain`).
        eps: added to the std when normalizing (verl's 1e-6).
        var_eps: the std is ``sqrt(unbiased_var + var_eps)`` (the shared
            :func:`~trainer_hooks.ops.segments.segment_normalize`); it keeps the
            gradient finite for constant groups and moves the result by < 1e-6 relative
            for any group whose variance exceeds 1e-2.

    Returns:
        ``[B]`` advantages; exactly 0 for groups whose rewards are all equal (singletons
        included): centering those leaves only rounding residue, which the std division
        would amplify to O(1).
    """
    r = to_compute_dtype(rewards)
    if r.dim() != 1 or r.shape != group_ids.shape:
        raise ValueError(f"rewards {tuple(r.shape)} and group_ids {tuple(group_ids.shape)} must both be [B]")
    index, num_groups = dense_index(group_ids)
    everyone = torch.ones_like(r, dtype=torch.bool)
    return segment_normalize(
        r, index, num_groups, everyone, use_std=normalize_by_std, eps=eps, unbiased=True, var_eps=var_eps
    )


@register_advantage_estimator("maxrl")
def maxrl_advantages(rewards: Tensor, group_ids: Tensor, *, eps: float = 1e-6) -> Tensor:
    """MaxRL inverse success-rate reweighting ``A_i = (r_i - mean_g) / (mean_g + eps)``.

    Meant for rewards in ``[0, 1]``: a low group mean (rare successes) amplifies the
    advantage of the successes. Groups with ``mean_g <= eps`` (all wrong) get 0, as do
    groups with all-equal rewards.

    Args:
        rewards: ``[B]``; group_ids: ``[B]`` int; eps: denominator guard (retrain: 1e-6).

    Returns:
        ``[B]`` advantages.
    """
    index, stats = group_reward_stats(rewards, group_ids)
    mean = stats.mean[index]
    usable = (mean > eps) & stats.informative[index]
    denom = torch.where(usable, mean + eps, torch.ones_like(mean))
    adv = (to_compute_dtype(rewards) - mean) / denom
    return torch.where(usable, adv, torch.zeros_like(adv))
