"""Which columns a project has, and one column per trial for the knob view:
:class:`ColumnsSql`, ``Store.columns`` of :class:`lineage.store.Store`.

Methods: ``field_presence`` (one aggregate over the project's newest trials: which
trial fields hold a value), ``extra_keys`` (the ``extra`` keys of the newest trials,
with whether every value is a number), ``knob_rows`` (a column's value per trial, newest
first, read in SQL: a trial field, an ``extra`` key or a telemetry summary),
``telemetry_trial_ids`` (the newest trials that have telemetry, one index seek each),
``recent_metrics`` (the metric of the newest scored trials: what sets the precision of
an agent's answers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from lineage.domain import Project
from lineage.store.base import Family

#: The trial fields whose emptiness ``field_presence`` looks at: text fields are empty
#: when ``''``, the others when NULL.
TEXT_FIELDS = (
    "timestamp",
    "specialist",
    "parent_exp",
    "baseline_exp",
    "domain",
    "hypothesis",
    "expected_delta",
    "job_name",
    "snapshot_path",
    "notes",
)
NUMBER_FIELDS = (
    "core_metric",
    "delta_vs_best",
    "train_s",
    "total_s",
    "ig_clip_scale_mean",
    "ig_clip_scale_std",
    "ig_clip_scale_min",
    "ig_clip_scale_max",
    "ig_clip_scale_frac_low",
    "ig_clip_scale_frac_high",
)
#: The telemetry summaries ``knob_rows`` computes per trial (one index range each).
TELEMETRY_SUMMARIES = {
    "last": "SELECT value FROM telemetry_points p WHERE p.trial_id = t.id AND p.name = ? AND p.turn = -1 "
    "ORDER BY p.step DESC LIMIT 1",
    "first": "SELECT value FROM telemetry_points p WHERE p.trial_id = t.id AND p.name = ? AND p.turn = -1 "
    "ORDER BY p.step LIMIT 1",
    "min": "SELECT MIN(value) FROM telemetry_points p WHERE p.trial_id = t.id AND p.name = ? AND p.turn = -1",
    "max": "SELECT MAX(value) FROM telemetry_points p WHERE p.trial_id = t.id AND p.name = ? AND p.turn = -1",
    "mean": "SELECT AVG(value) FROM telemetry_points p WHERE p.trial_id = t.id AND p.name = ? AND p.turn = -1",
}


#: Up to this many trials with telemetry, a telemetry knob reads just them.
TELEMETRY_FEW = 2_000


class ColumnsSql(Family):
    """field_presence, extra_keys, knob_rows, telemetry_trial_ids."""

    def field_presence(self, conn: Connection, project: Project, *, sample: int) -> dict[str, int]:
        """Per trial field, how many of the project's newest ``sample`` trials hold a value
        in it (text: not ``''``; numbers: not NULL); ``val_bpb`` counts only values that
        differ from the metric (a mirror of the metric is no column of its own); ``""`` is
        the trial count. One aggregate over one index range (a whole 100,000-trial
        project would cost ~0.1 s a page)."""
        parts = [f"SUM(CASE WHEN {name} <> '' THEN 1 ELSE 0 END)" for name in TEXT_FIELDS]
        parts += [f"COUNT({name})" for name in NUMBER_FIELDS]
        parts.append(
            "SUM(CASE WHEN val_bpb IS NOT NULL AND (core_metric IS NULL OR val_bpb <> core_metric) THEN 1 ELSE 0 END)"
        )
        names = ", ".join((*TEXT_FIELDS, *NUMBER_FIELDS, "val_bpb"))
        row = self.core.execute(
            conn,
            f"SELECT COUNT(*), {', '.join(parts)} FROM (SELECT {names} FROM trials "
            "WHERE project_id = ? ORDER BY seq DESC LIMIT ?) s",
            (project.id, sample),
        ).fetchone()
        labels = ("", *TEXT_FIELDS, *NUMBER_FIELDS, "val_bpb")
        return {name: int(value or 0) for name, value in zip(labels, row)}

    def extra_keys(self, conn: Connection, project: Project, *, sample: int, limit: int) -> list[tuple[str, bool, int]]:
        """``(key, every value a number, trials with it)`` of the keys of ``extra`` among the
        newest ``sample`` trials (JSON nulls and the ledger's ``_`` keys do not count), the
        ``limit`` most common first: a trial with thousands of keys costs one bounded read."""
        if self.sqlite:
            sql = (
                "SELECT j.key, MIN(CASE WHEN j.type IN ('integer', 'real') THEN 1 ELSE 0 END), COUNT(*) "
                "FROM (SELECT extra FROM trials WHERE project_id = ? ORDER BY seq DESC LIMIT ?) s, "
                "json_each(s.extra) j WHERE j.type <> 'null' AND substr(j.key, 1, 1) <> '_' "
                "GROUP BY j.key ORDER BY COUNT(*) DESC, j.key LIMIT ?"
            )
        else:
            sql = (
                "SELECT k, MIN(CASE WHEN json_typeof(s.extra -> k) = 'number' THEN 1 ELSE 0 END), COUNT(*) "
                "FROM (SELECT extra FROM trials WHERE project_id = ? ORDER BY seq DESC LIMIT ?) s "
                "CROSS JOIN LATERAL json_object_keys(CASE WHEN json_typeof(s.extra) = 'object' THEN s.extra "
                "ELSE '{}'::json END) k WHERE json_typeof(s.extra -> k) <> 'null' AND left(k, 1) <> '_' "
                'GROUP BY k ORDER BY COUNT(*) DESC, k COLLATE "C" LIMIT ?'
            )
        rows = self.core.execute(conn, sql, (project.id, sample, limit)).fetchall()
        out = [(str(key), bool(numeric), int(count)) for key, numeric, count in rows]
        out.sort(key=lambda item: (-item[2], item[0]))
        return out

    def _value_sql(self, source: str, name: str, summary: str | None) -> tuple[str, list[Any]]:
        """The SQL expression (over ``trials t``) of one column, and its parameters."""
        if source == "field":
            return f"t.{name}", []
        if source == "extra":
            if self.sqlite:
                return "json_extract(t.extra, ?)", ['$."' + name.replace('"', '\\"') + '"']
            return "(t.extra ->> ?)", [name]
        if source == "telemetry":
            return f"({TELEMETRY_SUMMARIES[summary or 'last']})", [name]
        if source == "knob":  # one primary-key seek a trial: (project_id, seq, knob)
            return (
                "(SELECT COALESCE(CAST(k.new_number AS TEXT), k.new_value) FROM knob_changes k "
                "WHERE k.project_id = t.project_id AND k.seq = t.seq AND k.knob = ?)"
            ), [name]
        raise ValueError(f"unknown column source {source!r}")

    def knob_rows(
        self,
        conn: Connection,
        project: Project,
        columns: Sequence[tuple[str, str, str | None]],
        *,
        limit: int,
        exp_ids: Sequence[str] | None = None,
        every: bool = False,
    ) -> list[tuple[Any, ...]]:
        """``(exp_id, seq, status, core_metric, value, ..., chain_depth)`` of the newest
        ``limit`` trials that have a value in the first of ``columns`` (``every``: the
        newest ``limit`` trials, with a value or not) (``(source, name, summary)``: source
        ``field``, ``extra``, ``knob`` or ``telemetry``), newest first. Values come as the
        database gives them (an ``extra`` value as text on PostgreSQL, as its JSON type
        on SQLite)."""
        exprs, params = [], []
        for source, name, summary in columns:
            expr, extra = self._value_sql(source, name, summary)
            exprs.append(expr)
            params.extend(extra)
        values = ", ".join([*(f"{expr} AS v{i}" for i, expr in enumerate(exprs)), "t.chain_depth AS depth"])
        where = "t.project_id = ?"
        where_params: list[Any] = [project.id]
        # a few named trials: sorted after reading them ("+seq"), where walking the
        # project's seq index to skip the sort would read every trial (0.1 s at 100,000)
        order = "seq DESC"
        if exp_ids is not None:
            if not exp_ids:
                return []
            where += f" AND t.exp_id IN ({self.core.marks(exp_ids)})"
            where_params += list(exp_ids)
            order = "+seq DESC"
        elif columns[0][0] == "telemetry" and not every:
            # only trials with telemetry can have the value: when they are few, read just them
            # (else the newest trials are walked until ``limit`` have it, which is soon)
            with_telemetry = self.telemetry_trial_ids(conn, project, limit=TELEMETRY_FEW)
            if len(with_telemetry) < TELEMETRY_FEW:
                if not with_telemetry:
                    return []
                # "+t.project_id": rowid look-ups, not a walk of the project's index
                where = f"t.id IN ({self.core.marks(with_telemetry)}) AND +t.project_id = ?"
                where_params = [*with_telemetry, project.id]
                order = "+seq DESC"
        if every:
            sql = (
                f"SELECT t.exp_id, t.seq, t.status, t.core_metric, {values} FROM trials t "
                f"WHERE {where} ORDER BY {order.replace('seq', 't.seq')} LIMIT ?"
            )
        elif columns[0][0] == "field":
            sql = (
                f"SELECT t.exp_id, t.seq, t.status, t.core_metric, {values} FROM trials t "
                f"WHERE {where} AND {exprs[0]} IS NOT NULL ORDER BY {order.replace('seq', 't.seq')} LIMIT ?"
            )
        else:  # the first value is an expression with parameters: filter on it outside
            sql = (
                f"SELECT * FROM (SELECT t.exp_id, t.seq, t.status, t.core_metric, {values} FROM trials t "
                f"WHERE {where}) k WHERE k.v0 IS NOT NULL ORDER BY {order.replace('seq', 'k.seq')} LIMIT ?"
            )
        return [tuple(row) for row in self.core.execute(conn, sql, (*params, *where_params, limit)).fetchall()]

    def telemetry_trial_ids(self, conn: Connection, project: Project, *, limit: int) -> list[int]:
        """Row ids of up to ``limit`` of the project's newest trials with telemetry: one
        index seek per trial found, walking the telemetry index down from the top."""
        ids: list[int] = []
        # the first and last trial by seq (ids grow with seq): one seek each, where MAX(id)
        # read a whole index range of the project (18 ms for 100,000 trials on SQLite)
        ends = "SELECT id FROM trials WHERE project_id = ? ORDER BY seq {} LIMIT 1"
        top_row = self.core.execute(conn, ends.format("DESC"), (project.id,)).fetchone()
        if top_row is None:
            return ids
        top = top_row[0]
        bottom = self.core.execute(conn, ends.format("ASC"), (project.id,)).fetchone()[0]
        current = int(top) + 1
        seek = "SELECT MAX(trial_id) FROM telemetry_points WHERE trial_id < ? AND trial_id >= ?"
        mine = "SELECT 1 FROM trials WHERE id = ? AND project_id = ?"
        for _ in range(limit * 4):  # trials of other projects between ours are skipped, within bounds
            found = self.core.execute(conn, seek, (current, bottom)).fetchone()[0]
            if found is None or len(ids) >= limit:
                break
            current = int(found)
            if self.core.execute(conn, mine, (current, project.id)).fetchone() is not None:
                ids.append(current)
        return ids

    def recent_metrics(self, conn: Connection, project_id: int, limit: int) -> list[float]:
        """``core_metric`` of the project's newest ``limit`` scored trials, newest first."""
        rows = self.core.execute(
            conn,
            "SELECT core_metric FROM trials WHERE project_id = ? AND core_metric IS NOT NULL "
            f"ORDER BY seq DESC LIMIT {int(limit)}",
            (project_id,),
        ).fetchall()
        return [float(row[0]) for row in rows]
