"""``POST .../trials:batch`` on SQLite and PostgreSQL: all or nothing, idempotent per item
and per request, ids in order, parents and deltas as for single records, limits."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from lineage.domain import MAX_BATCH
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, new_project, record

BATCH = f"{API}/projects/p/trials:batch"
TRIALS = f"{API}/projects/p/trials"


def batch(client: TestClient, trials: list[dict[str, Any]], key: str | None = None, **params: Any):  # type: ignore[no-untyped-def]
    headers = {"Idempotency-Key": key} if key else {}
    return client.post(BATCH, json={"trials": trials}, headers=headers, params=params)


def test_a_bad_item_in_the_middle_stores_nothing_and_is_named_by_index(client: TestClient) -> None:
    new_project(client)
    record(client, "p", status="baseline", core_metric=1.0)
    items = [
        {"status": "discard", "core_metric": 0.9},
        {"status": "keep", "core_metric": 0.8},
        {"status": "sideways"},
        {"status": "discard", "core_metric": 0.7},
    ]
    assert_problem(batch(client, items), 422, "trials[2].status")
    # a rule of the ledger (not of the schema): a parent that is not a trial
    items[2] = {"status": "keep", "core_metric": 0.5, "parent_exp": "999"}
    problem = assert_problem(batch(client, items), 422, "trials[2].parent_exp")
    assert "999" in problem["detail"]
    listed = client.get(TRIALS).json()["items"]
    assert [t["exp_id"] for t in listed] == ["000"]
    assert client.get(f"{API}/projects/p").json()["trial_count"] == 1


def test_ids_in_order_parents_and_deltas_as_for_single_records(client: TestClient) -> None:
    new_project(client, lower_is_better=True)
    record(client, "p", status="baseline", core_metric=1.0)
    items = [
        {"status": "keep", "core_metric": 0.9, "hypothesis": "a"},  # new best: parent 000
        {"status": "discard", "core_metric": 0.95, "hypothesis": "b"},  # parent defaults to item 1
        {"status": "keep", "core_metric": 0.8, "hypothesis": "c", "parent_exp": ""},  # a root
        {"status": "crash", "core_metric": 0, "hypothesis": "d"},  # no result; parent item 3
    ]
    response = batch(client, items)
    assert response.status_code == 201, response.text
    out = response.json()
    assert out["created"] == 4 and out["replayed"] is False
    trials = [r["trial"] for r in out["results"]]
    assert [t["exp_id"] for t in trials] == ["001", "002", "003", "004"]
    assert [t["seq"] for t in trials] == [1, 2, 3, 4]
    assert [t["parent_exp"] for t in trials] == ["000", "001", "", "003"]
    assert [r["parent_defaulted"] for r in out["results"]] == [True, True, False, True]
    assert [r["is_new_best"] for r in out["results"]] == [True, False, True, False]
    assert [r["best_before"] for r in out["results"]] == ["000", "001", "001", "003"]
    assert round(trials[0]["delta_vs_best"], 6) == -0.1 and round(trials[1]["delta_vs_best"], 6) == 0.05
    assert trials[3]["core_metric"] is None and trials[3]["extra"]["_reported_metric"] == 0
    assert any("no result" in w for w in out["results"][3]["warnings"])
    # the same as one record at a time would have stored
    assert client.get(f"{TRIALS}/002").json() == trials[1]
    assert client.get(f"{API}/projects/p").json()["trial_count"] == 5
    after = record(client, "p", status="discard", core_metric=0.85).json()
    assert after["trial"]["exp_id"] == "005" and after["trial"]["parent_exp"] == "003"


def test_a_retry_with_the_same_key_is_200_with_the_same_ids_another_body_409(client: TestClient) -> None:
    new_project(client)
    items = [{"status": "baseline", "core_metric": 1.0}, {"status": "discard", "core_metric": 1.2}]
    first = batch(client, items, key="day-1")
    assert first.status_code == 201
    again = batch(client, items, key="day-1")
    assert again.status_code == 200, again.text
    assert again.json()["replayed"] is True and again.json()["created"] == 0
    assert [r["trial"] for r in again.json()["results"]] == [r["trial"] for r in first.json()["results"]]
    assert client.get(f"{API}/projects/p").json()["trial_count"] == 2
    other = [{"status": "baseline", "core_metric": 1.0}, {"status": "discard", "core_metric": 1.3}]
    assert_problem(batch(client, other, key="day-1"), 409, "idempotency_key")
    assert client.get(f"{API}/projects/p").json()["trial_count"] == 2


def test_items_are_idempotent_by_exp_id_and_by_their_own_key(client: TestClient) -> None:
    new_project(client)
    items = [
        {"exp_id": "010", "status": "baseline", "core_metric": 1.0},
        {"status": "discard", "core_metric": 1.1, "idempotency_key": "row-2"},
    ]
    first = batch(client, items)
    assert first.status_code == 201 and [r["trial"]["exp_id"] for r in first.json()["results"]] == ["010", "011"]
    # a later batch holding both again and one new trial: only the new one is stored
    again = batch(client, [*items, {"status": "discard", "core_metric": 1.2}])
    assert again.status_code == 201 and again.json()["created"] == 1
    assert [r["created"] for r in again.json()["results"]] == [False, False, True]
    assert [r["trial"]["exp_id"] for r in again.json()["results"]] == ["010", "011", "012"]
    # the same exp_id with another body: a conflict naming the item, nothing stored
    clash = [{"status": "discard", "core_metric": 2.0}, {"exp_id": "010", "status": "baseline", "core_metric": 9.0}]
    body = assert_problem(batch(client, clash), 409, "trials[1].core_metric")
    assert body["existing"]["core_metric"] == 1.0
    assert client.get(f"{API}/projects/p").json()["trial_count"] == 3
    # a single record with the item's key gets that trial back
    single = record(client, "p", headers={"Idempotency-Key": "row-2"}, status="discard", core_metric=1.1)
    assert single.status_code == 200 and single.json()["trial"]["exp_id"] == "011"


def test_limits_and_shape_are_named(client: TestClient) -> None:
    new_project(client)
    assert_problem(batch(client, [{"status": "discard"}] * (MAX_BATCH + 1)), 422, "trials")
    assert_problem(batch(client, []), 422, "trials")
    assert_problem(client.post(BATCH, json={"items": []}), 422)
    assert_problem(batch(client, [{"status": "discard", "core_metric": "x"}]), 422, "trials[0].core_metric")
    assert client.get(f"{API}/projects/p").json()["trial_count"] == 0
    full = batch(client, [{"status": "discard", "core_metric": float(i)} for i in range(MAX_BATCH)])
    assert full.status_code == 201 and full.json()["created"] == MAX_BATCH


def test_similar_prior_per_item_on_request(client: TestClient) -> None:
    new_project(client)
    items = [
        {"status": "baseline", "core_metric": 1.0, "hypothesis": "raise the learning rate warmup to 500 steps"},
        {"status": "discard", "core_metric": 1.1, "hypothesis": "raise the learning rate warmup to 500 steps"},
    ]
    plain = batch(client, items[:1]).json()["results"][0]
    assert plain["similar_prior"] == []
    out = batch(client, items[1:], similar="true").json()["results"][0]
    assert [s["exp_id"] for s in out["similar_prior"]] == ["000"]


def test_core_batch_is_one_transaction_on_both_backends(ledger: Ledger) -> None:
    ledger.projects.create_project("q")
    result = ledger.recording.record_trials(
        "q", [{"status": "baseline", "core_metric": 1.0}, {"status": "keep", "core_metric": 2.0}], idempotency_key="k"
    )
    assert [r.trial.exp_id for r in result.results] == ["000", "001"]
    replay = ledger.recording.record_trials(
        "q", [{"status": "baseline", "core_metric": 1.0}, {"status": "keep", "core_metric": 2.0}], idempotency_key="k"
    )
    assert replay.replayed and [r.trial.exp_id for r in replay.results] == ["000", "001"]
    assert ledger.projects.project("q").trial_count == 2
