"""What a declared rerun and the noise floor show where a reader looks: ``rerun_of`` on
GET trial (HTTP, MCP ``get_trial``), the noise verdict in the answers of a change (PATCH,
MCP ``update_trial``, a claim's finish), a claim carrying a trainer's plan fields, and
the plateau guardrail's message counting from the first trial within k·σ."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from api.mcp_server import build_server
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, new_project, record


def _two_baselines(client: Any) -> float:
    """A project ``p`` (lower is better) whose baseline ran twice: σ of (1.0, 1.002)."""
    new_project(client, "p", lower_is_better=True)
    record(client, "p", status="baseline", core_metric=1.0)
    assert record(client, "p", status="baseline", core_metric=1.002, rerun_of="000").status_code == 201
    return math.sqrt((0.001**2 * 2) / 1)


def test_get_trial_shows_rerun_of_only_when_declared(client) -> None:  # type: ignore[no-untyped-def]
    _two_baselines(client)
    assert client.get(f"{API}/projects/p/trials/001").json()["rerun_of"] == "000"
    assert "rerun_of" not in client.get(f"{API}/projects/p/trials/000").json()


def test_patch_answers_with_the_noise_verdict(client) -> None:  # type: ignore[no-untyped-def]
    sigma = _two_baselines(client)
    planned = record(client, "p", status="running", hypothesis="qk norm").json()["trial"]["exp_id"]
    changed = client.patch(f"{API}/projects/p/trials/{planned}", json={"status": "auto", "core_metric": 0.9995})
    assert changed.status_code == 200, changed.text
    answer = changed.json()
    assert answer["status"] == "keep" and answer["noise"]["within_noise"] is True
    assert math.isclose(answer["noise"]["sigma"], sigma)
    assert answer["noise"]["text"].startswith(f"within noise: -0.0005 against σ {sigma:.4f} from 1 rerun")
    assert f'rerun_of: "{planned}"' in answer["noise"]["text"]  # a keep within noise: rerun it
    far = client.patch(f"{API}/projects/p/trials/{planned}", json={"core_metric": 0.9})
    assert far.json()["noise"]["within_noise"] is False


def test_a_claim_carries_the_plan_fields_and_its_finish_the_noise_verdict(client) -> None:  # type: ignore[no-untyped-def]
    _two_baselines(client)
    claimed = client.post(
        f"{API}/projects/p/claims",
        json={
            "hypothesis": "rerun the baseline with another seed",
            "owner": "run-7",
            "specialist": "s1",
            "domain": "d",
            "expected_delta": "0",
            "rerun_of": "000",
            "lease_s": 60,
        },
    )
    assert claimed.status_code == 201, claimed.text
    exp_id = claimed.json()["trial"]["exp_id"]
    trial = client.get(f"{API}/projects/p/trials/{exp_id}").json()
    assert (trial["specialist"], trial["domain"], trial["expected_delta"], trial["rerun_of"]) == ("s1", "d", "0", "000")
    finished = client.post(f"{API}/projects/p/claims/{exp_id}/finish", json={"owner": "run-7", "core_metric": 1.0005})
    assert finished.status_code == 200, finished.text
    assert finished.json()["status"] == "discard" and finished.json()["noise"]["within_noise"] is True
    unknown = client.post(f"{API}/projects/p/claims", json={"hypothesis": "x y", "owner": "o", "core_metric": 1})
    assert_problem(unknown, 422, "core_metric")


def test_the_plateau_guardrail_counts_from_the_first_trial_within_noise(client) -> None:  # type: ignore[no-untyped-def]
    _two_baselines(client)  # σ 0.0014, k·σ 0.0028
    assert client.put(f"{API}/projects/p/guardrails", json={"max_trials_without_improvement": 3}).status_code == 200
    record(client, "p", status="keep", core_metric=0.999)  # the best, within noise of 000: counted from 000
    for metric in (1.01, 1.02):
        record(client, "p", status="discard", core_metric=metric)
    tripped = client.get(f"{API}/projects/p/summary").json()["guardrails"]["tripped"]
    assert [trip["name"] for trip in tripped] == ["no_improvement"]
    message = tripped[0]["message"]
    assert message.startswith("no gain beyond noise in 4 trials, counted from the first trial within k·σ 0.00283")
    assert "σ 0.0014 from 1 rerun, k 2; limit 3" in message


def test_the_plateau_message_without_a_noise_floor_is_unchanged(client) -> None:  # type: ignore[no-untyped-def]
    new_project(client, "p", lower_is_better=True)
    client.put(f"{API}/projects/p/guardrails", json={"max_trials_without_improvement": 2})
    for metric in (1.0, 1.1, 1.2):
        record(client, "p", status="discard" if metric > 1 else "keep", core_metric=metric)
    tripped = client.get(f"{API}/projects/p/summary").json()["guardrails"]["tripped"]
    assert tripped[0]["message"] == "no new best in 2 trials (limit 2): change approach or stop"


def test_mcp_get_trial_shows_rerun_of_and_update_trial_the_verdict(tmp_path: Path) -> None:
    ledger = Ledger.open(str(tmp_path / "t.db"))
    ledger.projects.create_project("p", lower_is_better=True)
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.002, "rerun_of": "000"})
    ledger.recording.record_trial("p", {"status": "running", "hypothesis": "qk norm"})

    async def calls() -> list[Any]:
        async with Client(build_server(ledger)) as mcp:
            return [
                await mcp.call_tool("get_trial", {"project": "p", "exp_id": "001"}),
                await mcp.call_tool("get_trial", {"project": "p", "exp_id": "000"}),
                await mcp.call_tool(
                    "update_trial",
                    {"project": "p", "exp_id": "002", "changes": {"status": "keep", "core_metric": 0.9995}},
                ),
            ]

    rerun, original, updated = (json.loads(answer.content[0].text) for answer in anyio.run(calls))
    assert rerun["rerun_of"] == "000" and "rerun_of" not in original
    assert updated["status"] == "keep" and updated["noise"]["within_noise"] is True
    assert updated["noise"]["text"].startswith("within noise: -0.0005")
