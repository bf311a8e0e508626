"""Ending a run's connection: :meth:`ClientClosing.flush`, :meth:`ClientClosing.close` and
:meth:`ClientClosing.stand_down` of :class:`~trainer_hooks.client.client.LedgerClient`
(module doc there: what is delivered, what stays in the spool)."""

from __future__ import annotations

import atexit
import logging
import threading
import time
from typing import TYPE_CHECKING

from trainer_hooks.client.report import ClientReport

if TYPE_CHECKING:
    from trainer_hooks.client.delivery import LedgerRejected, Transport
    from trainer_hooks.client.outcome import TrialOutcome
    from trainer_hooks.client.spool import Spool

__all__ = ["ClientClosing"]

log = logging.getLogger("trainer_hooks.client")


class ClientClosing:
    """flush, close, stand_down (module doc)."""

    active: bool
    rank: int
    spool: Spool
    error: LedgerRejected | None
    points_sent: int
    nonfinite_dropped: int
    close_timeout: float
    keep_spool: bool
    _transport: Transport
    _report: ClientReport | None
    _closed: bool
    _closing: threading.Event
    _stop_sending: threading.Event
    _spool_wake: threading.Event
    _send_wake: threading.Event
    _spooler: threading.Thread
    _sender: threading.Thread

    if TYPE_CHECKING:

        def _stop_sampler(self) -> dict[str, float]: ...

        def _spool_buffer(self) -> None: ...

        @property
        def points_logged(self) -> int: ...

        @property
        def exp_id(self) -> str | None: ...

        @property
        def outcome(self) -> TrialOutcome | None: ...

    def flush(self, timeout: float | None = None) -> bool:
        """Spool what is in memory and wait (at most ``timeout`` s) until the ledger has
        everything; True when it has. Never raises for the network; see :attr:`error`.
        ``flush(timeout=0)`` returns at once with everything logged so far in the spool:
        from then on a SIGKILL loses none of it (the background thread spools every
        ``spool_interval`` seconds anyway)."""
        if not self.active:
            return True  # a rank other than 0 has nothing to deliver
        self._spool_buffer()
        self._send_wake.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.error is None:
            if self.spool.pending()[0] == 0:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return False

    def close(self, timeout: float | None = None) -> ClientReport:
        """Spool everything, send for at most ``timeout`` (default ``close_timeout``) seconds,
        stop the threads, and delete the spool when the ledger has all of it (unless
        ``keep_spool``). Idempotent; what is not sent stays in the spool."""
        if not self.active:  # a rank other than 0: nothing logged, nothing kept
            return ClientReport(None, 0, 0, 0, 0, 0, "", None)
        if self._report is not None:
            return self._report
        if not self._closed:
            self._stop_sampler()
            self._closed = True
            atexit.unregister(self.close)
            self._spool_buffer()
            self.flush(self.close_timeout if timeout is None else timeout)
            self._closing.set()
            self._stop_sending.set()
            self._spool_wake.set()
            self._send_wake.set()
            self._spooler.join(timeout=5)
            self._sender.join(timeout=self._transport_timeout() + 1)
            self._transport.close()
        ops, points = self.spool.pending()
        exp_id, outcome = self.exp_id, self.outcome
        stopped = not self._sender.is_alive() and not self._spooler.is_alive()
        if stopped:
            self.spool.close()
            self.spool.release()
        remove = stopped and ops == 0 and self.error is None and not self.keep_spool
        report = ClientReport(
            exp_id,
            self.points_logged,
            self.points_sent,
            ops,
            points,
            self.nonfinite_dropped,
            str(self.spool.path),
            str(self.error) if self.error else None,
            outcome,
            remove,
        )
        if remove:
            self.spool.remove()
            self._report = report
        if outcome is not None:
            log.info("ledger: %s", outcome.describe())
        if ops and self.error is None:
            log.warning(
                "ledger: %d ops (%d points) not delivered yet; kept in %s (send them with `lineage spool flush %s`)",
                ops,
                points,
                self.spool.path,
                self.spool.path.parent,
            )
        return report

    def stand_down(self, rank: int) -> None:
        """This process turned out to be ``rank``, not the job's rank 0 (the Trainer or the
        process group said so after the client was made): from now on record nothing. The
        threads stop and the spool is deleted unsent; every later call does nothing, and
        so does every client :meth:`next_client` makes."""
        if not self.active or rank == 0:
            return
        self.active = False
        self.rank = rank
        self._stop_sampler()
        self._closed = True
        atexit.unregister(self.close)
        self._closing.set()
        self._stop_sending.set()
        self._spool_wake.set()
        self._send_wake.set()
        self._spooler.join(timeout=5)
        self._sender.join(timeout=self._transport_timeout() + 1)
        self._transport.close()
        self.spool.remove()

    def _transport_timeout(self) -> float:
        timeout = self._transport.http.timeout
        return float(max(t for t in (timeout.connect, timeout.read, timeout.write, timeout.pool, 1.0) if t))
