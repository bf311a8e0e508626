"""The researcher's read models: what each page shows, as values.

Owns: :class:`ProjectOverview`, :class:`MetricPoint`, :class:`Dashboard`,
:class:`TrialContext`, :class:`Calibration` (with its summary statistics), how an
``expected_delta`` text is read as a number (:func:`parse_expected_delta`), and the
running best drawn by the charts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lineage.chain import ChainView
from lineage.domain import BestPolicy, FailureLabel, Lease, Project, RunningBest, Trial
from lineage.noise import NoiseVerdict

_NUMBER = re.compile(r"[+\-\u2212]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+\-]?\d+)?")


def parse_expected_delta(text: str) -> float | None:
    """The number a writer put in ``expected_delta``: the first signed decimal in it.

    ``"+0.75 EM over turn-group"`` -> 0.75, ``"-0.001 bpb"`` -> -0.001, ``"−2%"`` -> -2.0
    (Unicode minus too); None when the text has no number or it is not finite.
    """
    match = _NUMBER.search(text or "")
    if match is None:
        return None
    value = float(match.group().replace("\u2212", "-"))
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class ProjectOverview:
    project: Project
    best: Trial | None
    #: the most recently recorded trial
    latest: Trial | None
    #: ``(seq, best so far)`` at each step of the running best, oldest first.
    running_best: tuple[tuple[int, float], ...]


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One trial in the metric chart: the few fields it draws."""

    seq: int
    exp_id: str
    status: str
    core_metric: float | None
    specialist: str
    delta_vs_best: float | None


def bin_width(project: Project, bins: int) -> int:
    """Seqs per bin when a project's history is cut into ``bins`` bins."""
    return max(1, -(-project.trial_count // max(1, bins)))


def running_by_bin(per_bin: Iterable[tuple[int, float]], width: int, project: Project) -> list[tuple[int, float]]:
    """``(seq, best so far)`` at the start of each bin where the best changes."""
    # each bin's metric is already the best eligible one in it
    running = RunningBest(BestPolicy.FIELDKIT, project.lower_is_better)
    return [(index * width, metric) for index, metric in per_bin if running.offer(FailureLabel.KEEP.value, metric)]


def running_by_trial(
    points: Iterable[MetricPoint], start: float | None, project: Project
) -> Iterator[tuple[int, float]]:
    """``(seq, best so far)`` at each trial of ``points`` that moves the best (from ``start``)."""
    running = RunningBest.of(project, start)
    first = True
    for point in points:
        if first and start is not None:
            yield point.seq, start
        first = False
        if running.offer(point.status, point.core_metric):
            yield point.seq, point.core_metric  # type: ignore[misc]


@dataclass(frozen=True, slots=True)
class Dashboard:
    project: Project
    best: Trial | None
    #: the chain to the best: its ends and length
    chain: ChainView
    status_counts: Mapping[str, int]
    #: newest first
    recent: tuple[Trial, ...]
    #: the metric chart's trials, oldest first
    window: tuple[MetricPoint, ...]
    #: ``(seq, best so far)`` through the window, starting with the best before it
    window_running_best: tuple[tuple[int, float], ...]
    has_earlier: bool
    #: the whole project's running best (binned), as in :class:`ProjectOverview`
    running_best: tuple[tuple[int, float], ...]
    #: the trials under way (status running), oldest first
    running: tuple[Lease, ...] = ()


@dataclass(frozen=True, slots=True)
class ChainPage:
    """A page of the chain to ``target``: ``trials`` are those at positions ``offset``
    onwards (0: the root), root-first, of a chain of ``length``."""

    project: Project
    best: Trial | None
    target: str | None
    trials: tuple[Trial, ...]
    length: int
    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class TrialContext:
    project: Project
    trial: Trial
    parent: Trial | None
    #: the chain from the root to this trial: its ends and length
    chain: ChainView
    #: the chain's last :data:`FIGURE_GENERATIONS` trials, root-first (the trial page's plot)
    recent_chain: tuple[Trial, ...]
    children: tuple[Trial, ...]
    child_count: int
    best: Trial | None
    on_best_chain: bool
    previous_id: str | None
    next_id: str | None
    #: the trial's lease while it is running (owner, since, last heartbeat)
    lease: Lease | None = None
    #: its delta against the project's noise floor now (None: no delta, or no σ to judge it by)
    noise: NoiseVerdict | None = None
    #: the trial it declared itself a rerun of (None: not declared)
    rerun_of: str | None = None


@dataclass(frozen=True, slots=True)
class CalibrationPoint:
    exp_id: str
    specialist: str
    expected_text: str
    expected: float
    observed: float
    status: str


@dataclass(frozen=True, slots=True)
class Calibration:
    project: Project
    points: tuple[CalibrationPoint, ...]
    #: trials whose expected_delta holds no number
    unparsed: int
    #: trials with a numeric expectation but no observed delta_vs_best
    unobserved: int
    considered: int
    limit: int


def calibration_summary(points: Sequence[CalibrationPoint]) -> dict[str, Any]:
    """How well stated expectations predicted observed deltas over ``points``: count,
    means, mean error and absolute error, sign agreement and (from 3 points) the
    Pearson correlation. The calibration page shows it per specialist and overall."""
    n = len(points)
    expected = [p.expected for p in points]
    observed = [p.observed for p in points]
    mean_e, mean_o = sum(expected) / n, sum(observed) / n
    errors = [o - e for e, o in zip(expected, observed)]
    agree = sum(1 for e, o in zip(expected, observed) if (e > 0) == (o > 0) and e != 0 and o != 0)
    corr = None
    if n >= 3:
        se = math.sqrt(sum((e - mean_e) ** 2 for e in expected))
        so = math.sqrt(sum((o - mean_o) ** 2 for o in observed))
        if se > 0 and so > 0:
            corr = sum((e - mean_e) * (o - mean_o) for e, o in zip(expected, observed)) / (se * so)
    return {
        "n": n,
        "mean_expected": mean_e,
        "mean_observed": mean_o,
        "mean_error": sum(errors) / n,
        "mae": sum(abs(x) for x in errors) / n,
        "sign_agreement": agree / n,
        "corr": corr,
    }
