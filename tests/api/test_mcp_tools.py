"""The MCP tools as plain functions of a ledger (``api.mcp_tools``): callable one by one
without a server, and listed once, with their roles, in the table the server registers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from api import mcp_tools
from api.mcp_server import build_server
from api.mcp_tools import TOOLS
from lineage.auth import Role
from lineage.errors import NotFound
from lineage.service import Ledger


def test_the_table_lists_each_tool_once_with_the_role_of_what_it_does() -> None:
    assert len({tool.name for tool in TOOLS}) == len(TOOLS)
    writes = {tool.name for tool in TOOLS if tool.role is Role.WRITER}
    assert writes == {
        "create_project",
        "record_trial",
        "record_trials",
        "update_trial",
        "heartbeat",
        "claim_trial",
        "finish_claim",
        "raise_alert",
        "add_note",
    }
    assert all(tool.role in (Role.READER, Role.WRITER) for tool in TOOLS)
    for tool in TOOLS:
        assert getattr(mcp_tools, tool.name) is tool.function
        assert tool.description and "\n    " not in tool.description


def test_a_tool_is_a_function_of_the_ledger(tmp_path: Path) -> None:
    ledger = Ledger.open(str(tmp_path / "t.db"))
    made = mcp_tools.create_project(ledger, "p", "loss", True)
    assert made["created"] is True
    recorded = mcp_tools.record_trial(ledger, "p", {"status": "baseline", "core_metric": 1.0})
    assert recorded["trial"]["exp_id"] == "000" and recorded["project_created"] is False
    assert mcp_tools.get_trial(ledger, "p", "000")["core_metric"] == 1.0
    assert mcp_tools.list_projects(ledger)["projects"][0]["best"] == {"exp_id": "000", "core_metric": 1.0}
    assert mcp_tools.prompt_resource(ledger, "p") == mcp_tools.session_start(ledger, "p")
    with pytest.raises(NotFound):
        mcp_tools.get_trial(ledger, "p", "999")
    ledger.close()


def test_a_null_parent_over_mcp_records_a_root(tmp_path: Path) -> None:
    """The schema lets a client send parent_exp null (its description says it may)."""
    ledger = Ledger.open(str(tmp_path / "t.db"))
    ledger.projects.create_project("p")
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})

    async def call() -> Any:
        async with Client(build_server(ledger)) as client:
            tool = next(tool for tool in (await client.list_tools()).tools if tool.name == "record_trial")
            parent = tool.input_schema["properties"]["trial"]["properties"]["parent_exp"]
            assert {"type": "null"} in parent["anyOf"]
            trial = {"status": "keep", "core_metric": 0.5, "parent_exp": None}
            return await client.call_tool("record_trial", {"project": "p", "trial": trial})

    result = anyio.run(call)
    assert not result.is_error and result.structured_content["trial"]["parent_exp"] == ""
    assert ledger.trials.trial("p", "001").parent_exp == ""
    ledger.close()


def test_resources_list_each_projects_prompt_and_prompt_arguments_are_described(tmp_path: Path) -> None:
    ledger = Ledger.open(str(tmp_path / "t.db"))
    for slug in ("alpha", "beta"):
        ledger.projects.create_project(slug)

    async def listed() -> Any:
        async with Client(build_server(ledger)) as client:
            resources = (await client.list_resources()).resources
            prompts = (await client.list_prompts()).prompts
            read = await client.read_resource(resources[1].uri)
            return resources, prompts, read

    resources, prompts, read = anyio.run(listed)
    assert [str(resource.uri) for resource in resources] == [
        "lineage://projects/alpha/prompt",
        "lineage://projects/beta/prompt",
    ]
    assert all(resource.mime_type == "text/markdown" and resource.description for resource in resources)
    assert "Session start" in read.contents[0].text
    (prompt,) = prompts
    assert {arg.name: bool(arg.description) for arg in prompt.arguments} == {"project": True, "specialist": True}
    assert [arg.name for arg in prompt.arguments if arg.required] == ["project"]

    ledger.tokens.create_token(name="admin", role="admin")  # a ledger with tokens asks for one

    async def listed_without_a_token() -> Any:  # over HTTP without anonymous reads: no slugs
        async with Client(build_server(ledger, anonymous_read=False)) as client:
            return (await client.list_resources()).resources

    assert anyio.run(listed_without_a_token) == []
    ledger.close()


def test_knob_history_and_same_knob_over_mcp(tmp_path: Path) -> None:
    """A knob's values with their trials, and find_similar's same_knob, as the tools answer them."""
    ledger = Ledger.open(str(tmp_path / "t.db"))
    mcp_tools.create_project(ledger, "p", "val_bpb", True)
    for trial in (
        {"status": "baseline", "core_metric": 1.0, "hypothesis": "baseline"},
        {"status": "keep", "core_metric": 0.99, "hypothesis": "increase MATRIX_LR from 0.04 to 0.06"},
        {"status": "discard", "core_metric": 1.01, "hypothesis": "MATRIX_LR 0.06 -> 0.08"},
    ):
        recorded = mcp_tools.record_trial(ledger, "p", trial)
    assert [(t["exp_id"], t["value"], t["same_value"]) for t in recorded["same_knob"]] == [("001", "0.06", False)]
    history = mcp_tools.knob_history(ledger, "p", "matrix_lr")
    assert [one["knob"] for one in history["knobs"]] == ["matrix lr"]
    values = history["knobs"][0]["values"]
    assert [(v["value"], [t["exp_id"] for t in v["trials"]]) for v in values] == [("0.06", ["001"]), ("0.08", ["002"])]
    assert values[1]["trials"][0]["status"] == "discard"
    assert mcp_tools.knob_history(ledger, "p") == history | {"knob": None}  # every knob: this project has one
    found = mcp_tools.find_similar(ledger, "p", "try MATRIX_LR 0.06 -> 0.08 again")
    assert [(t["exp_id"], t["same_value"]) for t in found["same_knob"]] == [("001", False), ("002", True)]

    async def call() -> Any:
        async with Client(build_server(ledger)) as client:
            return await client.call_tool("knob_history", {"project": "p", "knob": "__"})

    refused = anyio.run(call)
    assert refused.is_error and "knob" in refused.content[0].text
    ledger.close()
