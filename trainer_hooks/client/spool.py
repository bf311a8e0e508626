"""The durable local spool of one run: every write to the ledger, in order, on disk.

A spool is one SQLite file per run (``<dir>/<run_id>.spool``). SQLite rather than an
fsync'd JSONL file because the spool is a queue that is appended to by one thread and
consumed by another (or by ``lineage spool flush`` in another process after a crash):
SQLite gives atomic appends and atomic "mark sent" updates in place, ordered ids, and a
crash-safe file with no hand-written recovery of torn lines; it is in the standard
library, so the server side (``lineage spool flush``) reads it without torch or httpx.
WAL mode with ``synchronous=FULL``: a committed append survives a SIGKILL of the trainer
and a power cut; commits happen on the client's background thread, a batch of points
at a time, never in the training step.

Tables
    ``meta(key, value)``: the run (``run_id``, ``base_url``, ``project``), the trial's
    ``exp_id`` once known, and the last rejection (``rejected``: why the ledger refused).
    ``ops(seq, kind, body, points, group_key, sent)``: one write each, in ``seq`` order.
    ``kind`` is ``project`` | ``plan`` | ``columns`` | ``points`` | ``alert`` | ``summarize`` |
    ``finish``; ``body`` is JSON: for ``columns`` (what the client writes) the API's columnar
    form of the points (``lineage.telemetry_columns``), for ``points`` (spools of clients
    before 2026-11-25, still replayed) the comma-joined point objects without brackets.

Retention
    A spool whose every op the ledger acknowledged (a 2xx each) has done its job and is
    deleted: by :meth:`LedgerClient.close <trainer_hooks.client.LedgerClient.close>` at the
    end of the run, or by ``lineage spool flush`` once it delivered the rest
    (``keep_spool=True`` / ``--keep`` keep it). A spool with anything undelivered (the
    ledger was down, or refused a write) stays where it is until ``lineage spool flush``
    delivers it; nothing deletes undelivered data. A running client holds a shared
    ``flock`` on its spool (:meth:`Spool.hold`; the kernel drops it when the process
    dies), and ``flush`` never deletes a spool that is held: a live run's spool may be
    caught up, not finished.

Idempotent replay
    Consecutive telemetry ops of one kind (``columns`` or ``points``) are sent as one
    telemetry batch. Before the first attempt
    the sender writes the batch's key into ``group_key`` of its ops (:meth:`Spool.group`),
    so a retry after a timeout, a crash or a SIGKILL re-sends exactly the same points
    under the same ``batch_id`` and the server stores them once.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

if sys.platform != "win32":
    import fcntl

__all__ = ["SPOOL_SUFFIX", "Op", "Spool", "spool_files"]

SPOOL_SUFFIX = ".spool"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ops (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    body BLOB,
    points INTEGER NOT NULL DEFAULT 0,
    group_key TEXT,
    sent INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS ops_unsent ON ops (sent, seq);
CREATE INDEX IF NOT EXISTS ops_pending ON ops (sent, seq, points, kind);
"""
# ops_pending covers pending() and the scans of next_unsent/group: a column stored after a
# body of megabytes is read through the body's overflow pages, so a query must not touch the
# table for rows it does not return


@dataclass(frozen=True, slots=True)
class Op:
    """One spooled write. ``body``: JSON text (``points``: point objects joined by commas)."""

    seq: int
    kind: str
    body: str
    points: int
    group_key: str | None


def spool_files(directory: str | Path) -> list[Path]:
    """The spool files in ``directory``, oldest first (by name, then modification time)."""
    found = [p for p in Path(directory).glob(f"*{SPOOL_SUFFIX}") if p.is_file()]
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name))


class Spool:
    """A run's spool file. Thread-safe: each thread gets its own SQLite connection."""

    def __init__(self, path: str | Path, *, durable: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._durable = durable
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._opened_lock = threading.Lock()
        self._held: IO[bytes] | None = None
        self._conn().executescript(_SCHEMA)

    def hold(self) -> None:
        """Mark the spool in use by this live run: a shared ``flock`` on the file until
        :meth:`release` (or the process's end)."""
        if self._held is None and sys.platform != "win32":
            held = open(self.path, "rb")  # noqa: SIM115 (kept open: the lock lives with it)
            fcntl.flock(held, fcntl.LOCK_SH)
            self._held = held

    def release(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None

    def in_use(self) -> bool:
        """True while a live run holds the spool (:meth:`hold`); always True where
        ``flock`` does not exist (nothing is deleted there unasked)."""
        if sys.platform == "win32":
            return True
        with open(self.path, "rb") as probe:
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(probe, fcntl.LOCK_UN)
        return False

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'FULL' if self._durable else 'NORMAL'}")
            self._local.conn = conn
            with self._opened_lock:
                self._opened.append(conn)
        return conn

    def close(self) -> None:
        """Close every thread's connection (the last one folds the WAL into the file).
        Call it when no thread uses the spool any more; a later call reopens."""
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()
        self._local = threading.local()

    def remove(self) -> None:
        """Close the spool and delete its file (with SQLite's ``-wal`` and ``-shm``)."""
        self.close()
        self.release()
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection inside ``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on error)."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # -- meta ------------------------------------------------------------------------------

    def get(self, key: str, default: str | None = None) -> str | None:
        row = self._conn().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else row[0]

    def set(self, key: str, value: str | None) -> None:
        conn = self._conn()
        if value is None:
            conn.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))

    def meta(self) -> dict[str, str]:
        return dict(self._conn().execute("SELECT key, value FROM meta").fetchall())

    # -- appends ---------------------------------------------------------------------------

    def append(self, kind: str, body: Any) -> int:
        """Append one op (``body`` JSON-encoded here); returns its ``seq``."""
        cur = self._conn().execute("INSERT INTO ops (kind, body, points, created) VALUES (?, ?, 0, ?)",
                                   (kind, json.dumps(body, separators=(",", ":")), time.time()))
        return int(cur.lastrowid or 0)

    def append_points(self, chunks: list[tuple[str, int]], *, kind: str = "columns") -> None:
        """Append ``(JSON text, count)`` chunks as telemetry ops of ``kind`` (``columns``: the
        columnar form; ``points``: joined point objects), one transaction."""
        if not chunks:
            return
        now = time.time()
        with self._transaction() as conn:
            conn.executemany("INSERT INTO ops (kind, body, points, created) VALUES (?, ?, ?, ?)",
                             [(kind, text, count, now) for text, count in chunks])

    # -- the sender's side ------------------------------------------------------------------

    def next_unsent(self, *, after: int = 0, kinds: tuple[str, ...] | None = None) -> Op | None:
        """The first unsent op (after ``seq`` ``after``, of one of ``kinds``)."""
        kind_filter = f" AND kind IN ({', '.join('?' * len(kinds))})" if kinds else ""
        row = self._conn().execute(
            f"SELECT seq, kind, body, points, group_key FROM ops WHERE sent = 0 AND seq > ?{kind_filter} ORDER BY seq LIMIT 1",
            (after, *(kinds or ())),
        ).fetchone()
        return None if row is None else Op(*row)

    def group(self, first: Op, *, max_points: int, run_id: str) -> tuple[str, list[Op]]:
        """The telemetry batch that starts at ``first`` (a ``columns`` or ``points`` op): its
        key and ops.

        A batch already keyed (sent before, maybe received) comes back as it was. Else the
        consecutive unsent ops of ``first``'s kind from ``first`` up to ``max_points`` points are
        keyed ``<run_id>-<first seq>`` in one transaction, before anything is sent."""
        conn = self._conn()
        if first.group_key is not None:
            rows = conn.execute("SELECT seq, kind, body, points, group_key FROM ops WHERE group_key = ? ORDER BY seq",
                                (first.group_key,)).fetchall()
            return first.group_key, [Op(*r) for r in rows]
        key = f"{run_id}-{first.seq}"
        with self._transaction() as conn:
            stop = conn.execute("SELECT MIN(seq) FROM ops WHERE seq > ? AND kind != ?", (first.seq, first.kind)).fetchone()[0]
            rows = conn.execute(
                "SELECT seq, kind, body, points, group_key FROM ops WHERE seq >= ? AND sent = 0 AND kind = ? "
                "AND group_key IS NULL AND (? IS NULL OR seq < ?) ORDER BY seq LIMIT 10000",
                (first.seq, first.kind, stop, stop),
            ).fetchall()
            taken: list[Op] = []
            total = 0
            for row in rows:
                op = Op(*row)
                if taken and total + op.points > max_points:
                    break
                taken.append(op)
                total += op.points
            conn.executemany("UPDATE ops SET group_key = ? WHERE seq = ?", [(key, op.seq) for op in taken])
        return key, [Op(op.seq, op.kind, op.body, op.points, key) for op in taken]

    def mark_sent(self, seqs: list[int]) -> None:
        """Mark ops delivered and drop their bodies (the ledger holds them now)."""
        with self._transaction() as conn:
            conn.executemany("UPDATE ops SET sent = 1, body = NULL WHERE seq = ?", [(s,) for s in seqs])

    def pending(self) -> tuple[int, int]:
        """``(unsent ops, unsent points)``."""
        ops, points = self._conn().execute("SELECT COUNT(*), COALESCE(SUM(points), 0) FROM ops WHERE sent = 0").fetchone()
        return int(ops), int(points)

    def ops(self) -> Iterator[Op]:
        """Every op in order, sent ones included (their body is empty)."""
        for row in self._conn().execute("SELECT seq, kind, COALESCE(body, ''), points, group_key FROM ops ORDER BY seq"):
            yield Op(*row)
