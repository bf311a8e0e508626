"""Running trials' leases: :class:`LeasesSql`, ``Store.leases`` of :class:`lineage.store.Store`.

A running trial's lease is its ``owner`` and ``heartbeat_at`` (migration 0011); its last
sign of life is ``heartbeat_at``, else ``updated_at`` (a trial recorded or changed as
running that has not beaten yet). Each read is a range of the ``project_id, status, ...``
index (running trials are few), so none grows with the project. The rule (what lapses,
the note) is :mod:`lineage.leases`'.

Methods: ``beat``, ``running``, ``running_candidates``, ``lapsed``, ``any_lapsed``,
``projects_running``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from lineage.domain import FailureLabel, Lease, Project, Trial
from lineage.store.base import _COLUMN_LIST, Family, iso_stamp, trial_from_row

_RUNNING = FailureLabel.RUNNING.value
#: a running trial's last sign of life
_LAST_SIGN = "COALESCE(heartbeat_at, updated_at)"


class LeasesSql(Family):
    """The lease columns of running trials: heartbeats, the list, the lapsed ones."""

    def beat(self, conn: Connection, project: Project, exp_id: str, *, owner: str | None, at: datetime) -> bool:
        """Write a heartbeat (and ``owner`` when given) on ``exp_id`` if it is running;
        whether it was. Neither the trial's ``updated_at`` nor the project's revision
        moves: a heartbeat changes no field a reader caches."""
        owner_sql = "owner" if owner is None else "?"
        params: list[Any] = [self.core.db_time(at)]
        if owner is not None:
            params.append(owner)
        cursor = self.core.execute(
            conn,
            f"UPDATE trials SET heartbeat_at = ?, owner = {owner_sql} "
            "WHERE project_id = ? AND exp_id = ? AND status = ?",
            (*params, project.id, exp_id, _RUNNING),
        )
        return bool(cursor.rowcount)

    def running(self, conn: Connection, project: Project) -> list[Lease]:
        """The project's running trials, oldest first."""
        cursor = self.core.execute(
            conn,
            "SELECT exp_id, owner, created_at, heartbeat_at, hypothesis, specialist FROM trials "
            "WHERE project_id = ? AND status = ? ORDER BY seq",
            (project.id, _RUNNING),
        )
        return [
            Lease(exp_id, owner, iso_stamp(created), iso_stamp(beat), hypothesis, specialist)
            for exp_id, owner, created, beat, hypothesis, specialist in cursor.fetchall()
        ]

    def running_candidates(self, conn: Connection, project: Project) -> list[tuple[tuple[Any, ...], str]]:
        """The project's running trials as "was this tried?" candidates (the columns of
        ``lineage.store.search.CandidateRow``), each with its owner; oldest first. A
        claim ranks them all: they are few, and an idea in flight must not be missed."""
        cursor = self.core.execute(
            conn,
            "SELECT seq, exp_id, status, core_metric, delta_vs_best, hypothesis, notes, search_concepts, owner "
            "FROM trials WHERE project_id = ? AND status = ? ORDER BY seq",
            (project.id, _RUNNING),
        )
        return [(tuple(row[:-1]), row[-1]) for row in cursor.fetchall()]

    def lease(self, conn: Connection, project: Project, exp_id: str) -> Lease | None:
        """The lease of ``exp_id`` if it is running."""
        return next((lease for lease in self.running(conn, project) if lease.exp_id == exp_id), None)

    def lapsed(self, conn: Connection, project: Project, cutoff: datetime) -> list[tuple[Trial, str | None]]:
        """The running trials whose last sign of life is before ``cutoff``, with that time."""
        cursor = self.core.execute(
            conn,
            f"SELECT {_COLUMN_LIST}, {_LAST_SIGN} FROM trials WHERE project_id = ? AND status = ? "
            f"AND {_LAST_SIGN} < ? ORDER BY seq",
            (project.id, _RUNNING, self.core.db_time(cutoff)),
        )
        return [(trial_from_row(row[:-1]), iso_stamp(row[-1])) for row in cursor.fetchall()]

    def any_lapsed(self, conn: Connection, project: Project, cutoff: datetime) -> bool:
        """Whether :meth:`lapsed` would find a trial (one index probe: the readers' check)."""
        # the status is written into the statement, not bound: a prepared statement's
        # generic plan (PostgreSQL, after five executions) then still knows that few trials
        # run, and probes the status index instead of reading the project's every trial
        # (0.5 s at 100,000 trials, on every read that settles leases first)
        cursor = self.core.execute(
            conn,
            f"SELECT 1 FROM trials WHERE project_id = ? AND status = '{_RUNNING}' AND {_LAST_SIGN} < ? LIMIT 1",
            (project.id, self.core.db_time(cutoff)),
        )
        return cursor.fetchone() is not None

    def projects_running(self, conn: Connection) -> list[str]:
        """Slugs of the projects that have a running trial (an index probe per project)."""
        cursor = self.core.execute(
            conn,
            "SELECT slug FROM projects p WHERE EXISTS "
            "(SELECT 1 FROM trials t WHERE t.project_id = p.id AND t.status = ?) ORDER BY slug",
            (_RUNNING,),
        )
        return [row[0] for row in cursor.fetchall()]
