"""Claims (``ledger.claims.claim``): one write transaction decides a claim, so concurrent
writers claiming one idea under ``duplicate_claims: refuse`` get exactly one claim; under
``warn`` every claim is kept and names the others. Both backends."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from lineage.db import make_engine
from lineage.domain import FailureLabel
from lineage.errors import Conflict, InvalidInput
from lineage.service import Ledger
from lineage.store.base import utcnow

WRITERS = 8
IDEA = "raise the learning rate to 0.05"


def _race(db_url: str, slug: str, hypotheses: list[str]) -> tuple[list[object], list[BaseException]]:
    """Each writer claims its hypothesis at once, on a Ledger of its own; what each got."""
    ledgers = [Ledger(make_engine(db_url)) for _ in hypotheses]
    start = threading.Barrier(len(hypotheses))
    claims: list[object] = []
    refused: list[BaseException] = []

    def run(i: int) -> None:
        try:
            start.wait()
            claims.append(ledgers[i].claims.claim(slug, hypotheses[i], owner=f"agent-{i}"))
        except BaseException as error:  # noqa: BLE001 - sorted by the test
            refused.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(hypotheses))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for ledger in ledgers:
        ledger.close()
    return claims, refused


def test_concurrent_claims_of_one_idea_under_refuse_make_exactly_one_claim(ledger: Ledger, db_url: str) -> None:
    ledger.projects.create_project("p", settings={"duplicate_claims": "refuse"})
    # the same idea, spelled differently: ML spellings are one concept
    spellings = [IDEA, "raise the learning-rate to 0.05", "raise the LR to 0.05", "Raise the learning rate to 0.05"]
    claims, refused = _race(db_url, "p", [spellings[i % 4] for i in range(WRITERS)])
    assert len(claims) == 1, (claims, refused)
    assert len(refused) == WRITERS - 1 and all(isinstance(error, Conflict) for error in refused), refused
    running = ledger.leases.running("p")
    assert len(running) == 1 and len(ledger.trials.list_trials("p")) == 1
    winner = running[0]
    for error in refused:
        assert isinstance(error, Conflict) and error.field == "hypothesis"
        assert error.existing is not None and error.existing["exp_id"] == winner.exp_id
        assert error.existing["owner"] == winner.owner and repr(winner.owner) in str(error)


def test_concurrent_claims_under_warn_are_all_kept_and_name_the_others(ledger: Ledger, db_url: str) -> None:
    ledger.projects.create_project("p")  # warn: the default
    claims, refused = _race(db_url, "p", [IDEA] * WRITERS)
    assert not refused and len(claims) == WRITERS
    leases = ledger.leases.running("p")
    assert sorted(lease.owner for lease in leases) == sorted(f"agent-{i}" for i in range(WRITERS))
    # each claim names every claim committed before it, in commit order
    by_seq = sorted(claims, key=lambda claim: claim.trial.seq)  # type: ignore[attr-defined]
    for n, claim in enumerate(by_seq):
        named = {item.similar.exp_id for item in claim.running}  # type: ignore[attr-defined]
        assert named == {earlier.trial.exp_id for earlier in by_seq[:n]}  # type: ignore[attr-defined]
        assert len(claim.warnings) == n  # type: ignore[attr-defined]


def test_a_claim_is_a_running_trial_with_its_owner_and_a_heartbeat(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    base = ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0}).trial
    claim = ledger.claims.claim("p", "wider MLP", owner="agent-a", notes="4x hidden", extra={"mlp": 4})
    trial = claim.trial
    assert claim.created and trial.status is FailureLabel.RUNNING and trial.parent_exp == base.exp_id  # the tip
    assert (trial.notes, trial.extra) == ("4x hidden", {"mlp": 4})
    assert claim.lease is not None and claim.lease.owner == "agent-a" and claim.lease.heartbeat_at is not None
    assert (claim.tried, claim.running, claim.warnings) == ((), (), ())
    # finishing a claim is an ordinary change of the trial, with the ledger's verdict
    done = ledger.recording.update_trial("p", trial.exp_id, {"status": "auto", "core_metric": 0.9})
    assert done.status is FailureLabel.KEEP and ledger.leases.running("p") == []


def test_a_claim_names_close_trials_tried_and_refuse_never_refuses_for_them(ledger: Ledger) -> None:
    ledger.projects.create_project("p", settings={"duplicate_claims": "refuse"})
    tried = ledger.recording.record_trial("p", {"status": "discard", "core_metric": 2.0, "hypothesis": IDEA}).trial
    ledger.recording.record_trial("p", {"status": "keep", "core_metric": 1.0, "hypothesis": "deeper model"})
    claim = ledger.claims.claim("p", "raise the LR to 0.05", owner="a")
    assert [item.exp_id for item in claim.tried] == [tried.exp_id] and claim.running == ()
    assert claim.warnings and tried.exp_id in claim.warnings[0] and "discard" in claim.warnings[0]
    # the owner's own running claim is no duplicate of its next one
    again = ledger.claims.claim("p", IDEA, owner="a")
    assert again.running == ()
    # another owner's is: refused, nothing stored
    before = ledger.trials.list_trials("p")
    with pytest.raises(Conflict) as info:
        ledger.claims.claim("p", "increase learning rate to 0.05", owner="b")
    assert info.value.existing is not None and info.value.existing["owner"] == "a"
    assert ledger.trials.list_trials("p") == before
    # an unrelated idea is claimed
    assert ledger.claims.claim("p", "cosine warmup schedule", owner="b").created


def test_a_lapsed_claim_frees_its_idea(ledger: Ledger) -> None:
    ledger.projects.create_project("p", settings={"duplicate_claims": "refuse", "running_lease_s": 60})
    first = ledger.claims.claim("p", IDEA, owner="a").trial
    ended = ledger.leases.settle("p", now=utcnow() + timedelta(seconds=61))
    assert [trial.exp_id for trial in ended] == [first.exp_id]
    claim = ledger.claims.claim("p", IDEA, owner="b")
    assert claim.created and claim.running == ()
    assert [item.exp_id for item in claim.tried] == [first.exp_id] and claim.tried[0].status == "harness_abort"


def test_a_retried_claim_with_its_key_is_the_same_claim(ledger: Ledger) -> None:
    ledger.projects.create_project("p", settings={"duplicate_claims": "refuse"})
    first = ledger.claims.claim("p", IDEA, owner="a", idempotency_key="k1")
    again = ledger.claims.claim("p", IDEA, owner="a", idempotency_key="k1")
    assert not again.created and again.trial.exp_id == first.trial.exp_id and again.lease is not None
    with pytest.raises(Conflict) as info:
        ledger.claims.claim("p", IDEA, owner="b", idempotency_key="k1")
    assert info.value.field == "idempotency_key"
    assert len(ledger.trials.list_trials("p")) == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"hypothesis": "", "owner": "a"}, "hypothesis"),
        ({"hypothesis": "the a of", "owner": "a"}, "hypothesis"),
        ({"hypothesis": 7, "owner": "a"}, "hypothesis"),
        ({"hypothesis": IDEA, "owner": None}, "owner"),
        ({"hypothesis": IDEA, "owner": ""}, "owner"),
        ({"hypothesis": IDEA, "owner": "a", "parent_exp": "999"}, "parent_exp"),
        ({"hypothesis": IDEA, "owner": "a", "extra": [1]}, "extra"),
    ],
)
def test_a_bad_claim_names_its_field_and_stores_nothing(ledger: Ledger, kwargs: dict, field: str) -> None:  # type: ignore[type-arg]
    ledger.projects.create_project("p")
    with pytest.raises(InvalidInput) as info:
        ledger.claims.claim("p", **kwargs)
    assert info.value.field == field
    assert ledger.trials.list_trials("p") == []


def test_the_duplicate_claims_setting_is_checked(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    assert ledger.projects.update_project("p", {"duplicate_claims": "refuse"}).settings["duplicate_claims"] == "refuse"
    assert "duplicate_claims" not in ledger.projects.update_project("p", {"duplicate_claims": None}).settings
    for bad in ("never", 1, True):
        with pytest.raises(InvalidInput) as info:
            ledger.projects.update_project("p", {"duplicate_claims": bad})
        assert info.value.field == "duplicate_claims"
    with pytest.raises(InvalidInput):
        ledger.projects.create_project("q", settings={"duplicate_claims": "maybe"})


def test_the_frontier_is_the_best_the_tip_and_who_runs_what(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    empty = ledger.claims.frontier("p")
    assert (empty.best, empty.tip, empty.running) == (None, None, ())
    base = ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0}).trial
    best = ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.5, "hypothesis": "a"}).trial
    # a later keep on a branch from the baseline: the tip, not the best
    tip = ledger.recording.record_trial(
        "p", {"status": "keep", "core_metric": 0.7, "hypothesis": "b", "parent_exp": base.exp_id}
    ).trial
    claim = ledger.claims.claim("p", "try dropout", owner="agent-z").trial
    frontier = ledger.claims.frontier("p")
    assert frontier.best is not None and frontier.best.exp_id == best.exp_id
    assert frontier.tip is not None and frontier.tip.exp_id == tip.exp_id
    assert [(lease.exp_id, lease.owner, lease.hypothesis) for lease in frontier.running] == [
        (claim.exp_id, "agent-z", "try dropout")
    ]
    out = frontier.to_dict()
    assert out["best"]["exp_id"] == best.exp_id and out["running"][0]["heartbeat_at"] is not None
    # two branches fork from the baseline: each has its tip (newest first); the baseline,
    # forked from by a keep, is no tip
    assert [t.exp_id for t in frontier.tips] == [tip.exp_id, best.exp_id]
    assert [t["exp_id"] for t in out["tips"]] == [tip.exp_id, best.exp_id]


def test_the_frontier_lists_ideas_refused_as_duplicates(ledger: Ledger) -> None:
    ledger.projects.create_project("p", settings={"duplicate_claims": "refuse"})
    held = ledger.claims.claim("p", IDEA, owner="a").trial
    before = ledger.trials.list_trials("p")
    with pytest.raises(Conflict):
        ledger.claims.claim("p", "increase learning rate to 0.05", owner="b")
    assert ledger.trials.list_trials("p") == before  # the refused claim stored no trial
    refused = ledger.claims.frontier("p").to_dict()["refused"]
    assert [(r["duplicate_of"], r["owner"], r["idea"]) for r in refused] == [
        (held.exp_id, "b", "increase learning rate to 0.05")
    ]
