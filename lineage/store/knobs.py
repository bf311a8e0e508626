"""Knob changes: the ``knob_changes`` rows of trials (``lineage.knobs``).

* :meth:`KnobsSql.write`: a trial's changes, extracted from what it carries, in the
  writer's transaction (every insert path and every update calls it);
* :meth:`KnobsSql.history`: the trials that changed a knob, oldest first, with their
  status and metric;
* :meth:`KnobsSql.tried`: for a set of knobs, the trials that changed each (a new trial's
  "same knob, other value");
* :meth:`KnobsSql.same_patch`: the earlier trials whose patch made the same change
  (``trial_patches``, written with the knob changes);
* :meth:`KnobsSql.backfill`: the rows of trials stored before the table, or all of them
  again under today's rules (``lineage.migrate``).

The extraction itself is pure (``lineage.knobs.extract_changes``): text the writer holds
already, and one indexed read of the parent's ``extra`` only for a trial carrying a
``config`` (the wandb and HF fronts compare configs) or a results file's knob columns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection

from lineage.knobs import KnobChange, extract_changes
from lineage.knobs.columns import column_values, role_columns
from lineage.knobs.extract import parent_side, patch_digest
from lineage.knobs.history import KnobTry
from lineage.store.base import Family

__all__ = ["KnobsSql"]

_COLUMNS = "project_id, seq, knob, name, old_value, new_value, old_number, new_number, factor, source"
_INSERT = f"INSERT INTO knob_changes ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
_INSERT_PATCH = "INSERT INTO trial_patches (project_id, seq, digest) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"


def _tries(where: str, limit: int, order: str = "seq DESC, knob DESC") -> str:
    """The newest ``limit`` tries matching ``where`` (over ``knob_changes``), each joined
    to its trial, newest first: the limit applies inside, so both databases walk the
    index for the rows and look up only their trials (on PostgreSQL, a join first read
    every trial of the project: 0.9 s at 100,000)."""
    return (
        "SELECT k.knob, k.name, k.old_value, k.new_value, k.old_number, k.new_number, k.factor, k.source, "
        "t.seq, t.exp_id, t.status, t.core_metric, t.delta_vs_best FROM (SELECT * FROM knob_changes "
        f"WHERE {where} ORDER BY {order} LIMIT {int(limit)}) k "
        "JOIN trials t ON t.project_id = k.project_id AND t.seq = k.seq ORDER BY k.seq DESC, k.knob DESC"
    )


#: a new trial's knobs that ``same_knob`` looks up at most
MAX_SAME_KNOBS = 16
#: ``conn.info`` key: ``(project_id, seq, changes)`` of the trial this transaction wrote
#: last, so :meth:`KnobsSql.same_knob` answers its own changes without reading them back
#: (a round trip a record on PostgreSQL; none at all for a trial that changed no knob)
_WRITTEN = "lineage.knobs.written"
#: how many rows one history answers at most (the newest are kept)
MAX_HISTORY = 1_000


class KnobsSql(Family):
    """``knob_changes``: written with each trial, read as a knob's history."""

    def changes_of(
        self,
        conn: Connection,
        project_id: int,
        hypothesis: str,
        extra: Mapping[str, Any],
        parent_exp: str,
        roles: frozenset[str] = frozenset(),
    ) -> list[KnobChange]:
        """A trial's changes (``lineage.knobs.extract_changes``); the parent's ``extra``
        is read only when the trial carries a ``config`` or knob columns to compare.
        ``roles``: the project's results-file columns that are no knobs (:func:`roles_of`)."""
        parent_config: Any = None
        parent_columns: dict[str, str] | None = None
        columns = column_values(extra, roles)
        if parent_exp and (isinstance(extra.get("config"), Mapping) or columns):
            row = self.core.execute(
                conn, "SELECT extra FROM trials WHERE project_id = ? AND exp_id = ?", (project_id, parent_exp)
            ).fetchone()
            if row is not None:
                parent_config, parent_columns = parent_side(_json(row[0]), roles)
        return extract_changes(
            hypothesis, extra, parent_config, parent_columns=parent_columns, roles=roles, columns=columns
        )

    def write(
        self,
        conn: Connection,
        project_id: int,
        seq: int,
        hypothesis: str,
        extra: Mapping[str, Any],
        parent_exp: str,
        *,
        replace: bool = False,
        roles: frozenset[str] = frozenset(),
    ) -> None:
        """The changes of the trial at ``seq`` and its patch's digest (``replace``: its old
        rows go first, for an update)."""
        if replace:
            self.core.execute(conn, "DELETE FROM knob_changes WHERE project_id = ? AND seq = ?", (project_id, seq))
            self.core.execute(conn, "DELETE FROM trial_patches WHERE project_id = ? AND seq = ?", (project_id, seq))
        changes = self.changes_of(conn, project_id, hypothesis, extra, parent_exp, roles)
        self.write_rows(conn, [(project_id, seq, changes)])
        digest = digest_of(extra)
        if digest is not None:
            self.write_patches(conn, [(project_id, seq, digest)])
        conn.info[_WRITTEN] = (project_id, seq, changes, digest)

    def write_rows(self, conn: Connection, trials: Iterable[tuple[int, int, Sequence[KnobChange]]]) -> None:
        """``knob_changes`` rows of ``(project_id, seq, changes)``, in one executemany."""
        rows = [
            (
                project_id,
                seq,
                c.knob,
                c.name,
                c.old,
                c.new,
                c.old_number,
                c.new_number,
                c.factor,
                c.source,
            )
            for project_id, seq, changes in trials
            for c in changes
        ]
        if not rows:
            return
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.executemany(self.core.sql(_INSERT), rows)
        finally:
            cursor.close()

    def write_patches(self, conn: Connection, rows: Sequence[tuple[int, int, str]]) -> None:
        """``trial_patches`` rows ``(project_id, seq, digest)``, in one executemany."""
        if not rows:
            return
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.executemany(self.core.sql(_INSERT_PATCH), rows)
        finally:
            cursor.close()

    def tried(
        self, conn: Connection, project_id: int, seq: int, *, limit: int
    ) -> tuple[list[tuple[KnobTry, KnobTry]], list[tuple[str, str]]]:
        """What was tried before the trial at ``seq``: :meth:`same_knob` and
        :meth:`same_patch`, from what this transaction just wrote when it wrote that trial."""
        written = conn.info.pop(_WRITTEN, None)
        if written is None or written[:2] != (project_id, seq):
            written = None
        return (
            self.same_knob(conn, project_id, seq, limit=limit, written=written),
            self.same_patch(conn, project_id, seq, limit=limit, written=written),
        )

    def same_patch(
        self, conn: Connection, project_id: int, seq: int, *, limit: int, written: Any = None
    ) -> list[tuple[str, str]]:
        """The newest ``limit`` earlier trials whose patch made the same change as the trial
        at ``seq``'s (oldest first): ``(exp_id, status)``; none when it has no patch.
        ``written``: what :meth:`write` kept of that trial (no read back)."""
        if written is not None:
            digest = written[3]
        else:
            row = self.core.execute(
                conn, "SELECT digest FROM trial_patches WHERE project_id = ? AND seq = ?", (project_id, seq)
            ).fetchone()
            digest = row[0] if row is not None else None
        if digest is None:
            return []
        rows = self.core.execute(
            conn,
            "SELECT t.exp_id, t.status FROM trial_patches p "
            "JOIN trials t ON t.project_id = p.project_id AND t.seq = p.seq "
            f"WHERE p.project_id = ? AND p.digest = ? AND p.seq < ? ORDER BY p.seq DESC LIMIT {int(limit)}",
            (project_id, digest, seq),
        ).fetchall()
        return [(row[0], row[1]) for row in reversed(rows)]

    def history(
        self, conn: Connection, project_id: int, knobs: Sequence[str], *, limit: int = MAX_HISTORY
    ) -> list[KnobTry]:
        """The trials that changed any of ``knobs``, oldest first (the newest ``limit``)."""
        if not knobs:
            return []
        rows = self.core.execute(
            conn, _tries(f"project_id = ? AND knob IN ({self.core.marks(knobs)})", limit), (project_id, *knobs)
        ).fetchall()
        return [KnobTry(*row) for row in reversed(rows)]

    def newest(self, conn: Connection, project_id: int, *, limit: int) -> list[KnobTry]:
        """The project's newest ``limit`` tries of any knob, oldest first (a walk of the
        primary key ``(project_id, seq, knob)`` from its end)."""
        rows = self.core.execute(
            conn,
            _tries("project_id = ?", limit),
            (project_id,),
        ).fetchall()
        return [KnobTry(*row) for row in reversed(rows)]

    def same_knob(
        self, conn: Connection, project_id: int, seq: int, *, limit: int, written: Any = None
    ) -> list[tuple[KnobTry, KnobTry]]:
        """The newest ``limit`` earlier trials that changed a knob the trial at ``seq``
        changed (oldest first), each with that trial's own change of the knob. Two
        statements, each a bounded index walk: the trial's knobs, then per knob its newest
        ``limit`` earlier tries (one ``UNION ALL``), however long the knob's history."""
        if written is not None:  # just written: no read back
            first: dict[str, KnobChange] = {}
            for change in written[2]:  # the first of a knob is the stored one (ON CONFLICT DO NOTHING)
                first.setdefault(change.knob, change)
            known = sorted(first.values(), key=lambda c: c.knob)[:MAX_SAME_KNOBS]
            mine = {c.knob: (c.knob, c.new, c.new_number, c.factor) for c in known}
        else:
            mine = {
                row[0]: row
                for row in self.core.execute(
                    conn,
                    "SELECT knob, new_value, new_number, factor FROM knob_changes WHERE project_id = ? AND seq = ? "
                    f"ORDER BY knob LIMIT {MAX_SAME_KNOBS}",
                    (project_id, seq),
                ).fetchall()
            }
        if not mine:
            return []
        one = f"SELECT * FROM ({_tries('project_id = ? AND knob = ? AND seq < ?', limit, 'seq DESC')}) AS q"
        rows = self.core.execute(
            conn,
            " UNION ALL ".join([one] * len(mine)),
            [value for knob in mine for value in (project_id, knob, seq)],
        ).fetchall()
        tries = sorted((KnobTry(*row) for row in rows), key=lambda t: (t.seq, t.knob))[-int(limit) :]
        return [(t, KnobTry.setting(t.knob, *mine[t.knob][1:])) for t in tries]

    def knobs(self, conn: Connection, project_id: int) -> list[tuple[str, int]]:
        """Every knob of the project with how many trials changed it, most first."""
        rows = self.core.execute(
            conn,
            "SELECT knob, count(*) FROM knob_changes WHERE project_id = ? GROUP BY knob ORDER BY count(*) DESC, knob",
            (project_id,),
        ).fetchall()
        return [(row[0], int(row[1])) for row in rows]

    def backfill(self, conn: Connection, *, batch: int = 2_000, again: bool = False) -> int:
        """The changes and patch digests of every trial stored before ``knob_changes``
        existed, in the caller's transaction; ``again``: every trial's, read anew under
        today's rules (the old rows go first). How many trials were read."""
        if again:
            self.core.execute(conn, "DELETE FROM knob_changes", ())
            self.core.execute(conn, "DELETE FROM trial_patches", ())
        roles = {
            row[0]: roles_of(_json(row[1]))
            for row in self.core.execute(conn, "SELECT id, settings FROM projects", ()).fetchall()
        }
        done = 0
        last = 0
        while True:
            rows = self.core.execute(
                conn,
                "SELECT t.id, t.project_id, t.seq, t.hypothesis, t.extra, p.extra FROM trials t "
                "LEFT JOIN trials p ON p.project_id = t.project_id AND p.exp_id = t.parent_exp AND t.parent_exp <> '' "
                f"WHERE t.id > ? ORDER BY t.id LIMIT {int(batch)}",
                (last,),
            ).fetchall()
            if not rows:
                return done
            found = []
            digests = []
            for _, project_id, seq, hypothesis, extra, parent_extra in rows:
                mine, theirs = _json(extra), _json(parent_extra)
                if not isinstance(mine, Mapping):
                    continue
                mine_roles = roles.get(project_id, frozenset())
                config, columns = parent_side(theirs, mine_roles) if isinstance(theirs, Mapping) else (None, None)
                found.append(
                    (
                        project_id,
                        seq,
                        extract_changes(hypothesis or "", mine, config, parent_columns=columns, roles=mine_roles),
                    )
                )
                if (digest := digest_of(mine)) is not None:
                    digests.append((project_id, seq, digest))
            self.write_rows(conn, found)
            self.write_patches(conn, digests)
            done += len(rows)
            last = rows[-1][0]


def roles_of(settings: Any) -> frozenset[str]:
    """The columns of a project's results-file layout that are no knobs (``settings``:
    ``Project.settings``, as stored or read)."""
    return role_columns(settings if isinstance(settings, Mapping) else None)


def digest_of(extra: Mapping[str, Any]) -> str | None:
    """The digest of a trial's git patch (``extra._git.patch``), None without one."""
    git = extra.get("_git")
    patch = git.get("patch") if isinstance(git, Mapping) else None
    return patch_digest(patch) if isinstance(patch, str) and patch else None


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value
