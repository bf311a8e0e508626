"""The faces of alerts, on both backends: HTTP (raise, list a trial's and a project's,
problems naming the field, roles), the trial page, ``lineage alerts`` and the MCP tool
``list_alerts``, all reading what the others wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from api.cli import cli
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, bearer, new_project, record
from tests.api.test_mcp import _data, _failed, _session_run, _text

ALERTS = f"{API}/projects/p/trials/001/alerts"


@pytest.fixture
def trial(client: TestClient) -> TestClient:
    new_project(client)
    assert record(client, "p", exp_id="001", status="keep", core_metric=1.0).status_code == 201
    assert record(client, "p", exp_id="002", status="discard", core_metric=2.0).status_code == 201
    return client


def test_raise_and_list_alerts_over_http(trial: TestClient) -> None:
    made = trial.post(ALERTS, json={"title": "loss diverging", "text": "NaN\nat lr 3e-4", "level": "warn", "step": 40})
    assert made.status_code == 201, made.text
    alert = made.json()
    assert (alert["exp_id"], alert["level"], alert["title"], alert["step"]) == ("001", "warn", "loss diverging", 40)
    trial.post(f"{API}/projects/p/trials/002/alerts", json={"title": "slow", "level": "info"})
    trial.post(ALERTS, json={"title": "OOM soon", "level": "error"})
    mine = trial.get(ALERTS).json()
    assert [a["title"] for a in mine["items"]] == ["OOM soon", "loss diverging"] and mine["next_before_id"] is None
    everything = trial.get(f"{API}/projects/p/alerts").json()["items"]
    assert [a["title"] for a in everything] == ["OOM soon", "slow", "loss diverging"]
    loud = trial.get(f"{API}/projects/p/alerts", params=[("level", "warn"), ("level", "error")]).json()["items"]
    assert [a["title"] for a in loud] == ["OOM soon", "loss diverging"]
    assert [
        a["title"] for a in trial.get(f"{API}/projects/p/alerts", params={"level": "info,warn"}).json()["items"]
    ] == ["slow", "loss diverging"]
    page = trial.get(f"{API}/projects/p/alerts", params={"limit": 2}).json()
    rest = trial.get(f"{API}/projects/p/alerts", params={"limit": 2, "before_id": page["next_before_id"]}).json()
    assert [a["title"] for a in page["items"] + rest["items"]] == ["OOM soon", "slow", "loss diverging"]
    assert rest["next_before_id"] is None
    one = trial.get(f"{API}/projects/p/alerts", params={"exp_id": "002"}).json()["items"]
    assert [a["title"] for a in one] == ["slow"]


def test_a_retry_with_its_idempotency_key_is_a_200_with_the_stored_alert(trial: TestClient) -> None:
    body = {"title": "diverging", "level": "error", "step": 3, "wall_time": 1.7e9}
    first = trial.post(ALERTS, json=body, headers={"Idempotency-Key": "run-alert-9"})
    again = trial.post(ALERTS, json=body, headers={"Idempotency-Key": "run-alert-9"})
    assert (first.status_code, again.status_code) == (201, 200) and first.json() == again.json()
    other = assert_problem(
        trial.post(ALERTS, json={**body, "step": 4}, headers={"Idempotency-Key": "run-alert-9"}), 409, "idempotency_key"
    )
    assert other["existing"]["step"] == 3 and other["proposed"]["exp_id"] == "001"
    assert len(trial.get(ALERTS).json()["items"]) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "no title"}, "title"),
        ({"title": ""}, "title"),
        ({"title": "a\nb"}, "title"),
        ({"title": "x" * 301}, "title"),
        ({"title": "t", "level": "fatal"}, "level"),
        ({"title": "t", "step": -1}, "step"),
        ({"title": "t", "step": "3"}, "step"),
        ({"title": "t", "wall_time": "now"}, "wall_time"),
        ({"title": "t", "text": "y" * 10_001}, "text"),
        ({"title": "t", "colour": "red"}, "colour"),
    ],
)
def test_a_bad_alert_is_a_problem_naming_its_field(trial: TestClient, body: dict[str, Any], field: str) -> None:
    assert_problem(trial.post(ALERTS, json=body), 422, field)
    assert trial.get(ALERTS).json()["items"] == []


def test_unknown_trials_and_bad_queries_are_problems(trial: TestClient) -> None:
    assert_problem(trial.post(f"{API}/projects/p/trials/999/alerts", json={"title": "t"}), 404, "exp_id")
    assert_problem(trial.get(f"{API}/projects/p/trials/999/alerts"), 404, "exp_id")
    assert_problem(trial.get(f"{API}/projects/nope/alerts"), 404, "project")
    assert_problem(trial.get(f"{API}/projects/p/alerts", params={"level": "loud"}), 422, "level")
    assert_problem(trial.get(f"{API}/projects/p/alerts", params={"limit": 0}), 422, "limit")
    assert_problem(trial.get(f"{API}/projects/p/alerts", params={"before_id": "x"}), 422, "before_id")


def test_readers_list_writers_raise(client: TestClient, token_of) -> None:  # type: ignore[no-untyped-def]
    writer, reader = bearer(token_of("writer")), bearer(token_of("reader"))
    new_project(client, headers=writer)
    record(client, "p", writer, exp_id="001", status="keep")
    assert_problem(client.post(ALERTS, json={"title": "t"}, headers=reader), 403)
    assert_problem(client.post(ALERTS, json={"title": "t"}), 401)
    assert client.post(ALERTS, json={"title": "t"}, headers=writer).status_code == 201
    assert [a["title"] for a in client.get(ALERTS, headers=reader).json()["items"]] == ["t"]


def test_the_trial_page_shows_its_alerts_escaped(trial: TestClient) -> None:
    page = trial.get("/projects/p/trials/001")
    assert page.status_code == 200 and 'id="alerts"' not in page.text  # no alerts, no section
    trial.post(ALERTS, json={"title": "<script>x</script> diverging", "text": "loss & lr", "level": "error", "step": 7})
    page = trial.get("/projects/p/trials/001").text
    section = page.split('id="alerts"', 1)[1].split("</section>", 1)[0]
    assert "&lt;script&gt;x&lt;/script&gt; diverging" in section and "<script>x" not in page
    assert "step 7" in section and "loss &amp; lr" in section and ">error<" in section
    assert 'id="alerts"' not in trial.get("/projects/p/trials/002").text


def test_lineage_alerts_prints_what_http_stored(trial: TestClient, db_url: str) -> None:
    trial.post(ALERTS, json={"title": "diverging", "text": "NaN\nat step 12", "level": "warn", "step": 12})
    trial.post(f"{API}/projects/p/trials/002/alerts", json={"title": "fine"})
    shown = CliRunner().invoke(cli, ["--db", db_url, "alerts", "--project", "p"])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0].startswith("#2  exp_002  INFO ") and lines[0].endswith("fine")
    assert "exp_001  WARN   step 12" in lines[1] and lines[1].endswith("diverging — NaN at step 12")
    as_json = CliRunner().invoke(cli, ["--db", db_url, "alerts", "-p", "p", "--level", "warn", "--format", "json"])
    found = json.loads(as_json.output)
    assert [a["title"] for a in found["items"]] == ["diverging"] and found["next_before_id"] is None
    bad = CliRunner().invoke(cli, ["--db", db_url, "alerts", "-p", "p", "--level", "loud"])
    assert bad.exit_code == 2 and bad.output.startswith("error: level: unknown level 'loud'")
    empty = CliRunner().invoke(cli, ["--db", db_url, "alerts", "-p", "p", "--exp", "002", "--level", "error"])
    assert empty.exit_code == 0 and empty.output == "no alerts\n"


@pytest.mark.slow
def test_list_alerts_over_mcp(tmp_path: Path) -> None:
    db = str(tmp_path / "mcp.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("p")
    ledger.recording.record_trial("p", {"exp_id": "001", "status": "keep"})
    for i in range(3):
        ledger.alerts.record_alert(
            "p", "001", {"title": f"alert {i}", "level": ("info", "warn", "error")[i], "step": i}
        )

    async def steps(session: Any) -> dict[str, Any]:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        page = _data(await session.call_tool("list_alerts", {"project": "p", "limit": 2}))
        rest = _data(await session.call_tool("list_alerts", {"project": "p", "before_id": page["next_before_id"]}))
        loud = _data(await session.call_tool("list_alerts", {"project": "p", "level": ["warn", "error"]}))
        bad = await session.call_tool("list_alerts", {"project": "p", "level": ["loud"]})
        return {"tools": tools, "page": page, "rest": rest, "loud": loud, "bad": (_failed(bad), _text(bad))}

    out = anyio.run(_session_run, db, steps)
    assert "list_alerts" in out["tools"]
    assert [a["title"] for a in out["page"]["items"] + out["rest"]["items"]] == ["alert 2", "alert 1", "alert 0"]
    assert out["rest"]["next_before_id"] is None
    assert [a["level"] for a in out["loud"]["items"]] == ["error", "warn"]
    failed, said = out["bad"]
    assert failed and '"field": "level"' in said
    ledger.close()
