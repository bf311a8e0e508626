"""The project's notebook: :class:`NotesSql`, ``Store.notes`` of :class:`lineage.store.Store`.

The rows of ``project_notes`` (``lineage.notebook`` owns the rules): ``insert_note``,
``note_rows`` (a project's notes, newest first, a page at a time) and ``note_count``; and
the two reads the rules need about trials: ``cited`` (the stored ids, status and seq of
the trials a note names) and ``keeps_after`` (the kept trials after a note, oldest first:
the trials that may contradict it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from lineage.store.base import Family

__all__ = ["NoteRow", "NotesSql"]

#: ``(id, text, cites, author, after_seq, created_at)``, ``cites`` a list of exp_ids
NoteRow = tuple[int, str, list[str], str, int | None, Any]

_SELECT = "SELECT id, text, cites, author, after_seq, created_at FROM project_notes"


def _row(row: Sequence[Any]) -> NoteRow:
    id_, text, cites, author, after_seq, created = row
    found = json.loads(cites) if isinstance(cites, str) else cites
    return (
        int(id_),
        text,
        [str(c) for c in found or ()],
        author or "",
        None if after_seq is None else int(after_seq),
        created,
    )


class NotesSql(Family):
    """Notes in, notes out, and the trials they cite."""

    def insert_note(
        self, conn: Connection, project_id: int, *, text: str, cites: Sequence[str], author: str, after_seq: int | None
    ) -> NoteRow:
        """Store one note; the stored row."""
        mark = "?" if self.core.sqlite else "CAST(? AS json)"
        cursor = self.core.execute(
            conn,
            f"INSERT INTO project_notes (project_id, text, cites, author, after_seq, created_at) "
            f"VALUES (?, ?, {mark}, ?, ?, ?) RETURNING id, text, cites, author, after_seq, created_at",
            (project_id, text, json.dumps(list(cites)), author, after_seq, self.core.now()),
        )
        return _row(cursor.fetchone())

    def note_rows(
        self, conn: Connection, project_id: int, *, before_id: int | None = None, limit: int = 50
    ) -> list[NoteRow]:
        """A project's notes, newest first (before ``before_id``: the next page)."""
        where, params = "project_id = ?", [project_id]
        if before_id is not None:
            where += " AND id < ?"
            params.append(before_id)
        cursor = self.core.execute(conn, f"{_SELECT} WHERE {where} ORDER BY id DESC LIMIT {int(limit)}", params)
        return [_row(row) for row in cursor.fetchall()]

    def note_count(self, conn: Connection, project_id: int) -> int:
        return int(
            self.core.execute(
                conn, "SELECT count(*) FROM project_notes WHERE project_id = ?", (project_id,)
            ).fetchone()[0]
        )

    def cited(self, conn: Connection, project_id: int, exp_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """``{exp_id: (status, seq)}`` of the stored trials among ``exp_ids``."""
        if not exp_ids:
            return {}
        rows = self.core.execute(
            conn,
            f"SELECT exp_id, status, seq FROM trials WHERE project_id = ? AND exp_id IN ({self.core.marks(exp_ids)})",
            (project_id, *exp_ids),
        ).fetchall()
        return {row[0]: (row[1], int(row[2])) for row in rows}

    def keeps_after(self, conn: Connection, project_id: int, seq: int, *, limit: int) -> list[tuple[int, str, str]]:
        """``(seq, exp_id, hypothesis)`` of the first ``limit`` kept trials after ``seq``."""
        rows = self.core.execute(
            conn,
            "SELECT seq, exp_id, hypothesis FROM trials WHERE project_id = ? AND seq > ? AND status = 'keep' "
            f"ORDER BY seq LIMIT {int(limit)}",
            (project_id, seq),
        ).fetchall()
        return [(int(row[0]), row[1], row[2] or "") for row in rows]

    def last_seq(self, conn: Connection, project_id: int) -> int | None:
        """The project's newest trial's seq (None: no trial yet)."""
        row = self.core.execute(conn, "SELECT max(seq) FROM trials WHERE project_id = ?", (project_id,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])
