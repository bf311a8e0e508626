"""The holder rule and the lease bounds (``lineage.leases.check_holder``,
``lineage.domain.check_claim_lease``) on every face: HTTP answers 409/422 problems naming
the claim, its owner and its state (or ``lease_s`` and its bounds), MCP a tool error with
the same JSON, the CLI one line on stderr; nothing changes."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from click.testing import CliRunner
from fastapi.testclient import TestClient

from api.cli import cli
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, new_project

P = f"{API}/projects/p"
IDEA = "raise the learning rate to 0.05"


def _claim(client: TestClient, **body: object) -> str:
    made = client.post(f"{P}/claims", json={"hypothesis": IDEA, "owner": "agent-a", **body})
    assert made.status_code == 201, made.text
    return str(made.json()["trial"]["exp_id"])


def test_another_owners_heartbeat_and_finish_are_409_naming_the_holder(client: TestClient) -> None:
    new_project(client)
    exp_id = _claim(client, lease_s=60)
    before = client.get(f"{P}/running").json()
    beat = assert_problem(client.post(f"{P}/trials/{exp_id}/heartbeat", json={"owner": "agent-b"}), 409, "owner")
    done = assert_problem(
        client.post(f"{P}/claims/{exp_id}/finish", json={"owner": "agent-b", "core_metric": 0.5}), 409, "owner"
    )
    for problem in (beat, done):
        assert problem["existing"]["exp_id"] == exp_id and problem["existing"]["owner"] == "agent-a"
        assert problem["existing"]["status"] == "running" and "'agent-a'" in problem["detail"]
    assert client.get(f"{P}/running").json() == before


def test_the_owners_finish_records_the_result_and_a_second_is_409_naming_the_state(client: TestClient) -> None:
    new_project(client)
    exp_id = _claim(client)
    done = client.post(f"{P}/claims/{exp_id}/finish", json={"owner": "agent-a", "core_metric": 0.5, "notes": "ok"})
    assert done.status_code == 200, done.text
    assert (done.json()["status"], done.json()["core_metric"]) == ("keep", 0.5)
    again = assert_problem(
        client.post(f"{P}/claims/{exp_id}/finish", json={"owner": "agent-a", "core_metric": 0.1}), 409, "status"
    )
    assert again["existing"]["status"] == "keep" and "finished" in again["detail"]
    late = assert_problem(client.post(f"{P}/trials/{exp_id}/heartbeat", json={"owner": "agent-a"}), 409, "status")
    assert late["existing"]["owner"] == "agent-a"
    assert client.get(f"{P}/trials/{exp_id}").json()["core_metric"] == 0.5


def test_a_lease_out_of_bounds_is_422_naming_lease_s_and_the_bounds(client: TestClient) -> None:
    new_project(client)
    for lease_s in (0, 9.5, 86401, 3 * 86400):
        problem = assert_problem(
            client.post(f"{P}/claims", json={"hypothesis": IDEA, "owner": "a", "lease_s": lease_s}), 422, "lease_s"
        )
        assert "from 10 to 86400" in problem["detail"]
    assert client.get(f"{P}/trials").json()["items"] == []
    exp_id = _claim(client, lease_s=10)
    assert client.get(f"{P}/running").json()["items"][0]["lease_s"] == 10
    assert client.get(f"{P}/running").json()["items"][0]["exp_id"] == exp_id


def test_mcp_heartbeat_and_finish_of_another_owners_claim_are_tool_errors(ledger: Ledger) -> None:
    from api.mcp_server import build_server

    ledger.projects.create_project("p")
    exp_id = ledger.claims.claim("p", IDEA, owner="agent-a").trial.exp_id
    server = build_server(ledger)

    async def refusals() -> list[str]:
        got = []
        for tool, arguments in (
            ("heartbeat", {"project": "p", "exp_id": exp_id, "owner": "agent-b"}),
            ("finish_claim", {"project": "p", "exp_id": exp_id, "owner": "agent-b", "changes": {"core_metric": 1}}),
            ("claim_trial", {"project": "p", "hypothesis": "cosine schedule", "owner": "b", "lease_s": 0}),
        ):
            try:
                await server.call_tool(tool, arguments)
            except Exception as exc:  # the MCP server's tool error, carrying the ledger's JSON
                got.append(str(exc))
            else:
                raise AssertionError(f"{tool} was accepted")
        return got

    beat, finish, lease = anyio.run(refusals)
    for text in (beat, finish):
        data = json.loads(text[text.index("{") :])
        assert data["code"] == "conflict" and data["field"] == "owner" and data["existing"]["owner"] == "agent-a"
    assert '"field": "lease_s"' in lease and "from 10 to 86400" in lease
    assert [lease.owner for lease in ledger.leases.running("p")] == ["agent-a"]


def test_lineage_heartbeat_and_finish_say_one_line_for_another_owner(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("p")
    exp_id = ledger.claims.claim("p", IDEA, owner="agent-a").trial.exp_id
    ledger.close()
    runner = CliRunner()
    for args in (["heartbeat"], ["finish", "--metric", "0.5"]):
        refused = runner.invoke(cli, ["--db", db, *args, "-p", "p", "--exp", exp_id, "--owner", "agent-b"])
        assert refused.exit_code == 2 and refused.stdout == ""
        assert refused.stderr.count("\n") == 1 and "'agent-a'" in refused.stderr, refused.stderr
    beat = runner.invoke(cli, ["--db", db, "heartbeat", "-p", "p", "--exp", exp_id, "--owner", "agent-a"])
    assert beat.exit_code == 0 and beat.stdout.startswith(f"exp_{exp_id} held by agent-a until ")
    done = runner.invoke(cli, ["--db", db, "finish", "-p", "p", "--exp", exp_id, "--owner", "agent-a", "--metric", "1"])
    assert done.exit_code == 0 and done.stdout.startswith(f"finished exp_{exp_id}: keep 1.0")
    bad = runner.invoke(cli, ["--db", db, "claim", "-p", "p", "-d", "cosine", "--owner", "a", "--lease", "0"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: lease_s") and bad.stderr.count("\n") == 1
