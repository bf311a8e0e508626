"""Every registered policy loss keeps the shared telemetry contract (issue 4, point 8).

The telemetry client posts the same keys whichever loss a trainer selects by name, so each
loss must return ``(loss, telemetry)`` with a flat dict of detached 0-dim tensors holding
at least the clip fractions, the clip-scale statistics, the approximate KL and the ratio
statistics. A loss added to the registry without them fails here.
"""

from __future__ import annotations

import pytest
import torch

from trainer_hooks.registry import POLICY_LOSSES, get_policy_loss

CONTRACT = {
    "clipfrac_low",
    "clipfrac_high",
    "clip_scale_mean",
    "clip_scale_std",
    "clip_scale_min",
    "clip_scale_max",
    "clip_scale_frac_low",
    "clip_scale_frac_high",
    "approx_kl",
    "ratio_mean",
    "ratio_min",
    "ratio_max",
}

B, L = 6, 9


def _batch(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, L + 1, (B,), generator=g)
    mask = torch.arange(L)[None, :] < lengths[:, None]
    old = -torch.rand(B, L, generator=g, dtype=torch.float64) * 3
    new = (old + 0.3 * torch.randn(B, L, generator=g, dtype=torch.float64)).requires_grad_()
    return {"old": old, "new": new, "mask": mask, "adv": torch.randn(B, L, generator=g, dtype=torch.float64)}


def _extra_arguments(name: str, batch: dict[str, torch.Tensor]) -> dict[str, object]:
    """The keyword arguments a loss needs beyond verl's positional five."""
    if name == "a3po":
        return {"behaviour_versions": torch.tensor([3, 4, 5, 5, 4, 3]), "current_version": 5}
    if name == "astar_po":
        return {"ref_log_prob": batch["old"] - 0.1}
    if name == "a2tgpo":
        return {"clip_scale": 1 + 0.3 * torch.tanh(batch["adv"])}
    return {}


@pytest.mark.parametrize("name", POLICY_LOSSES.names())
def test_every_policy_loss_returns_the_shared_telemetry(name: str) -> None:
    batch = _batch(seed=len(name))
    loss_fn = get_policy_loss(name)
    advantages = batch["adv"][:, 0] if name == "astar_po" else batch["adv"]
    loss, telemetry = loss_fn(batch["old"], batch["new"], advantages, batch["mask"], **_extra_arguments(name, batch))

    assert loss.dim() == 0 and torch.isfinite(loss)
    missing = CONTRACT - telemetry.keys()
    assert not missing, f"{name} lacks {sorted(missing)}"
    for key, value in telemetry.items():
        assert isinstance(value, torch.Tensor) and value.dim() == 0, f"{name}: {key} is not a 0-dim tensor"
        assert not value.requires_grad, f"{name}: {key} is not detached"
        assert torch.isfinite(value), f"{name}: {key} = {value}"
    for key in ("clipfrac_low", "clipfrac_high", "clip_scale_frac_low", "clip_scale_frac_high"):
        assert 0.0 <= float(telemetry[key]) <= 1.0, f"{name}: {key} = {float(telemetry[key])}"
    assert float(telemetry["ratio_min"]) <= float(telemetry["ratio_mean"]) <= float(telemetry["ratio_max"])
    assert (
        float(telemetry["clip_scale_min"]) <= float(telemetry["clip_scale_mean"]) <= float(telemetry["clip_scale_max"])
    )
    loss.backward()
    assert torch.isfinite(batch["new"].grad).all()


def test_the_contract_covers_every_builtin_loss() -> None:
    assert {"ppo", "vanilla", "a2tgpo", "gspo", "gspo_token", "a3po", "astar_po"} <= set(POLICY_LOSSES.names())
