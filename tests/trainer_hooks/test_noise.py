"""Tangent-plane orthogonal noise and its beta_t controller."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer_hooks.noise import TangentPlaneNoise, dot, gradient_rotation, project_orthogonal

F64 = torch.float64


def params(seed: int, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(4, 3, generator=g, dtype=dtype), torch.randn(5, generator=g, dtype=dtype)]


def test_projection_hand_worked():
    # z = (1, 1), g = (1, 0): <z, g> / ||g||^2 = 1 -> z_perp = (1, 1) - (1, 0) = (0, 1)
    (z_perp,) = project_orthogonal(torch.tensor([1.0, 1.0], dtype=F64), torch.tensor([1.0, 0.0], dtype=F64))
    torch.testing.assert_close(z_perp, torch.tensor([0.0, 1.0], dtype=F64))
    # g = (3, 4): z - (7/25) g = (1 - 21/25, 1 - 28/25) = (0.16, -0.12)
    (z_perp,) = project_orthogonal(torch.tensor([1.0, 1.0], dtype=F64), torch.tensor([3.0, 4.0], dtype=F64))
    torch.testing.assert_close(z_perp, torch.tensor([0.16, -0.12], dtype=F64))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), two=st.booleans())
def test_projection_is_orthogonal_and_idempotent(seed, two):
    z, g, h = params(seed), params(seed + 1), params(seed + 2)
    dirs = (g, h) if two else (g,)
    z_perp = project_orthogonal(z, *dirs)
    for d in dirs:
        assert abs(dot(z_perp, d).item()) < 1e-12 * math.sqrt(dot(z, z).item() * dot(d, d).item())
    again = project_orthogonal(z_perp, *dirs)
    for a, b in zip(again, z_perp):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert dot(z_perp, z_perp).item() <= dot(z, z).item() + 1e-12  # a projection never grows


def test_zero_direction_leaves_noise_unchanged():
    z = params(0)
    out = project_orthogonal(z, [torch.zeros_like(p) for p in z])
    for a, b in zip(out, z):
        torch.testing.assert_close(a, b)


def test_first_order_objective_unchanged():
    # f(theta) = <g, theta> is linear: f(theta + beta z_perp) - f(theta) = beta <g, z_perp> = 0
    theta, g = params(3), params(4)
    noise = TangentPlaneNoise(beta_max=0.5)
    step, tel = noise.sample(g, budget=1.0, spent=0.0, generator=torch.Generator().manual_seed(0))
    moved = [p + s for p, s in zip(theta, step)]
    assert abs((dot(g, moved) - dot(g, theta)).item()) < 1e-12
    assert abs(tel["noise_grad_cos"].item()) < 1e-12
    assert tel["beta_t"].item() == pytest.approx(0.5)  # s starts at 1
    assert tel["noise_perp_norm"].item() <= tel["noise_norm"].item()


def test_controller_rules():
    n = TangentPlaneNoise(beta_max=1.0, rho=0.5, kappa=0.1)
    # budget 1 -> rho B = 0.5; spent 0 -> remaining 1.0, no overshoot, no rotation: unchanged
    s, beta, skipped = n.controller_step(budget=1.0, spent=0.0)
    assert (s.item(), beta.item(), skipped.item()) == (1.0, 1.0, False)
    # KL overshoot -> s halves
    s, beta, _ = n.controller_step(budget=1.0, spent=0.0, kl_overshoot=True)
    assert s.item() == 0.5 and beta.item() == 0.5
    # high rotation and ample budget -> s + 0.1
    s, _, _ = n.controller_step(budget=1.0, spent=0.1, rotation=1.0)
    assert s.item() == pytest.approx(0.6)
    # high rotation but only 30% of the budget left (< 50%): no growth; 20% left (< 25%): shrink
    s, _, _ = n.controller_step(budget=1.0, spent=0.35, rotation=1.0)
    assert s.item() == pytest.approx(0.6)
    s, _, skipped = n.controller_step(budget=1.0, spent=0.4, rotation=1.0)
    assert s.item() == pytest.approx(0.3)
    # reserve: spent 0.4 >= rho B - kappa B = 0.5 - 0.1 -> noise skipped (beta 0)
    assert skipped.item()
    _, beta, skipped = n.controller_step(budget=1.0, spent=0.39)
    assert not skipped.item() and beta.item() > 0


def test_skipped_step_is_zero_and_growth_is_capped():
    n = TangentPlaneNoise(beta_max=1.0)
    g = params(5)
    step, tel = n.sample(g, budget=1.0, spent=0.65)  # >= (0.7 - 0.1) * 1
    assert tel["noise_skipped"].item() == 1.0 and all((s == 0).all() for s in step)
    for _ in range(5):
        s, _, _ = n.controller_step(budget=1.0, spent=0.0, rotation=3.0)
    assert s.item() == pytest.approx(1.0) and s.item() <= 1.0


def test_rotation_measured_against_previous_gradient():
    n = TangentPlaneNoise()
    _, tel = n.sample(torch.tensor([1.0, 0.0], dtype=F64), budget=1.0, spent=0.0)
    assert tel["rotation"].item() == 0.0
    _, tel = n.sample(torch.tensor([0.0, 2.0], dtype=F64), budget=1.0, spent=0.0)
    assert tel["rotation"].item() == pytest.approx(math.pi / 2)
    assert gradient_rotation(torch.tensor([1.0, 1.0]), torch.tensor([-1.0, -1.0])).item() == pytest.approx(math.pi)
    assert gradient_rotation(torch.tensor([1.0, 1.0]), torch.zeros(2)).item() == 0.0


def test_kl_direction_and_given_noise_and_perturb():
    n = TangentPlaneNoise(beta_max=0.1)
    g, g_kl, z = params(6), params(7), params(8)
    step, tel = n.sample(g, budget=1.0, spent=0.0, extra_directions=[g_kl], noise=z)
    assert abs(dot(step, g).item()) < 1e-12 and abs(dot(step, g_kl).item()) < 1e-12
    expected = [0.1 * p for p in project_orthogonal(z, g, g_kl)]
    for a, b in zip(step, expected):
        torch.testing.assert_close(a, b)
    theta = [p.clone() for p in g]
    TangentPlaneNoise.perturb_(theta, step)
    for p, q, s in zip(theta, g, step):
        torch.testing.assert_close(p, q + s)
    assert set(tel) == {
        "beta_t",
        "s_t",
        "noise_norm",
        "noise_perp_norm",
        "noise_grad_cos",
        "rotation",
        "kl_overshoot",
        "noise_skipped",
    }
    assert all(v.dim() == 0 for v in tel.values())


def test_float32_parameters_keep_their_dtype():
    g = params(9, torch.float32)
    step, _ = TangentPlaneNoise().sample(g, budget=1.0, spent=0.0)
    assert all(s.dtype == torch.float32 for s in step)
    assert abs(dot(step, g).item()) < 1e-6 * math.sqrt(dot(step, step).item() * dot(g, g).item())
