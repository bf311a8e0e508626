"""What the verl adapters share: the options :func:`~trainer_hooks.integrations.verl.register`
set (knobs verl's config has no field for), the verl-version preset, and reading verl's
configs and metric names."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any

from torch import Tensor

from trainer_hooks.allocator import SmallGainKLAllocator

__all__ = [
    "ALLOCATORS",
    "CARRIED",
    "OPTIONS",
    "SETTINGS",
    "clip_fields",
    "config_value",
    "global_batch",
    "verl_metrics",
]


#: Options per registered name, set by :func:`register` (knobs verl's config lacks).
OPTIONS: dict[str, dict[str, Any]] = {}
#: Which verl's semantics the losses follow where verl versions differ (``agg_loss``'s
#: ``seq-mean-token-sum-norm``): set by :func:`register` from the installed verl's
#: version — ``"verl"`` (b178a3cd, 0.8.x) below 0.9, ``"verl-0.9.1"`` from 0.9 on.
SETTINGS: dict[str, Any] = {"compat": "verl"}
ALLOCATORS: dict[str, SmallGainKLAllocator] = {}
#: per-token tensors the actor extension (:mod:`trainer_hooks.integrations.verl.actor`)
#: carries from the batch to the ``ledger_a2tgpo`` loss for the length of one loss call
#: (``clip_scale``, ``turn_ids``: ``[B, L]``); verl's stock call has no argument for them
CARRIED: contextvars.ContextVar[Mapping[str, Tensor] | None] = contextvars.ContextVar(
    "ledger_verl_carried", default=None
)
_GLOBAL_BATCH_KEYS = ("dp_size", "batch_num_tokens", "global_batch_size", "loss_scale_factor")


def config_value(config: Any, key: str, default: Any = None) -> Any:
    """``config[key]`` for verl's dataclass configs, DictConfig, a dict, or None."""
    if config is None:
        return default
    if isinstance(config, Mapping):
        return config.get(key, default)
    getter = getattr(config, "get", None)
    if callable(getter):
        return getter(key, default)
    return getattr(config, key, default)


def clip_fields(config: Any) -> dict[str, Any]:
    """verl's clip fields: ``clip_ratio_low/high`` default to ``clip_ratio`` (0.2)."""
    ratio = config_value(config, "clip_ratio", 0.2)
    low, high = config_value(config, "clip_ratio_low"), config_value(config, "clip_ratio_high")
    return {"clip_ratio_low": ratio if low is None else low, "clip_ratio_high": ratio if high is None else high}


def global_batch(config: Any) -> dict[str, Any]:
    info = config_value(config, "global_batch_info") or {}
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
