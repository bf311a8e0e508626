"""Access is one rule on every surface: each MCP method (every tool, the session-start
prompt, the prompt resource, the resource list) and the JSON API route that does the same
thing, called by each kind of caller on real ``lineage serve`` processes with anonymous
reads on and off, all held to one table of expectations. MCP goes through the SDK's own
client over Streamable HTTP."""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from api.mcp_tools import TOOLS
from lineage.service import Ledger
from tests.api.conftest import API
from tests.api.test_mcp import _failed, _session_run, _text

pytestmark = pytest.mark.slow

P = f"{API}/projects/p"

#: The expectation table: what each caller gets, by what the call needs and whether the
#: server reads anonymously. The ledger has tokens, so it takes no anonymous writes.
#: ``list``: a listing of the server's shape (no ledger data), open to every caller the
#: server lets in: a bad token, or none where reads need one, is refused at ``initialize``.
EXPECTED: dict[str, dict[tuple[str, bool], str]] = {
    #          (needs,   anonymous read)
    "none": {
        ("list", True): "ok",
        ("list", False): "unauthorized",  # refused at the first request (initialize)
        ("reader", True): "ok",
        ("reader", False): "unauthorized",
        ("writer", True): "unauthorized",
        ("writer", False): "unauthorized",
    },
    "bogus": {  # refused at the first request (initialize), whatever it asks later
        ("list", True): "unauthorized",
        ("list", False): "unauthorized",
        ("reader", True): "unauthorized",
        ("reader", False): "unauthorized",
        ("writer", True): "unauthorized",
        ("writer", False): "unauthorized",
    },
    "reader": {
        ("list", True): "ok",
        ("list", False): "ok",
        ("reader", True): "ok",
        ("reader", False): "ok",
        ("writer", True): "forbidden",
        ("writer", False): "forbidden",
    },
    "writer": {key: "ok" for key in [(n, a) for n in ("list", "reader", "writer") for a in (True, False)]},
    "admin": {key: "ok" for key in [(n, a) for n in ("list", "reader", "writer") for a in (True, False)]},
}


@dataclass(frozen=True)
class Method:
    """One MCP method (``name`` and its params) and the JSON API request that does the
    same (None where the API has none), with the role both need."""

    mcp: str
    params: dict[str, Any]
    needs: str
    http: tuple[str, str, dict[str, Any] | None] | None
    #: trials one successful call stores
    stores: int = 0


#: the running claim the heartbeats keep alive (seeded first, after the baseline 000)
HELD = "001"
#: claims seeded for finish_claim: one per attempt (5 callers x 2 servers x 2 faces)
CLAIMS = 20


def _tool(name: str, arguments: dict[str, Any], needs: str, http: Any, stores: int = 0) -> Method:
    return Method("tools/call", {"name": name, "arguments": arguments}, needs, http, stores)


METHODS = [
    _tool("list_projects", {}, "reader", ("GET", f"{API}/projects", None)),
    _tool(
        "create_project",
        {"slug": "p", "metric_name": "loss", "lower_is_better": True},
        "writer",
        ("POST", f"{API}/projects", {"slug": "new-{n}", "metric_name": "loss"}),  # a new one each time
    ),
    _tool("get_prompt", {"project": "p"}, "reader", ("GET", f"{P}/prompt", None)),
    _tool("get_knowledge", {"project": "p"}, "reader", ("GET", f"{P}/knowledge", None)),
    _tool("list_trials", {"project": "p"}, "reader", ("GET", f"{P}/trials", None)),
    _tool("get_trial", {"project": "p", "exp_id": "000"}, "reader", ("GET", f"{P}/trials/000", None)),
    _tool(
        "record_trial",
        {"project": "p", "trial": {"status": "discard"}},
        "writer",
        ("POST", f"{P}/trials", {"status": "discard"}),
        stores=1,
    ),
    _tool(
        "record_trials",
        {"project": "p", "trials": [{"status": "discard"}]},
        "writer",
        ("POST", f"{P}/trials:batch", {"trials": [{"status": "discard"}]}),
        stores=1,
    ),
    _tool(
        "update_trial",
        {"project": "p", "exp_id": "000", "changes": {"notes": "checked"}},
        "writer",
        ("PATCH", f"{P}/trials/000", {"notes": "checked"}),
    ),
    _tool("find_similar", {"project": "p", "text": "warmup"}, "reader", ("GET", f"{P}/similar?q=warmup", None)),
    _tool(
        "knob_history",
        {"project": "p", "knob": "MATRIX_LR"},
        "reader",
        ("GET", f"{P}/knob-history?knob=MATRIX_LR", None),
    ),
    _tool("get_summary", {"project": "p"}, "reader", ("GET", f"{P}/summary", None)),
    _tool("list_alerts", {"project": "p"}, "reader", ("GET", f"{P}/alerts", None)),
    _tool(
        "raise_alert",
        {"project": "p", "exp_id": "000", "title": "eval is broken"},
        "writer",
        ("POST", f"{P}/trials/000/alerts", {"title": "eval is broken"}),
    ),
    _tool(
        "add_note",
        {"project": "p", "text": "warmup helps", "cites": ["000"]},
        "writer",
        ("POST", f"{P}/notes", {"text": "warmup helps", "cites": ["000"]}),
    ),
    _tool("list_notes", {"project": "p"}, "reader", ("GET", f"{P}/notes", None)),
    _tool(
        "claim_trial",
        {"project": "p", "hypothesis": "cosine schedule", "owner": "agent"},
        "writer",
        ("POST", f"{P}/claims", {"hypothesis": "cosine schedule", "owner": "agent"}),
        stores=1,
    ),
    _tool(
        "heartbeat",
        {"project": "p", "exp_id": HELD, "owner": "agent"},
        "writer",
        ("POST", f"{P}/trials/{HELD}/heartbeat", {"owner": "agent"}),
    ),
    _tool(  # each attempt finishes another of the seeded claims ({claim})
        "finish_claim",
        {"project": "p", "exp_id": "{claim}", "owner": "agent", "changes": {"core_metric": 0.9}},
        "writer",
        ("POST", f"{P}/claims/{{claim}}/finish", {"owner": "agent", "core_metric": 0.9}),
    ),
    _tool("list_running", {"project": "p"}, "reader", ("GET", f"{P}/running", None)),
    _tool("get_frontier", {"project": "p"}, "reader", ("GET", f"{P}/frontier", None)),
    Method(
        "prompts/get", {"name": "session_start", "arguments": {"project": "p"}}, "reader", ("GET", f"{P}/prompt", None)
    ),
    Method("resources/read", {"uri": "lineage://projects/p/prompt"}, "reader", ("GET", f"{P}/prompt", None)),
    Method("resources/list", {}, "list", None),
]


#: the first request of a (handshake-era) MCP client, as the SDK sends it
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _fill(value: Any, claims: Iterator[str]) -> Any:
    """``value`` with each ``{claim}`` replaced by the next seeded claim's exp_id."""
    if isinstance(value, str) and "{claim}" in value:
        return value.replace("{claim}", next(claims))
    if isinstance(value, dict):
        return {key: _fill(item, claims) for key, item in value.items()}
    return value


def _label(method: Method) -> str:
    return f"{method.mcp} {method.params.get('name') or method.params.get('uri') or ''}".strip()


def _refusal(text: str) -> str:
    """The ledger's error code in an MCP error's JSON text ("?" for anything else); the SDK
    prefixes a tool's error with "Error executing tool NAME: "."""
    try:
        return str(json.loads(text[text.index("{") :]).get("code", "?"))
    except (ValueError, AttributeError):
        return "?"


async def _mcp_outcome(session: ClientSession, method: Method, claims: Iterator[str]) -> tuple[str, str]:
    """(outcome, error text): ``ok`` or the ledger's error code."""
    try:
        if method.mcp == "tools/call":
            result = await session.call_tool(method.params["name"], _fill(method.params["arguments"], claims))
            return ("ok", "") if not _failed(result) else (_refusal(_text(result)), _text(result))
        if method.mcp == "prompts/get":
            got = await session.get_prompt(method.params["name"], method.params["arguments"])
            assert "Session start" in got.messages[0].content.text  # type: ignore[union-attr]
        elif method.mcp == "resources/read":
            read = await session.read_resource(method.params["uri"])
            assert "Session start" in read.contents[0].text  # type: ignore[union-attr]
        else:
            await session.list_resources()
    except MCPError as exc:
        return _refusal(exc.error.message), exc.error.message
    return "ok", ""


async def _mcp_outcomes(url: str, token: str | None, claims: Iterator[str]) -> dict[str, tuple[str, str]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    first = httpx.post(f"{url}/mcp", json=INITIALIZE, headers={**headers, **MCP_HEADERS}, timeout=60)
    if first.status_code == 401:  # refused at the first request: every method is
        assert first.headers["www-authenticate"].startswith("Bearer") and first.json()["code"] == "unauthorized"
        with pytest.raises(BaseException):  # noqa: B017 - the SDK's own error for an HTTP 401
            await _sdk_initialize(url, headers)
        return {_label(method): ("unauthorized", first.json()["detail"]) for method in METHODS}
    assert first.status_code == 200, first.text
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.server_info.version == importlib.metadata.version("lineage-ledger")
                return {_label(method): await _mcp_outcome(session, method, claims) for method in METHODS}


async def _sdk_initialize(url: str, headers: dict[str, str]) -> None:
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()


def _http_outcome(response: httpx.Response) -> str:
    if response.status_code < 300:
        return "ok"
    return {401: "unauthorized", 403: "forbidden"}.get(response.status_code, f"HTTP {response.status_code}")


def test_every_mcp_method_and_its_route_follow_one_access_table(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "access.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("p", metric_name="loss")
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0, "hypothesis": "warmup"})
    held = ledger.claims.claim("p", "a long run kept alive", owner="agent").trial.exp_id
    assert held == HELD
    claims = iter([ledger.claims.claim("p", f"idea {i}", owner="agent").trial.exp_id for i in range(CLAIMS)])
    tokens = {role: ledger.tokens.create_token(name=role, role=role)[1] for role in ("reader", "writer", "admin")}
    callers = {"none": None, "bogus": "llt_" + "x" * 43, **tokens}
    stored = 0
    http_calls: list[int] = []
    for anonymous_read in (True, False):
        server = serve(db) if anonymous_read else serve(db, "--no-anonymous-read")
        for who, token in callers.items():
            got = anyio.run(_mcp_outcomes, server.url, token, claims)
            for method in METHODS:
                expected = EXPECTED[who][(method.needs, anonymous_read)]
                outcome, text = got[_label(method)]
                assert outcome == expected, (who, anonymous_read, _label(method), text)
                if outcome == "unauthorized":
                    assert "Authorization: Bearer" in text, text  # the error names the fix
                stored += method.stores if outcome == "ok" else 0
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
                for method in METHODS:
                    if method.http is None:
                        continue
                    verb, path, body = method.http
                    path, body = _fill(path, claims), _fill(body, claims)
                    if body is not None and "slug" in body:
                        body = {**body, "slug": body["slug"].format(n=len(http_calls))}
                    response = http.request(verb, path, json=body)
                    http_calls.append(response.status_code)
                    expected = EXPECTED[who][(method.needs, anonymous_read)]
                    assert _http_outcome(response) == expected, (who, anonymous_read, verb, path, response.text)
                    stored += method.stores if response.status_code < 300 else 0
    # a refused call wrote nothing: the baseline plus one trial per allowed record
    assert ledger.projects.project("p").trial_count == 1 + 1 + CLAIMS + stored
    ledger.close()


def test_the_access_table_holds_every_mcp_tool() -> None:
    listed = {method.params["name"] for method in METHODS if method.mcp == "tools/call"}
    assert listed == {tool.name for tool in TOOLS}
    for method in METHODS:
        if method.mcp == "tools/call":  # the table's role is the one the server registers
            role = next(tool.role for tool in TOOLS if tool.name == method.params["name"])
            assert method.needs == role.value, method.params["name"]


def test_the_prompt_and_the_resource_name_an_unknown_project_like_a_tool(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("p")
    ledger.close()

    async def steps(session: ClientSession) -> list[MCPError]:
        errors = []
        for call in (
            session.get_prompt("session_start", {"project": "nope"}),
            session.read_resource("lineage://projects/nope/prompt"),
        ):
            with pytest.raises(MCPError) as caught:
                await call
            errors.append(caught.value)
        return errors

    for error in anyio.run(_session_run, db, steps):
        data = json.loads(error.error.message)
        assert error.error.code == -32602  # invalid params
        assert data["code"] == "not-found" and data["field"] == "project" and data["known_projects"] == ["p"]
