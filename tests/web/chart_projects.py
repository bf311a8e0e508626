"""Projects shaped like the review's hard cases for the charts (issue 35), built through
the real service: a plateau (4 keeps and 2,000 discards spread far below them), and
trainer runs with generic telemetry (train_loss, lr, grad_norm every 5 steps; val_loss,
a sparse metric, every 25) where one run diverges after step 300 (val_loss 7.06,
grad_norm 80, a ``warn`` alert at step 320) and one trial is still running."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from lineage.domain import FailureLabel, Trial
from lineage.service import Ledger
from lineage.telemetry import check_points

PLATEAU = "plateau"
TELEMETRY = "telemetry"
#: The plateau's kept values (higher is better) and how many discards follow them.
PLATEAU_KEEPS = (0.9583, 0.9601, 0.9614, 0.9626)
PLATEAU_DISCARDS = 2000
DIVERGED_LOSS = 7.06
DIVERGED_GRAD = 80.0
ALERT_STEP = 320


@dataclass(frozen=True)
class ChartProjects:
    plateau_trials: int
    runs: list[str]
    diverged: str
    running: str


def _plateau_trials(rng: random.Random) -> list[Trial]:
    trials = []
    for i, value in enumerate(PLATEAU_KEEPS):
        status = FailureLabel.BASELINE if i == 0 else FailureLabel.KEEP
        trials.append(
            Trial(exp_id=f"{i:04d}", parent_exp=f"{i - 1:04d}" if i else "", status=status, core_metric=value)
        )
    for j in range(PLATEAU_DISCARDS):
        # most attempts land well under the plateau: acs 0.17-0.96, skewed towards it
        value = 0.17 + 0.79 * rng.betavariate(4, 1.3)
        exp = f"{len(trials):04d}"
        trials.append(Trial(exp_id=exp, parent_exp="0003", status=FailureLabel.DISCARD, core_metric=round(value, 6)))
        if j % 500 == 499:
            trials[-1] = Trial(exp_id=exp, parent_exp="0003", status=FailureLabel.CRASH, core_metric=None)
    return trials


def _run_points(rng: random.Random, *, last_step: int, diverge: bool) -> list[dict]:
    points = []
    for step in range(0, last_step + 1, 5):
        p = step / 500
        lr = 3e-4 * min(1.0, step / 50) * (1 - 0.9 * p)
        loss = 2.4 * math.exp(-3 * p) + 0.8 + rng.gauss(0, 0.03)
        grad = abs(rng.gauss(1.0, 0.25))
        if diverge and step > 300:
            grow = (step - 300) / 200
            loss += (DIVERGED_LOSS - 1.0) * grow
            grad = 1.0 + (DIVERGED_GRAD - 1.0) * grow**2
        points += [
            {"step": step, "name": "train_loss", "value": round(loss, 5)},
            {"step": step, "name": "lr", "value": round(lr, 8)},
            {"step": step, "name": "grad_norm", "value": round(grad, 4)},
        ]
        if step % 25 == 0 and step:
            val = 2.2 * math.exp(-3 * p) + 0.95 + rng.gauss(0, 0.01)
            if diverge and step > 300:
                val = 1.0 + (DIVERGED_LOSS - 1.0) * ((step - 300) / 200)
            points.append({"step": step, "name": "val_loss", "value": round(val, 5)})
    return points


def load_chart_projects(ledger: Ledger, runs: int = 6) -> ChartProjects:
    """Both projects in ``ledger``; answers the telemetry project's trial ids."""
    rng = random.Random(35)
    ledger.projects.create_project(PLATEAU, metric_name="acs", lower_is_better=False)
    trials = _plateau_trials(rng)
    ledger.tables.import_trials(PLATEAU, iter(trials))
    ledger.projects.create_project(TELEMETRY, metric_name="val_loss", lower_is_better=True)
    ids = []
    for i in range(runs):
        diverge = i == runs - 1
        points = _run_points(rng, last_step=500, diverge=diverge)
        final = [p["value"] for p in points if p["name"] == "val_loss"][-1]
        status = "discard" if diverge else ("keep" if i % 2 == 0 else "discard")
        exp_id = ledger.recording.record_trial(
            TELEMETRY,
            {
                "status": status,
                "core_metric": final,
                "hypothesis": f"lr sweep {i}",
                "extra": {"wd": [0, 0.01, 0.1][i % 3]},
            },
        ).trial.exp_id
        ledger.telemetry.ingest_telemetry(TELEMETRY, exp_id, check_points(points))
        ids.append(exp_id)
    diverged = ids[-1]
    ledger.alerts.record_alert(
        TELEMETRY, diverged, {"level": "warn", "title": "grad_norm above 10", "step": ALERT_STEP}
    )
    running = ledger.recording.record_trial(TELEMETRY, {"status": "running", "hypothesis": "lr 1e-3, still training"})
    run_id = running.trial.exp_id
    ledger.leases.heartbeat(TELEMETRY, run_id, owner="run-9@gpu1")
    ledger.telemetry.ingest_telemetry(TELEMETRY, run_id, check_points(_run_points(rng, last_step=200, diverge=False)))
    return ChartProjects(plateau_trials=len(trials), runs=ids, diverged=diverged, running=run_id)


def more_points(ledger: Ledger, exp_id: str, first: int, last: int) -> None:
    """Points of the running trial from step ``first`` to ``last`` (it keeps training)."""
    rng = random.Random(first)
    points = [p for p in _run_points(rng, last_step=last, diverge=False) if p["step"] >= first]
    ledger.telemetry.ingest_telemetry(TELEMETRY, exp_id, check_points(points))
