"""DNS rebinding: the server answers only requests naming one of its hosts (``Host``, and
``Origin`` on the JSON API and ``/mcp``): the loopback names by default, more through
``LINEAGE_ALLOWED_HOSTS`` / ``lineage serve --allowed-host``; a foreign one gets a 403
problem naming the setting and changes nothing. The MCP SDK's own protection gets the
same list."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.hosts import SETTING, HostAllowList, mcp_transport_lists
from api.settings import Settings
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
LIST_PROJECTS = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "list_projects", "arguments": {}},
}


@pytest.fixture
def app_of(ledger: Ledger, db_url: str) -> Iterator[Any]:
    """``app_of(allowed_hosts, base_url)``: a client of an app with that setting (not the
    tests' ``testserver``), closed after the test."""
    clients: list[TestClient] = []

    def make(allowed_hosts: str = "", base_url: str = "http://127.0.0.1:8750") -> TestClient:
        client = TestClient(create_app(Settings(database_url=db_url, allowed_hosts=allowed_hosts)), base_url=base_url)
        clients.append(client.__enter__())
        return client

    ledger.projects.create_project("p")
    yield make
    for client in clients:
        client.__exit__(None, None, None)


def _refused(response: httpx.Response, header: str) -> None:
    body = assert_problem(response, 403, header)
    assert body["setting"] == SETTING and SETTING in body["detail"]


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:8750", "http://localhost:8750", "http://[::1]:8750"])
def test_the_loopback_names_are_served_by_default(app_of: Any, ledger: Ledger, base_url: str) -> None:
    client = app_of(base_url=base_url)
    assert client.post(f"{API}/projects/p/trials", json={"status": "keep"}).status_code == 201
    assert client.get("/projects/p").status_code == 200
    assert client.post("/mcp", json=LIST_PROJECTS, headers=MCP_HEADERS).status_code == 200


def test_a_foreign_host_is_refused_everywhere_but_health(app_of: Any, ledger: Ledger) -> None:
    client = app_of()
    foreign = {"Host": "evil.example:8750"}
    _refused(client.post(f"{API}/projects/p/trials", json={"status": "keep"}, headers=foreign), "Host")
    _refused(client.get(f"{API}/projects", headers=foreign), "Host")
    _refused(client.get("/projects/p", headers=foreign), "Host")
    _refused(client.post("/mcp", json=LIST_PROJECTS, headers={**MCP_HEADERS, **foreign}), "Host")
    assert client.get("/health", headers=foreign).status_code == 200
    assert ledger.projects.project("p").trial_count == 0


def test_a_foreign_origin_is_refused_on_the_api_and_mcp(app_of: Any, ledger: Ledger) -> None:
    client = app_of()
    origin = {"Origin": "http://evil.example:8750"}
    _refused(client.post(f"{API}/projects/p/trials", json={"status": "keep"}, headers=origin), "Origin")
    _refused(client.post("/mcp", json=LIST_PROJECTS, headers={**MCP_HEADERS, **origin}), "Origin")
    _refused(client.get(f"{API}/projects", headers={"Origin": "null"}), "Origin")
    same = {"Origin": "http://localhost:3000"}  # a loopback page, any port
    assert client.post(f"{API}/projects/p/trials", json={"status": "keep"}, headers=same).status_code == 201
    assert ledger.projects.project("p").trial_count == 1


def test_a_served_deployment_names_its_hosts(app_of: Any) -> None:
    client = app_of("ledger.example.org, ci.example.org:8443")
    assert client.get(f"{API}/projects", headers={"Host": "ledger.example.org"}).status_code == 200
    assert client.get(f"{API}/projects", headers={"Host": "Ledger.Example.Org.:443"}).status_code == 200
    assert client.get(f"{API}/projects", headers={"Host": "ci.example.org:8443"}).status_code == 200
    _refused(client.get(f"{API}/projects", headers={"Host": "ci.example.org:8444"}), "Host")
    ok_origin = {"Host": "ledger.example.org", "Origin": "https://ledger.example.org"}
    assert client.get(f"{API}/projects", headers=ok_origin).status_code == 200
    everyone = app_of("*")
    assert everyone.get(f"{API}/projects", headers={"Host": "anything.example"}).status_code == 200


def test_the_bind_address_is_one_of_the_hosts() -> None:
    allowed = HostAllowList.build("", bind_host="10.1.2.3")
    assert allowed.allows("10.1.2.3:8000") and allowed.allows("localhost") and not allowed.allows("evil.example")
    assert HostAllowList.build("", bind_host="::").names == ("localhost", "127.0.0.1", "[::1]")
    assert HostAllowList.build("", bind_host="fd00::5").allows("[fd00::5]:8000")


def test_the_mcp_sdk_checks_the_same_hosts(ledger: Ledger) -> None:
    """The SDK's own rebinding protection, reached without the app's guard in front."""
    from api.mcp_server import http_app

    allowed = HostAllowList.build("ledger.example.org")
    enable, hosts, origins = mcp_transport_lists(allowed)
    assert enable and "localhost:*" in hosts and "https://ledger.example.org:*" in origins
    assert mcp_transport_lists(HostAllowList.build("*"))[0] is False

    async def main() -> dict[str, int]:
        server, app = http_app(ledger, anonymous_read=True, allowed=allowed)
        statuses = {}
        async with server.session_manager.run():
            transport = httpx.ASGITransport(app=app)
            for host in ("ledger.example.org:8000", "127.0.0.1:8000", "evil.example:8000"):
                async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
                    answer = await client.post("/mcp", json=LIST_PROJECTS, headers=MCP_HEADERS)
                    statuses[host] = answer.status_code
        return statuses

    statuses = anyio.run(main)
    assert statuses == {"ledger.example.org:8000": 200, "127.0.0.1:8000": 200, "evil.example:8000": 421}


def test_lineage_serve_takes_allowed_hosts_from_its_flag(serve: Any, tmp_path: Any) -> None:
    server = serve(str(tmp_path / "h.db"), "--allowed-host", "ledger.test", env={SETTING: ""})
    with httpx.Client(base_url=server.url) as http:
        assert http.get(f"{API}/projects", headers={"Host": "ledger.test:1234"}).status_code == 200
        refused = http.post(f"{API}/projects", json={"slug": "x"}, headers={"Host": "evil.example"})
        _refused(refused, "Host")
        assert http.get(f"{API}/projects").json() == []
