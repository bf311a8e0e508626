"""Tangent-plane (orthogonal) exploration noise for GSPO-token (seed spec §10).

For raw noise ``z ~ N(0, sigma^2 I)`` and a gradient ``g`` the caller supplies (the
policy-gradient of the GSPO objective, or the KL gradient, or both)::

    z_perp = z - <z, g> / (||g||^2 + eps) * g          theta += beta_t * z_perp

so the exploration step has no first-order effect on the objective (or on the KL) whose
gradient was projected out. With several directions they are Gram–Schmidt
orthogonalised first, so ``z_perp`` is orthogonal to their whole span.

Controller (:class:`TangentPlaneNoise`), a scalar ``s_t in [0, 1]`` with
``beta_t = s_t * beta_max``:
    * remaining budget fraction ``r = (rho B_t - spent) / (rho B_t)`` (0 when no budget);
    * a KL overshoot or ``r < low_budget_fraction`` -> ``s <- s * s_down`` (shrink);
    * else gradient rotation (angle between this and the previous gradient, radians)
      ``> rotation_threshold`` and ``r >= high_budget_fraction`` -> ``s <- min(1, s + s_up)``;
    * reserve ``kappa``: if ``spent >= rho B_t - kappa B_t`` the noise is skipped
      (``beta_t = 0``) — second-order KL spend of the noise gets that margin.
All of it is tensor arithmetic (no host sync); the state is ``s`` and the previous
flattened gradient (kept only when rotation is not passed in explicitly).

Telemetry (flat, 0-dim): ``beta_t``, ``s_t``, ``noise_norm`` (``||z||``),
``noise_perp_norm`` (``||z_perp||``), ``noise_grad_cos`` (cosine between ``z_perp`` and the
first direction: ~0 by construction), ``rotation``, ``kl_overshoot``, ``noise_skipped``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["TangentPlaneNoise", "dot", "gradient_rotation", "project_orthogonal"]

Tensors = Sequence[Tensor]


def _as_list(x: Tensor | Tensors) -> list[Tensor]:
    return [x] if isinstance(x, Tensor) else list(x)


def dot(a: Tensor | Tensors, b: Tensor | Tensors) -> Tensor:
    """Inner product of two equally shaped tensors or lists of tensors (e.g. per-parameter
    gradients), accumulated in float64 for the long sums of large models."""
    return sum((x.double() * y.double()).sum() for x, y in zip(_as_list(a), _as_list(b), strict=True))  # type: ignore[return-value]


def project_orthogonal(z: Tensor | Tensors, *directions: Tensor | Tensors, eps: float = 1e-12) -> list[Tensor]:
    """Project ``z`` onto the orthogonal complement of ``span(directions)``.

    Args:
        z: a tensor or a list of tensors (one per parameter).
        directions: one or more gradients shaped like ``z``; zero (or numerically
            dependent) directions are ignored through ``eps``.
        eps: added to squared norms.

    Returns:
        list of tensors shaped like ``z`` (same dtypes), orthogonal to every direction up
        to rounding. The loop runs over the given directions (one or two), not over data.
    """
    basis: list[list[Tensor]] = []
    for d in directions:
        u = [t.double() for t in _as_list(d)]
        for b in basis:
            coef = dot(u, b) / (dot(b, b) + eps)
            u = [x - coef * y for x, y in zip(u, b, strict=True)]
        basis.append(u)
    out = [t.double() for t in _as_list(z)]
    for b in basis:
        coef = dot(out, b) / (dot(b, b) + eps)
        out = [x - coef * y for x, y in zip(out, b, strict=True)]
    return [o.to(t.dtype) for o, t in zip(out, _as_list(z), strict=True)]


def gradient_rotation(g: Tensor | Tensors, g_prev: Tensor | Tensors, eps: float = 1e-12) -> Tensor:
    """Angle (radians, 0-dim float64) between two gradients; 0 when either is zero."""
    norms = dot(g, g).sqrt() * dot(g_prev, g_prev).sqrt()
    cos = dot(g, g_prev) / (norms + eps)
    return torch.where(norms > 0, torch.arccos(cos.clamp(-1.0, 1.0)), torch.zeros_like(cos))


class TangentPlaneNoise:
    """Orthogonal exploration noise with its ``beta_t`` controller and budget reserve.

    Args:
        beta_max: noise scale at ``s_t = 1`` (default 1e-3; 0 turns the noise off).
        sigma: std of the raw noise ``z``.
        kappa: budget fraction reserved for the noise's second-order spend (0.10; the
            spec's range is 0.05..0.15).
        rho: the allocator's budget fraction (0.7), so ``rho B_t`` is what may be spent.
        s_init, s_up, s_down: controller start (1.0), additive increase (0.1) and
            multiplicative decrease (0.5).
        rotation_threshold: rotation (radians) above which exploration may grow (0.2).
        low_budget_fraction, high_budget_fraction: remaining-budget thresholds to shrink
            (< 0.25) and to allow growth (>= 0.5).
    """

    def __init__(
        self,
        beta_max: float = 1e-3,
        *,
        sigma: float = 1.0,
        kappa: float = 0.10,
        rho: float = 0.7,
        s_init: float = 1.0,
        s_up: float = 0.1,
        s_down: float = 0.5,
        rotation_threshold: float = 0.2,
        low_budget_fraction: float = 0.25,
        high_budget_fraction: float = 0.5,
        eps: float = 1e-12,
    ) -> None:
        self.beta_max, self.sigma, self.kappa, self.rho = beta_max, sigma, kappa, rho
        self.s_up, self.s_down, self.rotation_threshold = s_up, s_down, rotation_threshold
        self.low_budget_fraction, self.high_budget_fraction, self.eps = low_budget_fraction, high_budget_fraction, eps
        self.s = torch.tensor(float(s_init), dtype=torch.float64)
        self._prev_grad: list[Tensor] | None = None

    def controller_step(
        self,
        *,
        budget: Tensor | float,
        spent: Tensor | float,
        kl_overshoot: Tensor | bool = False,
        rotation: Tensor | float = 0.0,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Update ``s_t`` from the signals; returns ``(s_t, beta_t, skipped)`` (0-dim)."""
        f64, device = torch.float64, self.s.device
        B = torch.as_tensor(budget, dtype=f64, device=device)
        spent_t = torch.as_tensor(spent, dtype=f64, device=device)
        allowed = self.rho * B
        remaining = torch.where(allowed > 0, (allowed - spent_t) / allowed.clamp_min(self.eps), torch.zeros_like(B))
        overshoot = torch.as_tensor(kl_overshoot, dtype=torch.bool, device=self.s.device)
        shrink = overshoot | (remaining < self.low_budget_fraction)
        grow = (
            ~shrink
            & (torch.as_tensor(rotation, dtype=f64, device=device) > self.rotation_threshold)
            & (remaining >= self.high_budget_fraction)
        )
        self.s = torch.where(
            shrink, self.s * self.s_down, torch.where(grow, (self.s + self.s_up).clamp(max=1.0), self.s)
        )
        skipped = spent_t >= allowed - self.kappa * B
        beta = torch.where(skipped, torch.zeros_like(self.s), self.s * self.beta_max)
        return self.s, beta, skipped

    def sample(
        self,
        grad: Tensor | Tensors,
        *,
        budget: Tensor | float,
        spent: Tensor | float,
        kl_overshoot: Tensor | bool = False,
        extra_directions: Sequence[Tensor | Tensors] = (),
        rotation: Tensor | float | None = None,
        noise: Tensor | Tensors | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[list[Tensor], dict[str, Tensor]]:
        """One exploration step: ``beta_t * z_perp`` shaped like ``grad`` and telemetry.

        Args:
            grad: the policy gradient (tensor or per-parameter list) to be orthogonal to.
            budget, spent: ``B_t`` and the KL spent so far this step (allocator telemetry).
            kl_overshoot: whether the last step exceeded its KL target.
            extra_directions: more gradients to project out (e.g. the KL gradient).
            rotation: gradient rotation in radians; default: measured against the
                gradient of the previous call (0 on the first call).
            noise: raw ``z`` to use instead of sampling ``N(0, sigma^2)`` (tests).
            generator: RNG for the sampling.

        Returns:
            ``(step, telemetry)``: add ``step`` to the parameters (see :meth:`perturb_`).
        """
        g = [t.detach() for t in _as_list(grad)]
        if self.s.device != g[0].device:
            # Keep the controller on the gradients' device so no step syncs with the host.
            self.s = self.s.to(g[0].device)
        if rotation is None:
            rotation = gradient_rotation(g, self._prev_grad) if self._prev_grad is not None else 0.0
            self._prev_grad = [t.clone() for t in g]
        s, beta, skipped = self.controller_step(
            budget=budget, spent=spent, kl_overshoot=kl_overshoot, rotation=rotation
        )
        if noise is None:
            z = [torch.randn(t.shape, dtype=t.dtype, device=t.device, generator=generator) * self.sigma for t in g]
        else:
            z = [t.detach() for t in _as_list(noise)]
        z_perp = project_orthogonal(z, g, *extra_directions, eps=self.eps)
        perp_norm = dot(z_perp, z_perp).sqrt()
        cos = dot(z_perp, g) / (perp_norm * dot(g, g).sqrt() + self.eps)
        step = [(beta.to(t.dtype) * t) for t in z_perp]
        telemetry = {
            "beta_t": beta.clone(),
            "s_t": s.clone(),
            "noise_norm": dot(z, z).sqrt(),
            "noise_perp_norm": perp_norm,
            "noise_grad_cos": cos,
            "rotation": torch.as_tensor(rotation, dtype=torch.float64, device=s.device),
            "kl_overshoot": torch.as_tensor(kl_overshoot, dtype=torch.float64, device=s.device),
            "noise_skipped": skipped.to(torch.float64),
        }
        return step, telemetry

    @staticmethod
    @torch.no_grad()
    def perturb_(params: Tensor | Tensors, step: Tensors) -> None:
        """``theta += step`` in place (after the optimizer's own update)."""
        for p, d in zip(_as_list(params), step, strict=True):
            p.add_(d.to(p.dtype))
