"""The best, the branch tip and the best's fallback: :class:`BestReads`, the reads a record
starts from, part of ``Store.trials`` (:class:`~lineage.store.trials.TrialsSql` inherits
them, so ``store.trials.best_scored``, ``tip``, ``first_trial``, ``record_context``... are
where callers look).

The rule of which trial is best is ``lineage.domain``'s (``BestPolicy``, ``ordered_best``);
these are its indexed SQL reads, each split into a statement sent (``*_cursor``) and its
rows read (``fetch_best``), so a pipelined PostgreSQL write sends them all at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection

from lineage.domain import BestPolicy, FailureLabel, Project, Trial, ordered_best
from lineage.store.base import _COLUMN_LIST, Family, trial_from_row
from lineage.store.progress import ProgressSql


def _first_of(cursor: Any) -> Trial | None:
    """The trial of a cursor's first row, None for none."""
    found = cursor.fetchall()
    return trial_from_row(found[0]) if found else None


#: The statuses that move a branch's tip (:meth:`BestReads.tip`): a keep, or the baseline.
TIP_STATUSES = (FailureLabel.KEEP.value, FailureLabel.BASELINE.value)


@dataclass(frozen=True, slots=True)
class RecordContext:
    """What :meth:`BestReads.record_context` read."""

    best: Trial | None
    #: the branch tip (:meth:`BestReads.tip`); None when not read or none
    tip: Trial | None
    #: the webhooks' subscriptions and the guardrail row (``Store.progress.hooks_and_guardrails``)
    hooks: list[tuple[int, list[str], str]]
    policy: dict[str, Any] | None


class BestReads(Family):
    """The best, tip and first-trial reads of ``Store.trials`` (module doc); a record's
    context also reads the webhooks and guardrails (``progress``, set by the subclass)."""

    progress: ProgressSql

    def best_scored(
        self, conn: Connection, project: Project, *, before_seq: int | None = None, excluding: str | None = None
    ) -> Trial | None:
        """The best scored trial under the project's best policy (ties to the lowest seq).

        Indexed either way, so the cost does not grow with the project: the ``kept``
        policy reads one index range per eligible status (``project_id, status,
        core_metric, seq``); the ``fieldkit`` policy, eligible for all but one status,
        walks ``project_id, core_metric, seq`` and skips the excluded status. ``excluding``:
        the best of the other trials (a trial judged against the best when it finishes).
        """
        return self.fetch_best(project, self.best_cursor(conn, project, before_seq=before_seq, excluding=excluding))

    def best_cursor(
        self, conn: Connection, project: Project, *, before_seq: int | None = None, excluding: str | None = None
    ) -> Any:
        """:meth:`best_scored`'s statement, sent; its rows not read yet (:meth:`fetch_best`)."""
        order = "core_metric ASC" if project.lower_is_better else "core_metric DESC"
        where = "project_id = ? AND core_metric IS NOT NULL"
        params: list[Any] = [project.id]
        if before_seq is not None:
            # "+seq": keep the planner on the metric index (walking seq would scan the project)
            where += " AND +seq < ?"
            params.append(before_seq)
        if excluding is not None:
            where += " AND exp_id <> ?"
            params.append(excluding)
        eligible = project.best_policy.eligible_statuses()
        if project.best_policy is BestPolicy.FIELDKIT:
            excluded = [label.value for label in FailureLabel if label.value not in eligible]
            marks = ", ".join("?" * len(excluded))
            return self.core.execute(
                conn,
                f"SELECT {_COLUMN_LIST} FROM trials WHERE {where} AND status NOT IN ({marks}) "
                f"ORDER BY {order}, seq LIMIT 1",
                (*params, *excluded),
            )
        # one round trip: each status's best from its own index range, glued together
        per_status = f"SELECT * FROM (SELECT {_COLUMN_LIST} FROM trials WHERE {where} AND status = ? ORDER BY {order}, seq LIMIT 1) AS s"
        statuses = sorted(eligible)
        sql = " UNION ALL ".join(f"{per_status}{i}" for i in range(len(statuses)))
        return self.core.execute(conn, sql, [value for status in statuses for value in (*params, status)])

    @staticmethod
    def fetch_best(project: Project, cursor: Any) -> Trial | None:
        candidates = [trial_from_row(row) for row in cursor.fetchall()]
        return ordered_best(candidates, lower_is_better=project.lower_is_better)

    def first_trial(self, conn: Connection, project: Project) -> Trial | None:
        """The project's first trial that may stand in for the best while nothing eligible
        is scored (``BestPolicy.fallback_statuses``: never a crash, an abort or a running
        trial); None when there is none. The one home of the best's fallback: the best
        (``lineage.chain.current_best``), the progress baseline and the baseline a
        ``lineage record`` row names read it here (a parent left out is :meth:`tip`)."""
        return _first_of(self._first_cursor(conn, project))

    def _first_cursor(self, conn: Connection, project: Project) -> Any:
        # walks (project_id, seq) and stops at the first such trial: usually the first row
        statuses = sorted(project.best_policy.fallback_statuses())
        return self.core.execute(
            conn,
            f"SELECT {_COLUMN_LIST} FROM trials WHERE project_id = ? AND status IN ({self.core.marks(statuses)}) "
            "ORDER BY seq LIMIT 1",
            (project.id, *statuses),
        )

    def tip(self, conn: Connection, project: Project) -> Trial | None:
        """The branch tip: the most recent ``keep`` or ``baseline`` (by seq), what a git
        loop's HEAD is and what a trial recorded without a parent forks from; None when
        the project has neither. One index range (``project_id, status, ...``) per status."""
        return _first_of(self._tip_cursor(conn, project))

    def branch_tips(self, conn: Connection, project: Project, limit: int = 10) -> list[Trial]:
        """The tips of the project's branches, newest first: each ``keep`` or ``baseline``
        that no later keep or baseline forked from (a leaf of the kept tree; :meth:`tip`
        is the newest of them). At most ``limit``; each candidate is one probe of the
        parent index."""
        cursor = self.core.execute(
            conn,
            f"SELECT {_COLUMN_LIST} FROM trials t WHERE project_id = ? AND status IN (?, ?) AND NOT EXISTS "
            "(SELECT 1 FROM trials c WHERE c.project_id = t.project_id AND c.parent_exp = t.exp_id "
            "AND c.status IN (?, ?)) ORDER BY seq DESC LIMIT ?",
            (project.id, *TIP_STATUSES, *TIP_STATUSES, limit),
        )
        return [trial_from_row(row) for row in cursor.fetchall()]

    def _tip_cursor(self, conn: Connection, project: Project) -> Any:
        return self.core.execute(
            conn,
            f"SELECT {_COLUMN_LIST} FROM trials WHERE project_id = ? AND seq = (SELECT max(seq) FROM trials "
            "WHERE project_id = ? AND status IN (?, ?))",
            (project.id, project.id, *TIP_STATUSES),
        )

    def record_context(self, conn: Connection, project: Project, *, tip: bool) -> RecordContext:
        """What records in the project's locked write start from, every statement sent
        before any result is read (in a pipelined PostgreSQL write: one round trip, not
        four): the best, the branch tip (``tip``: when there are trials), the webhooks
        and the guardrail row (``Store.progress.hooks_and_guardrails``)."""
        best = self.best_cursor(conn, project)
        tip_cursor = self._tip_cursor(conn, project) if tip else None
        hooks = self.progress.hooks_cursors(conn, cast(int, project.id))
        return RecordContext(
            self.fetch_best(project, best),
            _first_of(tip_cursor) if tip_cursor is not None else None,
            *self.progress.fetch_hooks(hooks),
        )
