"""A claim belongs to its owner: only the holder heartbeats or finishes it, a claim that
ended takes neither, and a claim's own lease is bounded (``lineage.leases.check_holder``,
``lineage.domain.check_claim_lease``). Every refusal changes nothing. Both backends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lineage.domain import MAX_CLAIM_LEASE_S, MIN_CLAIM_LEASE_S, FailureLabel
from lineage.errors import Conflict, InvalidInput
from lineage.service import Ledger
from lineage.store.base import utcnow

IDEA = "raise the learning rate to 0.05"


def _claimed(ledger: Ledger, **kwargs: object) -> str:
    ledger.projects.create_project("p", lower_is_better=True)
    return ledger.claims.claim("p", IDEA, owner="a", **kwargs).trial.exp_id  # type: ignore[arg-type]


def test_another_owners_heartbeat_is_a_conflict_naming_the_holder_and_changes_nothing(ledger: Ledger) -> None:
    exp_id = _claimed(ledger)
    before = ledger.leases.running("p")
    with pytest.raises(Conflict) as info:
        ledger.leases.heartbeat("p", exp_id, owner="b")
    assert info.value.field == "owner"
    assert info.value.existing == {"exp_id": exp_id, "owner": "a", "status": "running", "notes": ""}
    assert repr(exp_id) in str(info.value) and "'a'" in str(info.value)
    assert ledger.leases.running("p") == before


def test_another_owners_finish_is_a_conflict_and_leaves_the_claim_running(ledger: Ledger) -> None:
    exp_id = _claimed(ledger)
    with pytest.raises(Conflict) as info:
        ledger.claims.finish("p", exp_id, owner="b", changes={"core_metric": 0.5})
    assert info.value.field == "owner" and info.value.existing and info.value.existing["owner"] == "a"
    trial = ledger.trials.trial("p", exp_id)
    assert trial.status is FailureLabel.RUNNING and trial.core_metric is None


def test_the_holders_finish_records_its_result_with_the_ledgers_verdict(ledger: Ledger) -> None:
    exp_id = _claimed(ledger, lease_s=30)
    finished = ledger.claims.finish("p", exp_id, owner="a", changes={"core_metric": 0.5, "notes": "ok"}).trial
    assert finished.status is FailureLabel.KEEP and finished.core_metric == 0.5 and finished.notes == "ok"
    assert ledger.leases.running("p") == []


@pytest.mark.parametrize("action", ["heartbeat", "finish"])
def test_a_finished_claim_takes_no_heartbeat_or_second_finish(ledger: Ledger, action: str) -> None:
    exp_id = _claimed(ledger)
    first = ledger.claims.finish("p", exp_id, owner="a", changes={"status": "discard", "core_metric": 0.9}).trial
    with pytest.raises(Conflict) as info:
        if action == "heartbeat":
            ledger.leases.heartbeat("p", exp_id, owner="a")
        else:
            ledger.claims.finish("p", exp_id, owner="a", changes={"core_metric": 0.1})
    assert info.value.field == "status" and "discard" in str(info.value) and "finished" in str(info.value)
    assert ledger.trials.trial("p", exp_id) == first


def test_a_finish_after_the_lease_lapsed_is_a_conflict_and_the_trial_stays_harness_abort(ledger: Ledger) -> None:
    exp_id = _claimed(ledger, lease_s=MIN_CLAIM_LEASE_S)
    ledger.leases.settle("p", now=utcnow() + timedelta(seconds=MIN_CLAIM_LEASE_S + 1))
    with pytest.raises(Conflict) as info:
        ledger.claims.finish("p", exp_id, owner="a", changes={"core_metric": 0.1})
    assert info.value.field == "status" and "lapsed" in str(info.value)
    trial = ledger.trials.trial("p", exp_id)
    assert trial.status is FailureLabel.HARNESS_ABORT and trial.core_metric is None


def test_a_claims_own_lease_decides_its_lapse_and_is_listed(ledger: Ledger) -> None:
    exp_id = _claimed(ledger, lease_s=20)
    other = ledger.claims.claim("p", "cosine warmup schedule", owner="b").trial.exp_id  # the project's 600 s
    lease = {item.exp_id: item for item in ledger.leases.running("p")}
    assert lease[exp_id].lease_s == 20 and lease[other].lease_s == 600 and lease[exp_id].expires_at
    assert ledger.leases.settle("p", now=utcnow() + timedelta(seconds=10)) == []
    ended = ledger.leases.settle("p", now=utcnow() + timedelta(seconds=21))
    assert [trial.exp_id for trial in ended] == [exp_id] and "lease 20 s" in ended[0].notes
    assert [item.exp_id for item in ledger.leases.running("p")] == [other]


@pytest.mark.parametrize("lease_s", [0, -5, MIN_CLAIM_LEASE_S - 1, MAX_CLAIM_LEASE_S + 1, 3 * 86400, "60", True])
def test_a_lease_outside_its_bounds_is_refused_naming_them_and_stores_nothing(ledger: Ledger, lease_s: object) -> None:
    ledger.projects.create_project("p")
    with pytest.raises(InvalidInput) as info:
        ledger.claims.claim("p", IDEA, owner="a", lease_s=lease_s)  # type: ignore[arg-type]
    assert info.value.field == "lease_s"
    assert f"from {MIN_CLAIM_LEASE_S} to {MAX_CLAIM_LEASE_S}" in str(info.value)
    assert ledger.trials.list_trials("p") == []


def test_a_finish_must_record_an_outcome(ledger: Ledger) -> None:
    exp_id = _claimed(ledger)
    with pytest.raises(InvalidInput) as info:
        ledger.claims.finish("p", exp_id, owner="a", changes={"status": "running"})
    assert info.value.field == "status"
    assert ledger.trials.trial("p", exp_id).status is FailureLabel.RUNNING
