"""An MCP agent from a blank database: ``lineage mcp`` over stdio (the SDK's own client)
and MCP over Streamable HTTP from a real ``lineage serve`` (same tokens and roles as the
JSON API). Schemas an LLM can use, errors naming the field, nothing written on bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession

from lineage.domain import FailureLabel
from lineage.service import Ledger
from lineage.trial_fields import DEFAULT_LIST_FIELDS
from tests.api.test_mcp import _data, _failed, _session_run, _text

pytestmark = pytest.mark.slow


def _schema(tool: Any) -> dict[str, Any]:
    found = getattr(tool, "input_schema", None)
    return found if found is not None else tool.inputSchema


def test_an_agent_starts_from_a_blank_database_over_stdio(tmp_path: Path) -> None:
    db = str(tmp_path / "blank.db")
    Ledger.open(db).close()

    async def steps(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["tools"] = {tool.name: tool for tool in (await session.list_tools()).tools}
        out["empty"] = _data(await session.call_tool("list_projects", {}))
        missing = await session.call_tool("record_trial", {"project": "nano", "trial": {"status": "baseline"}})
        out["missing"] = (_failed(missing), _text(missing))
        made = await session.call_tool(
            "record_trial",
            {
                "project": "nano",
                "metric_name": "val_bpb",
                "lower_is_better": True,
                "trial": {"status": "baseline", "core_metric": 0.998, "hypothesis": "baseline"},
            },
        )
        out["made"] = _data(made)
        again = await session.call_tool(
            "create_project", {"slug": "nano", "metric_name": "val_bpb", "lower_is_better": True}
        )
        out["again"] = _data(again)
        other = await session.call_tool(
            "create_project", {"slug": "nano", "metric_name": "loss", "lower_is_better": True}
        )
        out["other"] = (_failed(other), _text(other))
        records = []
        for status, metric in [("keep", 0.99), ("discard", 0.995), ("crash", 0), ("keep", 0.985)]:
            result = await session.call_tool(
                "record_trial",
                {
                    "project": "nano",
                    "trial": {"status": status, "core_metric": metric, "hypothesis": f"{status} at {metric}"},
                },
            )
            records.append(_data(result))
        out["records"] = records
        bad = {}
        for name, trial in {
            "wrong type": {"status": "keep", "core_metric": "fast"},
            "unknown status": {"status": "exploded", "core_metric": 1.0},
            "unknown field": {"status": "keep", "core_metric": 1.0, "learning_rate": 0.1},
            "not an object": "keep",
        }.items():
            result = await session.call_tool("record_trial", {"project": "nano", "trial": trial})
            bad[name] = (_failed(result), _text(result))
        out["bad"] = bad
        out["unknown project"] = _text(await session.call_tool("get_summary", {"project": "nanoo"}))
        out["listed"] = _data(await session.call_tool("list_trials", {"project": "nano"}))
        out["chosen"] = _data(
            await session.call_tool(
                "list_trials", {"project": "nano", "fields": ["exp_id", "extra"], "status": ["crash"]}
            )
        )
        bad_field = await session.call_tool("list_trials", {"project": "nano", "fields": ["exp_id", "colour"]})
        out["bad field"] = (_failed(bad_field), _text(bad_field))
        out["projects"] = _data(await session.call_tool("list_projects", {}))
        prompts = (await session.list_prompts()).prompts
        out["prompts"] = [p.name for p in prompts]
        got = await session.get_prompt("session_start", {"project": "nano"})
        out["prompt"] = got.messages[0].content.text
        templates = (await session.list_resource_templates()).resource_templates
        out["templates"] = [getattr(t, "uri_template", None) or t.uriTemplate for t in templates]
        read = await session.read_resource("lineage://projects/nano/prompt")
        out["resource"] = read.contents[0].text
        return out

    out = anyio.run(_session_run, db, steps)
    tools = out["tools"]
    assert {"list_projects", "create_project", "record_trial", "get_prompt", "find_similar", "get_summary"} <= set(
        tools
    )
    for tool in tools.values():
        assert tool.description and "\n    " not in tool.description and not tool.description.startswith(" "), tool.name
        for name, schema in _schema(tool).get("properties", {}).items():
            # project and exp_id: the server's instructions say once what they are (tools/list stays small)
            assert schema.get("description") or name in ("project", "exp_id"), f"{tool.name}.{name} has no description"
    trial_schema = _schema(tools["record_trial"])["properties"]["trial"]
    # the agent's fields listed, the others named in the description and taken too
    assert trial_schema["required"] == ["status"] and trial_schema["additionalProperties"] is True
    assert trial_schema["properties"]["status"]["enum"] == [label.value for label in FailureLabel] + ["auto"]
    assert all(field.get("description") for field in trial_schema["properties"].values())
    assert trial_schema["properties"]["core_metric"]["anyOf"] == [{"type": "number"}, {"type": "null"}]
    assert "delta_vs_best" not in trial_schema["properties"]

    assert out["empty"] == {"projects": []}
    failed, text = out["missing"]
    assert failed and "create_project" in text and '"field": "project"' in text and '"known_projects": []' in text
    assert out["made"]["project_created"] is True and out["made"]["trial"]["exp_id"] == "000"
    assert out["again"]["created"] is False
    assert out["other"][0] and "metric_name='val_bpb'" in out["other"][1]
    keep, discard, crash, keep2 = out["records"]
    assert keep["parent_defaulted"] and keep["trial"]["parent_exp"] == "000"
    assert discard["trial"]["parent_exp"] == "001" and crash["trial"]["parent_exp"] == "001"
    assert crash["trial"]["core_metric"] is None and crash["trial"]["delta_vs_best"] is None
    assert keep2["is_new_best"] and keep2["trial"]["parent_exp"] == "001"
    for name, field in [
        ("wrong type", "core_metric"),
        ("unknown status", "status"),
        ("unknown field", "learning_rate"),
        ("not an object", "trial"),
    ]:
        failed, text = out["bad"][name]
        assert failed and field in text, (name, text)
    assert "known projects: nano" in out["unknown project"]
    assert list(out["listed"]["items"][0]) == list(DEFAULT_LIST_FIELDS) and out["listed"]["total"] == 5
    assert out["chosen"]["items"] == [{"exp_id": "003", "extra": {"_reported_metric": 0}}]
    assert out["bad field"][0] and "colour" in out["bad field"][1] and '"field": "fields"' in out["bad field"][1]
    assert out["projects"]["projects"][0]["best"] == {"exp_id": "004", "core_metric": 0.985}
    assert out["prompts"] == ["session_start"] and "lineage://projects/{project}/prompt" in out["templates"]
    assert "exp_004" in out["prompt"] and out["resource"] == out["prompt"]
    ledger = Ledger.open(db)
    assert ledger.projects.project("nano").trial_count == 5  # nothing written by the bad calls
    assert [t.exp_id for t in ledger.trials.chain("nano", "004")] == ["000", "001", "004"]
    ledger.close()


def _post(client: httpx.Client, url: str, method: str, params: dict[str, Any], token: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return client.post(
        f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, headers=headers
    )


def _rpc(client: httpx.Client, url: str, method: str, params: dict[str, Any], token: str | None = None) -> Any:
    response = _post(client, url, method, params, token)
    assert response.status_code == 200, response.text
    return response.json()["result"]


def _refused(client: httpx.Client, url: str, token: str | None = None) -> str:
    """The 401 problem of a request refused before the MCP session sees it."""
    response = _post(client, url, "tools/call", {"name": "list_projects", "arguments": {}}, token)
    assert response.status_code == 401 and response.headers["WWW-Authenticate"].startswith("Bearer"), response.text
    return str(response.json()["detail"])


def _call(client: httpx.Client, url: str, name: str, arguments: dict[str, Any], token: str | None = None) -> Any:
    return _rpc(client, url, "tools/call", {"name": name, "arguments": arguments}, token)


def test_mcp_over_streamable_http_from_lineage_serve_checks_tokens_and_roles(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "shared.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("p", metric_name="loss")
    writer = ledger.tokens.create_token(name="w", role="writer")[1]
    reader = ledger.tokens.create_token(name="r", role="reader")[1]
    server = serve(db)
    with httpx.Client(timeout=30) as client:
        init = _rpc(
            client,
            server.url,
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
        )
        assert init["serverInfo"]["name"] == "lineage-ledger"
        listed = _call(client, server.url, "list_projects", {})  # anonymous reads are on by default
        assert listed["structuredContent"]["projects"][0]["slug"] == "p"
        anonymous = _call(client, server.url, "record_trial", {"project": "p", "trial": {"status": "baseline"}})
        text = anonymous["content"][0]["text"]
        assert anonymous["isError"] and "Authorization: Bearer" in text and "writer token" in text
        forbidden = _call(client, server.url, "record_trial", {"project": "p", "trial": {"status": "baseline"}}, reader)
        assert forbidden["isError"] and '"code": "forbidden"' in forbidden["content"][0]["text"]
        # a bogus token is refused at the first request, before any tool runs
        assert "unknown or revoked" in _refused(client, server.url, "llt_not-a-token")
        assert ledger.projects.project("p").trial_count == 0
        done = _call(
            client,
            server.url,
            "record_trial",
            {"project": "p", "trial": {"status": "baseline", "core_metric": 2.0}},
            writer,
        )
        assert not done["isError"] and done["structuredContent"]["trial"]["exp_id"] == "000"
        # what MCP wrote, the JSON API reads
        assert client.get(f"{server.url}/api/v1/projects/p/trials/000").json()["core_metric"] == 2.0
    closed = serve(db, "--no-anonymous-read")
    with httpx.Client(timeout=30) as client:
        assert "reader token" in _refused(client, closed.url)
        assert not _call(client, closed.url, "list_projects", {}, reader)["isError"]
    ledger.close()


def test_the_tool_error_of_a_pydantic_type_names_the_parameter(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("p")
    ledger.close()

    async def steps(session: ClientSession) -> Any:
        result = await session.call_tool("find_similar", {"project": "p", "text": "x", "limit": "many"})
        return _failed(result), _text(result)

    failed, text = anyio.run(_session_run, db, steps)
    assert failed and "limit" in text
    assert json.dumps  # the error is text for the model to read
