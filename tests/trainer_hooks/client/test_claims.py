"""The trainer client's ``plan_trial`` claims its idea, against a real ``lineage serve``:
owner and lease, near-duplicates, a refused duplicate, a claim spooled while the ledger
is down, the finish by the owner (and after a lapse), the fallbacks to a plain record,
and ``rerun_of`` with the noise verdict in the run's outcome."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import httpx
import pytest

from lineage.domain import MAX_CLAIM_LEASE_S, MIN_CLAIM_LEASE_S
from tests.api.conftest import API
from tests.trainer_hooks.client.conftest import fast_client, offline_client
from trainer_hooks.client.claims import ClaimRefused, check_lease

#: an upper bound for the ledger to answer a claim on a busy machine (a deadline, not a timing)
DEADLINE_S = 120.0


def _trials(db: str) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT exp_id, status, owner FROM trials ORDER BY seq").fetchall()


def test_the_client_bounds_are_the_ledgers() -> None:
    assert (check_lease(MIN_CLAIM_LEASE_S), check_lease(MAX_CLAIM_LEASE_S)) == (MIN_CLAIM_LEASE_S, MAX_CLAIM_LEASE_S)
    for bad in (0, MIN_CLAIM_LEASE_S - 1, MAX_CLAIM_LEASE_S + 1, "60"):
        with pytest.raises(ValueError, match="lease_s"):
            check_lease(bad)  # type: ignore[arg-type]


def test_plan_trial_claims_with_its_owner_and_lease_and_the_owner_finishes(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    client = fast_client(server.url, tmp_path / "spool", run_id="run-a")
    client.ensure_project()
    client.plan_trial(hypothesis="wider MLP in the value head", owner="agent-7", lease_s=120, specialist="s1")
    answer = client.wait_claim(DEADLINE_S)
    assert answer is not None and answer.claimed and (answer.owner, answer.lease_s) == ("agent-7", 120)
    running = httpx.get(f"{server.url}{API}/projects/p/running").json()["items"]
    assert [(item["exp_id"], item["owner"], item["specialist"]) for item in running] == [
        (answer.exp_id, "agent-7", "s1")
    ]
    client.finish_trial(core_metric=0.5)
    assert client.close().delivered
    assert _trials(db) == [(answer.exp_id, "keep", "agent-7")]
    assert client.outcome is not None and client.outcome.status == "keep"


def test_a_close_idea_in_flight_is_named_and_a_refusing_project_refuses_it(
    serve, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    first = fast_client(server.url, tmp_path / "spool", run_id="run-a")
    first.ensure_project()
    first.plan_trial(hypothesis="increase MATRIX_LR from 0.04 to 0.06")
    held = first.wait_claim(DEADLINE_S)
    assert held is not None and held.claimed
    with caplog.at_level(logging.WARNING, logger="trainer_hooks.client"):
        second = fast_client(server.url, tmp_path / "spool", run_id="run-b")
        second.plan_trial(hypothesis="increase MATRIX_LR from 0.04 to 0.06")
        warned = second.wait_claim(DEADLINE_S)
    assert warned is not None and warned.claimed
    assert [(item["exp_id"], item["owner"]) for item in warned.duplicates["running"]] == [(held.exp_id, "run-a")]
    assert "claimed by 'run-a'" in caplog.text, (caplog.text, warned.warnings)
    second.finish_trial(core_metric=1.0)
    assert second.close().delivered
    httpx.patch(f"{server.url}{API}/projects/p", json={"duplicate_claims": "refuse"}).raise_for_status()
    third = fast_client(server.url, tmp_path / "spool", run_id="run-c")
    third.plan_trial(hypothesis="increase MATRIX_LR from 0.04 to 0.06")
    with pytest.raises(ClaimRefused) as refused:
        third.wait_claim(DEADLINE_S)
    assert refused.value.answer.existing is not None and refused.value.answer.existing["owner"] == "run-a"
    assert "run-a" in str(refused.value)
    report = third.close(timeout=0)
    assert report.error is not None and "409" in report.error and report.pending_ops  # kept for a later flush
    assert [row[0] for row in _trials(db)] == [held.exp_id, warned.exp_id]  # nothing stored for the refused run
    first.finish_trial(core_metric=0.9)
    assert first.close().delivered


def test_a_claim_spooled_while_the_ledger_is_down_is_made_when_it_is_back(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db, port, _, client = offline_client(tmp_path, "run-offline", "bigger batch")
    assert client.wait_claim(0.2) is None  # nothing listens: spooled
    client.finish_trial(core_metric=2.0)
    serve(db, port=port)
    assert client.close().delivered
    assert client.claim is None  # the spool is gone: the outcome is what is left
    assert _trials(db) == [("000", "keep", "run-offline")]


def test_a_finish_after_the_claim_lapsed_still_records_the_result_with_a_warning(
    serve, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    client = fast_client(server.url, tmp_path / "spool", run_id="run-l")
    client.ensure_project()
    client.plan_trial(hypothesis="deeper model, 16 layers", lease_s=60)
    answer = client.wait_claim(DEADLINE_S)
    assert answer is not None and answer.claimed
    with sqlite3.connect(db) as conn:  # what a lapse does while the ledger cannot hear the run
        conn.execute("UPDATE trials SET status = 'harness_abort'")
    with caplog.at_level(logging.WARNING, logger="trainer_hooks.client"):
        client.finish_trial(core_metric=0.7)
        assert client.close().delivered
    assert _trials(db)[0][1] == "keep"
    assert any("lapsed before its finish arrived" in record.message for record in caplog.records)


def test_another_owners_claim_is_not_finished(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    client = fast_client(server.url, tmp_path / "spool", run_id="run-o")
    client.ensure_project()
    client.plan_trial(hypothesis="label smoothing 0.1")
    answer = client.wait_claim(DEADLINE_S)
    assert answer is not None
    with sqlite3.connect(db) as conn:  # someone else holds it now
        conn.execute("UPDATE trials SET owner = 'intruder'")
    client.finish_trial(core_metric=0.7)
    report = client.close(timeout=5)
    assert report.error is not None and "only its owner may finish" in report.error
    assert _trials(db) == [(answer.exp_id, "running", "intruder")]


@pytest.mark.parametrize(("hypothesis", "claim"), [("", True), ("the", True), ("wider MLP", False)])
def test_what_a_claim_cannot_carry_is_planned_as_a_plain_running_record(
    serve, tmp_path: Path, caplog: pytest.LogCaptureFixture, hypothesis: str, claim: bool
) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    client = fast_client(server.url, tmp_path / "spool", run_id="run-f")
    client.ensure_project()
    with caplog.at_level(logging.WARNING, logger="trainer_hooks.client"):
        client.plan_trial(hypothesis=hypothesis, claim=claim)
        answer = client.wait_claim(DEADLINE_S)  # returns at once when the plan made no claim
        client.finish_trial(core_metric=1.0)
        assert client.close().delivered
    if hypothesis == "the":  # the ledger finds no words to compare: planned without a claim
        assert answer is not None and not answer.claimed and "without a claim" in answer.warnings[0]
    else:
        assert answer is None
    assert ("without a claim" in caplog.text) == claim
    assert [row[:2] for row in _trials(db)] == [("000", "keep")]  # its owner: whoever heartbeats it


def test_a_declared_rerun_is_shown_and_the_next_outcome_is_judged_against_noise(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    outcomes = []
    for n, (hypothesis, metric, rerun_of) in enumerate(
        [("baseline recipe", 0.50, None), ("baseline recipe, seed 2", 0.51, "000"), ("warmup 500 steps", 0.505, None)]
    ):
        client = fast_client(server.url, tmp_path / "spool", run_id=f"run-{n}")
        client.ensure_project()
        client.plan_trial(hypothesis=hypothesis, **({"rerun_of": rerun_of} if rerun_of else {}))
        client.finish_trial(core_metric=metric)
        assert client.close().delivered
        outcomes.append(client.outcome)
    shown = httpx.get(f"{server.url}{API}/projects/p/trials/001").json()
    assert shown["rerun_of"] == "000"
    assert outcomes[1] is not None and outcomes[1].within_noise is None  # no σ before the rerun's metric
    last = outcomes[2]
    assert last is not None and last.status == "discard" and last.within_noise is True
    assert last.noise is not None and last.noise == "within noise: +0.0050 against σ 0.0071 from 1 rerun"
    assert last.noise in last.describe()
    assert json.loads(json.dumps(last.to_dict()))["within_noise"] is True
