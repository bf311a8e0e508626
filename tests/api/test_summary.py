"""HTTP faces of the progress summary, guardrails and webhooks, and delivery by real servers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
from fastapi.testclient import TestClient

from lineage.monitor.delivery import DeliveryPolicy
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, bearer, new_project, record
from tests.lineage.webhook_receiver import Receiver


def _crashes(client: TestClient | httpx.Client, n: int, headers: dict[str, str] | None = None) -> None:
    for _ in range(n):
        assert record(client, "p", headers, status="crash").status_code == 201


def test_summary_is_the_service_summary(client: TestClient, ledger: Ledger) -> None:
    new_project(client)
    record(client, "p", status="baseline", core_metric=2.0, total_s=60)
    record(client, "p", status="keep", core_metric=1.0, total_s=30)
    _crashes(client, 2)
    response = client.get(f"{API}/projects/p/summary", params={"last": 3})
    assert response.status_code == 200
    body = response.json()
    assert body == json.loads(json.dumps(ledger.agent.summary("p", last_n=3).to_dict()))
    assert (body["crash_streak"], body["time_spent_s"], body["trend"]) == (2, 90.0, "improving")
    assert body["trend_rule"]["stuck_if_no_new_best_within"] == 9


def test_summary_bad_window_and_unknown_project(client: TestClient) -> None:
    new_project(client)
    assert_problem(client.get(f"{API}/projects/p/summary", params={"last": 0}), 422, "last")
    assert_problem(client.get(f"{API}/projects/p/summary", params={"last": "many"}), 422, "last")
    assert_problem(client.get(f"{API}/projects/nope/summary"), 404)


def test_guardrails_are_set_by_a_writer_and_show_in_the_summary(client: TestClient, token_of) -> None:  # type: ignore[no-untyped-def]
    writer, reader = bearer(token_of("writer")), bearer(token_of("reader"))
    new_project(client, headers=writer)
    policy = {"max_crash_streak": 2, "max_trials_without_improvement": None, "budget_hours": 5}
    assert_problem(client.put(f"{API}/projects/p/guardrails", json=policy, headers=reader), 403)
    assert_problem(
        client.put(f"{API}/projects/p/guardrails", json={"max_crash_streak": 0}, headers=writer),
        422,
        "max_crash_streak",
    )
    assert_problem(client.put(f"{API}/projects/p/guardrails", json={"crashes": 2}, headers=writer), 422, "crashes")
    put = client.put(f"{API}/projects/p/guardrails", json=policy, headers=writer)
    assert put.status_code == 200 and put.json() == {"policy": {**policy, "budget_hours": 5.0}, "tripped": []}
    _crashes(client, 2, writer)
    tripped = client.get(f"{API}/projects/p/guardrails").json()["tripped"]
    assert [t["name"] for t in tripped] == ["crash_streak"] and tripped[0]["since_exp_id"] == "001"
    summary = client.get(f"{API}/projects/p/summary").json()
    assert summary["guardrails"]["tripped"] == tripped
    prompt = client.get(f"{API}/projects/p/prompt", params={"specialist": "s"}).text
    assert "GUARDRAIL TRIPPED: 2 consecutive crashes" in prompt
    page = client.get("/projects/p").text
    assert "Guardrail tripped" in page and 'data-guardrail="crash_streak"' in page


def test_hooks_need_an_admin_and_show_the_secret_once(client: TestClient, token_of) -> None:  # type: ignore[no-untyped-def]
    admin, writer = bearer(token_of("admin")), bearer(token_of("writer"))
    new_project(client, headers=writer)
    hook = {"url": "https://example.com/hook", "events": ["new_best"], "format": "slack"}
    assert_problem(client.post(f"{API}/projects/p/hooks", json=hook), 401)
    assert_problem(client.post(f"{API}/projects/p/hooks", json=hook, headers=writer), 403)
    assert_problem(
        client.post(f"{API}/projects/p/hooks", json={**hook, "url": "ftp://example.com/x"}, headers=admin), 422, "url"
    )
    assert_problem(
        client.post(f"{API}/projects/p/hooks", json={**hook, "events": ["exploded"]}, headers=admin), 422, "events[0]"
    )
    created = client.post(f"{API}/projects/p/hooks", json=hook, headers=admin)
    assert created.status_code == 201 and created.json()["secret"].startswith("whsec_")
    assert created.headers["cache-control"] == "no-store"
    listed = client.get(f"{API}/projects/p/hooks", headers=admin).json()
    assert [h["url"] for h in listed] == [hook["url"]] and "secret" not in listed[0]
    assert listed[0]["events"] == ["new_best"] and listed[0]["format"] == "slack"
    assert client.delete(f"{API}/projects/p/hooks/{listed[0]['id']}", headers=admin).status_code == 204
    assert_problem(client.delete(f"{API}/projects/p/hooks/{listed[0]['id']}", headers=admin), 404, "hook_id")


def test_a_server_delivers_in_the_background_and_a_restarted_one_finishes(
    serve,
    ledger: Ledger,
    db_url: str,
    token_of,  # type: ignore[no-untyped-def]
) -> None:
    """The receiver is down while the first server runs: the event waits in the outbox,
    and a server started later sends it once the receiver is up.

    No step depends on how fast the machine is: the attempts are unlimited (with the
    default 8, fast retries could exhaust them before the first server stops, leaving
    nothing for the second to send), and every wait is on a condition with a deadline
    longer than a claim's lease (a server killed mid-claim leaves one that must lapse)."""
    admin = bearer(token_of("admin"))
    env = {
        "LINEAGE_HOOK_POLL_S": "0.1",
        "LINEAGE_HOOK_BACKOFF_S": "0.1",
        "LINEAGE_HOOK_MAX_BACKOFF_S": "0.2",
        "LINEAGE_HOOK_TIMEOUT_S": "1",
        "LINEAGE_HOOK_MAX_ATTEMPTS": "1000000",
        "LINEAGE_HOOK_PRIVATE_TARGETS": "1",  # the receiver listens on loopback
    }
    patience = DeliveryPolicy(timeout_s=1).lease_s + 30
    receiver = Receiver("ok")
    first = serve(db_url, env=env)
    with httpx.Client(base_url=first.url, headers=admin, timeout=patience) as http:
        new_project(http)
        hook = http.post(f"{API}/projects/p/hooks", json={"url": receiver.url, "events": ["trial_crashed"]}).json()
        assert record(http, "p", status="crash").status_code == 201
        deadline = time.monotonic() + patience
        while http.get(f"{API}/projects/p/hooks").json()[0]["deliveries"]["pending"] != 1 or _attempts(ledger) < 1:
            assert time.monotonic() < deadline, first.output()
            time.sleep(0.05)
    first.stop()
    assert receiver.requests == []
    with receiver:
        second = serve(db_url, env=env)
        (received,) = receiver.wait_for(1, timeout=patience)
        event = json.loads(received.body)
        assert event["type"] == "trial_crashed" and event["trial"]["exp_id"] == "000"
        with httpx.Client(base_url=second.url, headers=admin, timeout=patience) as http:
            deadline = time.monotonic() + patience
            while http.get(f"{API}/projects/p/hooks").json()[0]["deliveries"]["delivered"] != 1:
                assert time.monotonic() < deadline, second.output()
                time.sleep(0.05)
    assert hook["secret"]


def _attempts(ledger: Ledger) -> int:
    from sqlalchemy import text

    with ledger.engine.connect() as conn:
        return int(conn.execute(text("SELECT COALESCE(MAX(attempts), 0) FROM hook_deliveries")).scalar_one())


def test_cli_hook_commands(ledger: Ledger, db_url: str, tmp_path: Path, private_hook_targets: None) -> None:
    from click.testing import CliRunner

    from api.cli import cli

    ledger.projects.create_project("p")
    runner = CliRunner()
    bad = runner.invoke(cli, ["--db", db_url, "hook", "add", "-p", "p", "--url", "gopher://x/"])
    assert bad.exit_code == 2 and "url: must be an http:// or https:// URL" in bad.stderr
    with Receiver("ok") as receiver:
        added = runner.invoke(
            cli, ["--db", db_url, "hook", "add", "-p", "p", "--url", receiver.url, "--events", "trial_crashed"]
        )
        assert added.exit_code == 0 and added.stdout.strip().startswith("whsec_")
        ledger.recording.record_trial("p", {"status": "crash"})
        delivered = runner.invoke(cli, ["--db", db_url, "hook", "deliver"])
        assert delivered.exit_code == 0 and json.loads(delivered.stdout)["delivered"] == 1
        assert len(receiver.wait_for(1)) == 1
    listed = runner.invoke(cli, ["--db", db_url, "hook", "list", "-p", "p", "--format", "json"])
    (hook,) = json.loads(listed.stdout)
    assert hook["deliveries"] == {"pending": 0, "delivered": 1, "failed": 0}
    removed = runner.invoke(cli, ["--db", db_url, "hook", "remove", "-p", "p", str(hook["id"])])
    assert removed.exit_code == 0 and ledger.agent.hooks("p") == []
    guard = runner.invoke(cli, ["--db", db_url, "guardrail", "set", "-p", "p", "--max-crash-streak", "1"])
    assert guard.exit_code == 0 and json.loads(guard.stdout)["max_crash_streak"] == 1
    shown = json.loads(runner.invoke(cli, ["--db", db_url, "guardrail", "show", "-p", "p"]).stdout)
    assert [t["name"] for t in shown["tripped"]] == ["crash_streak"]


def test_mcp_get_summary_is_the_service_summary(ledger: Ledger) -> None:
    import anyio

    from api.mcp_server import build_server

    ledger.projects.create_project("p")
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})
    server = build_server(ledger)

    async def call() -> tuple[str, str]:
        good = await server.call_tool("get_summary", {"project": "p", "last": 3})
        try:
            await server.call_tool("get_summary", {"project": "p", "last": 0})
        except Exception as exc:  # the MCP server's tool error, carrying the ledger's JSON
            return good.content[0].text, str(exc)
        raise AssertionError("a bad window was accepted")

    good, bad = anyio.run(call)
    assert json.loads(good) == json.loads(json.dumps(ledger.agent.summary("p", last_n=3).to_dict()))
    assert '"field": "last"' in bad
