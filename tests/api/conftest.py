"""Fixtures of the API tests: the app on each backend through the ASGI client, tokens,
and real ``lineage serve`` processes on free loopback ports.

The backends' databases are shared by every test of an xdist worker (tests/conftest.py
empties projects and trials); tokens live in their own table, so these fixtures empty
it (and the ledger settings: a first token closes anonymous writes for good) before and
after each test: a token left behind would close the other tests' ledgers.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from api.app import create_app
from api.settings import Settings
from lineage.service import Ledger

ROOT = Path(__file__).resolve().parents[2]
LINEAGE = [sys.executable, "-m", "api.cli"]
API = "/api/v1"


def _clear_tokens(engine) -> None:  # type: ignore[no-untyped-def]
    """No tokens, and the ledger back to "never had a token" (lineage.auth)."""
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM api_tokens"))
        conn.execute(text("DELETE FROM ledger_settings"))


@pytest.fixture
def engine(engine):  # type: ignore[no-untyped-def]
    """tests/conftest.py's engine, with no tokens before and after the test."""
    _clear_tokens(engine)
    yield engine
    _clear_tokens(engine)


def make_client(db_url: str, **settings: Any) -> TestClient:
    return TestClient(create_app(Settings(database_url=db_url, **settings)))


@pytest.fixture
def client(ledger: Ledger, db_url: str) -> Iterator[TestClient]:
    with make_client(db_url) as test_client:
        yield test_client


@pytest.fixture
def token_of(ledger: Ledger):  # type: ignore[no-untyped-def]
    """``token_of(role)``: a fresh token of that role on the test's database."""
    made: dict[str, str] = {}

    def make(role: str, name: str | None = None) -> str:
        name = name or f"{role}-{len(made)}"
        made[name] = ledger.tokens.create_token(name=name, role=role)[1]
        return made[name]

    return make


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def new_project(
    client: TestClient | httpx.Client, slug: str = "p", headers: dict[str, str] | None = None, **fields: Any
) -> dict[str, Any]:
    response = client.post(f"{API}/projects", json={"slug": slug, **fields}, headers=headers or {})
    assert response.status_code == 201, response.text
    return response.json()


def record(client: TestClient | httpx.Client, slug: str, headers: dict[str, str] | None = None, **fields: Any):  # type: ignore[no-untyped-def]
    fields.setdefault("status", "discard")
    return client.post(f"{API}/projects/{slug}/trials", json=fields, headers=headers or {})


def assert_problem(response: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    """The response is an RFC 9457 problem with ``status`` (naming ``field``)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body = response.json()
    assert body["status"] == status and body["title"] and body["detail"] and body["type"]
    if field is not None:
        assert body.get("field") == field, body
    return body


# -- real servers -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    """A ``lineage serve`` process; ``log`` is its combined output file."""

    db: str
    port: int
    log: Path
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None  # type: ignore[type-arg]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> Server:  # an upper bound: a busy machine starts slowly
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        env.pop("LINEAGE_DATABASE_URL", None)
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            [*LINEAGE, "serve", "--db", self.db, "--port", str(self.port), *self.args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"server did not answer /health within {timeout} s:\n{self.output()}")
            time.sleep(0.05)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL the whole process group (the server and any workers)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    """``serve(db, *args, env=...)``: a started server, stopped after the test."""
    started: list[Server] = []

    def start(db: str, *args: str, env: dict[str, str] | None = None, port: int | None = None) -> Server:
        server = Server(
            db=db, port=port or free_port(), log=tmp_path / f"server-{len(started)}.log", args=args, env=env or {}
        )
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()
