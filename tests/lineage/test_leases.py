"""A running trial's lease: heartbeats keep it running, silence past the project's lease
ends it as ``harness_abort`` with a note, decided from the database (``lineage.leases``).

The clock is passed in (``now=``), never waited for."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from lineage.db import make_engine
from lineage.domain import DEFAULT_LEASE_S, FailureLabel
from lineage.errors import Conflict, InvalidInput
from lineage.service import Ledger


def _running(ledger: Ledger, slug: str = "p", **fields: object) -> str:
    return ledger.recording.record_trial(slug, {"status": "running", **fields}).trial.exp_id


def _later(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def test_a_silent_running_trial_lapses_after_the_lease_with_a_note(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    exp_id = _running(ledger, hypothesis="wider MLP", notes="started by hand")
    assert ledger.leases.settle("p", now=_later(DEFAULT_LEASE_S - 60)) == []
    assert ledger.trials.trial("p", exp_id).status is FailureLabel.RUNNING
    (ended,) = ledger.leases.settle("p", now=_later(DEFAULT_LEASE_S + 60))
    stored = ledger.trials.trial("p", exp_id)
    assert ended.exp_id == exp_id and stored.status is FailureLabel.HARNESS_ABORT
    first, note = stored.notes.split("\n")
    assert first == "started by hand"
    assert note.startswith("lease lapsed: no heartbeat since ") and note.endswith(f"(lease {DEFAULT_LEASE_S} s)")
    assert stored.created_at is not None and stored.created_at[:16] in note  # silent since it was recorded
    assert ledger.leases.running("p") == []


def test_heartbeats_keep_it_running_and_a_late_one_is_a_conflict(ledger: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    ledger.projects.create_project("p")
    exp_id = _running(ledger)
    old = datetime.now(UTC) - timedelta(seconds=DEFAULT_LEASE_S - 30)
    with engine.begin() as conn:  # recorded nine and a half minutes ago
        conn.execute(text("UPDATE trials SET created_at = :t, updated_at = :t"), {"t": ledger.store.db_time(old)})
    lease = ledger.leases.heartbeat("p", exp_id, owner="run-1")
    assert lease.owner == "run-1" and lease.heartbeat_at is not None
    assert ledger.leases.settle("p", now=_later(60)) == []  # the heartbeat, not the record, counts
    assert ledger.leases.settle("p", now=_later(DEFAULT_LEASE_S + 1)) != []
    with pytest.raises(Conflict) as info:
        ledger.leases.heartbeat("p", exp_id)
    assert info.value.field == "status" and "harness_abort" in str(info.value)


def test_the_project_sets_its_lease(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    project = ledger.projects.update_project("p", {"running_lease_s": 60})
    assert project.settings["running_lease_s"] == 60
    exp_id = _running(ledger)
    ledger.leases.settle("p", now=_later(120))
    assert ledger.trials.trial("p", exp_id).status is FailureLabel.HARNESS_ABORT
    assert "(lease 60 s)" in ledger.trials.trial("p", exp_id).notes
    assert "running_lease_s" not in ledger.projects.update_project("p", {"running_lease_s": None}).settings
    for bad in (0, 5, "600", True, 10**9):
        with pytest.raises(InvalidInput) as info:
            ledger.projects.update_project("p", {"running_lease_s": bad})
        assert info.value.field == "running_lease_s"
    with pytest.raises(InvalidInput):
        ledger.projects.create_project("q", settings={"running_lease_s": -1})


def test_finishing_a_running_trial_is_an_ordinary_change_and_it_never_lapses_after(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})
    exp_id = _running(ledger)
    finished = ledger.recording.update_trial("p", exp_id, {"status": "keep", "core_metric": 0.5})
    assert finished.status is FailureLabel.KEEP and finished.delta_vs_best == -0.5
    assert ledger.leases.settle("p", now=_later(10 * DEFAULT_LEASE_S)) == []
    best = ledger.trials.best("p")
    assert best is not None and best.exp_id == exp_id


def test_the_reads_that_show_running_trials_end_the_lapsed_ones_first(ledger: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    ledger.projects.create_project("p")
    exp_id = _running(ledger)
    stale = datetime.now(UTC) - timedelta(seconds=DEFAULT_LEASE_S + 60)
    with engine.begin() as conn:  # its trainer went away eleven minutes ago
        conn.execute(text("UPDATE trials SET created_at = :t, updated_at = :t"), {"t": ledger.store.db_time(stale)})
    assert ledger.agent.summary("p").by_status == {"harness_abort": 1}
    assert ledger.trials.trial("p", exp_id).status is FailureLabel.HARNESS_ABORT


def test_the_sweep_ends_lapsed_trials_of_every_project_once_across_ledgers(ledger: Ledger, db_url: str) -> None:
    """Two servers on one database sweep at once: each lapsed trial is ended once (the
    project lock, and the lapse re-read under it)."""
    for slug in ("a", "b"):
        ledger.projects.create_project(slug)
        _running(ledger, slug)
    _running(ledger, "a")
    other = Ledger(make_engine(db_url))
    now = _later(DEFAULT_LEASE_S + 5)
    ended: list[list] = []
    threads = [threading.Thread(target=lambda lg=lg: ended.append(lg.leases.sweep(now=now))) for lg in (ledger, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    other.engine.dispose()
    assert sorted(t.exp_id for batch in ended for t in batch) == ["000", "000", "001"]  # a/000, a/001, b/000
    for slug in ("a", "b"):
        for trial in ledger.tables.stream_trials(slug):
            assert trial.status is FailureLabel.HARNESS_ABORT and trial.notes.count("lease lapsed") == 1
