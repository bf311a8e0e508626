"""``POST .../trials/{exp_id}/heartbeat`` and the MCP ``heartbeat`` tool: one rule
(``ledger.leases.heartbeat``), a writer's call, a 409 naming ``status`` for a trial that
is not running."""

from __future__ import annotations

import json

import anyio
from fastapi.testclient import TestClient

from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, bearer, new_project, record

TRIALS = f"{API}/projects/p/trials"


def test_a_heartbeat_names_the_owner_and_keeps_the_trial_running(client: TestClient, ledger: Ledger) -> None:
    new_project(client)
    exp_id = record(client, "p", status="running", hypothesis="wider MLP").json()["trial"]["exp_id"]
    before = client.get(f"{TRIALS}/{exp_id}").json()
    beat = client.post(f"{TRIALS}/{exp_id}/heartbeat", json={"owner": "run-42@gpu3"})
    assert beat.status_code == 200, beat.text
    lease = beat.json()
    assert (lease["exp_id"], lease["owner"], lease["hypothesis"]) == (exp_id, "run-42@gpu3", "wider MLP")
    assert lease["since"] == before["created_at"] and lease["heartbeat_at"] is not None
    # no body: the owner stays; the trial's fields and revision do not move with a heartbeat
    again = client.post(f"{TRIALS}/{exp_id}/heartbeat")
    assert again.status_code == 200 and again.json()["owner"] == "run-42@gpu3"
    assert client.get(f"{TRIALS}/{exp_id}").json() == before
    assert [lease.exp_id for lease in ledger.leases.running("p")] == [exp_id]


def test_a_heartbeat_for_a_trial_that_is_not_running_is_409_naming_status_and_changes_nothing(
    client: TestClient,
) -> None:
    new_project(client)
    exp_id = record(client, "p", status="running").json()["trial"]["exp_id"]
    finished = client.patch(f"{TRIALS}/{exp_id}", json={"status": "keep", "core_metric": 1.0})
    assert finished.status_code == 200 and finished.json()["status"] == "keep"
    before = client.get(f"{TRIALS}/{exp_id}").json()
    body = assert_problem(client.post(f"{TRIALS}/{exp_id}/heartbeat", json={"owner": "late"}), 409, "status")
    assert "'keep'" in body["detail"] and "not running" in body["detail"]
    assert client.get(f"{TRIALS}/{exp_id}").json() == before
    assert_problem(client.post(f"{TRIALS}/999/heartbeat"), 404, "exp_id")
    assert_problem(client.post(f"{API}/projects/nope/trials/000/heartbeat"), 404)


def test_a_bad_owner_is_422_naming_owner(client: TestClient) -> None:
    new_project(client)
    exp_id = record(client, "p", status="running").json()["trial"]["exp_id"]
    for owner in ("", "x" * 513, 7):
        assert_problem(client.post(f"{TRIALS}/{exp_id}/heartbeat", json={"owner": owner}), 422, "owner")
    assert_problem(client.post(f"{TRIALS}/{exp_id}/heartbeat", json={"owner": "a", "extra": 1}), 422, "extra")


def test_a_heartbeat_is_a_write(client: TestClient, token_of) -> None:  # type: ignore[no-untyped-def]
    writer = bearer(token_of("writer"))
    new_project(client, headers=writer)
    exp_id = record(client, "p", headers=writer, status="running").json()["trial"]["exp_id"]
    assert_problem(client.post(f"{TRIALS}/{exp_id}/heartbeat", headers=bearer(token_of("reader"))), 403)
    assert_problem(client.post(f"{TRIALS}/{exp_id}/heartbeat"), 401)
    assert client.post(f"{TRIALS}/{exp_id}/heartbeat", headers=writer).status_code == 200


def test_the_mcp_heartbeat_is_the_same_rule(ledger: Ledger) -> None:
    from api.mcp_server import build_server

    ledger.projects.create_project("p")
    running = ledger.recording.record_trial("p", {"status": "running", "hypothesis": "h"}).trial.exp_id
    done = ledger.recording.record_trial("p", {"status": "discard", "core_metric": 2.0}).trial.exp_id
    server = build_server(ledger)

    async def call() -> tuple[str, str]:
        good = await server.call_tool("heartbeat", {"project": "p", "exp_id": running, "owner": "agent-1"})
        try:
            await server.call_tool("heartbeat", {"project": "p", "exp_id": done})
        except Exception as exc:  # the MCP server's tool error, carrying the ledger's JSON
            return good.content[0].text, str(exc)
        raise AssertionError("a heartbeat for a finished trial was accepted")

    good, bad = anyio.run(call)
    assert json.loads(good)["owner"] == "agent-1"
    assert '"field": "status"' in bad and "discard" in bad
    assert ledger.trials.trial("p", done).status.value == "discard"


def test_the_lease_is_a_project_field(client: TestClient) -> None:
    new_project(client)
    changed = client.patch(f"{API}/projects/p", json={"running_lease_s": 120})
    assert changed.status_code == 200 and changed.json()["settings"]["running_lease_s"] == 120
    for bad in (5, "long", 10**9):
        assert_problem(client.patch(f"{API}/projects/p", json={"running_lease_s": bad}), 422, "running_lease_s")
    reset = client.patch(f"{API}/projects/p", json={"running_lease_s": None})
    assert "running_lease_s" not in reset.json()["settings"]
