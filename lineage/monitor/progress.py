"""The progress summary of a project: is the research loop improving, plateauing or stuck?

One implementation, :func:`measure`, called by ``Ledger.summary`` (CLI ``lineage
summary``, ``GET /api/v1/projects/{p}/summary``, MCP ``get_summary``, the dashboard and
the prompt wrapper). Its reads are index-only aggregates and short index walks
(``lineage.store.progress``), so it costs the same on a 100,000-trial project as on a
small one.

Figures (``Progress.to_dict()``)
--------------------------------
* ``trials``, ``by_status``: trials in all and per failure label.
* ``keep_rate``: ``keep`` trials / trials that are neither ``baseline`` nor ``running``
  (None without such trials); ``keep_rate_last_n``: the same over the newest ``last_n`` trials.
* ``baseline``: the first ``baseline`` trial, else the first trial.
* ``best``: the best scored trial under the project's best policy (no fallback), with
  ``reached_at`` (its ``timestamp``, else when it was recorded) and ``reached_at_trial``
  (its 1-based position in the project).
* ``improvement_vs_baseline``: how much better the best is than the baseline, in the
  metric's good direction (positive = better).
* ``trials_since_improvement``: trials recorded after the one that set the current best
  (all trials when nothing is scored).
* ``improvement_per_10_trials``: over the newest ``last_n`` trials, how much the best
  moved (good direction, positive = better) per 10 trials; the reference is the best
  among the trials before that window, else the baseline's metric (None without one).
* ``noise``: the project's noise floor (``lineage.noise``: σ pooled from its reruns, or set
  by hand), and ``best_vs_noise``: the best's own gain over the best before it, judged
  against it ("within noise: ...").
* ``trials_since_improvement_above_noise``: trials recorded after the first trial whose
  metric is within k·σ of the current best (equal to ``trials_since_improvement`` while σ
  is unknown): a new best that gains less than the noise is no progress.
* ``crash_streak``: trials since the newest one whose status is not in
  :data:`CRASH_STATUSES`.
* ``time_spent_s``: the sum of ``total_s`` (trials without one count 0).

Trend rule (``trend`` and, with its thresholds, ``trend_rule``)
--------------------------------------------------------------
With ``N = last_n`` (default 20) and ``stuck_after = 3 * N``, checked in this order:

1. ``improving``  — a scored best exists and was reached within the newest N trials
   (``trials_since_improvement_above_noise < N``);
2. ``stuck``      — no new best within the newest ``stuck_after`` trials
   (``trials_since_improvement_above_noise >= 3N``), or the newest N trials all crashed
   (``crash_streak >= N``);
3. ``starting``   — no trial has an outcome yet (an empty project, or only running trials);
4. ``plateauing`` — otherwise (no new best for N to 3N-1 trials, or too few trials).

"A new best" means a trial strictly better than every earlier eligible trial (a tie
keeps the earlier trial as the best, as everywhere in the ledger); once the project has a
noise floor, it must also move the best beyond k·σ of where it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Connection

from lineage.domain import FailureLabel, Project, Trial
from lineage.errors import InvalidInput
from lineage.noise import NoiseFloor, NoiseVerdict, judge
from lineage.store import Store

#: Statuses that count as a crash (crash streak, the crash guardrail, ``trial_crashed``).
CRASH_STATUSES: tuple[str, ...] = (FailureLabel.CRASH.value, FailureLabel.PREFLIGHT_CRASH.value)
#: The default window of "recent" figures and of the trend rule.
DEFAULT_LAST_N = 20
#: ``stuck`` after this many windows without a new best.
STUCK_WINDOWS = 3
#: Largest ``last_n``.
MAX_LAST_N = 100_000

TRENDS = ("improving", "plateauing", "stuck", "starting")


@dataclass(frozen=True, slots=True)
class TrendRule:
    """The thresholds of the trend rule (see the module docstring)."""

    window: int
    stuck_after: int

    @classmethod
    def for_window(cls, window: int) -> TrendRule:
        return cls(window=window, stuck_after=STUCK_WINDOWS * window)

    def decide(self, *, has_best: bool, trials_since_improvement: int, crash_streak: int, settled: int = 1) -> str:
        """The trend; ``settled``: trials with an outcome (all but the running ones)."""
        if has_best and trials_since_improvement < self.window:
            return "improving"
        if trials_since_improvement >= self.stuck_after or crash_streak >= self.window:
            return "stuck"
        if not settled:
            return "starting"
        return "plateauing"

    def to_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "improving_if_new_best_within": self.window,
            "stuck_if_no_new_best_within": self.stuck_after,
            "stuck_if_crash_streak_at_least": self.window,
            "rule": (
                f"improving: a new best within the last {self.window} trials; stuck: no new best within "
                f"the last {self.stuck_after} trials or a crash streak of {self.window}; "
                "starting: no trial has an outcome yet; plateauing: otherwise"
            ),
        }


@dataclass(frozen=True, slots=True)
class Progress:
    """The summary of one project at one revision (see the module docstring)."""

    project: str
    metric_name: str
    lower_is_better: bool
    revision: int
    trials: int
    by_status: Mapping[str, int]
    keep_rate: float | None
    last_n: int
    keep_rate_last_n: float | None
    baseline: Trial | None
    best: Trial | None
    improvement_vs_baseline: float | None
    trials_since_improvement: int
    improvement_per_10_trials: float | None
    crash_streak: int
    time_spent_s: float
    trend: str
    rule: TrendRule
    #: the guardrails' state (``lineage.monitor.guardrails.GuardrailState.to_dict()``), None
    #: when the project has no guardrails
    guardrails: Mapping[str, Any] | None = None
    #: the noise floor, the best's gain judged against it, and trials since a gain above it
    noise: NoiseFloor | None = None
    best_vs_noise: NoiseVerdict | None = None
    trials_since_improvement_above_noise: int | None = None

    def with_guardrails(self, state: Mapping[str, Any] | None) -> Progress:
        return replace(self, guardrails=state)

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "project": self.project,
            "metric_name": self.metric_name,
            "direction": "lower" if self.lower_is_better else "higher",
            "revision": self.revision,
            "trials": self.trials,
            "by_status": dict(sorted(self.by_status.items())),
            "keep_rate": self.keep_rate,
            "last_n": self.last_n,
            "keep_rate_last_n": self.keep_rate_last_n,
            "baseline": _brief(self.baseline),
            "best": None
            if best is None
            else {
                **_brief_of(best),
                "reached_at": best.timestamp or best.created_at,
                "reached_at_trial": (best.seq or 0) + 1,
            },
            "improvement_vs_baseline": self.improvement_vs_baseline,
            "trials_since_improvement": self.trials_since_improvement,
            "trials_since_improvement_above_noise": self.trials_since_improvement_above_noise,
            "noise": self.noise.to_dict() if self.noise is not None else None,
            "best_vs_noise": self.best_vs_noise.text if self.best_vs_noise is not None else None,
            "improvement_per_10_trials": self.improvement_per_10_trials,
            "crash_streak": self.crash_streak,
            "time_spent_s": self.time_spent_s,
            "trend": self.trend,
            "trend_rule": self.rule.to_dict(),
            "guardrails": dict(self.guardrails) if self.guardrails is not None else None,
        }

    def short_text(self) -> str:
        """A few lines for an agent's prompt: the figures that say whether to change course."""
        parts = [f"{self.trials} trials"]
        if self.keep_rate is not None:
            recent = (
                "" if self.keep_rate_last_n is None else f", {_pct(self.keep_rate_last_n)} of the last {self.last_n}"
            )
            parts.append(f"keep rate {_pct(self.keep_rate)}{recent}")
        if self.best is not None and self.best.core_metric is not None:
            parts.append(
                f"best exp {self.best.exp_id} ({self.metric_name} {self.best.core_metric:.6f}, trial "
                f"{(self.best.seq or 0) + 1}, {self.trials_since_improvement} trials ago)"
            )
        if self.improvement_vs_baseline is not None:
            parts.append(f"{self.improvement_vs_baseline:+.6g} vs baseline")
        if self.crash_streak:
            parts.append(f"crash streak {self.crash_streak}")
        parts.append(f"{self.time_spent_s / 3600:.1f} h spent")
        lines = [f"- Progress: {'; '.join(parts)}.", f"- Trend: **{self.trend}** ({self.rule.to_dict()['rule']})."]
        noise = self.noise_text()
        if noise:
            lines.append(f"- Noise: {noise}.")
        for trip in (self.guardrails or {}).get("tripped", ()):
            lines.append(f"- GUARDRAIL TRIPPED: {trip['message']}")
        return "\n".join(lines)

    def noise_text(self) -> str:
        """The noise floor and the best's gain against it, in words ("" before any trial)."""
        if self.noise is None or not self.trials:
            return ""
        if self.noise.sigma is None:
            text = "no noise floor yet: no reruns (record one with rerun_of to estimate σ)"
        else:
            text = f"floor {self.noise.describe()}, k {self.noise.k:g}"
            if self.trials_since_improvement_above_noise is not None:
                text += f"; {self.trials_since_improvement_above_noise} trials since a gain above noise"
        verdict = self.best_vs_noise
        if self.best is None or verdict is None or verdict.delta is None:
            return text
        if verdict.within is not None:
            return text + f"; the best exp {self.best.exp_id}: {verdict.text}"
        if "; " in verdict.text:  # no σ: only a marginal best is worth a line (the rerun to make)
            return text + f"; the best exp {self.best.exp_id}: {verdict.text.split('; ', 1)[1]}"
        return text


def _brief(trial: Trial | None) -> dict[str, Any] | None:
    return None if trial is None else _brief_of(trial)


def _brief_of(trial: Trial) -> dict[str, Any]:
    return {
        "exp_id": trial.exp_id,
        "status": trial.status.value,
        "core_metric": trial.core_metric,
        "seq": trial.seq,
        "specialist": trial.specialist,
    }


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def check_last_n(last_n: Any) -> int:
    if isinstance(last_n, bool) or not isinstance(last_n, int) or not 1 <= last_n <= MAX_LAST_N:
        raise InvalidInput("last", f"must be an integer from 1 to {MAX_LAST_N}, got {last_n!r}")
    return last_n


def gain(new: float, reference: float, *, lower_is_better: bool) -> float:
    """How much better ``new`` is than ``reference`` (positive = better)."""
    return reference - new if lower_is_better else new - reference


def crash_streak(store: Store, conn: Connection, project_id: int, trial_count: int) -> int:
    """Trials after the newest one that did not crash (``trial_count`` trials in all)."""
    if trial_count == 0:
        return 0
    last_ok = store.progress.last_seq_not_in(conn, project_id, CRASH_STATUSES)
    return trial_count - 1 - (-1 if last_ok is None else last_ok)


def trials_since(best: Trial | None, trial_count: int) -> int:
    """Trials recorded after ``best`` (all of them without a best)."""
    return trial_count if best is None else trial_count - 1 - (best.seq or 0)


def trials_since_gain(
    store: Store,
    conn: Connection,
    project: Project,
    best: Trial | None,
    trial_count: int,
    floor: NoiseFloor | None = None,
) -> int:
    """Trials recorded since the best last moved beyond noise: after the earliest eligible
    trial within k·σ of ``best`` (``floor``: the noise floor, read when not given); with
    no σ, :func:`trials_since`. The plateau guardrail and the trend count with it."""
    floor = floor if floor is not None else store.repeats.floor(conn, project)
    if best is None or best.core_metric is None or floor.threshold is None:
        return trials_since(best, trial_count)
    lower = project.lower_is_better
    bound = best.core_metric + floor.threshold if lower else best.core_metric - floor.threshold
    first = store.progress.first_within(
        conn, project.stored_id, sorted(project.best_policy.eligible_statuses()), bound, lower_is_better=lower
    )
    return trial_count - 1 - (first if first is not None else (best.seq or 0))


def measure(store: Store, conn: Connection, project: Project, *, last_n: int = DEFAULT_LAST_N) -> Progress:
    """The project's progress, read in the caller's transaction."""
    last_n = check_last_n(last_n)
    totals = store.progress.status_totals(conn, project.stored_id)
    by_status = {status: count for status, (count, _) in totals.items()}
    trials = sum(by_status.values())
    recent = store.progress.recent_status_counts(conn, project.stored_id, last_n) if trials else {}
    best = store.trials.best_scored(conn, project)
    baseline = store.progress.first_with_status(
        conn, project.stored_id, FailureLabel.BASELINE.value
    ) or store.trials.first_trial(conn, project)
    lower = project.lower_is_better
    improvement = None
    if best is not None and baseline is not None and baseline.core_metric is not None:
        improvement = gain(best.core_metric, baseline.core_metric, lower_is_better=lower)  # type: ignore[arg-type]
    window = min(last_n, trials)
    per_10 = None
    if best is not None and window:
        before = store.trials.best_scored(conn, project, before_seq=trials - window)
        reference = before.core_metric if before is not None else (baseline.core_metric if baseline else None)
        if reference is not None:
            moved = max(0.0, gain(best.core_metric, reference, lower_is_better=lower))  # type: ignore[arg-type]
            per_10 = moved * 10 / window
    streak = crash_streak(store, conn, project.stored_id, trials)
    since = trials_since(best, trials)
    floor = store.repeats.floor(conn, project)
    since_noise = trials_since_gain(store, conn, project, best, trials, floor)
    best_vs_noise = None
    if best is not None and best.core_metric is not None:
        delta = best.delta_vs_best  # against the best before it: its own gain
        best_vs_noise = judge(
            floor,
            delta,
            status=FailureLabel.KEEP.value,
            exp_id=best.exp_id,
            best_metric=None if delta is None else best.core_metric - delta,
        )
    rule = TrendRule.for_window(last_n)
    return Progress(
        project=project.slug,
        metric_name=project.metric_name,
        lower_is_better=lower,
        revision=project.revision,
        trials=trials,
        by_status=by_status,
        keep_rate=_keep_rate(by_status),
        last_n=last_n,
        keep_rate_last_n=_keep_rate(recent),
        baseline=baseline,
        best=best,
        improvement_vs_baseline=improvement,
        trials_since_improvement=since,
        improvement_per_10_trials=per_10,
        crash_streak=streak,
        time_spent_s=sum(seconds for _, seconds in totals.values()),
        trend=rule.decide(
            has_best=best is not None,
            trials_since_improvement=since_noise,
            crash_streak=streak,
            settled=trials - by_status.get(FailureLabel.RUNNING.value, 0),
        ),
        rule=rule,
        noise=floor,
        best_vs_noise=best_vs_noise,
        trials_since_improvement_above_noise=since_noise,
    )


def _keep_rate(counts: Mapping[str, int]) -> float | None:
    judged = (
        sum(counts.values()) - counts.get(FailureLabel.BASELINE.value, 0) - counts.get(FailureLabel.RUNNING.value, 0)
    )
    return counts.get(FailureLabel.KEEP.value, 0) / judged if judged else None
