"""Claims and the frontier on every face: HTTP ``POST .../claims``, ``GET .../running`` and
``GET .../frontier``, the MCP tools ``claim_trial``, ``list_running`` and ``get_frontier``,
and ``lineage claim`` / ``lineage running``: one rule (``ledger.claims``), the same
answers, the same refusals."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from click.testing import CliRunner
from fastapi.testclient import TestClient

from api.cli import cli
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, bearer, new_project, record

P = f"{API}/projects/p"
IDEA = "raise the learning rate to 0.05"


def test_a_claim_over_http_is_a_running_trial_held_by_its_owner(client: TestClient) -> None:
    new_project(client)
    base = record(client, "p", status="baseline", core_metric=1.0).json()["trial"]["exp_id"]
    made = client.post(f"{P}/claims", json={"hypothesis": IDEA, "owner": "agent-a", "notes": "lr 0.04 -> 0.05"})
    assert made.status_code == 201, made.text
    body = made.json()
    trial = body["trial"]
    assert (trial["status"], trial["parent_exp"], trial["notes"]) == ("running", base, "lr 0.04 -> 0.05")
    assert body["lease"]["owner"] == "agent-a" and body["lease"]["heartbeat_at"] is not None
    assert body["created"] is True and body["duplicates"] == {"tried": [], "running": []}
    # warn (the default): a close idea of another owner is kept, and named
    second = client.post(f"{P}/claims", json={"hypothesis": "raise the LR to 0.05", "owner": "agent-b"}).json()
    assert [item["exp_id"] for item in second["duplicates"]["running"]] == [trial["exp_id"]]
    assert second["duplicates"]["running"][0]["owner"] == "agent-a" and second["warnings"]
    # a retry with its key is the same claim (200)
    keyed = {"hypothesis": "cosine schedule", "owner": "agent-c"}
    first = client.post(f"{P}/claims", json=keyed, headers={"Idempotency-Key": "c-1"})
    again = client.post(f"{P}/claims", json=keyed, headers={"Idempotency-Key": "c-1"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["trial"]["exp_id"] == first.json()["trial"]["exp_id"]
    # finishing a claim is a PATCH of its trial, with the ledger's verdict
    done = client.patch(f"{P}/trials/{trial['exp_id']}", json={"status": "auto", "core_metric": 0.9})
    assert done.status_code == 200 and done.json()["status"] == "keep"


def test_a_refused_claim_is_409_naming_the_claim_and_its_owner_and_stores_nothing(client: TestClient) -> None:
    new_project(client)
    changed = client.patch(P, json={"duplicate_claims": "refuse"})
    assert changed.status_code == 200 and changed.json()["settings"]["duplicate_claims"] == "refuse"
    held = client.post(f"{P}/claims", json={"hypothesis": IDEA, "owner": "agent-a"}).json()["trial"]["exp_id"]
    before = client.get(f"{P}/trials").json()
    refused = assert_problem(
        client.post(f"{P}/claims", json={"hypothesis": "raise the learning-rate to 0.05", "owner": "agent-b"}),
        409,
        "hypothesis",
    )
    assert refused["existing"]["exp_id"] == held and refused["existing"]["owner"] == "agent-a"
    assert repr(held) in refused["detail"] and "'agent-a'" in refused["detail"]
    assert client.get(f"{P}/trials").json() == before
    assert_problem(client.patch(P, json={"duplicate_claims": "sometimes"}), 422, "duplicate_claims")


def test_bad_claims_are_422_naming_the_field(client: TestClient) -> None:
    new_project(client)
    for body, field in (
        ({"owner": "a"}, "hypothesis"),
        ({"hypothesis": IDEA}, "owner"),
        ({"hypothesis": "", "owner": "a"}, "hypothesis"),
        ({"hypothesis": "the of a", "owner": "a"}, "hypothesis"),
        ({"hypothesis": IDEA, "owner": ""}, "owner"),
        ({"hypothesis": IDEA, "owner": "a", "parent_exp": "999"}, "parent_exp"),
        ({"hypothesis": IDEA, "owner": "a", "status": "keep"}, "status"),
    ):
        assert_problem(client.post(f"{P}/claims", json=body), 422, field)
    assert_problem(client.post(f"{API}/projects/nope/claims", json={"hypothesis": IDEA, "owner": "a"}), 404)
    assert client.get(f"{P}/trials").json()["items"] == []


def test_a_claim_is_a_write_and_the_frontier_a_read(client: TestClient, token_of) -> None:  # type: ignore[no-untyped-def]
    writer, reader = bearer(token_of("writer")), bearer(token_of("reader"))
    new_project(client, headers=writer)
    claim = {"hypothesis": IDEA, "owner": "a"}
    assert_problem(client.post(f"{P}/claims", json=claim), 401)
    assert_problem(client.post(f"{P}/claims", json=claim, headers=reader), 403)
    assert client.post(f"{P}/claims", json=claim, headers=writer).status_code == 201
    assert client.get(f"{P}/running", headers=reader).status_code == 200
    assert client.get(f"{P}/frontier", headers=reader).status_code == 200


def test_running_and_the_frontier_over_http(client: TestClient) -> None:
    new_project(client)
    assert client.get(f"{P}/frontier").json() == {"best": None, "tip": None, "tips": [], "running": [], "refused": []}
    record(client, "p", status="baseline", core_metric=1.0)
    best = record(client, "p", status="keep", core_metric=0.5).json()["trial"]["exp_id"]
    claimed = client.post(f"{P}/claims", json={"hypothesis": IDEA, "owner": "agent-a"}).json()["trial"]
    running = client.get(f"{P}/running").json()["items"]
    assert [(r["exp_id"], r["owner"], r["hypothesis"]) for r in running] == [(claimed["exp_id"], "agent-a", IDEA)]
    assert running[0]["since"] == claimed["created_at"] and running[0]["heartbeat_at"] is not None
    frontier = client.get(f"{P}/frontier").json()
    assert frontier["best"]["exp_id"] == best == frontier["tip"]["exp_id"] and frontier["running"] == running
    assert_problem(client.get(f"{API}/projects/nope/frontier"), 404)


def test_the_mcp_tools_are_the_same_rule(ledger: Ledger) -> None:
    from api.mcp_server import build_server

    ledger.projects.create_project("p", settings={"duplicate_claims": "refuse"})
    server = build_server(ledger)

    async def call() -> tuple[dict, dict, dict, str]:  # type: ignore[type-arg]
        made = await server.call_tool("claim_trial", {"project": "p", "hypothesis": IDEA, "owner": "agent-a"})
        running = await server.call_tool("list_running", {"project": "p"})
        frontier = await server.call_tool("get_frontier", {"project": "p"})
        try:
            await server.call_tool("claim_trial", {"project": "p", "hypothesis": "raise LR to 0.05", "owner": "b"})
        except Exception as exc:  # the MCP server's tool error, carrying the ledger's JSON
            refusal = str(exc)
        else:
            raise AssertionError("a duplicate claim was accepted")
        texts = (made, running, frontier)
        return (*(json.loads(result.content[0].text) for result in texts), refusal)  # type: ignore[return-value]

    made, running, frontier, refusal = anyio.run(call)
    exp_id = made["trial"]["exp_id"]
    assert made["trial"]["status"] == "running" and made["lease"]["owner"] == "agent-a"
    assert [item["exp_id"] for item in running["items"]] == [exp_id] == [r["exp_id"] for r in frontier["running"]]
    assert '"code": "conflict"' in refusal and '"owner": "agent-a"' in refusal and f'"exp_id": "{exp_id}"' in refusal
    assert len(ledger.trials.list_trials("p")) == 1


def test_lineage_claim_and_running(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("p", settings={"duplicate_claims": "refuse"})
    ledger.close()
    runner = CliRunner()
    made = runner.invoke(cli, ["--db", db, "claim", "-p", "p", "-d", IDEA, "--owner", "agent-a"])
    assert made.exit_code == 0, made.output + made.stderr
    assert made.stdout.startswith("claimed exp_000 for agent-a")
    as_json = runner.invoke(
        cli, ["--db", db, "claim", "-p", "p", "-d", "cosine schedule", "--owner", "agent-a", "--format", "json"]
    )
    assert json.loads(as_json.stdout)["trial"]["status"] == "running"
    refused = runner.invoke(cli, ["--db", db, "claim", "-p", "p", "-d", "raise the LR to 0.05", "--owner", "b"])
    assert refused.exit_code == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "'000'" in refused.stderr and "'agent-a'" in refused.stderr
    bad = runner.invoke(cli, ["--db", db, "claim", "-p", "p", "-d", "the of", "--owner", "b"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: hypothesis")
    shown = runner.invoke(cli, ["--db", db, "running", "-p", "p"])
    assert shown.exit_code == 0 and shown.stdout.count("running: exp_") == 2 and "agent-a" in shown.stdout
    frontier = json.loads(runner.invoke(cli, ["--db", db, "running", "-p", "p", "--format", "json"]).stdout)
    assert [lease["exp_id"] for lease in frontier["running"]] == ["000", "001"] and frontier["best"] is None
