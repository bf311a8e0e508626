"""Stored chain links: :class:`ChainSql`, ``Store.chain`` of :class:`lineage.store.Store`.

Each trial row holds ``chain_depth``, the length of the chain ending at it (a trial
without a parent in the project is 1, any other its parent's + 1), and ``chain_skip``,
the exp_id of its ancestor at depth ``(depth - 1) // CHAIN_SKIP * CHAIN_SKIP`` ('' in the
first block). With them a page reads the part of a 20,000-step chain it shows: the
chain's length is one look-up and any depth of it is at most ``depth / CHAIN_SKIP +
CHAIN_SKIP`` index look-ups away (:meth:`ChainSql.ancestor_at`), where a walk takes
``depth``.

Writes keep them exact in the transaction of the write: ``link_after`` gives a new
trial's pair from its parent's (``insert_trial``, ``bulk_insert``), :meth:`relink`
recomputes a subtree from the stored parent (a re-parented trial, or a trial that a new
one adopts: a stored trial naming the newcomer as parent) and ``set_links`` writes pairs
an import computed itself. Depth 0 means "unknown" (only a trial on a parent cycle, which
no write path lets in, could have it; migration 0010): readers walk then.

Methods: ``link_after``, ``relink``, ``set_links``, ``chain_links``, ``chain_depth``,
``ancestor_at``, ``chain_ids``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection

from lineage.domain import Project
from lineage.store.base import Family

#: A trial's skip pointer jumps to the last multiple of this depth below it.
CHAIN_SKIP = 64


def next_link(parent_exp: str, parent: tuple[int, str] | None) -> tuple[int, str]:
    """``(depth, skip)`` of a trial whose parent ``parent_exp`` has the stored pair
    ``parent`` (None: no parent, or not in the project)."""
    if not parent_exp or parent is None:
        return 1, ""
    depth, skip = parent
    if depth <= 0:  # the parent's chain is not known (a cycle): neither is this one
        return 0, ""
    return depth + 1, parent_exp if depth % CHAIN_SKIP == 0 else skip


class ChainSql(Family):
    """The stored chain links of trials: kept on write, read by the pages."""

    def link_after(self, conn: Connection, project: Project, parent_exp: str) -> tuple[int, str]:
        """``(chain_depth, chain_skip)`` of a new trial with parent ``parent_exp``."""
        if not parent_exp:
            return 1, ""
        return self.fetch_link(parent_exp, self.link_cursor(conn, project, parent_exp))

    def link_cursor(self, conn: Connection, project: Project, parent_exp: str) -> Any:
        """:meth:`link_after`'s statement, sent; its row not read yet (:meth:`fetch_link`)."""
        return self.core.execute(
            conn,
            "SELECT chain_depth, chain_skip FROM trials WHERE project_id = ? AND exp_id = ?",
            (project.id, parent_exp),
        )

    @staticmethod
    def fetch_link(parent_exp: str, cursor: Any) -> tuple[int, str]:
        row = cursor.fetchone()
        return next_link(parent_exp, tuple(row) if row else None)

    def relink(self, conn: Connection, project: Project, exp_id: str) -> None:
        """Recompute the links of ``exp_id`` (from its parent's stored ones) and of every
        trial below it, in one statement: after a re-parenting, or when a new trial
        becomes the parent of stored ones. The write paths reject parent cycles first, so
        the descent ends."""
        k = CHAIN_SKIP
        parent_depth = "COALESCE(p.chain_depth, 0)"
        sql = f"""WITH RECURSIVE link(id, exp_id, depth, skip) AS (
                SELECT t.id, t.exp_id, {parent_depth} + 1,
                       CASE WHEN {parent_depth} - {parent_depth} / {k} * {k} = 0 THEN COALESCE(p.exp_id, '')
                            ELSE p.chain_skip END
                FROM trials t LEFT JOIN trials p ON p.project_id = t.project_id AND p.exp_id = t.parent_exp
                WHERE t.project_id = ? AND t.exp_id = ?
                UNION ALL
                SELECT c.id, c.exp_id, l.depth + 1,
                       CASE WHEN l.depth - l.depth / {k} * {k} = 0 THEN l.exp_id ELSE l.skip END
                FROM link l JOIN trials c ON c.project_id = ? AND c.parent_exp = l.exp_id)
            UPDATE trials SET chain_depth = link.depth, chain_skip = link.skip FROM link
            WHERE trials.id = link.id AND (trials.chain_depth <> link.depth OR trials.chain_skip <> link.skip)"""
        self.core.execute(conn, sql, (project.id, exp_id, project.id))

    def set_links(self, conn: Connection, project: Project, links: Iterable[tuple[str, int, str]]) -> None:
        """Write ``(exp_id, depth, skip)`` triples an import computed."""
        rows = [(depth, skip, project.id, exp_id) for exp_id, depth, skip in links]
        if rows:
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            cursor.executemany(
                self.core.sql("UPDATE trials SET chain_depth = ?, chain_skip = ? WHERE project_id = ? AND exp_id = ?"),
                rows,
            )

    def chain_links(self, conn: Connection, project: Project) -> dict[str, tuple[int, str]]:
        """Every stored trial's ``(depth, skip)``, by exp_id (an import into a project that
        has trials reads its parents whole already)."""
        rows = self.core.execute(
            conn, "SELECT exp_id, chain_depth, chain_skip FROM trials WHERE project_id = ?", (project.id,)
        ).fetchall()
        return {row[0]: (row[1], row[2]) for row in rows}

    def chain_depth(self, conn: Connection, project: Project, exp_id: str) -> int:
        """The stored length of the chain ending at ``exp_id``; 0 when unknown or no such trial."""
        row = self.core.execute(
            conn, "SELECT chain_depth FROM trials WHERE project_id = ? AND exp_id = ?", (project.id, exp_id)
        ).fetchone()
        return int(row[0]) if row else 0

    def ancestor_at(self, conn: Connection, project: Project, exp_id: str, depth: int) -> str | None:
        """The exp_id of the trial at ``depth`` (1: the root) on the chain ending at
        ``exp_id``; None when the chain is shorter or its links unknown. Hops by skip
        pointer while that does not pass ``depth``, then by parent: one recursive query of
        at most ``depth(exp_id) / CHAIN_SKIP + CHAIN_SKIP`` index look-ups."""
        if depth < 1:
            return None
        k = CHAIN_SKIP
        target = f"CASE WHEN h.skip <> '' AND (h.depth - 1) / {k} * {k} >= ? THEN h.skip ELSE h.parent_exp END"
        if self.sqlite:
            step = f"""SELECT t.exp_id, t.parent_exp, t.chain_depth, t.chain_skip, h.n + 1 FROM hop h JOIN trials t
                  ON t.project_id = ? AND t.exp_id = {target} WHERE h.depth > ? AND h.n < ?"""
        else:
            step = f"""SELECT p.exp_id, p.parent_exp, p.chain_depth, p.chain_skip, h.n + 1 FROM hop h CROSS JOIN LATERAL (
                    SELECT t.exp_id, t.parent_exp, t.chain_depth, t.chain_skip FROM trials t
                    WHERE t.project_id = ? AND t.exp_id = {target} LIMIT 1) p
                  WHERE h.depth > ? AND h.n < ?"""
        sql = f"""WITH RECURSIVE hop(exp_id, parent_exp, depth, skip, n) AS (
                SELECT exp_id, parent_exp, chain_depth, chain_skip, 0 FROM trials WHERE project_id = ? AND exp_id = ?
                UNION ALL
                {step})
            SELECT exp_id, depth FROM hop ORDER BY n DESC LIMIT 1"""
        # at most depth/k skips and k steps; the bound only guards against corrupt links
        bound = 2 * (CHAIN_SKIP + 2) + 10_000_000 // CHAIN_SKIP
        row = self.core.execute(conn, sql, (project.id, exp_id, project.id, depth, depth, bound)).fetchone()
        if row is None or row[1] != depth:
            return None
        return str(row[0])

    def chain_ids(self, conn: Connection, project: Project, exp_id: str, steps: int) -> list[str]:
        """The exp_ids of the ``steps`` newest links of the chain ending at ``exp_id``,
        root-first (ids only: a few microseconds a step)."""
        if steps < 1:
            return []
        if self.sqlite:
            step = """SELECT t.exp_id, t.parent_exp, c.n + 1 FROM chain c JOIN trials t
                  ON t.project_id = ? AND t.exp_id = c.parent_exp WHERE c.parent_exp <> '' AND c.n < ?"""
        else:
            step = """SELECT p.exp_id, p.parent_exp, c.n + 1 FROM chain c CROSS JOIN LATERAL (
                    SELECT t.exp_id, t.parent_exp FROM trials t
                    WHERE t.project_id = ? AND t.exp_id = c.parent_exp LIMIT 1) p
                  WHERE c.parent_exp <> '' AND c.n < ?"""
        sql = f"""WITH RECURSIVE chain(exp_id, parent_exp, n) AS (
                SELECT exp_id, parent_exp, 1 FROM trials WHERE project_id = ? AND exp_id = ?
                UNION ALL
                {step})
            SELECT exp_id FROM chain ORDER BY n DESC"""
        rows = self.core.execute(conn, sql, (project.id, exp_id, project.id, steps)).fetchall()
        ids = [row[0] for row in rows]
        seen: set[str] = set()  # a cycle in stored data stops the chain at its first repeat
        out: list[str] = []
        for value in reversed(ids):
            if value in seen:
                break
            seen.add(value)
            out.append(value)
        out.reverse()
        return out
