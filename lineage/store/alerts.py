"""Alerts of trials: :class:`AlertsSql`, ``Store.alerts`` of :class:`lineage.store.Store`.

The rows of ``trial_alerts`` (``lineage.alerts`` owns the rules): ``insert_alert``, one
alert by id (``alert_row``), and ``alert_rows``: a project's alerts newest first, of
one trial, at some levels, before an id (the cursor of the next page).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from lineage.store.base import Family

#: what an alert query selects, in :class:`lineage.alerts.Alert`'s order
_ALERT_SELECT = (
    "SELECT a.id, t.exp_id, a.level, a.title, a.text, a.step, a.wall_time, a.created_at "
    "FROM trial_alerts a JOIN trials t ON t.id = a.trial_id"
)


class AlertsSql(Family):
    """Alerts in, alerts out."""

    def insert_alert(
        self,
        conn: Connection,
        project_id: int,
        trial_id: int,
        *,
        level: str,
        title: str,
        text: str,
        step: int | None,
        wall_time: float | None,
    ) -> int:
        cursor = self.core.execute(
            conn,
            "INSERT INTO trial_alerts (project_id, trial_id, level, title, text, step, wall_time, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (project_id, trial_id, level, title, text, step, wall_time, self.core.now()),
        )
        return int(cursor.fetchone()[0])

    def alert_row(self, conn: Connection, project_id: int, alert_id: int) -> tuple[Any, ...] | None:
        """``(id, exp_id, level, title, text, step, wall_time, created_at)`` of one alert."""
        row = self.core.execute(
            conn, f"{_ALERT_SELECT} WHERE a.project_id = ? AND a.id = ?", (project_id, alert_id)
        ).fetchone()
        return None if row is None else tuple(row)

    def alert_rows(
        self,
        conn: Connection,
        project_id: int,
        *,
        trial_id: int | None = None,
        levels: Sequence[str] | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[tuple[Any, ...]]:
        """A project's alerts, newest first: ``(id, exp_id, level, title, text, step,
        wall_time, created_at)`` each (indexed by project or trial, then id)."""
        where: list[str] = ["a.project_id = ?"]
        params: list[Any] = [project_id]
        if trial_id is not None:
            where.append("a.trial_id = ?")
            params.append(trial_id)
        if levels:
            where.append(f"a.level IN ({self.core.marks(levels)})")
            params.extend(levels)
        if before_id is not None:
            where.append("a.id < ?")
            params.append(before_id)
        cursor = self.core.execute(
            conn, f"{_ALERT_SELECT} WHERE {' AND '.join(where)} ORDER BY a.id DESC LIMIT ?", (*params, limit)
        )
        return [tuple(row) for row in cursor.fetchall()]
