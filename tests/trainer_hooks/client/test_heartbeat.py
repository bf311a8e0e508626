"""The trainer client plans its trial as ``running`` and its sender heartbeats it, against
a real ``lineage serve``; a trial the ledger no longer has running stops the heartbeats."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.trainer_hooks.client.conftest import fast_client
from trainer_hooks.client import pipeline as pipeline_module

#: an upper bound for the sender to get a write out, on a busy machine (a deadline, not a timing)
DEADLINE_S = 120.0


def _lease(db: str) -> tuple[str, str, str | None, str]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT status, owner, heartbeat_at, extra FROM trials").fetchone()


def _until(predicate: Any) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        assert time.monotonic() < deadline, "the sender did not get there"
        time.sleep(0.02)


def test_a_planned_trial_is_running_and_heartbeated_until_it_finishes(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    client = fast_client(server.url, tmp_path / "spool", run_id="run-hb")
    client.ensure_project()
    client.plan_trial(hypothesis="wider MLP")
    _until(lambda: _lease(db) is not None and _lease(db)[2] is not None)  # the first beat follows the plan
    status, owner, _, extra = _lease(db)
    assert (status, owner) == ("running", "run-hb")
    assert '"state"' not in extra  # running is the status, not a note in extra
    client.finish_trial(status="keep", core_metric=0.5)
    assert client.close().delivered
    assert _lease(db)[0] == "keep"


def test_a_trial_ended_on_the_ledger_stops_the_heartbeats_with_one_warning(
    serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(pipeline_module, "HEARTBEAT_INTERVAL_S", 0.0)  # a beat every sender round
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    client = fast_client(server.url, tmp_path / "spool")
    client.ensure_project()
    client.plan_trial(hypothesis="h")
    _until(lambda: _lease(db) is not None and _lease(db)[2] is not None)
    with sqlite3.connect(db) as conn:  # what a lapse does: the ledger ended it
        conn.execute("UPDATE trials SET status = 'harness_abort'")
    with caplog.at_level(logging.WARNING, logger="trainer_hooks.client"):
        _until(lambda: not client._beating)
    assert [r.message for r in caplog.records if "no longer running" in r.message][:1]
    report = client.close()
    assert report.error is None  # a lapsed trial never takes the run down
