"""Recording finished trials now, in batches (:meth:`TrialBatches.record_trials`): the one
call of :class:`~trainer_hooks.client.client.LedgerClient` that goes past the spool and
answers at once. It is a mixin, so ``LedgerClient.record_trials`` stays where callers
look for it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from trainer_hooks.client.delivery import Backoff, Transport, Unavailable

#: Trials per ``POST ./trials:batch`` request of :meth:`TrialBatches.record_trials` (the server's limit).
BATCH_TRIALS = 1000


class TrialBatches:
    """``record_trials`` of a :class:`~trainer_hooks.client.client.LedgerClient` (which sets
    the attributes below in its constructor)."""

    active: bool
    run_id: str
    backoff: tuple[float, float]
    _transport: Transport

    def record_trials(
        self,
        trials: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
        similar: bool = False,
        attempts: int = 5,
    ) -> list[dict[str, Any]]:
        """Record finished trials now, in order, with ``POST .../trials:batch`` (not
        spooled): each a trial body as ``POST .../trials`` takes, with an optional
        ``idempotency_key`` of its own. Up to :data:`BATCH_TRIALS` go in one request, all
        or nothing; more are sent as consecutive batches (each atomic). Every request has
        an Idempotency-Key (``idempotency_key`` or a new one, ``-<n>`` per batch), so a
        retry after a lost answer never records twice: a dropped connection or a 5xx is
        retried up to ``attempts`` times. Returns one answer per trial (``trial``,
        ``created``, ``is_new_best``, ``similar_prior`` with ``similar``...); a refused
        batch raises :class:`LedgerRejected` naming ``trials[i].field`` (of its batch).
        On a rank other than 0 nothing is sent, and the answer is empty.
        """
        if not self.active:
            return []
        key = idempotency_key or f"{self.run_id}-batch-{uuid.uuid4().hex[:12]}"
        params = {"similar": "true"} if similar else {}
        out: list[dict[str, Any]] = []
        items = [dict(trial) for trial in trials]
        for n, first in enumerate(range(0, len(items), BATCH_TRIALS)):
            chunk = items[first : first + BATCH_TRIALS]
            headers = {"Idempotency-Key": key if len(items) <= BATCH_TRIALS else f"{key}-{n}"}
            backoff = Backoff(*self.backoff)
            for attempt in range(attempts):
                try:
                    response = self._transport.request(
                        "batch",
                        "POST",
                        f"{self._transport.prefix}/trials:batch",
                        json={"trials": chunk},
                        headers=headers,
                        params=params,
                    )
                    break
                except Unavailable:
                    if attempt == attempts - 1:
                        raise
                    time.sleep(backoff.next())
            out.extend(response.json()["results"])
        return out
