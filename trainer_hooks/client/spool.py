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
    ``exp_id`` once known, its ``owner`` and the ledger's answer to its ``claim``
    (:mod:`trainer_hooks.client.claims`), the finish's answer once stored (``finished``)
    and the ``outcome``, and the last rejection (``rejected``: why the ledger refused).
    ``ops(seq, kind, body, points, group_key, sent)``: one write each, in ``seq`` order.
    ``kind`` is ``project`` | ``plan`` | ``columns`` | ``points`` | ``alert`` | ``summarize`` |
    ``finish``; ``body`` is JSON: for ``columns`` (what the client writes) the API's columnar
    form of the points (``lineage.telemetry_columns``), for ``points`` (spools of clients
    before 2026-11-25, still replayed) the comma-joined point objects without brackets.
    ``bodies(seq, body)``: the body of each telemetry op (UTF-8 JSON bytes), apart from its
    ``ops`` row, so that keying a batch and marking it sent rewrite a row of a few bytes,
    not megabytes (SQLite rewrites a whole row on any update, and reads through a body's
    overflow pages to reach the columns after it). A sent op's body is deleted. Spools of
    earlier clients hold telemetry bodies in ``ops.body`` (and no ``bodies`` table until
    opened here); they are read from there.

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

Bodies from memory
    The file is the durable copy; the bytes a live client sends come from memory. A
    :class:`Spool` keeps the body of each telemetry op it appended (up to ``hot_bytes``) in
    memory from the commit that made it durable until the ledger acknowledged it
    (:meth:`Spool.mark_sent`), and :meth:`Spool.group` takes bodies from there: the
    encoded block goes from the encoder to the request without a read of the file. The
    file is read for a body that is not in memory: ops of an earlier process (a restart,
    ``lineage spool flush``), and ops appended while the memory held ``hot_bytes`` already
    (a ledger that was away for long). An op is in memory only once its commit returned,
    so anything sent is on disk first, and stays there until it is acknowledged.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

if sys.platform != "win32":
    import fcntl

__all__ = ["HOT_BYTES", "SPOOL_SUFFIX", "TELEMETRY_KINDS", "Op", "Spool", "spool_files"]

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
CREATE TABLE IF NOT EXISTS bodies (seq INTEGER PRIMARY KEY, body BLOB NOT NULL);
"""
# ops_pending covers pending() and the scans of next_unsent/group: in spools of earlier
# clients a telemetry body of megabytes sits in its ops row, and a column stored after it is
# read through the body's overflow pages, so a query must not touch the table for rows it
# does not return
#: telemetry ops (their bodies live in ``bodies``)
TELEMETRY_KINDS = ("columns", "points")
#: bytes of telemetry bodies a Spool keeps in memory until they are acknowledged (module doc)
HOT_BYTES = 64 * 2**20
#: pages of a new spool file: a body of megabytes is a chain of overflow pages, written at
#: its append and walked to free it once sent; at 32 KiB (SQLite's default is 4 KiB) there are
#: 8x fewer of them (a batch of 200,000 points: about 210 pages), which cuts the CPU of
#: both by a third to a half, and the WAL is checkpointed 8x less often (every 1,000 pages)
PAGE_SIZE = 32768


@dataclass(frozen=True, slots=True)
class Op:
    """One spooled write. ``body``: JSON, text or UTF-8 bytes (``points``: point objects
    joined by commas); empty for a telemetry op from :meth:`Spool.next_unsent` (its
    batch, from :meth:`Spool.group`, has the bodies) and for a sent op."""

    seq: int
    kind: str
    body: str | bytes
    points: int
    group_key: str | None


def spool_files(directory: str | Path) -> list[Path]:
    """The spool files in ``directory``, oldest first (by name, then modification time)."""
    found = [p for p in Path(directory).glob(f"*{SPOOL_SUFFIX}") if p.is_file()]
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name))


class Spool:
    """A run's spool file. Thread-safe: each thread gets its own SQLite connection."""

    def __init__(self, path: str | Path, *, durable: bool = True, hot_bytes: int = HOT_BYTES) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._durable = durable
        #: telemetry bodies appended by this object and not acknowledged yet (module doc)
        self._hot: dict[int, bytes] = {}
        self._hot_size = 0
        self._hot_bytes = hot_bytes
        self._hot_lock = threading.Lock()
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
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new file's; an existing file keeps its own
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
        with self._hot_lock:
            self._hot.clear()
            self._hot_size = 0
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
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def meta(self) -> dict[str, str]:
        return dict(self._conn().execute("SELECT key, value FROM meta").fetchall())

    # -- appends ---------------------------------------------------------------------------

    def append(self, kind: str, body: Any) -> int:
        """Append one op (``body`` JSON-encoded here); returns its ``seq``."""
        cur = self._conn().execute(
            "INSERT INTO ops (kind, body, points, created) VALUES (?, ?, 0, ?)",
            (kind, json.dumps(body, separators=(",", ":")), time.time()),
        )
        return int(cur.lastrowid or 0)

    def append_points(self, chunks: Sequence[tuple[str | bytes, int]], *, kind: str = "columns") -> list[int]:
        """Append ``(JSON, count)`` chunks as telemetry ops of ``kind`` (``columns``: the
        columnar form; ``points``: joined point objects), one transaction; their seqs.
        Once committed, their bodies are also held in memory for the sender (module doc)."""
        if not chunks:
            return []
        now = time.time()
        bodies = [body if isinstance(body, bytes) else body.encode() for body, _ in chunks]
        seqs: list[int] = []
        with self._transaction() as conn:
            for body, (_, count) in zip(bodies, chunks):
                seq = int(
                    conn.execute(
                        "INSERT INTO ops (kind, points, created) VALUES (?, ?, ?)", (kind, count, now)
                    ).lastrowid
                    or 0
                )
                conn.execute("INSERT INTO bodies (seq, body) VALUES (?, ?)", (seq, body))
                seqs.append(seq)
        with self._hot_lock:  # after the commit: what is sent from memory is on disk
            for seq, body in zip(seqs, bodies):
                if self._hot_size + len(body) <= self._hot_bytes:
                    self._hot[seq] = body
                    self._hot_size += len(body)
        return seqs

    # -- the sender's side ------------------------------------------------------------------

    def next_unsent(self, *, after: int = 0, kinds: tuple[str, ...] | None = None) -> Op | None:
        """The first unsent op (after ``seq`` ``after``, of one of ``kinds``); a telemetry
        op comes without its body (:meth:`group` reads the batch's)."""
        kind_filter = f" AND kind IN ({', '.join('?' * len(kinds))})" if kinds else ""
        row = (
            self._conn()
            .execute(
                f"SELECT seq, kind, CASE WHEN kind IN {TELEMETRY_KINDS!r} THEN '' ELSE body END, points, group_key "
                f"FROM ops WHERE sent = 0 AND seq > ?{kind_filter} ORDER BY seq LIMIT 1",
                (after, *(kinds or ())),
            )
            .fetchone()
        )
        return None if row is None else Op(*row)

    def group(self, first: Op, *, max_points: int, run_id: str) -> tuple[str, list[Op]]:
        """The telemetry batch that starts at ``first`` (a ``columns`` or ``points`` op): its
        key and ops, with their bodies (from memory where held, else from the file).

        A batch already keyed (sent before, maybe received) comes back as it was. Else the
        consecutive unsent ops of ``first``'s kind from ``first`` up to ``max_points`` points are
        keyed ``<run_id>-<first seq>`` in one transaction, before anything is sent."""
        if first.group_key is not None:
            key = first.group_key
            rows = (
                self._conn()
                .execute("SELECT seq, points FROM ops WHERE seq >= ? AND group_key = ? ORDER BY seq", (first.seq, key))
                .fetchall()
            )
        else:
            key = f"{run_id}-{first.seq}"
            with self._transaction() as conn:
                stop = conn.execute(
                    "SELECT MIN(seq) FROM ops WHERE seq > ? AND kind != ?", (first.seq, first.kind)
                ).fetchone()[0]
                found = conn.execute(
                    "SELECT seq, points FROM ops WHERE seq >= ? AND sent = 0 AND kind = ? "
                    "AND group_key IS NULL AND (? IS NULL OR seq < ?) ORDER BY seq LIMIT 10000",
                    (first.seq, first.kind, stop, stop),
                ).fetchall()
                rows, total = [], 0
                for seq, points in found:
                    if rows and total + points > max_points:
                        break
                    rows.append((seq, points))
                    total += points
                conn.executemany("UPDATE ops SET group_key = ? WHERE seq = ?", [(key, seq) for seq, _ in rows])
        bodies = self._bodies([seq for seq, _ in rows])
        return key, [Op(seq, first.kind, bodies[seq], points, key) for seq, points in rows]

    def _bodies(self, seqs: list[int]) -> dict[int, str | bytes]:
        """The bodies of telemetry ops: from memory, else ``bodies``, else (spools of earlier
        clients) ``ops.body``."""
        with self._hot_lock:
            found: dict[int, str | bytes] = {seq: self._hot[seq] for seq in seqs if seq in self._hot}
        conn = self._conn()
        for table in ("bodies", "ops"):
            missing = [seq for seq in seqs if seq not in found]
            for at in range(0, len(missing), 500):
                part = missing[at : at + 500]
                found.update(
                    conn.execute(
                        f"SELECT seq, body FROM {table} WHERE body IS NOT NULL AND seq IN "
                        f"({', '.join('?' * len(part))})",
                        part,
                    ).fetchall()
                )
        return found

    def mark_sent(self, seqs: list[int]) -> None:
        """Mark ops delivered and drop their bodies (the ledger holds them now)."""
        with self._transaction() as conn:
            conn.executemany("UPDATE ops SET sent = 1, body = NULL WHERE seq = ?", [(s,) for s in seqs])
            conn.executemany("DELETE FROM bodies WHERE seq = ?", [(s,) for s in seqs])
        with self._hot_lock:
            for seq in seqs:
                body = self._hot.pop(seq, None)
                if body is not None:
                    self._hot_size -= len(body)

    def pending(self) -> tuple[int, int]:
        """``(unsent ops, unsent points)``."""
        ops, points = (
            self._conn().execute("SELECT COUNT(*), COALESCE(SUM(points), 0) FROM ops WHERE sent = 0").fetchone()
        )
        return int(ops), int(points)

    def ops(self) -> Iterator[Op]:
        """Every op in order with its body (from the file), sent ones included (their body is empty)."""
        for row in self._conn().execute(
            "SELECT o.seq, o.kind, COALESCE(b.body, o.body, ''), o.points, o.group_key "
            "FROM ops o LEFT JOIN bodies b ON b.seq = o.seq ORDER BY o.seq"
        ):
            yield Op(*row)
