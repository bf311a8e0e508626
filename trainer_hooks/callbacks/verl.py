"""A verl-style hook: the metrics dict verl's trainer produces each step in, telemetry out;
the final validation metrics in, the trial finished.

verl logs flat ``dict[str, float]`` per step (``actor/pg_loss``, ``actor/ppo_kl``,
``critic/score/mean``, ``val-core/<source>/reward/mean@1``, ...). Every numeric entry is
logged under its own name, except that a name whose last ``/`` segment is one of the
ledger's contract names (``clip_scale_mean``, ``ig_mean``, ... :data:`CONTRACT_NAMES`) is
logged under that bare name, so the server's clip-scale summary finds it. Entries that
are not numbers (strings, lists) are skipped.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

from trainer_hooks.callbacks.recorder import TrialRecorder

__all__ = ["CONTRACT_NAMES", "VerlHook", "numeric_metrics", "verl_hook"]

#: names of ``trainer_hooks.ops.stats``'s contract with the ledger
CONTRACT_NAMES = frozenset(
    {
        "clip_scale_mean",
        "clip_scale_std",
        "clip_scale_min",
        "clip_scale_max",
        "clip_scale_frac_low",
        "clip_scale_frac_high",
        "ig_mean",
        "ig_std",
    }
)


def numeric_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The numeric entries (numbers, numpy scalars, 0-dim tensors), contract names bare."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if isinstance(value, bool) or not (
            isinstance(value, numbers.Real) or getattr(value, "ndim", None) == 0 or getattr(value, "shape", None) == ()
        ):
            continue
        last = key.rsplit("/", 1)[-1]
        out[last if last in CONTRACT_NAMES else key] = float(value) if isinstance(value, numbers.Real) else value
    return out


class VerlHook:
    """Call it with each step's metrics; :meth:`final` with the validation metrics."""

    def __init__(self, recorder: TrialRecorder, *, core_metric_key: str) -> None:
        self.recorder = recorder
        self.core_metric_key = core_metric_key
        recorder.start()

    def __call__(self, metrics: Mapping[str, Any], step: int) -> None:
        self.recorder.log(step, numeric_metrics(metrics))

    def final(self, val_metrics: Mapping[str, Any], *, exc: BaseException | None = None) -> str:
        """Finish the trial with ``val_metrics[core_metric_key]`` (a missing key is a
        ``crash``: the run produced no result) or with the failure ``exc``."""
        if exc is None and self.core_metric_key not in val_metrics:
            exc = KeyError(
                f"validation metrics have no {self.core_metric_key!r} (have: {', '.join(sorted(val_metrics)[:20])})"
            )
        if exc is None:
            self.recorder.result(float(val_metrics[self.core_metric_key]))
        return self.recorder.finish(exc)


def verl_hook(recorder: TrialRecorder, *, core_metric_key: str) -> VerlHook:
    """The hook for a verl trainer loop::

    hook = verl_hook(TrialRecorder(client, hypothesis=...), core_metric_key="val-core/gsm8k/reward/mean@1")
    for step, batch in ...:            # in RayPPOTrainer.fit, after metrics are gathered
        hook(metrics, step=global_steps)
    hook.final(val_metrics)            # the last _validate() result
    """
    return VerlHook(recorder, core_metric_key=core_metric_key)
