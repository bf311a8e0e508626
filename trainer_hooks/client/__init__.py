"""The ledger's telemetry client: runs inside a training job, talks to the ledger over
HTTP only, and imports neither torch (tensors are accepted, not required) nor ``lineage``.

* :class:`LedgerClient` — plan a trial, log telemetry, finish it (``client``);
* the durable per-run spool and its replay (``spool``, ``delivery``;
  ``lineage spool flush DIR`` replays spools from the command line);
* the outcome rule and the failure labels (``outcome``).
"""

from trainer_hooks.client.client import ClientReport, LedgerClient, default_spool_dir
from trainer_hooks.client.delivery import LedgerRejected, Unavailable
from trainer_hooks.client.outcome import (
    FAILURE_LABELS,
    EvalBudgetExceeded,
    TrainBudgetExceeded,
    decide_status,
    failure_label,
)
from trainer_hooks.client.spool import Spool

__all__ = [
    "FAILURE_LABELS",
    "ClientReport",
    "EvalBudgetExceeded",
    "LedgerClient",
    "LedgerRejected",
    "Spool",
    "TrainBudgetExceeded",
    "Unavailable",
    "decide_status",
    "default_spool_dir",
    "failure_label",
]
