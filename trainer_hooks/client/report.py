"""``ClientReport``: what :meth:`~trainer_hooks.client.client.LedgerClient.close` achieved
(points logged and sent, writes still held in the spool, the ledger's answer to the finish)."""

from __future__ import annotations

from dataclasses import dataclass

from trainer_hooks.client.outcome import TrialOutcome


@dataclass(frozen=True)
class ClientReport:
    """What :meth:`LedgerClient.close` achieved."""

    exp_id: str | None
    points_logged: int
    points_sent: int
    pending_ops: int
    pending_points: int
    nonfinite_dropped: int
    spool: str
    error: str | None
    #: the ledger's answer to the finish (None: no finish, or not delivered yet)
    outcome: TrialOutcome | None = None
    #: the spool file was deleted (everything delivered; the retention rule)
    spool_removed: bool = False

    @property
    def delivered(self) -> bool:
        return self.pending_ops == 0 and self.error is None
