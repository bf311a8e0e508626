"""Running trials' leases: :class:`LeasesSql`, ``Store.leases`` of :class:`lineage.store.Store`.

A running trial's lease is its ``owner`` and ``heartbeat_at`` (migration 0011) and its
own length ``lease_s`` (migration 0013; NULL: the project's); its last sign of life is
``heartbeat_at``, else ``updated_at`` (a trial recorded or changed as running that has not
beaten yet). Each read is a range of the ``project_id, status, ...`` index (running trials
are few), so none grows with the project; with a length per trial, which of them lapsed
is decided over that range here, not in SQL (date arithmetic differs by backend). The
rule (what lapses, the note) is :mod:`lineage.leases`'.

Methods: ``beat``, ``running``, ``running_candidates``, ``lapsed``, ``any_lapsed``,
``projects_running``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from lineage.domain import FailureLabel, Lease, Project, Trial, lease_of
from lineage.store.base import _COLUMN_LIST, Family, iso_stamp, trial_from_row

_RUNNING = FailureLabel.RUNNING.value
#: a running trial's last sign of life
_LAST_SIGN = "COALESCE(heartbeat_at, updated_at)"


class LeasesSql(Family):
    """The lease columns of running trials: heartbeats, the list, the lapsed ones."""

    def beat(
        self,
        conn: Connection,
        project: Project,
        exp_id: str,
        *,
        owner: str | None,
        at: datetime,
        lease_s: float | None = None,
    ) -> bool:
        """Write a heartbeat (and ``owner``, ``lease_s`` when given) on ``exp_id`` if it is
        running; whether it was. Neither the trial's ``updated_at`` nor the project's
        revision moves: a heartbeat changes no field a reader caches."""
        owner_sql = "owner" if owner is None else "?"
        lease_sql = "lease_s" if lease_s is None else "?"
        params: list[Any] = [self.core.db_time(at)]
        params += [value for value in (owner, lease_s) if value is not None]
        cursor = self.core.execute(
            conn,
            f"UPDATE trials SET heartbeat_at = ?, owner = {owner_sql}, lease_s = {lease_sql} "
            "WHERE project_id = ? AND exp_id = ? AND status = ?",
            (*params, project.id, exp_id, _RUNNING),
        )
        return bool(cursor.rowcount)

    def holder(self, conn: Connection, project: Project, exp_id: str) -> str | None:
        """Who holds ``exp_id`` ('' unnamed), or None when no such trial is stored."""
        cursor = self.core.execute(
            conn, "SELECT owner FROM trials WHERE project_id = ? AND exp_id = ?", (project.id, exp_id)
        )
        row = cursor.fetchone()
        return None if row is None else str(row[0])

    def running(self, conn: Connection, project: Project) -> list[Lease]:
        """The project's running trials, oldest first, each with its lease's length (its
        own, else the project's) and when it lapses without another heartbeat."""
        cursor = self.core.execute(
            conn,
            f"SELECT exp_id, owner, created_at, heartbeat_at, hypothesis, specialist, lease_s, {_LAST_SIGN} "
            "FROM trials WHERE project_id = ? AND status = ? ORDER BY seq",
            (project.id, _RUNNING),
        )
        default = lease_of(project)
        leases = []
        for exp_id, owner, created, beat, hypothesis, specialist, own, last in cursor.fetchall():
            length = default if own is None else float(own)
            expires = _stamp(last) + timedelta(seconds=length)
            leases.append(
                Lease(
                    exp_id,
                    owner,
                    iso_stamp(created),
                    iso_stamp(beat),
                    hypothesis,
                    specialist,
                    lease_s=length,
                    expires_at=expires.isoformat(),
                )
            )
        return leases

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

    def lapsed(
        self, conn: Connection, project: Project, now: datetime, default_lease_s: float
    ) -> list[tuple[Trial, str | None, float]]:
        """The running trials whose last sign of life is older than their lease at ``now``
        (``default_lease_s`` for one without its own), with that time and that lease."""
        cursor = self.core.execute(
            conn,
            f"SELECT {_COLUMN_LIST}, {_LAST_SIGN}, lease_s FROM trials WHERE project_id = ? AND status = ? "
            "ORDER BY seq",
            (project.id, _RUNNING),
        )
        found = []
        for row in cursor.fetchall():
            length = default_lease_s if row[-1] is None else float(row[-1])
            if _stamp(row[-2]) + timedelta(seconds=length) < now:
                found.append((trial_from_row(row[:-2]), iso_stamp(row[-2]), length))
        return found

    def any_lapsed(self, conn: Connection, project: Project, now: datetime, default_lease_s: float) -> bool:
        """Whether :meth:`lapsed` would find a trial (the readers' check: the running
        trials' last signs and leases, no trial read whole)."""
        # the status is written into the statement, not bound: a prepared statement's
        # generic plan (PostgreSQL, after five executions) then still knows that few trials
        # run, and probes the status index instead of reading the project's every trial
        # (0.5 s at 100,000 trials, on every read that settles leases first)
        cursor = self.core.execute(
            conn,
            f"SELECT {_LAST_SIGN}, lease_s FROM trials WHERE project_id = ? AND status = '{_RUNNING}'",
            (project.id,),
        )
        return any(
            _stamp(last) + timedelta(seconds=default_lease_s if own is None else float(own)) < now
            for last, own in cursor.fetchall()
        )

    def projects_running(self, conn: Connection) -> list[str]:
        """Slugs of the projects that have a running trial (an index probe per project)."""
        cursor = self.core.execute(
            conn,
            "SELECT slug FROM projects p WHERE EXISTS "
            "(SELECT 1 FROM trials t WHERE t.project_id = p.id AND t.status = ?) ORDER BY slug",
            (_RUNNING,),
        )
        return [row[0] for row in cursor.fetchall()]


def _stamp(value: datetime | str) -> datetime:
    """A driver's time as an aware UTC datetime (SQLite gives the stored UTC text)."""
    stamp = iso_stamp(value)
    assert stamp is not None
    return datetime.fromisoformat(stamp)
