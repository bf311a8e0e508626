"""Browse (``ledger.browse``): the read models of the researcher's pages.

Each method reads one transaction of bounded, indexed queries (see the ``Store`` methods
they call), so the pages of a 100,000-trial project cost what a small one's do. Owns:
overview(s), dashboard, trial_context, chain_page, trials_by_ids, calibration; the values
are :mod:`lineage.browse.models`'. The tree window (:mod:`lineage.browse.tree`), the
explorer (:mod:`lineage.browse.explore`), a project's columns
(:mod:`lineage.browse.columns`) and the knob view (:mod:`lineage.browse.knobs`) are
functions of the store in their own modules; :class:`Browse` hands them its store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection

from lineage.browse import columns as column_reads
from lineage.browse import explore as explorer
from lineage.browse import knobs as knob_reads
from lineage.browse import tree as tree_reads
from lineage.browse.columns import ProjectColumns
from lineage.browse.explore import ExploreQuery
from lineage.browse.knobs import KnobView
from lineage.browse.models import (
    Calibration,
    CalibrationPoint,
    ChainPage,
    Dashboard,
    MetricPoint,
    ProjectOverview,
    TrialContext,
    bin_width,
    parse_expected_delta,
    running_by_bin,
    running_by_trial,
)
from lineage.browse.tree import TreeWindow
from lineage.chain import ChainView, chain_ends, chain_length, chain_slice, current_best, on_chain
from lineage.domain import FailureLabel, Project, Trial, check_window
from lineage.errors import NotFound
from lineage.leases import settle, settle_all
from lineage.noise import judge
from lineage.store import Store

#: Generations of a trial's chain its page plots (the newest).
FIGURE_GENERATIONS = 500


class Browse:
    """The researcher's reads: overview(s), dashboard, trial_context, chain_page,
    trials_by_ids, states_expectations, calibration, tree_window, explore,
    project_columns, knobs."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def tree_window(
        self,
        project_slug: str,
        *,
        root: str | None = None,
        focus: str | None = None,
        depth: int = 8,
        per_node: int = 25,
        budget: int = 400,
        offset: int = 0,
        orphan_scan_limit: int = 20_000,
        nested: bool = False,
    ) -> TreeWindow:
        """A window of the lineage tree (:func:`lineage.browse.tree.tree_window`)."""
        return tree_reads.tree_window(
            self.store,
            project_slug,
            root=root,
            focus=focus,
            depth=depth,
            per_node=per_node,
            budget=budget,
            offset=offset,
            orphan_scan_limit=orphan_scan_limit,
            nested=nested,
        )

    def explore(self, project_slug: str, query: ExploreQuery) -> dict[str, Any]:
        """The metric explorer's answer (:func:`lineage.browse.explore.explore`)."""
        return explorer.explore(self.store, project_slug, query)

    def project_columns(self, project_slug: str) -> ProjectColumns:
        """The columns the project's pages show (:func:`lineage.browse.columns.project_columns`)."""
        return column_reads.project_columns(self.store, project_slug)

    def knobs(
        self, project_slug: str, axes: Sequence[str] | None = None, *, limit: int = 2000, suggest: bool = False
    ) -> KnobView:
        """Each trial's knob values and metric (:func:`lineage.browse.knobs.knobs`)."""
        return knob_reads.knobs(self.store, project_slug, axes, limit=limit, suggest=suggest)

    def overview(self, project_slug: str, *, bins: int = 60) -> ProjectOverview:
        """A project with its best and its running best over time (for the index page)."""
        settle(self.store, project_slug)
        with self.store.read() as conn:
            return self._overview(conn, self.store.projects.project(conn, project_slug), bins=bins)

    def overviews(self, *, bins: int = 60) -> list[ProjectOverview]:
        settle_all(self.store)
        with self.store.read() as conn:
            return [self._overview(conn, project, bins=bins) for project in self.store.projects.projects(conn)]

    def _overview(self, conn: Connection, project: Project, *, bins: int) -> ProjectOverview:
        latest = self.store.trials.recent(conn, project, 1)
        return ProjectOverview(
            project=project,
            best=current_best(self.store, conn, project),
            latest=latest[0] if latest else None,
            running_best=tuple(self._running_best(conn, project, bins=bins)),
        )

    def _running_best(self, conn: Connection, project: Project, *, bins: int) -> list[tuple[int, float]]:
        """``(seq, best so far)`` at the start of each bin where the best changes."""
        width = bin_width(project, bins)
        return self._running_best_exact_start(
            conn, project, self.store.pages.best_per_bin(conn, project, width=width), width
        )

    def dashboard(
        self,
        project_slug: str,
        *,
        window: int = 1000,
        before_seq: int | None = None,
        recent_n: int = 20,
        bins: int = 200,
    ) -> Dashboard:
        """What the project dashboard shows: best, chain, counts, recent trials, and a
        window of ``window`` trials (the newest, or those before ``before_seq``) for the
        metric chart, with the running best through it."""
        check_window("window", window, minimum=1)
        check_window("recent_n", recent_n, minimum=1)
        settle(self.store, project_slug)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            best = current_best(self.store, conn, project)
            chain = chain_ends(self.store, conn, project, best.exp_id) if best else ChainView((), (), 0)
            rows = self.store.pages.metric_window(conn, project, before_seq=before_seq, limit=window)
            points = tuple(MetricPoint(*row) for row in rows)
            width = bin_width(project, bins)
            per_bin = self.store.pages.best_per_bin(conn, project, width=width)
            start_best = self._best_metric_before(conn, project, points[0].seq, per_bin, width) if points else None
            recent = self.store.trials.recent(conn, project, recent_n)
            recent.reverse()
            return Dashboard(
                project=project,
                best=best,
                chain=chain,
                status_counts=self.store.pages.status_counts(conn, project),
                recent=tuple(recent),
                window=points,
                window_running_best=tuple(running_by_trial(points, start_best, project)),
                has_earlier=bool(points) and points[0].seq > 0,
                running_best=tuple(self._running_best_exact_start(conn, project, per_bin, width)),
                running=tuple(self.store.leases.running(conn, project)),
            )

    def _running_best_exact_start(
        self, conn: Connection, project: Project, per_bin: list[tuple[int, float]], width: int
    ) -> list[tuple[int, float]]:
        """The running best per bin, its first bin trial by trial: the first bests set the
        chart's range, and a bin's best alone would leave them off it."""
        running = running_by_bin(per_bin, width, project)
        if width <= 1 or not running or running[0][0] != 0:
            return running
        head = self.store.pages.metric_window(conn, project, before_seq=width, limit=width)
        return list(running_by_trial((MetricPoint(*row) for row in head), None, project)) + running[1:]

    def _best_metric_before(
        self, conn: Connection, project: Project, seq: int, per_bin: list[tuple[int, float]], width: int
    ) -> float | None:
        """The best eligible metric among the trials before ``seq``: the bins wholly before
        it (already read) and the few trials of the bin it falls in (one index range)."""
        first = seq // width
        candidates = [metric for index, metric in per_bin if index < first]
        eligible = project.best_policy.eligible_statuses()
        partial = (
            self.store.pages.metric_window(conn, project, before_seq=seq, limit=seq - first * width)
            if seq > first * width
            else []
        )
        candidates += [row[3] for row in partial if row[3] is not None and row[2] in eligible]
        if not candidates:
            return None
        return min(candidates) if project.lower_is_better else max(candidates)

    def trial_context(self, project_slug: str, exp_id: str, *, children_limit: int = 50) -> TrialContext:
        """A trial with its parent, first children, chain from the root and neighbours."""
        settle(self.store, project_slug)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            trial = self.store.trials.trial(conn, project, exp_id)
            exp_id = trial.exp_id  # the stored id of an id as shown (exp_12)
            chain = chain_ends(self.store, conn, project, exp_id)
            shown = chain.shown
            parent = shown[-2] if len(shown) > 1 and shown[-2].exp_id == trial.parent_exp else None
            recent = chain_slice(
                self.store,
                conn,
                project,
                exp_id,
                chain.length - FIGURE_GENERATIONS,
                FIGURE_GENERATIONS,
                length=chain.length,
            )
            best = current_best(self.store, conn, project)
            previous, following = self.store.pages.neighbours(conn, project, trial.seq or 0)
            children = self.store.pages.children_window(conn, project, [exp_id], limit=children_limit)[exp_id]
            floor = self.store.repeats.floor(conn, project)
            noise = None
            if floor.sigma is not None and trial.delta_vs_best is not None:
                noise = judge(floor, trial.delta_vs_best, status=trial.status.value, exp_id=exp_id)
            return TrialContext(
                project=project,
                trial=trial,
                parent=parent,
                chain=chain,
                recent_chain=tuple(recent),
                children=tuple(children),
                child_count=self.store.pages.child_counts(conn, project, [exp_id]).get(exp_id, 0),
                best=best,
                on_best_chain=best is not None and on_chain(self.store, conn, project, exp_id, best.exp_id),
                previous_id=previous,
                next_id=following,
                lease=self.store.leases.lease(conn, project, exp_id) if trial.status is FailureLabel.RUNNING else None,
                noise=noise,
                rerun_of=self.store.repeats.keys_of(conn, project.stored_id, trial.seq or 0)[1],
            )

    def chain_page(self, project_slug: str, to: str | None = None, *, offset: int = 0, limit: int = 500) -> ChainPage:
        """Trials ``offset`` to ``offset + limit - 1`` (0: the root) of the chain to ``to``
        (default: the best), root-first, with the chain's length: the whole-chain page,
        a page at a time (a 100,000-trial loop's chain is 20,000 trials, 8 MB of HTML)."""
        check_window("limit", limit, minimum=1)
        check_window("offset", offset, minimum=0)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            best = current_best(self.store, conn, project)
            target = self.store.trials.trial(conn, project, to).exp_id if to else (best.exp_id if best else None)
            if target is None:
                return ChainPage(project, best, None, (), 0, 0, limit)
            length = chain_length(self.store, conn, project, target)
            offset = min(offset, max(0, length - 1)) // limit * limit
            trials = chain_slice(self.store, conn, project, target, offset, limit, length=length)
            return ChainPage(project, best, target, tuple(trials), length, offset, limit)

    def trials_by_ids(self, project_slug: str, exp_ids: Iterable[str]) -> tuple[Project, list[Trial]]:
        """The project and those of ``exp_ids`` that are its trials, in the order asked;
        an unknown id raises :class:`NotFound`."""
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            found = self.store.pages.trials_by_ids(conn, project, exp_ids)
            missing = [i for i in exp_ids if i not in found]
            if missing:
                raise NotFound("trial", f"{project.slug}/{missing[0]}", field="exp_id")
            return project, [found[i] for i in exp_ids]

    def states_expectations(self, project_slug: str) -> bool:
        """Whether one of the project's newest 5,000 trials states an expected delta (what the
        calibration page plots; the pages show its tab only then)."""
        with self.store.read() as conn:
            return self.store.pages.states_expectations(conn, self.store.projects.project(conn, project_slug))

    def calibration(self, project_slug: str, *, limit: int = 10_000) -> Calibration:
        """Expected vs observed delta of the last ``limit`` trials that state an expectation."""
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            rows = self.store.pages.calibration_rows(conn, project, limit=limit)
        points: list[CalibrationPoint] = []
        unparsed = unobserved = 0
        for exp_id, specialist, expected_text, observed, status in reversed(rows):
            expected = parse_expected_delta(expected_text)
            if expected is None:
                unparsed += 1
            elif observed is None:
                unobserved += 1
            else:
                points.append(CalibrationPoint(exp_id, specialist, expected_text, expected, observed, status))
        return Calibration(
            project=project,
            points=tuple(points),
            unparsed=unparsed,
            unobserved=unobserved,
            considered=len(rows),
            limit=limit,
        )
