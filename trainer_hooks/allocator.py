"""SmallGain–KL allocator for GSPO-token: spend a global trust-region budget on the token
groups with the best value-per-KL-cost (seed spec "SmallGain–KL Allocator", Goldman).

Per step, for ``G`` token groups (position buckets by default, :func:`position_group_ids`):

1. Group statistics over the step's tokens: value ``v_k = mean A^2`` (token advantages),
   cost ``c_k = mean (log pi - log pi_ref)^2`` (KL-sensitivity proxy). ``v`` and ``c`` are
   EMA-smoothed (``ema_alpha``); the score is the EMA of ``v_k / (c_k + eps)``
   (``v_k`` when ``c_k = 0``) — the spec's ``s_k <- alpha v/(c+eps) + (1-alpha) s_k``, the
   first observation of a group initialising it. Groups without tokens keep their state.
2. Greedy fractional knapsack under ``rho * B_t``: every active group proposes
   ``lambda' = clamp(lambda (1 + max_step_change), lam_min, lam_max)``; its linearized KL
   spend is ``dKL_k = c_hat_k (lambda' - lambda) / max(lambda, eps)`` with ``c_hat`` the cost
   divided by its mean over groups (the spec's unit calibration). Groups are funded in
   descending score order (sort, cumsum, clamp): fully while the budget lasts, the
   boundary group fractionally, the rest not at all. A zero-cost proposal (e.g. a group
   already at ``lam_max``) keeps its level only if the budget was not exhausted before
   its turn, so scores keep deciding who stays wide.
3. Unfunded active groups relax toward ``unfunded_target`` (default 1.0: the spec's
   pseudocode resets them to 1) by at most ``max_step_change * lambda``; every
   multiplier stays in ``[lam_min, lam_max]``.
4. Application (:func:`apply_allocation`): ``"clip"`` (Option A, per-token clip-range
   multiplier for :func:`~trainer_hooks.losses.gspo.gspo_token_policy_loss`'s
   ``clip_scale``), ``"lr"`` (Option B, default as the spec recommends: per-token
   gradient multiplier, applied with :func:`scale_grad` to ``log_prob`` before the loss)
   or ``"mixture"`` (Option C: ``lambda^mix`` on the clip, ``lambda^(1-mix)`` on the step).
5. Acceptance: the sequence-level trust region stays the arbiter. When a guard
   (:func:`kl_guard`) fails, :meth:`SmallGainKLAllocator.accept_or_rollback` restores the
   multipliers of the implicated groups (default: those changed this step) and decays
   their scores by ``score_decay``.
6. Adaptive budget: :func:`budget_from_margin` shrinks ``B_t`` with the contraction
   margin (:func:`contraction_margin`): low margin -> small budget.

State is a handful of ``[G]`` tensors; no Python loop runs over groups or tokens (only
:meth:`~SmallGainKLAllocator.telemetry` builds one dict key per group for logging).

Telemetry (:meth:`SmallGainKLAllocator.telemetry`, flat, 0-dim): ``budget_global``
(``rho * B_t``, what may be spent), ``spent_global`` (``sum_k frac_k dKL_k``),
``rollbacks`` (count so far), ``alloc_mean/min/max`` and, per group ``k`` (when
``G <= max_groups``), ``score:group:k``, ``alloc:group:k`` (the multiplier
``lambda_k``), ``cost:group:k`` (EMA cost).

Defaults (spec §8): ``rho=0.7``, ``ema_alpha=0.3``, ``lambda in [0.8, 1.25]``,
``max_step_change=0.10``, ``eps=1e-9``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from trainer_hooks.ops.segments import segment_sum

__all__ = [
    "APPLICATION_MODES",
    "AllocationStep",
    "Shaping",
    "SmallGainKLAllocator",
    "apply_allocation",
    "budget_from_margin",
    "contraction_margin",
    "fractional_knapsack",
    "kl_guard",
    "position_group_ids",
    "scale_grad",
]

APPLICATION_MODES = ("clip", "lr", "mixture")


def position_group_ids(response_mask: Tensor, num_groups: int, bucket_size: int = 1) -> Tensor:
    """Group of each token by its position in the response: ``[B, L] -> [B, L] int64``.

    Position = index among the row's masked tokens; group = ``min(pos // bucket_size,
    num_groups - 1)``; ``-1`` outside ``response_mask``. ``bucket_size=1`` is the spec's
    per-token grouping (positions past ``num_groups - 1`` share the last group).
    """
    mask = response_mask.to(torch.bool)
    pos = mask.long().cumsum(-1) - 1
    groups = torch.clamp(pos // bucket_size, max=num_groups - 1)
    return torch.where(mask, groups, torch.full_like(groups, -1))


def fractional_knapsack(score: Tensor, cost: Tensor, budget: Tensor | float, active: Tensor) -> Tensor:
    """Greedy fractional knapsack: fraction ``[G]`` in ``[0, 1]`` of each item funded.

    Items (``active: [G] bool``) are taken in descending ``score: [G]`` order while
    ``budget`` lasts; ``cost: [G] >= 0`` is each item's full price; the boundary item gets
    the fraction that exhausts the budget. A zero-cost item is funded iff budget remains
    when its turn comes. Inactive items get 0. Ties keep index order (stable sort).
    """
    key = torch.where(active, score, torch.full_like(score, float("-inf")))
    order = torch.argsort(key, descending=True, stable=True)
    c = torch.where(active, cost, torch.zeros_like(cost))[order]
    remaining = torch.as_tensor(budget, dtype=c.dtype, device=c.device) - (torch.cumsum(c, 0) - c)
    frac_sorted = torch.where(
        c > 0, (remaining / torch.where(c > 0, c, torch.ones_like(c))).clamp(0.0, 1.0), (remaining > 0).to(c.dtype)
    )
    frac_sorted = frac_sorted * active[order].to(c.dtype)
    return torch.empty_like(frac_sorted).scatter(0, order, frac_sorted)


def contraction_margin(measured_kl: Tensor | float, kl_target: float) -> Tensor:
    """Stability margin ``clamp(1 - KL / KL_target, 0, 1)``: 1 = far inside the trust
    region, 0 = at (or past) it."""
    kl = torch.as_tensor(measured_kl, dtype=torch.float32)
    return (1.0 - kl / kl_target).clamp(0.0, 1.0)


def budget_from_margin(
    margin: Tensor | float, base_budget: float, *, margin_ref: float = 0.5, min_fraction: float = 0.0
) -> Tensor:
    """Adaptive ``B_t = base_budget * clamp(margin / margin_ref, min_fraction, 1)``: the full
    budget once the margin reaches ``margin_ref``, shrinking linearly below it."""
    m = torch.as_tensor(margin, dtype=torch.float32)
    return base_budget * (m / margin_ref).clamp(min_fraction, 1.0)


def kl_guard(measured_kl: Tensor | float, kl_target: float, *, tolerance: float = 0.0) -> Tensor:
    """Acceptance guard: ``measured_kl <= kl_target * (1 + tolerance)`` (0-dim bool)."""
    return torch.as_tensor(measured_kl) <= kl_target * (1.0 + tolerance)


def scale_grad(x: Tensor, weight: Tensor | float) -> Tensor:
    """Same value as ``x``, gradient multiplied by ``weight`` (broadcastable): the per-token
    learning-rate shaping of Option B when applied to ``log_prob`` before the loss."""
    detached = x.detach()
    return detached + (x - detached) * weight


class Shaping(NamedTuple):
    """How to apply per-token multipliers: ``clip_scale`` for the loss's ``clip_scale``
    argument, ``grad_scale`` for :func:`scale_grad` on ``log_prob`` (either may be None)."""

    clip_scale: Tensor | None
    grad_scale: Tensor | None


def apply_allocation(token_lambda: Tensor, mode: str = "lr", *, mix: float = 0.5) -> Shaping:
    """Turn per-token multipliers ``[B, L]`` into loss shaping (module docstring, step 4).

    ``mode``: ``"clip"`` -> clip_scale = lambda; ``"lr"`` (default) -> grad_scale = lambda;
    ``"mixture"`` -> clip_scale = lambda^mix, grad_scale = lambda^(1 - mix) (their product
    is lambda, so the total shaping matches the other options).
    """
    if mode == "clip":
        return Shaping(token_lambda, None)
    if mode == "lr":
        return Shaping(None, token_lambda)
    if mode == "mixture":
        if not 0.0 <= mix <= 1.0:
            raise ValueError(f"mix must be in [0, 1], got {mix}")
        return Shaping(token_lambda.pow(mix), token_lambda.pow(1.0 - mix))
    raise ValueError(f"unknown application mode {mode!r}; known: {', '.join(APPLICATION_MODES)}")


class AllocationStep(NamedTuple):
    """Result of :meth:`SmallGainKLAllocator.step`: ``lam [G]``, ``token_lambda [B, L]``
    (1 outside groups), ``spent`` (0-dim), ``telemetry``."""

    lam: Tensor
    token_lambda: Tensor
    spent: Tensor
    telemetry: dict[str, Tensor]


class SmallGainKLAllocator:
    """Stateful SmallGain–KL allocator over ``num_groups`` token groups (module docstring)."""

    def __init__(
        self,
        num_groups: int,
        *,
        rho: float = 0.7,
        ema_alpha: float = 0.3,
        lam_min: float = 0.8,
        lam_max: float = 1.25,
        max_step_change: float = 0.10,
        eps: float = 1e-9,
        unfunded_target: float = 1.0,
        score_decay: float = 0.5,
        max_groups: int = 64,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if not 0.0 < rho <= 1.0:
            raise ValueError(f"rho must be in (0, 1], got {rho}")
        if not 0.0 < lam_min <= 1.0 <= lam_max:
            raise ValueError(f"need 0 < lam_min <= 1 <= lam_max, got [{lam_min}, {lam_max}]")
        self.num_groups = num_groups
        self.rho, self.ema_alpha, self.eps = rho, ema_alpha, eps
        self.lam_min, self.lam_max, self.max_step_change = lam_min, lam_max, max_step_change
        self.unfunded_target, self.score_decay, self.max_groups = unfunded_target, score_decay, max_groups
        z = torch.zeros(num_groups, device=device, dtype=dtype)
        self.score, self.value, self.cost = z.clone(), z.clone(), z.clone()
        self.lam = torch.ones_like(z)
        self.lam_before = torch.ones_like(z)
        self.seen = torch.zeros(num_groups, device=device, dtype=torch.bool)
        self.budget = z.new_zeros(())
        self.spent = z.new_zeros(())
        self.rollbacks = torch.zeros((), device=device, dtype=torch.long)

    # -- statistics ------------------------------------------------------------------

    def group_statistics(
        self, token_advantages: Tensor, log_ratio: Tensor, mask: Tensor, group_ids: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Per-group ``(mean A^2, mean log_ratio^2, token count)``, each ``[G]``.

        ``token_advantages, log_ratio: [B, L]`` (``log_ratio = log pi - log pi_ref``),
        ``mask: [B, L]``, ``group_ids: [B, L] int`` in ``[0, G)`` (others skipped).
        """
        G = self.num_groups
        valid = mask.to(torch.bool) & (group_ids >= 0) & (group_ids < G)
        idx = group_ids.long().clamp(0, G - 1).reshape(-1)
        v = valid.reshape(-1)
        a = token_advantages.detach().to(self.score.dtype).reshape(-1)
        r = log_ratio.detach().to(self.score.dtype).reshape(-1)
        count = segment_sum(v.to(a.dtype), idx, G)
        n = count.clamp_min(1.0)
        return segment_sum(a * a, idx, G, v) / n, segment_sum(r * r, idx, G, v) / n, count

    def _ema(self, old: Tensor, new: Tensor, active: Tensor) -> Tensor:
        blended = self.ema_alpha * new + (1.0 - self.ema_alpha) * old
        return torch.where(active, torch.where(self.seen, blended, new), old)

    # -- one step --------------------------------------------------------------------

    def step(
        self, token_advantages: Tensor, log_ratio: Tensor, mask: Tensor, group_ids: Tensor, budget: Tensor | float
    ) -> AllocationStep:
        """Update statistics, allocate under ``rho * budget`` and return the multipliers.

        Shapes as :meth:`group_statistics`; ``budget`` is ``B_t`` (0-dim or float, e.g.
        from :func:`budget_from_margin`). The previous multipliers are kept for
        :meth:`accept_or_rollback`.
        """
        value, cost, count = self.group_statistics(token_advantages, log_ratio, mask, group_ids)
        active = count > 0
        raw = torch.where(cost > 0, value / (cost + self.eps), value)
        self.score = self._ema(self.score, raw, active)
        self.value = self._ema(self.value, value, active)
        self.cost = self._ema(self.cost, cost, active)
        self.seen = self.seen | active

        seen_f = self.seen.to(self.cost.dtype)
        mean_cost = (self.cost * seen_f).sum() / seen_f.sum().clamp_min(1.0)
        # No eps here: it would bias every c_hat below 1 and leave crumbs of budget behind.
        cost_hat = torch.where(mean_cost > 0, self.cost / mean_cost.clamp_min(self.eps), torch.zeros_like(self.cost))
        lam = self.lam
        up = (torch.clamp(lam * (1.0 + self.max_step_change), self.lam_min, self.lam_max) - lam).clamp_min(0.0)
        dkl = cost_hat * up / lam.clamp_min(self.eps)
        self.budget = torch.as_tensor(budget, dtype=lam.dtype, device=lam.device) * self.rho
        frac = fractional_knapsack(self.score, dkl, self.budget, active)
        funded = lam + frac * up
        limit = self.max_step_change * lam
        relaxed = lam + torch.clamp(self.unfunded_target - lam, min=-limit, max=limit)
        new = torch.where(active & (frac > 0), funded, torch.where(active, relaxed, lam))
        self.lam_before = lam
        self.lam = new.clamp(self.lam_min, self.lam_max)
        self.spent = (frac * dkl).sum()
        return AllocationStep(self.lam, self.token_lambda(group_ids, mask), self.spent, self.telemetry())

    def token_lambda(self, group_ids: Tensor, mask: Tensor | None = None) -> Tensor:
        """Per-token multiplier ``[B, L]``: ``lambda[group]``, 1 outside groups / ``mask``."""
        G = self.num_groups
        valid = (group_ids >= 0) & (group_ids < G)
        if mask is not None:
            valid = valid & mask.to(torch.bool)
        lam = self.lam[group_ids.long().clamp(0, G - 1)]
        return torch.where(valid, lam, torch.ones_like(lam))

    def accept_or_rollback(self, accepted: Tensor | bool, implicated: Tensor | None = None) -> Tensor:
        """Keep the last step if ``accepted``; otherwise restore the previous multipliers of
        the ``implicated: [G] bool`` groups (default: those the step changed) and multiply
        their scores by ``score_decay``. Returns ``accepted`` as a 0-dim bool tensor."""
        ok = torch.as_tensor(accepted, dtype=torch.bool, device=self.lam.device)
        if implicated is None:
            implicated = self.lam != self.lam_before
        undo = implicated.to(torch.bool) & ~ok
        self.lam = torch.where(undo, self.lam_before, self.lam)
        self.score = torch.where(undo, self.score * self.score_decay, self.score)
        self.rollbacks = self.rollbacks + (~ok).long()
        return ok

    # -- telemetry -------------------------------------------------------------------

    def telemetry(self) -> dict[str, Tensor]:
        """Flat telemetry (module docstring); per-group keys only when ``G <= max_groups``."""
        out = {
            "budget_global": self.budget.detach().clone(),
            "spent_global": self.spent.detach().clone(),
            "rollbacks": self.rollbacks.clone(),
            "alloc_mean": self.lam.mean(),
            "alloc_min": self.lam.min(),
            "alloc_max": self.lam.max(),
        }
        if self.num_groups <= self.max_groups:
            for name, values in (("score", self.score), ("alloc", self.lam), ("cost", self.cost)):
                out.update({f"{name}:group:{k}": v for k, v in enumerate(values.detach().clone().unbind(0))})
        return out

    def state_dict(self) -> dict[str, Tensor]:
        """Tensors to checkpoint (the controller's whole state)."""
        names = ("score", "value", "cost", "lam", "lam_before", "seen", "budget", "spent", "rollbacks")
        return {n: getattr(self, n).clone() for n in names}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        for name, value in state.items():
            setattr(self, name, value.clone().to(getattr(self, name).device))
