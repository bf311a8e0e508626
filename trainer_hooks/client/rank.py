"""Which process of a distributed job records: rank 0, and no other.

A job started by ``torchrun`` (or accelerate, deepspeed) runs the same script in every
process. Were each to record, a 2-rank run would plan two trials with the same curves,
and both would race to finish. So only the process of rank 0 records; the others do
nothing at all (no trial, no telemetry, no spool file, no threads).

A process's rank is, in order:

1. given: ``LedgerClient(rank=)``, for a loop that knows its own;
2. ``torch.distributed.get_rank()`` once a process group is initialised (torch is never
   imported for this: only read when the script imported it);
3. the ``RANK`` environment variable, which the launchers set in every process;
4. else 0: a single process.

When the client is made before the process group exists and without ``RANK`` (processes
started by ``mp.spawn``, say), it looks again when it plans, and a Hugging Face
``LedgerCallback`` also asks the Trainer (``state.is_world_process_zero``). A client that
finds out late that it is not rank 0 stands down (:meth:`LedgerClient.stand_down`).
"""

from __future__ import annotations

import os
import sys

__all__ = ["process_rank"]


def process_rank(rank: int | None = None) -> int:
    """This process's rank in its job (module doc): ``rank`` when given."""
    if rank is not None:
        return int(rank)
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None:
        try:
            if distributed.is_available() and distributed.is_initialized():
                return int(distributed.get_rank())
        except (RuntimeError, ValueError):  # a group being torn down: fall back to the launcher's word
            pass
    found = os.environ.get("RANK", "").strip()
    try:
        return int(found) if found else 0
    except ValueError:
        raise ValueError(f"the RANK environment variable must be an integer, got {found!r}") from None
