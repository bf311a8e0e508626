"""API tokens and idempotency keys: :class:`TokensSql`, ``Store.tokens`` of :class:`lineage.store.Store`.

What the HTTP API adds to the ledger's rows: bearer tokens (``lineage.auth``) and the
idempotency keys of trial creations and telemetry batches. Driver-level SQL like the
hot paths; the per-request checks read through ``StoreCore.peek``.

Methods: ``insert_token``, ``token_by_hash``, ``tokens``, ``revoke_token``,
``touch_token``, ``active_token_exists``, ``token_role``, ``active_admins``; the ledger's
settings (``lineage.auth``'s anonymous writes): ``setting``, ``set_setting``,
``access_state`` (and its halves inside a transaction, ``access_cursor`` and
``fetch_access``); ``find_key``, ``claim_key``, ``set_key_result``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from lineage.domain import Project
from lineage.errors import Conflict, NotFound
from lineage.store.base import Family, _json_text, iso_stamp

#: A setting's value and whether an active token exists (``access_state``).
_ACCESS_SQL = (
    "SELECT (SELECT value FROM ledger_settings WHERE name = ?), "
    "(SELECT 1 FROM api_tokens WHERE revoked_at IS NULL LIMIT 1)"
)


def _access_of(row: Sequence[Any]) -> tuple[str | None, bool]:
    return row[0], row[1] is not None


class TokensSql(Family):
    """Bearer tokens (stored as hashes) and idempotency keys."""

    _TOKEN_COLUMNS = "id, name, role, token_hash, created_at, last_used_at, revoked_at"

    def _token_row(self, row: Sequence[Any] | None) -> tuple[Any, ...] | None:
        if row is None:
            return None
        id_, name, role, token_hash, created, used, revoked = row
        return (id_, name, role, token_hash, iso_stamp(created), iso_stamp(used), iso_stamp(revoked))

    def insert_token(self, conn: Connection, *, name: str, role: str, token_hash: str) -> tuple[Any, ...]:
        """Store a token; a revoked token of the same name gives its name up, an active one
        is a :class:`Conflict`. Returns the row (see :meth:`token_by_hash`)."""
        row = self.core.execute(conn, "SELECT revoked_at FROM api_tokens WHERE name = ?", (name,)).fetchone()
        if row is not None:
            if row[0] is None:
                raise Conflict(
                    f"a token named {name!r} already exists; revoke it first or choose another name", field="name"
                )
            self.core.execute(conn, "DELETE FROM api_tokens WHERE name = ?", (name,))
        self.core.execute(
            conn,
            "INSERT INTO api_tokens (name, role, token_hash, created_at) VALUES (?, ?, ?, ?)",
            (name, role, token_hash, self.core.now()),
        )
        return self.token_by_hash(conn, token_hash)  # type: ignore[return-value]

    def token_by_hash(self, conn: Connection | None, token_hash: str) -> tuple[Any, ...] | None:
        """``(id, name, role, token_hash, created_at, last_used_at, revoked_at)`` or None.
        ``conn=None``: one statement on its own (:meth:`peek`)."""
        sql = f"SELECT {self._TOKEN_COLUMNS} FROM api_tokens WHERE token_hash = ?"
        row = (
            self.core.peek(sql, (token_hash,))
            if conn is None
            else self.core.execute(conn, sql, (token_hash,)).fetchone()
        )
        return self._token_row(row)

    def tokens(self, conn: Connection) -> list[tuple[Any, ...]]:
        rows = self.core.execute(conn, f"SELECT {self._TOKEN_COLUMNS} FROM api_tokens ORDER BY name").fetchall()
        return [self._token_row(row) for row in rows]  # type: ignore[misc]

    def revoke_token(self, conn: Connection, name: str) -> None:
        cursor = self.core.execute(
            conn, "UPDATE api_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL", (self.core.now(), name)
        )
        if cursor.rowcount == 0:
            row = self.core.execute(conn, "SELECT 1 FROM api_tokens WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise NotFound("token", name, field="name")

    def touch_token(self, token_id: int, *, not_since: datetime) -> bool:
        """Record a use of the token, unless one was recorded after ``not_since``.

        Best effort, and it never waits for a lock: on SQLite, while another writer holds
        the database the stamp is skipped (False; the next use records it), so a read
        with a token never queues behind an import. On PostgreSQL it is its own short
        transaction on the token's row.
        """
        sql = "UPDATE api_tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)"
        params = (self.core.now(), token_id, self.core.db_time(not_since))
        if not self.sqlite:
            with self.core.write() as conn:
                self.core.execute(conn, sql, params)
            return True
        import sqlite3

        from lineage.db import SQLITE_BUSY_TIMEOUT_MS

        raw = self.core.engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute("PRAGMA busy_timeout = 0")
            try:
                cursor.execute(sql, params)  # autocommit: the connection has no open transaction
                return True
            except sqlite3.OperationalError:  # "database is locked": someone else is writing
                return False
            finally:
                cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
                cursor.close()
        finally:
            raw.close()

    def active_token_exists(self, conn: Connection | None = None) -> bool:
        """Whether an unrevoked token exists (``conn=None``: :meth:`peek`)."""
        sql = "SELECT 1 FROM api_tokens WHERE revoked_at IS NULL LIMIT 1"
        return (self.core.peek(sql) if conn is None else self.core.execute(conn, sql).fetchone()) is not None

    def token_role(self, conn: Connection, name: str) -> tuple[str, bool] | None:
        """``(role, active)`` of the token called ``name``, or None."""
        row = self.core.execute(conn, "SELECT role, revoked_at FROM api_tokens WHERE name = ?", (name,)).fetchone()
        return None if row is None else (row[0], row[1] is None)

    def active_admins(self, conn: Connection) -> list[str]:
        """Names of the active admin tokens. On PostgreSQL their rows stay locked until the
        transaction ends, so two revocations of the last two admins cannot both pass a
        check (SQLite's write transactions run one at a time anyway)."""
        lock = "" if self.sqlite else " FOR UPDATE"
        sql = f"SELECT name FROM api_tokens WHERE role = 'admin' AND revoked_at IS NULL ORDER BY name{lock}"
        return [row[0] for row in self.core.execute(conn, sql).fetchall()]

    # the ledger's settings

    def setting(self, conn: Connection, name: str) -> tuple[str, str | None, str] | None:
        """``(value, updated_at, updated_by)`` of the setting ``name``, or None."""
        row = self.core.execute(
            conn, "SELECT value, updated_at, updated_by FROM ledger_settings WHERE name = ?", (name,)
        ).fetchone()
        return None if row is None else (row[0], iso_stamp(row[1]), row[2])

    def set_setting(self, conn: Connection, name: str, value: str, *, by: str, only_if_absent: bool = False) -> bool:
        """Store the setting (``only_if_absent``: unless it is set already); whether it changed."""
        action = (
            "NOTHING"
            if only_if_absent
            else (
                "UPDATE SET value = excluded.value, updated_at = excluded.updated_at, updated_by = excluded.updated_by"
            )
        )
        cursor = self.core.execute(
            conn,
            f"INSERT INTO ledger_settings (name, value, updated_at, updated_by) VALUES (?, ?, ?, ?) "
            f"ON CONFLICT (name) DO {action}",
            (name, value, self.core.now(), by[:200]),
        )
        return cursor.rowcount == 1

    def access_state(self, name: str) -> tuple[str | None, bool]:
        """The setting ``name``'s value (None: unset) and whether an active token exists, in
        one statement on its own (:meth:`peek`): what a request without a token is checked by."""
        return _access_of(self.core.peek(_ACCESS_SQL, (name,)))

    def access_cursor(self, conn: Connection, name: str) -> Any:
        """:meth:`access_state` inside the caller's transaction, sent, not read (in a
        pipelined write it goes out with the next statement whose result is read); its
        result is :meth:`fetch_access`'s."""
        return self.core.execute(conn, _ACCESS_SQL, (name,))

    @staticmethod
    def fetch_access(cursor: Any) -> tuple[str | None, bool]:
        return _access_of(cursor.fetchone())

    # idempotency keys

    def find_key(
        self, conn: Connection, project: Project, scope: str, key: str
    ) -> tuple[str, str, dict[str, Any]] | None:
        """``(exp_id, body_hash, result)`` stored for ``key``, or None."""
        row = self.core.execute(
            conn,
            "SELECT exp_id, body_hash, result FROM idempotency_keys WHERE project_id = ? AND scope = ? AND key = ?",
            (project.id, scope, key),
        ).fetchone()
        if row is None:
            return None
        result = row[2]
        if isinstance(result, str):
            result = json.loads(result)
        return row[0], row[1], dict(result or {})

    def claim_key(
        self,
        conn: Connection,
        project: Project,
        scope: str,
        key: str,
        *,
        exp_id: str,
        body_hash: str,
        result: Mapping[str, Any] | None = None,
    ) -> bool:
        """Store ``key``; False when it is already stored (then nothing changes).

        On PostgreSQL a concurrent transaction holding the same key makes this wait for
        it to end, so exactly one of two racing writers claims the key.
        """
        marks = "?, ?, ?, ?, ?, ?, ?" if self.sqlite else "?, ?, ?, ?, ?, CAST(? AS jsonb), ?"
        cursor = self.core.execute(
            conn,
            f"INSERT INTO idempotency_keys (project_id, scope, key, exp_id, body_hash, result, created_at) "
            f"VALUES ({marks}) ON CONFLICT (project_id, scope, key) DO NOTHING",
            (project.id, scope, key, exp_id, body_hash, _json_text(result or {}), self.core.now()),
        )
        return cursor.rowcount == 1

    def set_key_result(
        self, conn: Connection, project: Project, scope: str, key: str, result: Mapping[str, Any]
    ) -> None:
        mark = self.core.json_mark()
        self.core.execute(
            conn,
            f"UPDATE idempotency_keys SET result = {mark} WHERE project_id = ? AND scope = ? AND key = ?",
            (_json_text(result), project.id, scope, key),
        )
