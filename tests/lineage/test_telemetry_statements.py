"""Telemetry inserts on SQLite reuse one compiled statement for every trial (issue 36).

Python's sqlite3 keeps the last 128 statements of a connection compiled, keyed by their
text. When a trial's id was a literal in the 500-row INSERT, every trial a trainer started
added a new statement of a few hundred kB to that cache, and a long night's RSS kept
rising. This test reads the memory SQLite itself holds (``sqlite3_memory_used``)."""

from __future__ import annotations

import _sqlite3
import ctypes

from lineage import telemetry
from lineage.service import Ledger

POINTS = [
    {"step": step, "name": name, "value": step * 0.5} for step in range(130) for name in ("loss", "lr", "gn", "kl")
]


def _trials_with_telemetry(ledger: Ledger, count: int) -> list[str]:
    ids = []
    for i in range(count):
        exp_id = ledger.recording.record_trial("p", {"status": "keep", "core_metric": 1.0 - i / 100}).trial.exp_id
        ledger.telemetry.ingest_telemetry("p", exp_id, telemetry.rows_from_valid(POINTS))
        ids.append(exp_id)
    return ids


def test_sqlite_memory_stays_flat_over_many_trials(sqlite_ledger: Ledger) -> None:
    used = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    used.restype = ctypes.c_int64
    sqlite_ledger.projects.create_project("p")
    _trials_with_telemetry(sqlite_ledger, 5)
    warm = used()
    _trials_with_telemetry(sqlite_ledger, 60)
    # 60 more trials of 520 points: with a statement per trial, SQLite held tens of MB more
    assert used() - warm < 4 * 2**20, f"SQLite's memory grew by {(used() - warm) / 2**20:.1f} MiB over 60 trials"
