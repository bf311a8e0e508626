"""The SQL of webhooks and their outbox: :class:`OutboxSql`, ``Store.outbox`` of :class:`lineage.store.Store`.

Claiming due deliveries is safe with several workers on one database:

* PostgreSQL: ``SELECT ... FOR UPDATE SKIP LOCKED`` picks due rows no other worker is
  claiming at this moment; the claim itself is a lease (``claimed_until``, a token in
  ``claim_token``) written in that short transaction. The HTTP request runs after the
  commit, so no transaction stays open while a receiver takes its time.
* SQLite: the claim is one ``UPDATE ... WHERE id IN (SELECT ...)`` in a ``BEGIN
  IMMEDIATE`` transaction (writers queue), then the rows carrying the token are read.

A worker that dies mid-delivery leaves a lease that lapses; the row is then due again.
Results are written only while the worker still holds the row's claim token.

Methods: the hooks (``insert_hook``, ``hooks``, ``subscriptions``, ``delete_hook``) and
the outbox (``insert_deliveries``, ``any_delivery_due``, ``claim_due_deliveries``,
``finish_delivery``, ``release_deliveries``, ``deliveries``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection

from lineage.store.base import Family

_HOOK_COLUMNS = "id, url, events, body_format, created_at"
_DUE = "state = 'pending' AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until < ?)"


def events_list(value: Any) -> list[str]:
    return json.loads(value) if isinstance(value, str) else list(value or [])


class OutboxSql(Family):
    """Webhooks, and the outbox of their deliveries with its claims (leases)."""

    # -- hooks -------------------------------------------------------------------------------

    def insert_hook(
        self, conn: Connection, project_id: int, *, url: str, events: Sequence[str], body_format: str, secret: str
    ) -> int:
        cursor = self.core.execute(
            conn,
            f"INSERT INTO webhooks (project_id, url, events, body_format, secret, created_at) "
            f"VALUES (?, ?, {self.core.json_mark()}, ?, ?, ?) RETURNING id",
            (project_id, url, json.dumps(list(events)), body_format, secret, self.core.now()),
        )
        return int(cursor.fetchone()[0])

    def hooks(self, conn: Connection, project_id: int) -> list[tuple[Any, ...]]:
        """``(id, url, events, body_format, created_at, pending, delivered, failed)`` per hook."""
        rows = self.core.execute(
            conn, f"SELECT {_HOOK_COLUMNS} FROM webhooks WHERE project_id = ? ORDER BY id", (project_id,)
        ).fetchall()
        counts = {
            (hook_id, state): int(n)
            for hook_id, state, n in self.core.execute(
                conn,
                "SELECT d.hook_id, d.state, COUNT(*) FROM hook_deliveries d JOIN webhooks w ON w.id = d.hook_id "
                "WHERE w.project_id = ? GROUP BY d.hook_id, d.state",
                (project_id,),
            ).fetchall()
        }
        return [
            (
                id_,
                url,
                events_list(events),
                fmt,
                created,
                counts.get((id_, "pending"), 0),
                counts.get((id_, "delivered"), 0),
                counts.get((id_, "failed"), 0),
            )
            for id_, url, events, fmt, created in rows
        ]

    def subscriptions(self, conn: Connection, project_id: int) -> list[tuple[int, list[str], str]]:
        """``(hook id, events, body_format)`` of the project's hooks (one indexed look-up)."""
        rows = self.core.execute(
            conn, "SELECT id, events, body_format FROM webhooks WHERE project_id = ?", (project_id,)
        ).fetchall()
        return [(int(id_), events_list(events), fmt) for id_, events, fmt in rows]

    def delete_hook(self, conn: Connection, project_id: int, hook_id: int) -> bool:
        cursor = self.core.execute(conn, "DELETE FROM webhooks WHERE project_id = ? AND id = ?", (project_id, hook_id))
        return cursor.rowcount > 0

    # -- the outbox --------------------------------------------------------------------------

    def insert_deliveries(self, conn: Connection, rows: Iterable[tuple[Any, ...]]) -> None:
        """Outbox rows ``(hook_id, project_id, event_id, event_type, body, next_attempt_at)``."""
        now = self.core.now()
        values = [(*row, "pending", 0, "", now) for row in rows]
        if values:
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            cursor.executemany(
                self.core.sql(
                    "INSERT INTO hook_deliveries (hook_id, project_id, event_id, event_type, body, "
                    "next_attempt_at, state, attempts, last_error, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                ),
                values,
            )

    def any_delivery_due(self, conn: Connection, *, now: float) -> bool:
        """Whether a delivery may be due (a read: the loop takes no write lock when idle)."""
        return (
            self.core.execute(
                conn, "SELECT 1 FROM hook_deliveries WHERE state = 'pending' AND next_attempt_at <= ? LIMIT 1", (now,)
            ).fetchone()
            is not None
        )

    def claim_due_deliveries(
        self, conn: Connection, *, now: float, lease_until: float, token: str, limit: int
    ) -> list[tuple[int, int, str, str, str, int, str, str]]:
        """Claim up to ``limit`` due deliveries for this worker; ``(id, hook_id, event_id,
        event_type, body, attempts, url, secret)`` each, oldest first."""
        if self.sqlite:
            self.core.execute(
                conn,
                f"UPDATE hook_deliveries SET claimed_until = ?, claim_token = ? WHERE id IN "
                f"(SELECT id FROM hook_deliveries WHERE {_DUE} ORDER BY id LIMIT ?)",
                (lease_until, token, now, now, limit),
            )
        else:
            ids = [
                row[0]
                for row in self.core.execute(
                    conn,
                    f"SELECT id FROM hook_deliveries WHERE {_DUE} ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED",
                    (now, now, limit),
                ).fetchall()
            ]
            if not ids:
                return []
            self.core.execute(
                conn,
                f"UPDATE hook_deliveries SET claimed_until = ?, claim_token = ? WHERE id IN ({self.core.marks(ids)})",
                (lease_until, token, *ids),
            )
        return [
            tuple(row)
            for row in self.core.execute(
                conn,
                "SELECT d.id, d.hook_id, d.event_id, d.event_type, d.body, d.attempts, w.url, w.secret "
                "FROM hook_deliveries d JOIN webhooks w ON w.id = d.hook_id WHERE d.claim_token = ? ORDER BY d.id",
                (token,),
            ).fetchall()
        ]

    def finish_delivery(
        self,
        conn: Connection,
        delivery_id: int,
        token: str,
        *,
        state: str,
        attempts: int,
        next_attempt_at: float,
        error: str,
    ) -> bool:
        """Record an attempt's outcome while this worker holds the claim; False if it lost it."""
        delivered = ", delivered_at = ?" if state == "delivered" else ""
        params: list[Any] = [state, attempts, next_attempt_at, error[:2000]]
        if delivered:
            params.append(self.core.now())
        cursor = self.core.execute(
            conn,
            f"UPDATE hook_deliveries SET state = ?, attempts = ?, next_attempt_at = ?, last_error = ?{delivered}, "
            "claimed_until = NULL, claim_token = NULL WHERE id = ? AND claim_token = ?",
            (*params, delivery_id, token),
        )
        return cursor.rowcount > 0

    def release_deliveries(self, conn: Connection, token: str) -> None:
        """Give back the deliveries this worker claimed and did not attempt (it is stopping)."""
        self.core.execute(
            conn, "UPDATE hook_deliveries SET claimed_until = NULL, claim_token = NULL WHERE claim_token = ?", (token,)
        )

    def deliveries(self, conn: Connection, project_id: int, *, limit: int) -> list[tuple[Any, ...]]:
        """The newest ``limit`` deliveries: ``(id, hook_id, event_id, event_type, state,
        attempts, last_error, body)``."""
        return [
            tuple(row)
            for row in self.core.execute(
                conn,
                "SELECT id, hook_id, event_id, event_type, state, attempts, last_error, body FROM hook_deliveries "
                "WHERE project_id = ? ORDER BY id DESC LIMIT ?",
                (project_id, limit),
            ).fetchall()
        ]
