"""Telemetry points: :class:`TelemetrySql`, ``Store.telemetry`` of :class:`lineage.store.Store`.

The points trainers send for a trial (``lineage.telemetry``): ``trial_row_id``,
``insert_points`` (multi-row ``INSERT``s on SQLite, ``COPY`` on PostgreSQL), and the reads of
the series: ``telemetry_series``, ``telemetry_points``, ``telemetry_buckets``,
``telemetry_aggregates``, ``telemetry_count`` (with ``_telemetry_where``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from lineage.domain import Project
from lineage.errors import NotFound
from lineage.store.base import Family

if TYPE_CHECKING:  # pragma: no cover
    from lineage.telemetry_columns import PointColumns

_NAN = float("nan")
_INSERT = "INSERT INTO telemetry_points (trial_id, step, turn, name, value, wall_time) VALUES "
#: rows per INSERT on SQLite, at most (and at most SQLite's limit of bound parameters / 5)
ROWS_PER_INSERT = 500


def _insert_sqlite(cursor: Any, trial_id: int, params: Iterable[Sequence[Any]], count: int, raw: Any) -> None:
    """``(step, turn, name, value, wall_time)`` rows into SQLite, :data:`ROWS_PER_INSERT`
    to a statement (a multi-row ``VALUES``: a statement step, reset and parameter fetch per
    chunk rather than per row, about a fifth of the insert's time), the last few one by one.

    The trial's id is the statement's first parameter (``?1``, named in every row, bound
    once), not a literal: the statement's text stays the same for every trial, so
    sqlite3 compiles it once per connection. A literal made each trial's 500-row
    statement a new entry in the connection's statement cache (128 of them, a few
    hundred kB each), which showed as RSS rising with every trial a trainer started."""
    per = max(1, min(ROWS_PER_INSERT, (raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) - 1) // 5))
    row = "(?1, ?, ?, ?, ?, ?)"
    flat = list(chain.from_iterable(params))
    whole = count // per * per
    if whole:
        width = 5 * per
        cursor.executemany(
            _INSERT + ", ".join([row] * per),
            ([trial_id, *flat[at : at + width]] for at in range(0, 5 * whole, width)),
        )
    if whole < count:
        rest = iter(flat[5 * whole :])
        cursor.executemany(_INSERT + row, zip(repeat(trial_id), rest, rest, rest, rest, rest))


class TelemetrySql(Family):
    """Telemetry points in, series out."""

    def trial_row_id(self, conn: Connection, project: Project, exp_id: str) -> int:
        row = self.core.execute(
            conn, "SELECT id FROM trials WHERE project_id = ? AND exp_id = ?", (project.id, exp_id)
        ).fetchone()
        if row is None:
            raise NotFound("trial", f"{project.slug}/{exp_id}", field="exp_id")
        return int(row[0])

    def insert_points(self, conn: Connection, trial_id: int, rows: Sequence[tuple[Any, ...]] | PointColumns) -> int:
        """Insert ``(step, turn, name, value, wall_time)`` rows of one trial, or the same as
        :class:`~lineage.telemetry_columns.PointColumns`: multi-row ``INSERT``s on SQLite, ``COPY`` on
        PostgreSQL."""
        raw = conn.connection.driver_connection
        count = len(rows)
        if not count:
            return 0
        if self.sqlite:
            if isinstance(rows, Sequence):
                params: Any = rows
            else:
                # Python's sqlite3 binds int, float and str directly but sends None through
                # its adapter lookup (about a fifth of the insert's time when most wall times
                # are null); SQLite stores a bound NaN as NULL, so missing wall times go as NaN.
                walls = rows.wall_time
                nulls = walls.count(None) if isinstance(walls, list) else count
                wall_times: Any = (
                    repeat(_NAN, count)
                    if nulls == count
                    else walls
                    if not nulls
                    else [_NAN if w is None else w for w in walls]
                )
                params = zip(rows.step, rows.turn, rows.name, rows.value, wall_times)
            cursor = raw.cursor()  # type: ignore[union-attr]
            try:
                _insert_sqlite(cursor, int(trial_id), params, count, raw)
            finally:
                cursor.close()
        else:
            found = rows if isinstance(rows, Sequence) else rows.rows()
            with raw.cursor() as cursor:  # type: ignore[union-attr]
                with cursor.copy(
                    "COPY telemetry_points (trial_id, step, turn, name, value, wall_time) FROM STDIN"
                ) as copy:
                    for row in found:
                        copy.write_row((trial_id, *row))
        return count

    @staticmethod
    def _telemetry_where(
        trial_id: int, names: Sequence[str] | None, step_min: int | None, step_max: int | None
    ) -> tuple[str, list[Any]]:
        where: list[str] = ["trial_id = ?"]
        params: list[Any] = [trial_id]
        if names:
            where.append(f"name IN ({', '.join('?' * len(names))})")
            params.extend(names)
        if step_min is not None:
            where.append("step >= ?")
            params.append(step_min)
        if step_max is not None:
            where.append("step <= ?")
            params.append(step_max)
        return " AND ".join(where), params

    def telemetry_series(
        self,
        conn: Connection,
        trial_id: int,
        *,
        names: Sequence[str] | None = None,
        step_min: int | None = None,
        step_max: int | None = None,
    ) -> list[tuple[str, int, int, int, int]]:
        """``(name, turn, count, first step, last step)`` of each series, by name and turn."""
        where, params = self._telemetry_where(trial_id, names, step_min, step_max)
        cursor = self.core.execute(
            conn,
            f"SELECT name, turn, COUNT(*), MIN(step), MAX(step) FROM telemetry_points WHERE {where} "
            "GROUP BY name, turn ORDER BY name, turn",
            params,
        )
        return [(name, int(turn), int(n), int(lo), int(hi)) for name, turn, n, lo, hi in cursor.fetchall()]

    def telemetry_points(
        self,
        conn: Connection,
        trial_id: int,
        name: str,
        turn: int,
        *,
        step_min: int | None = None,
        step_max: int | None = None,
    ) -> list[tuple[int, float]]:
        """``(step, value)`` of one series in step order (insertion order among equal steps)."""
        where, params = self._telemetry_where(trial_id, [name], step_min, step_max)
        cursor = self.core.execute(
            conn,
            f"SELECT step, value FROM telemetry_points WHERE {where} AND turn = ? ORDER BY step, id",
            (*params, turn),
        )
        return cursor.fetchall()

    def metric_history(
        self, conn: Connection, trial_id: int, name: str, *, last: bool = False
    ) -> list[tuple[int, float, float | None]]:
        """``(step, value, wall_time)`` of a per-step series (no turn) in step order
        (insertion order among equal steps); ``last``: only its last point."""
        order = "ORDER BY step DESC, id DESC LIMIT 1" if last else "ORDER BY step, id"
        cursor = self.core.execute(
            conn,
            "SELECT step, value, wall_time FROM telemetry_points "
            f"WHERE trial_id = ? AND name = ? AND turn = -1 {order}",
            (trial_id, name),
        )
        return cursor.fetchall()

    def telemetry_buckets(
        self,
        conn: Connection,
        trial_id: int,
        name: str,
        turn: int,
        *,
        first: int,
        last: int,
        buckets: int,
    ) -> list[tuple[int, int, float, float, float, int]]:
        """One series cut into at most ``buckets`` equal-width step ranges from ``first`` to
        ``last`` (each ``ceil((last - first + 1) / buckets)`` steps wide): ``(first step,
        last step, min, max, mean, count)`` of each non-empty bucket, in order."""
        width = max(1, -(-(last - first + 1) // max(1, buckets)))
        where, params = self._telemetry_where(trial_id, [name], first, last)
        cursor = self.core.execute(
            conn,
            f"SELECT (step - ?) / ? AS bucket, MIN(step), MAX(step), MIN(value), MAX(value), AVG(value), COUNT(*) "
            f"FROM telemetry_points WHERE {where} AND turn = ? GROUP BY 1 ORDER BY 1",
            (first, width, *params, turn),
        )
        return [
            (int(lo), int(hi), float(vmin), float(vmax), float(mean), int(n))
            for _, lo, hi, vmin, vmax, mean, n in cursor.fetchall()
        ]

    def telemetry_aggregates(
        self, conn: Connection, trial_id: int, names: Sequence[str], *, turn: int = -1
    ) -> dict[str, tuple[int, float, float, float, float]]:
        """``name -> (count, mean, min, max, mean of squares)`` over the series ``(name, turn)``."""
        where, params = self._telemetry_where(trial_id, names, None, None)
        cursor = self.core.execute(
            conn,
            f"SELECT name, COUNT(*), AVG(value), MIN(value), MAX(value), AVG(value * value) FROM telemetry_points "
            f"WHERE {where} AND turn = ? GROUP BY name",
            (*params, turn),
        )
        return {
            name: (int(n), float(mean), float(lo), float(hi), float(sq))
            for name, n, mean, lo, hi, sq in cursor.fetchall()
        }

    def telemetry_count(self, conn: Connection, trial_id: int) -> tuple[int, int]:
        """``(points, largest point id)`` of the trial: what a telemetry ETag derives from."""
        row = self.core.execute(
            conn, "SELECT COUNT(*), COALESCE(MAX(id), 0) FROM telemetry_points WHERE trial_id = ?", (trial_id,)
        ).fetchone()
        return int(row[0]), int(row[1])
