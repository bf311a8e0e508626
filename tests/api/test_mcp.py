"""``lineage mcp`` driven by the MCP SDK's own stdio client: the six tools, backed by the
same service as the HTTP API (what one face writes, the other reads)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.stdio import get_default_environment

from lineage.demo_data import DEMO_PROJECT, DEMO_TRIALS
from lineage.service import Ledger
from tests.api.conftest import ROOT, make_client

pytestmark = pytest.mark.slow


def _lineage_command() -> list[str]:
    script = Path(sys.executable).with_name("lineage")
    if script.exists():
        return [str(script)]
    found = shutil.which("lineage")
    return [found] if found else [sys.executable, "-m", "api.cli"]


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _data(result: Any) -> Any:
    """The structured result (``structured_content`` in mcp 2, ``structuredContent`` in 1)."""
    found = getattr(result, "structured_content", None)
    return found if found is not None else getattr(result, "structuredContent", None)


def _failed(result: Any) -> bool:
    found = getattr(result, "is_error", None)
    return bool(found if found is not None else getattr(result, "isError", False))


def _server_env() -> dict[str, str]:
    """The SDK's safe default environment, plus PYTHONPATH: the SDK passes only a short list
    of variables, so a run that selects a checkout by PYTHONPATH would otherwise start the
    server from whatever checkout is installed."""
    env = get_default_environment()
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


async def _session_run(db: str, steps: Any) -> Any:
    command, *prefix = _lineage_command()
    params = StdioServerParameters(command=command, args=[*prefix, "mcp", "--db", db], cwd=str(ROOT), env=_server_env())
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await steps(session)


def test_mcp_tools_over_stdio(tmp_path: Path) -> None:
    db = str(tmp_path / "mcp.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project(**{**DEMO_PROJECT, "slug": "p"})
    ledger.tables.import_trials("p", iter(DEMO_TRIALS))
    expected_prompt = ledger.agent.render_prompt("p", specialist="agent-1", timestamp="t0")
    expected_head = ledger.agent.render_prompt("p", specialist="agent-1")
    expected_knowledge = ledger.agent.render_knowledge("p")

    async def steps(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["tools"] = sorted(tool.name for tool in (await session.list_tools()).tools)
        out["raw"] = _text(
            await session.call_tool(
                "get_prompt", {"project": "p", "specialist": "agent-1", "timestamp": "t0", "raw": True}
            )
        )
        out["wrapped"] = _text(await session.call_tool("get_prompt", {"project": "p", "specialist": "agent-1"}))
        out["knowledge"] = _text(await session.call_tool("get_knowledge", {"project": "p"}))
        out["knowledge_json"] = json.loads(
            _text(await session.call_tool("get_knowledge", {"project": "p", "format": "json"}))
        )
        trial = {
            "status": "keep",
            "core_metric": 99.0,
            "parent_exp": "004",
            "hypothesis": "via MCP",
            "delta_vs_best": -1000.0,
        }
        first = await session.call_tool("record_trial", {"project": "p", "trial": trial, "idempotency_key": "mcp-1"})
        again = await session.call_tool("record_trial", {"project": "p", "trial": trial, "idempotency_key": "mcp-1"})
        out["first"], out["again"] = _data(first), _data(again)
        out["updated"] = _data(
            await session.call_tool("update_trial", {"project": "p", "exp_id": "006", "changes": {"notes": "checked"}})
        )
        out["got"] = _data(await session.call_tool("get_trial", {"project": "p", "exp_id": "006"}))
        page = _data(await session.call_tool("list_trials", {"project": "p", "limit": 4}))
        rest = _data(
            await session.call_tool("list_trials", {"project": "p", "limit": 4, "cursor": page["next_cursor"]})
        )
        out["listed"] = [t["exp_id"] for t in page["items"] + rest["items"]]
        missing = await session.call_tool("get_trial", {"project": "p", "exp_id": "nope"})
        bad = await session.call_tool("record_trial", {"project": "p", "trial": {"status": "exploded"}})
        out["errors"] = (_failed(missing), _text(missing), _failed(bad), _text(bad))
        return out

    out = anyio.run(_session_run, db, steps)
    assert out["tools"] == [
        "add_note",
        "claim_trial",
        "create_project",
        "find_similar",
        "finish_claim",
        "get_frontier",
        "get_knowledge",
        "get_prompt",
        "get_summary",
        "get_trial",
        "heartbeat",
        "knob_history",
        "list_alerts",
        "list_notes",
        "list_projects",
        "list_running",
        "list_trials",
        "raise_alert",
        "record_trial",
        "record_trials",
        "update_trial",
    ]
    assert out["raw"] == expected_prompt
    assert out["wrapped"].startswith(expected_head) and "Next exp_id: `006`" in out["wrapped"]
    assert out["knowledge"] == expected_knowledge
    assert out["knowledge_json"]["best"]["exp_id"] == "004"
    assert out["first"]["created"] is True and out["again"]["created"] is False
    assert out["first"]["trial"]["exp_id"] == out["again"]["trial"]["exp_id"] == "006"
    best_metric = ledger.trials.trial("p", "004").core_metric
    assert out["first"]["trial"]["delta_vs_best"] == pytest.approx(99.0 - best_metric)  # not the -1000 sent
    assert out["updated"]["notes"] == "checked" == out["got"]["notes"]
    assert out["listed"] == ["006", "005", "004", "003", "002", "001", "000"]  # newest first
    missing_error, missing_text, bad_error, bad_text = out["errors"]
    assert missing_error and '"code": "not-found"' in missing_text and '"field": "exp_id"' in missing_text
    assert bad_error and '"field": "status"' in bad_text
    # what MCP wrote, the HTTP API reads
    with make_client(db) as client:
        assert client.get("/api/v1/projects/p/trials/006").json()["hypothesis"] == "via MCP"
    assert ledger.projects.project("p").trial_count == 7
    ledger.close()


def test_the_server_reports_the_package_version(tmp_path: Path) -> None:
    db = str(tmp_path / "v.db")
    Ledger.open(db).close()

    async def steps(session: ClientSession) -> Any:
        return session.initialize_result

    info = anyio.run(_session_run, db, steps).server_info
    assert info.name == "lineage-ledger"
    assert info.version == importlib.metadata.version("lineage-ledger") != ""
