"""The outcome rule of a trial: which status a finished (or failed) run is recorded with.

``keep`` when the run's ``core_metric`` beats the project's current best by at least
``margin`` in the project's direction, ``discard`` otherwise (also with no metric); with
no scored best to beat, ``keep``. The ledger decides it (the client sends ``status:
"auto"`` and ``keep_margin``; ``lineage.domain.auto_verdict`` judges inside the write, so
two runs finishing together cannot both keep); :func:`decide_status` is the same rule for
a caller without a ledger (a dry run, a test). A run that did not finish is labelled from what
stopped it (:func:`failure_label`): the strings are the ledger's failure labels
(``lineage.domain.FailureLabel``; a contract test keeps the two equal, this package
does not import ``lineage``). ``delta_vs_best`` is the server's to compute.

A run that reports a summary (``name -> value``, as wandb-style scripts do) rather than one
number has its core metric read from it (:func:`metric_of_summary`).

A run may declare which way a metric improves (``ensure_project(lower_is_better=)``, the
wandb front's ``define_metric(goal=)``): :func:`declared_direction` finds the declaration
about a project's metric, and :func:`contradiction` says when it goes against the
project's direction (the project is then left as it is, with a warning).

:class:`TrialOutcome` is what the ledger answered when the run finished: the status it
stored, its ``delta_vs_best``, and whether the trial is the project's best now.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from typing import Any

__all__ = [
    "FAILURE_LABELS",
    "EvalBudgetExceeded",
    "TrainBudgetExceeded",
    "TrialOutcome",
    "beats_best",
    "contradiction",
    "decide_status",
    "declared_direction",
    "failure_label",
    "metric_of_summary",
]

#: The shared vocabulary of trial statuses (value for value ``lineage.domain.FailureLabel``).
FAILURE_LABELS: tuple[str, ...] = (
    "keep",
    "discard",
    "crash",
    "eval_budget_overrun",
    "train_budget_overrun",
    "size_blocked",
    "preflight_crash",
    "harness_abort",
    "disqualified",
    "baseline",
    "running",  # the ledger's own: a trial under way (a plan), never an outcome
)


@dataclass(frozen=True)
class TrialOutcome:
    """The ledger's answer to a run's finish.

    ``status``: the stored label (``keep``/``discard`` as the outcome rule decided, or the
    failure label); ``delta_vs_best``: the metric minus the best before the trial (the
    server's); ``is_new_best``: the trial is the project's best right after the finish;
    ``best_exp``: the project's best then. ``within_noise``: ``|delta_vs_best| < k·σ``
    against the project's noise floor (None: no σ yet, or no delta); ``noise``: the
    ledger's verdict in words ("within noise: +0.0004 against σ 0.0011 from 5 reruns")."""

    exp_id: str
    status: str
    core_metric: float | None
    delta_vs_best: float | None
    is_new_best: bool
    best_exp: str | None
    within_noise: bool | None = None
    noise: str | None = None

    @property
    def kept(self) -> bool:
        return self.status == "keep"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialOutcome:
        return cls(**{name: data.get(name) for name in cls.__dataclass_fields__})  # type: ignore[arg-type]

    def describe(self) -> str:
        """One line: ``trial 007: keep, delta -0.15, the new best``; a trial with no metric
        says so and is never called the new best."""
        if self.core_metric is None:
            best = f", best is {self.best_exp}" if self.best_exp and self.best_exp != self.exp_id else ""
            return f"trial {self.exp_id}: {self.status}, no metric{best}"
        delta = "" if self.delta_vs_best is None else f", delta {self.delta_vs_best:+.6g}"
        best = ", the new best" if self.is_new_best else (f", best is {self.best_exp}" if self.best_exp else "")
        noise = f"; {self.noise}" if self.noise and self.within_noise is not None else ""
        return f"trial {self.exp_id}: {self.status}{delta}{best}{noise}"


class TrainBudgetExceeded(TimeoutError):
    """Raise from a training loop that ran past its time budget: ``train_budget_overrun``."""


class EvalBudgetExceeded(TimeoutError):
    """Raise when the evaluation ran past its budget: ``eval_budget_overrun``."""


def beats_best(metric: float, best: float, *, lower_is_better: bool, margin: float = 0.0) -> bool:
    """True when ``metric`` improves on ``best`` (strictly) by at least ``margin`` (>= 0) in the
    direction; an improvement equal to the margin up to float rounding counts."""
    if margin < 0.0 or not math.isfinite(margin):
        raise ValueError(f"keep margin must be a finite number >= 0, got {margin!r}")
    improvement = best - metric if lower_is_better else metric - best
    # "at least": an improvement equal to the margin up to rounding (1.0 - 0.9 < 0.1) counts
    return improvement > 0.0 and (
        improvement >= margin or math.isclose(improvement, margin, rel_tol=1e-9, abs_tol=1e-12)
    )


def decide_status(
    core_metric: float | None, best_metric: float | None, *, lower_is_better: bool, margin: float = 0.0
) -> str:
    """``keep`` or ``discard`` for a finished run (module doc)."""
    if core_metric is None or not math.isfinite(core_metric):
        return "discard"
    if best_metric is None:
        return "keep"
    return "keep" if beats_best(core_metric, best_metric, lower_is_better=lower_is_better, margin=margin) else "discard"


def failure_label(exc: BaseException) -> str:
    """The failure label of what stopped a run: an out-of-memory is ``size_blocked`` (the
    model or batch does not fit), a training timeout ``train_budget_overrun``, an evaluation
    timeout ``eval_budget_overrun``, an interrupt or termination by the harness
    (``KeyboardInterrupt``, ``SystemExit``) ``harness_abort``, anything else ``crash``."""
    if isinstance(exc, EvalBudgetExceeded):
        return "eval_budget_overrun"
    if isinstance(exc, TimeoutError):
        return "train_budget_overrun"
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return "harness_abort"
    if (
        isinstance(exc, MemoryError)
        or type(exc).__name__ in ("OutOfMemoryError", "OutOfResources")
        or "out of memory" in str(exc).lower()
    ):
        return "size_blocked"
    return "crash"


def metric_of_summary(summary: Mapping[str, float], key: str) -> tuple[str | None, float | None]:
    """``(the summary entry used, its value)`` for the metric ``key``: ``summary[key]``;
    else the one entry whose last ``/``-separated segment is ``key`` (``val/loss`` for
    ``loss``); else ``(None, None)`` (no such entry, or several). A non-finite value
    counts as no value."""
    if key in summary:
        found: str | None = key
    else:
        suffix = "/" + key
        matches = [name for name in summary if name.endswith(suffix)]
        found = matches[0] if len(matches) == 1 else None
    if found is None:
        return None, None
    value = float(summary[found])
    return (found, value) if math.isfinite(value) else (found, None)


def declared_direction(declared: Sequence[Mapping[str, Any]], metric: str) -> Mapping[str, Any] | None:
    """The first declaration about ``metric`` among ``declared`` (each ``{"name",
    "lower_is_better", "by"}``): one for any metric (``name`` None), or one whose name (a key
    or a ``*`` pattern) is the metric or a summary key it is read from (``val/acc`` for
    ``acc``, as :func:`metric_of_summary` reads it); None when the run declared nothing."""
    for item in declared:
        name = item.get("name")
        if name is None or fnmatchcase(metric, name) or name.endswith("/" + metric):
            return item
    return None


def contradiction(declared: Sequence[Mapping[str, Any]], project: Mapping[str, Any]) -> str | None:
    """The warning when a declaration about the project's metric goes against the
    project's direction (``project``: its ``slug``, ``metric_name``, ``lower_is_better``);
    else None."""
    metric = str(project.get("metric_name") or "core_metric")
    found = declared_direction(declared, metric)
    if found is None or bool(found["lower_is_better"]) == bool(project.get("lower_is_better", True)):
        return None
    way = "lower" if project.get("lower_is_better", True) else "higher"
    return (
        f"project {project.get('slug')!r} keeps {metric!r} {way}-is-better, but this run declared "
        f"{found['by']}; the project is left as it is and the run is scored {way}-is-better"
    )
