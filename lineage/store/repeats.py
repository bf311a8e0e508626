"""Repeats: the ``trial_repeats`` rows, which trials ran the same code (``lineage.noise``).

* :meth:`RepeatsSql.write`: one trial's row, in the writer's transaction (every record,
  the target of a declared rerun, every update); two statements that read nothing back,
  so a pipelined PostgreSQL write sends them without waiting;
* :meth:`RepeatsSql.write_rows` and :meth:`RepeatsSql.regroup`: an import's rows at once;
* :meth:`RepeatsSql.floor`: the project's noise floor, from the rows that have a repeat
  (an index range on ``group_seq``, however long the project);
* :meth:`RepeatsSql.backfill`: the rows of trials stored before the table (``lineage.migrate``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection

from lineage.domain import Project, Trial
from lineage.noise import SCORED_STATUSES, NoiseFloor, code_keys, floor_of, rerun_key
from lineage.store.base import Family

__all__ = ["RepeatsSql", "scored_metric"]

_INSERT = (
    "INSERT INTO trial_repeats (project_id, seq, code_key, rerun_of, metric, group_seq) VALUES (?, ?, ?, ?, ?, "
    "(SELECT min(r.seq) FROM trial_repeats r WHERE r.project_id = ? AND r.code_key = ?))"
)
#: the key's first trial joins its group once a second one shares the key
_MARK_FIRST = (
    "UPDATE trial_repeats SET group_seq = seq WHERE project_id = ? AND code_key = ? AND group_seq IS NULL AND seq < ?"
)


def scored_metric(trial: Trial) -> float | None:
    """The metric a trial adds to its group: its metric when its status scores the code."""
    return trial.core_metric if trial.status.value in SCORED_STATUSES else None


class RepeatsSql(Family):
    """``trial_repeats``: written with each trial, read as the project's noise floor."""

    def keys_of(self, conn: Connection, project_id: int, seq: int) -> tuple[list[str], str | None]:
        """The stored keys of the trial at ``seq`` and its declared ``rerun_of`` (None: none)."""
        rows = self.core.execute(
            conn,
            "SELECT code_key, rerun_of FROM trial_repeats WHERE project_id = ? AND seq = ? ORDER BY code_key",
            (project_id, seq),
        ).fetchall()
        return [row[0] for row in rows], next((row[1] for row in rows if row[1]), None)

    def write(
        self, conn: Connection, project_id: int, seq: int, key: str, metric: float | None, rerun_of: str | None = None
    ) -> None:
        """One key of the trial at ``seq``, joined to the key's group when an earlier
        trial has the key."""
        self.core.execute(conn, _INSERT, (project_id, seq, key, rerun_of, metric, project_id, key))
        self.core.execute(conn, _MARK_FIRST, (project_id, key, seq))

    def write_trial(self, conn: Connection, project_id: int, trial: Trial, *, replace: bool = False) -> bool:
        """The keys of a stored ``trial`` from what it carries (``replace``: after an
        update; a declared rerun keeps its keys, whatever the update changed). Whether
        any row changed (if not, the project's noise floor did not move)."""
        seq = int(trial.seq or 0)
        stored: list[str] = []
        if replace:
            stored, declared = self.keys_of(conn, project_id, seq)
            if declared:
                self.core.execute(
                    conn,
                    "UPDATE trial_repeats SET metric = ? WHERE project_id = ? AND seq = ?",
                    (scored_metric(trial), project_id, seq),
                )
                return True
            if stored:
                self.core.execute(conn, "DELETE FROM trial_repeats WHERE project_id = ? AND seq = ?", (project_id, seq))
        keys = code_keys(trial.status.value, trial.extra)
        for key in keys:
            self.write(conn, project_id, seq, key, scored_metric(trial))
        return bool(keys or stored)

    def write_rerun(self, conn: Connection, project_id: int, trial: Trial, target: Trial) -> None:
        """The key of a new ``trial`` that declared itself a rerun of ``target``: one of
        the target's (the target gets ``rerun:<exp_id>`` when it has none)."""
        target_seq = int(target.seq or 0)
        stored, _ = self.keys_of(conn, project_id, target_seq)
        if stored:
            key = stored[0]
        else:
            key = rerun_key(target.exp_id)
            self.write(conn, project_id, target_seq, key, scored_metric(target))
        self.write(conn, project_id, int(trial.seq or 0), key, scored_metric(trial), rerun_of=target.exp_id)

    def write_rows(
        self, conn: Connection, project_id: int, trials: Iterable[tuple[int, str, float | None, Sequence[str]]]
    ) -> None:
        """The keys of stored trials given as ``(seq, status, core_metric, code_keys)`` (an
        import's; :func:`~lineage.noise.code_keys`) at once, then their groups (:meth:`regroup`)."""
        rows = [
            (project_id, seq, key, None, metric if status in SCORED_STATUSES else None)
            for seq, status, metric, keys in trials
            for key in keys
        ]
        self._insert_rows(conn, rows)
        self.regroup(conn, project_id, sorted({row[2] for row in rows}))

    def _insert_rows(self, conn: Connection, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.executemany(
                self.core.sql(
                    "INSERT INTO trial_repeats (project_id, seq, code_key, rerun_of, metric) VALUES (?, ?, ?, ?, ?)"
                ),
                rows,
            )
        finally:
            cursor.close()

    def regroup(self, conn: Connection, project_id: int, keys: Sequence[str]) -> None:
        """Set ``group_seq`` of the rows of ``keys`` that share their key with another row."""
        for first in range(0, len(keys), 500):
            chunk = list(keys[first : first + 500])
            self.core.execute(
                conn,
                "UPDATE trial_repeats SET group_seq = (SELECT min(r.seq) FROM trial_repeats r "
                "WHERE r.project_id = trial_repeats.project_id AND r.code_key = trial_repeats.code_key) "
                f"WHERE project_id = ? AND group_seq IS NULL AND code_key IN ({self.core.marks(chunk)}) "
                "AND (SELECT count(*) FROM trial_repeats r WHERE r.project_id = trial_repeats.project_id "
                "AND r.code_key = trial_repeats.code_key) > 1",
                (project_id, *chunk),
            )

    def groups(self, conn: Connection, project_id: int) -> list[list[float]]:
        """The scored metrics of each group of repeats: the trials linked by a shared key,
        directly or through others, each trial once (in seq order within a group)."""
        rows = self.core.execute(
            conn,
            "SELECT code_key, seq, metric FROM trial_repeats WHERE project_id = ? AND group_seq IS NOT NULL "
            "ORDER BY seq, code_key",
            (project_id,),
        ).fetchall()
        return linked_groups((key, int(seq), metric) for key, seq, metric in rows)

    def floor(self, conn: Connection, project: Project) -> NoiseFloor:
        """The project's noise floor (``lineage.noise.floor_of``): its settings and its reruns."""
        return floor_of(project.settings, self.groups(conn, project.stored_id))

    def backfill(self, conn: Connection, *, batch: int = 2_000) -> int:
        """The keys of every trial stored before ``trial_repeats`` existed, in the
        caller's transaction; how many trials were read."""
        done = last = 0
        keys: dict[int, set[str]] = {}
        while True:
            rows = self.core.execute(
                conn,
                "SELECT id, project_id, seq, status, core_metric, extra FROM trials "
                f"WHERE id > ? ORDER BY id LIMIT {int(batch)}",
                (last,),
            ).fetchall()
            if not rows:
                break
            found = []
            for _, project_id, seq, status, metric, extra in rows:
                mine = _json(extra)
                for key in code_keys(status, mine) if isinstance(mine, Mapping) else ():
                    found.append((project_id, seq, key, None, metric if status in SCORED_STATUSES else None))
                    keys.setdefault(project_id, set()).add(key)
            self._insert_rows(conn, found)
            done += len(rows)
            last = rows[-1][0]
        for project_id, project_keys in keys.items():
            self.regroup(conn, project_id, sorted(project_keys))
        return done


def linked_groups(rows: Iterable[tuple[str, int, float | None]]) -> list[list[float]]:
    """The metrics of the trials ``(key, seq, metric)`` rows link (a union of the trials
    sharing a key), each trial once; trials without a metric count in no group."""
    parent: dict[int, int] = {}

    def root(seq: int) -> int:
        while parent[seq] != seq:
            parent[seq] = parent[parent[seq]]
            seq = parent[seq]
        return seq

    first_of: dict[str, int] = {}
    metrics: dict[int, float | None] = {}
    for key, seq, metric in rows:
        parent.setdefault(seq, seq)
        metrics[seq] = metric
        if key in first_of:
            a, b = root(first_of[key]), root(seq)
            if a != b:
                parent[max(a, b)] = min(a, b)
        else:
            first_of[key] = seq
    found: dict[int, list[float]] = {}
    for seq in sorted(metrics):
        metric = metrics[seq]
        if metric is not None:
            found.setdefault(root(seq), []).append(float(metric))
    return list(found.values())


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value
