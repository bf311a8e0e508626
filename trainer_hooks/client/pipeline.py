"""The path of a run's writes inside :class:`~trainer_hooks.client.client.LedgerClient`: the
in-memory deque to the spool (the spool thread), and the spool to the ledger (the sender
thread, which also heartbeats the planned trial). A mixin, so the client keeps its calls.

``log`` converts and checks the values and appends one record (tuples, which the garbage
collector stops tracking: :mod:`trainer_hooks.client.points`) to a deque: a few
microseconds per metric. The spool thread encodes what has piled up into the API's
columnar JSON and commits it every ``spool_interval`` seconds, or sooner when a tenth
of ``max_batch_points`` (at most half of ``max_buffer_points``) are waiting, so that a
fast logger's first points reach an idle ledger at once; when the deque holds
more than ``max_buffer_points`` (the disk cannot keep up) ``log`` writes to the spool
itself instead of dropping anything. Those bytes are what the ledger gets: the sender
sends a committed block from memory, and the spool file is the durable copy, read only
for what is not in memory (after a restart, or past the spool's memory budget) and kept
until the ledger acknowledged it (:mod:`trainer_hooks.client.spool`, "Bodies from
memory"). The sender replays the spool in order
(:func:`trainer_hooks.client.delivery.deliver`) with exponential backoff on network
errors, timeouts and 5xx, and stops for good on a 4xx (a revoked token, say): the
error is logged once, kept in :attr:`LedgerClient.error`, and the data stays in the spool
for ``lineage spool flush``.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainer_hooks.client.delivery import (
    HEARTBEAT_INTERVAL_S,
    Backoff,
    LedgerRejected,
    NotPlanned,
    Transport,
    Unavailable,
    deliver,
    send_heartbeat,
)
from trainer_hooks.client.points import Record, Row, encode_columns, step_rows

if TYPE_CHECKING:
    from trainer_hooks.client.spool import Spool

log = logging.getLogger("trainer_hooks.client")


class SpoolPipeline:
    """The spool and sender threads' side of a :class:`~trainer_hooks.client.client.LedgerClient`
    (which sets every attribute below in its constructor)."""

    active: bool
    base_url: str
    spool: Spool
    points_sent: int
    error: LedgerRejected | None
    max_batch_points: int
    spool_interval: float
    backoff: tuple[float, float]
    _transport: Transport
    _buffer: collections.deque[Record | list[Row]]
    _side: collections.deque[list[Row]]
    _drained: int
    _spool_lock: threading.RLock
    _spool_wake: threading.Event
    _send_wake: threading.Event
    _closing: threading.Event
    _stop_sending: threading.Event
    _closed: bool
    _unreachable_since: float | None
    _beating: bool
    _last_beat: float
    _appended: int
    _wake_at: int
    max_buffer_points: int
    system_points: int
    _last_step: int
    nonfinite_dropped: int

    def _push(self, count: int, item: Record | list[Row] | None, dropped: int) -> None:
        if self._closed:
            raise RuntimeError("the LedgerClient is closed")
        if dropped:
            self.nonfinite_dropped += dropped
        if not count:
            return
        self._buffer.append(item)  # type: ignore[arg-type]
        self._appended += count
        if self._appended - self._drained >= self._wake_at:
            self._wake_spooler()

    def _wake_spooler(self) -> None:
        if self._appended - self._drained >= self.max_buffer_points:
            self._spool_buffer()  # the disk is behind: spool here rather than drop or grow
        else:
            self._spool_wake.set()

    def _log_system(self, values: Mapping[str, float]) -> None:
        """The sampler's thread: one sample at the step last logged."""
        rows, _ = step_rows(self._last_step, values, None, time.time())
        if rows and not self._closed:
            self._side.append(rows)
            self.system_points += len(rows)

    def _append_op(self, kind: str, body: Any) -> None:
        if not self.active:
            return
        if self._closed:
            raise RuntimeError("the LedgerClient is closed")
        with self._spool_lock:  # ops stay in the order they were made in: the points before them first
            self._spool_buffer()
            self.spool.append(kind, body)
        self._send_wake.set()

    def _spool_buffer(self) -> None:
        """Move everything in the deque to the spool, in order (one transaction)."""
        with self._spool_lock:
            chunks: list[tuple[bytes, int]] = []
            count = drained = 0
            side: list[list[Row]] = []
            taken: list[Record | list[Row]] = []
            try:
                while self._side:
                    side.append(self._side.popleft())
                    count += len(side[-1])
                pending: list[Record | list[Row]] = list(side)
                while self._buffer:
                    item = self._buffer.popleft()
                    taken.append(item)
                    pending.append(item)
                    n = len(item[3]) if type(item) is tuple else len(item)  # a record's values, or rows
                    count += n
                    drained += n
                    if count >= self.max_batch_points:
                        chunks.append(encode_columns(pending))
                        pending, count = [], 0
                if pending:
                    chunks.append(encode_columns(pending))
                self.spool.append_points(chunks)
            except BaseException:  # a full disk, a SIGTERM's SystemExit: the rows go back, in order
                self._buffer.extendleft(reversed(taken))
                self._side.extendleft(reversed(side))
                raise
            self._drained += drained
        if chunks:
            self._send_wake.set()

    def _spool_loop(self) -> None:
        while not self._closing.is_set():
            self._spool_wake.wait(self.spool_interval)
            self._spool_wake.clear()
            try:
                self._spool_buffer()
            except Exception:  # a full disk, say: keep the points in memory and retry
                log.exception("ledger: cannot write the spool %s", self.spool.path)

    def _send_loop(self) -> None:
        backoff = Backoff(*self.backoff)
        while not self._stop_sending.is_set():
            held = self.spool.pending() if self._unreachable_since is not None else (0, 0)

            def sent(count: int, held: tuple[int, int] = held) -> None:
                self._reachable_again(held)
                self._count_sent(count)

            try:
                deliver(
                    self.spool,
                    self._transport,
                    max_points=self.max_batch_points,
                    should_stop=self._stop_sending.is_set,
                    on_sent=sent,
                    final=lambda: self._closed,
                    wake=self._send_wake,
                )
                self._reachable_again(held)
                backoff.reset()
                self._heartbeat()
                self._send_wake.wait(self.spool_interval)
                self._send_wake.clear()
            except NotPlanned:  # the plan may be the next op the run appends
                self._send_wake.wait(self.spool_interval)
                self._send_wake.clear()
            except Unavailable as exc:
                wait = backoff.next()
                if self._unreachable_since is None:
                    self._unreachable_since = time.monotonic()
                    log.warning(
                        "ledger at %s unreachable (%s); the run goes on, its writes are held in %s and retried",
                        self.base_url,
                        exc,
                        self.spool.path,
                    )
                else:
                    log.debug("ledger still unavailable (%s); retrying in %.2f s", exc, wait)
                self._stop_sending.wait(wait)
            except LedgerRejected as exc:
                self.error = exc
                log.error("%s", exc)
                return
            except Exception as exc:  # a bug or a broken spool: never take the trainer down
                log.exception("ledger sender stopped")
                self.error = LedgerRejected(
                    0, f"{type(exc).__name__}: {exc}", kind="sender", spool=str(self.spool.path)
                )
                return

    def _heartbeat(self) -> None:
        """On the sender thread, with the spool delivered: every HEARTBEAT_INTERVAL_S (a third
        of a claim's shorter lease), tell
        the ledger the planned trial still runs (until its finish is delivered). A trial the
        ledger no longer has running (its lease lapsed, or it was finished elsewhere) ends
        the heartbeats with one warning; an unreachable ledger is retried next time."""
        if not self._beating or not self.spool.get("exp_id") or self.spool.get("outcome"):
            return
        now = time.monotonic()
        if now - self._last_beat < self._beat_interval():
            return
        self._last_beat = now
        try:
            running = send_heartbeat(self.spool, self._transport)
        except (Unavailable, LedgerRejected) as exc:
            log.debug("ledger: heartbeat not delivered (%s); retrying in %.0f s", exc, HEARTBEAT_INTERVAL_S)
            return
        if not running:
            self._beating = False
            log.warning(
                "ledger: trial %s is no longer running on the ledger (its lease lapsed, or it was finished "
                "elsewhere); heartbeats stop, the finish is still sent",
                self.spool.get("exp_id"),
            )

    def _beat_interval(self) -> float:
        """Seconds between heartbeats: HEARTBEAT_INTERVAL_S, or a third of a shorter claim's lease."""
        found = self.spool.get("claim")
        lease = json.loads(found).get("lease_s") if found else None
        return min(HEARTBEAT_INTERVAL_S, lease / 3) if lease else HEARTBEAT_INTERVAL_S

    def _count_sent(self, count: int) -> None:
        self.points_sent += count

    def _reachable_again(self, held: tuple[int, int]) -> None:
        """After an outage, the one line saying that delivery resumed (``held``: the spool's
        unsent ops and points when the ledger answered again)."""
        if self._unreachable_since is None:
            return
        away = time.monotonic() - self._unreachable_since
        self._unreachable_since = None
        log.warning(
            "ledger at %s reachable again after %.1f s; delivering the %d points (%d writes) held in the spool",
            self.base_url,
            away,
            held[1],
            held[0],
        )
