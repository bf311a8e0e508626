"""Connecting to ``/mcp`` as each kind of client: a 2026 client (the SDK's ``Client``,
which asks ``server/discover`` first) and a handshake-era one (``initialize``) both learn
the server's version; a bad token, or none where reads need one, is refused with 401 at
that first request, before any tool call. Real ``lineage serve`` processes."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp.client.client import Client

from lineage.service import Ledger

pytestmark = pytest.mark.slow

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}


async def _version(url: str, mode: str, token: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        from mcp.client.streamable_http import streamable_http_client

        async with Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client:  # type: ignore[arg-type]
            assert client.server_info is not None
            assert "claim_trial" in [tool.name for tool in (await client.list_tools()).tools]
            return client.server_info.version


def test_modern_and_handshake_clients_learn_the_servers_version(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "v.db"))
    version = importlib.metadata.version("lineage-ledger")
    assert anyio.run(_version, server.url, "auto") == version  # server/discover
    assert anyio.run(_version, server.url, "legacy") == version  # initialize


def test_a_bad_or_missing_token_is_refused_at_the_first_request(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "t.db")
    ledger = Ledger.open(db)
    reader = ledger.tokens.create_token(name="r", role="reader")[1]
    ledger.close()
    server = serve(db, "--no-anonymous-read")
    for headers in ({}, {"Authorization": "Bearer llt_" + "x" * 43}, {"Authorization": "Basic abc"}):
        refused = httpx.post(f"{server.url}/mcp", json=DISCOVER, headers={**HEADERS, **headers}, timeout=60)
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.json()["code"] == "unauthorized" and "Authorization: Bearer" in refused.json()["detail"]
    with pytest.raises(BaseException):  # noqa: B017 - the SDK's own error for an HTTP 401
        anyio.run(_version, server.url, "auto", "llt_" + "x" * 43)
    assert anyio.run(_version, server.url, "auto", reader) == importlib.metadata.version("lineage-ledger")
