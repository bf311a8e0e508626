"""Fixtures: real SQLite files and a real PostgreSQL server, both migrated by Alembic.

Each backend's database is created once per test session (per xdist worker) and emptied
before every test, so tests stay fast and independent. PostgreSQL is found at
``$LINEAGE_TEST_POSTGRES_URL`` (default: the local server, trust auth); when it does not
answer the suite fails rather than silently skipping half its tests.

The fast local target (``LINEAGE_TEST_FAST=1``, set by ``tests/run_fast.sh``) is the one
exception: it runs SQLite only and skips, each with its reason, the tests that need
PostgreSQL, Chromium, npm or torch. CI runs everything (``tests/run_all.sh``).
"""

from __future__ import annotations

import importlib.abc
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from lineage import migrate
from lineage.db import make_engine
from lineage.service import Ledger

#: The in-process test clients name the host ``testserver``: an allowed host of every app
#: the tests make (``api.hosts``; the default allows the loopback names only).
os.environ.setdefault("LINEAGE_ALLOWED_HOSTS", "testserver")

POSTGRES_ADMIN_URL = os.environ.get(
    "LINEAGE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
BACKENDS = ["sqlite", "postgres"]
#: the fast local target: SQLite only, no browser, no npm, no torch (tests/run_fast.sh)
FAST = os.environ.get("LINEAGE_TEST_FAST", "") not in ("", "0")
_FAST_REASON = "the fast target (LINEAGE_TEST_FAST=1) runs without {}; tests/run_all.sh runs it"
#: fixtures that need a heavy part, and what
_HEAVY_FIXTURES = {"postgres_url": "PostgreSQL", "browser": "Chromium", "page": "Chromium"}
#: modules whose tests each run for about a minute: CI's, not the inner loop's
_LONG_RUNS = {"tests.test_soak_smoke", "tests.test_claims_swarm", "tests.api.test_fuzz", "tests.api.test_contract"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In the fast target, skip (with the reason) what needs PostgreSQL, Chromium, npm or torch."""
    if not FAST:
        return
    for item in items:
        needs = _heavy_need(item)
        if needs:
            item.add_marker(pytest.mark.skip(reason=_FAST_REASON.format(needs)))


def _heavy_need(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("backend") == "postgres":
        return "PostgreSQL"
    for name in getattr(item, "fixturenames", ()):
        if name in _HEAVY_FIXTURES:
            return _HEAVY_FIXTURES[name]
    module = getattr(item, "module", None)
    if module is not None and module.__name__.endswith("test_mcp_inspector"):
        return "npm (the MCP Inspector CLI)"
    if module is not None and module.__name__ in _LONG_RUNS:
        return "its long randomized runs (soak, fuzz, schemathesis: a minute each)"
    return None


class _NoTorch(importlib.abc.MetaPathFinder):
    """In the fast target, importing torch skips the test (or module) that asked for it:
    the skip is raised from the import itself, so module-level imports and imports deep in
    trainer code (transformers, TRL) skip alike, with the reason."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "torch" or name.startswith("torch."):
            pytest.skip(_FAST_REASON.format("torch"), allow_module_level=True)
        return None


if FAST:
    sys.meta_path.insert(0, _NoTorch())


def _admin_engine():  # type: ignore[no-untyped-def]
    return create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    name = f"lineage_test_{uuid.uuid4().hex[:12]}"
    admin = _admin_engine()
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # pragma: no cover - environment problem, reported loudly
        pytest.fail(f"PostgreSQL does not answer at {POSTGRES_ADMIN_URL}: {exc}")
    url = POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("sqlite") / "ledger.db")


@pytest.fixture(scope="session")
def _engines(request: pytest.FixtureRequest) -> Iterator[dict]:
    engines: dict = {}
    yield engines
    for engine in engines.values():
        engine.dispose()


def _migrated_engine(request: pytest.FixtureRequest, engines: dict, backend: str):  # type: ignore[no-untyped-def]
    if backend not in engines:
        url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "postgres_url")
        engine = make_engine(url)
        migrate.upgrade(engine)
        engines[backend] = engine
    return engines[backend]


def _empty(engine) -> None:  # type: ignore[no-untyped-def]
    """A blank ledger for the next test: its projects and trials, and the tokens and
    ledger settings a test may have left (a token left behind closes anonymous writes)."""
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            for table in ("trials", "projects", "api_tokens", "ledger_settings"):
                conn.execute(text(f"DELETE FROM {table}"))
        else:
            conn.execute(text("TRUNCATE projects, trials, api_tokens, ledger_settings RESTART IDENTITY CASCADE"))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def engine(request: pytest.FixtureRequest, _engines: dict, backend: str):  # type: ignore[no-untyped-def]
    engine = _migrated_engine(request, _engines, backend)
    _empty(engine)
    return engine


@pytest.fixture
def ledger(engine) -> Ledger:  # type: ignore[no-untyped-def]
    return Ledger(engine)


@pytest.fixture
def db_url(engine) -> str:  # type: ignore[no-untyped-def]
    """The URL of the (emptied) database behind ``ledger``, for subprocesses."""
    return engine.url.render_as_string(hide_password=False)


@pytest.fixture
def fresh_db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """The URL of a new, empty database of ``backend`` (no schema): a file in tmp_path, or
    a PostgreSQL database created for this test and dropped after it."""
    if backend == "sqlite":
        yield str(tmp_path / "fresh.db")
        return
    name = f"lineage_fresh_{uuid.uuid4().hex[:12]}"
    admin = _admin_engine()
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def sqlite_ledger(tmp_path: Path) -> Iterator[Ledger]:
    """A ledger on a fresh SQLite file of its own (for tests about files and processes)."""
    ledger = Ledger.open(str(tmp_path / "own.db"))
    yield ledger
    ledger.close()


@pytest.fixture
def private_hook_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Webhooks may target loopback (the tests' receivers listen on 127.0.0.1), in this
    process and in the servers it starts; the default refuses such targets."""
    monkeypatch.setenv("LINEAGE_HOOK_PRIVATE_TARGETS", "1")
