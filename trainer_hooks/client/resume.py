"""Taking up a run that was preempted (``LedgerClient(resume=...)``), and attaching a second
process to a run (``LedgerClient(attach=True)``): the same trial, its steps appended,
every point stored exactly once.

A run is known by its run id: the trial it recorded holds it as ``extra["run_id"]``. A
resumed client, before anything of its own:

1. delivers what the run's earlier processes left in their spools (``<run_id>.spool``,
   ``<run_id>.r*.spool`` in the spool folder), each op once (their batch keys), a
   finish among them included, then deletes them; a spool still held by a live process is
   a refusal (two processes would own the trial: attach instead);
2. finds the newest trial of the run id (``GET .../trials?filter=extra.run_id = "..."``)
   and resumes it (``POST .../trials/{exp_id}/resume``, the ledger's resume rule in
   :mod:`lineage.leases`: a running or ``harness_abort`` trial runs on, a finished one is
   refused naming it). ``resume="must"`` with no trial is a refusal; ``"allow"`` plans a
   new one as a fresh run would;
3. writes into a spool of its own under a key prefix of its own (``<run_id>.r<8 hex>``),
   so its batch keys never meet those of the earlier processes, and takes up at the
   ledger's highest step: points at or below it are dropped (wandb's rule: steps only
   increase), so a run restarted from an older checkpoint appends, never duplicates.

An attached client (``<run_id>.a<8 hex>``) only finds the trial and logs into it: it
neither resumes, heartbeats nor finishes it (wandb's shared mode, where an evaluation
process logs into the training run). The ledger must be reachable at the start of either;
anything else is as for any run (the spool, the retries).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from trainer_hooks.client.delivery import LedgerRejected, Transport, deliver_within
from trainer_hooks.client.spool import SPOOL_SUFFIX, Spool

__all__ = ["RESUME_MODES", "TakeUp", "take_up"]

RESUME_MODES = ("allow", "must")


@dataclass(frozen=True, slots=True)
class TakeUp:
    """Where a resumed or attached client starts: the trial (None: ``allow`` found none, a
    new one is planned), the highest step stored (None: none), each series' last value,
    the trial's ``extra`` and the client's own key prefix (its spool's name)."""

    exp_id: str | None
    key_prefix: str
    last_step: int | None = None
    last_values: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def take_up(transport: Transport, directory: Path, run_id: str, mode: str, *, timeout: float) -> TakeUp:
    """Steps 1-3 of the module doc for ``mode`` ``"allow"``, ``"must"`` or ``"attach"``;
    ``timeout`` bounds the delivery of the earlier spools.

    Raises:
        LedgerRejected: no trial of the run (``must``, ``attach``), a finished trial, a
            spool of the run held by a live process, or a refusal of the ledger.
        Unavailable: the ledger cannot be reached (a resume needs it).
    """
    attach = mode == "attach"
    if not attach:
        _deliver_leftovers(transport, directory, run_id, timeout)
    prefix = f"{run_id}.{'a' if attach else 'r'}{uuid.uuid4().hex[:8]}"
    found = _newest_trial(transport, run_id)
    if found is None:
        if mode == "allow":
            return TakeUp(None, prefix)
        raise LedgerRejected(
            404, f"no trial of run {run_id!r} in project {transport.project!r} to {mode} to", kind="resume"
        )
    exp_id = str(found["exp_id"])
    if attach:
        return TakeUp(exp_id, prefix, extra=dict(found.get("extra") or {}))
    url = f"{transport.prefix}/trials/{quote(exp_id, safe='')}/resume"
    resumed = transport.request("resume", "POST", url, json={"owner": run_id}).json()
    return TakeUp(
        exp_id,
        prefix,
        last_step=resumed.get("last_step"),
        last_values={str(k): float(v) for k, v in (resumed.get("last_values") or {}).items()},
        extra=dict(resumed["trial"].get("extra") or {}),
    )


def _deliver_leftovers(transport: Transport, directory: Path, run_id: str, timeout: float) -> None:
    """Send and delete what the run's earlier processes left in their spools (step 1)."""
    paths = [directory / f"{run_id}{SPOOL_SUFFIX}", *sorted(directory.glob(f"{run_id}.r*{SPOOL_SUFFIX}"))]
    for path in paths:
        if not path.exists():
            continue
        spool = Spool(path)
        try:
            if spool.in_use():
                raise LedgerRejected(
                    0,
                    f"run {run_id!r} is live in another process (its spool {path} is held): a second process logs "
                    "into it with attach=True",
                    kind="resume",
                )
            deliver_within(spool, transport, timeout)
            left = spool.pending()[0]
        finally:
            spool.close()
        if left:
            raise LedgerRejected(0, f"{left} ops of {path} were not delivered; the run cannot take up", kind="resume")
        spool.remove()


def _newest_trial(transport: Transport, run_id: str) -> dict[str, Any] | None:
    """The run's newest trial (its ``extra.run_id``), or None."""
    params = {"filter": f'extra.run_id = "{run_id}"', "sort": "-seq", "limit": 1, "count": "false"}
    page = transport.request("resume", "GET", f"{transport.prefix}/trials", params=params, ok_statuses=(404,))
    if page.status_code == 404:  # no such project yet: no trial either
        return None
    items = page.json()["items"]
    return dict(items[0]) if items else None
