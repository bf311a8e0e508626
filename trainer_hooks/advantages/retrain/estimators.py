"""Episode-level advantages: one scalar per completion from its group's rewards.

``"grpo"`` (:func:`grpo_advantages`, GRPO as verl and the DeepSeekMath paper define it),
``"retrain_grpo"`` (:func:`retrain_grpo_advantages`, retrain's mean-centred GRPO) and
``"maxrl"`` (:func:`maxrl_advantages`), registered as advantage estimators;
:func:`group_reward_stats` and :func:`uniform_groups` (the per-group statistics the
pipeline's telemetry and skip rule read) and :data:`CORRECT_THRESHOLD`.

GRPO where verl (b178a3cd and 0.9.1 alike) and retrain 0.3.2 differ, each a keyword of
:func:`grpo_advantages` (default: verl's; ``compat="verl"`` / ``"retrain"`` sets all three):

* ``normalize_by_std``: verl True (``/ (std + eps)``, its ``norm_adv_by_std_in_grpo``);
  retrain False (centre only, as Dr. GRPO).
* ``single_completion`` (a group of one, ``rollout.n = 1``): verl ``"score"`` (mean 0,
  std 1, so ``A = r / (1 + eps)``, or ``r`` without std); retrain ``"zero"`` (``r - r``).
* ``var_eps`` (``std = sqrt(var + var_eps)``): verl 0; retrain 1e-8 (it has no std; this
  only matters if you turn the std on).

Kept from both: the std is the unbiased one (``torch.std``), ``eps = 1e-6``; a group of two
or more equal rewards gets exactly 0 (verl divides the rounding residue of the mean by
``0 + eps``, up to ~0.03 in float32, ~1e-10 in float64; nothing else differs).

Shapes: ``rewards: [B]`` float, ``group_ids: [B]`` int (any integers, any order); every
output is ``[B]``. bf16/fp16 rewards are computed in float32; float64 stays float64.
verl's own signature (``[B, L]`` token rewards, string uids, ``(advantages, returns)``) is
:func:`trainer_hooks.integrations.verl.grpo_outcome_advantage`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from trainer_hooks.compat import resolve_options
from trainer_hooks.ops.segments import SegmentStats, dense_index, segment_normalize, segment_stats, to_compute_dtype
from trainer_hooks.registry import register_advantage_estimator

__all__ = [
    "CORRECT_THRESHOLD",
    "group_reward_stats",
    "grpo_advantages",
    "grpo_dense",
    "maxrl_advantages",
    "retrain_grpo_advantages",
    "uniform_groups",
]

#: A completion counts as correct when its reward exceeds this (retrain's trainer).
CORRECT_THRESHOLD = 0.5

_GRPO_DEFAULTS = {"normalize_by_std": True, "single_completion": "score", "var_eps": 0.0}
_GRPO_PRESETS = {
    "verl": {},
    "verl-0.9.1": {},
    "retrain": {"normalize_by_std": False, "single_completion": "zero", "var_eps": 1e-8},
}
SINGLE_COMPLETION_RULES = ("score", "zero")


def _check_rewards(rewards: Tensor, group_ids: Tensor) -> Tensor:
    r = to_compute_dtype(rewards)
    if r.dim() != 1 or r.shape != group_ids.shape:
        raise ValueError(
            f"rewards {tuple(r.shape)} and group_ids {tuple(group_ids.shape)} must both be [B] "
            "(one scalar reward per completion; sum token-level rewards over the response first)"
        )
    return r


def group_reward_stats(rewards: Tensor, group_ids: Tensor) -> tuple[Tensor, SegmentStats]:
    """Dense group index ``[B]`` and per-group reward statistics (each ``[G]``)."""
    r = _check_rewards(rewards, group_ids)
    index, num_groups = dense_index(group_ids)
    return index, segment_stats(r, index, num_groups, torch.ones_like(r, dtype=torch.bool), unbiased=True)


def uniform_groups(
    rewards: Tensor, index: Tensor, num_groups: int, *, tolerance: float = 1e-6, single_is_uniform: bool = False
) -> Tensor:
    """``[G]`` bool: groups whose rewards tie within ``tolerance`` (``max - min <= tolerance``).

    retrain's rule (``trainer._summarize_reward_ties``, ``_UNIFORMITY_EPS = 1e-6``): a group
    is uniform when every reward is within the tolerance of the smallest, and a group of
    one completion is *not* uniform (``single_is_uniform=False``). ``tolerance=0`` means
    exact ties only.

    Args:
        rewards: ``[B]``; index: ``[B]`` dense group index (:func:`dense_index`);
        num_groups: ``G``.
    """
    r = to_compute_dtype(rewards).detach()
    top = r.new_full((num_groups,), float("-inf")).scatter_reduce_(0, index, r, "amax")
    bottom = r.new_full((num_groups,), float("inf")).scatter_reduce_(0, index, r, "amin")
    count = r.new_zeros(num_groups).index_add_(0, index, torch.ones_like(r))
    tied = (top - bottom) <= tolerance
    return tied if single_is_uniform else tied & (count > 1)


@register_advantage_estimator("grpo")
def grpo_advantages(
    rewards: Tensor,
    group_ids: Tensor,
    *,
    normalize_by_std: bool | None = None,
    single_completion: str | None = None,
    eps: float = 1e-6,
    var_eps: float | None = None,
    compat: str | None = None,
) -> Tensor:
    """GRPO advantage ``A_i = (r_i - mean_g(r)) / (std_g(r) + eps)`` (or centred only).

    Args:
        rewards: ``[B]`` scalar reward per completion.
        group_ids: ``[B]`` int prompt group of each completion (any integers).
        normalize_by_std: divide by the group's unbiased std (default True, verl's
            ``norm_adv_by_std_in_grpo``; False is Dr. GRPO / retrain).
        single_completion: a group of one: ``"score"`` (default, verl: mean 0, std 1, so
            ``A = r / (1 + eps)``, or ``r`` without std) or ``"zero"`` (retrain: ``r - r``).
        eps: added to the std (verl's ``epsilon``, 1e-6).
        var_eps: the std is ``sqrt(var + var_eps)`` (default 0, verl-exact).
        compat: ``"verl"``, ``"verl-0.9.1"`` or ``"retrain"`` (see the module docstring).

    Returns:
        ``[B]`` advantages; exactly 0 for every member of a group of two or more equal
        rewards.
    """
    r = _check_rewards(rewards, group_ids)
    index, num_groups = dense_index(group_ids)
    return grpo_dense(
        r,
        index,
        num_groups,
        normalize_by_std=normalize_by_std,
        single_completion=single_completion,
        eps=eps,
        var_eps=var_eps,
        compat=compat,
    )


def grpo_dense(
    rewards: Tensor,
    index: Tensor,
    num_groups: int,
    *,
    normalize_by_std: bool | None = None,
    single_completion: str | None = None,
    eps: float = 1e-6,
    var_eps: float | None = None,
    compat: str | None = None,
) -> Tensor:
    """:func:`grpo_advantages` on groups already numbered ``0 .. num_groups - 1``
    (``index: [B]`` int64, e.g. from :func:`~trainer_hooks.ops.segments.dense_index`), for
    callers that have the dense numbering anyway. Options as :func:`grpo_advantages`."""
    opts = resolve_options(
        "grpo_advantages",
        compat,
        _GRPO_PRESETS,
        _GRPO_DEFAULTS,
        {"normalize_by_std": normalize_by_std, "single_completion": single_completion, "var_eps": var_eps},
    )
    if opts["single_completion"] not in SINGLE_COMPLETION_RULES:
        raise ValueError(
            f"single_completion must be one of {SINGLE_COMPLETION_RULES}, got {opts['single_completion']!r}"
        )
    return segment_normalize(
        to_compute_dtype(rewards),
        index,
        num_groups,
        None,
        use_std=bool(opts["normalize_by_std"]),
        eps=eps,
        unbiased=True,
        var_eps=float(opts["var_eps"]),
        single=opts["single_completion"],
    )


@register_advantage_estimator("retrain_grpo")
def retrain_grpo_advantages(rewards: Tensor, group_ids: Tensor, **options: Any) -> Tensor:
    """retrain's GRPO, ``A_i = r_i - mean_g(r)`` ("no normalization"; a single completion
    gets 0): :func:`grpo_advantages` with ``compat="retrain"``. Keyword arguments as
    :func:`grpo_advantages` (e.g. ``normalize_by_std=True``) override the preset."""
    options.setdefault("compat", "retrain")
    return grpo_advantages(rewards, group_ids, **options)


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
