"""retrain's SEPA schedule: the pooling strength lambda over training (the only state here).

:class:`SEPAController` ramps lambda behind a correct-rate gate; feed its
:meth:`~SEPAController.resolve_lambda` to :func:`~trainer_hooks.advantages.retrain.compose_advantages`
(``sepa_lambda=``), which passes it to :func:`~trainer_hooks.advantages.retrain.sepa_pool`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from torch import Tensor

from trainer_hooks.advantages.retrain.estimators import CORRECT_THRESHOLD

__all__ = ["SEPAController"]


class SEPAController:
    """SEPA pooling strength over training: a lambda ramp behind a correct-rate gate.

    ``linear``: ``lambda = clamp((step - delay_steps) / steps, 0, 1)``.
    ``auto``: ``lambda = max(linear, 1 - min(var_ema / (var_0 * var_threshold), 1))`` where
    ``var_ema`` tracks the execution-token uncertainty variance and ``var_0`` is its EMA
    after ``warmup`` observations, so pooling grows as execution entropy collapses.
    Gate: lambda stays 0 until a batch's correct rate reaches ``correct_rate_gate``;
    it then stays open (sticky). ``correct_rate_gate=0`` opens it from the start.

    Defaults are retrain's trainer config (steps=500, delay 50, gate 0.1); see the package
    docstring of :mod:`trainer_hooks.advantages.retrain` for why not its controller's zeros.

    Host-side state (Python floats); feed it scalars once per step.
    """

    def __init__(
        self,
        *,
        steps: int = 500,
        delay_steps: int = 50,
        correct_rate_gate: float = 0.1,
        schedule: str = "linear",
        ema_decay: float = 0.99,
        var_threshold: float = 0.2,
        warmup: int = 50,
        eps: float = 1e-8,
    ) -> None:
        if steps < 0 or delay_steps < 0:
            raise ValueError("steps and delay_steps must be >= 0")
        if not 0.0 <= correct_rate_gate <= 1.0:
            raise ValueError(f"correct_rate_gate must be in [0, 1], got {correct_rate_gate}")
        if not 0.0 <= ema_decay <= 1.0:
            raise ValueError(f"ema_decay must be in [0, 1], got {ema_decay}")
        if var_threshold <= 0.0 or warmup < 1 or eps <= 0.0:
            raise ValueError("var_threshold and eps must be > 0 and warmup >= 1")
        if schedule not in ("linear", "auto"):
            raise ValueError(f"schedule must be 'linear' or 'auto', got {schedule!r}")
        self.steps = steps
        self.delay_steps = delay_steps
        self.correct_rate_gate = correct_rate_gate
        self.schedule = schedule
        self.ema_decay = ema_decay
        self.var_threshold = var_threshold
        self.warmup = warmup
        self.eps = eps
        self.var_ema: float | None = None
        self.var_0: float | None = None
        self.warmup_seen = 0
        self.gate_open = correct_rate_gate <= 0.0

    def observe_correct_rate(self, correct_rate: float | Tensor | None) -> None:
        """Open the gate (for good) once a batch's correct rate reaches the threshold."""
        if self.gate_open or correct_rate is None:
            return
        rate = float(correct_rate)
        if math.isfinite(rate) and rate >= self.correct_rate_gate:
            self.gate_open = True

    def observe_rewards(self, rewards: Tensor, threshold: float = CORRECT_THRESHOLD) -> None:
        """:meth:`observe_correct_rate` with the fraction of ``rewards: [B]`` > threshold."""
        if rewards.numel():
            self.observe_correct_rate((rewards > threshold).float().mean())

    def update_auto_state(self, exec_variance: float | Tensor) -> None:
        """Feed one step's execution-token uncertainty variance (``auto`` schedule only);
        :func:`compose_advantages` reports it as ``uncertainty_exec_var``."""
        if self.schedule != "auto":
            return
        var = float(exec_variance)
        if not math.isfinite(var):
            return
        self.var_ema = var if self.var_ema is None else self.ema_decay * self.var_ema + (1.0 - self.ema_decay) * var
        if self.var_0 is None:
            self.warmup_seen += 1
            if self.warmup_seen >= self.warmup:
                self.var_0 = max(self.var_ema, self.eps)

    def _linear(self, step: float) -> float:
        if self.steps <= 0:
            return 0.0
        return min(max(step - self.delay_steps, 0.0) / self.steps, 1.0)

    def _auto(self) -> float:
        if self.var_ema is None or self.var_0 is None:
            return 0.0
        ratio = max(0.0, self.var_ema / max(self.var_0, self.eps))
        return 1.0 - min(ratio / max(self.var_threshold, self.eps), 1.0)

    def resolve_lambda(self, step: float) -> float:
        """Pooling strength in ``[0, 1]`` at training step ``step``."""
        if not self.gate_open:
            return 0.0
        linear = self._linear(float(step))
        return max(self._auto(), linear) if self.schedule == "auto" else linear

    def state_dict(self) -> dict[str, Any]:
        """The mutable state (EMA, baseline, warmup count, gate) for checkpoints."""
        return {
            "var_ema": self.var_ema,
            "var_0": self.var_0,
            "warmup_seen": self.warmup_seen,
            "gate_open": self.gate_open,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output (hyperparameters come from the constructor)."""
        self.var_ema = None if state.get("var_ema") is None else float(state["var_ema"])
        self.var_0 = None if state.get("var_0") is None else float(state["var_0"])
        self.warmup_seen = int(state.get("warmup_seen", 0))
        self.gate_open = bool(state.get("gate_open", self.gate_open))
