"""Project rows: :class:`ProjectsSql`, ``Store.projects`` of :class:`lineage.store.Store`.

Methods: ``insert_project``, ``project``, ``projects``, ``update_project``,
``locked_project`` (the project locked for a write, with its counters),
``advance_counters``, ``project_revision``, ``project_counters``, ``delete_project``
(uses ``SearchSql.trials_deleted``), ``backup_sqlite`` (SQLite's online backup).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, insert, update
from sqlalchemy.exc import IntegrityError

from lineage.domain import BestPolicy, Project
from lineage.errors import Conflict, NotFound
from lineage.models import projects
from lineage.store.base import _PROJECT_COLUMNS, _PROJECT_SELECT, Family, StoreCore, _project_from_row, utcnow
from lineage.store.search import SearchSql


class ProjectsSql(Family):
    """Project rows, their counters and revision; deleting a project; backups."""

    def __init__(self, core: StoreCore, *, search: SearchSql) -> None:
        super().__init__(core)
        self.search = search  # deleting a project's trials is counted by ``search``

    def insert_project(self, conn: Connection, project: Project) -> Project:
        now = utcnow()
        values = project.to_dict()
        for key in ("revision", "trial_count", "created_at", "updated_at"):
            values.pop(key, None)
        try:
            with conn.begin_nested():
                conn.execute(
                    insert(projects).values(
                        **values, next_seq=0, next_exp_number=0, revision=0, created_at=now, updated_at=now
                    )
                )
        except IntegrityError:
            raise Conflict(f"project {project.slug!r} already exists", field="slug") from None
        return self.project(conn, project.slug)

    def project(self, conn: Connection, slug: str) -> Project:
        row = self.core.execute(conn, f"{_PROJECT_SELECT} WHERE slug = ?", (slug,)).fetchone()
        if row is None:
            raise NotFound("project", slug, field="project")
        return _project_from_row(row)

    def projects(self, conn: Connection) -> list[Project]:
        return [
            _project_from_row(row) for row in self.core.execute(conn, f"{_PROJECT_SELECT} ORDER BY slug").fetchall()
        ]

    def update_project(self, conn: Connection, project: Project, changes: dict[str, Any]) -> Project:
        if changes:
            values = dict(changes)
            if "best_policy" in values:
                values["best_policy"] = BestPolicy(values["best_policy"]).value
            conn.execute(
                update(projects)
                .where(projects.c.id == project.id)
                .values(**values, revision=projects.c.revision + 1, updated_at=utcnow())
            )
        return self.project(conn, project.slug)

    def locked_project(self, conn: Connection, slug: str) -> tuple[Project, int, int]:
        """The project, locked for this write transaction, with ``(next_seq, next_exp_number)``.

        PostgreSQL: ``SELECT ... FOR UPDATE`` serializes the project's writers until commit.
        SQLite: the transaction's ``BEGIN IMMEDIATE`` already serializes every writer.
        The counters read here stay valid until the transaction ends.
        """
        return self.fetch_locked(self.lock_cursor(conn, slug), slug)

    def lock_cursor(self, conn: Connection, slug: str) -> Any:
        """:meth:`locked_project`'s statement, sent, not read (in a pipelined write, it goes
        out with the next statement whose result is read); :meth:`fetch_locked` reads it."""
        lock = "" if self.sqlite else " FOR UPDATE"
        return self.core.execute(
            conn, f"SELECT {', '.join(_PROJECT_COLUMNS)}, next_exp_number FROM projects WHERE slug = ?{lock}", (slug,)
        )

    @staticmethod
    def fetch_locked(cursor: Any, slug: str) -> tuple[Project, int, int]:
        row = cursor.fetchone()
        if row is None:
            raise NotFound("project", slug, field="project")
        return _project_from_row(row[:-1]), row[_PROJECT_COLUMNS.index("next_seq")], row[-1]

    def advance_counters(self, conn: Connection, project: Project, *, rows: int, exp_number: int) -> None:
        """After a write: move ``next_seq`` by ``rows``, raise ``next_exp_number``, bump the revision."""
        larger = "MAX" if self.sqlite else "GREATEST"
        self.core.execute(
            conn,
            f"UPDATE projects SET next_seq = next_seq + ?, next_exp_number = {larger}(next_exp_number, ?), "
            "revision = revision + 1, updated_at = ? WHERE id = ?",
            (rows, exp_number, self.core.now(), project.id),
        )

    def project_revision(self, conn: Connection, slug: str) -> int:
        """The project's revision alone (one indexed look-up: what an ETag check costs)."""
        row = self.core.execute(conn, "SELECT revision FROM projects WHERE slug = ?", (slug,)).fetchone()
        if row is None:
            raise NotFound("project", slug, field="project")
        return int(row[0])

    def project_counters(self, conn: Connection, project: Project) -> tuple[int, int]:
        """``(next_seq, next_exp_number)`` of the project as this transaction sees them."""
        row = self.core.execute(
            conn, "SELECT next_seq, next_exp_number FROM projects WHERE id = ?", (project.id,)
        ).fetchone()
        if row is None:
            raise NotFound("project", project.slug, field="project")
        return int(row[0]), int(row[1])

    def delete_project(self, conn: Connection, project: Project) -> None:
        """Delete the project; its trials, their telemetry and its idempotency keys go with it
        (``ON DELETE CASCADE`` foreign keys)."""
        trial_count = self.core.execute(
            conn, "SELECT count(*) FROM trials WHERE project_id = ?", (project.id,)
        ).fetchone()[0]
        self.core.execute(conn, "DELETE FROM projects WHERE id = ?", (project.id,))
        self.search.trials_deleted(conn, trial_count)

    def backup_sqlite(self, target_path: str) -> None:
        """Online backup of a SQLite database (consistent while writers run)."""
        import sqlite3

        with self.core.engine.connect() as conn:
            source = conn.connection.driver_connection
            destination = sqlite3.connect(target_path)
            try:
                source.backup(destination)  # type: ignore[union-attr]
            finally:
                destination.close()
