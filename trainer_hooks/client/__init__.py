"""The ledger's telemetry client: runs inside a training job, talks to the ledger over
HTTP only, and imports neither torch (tensors are accepted, not required) nor ``lineage``.

* :class:`LedgerClient` — plan a trial, log telemetry, raise alerts, finish it (``client``);
* the system metrics sampler it runs (``sysmetrics``);
* the durable per-run spool and its replay (``spool``, ``delivery``;
  ``lineage spool flush DIR`` replays spools from the command line, ``cli``);
* the outcome rule, the failure labels and the ledger's answer to a finish (``outcome``).

The names below load on first use: ``lineage`` loads the ``spool`` command
(:mod:`trainer_hooks.client.cli`) through an entry point in every install, and that must
work where the ``trainer`` extra (httpx) is not installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer_hooks.client.client import ClientReport, LedgerClient, default_spool_dir
    from trainer_hooks.client.delivery import LedgerRejected, Unavailable
    from trainer_hooks.client.outcome import (
        FAILURE_LABELS,
        EvalBudgetExceeded,
        TrainBudgetExceeded,
        TrialOutcome,
        decide_status,
        failure_label,
    )
    from trainer_hooks.client.spool import Spool

_HOME = {
    "ClientReport": "client",
    "LedgerClient": "client",
    "default_spool_dir": "client",
    "LedgerRejected": "delivery",
    "Unavailable": "delivery",
    "FAILURE_LABELS": "outcome",
    "EvalBudgetExceeded": "outcome",
    "TrainBudgetExceeded": "outcome",
    "TrialOutcome": "outcome",
    "decide_status": "outcome",
    "failure_label": "outcome",
    "Spool": "spool",
}

__all__ = [
    "FAILURE_LABELS",
    "ClientReport",
    "EvalBudgetExceeded",
    "LedgerClient",
    "LedgerRejected",
    "Spool",
    "TrainBudgetExceeded",
    "TrialOutcome",
    "Unavailable",
    "decide_status",
    "default_spool_dir",
    "failure_label",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
