"""The metric explorer's reads: :class:`ExploreSql`, ``Store.explore`` of :class:`lineage.store.Store`.

The selected trials with their row ids, and telemetry read by index seeks on
``(trial_id, name, turn, step)`` wherever it can be, so a view costs about trials x
buckets seeks however long the series are; only the exact rule (``lineage.browse.explore``'s
doc) aggregates every point, under a budget.

Methods: ``explore_trials`` (the trials table's filters, ``StoreCore.filter_sql``; uses
``TrialsSql.trial``), ``series_turns``, ``explore_series``, ``telemetry_points_at_most``,
``explore_cells_exact``, ``explore_cells_sampled``, ``exp_ids_with_telemetry``,
``telemetry_name_counts``, ``telemetry_names`` (with ``_first``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection

from lineage.domain import Project, Trial
from lineage.store.base import _COLUMN_LIST, Family, StoreCore, trial_from_row
from lineage.store.trials import TrialsSql


class ExploreSql(Family):
    """The explorer's reads: trials by filter and subtree, series, buckets, names."""

    def __init__(self, core: StoreCore, *, trials: TrialsSql) -> None:
        super().__init__(core)
        self.trials = trials  # ``subtree_of`` is resolved through ``trials``

    def explore_trials(
        self,
        conn: Connection,
        project: Project,
        *,
        filters: Mapping[str, Any],
        exp_ids: Sequence[str] | None,
        subtree_of: str | None,
        limit: int,
    ) -> tuple[list[tuple[int, Trial]], int]:
        """``([(row id, trial)], matched)``: the last ``limit`` trials by seq (oldest first)
        matching the trials-table ``filters``, within ``exp_ids`` when given and within the
        subtree under ``subtree_of`` (that trial and its descendants) when given."""
        where, params = self.core.filter_sql(project, **filters)
        prefix = ""
        if exp_ids is not None:
            if not exp_ids:
                return [], 0
            where += f" AND exp_id IN ({self.core.marks(exp_ids)})"
            params.extend(exp_ids)
        if subtree_of is not None:
            subtree_of = self.trials.trial(conn, project, subtree_of).exp_id
            prefix = (
                "WITH RECURSIVE sub(exp_id) AS (SELECT exp_id FROM trials WHERE project_id = ? AND exp_id = ? "
                "UNION SELECT t.exp_id FROM trials t JOIN sub ON t.project_id = ? AND t.parent_exp = sub.exp_id) "
            )
            params = [project.id, subtree_of, project.id, *params]
            where += " AND exp_id IN (SELECT exp_id FROM sub)"
        matched = int(
            self.core.execute(conn, f"{prefix}SELECT COUNT(*) FROM trials WHERE {where}", params).fetchone()[0]
        )
        cursor = self.core.execute(
            conn,
            f"{prefix}SELECT id, {_COLUMN_LIST} FROM trials WHERE {where} ORDER BY seq DESC LIMIT ?",
            (*params, limit),
        )
        rows = [(int(row[0]), trial_from_row(row[1:])) for row in cursor.fetchall()]
        rows.reverse()
        return rows, matched

    def _first(self, conn: Connection, sql: str, params: Sequence[Any]) -> Any:
        row = self.core.execute(conn, sql, params).fetchone()
        return None if row is None else row[0]

    def series_turns(self, conn: Connection, trial_id: int, name: str) -> list[int]:
        """The per-turn turns (>= 0) of series ``name`` of a trial: one seek per turn."""
        turns: list[int] = []
        sql = "SELECT MIN(turn) FROM telemetry_points WHERE trial_id = ? AND name = ? AND turn > ?"
        current = -1
        while (found := self._first(conn, sql, (trial_id, name, current))) is not None:
            turns.append(int(found))
            current = int(found)
        return turns

    def explore_series(
        self,
        conn: Connection,
        trial_ids: Sequence[int],
        name: str,
        *,
        turn: int | None,
        per_turn: bool,
        step_min: int | None,
        step_max: int | None,
    ) -> list[tuple[int, int, int, int, float | None]]:
        """``(trial id, turn, first step, last step, wall_time of the first point)`` of each
        series ``name`` of the trials with points in the step range: the per-turn series
        (``per_turn``) or the one of ``turn`` (None: not per turn, -1)."""
        bounds, extra = "", []
        if step_min is not None:
            bounds += " AND step >= ?"
            extra.append(step_min)
        if step_max is not None:
            bounds += " AND step <= ?"
            extra.append(step_max)
        key = "trial_id = ? AND name = ? AND turn = ?"
        out = []
        for trial_id in trial_ids:
            turns = self.series_turns(conn, trial_id, name) if per_turn else [-1 if turn is None else turn]
            for one in turns:
                params = (trial_id, name, one, *extra)
                first = self._first(conn, f"SELECT MIN(step) FROM telemetry_points WHERE {key}{bounds}", params)
                if first is None:
                    continue
                last = self._first(conn, f"SELECT MAX(step) FROM telemetry_points WHERE {key}{bounds}", params)
                wall = self._first(
                    conn, f"SELECT wall_time FROM telemetry_points WHERE {key} ORDER BY step, id LIMIT 1", params[:3]
                )
                out.append((trial_id, one, int(first), int(last), None if wall is None else float(wall)))
        return out

    def telemetry_points_at_most(
        self, conn: Connection, series: Sequence[tuple[int, int]], name: str, lo: int, hi: int, budget: int
    ) -> bool:
        """Whether the series ``(trial id, turn)`` of ``name`` hold at most ``budget`` points
        in ``[lo, hi]`` together; reads at most ``budget + 1`` index entries."""
        left = budget
        for trial_id, turn in series:
            found = self._first(
                conn,
                "SELECT COUNT(*) FROM (SELECT 1 FROM telemetry_points WHERE trial_id = ? AND name = ? AND turn = ? "
                "AND step >= ? AND step <= ? LIMIT ?) AS capped",
                (trial_id, name, turn, lo, hi, left + 1),
            )
            left -= int(found)
            if left < 0:
                return False
        return True

    def explore_cells_exact(
        self,
        conn: Connection,
        trial_ids: Sequence[int],
        name: str,
        *,
        turn: int | None,
        per_turn: bool,
        lo: int,
        hi: int,
        width: int,
    ) -> list[tuple[int, int, int, float, float | None, int]]:
        """``(trial id, turn, bucket, mean value, mean wall_time, points)`` of each non-empty
        bucket ``(step - lo) // width`` of each series, in one GROUP BY."""
        if not trial_ids:
            return []
        turn_sql, turn_params = ("turn >= 0", []) if per_turn else ("turn = ?", [-1 if turn is None else turn])
        cursor = self.core.execute(
            conn,
            f"SELECT trial_id, turn, (step - ?) / ? AS bucket, AVG(value), AVG(wall_time), COUNT(*) "
            f"FROM telemetry_points WHERE trial_id IN ({self.core.marks(trial_ids)}) AND name = ? AND {turn_sql} "
            "AND step >= ? AND step <= ? GROUP BY trial_id, turn, bucket",
            (lo, width, *trial_ids, name, *turn_params, lo, hi),
        )
        return [
            (int(t), int(u), int(b), float(v), None if w is None else float(w), int(n))
            for t, u, b, v, w, n in cursor.fetchall()
        ]

    def explore_cells_sampled(
        self, conn: Connection, series: Sequence[tuple[int, int]], name: str, *, lo: int, width: int, count: int
    ) -> list[tuple[int, int, int, float, float | None]]:
        """``(trial id, turn, bucket, value, wall_time)``: each series' first point (by step,
        then insertion) in each of the ``count`` buckets ``[lo + i*width, lo + (i+1)*width)``,
        one index seek per series and bucket."""
        if not series:
            return []
        keys = ", ".join("(?, ?)" for _ in series)
        sql = f"""WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i < ?),
            s(trial_id, turn) AS (VALUES {keys})
            SELECT c.trial_id, c.turn, c.i, p.value, p.wall_time FROM (
                SELECT s.trial_id, s.turn, g.i, (
                    SELECT q.id FROM telemetry_points q WHERE q.trial_id = s.trial_id AND q.name = ? AND q.turn = s.turn
                    AND q.step >= ? + g.i * ? AND q.step < ? + (g.i + 1) * ? ORDER BY q.step, q.id LIMIT 1) AS pid
                FROM s CROSS JOIN g) c
            JOIN telemetry_points p ON p.id = c.pid"""
        params = [count - 1, *(v for key in series for v in key), name, lo, width, lo, width]
        cursor = self.core.execute(conn, sql, params)
        return [
            (int(t), int(u), int(i), float(v), None if w is None else float(w)) for t, u, i, v, w in cursor.fetchall()
        ]

    def exp_ids_with_telemetry(self, conn: Connection, project: Project, *, cap: int = 5_000) -> list[str]:
        """The exp ids of the project's trials that have telemetry: one index seek per trial
        with telemetry (of any project), newest row first, ``cap`` seeks at most."""
        found: list[int] = []
        current: int | None = None
        while len(found) < cap:
            if current is None:
                row = self._first(conn, "SELECT MAX(trial_id) FROM telemetry_points", ())
            else:
                row = self._first(conn, "SELECT MAX(trial_id) FROM telemetry_points WHERE trial_id < ?", (current,))
            if row is None:
                break
            current = int(row)
            found.append(current)
        out: list[str] = []
        for start in range(0, len(found), 500):
            chunk = found[start : start + 500]
            # "+project_id": rowid look-ups (SQLite's planner would scan the project's
            # (project_id, exp_id) index otherwise: 9 ms for 100,000 trials)
            cursor = self.core.execute(
                conn,
                f"SELECT exp_id FROM trials WHERE id IN ({self.core.marks(chunk)}) AND +project_id = ?",
                (*chunk, project.id),
            )
            out.extend(str(r[0]) for r in cursor.fetchall())
        return out

    def telemetry_name_counts(self, conn: Connection, trial_ids: Sequence[int]) -> dict[str, int]:
        """How many of the trials have each telemetry name: one seek per trial and name."""
        counts: dict[str, int] = {}
        sql = "SELECT MIN(name) FROM telemetry_points WHERE trial_id = ? AND name > ?"
        for trial_id in trial_ids:
            current = ""
            while (found := self._first(conn, sql, (trial_id, current))) is not None:
                counts[found] = counts.get(found, 0) + 1
                current = found
        return counts

    def telemetry_names(self, conn: Connection, trial_ids: Sequence[int]) -> list[str]:
        """The distinct telemetry names of the trials, sorted: one seek per trial and name."""
        names: set[str] = set()
        sql = "SELECT MIN(name) FROM telemetry_points WHERE trial_id = ? AND name > ?"
        for trial_id in trial_ids:
            current = ""
            while (found := self._first(conn, sql, (trial_id, current))) is not None:
                names.add(found)
                current = found
        return sorted(names)
