"""Recording (``ledger.recording``): every way a trial is written, on one object.

One trial (:meth:`~lineage.service.recording.RecordingUses.record_trial`, ``update_trial``:
:mod:`lineage.service.recording`), a JSON batch, all or nothing (``record_trials``:
:mod:`lineage.service.batch`), and single records that share one commit
(``record_group``: :mod:`lineage.service.group_commit`, which the HTTP server's record
groups call). The batch and the group are the same recording rules as one trial, run
with reads and writes shared across their items; their tests hold them to it.
"""

from __future__ import annotations

from lineage.service.batch import BatchUses
from lineage.service.group_commit import GroupCommitUses


class Recording(BatchUses, GroupCommitUses):
    """record_trial, update_trial, record_trials, record_group."""
