"""What the results-file loops read and write: :class:`LoopsSql`, ``Store.loops`` of
:class:`lineage.store.Store`.

``lineage.loops`` (autoresearch-style results files: import, watch, record, plot) needs
beyond the other reads: the next free number (``next_exp_number``), the branch tip
(``last_with_status``), a pass that refreshes ``delta_vs_best`` after a row was rewritten
in place (``metric_rows_from``, ``set_deltas``; uses ``ProjectsSql.advance_counters``),
and the plot's points (``plot_rows``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from lineage.domain import Project, Trial
from lineage.store.base import Family, StoreCore
from lineage.store.projects import ProjectsSql


class LoopsSql(Family):
    """Next number, branch tip, delta refresh and plot rows of a results-file loop."""

    def __init__(self, core: StoreCore, *, projects: ProjectsSql) -> None:
        super().__init__(core)
        self.projects = projects  # the project's counters are reset through ``projects``

    def next_exp_number(self, conn: Connection, project: Project) -> int:
        """One more than the largest all-digit exp_id (the next number ``record`` gives)."""
        row = self.core.execute(conn, "SELECT next_exp_number FROM projects WHERE id = ?", (project.id,)).fetchone()
        return int(row[0]) if row else 0

    def last_with_status(self, conn: Connection, project: Project, statuses: Sequence[str]) -> Trial | None:
        """The latest trial (by seq) whose status is one of ``statuses``."""
        return self.core.trial_where(
            conn,
            f"project_id = ? AND status IN ({self.core.marks(statuses)}) ORDER BY seq DESC LIMIT 1",
            (project.id, *statuses),
        )

    def metric_rows_from(
        self, conn: Connection, project: Project, seq: int
    ) -> list[tuple[str, int, str, float | None, float | None]]:
        """``(exp_id, seq, status, core_metric, delta_vs_best)`` of the trials from ``seq`` on."""
        cursor = self.core.execute(
            conn,
            "SELECT exp_id, seq, status, core_metric, delta_vs_best FROM trials WHERE project_id = ? AND seq >= ? "
            "ORDER BY seq",
            (project.id, seq),
        )
        return [tuple(row) for row in cursor.fetchall()]

    def set_deltas(self, conn: Connection, project: Project, deltas: Sequence[tuple[float | None, str]]) -> None:
        """Store ``(delta_vs_best, exp_id)`` pairs and bump the project's revision."""
        if not deltas:
            return
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.executemany(
                self.core.sql("UPDATE trials SET delta_vs_best = ? WHERE project_id = ? AND exp_id = ?"),
                [(delta, project.id, exp_id) for delta, exp_id in deltas],
            )
        finally:
            cursor.close()
        self.projects.advance_counters(conn, project, rows=0, exp_number=0)

    def plot_rows(self, conn: Connection, project: Project) -> list[tuple[int, str, str, float | None, str]]:
        """``(seq, exp_id, status, core_metric, hypothesis)`` of every trial, in seq order."""
        cursor = self.core.execute(
            conn,
            "SELECT seq, exp_id, status, core_metric, hypothesis FROM trials WHERE project_id = ? ORDER BY seq",
            (project.id,),
        )
        return [tuple(row) for row in cursor.fetchall()]
