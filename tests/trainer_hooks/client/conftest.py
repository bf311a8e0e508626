"""Fixtures of the telemetry client's tests: real ``lineage serve`` processes (from
tests/api/conftest.py), a real HTTP proxy in front of one, and readers of the points the
ledger's SQLite file holds."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from tests.api.conftest import serve  # noqa: F401  (the fixture)
from tests.trainer_hooks.client.proxy import FaultyProxy
from trainer_hooks.client import LedgerClient


def _rows(db: Any, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` from a ledger: a SQLite file path, or an SQLAlchemy engine (any backend)."""
    if isinstance(db, str):
        with sqlite3.connect(db) as conn:
            return conn.execute(sql).fetchall()
    with db.connect() as conn:
        return [tuple(row) for row in conn.execute(text(sql))]


def stored_points(db: Any) -> Counter[tuple[int, int, str, float]]:
    """``(step, turn, name, value)`` of every point in the ledger, with multiplicity."""
    return Counter(_rows(db, "SELECT step, turn, name, value FROM telemetry_points"))


def expected_points(
    steps: range, names: tuple[str, ...] = ("loss", "kl"), turns: int = 2
) -> Counter[tuple[int, int, str, float]]:
    """The points :func:`log_steps` logs."""
    out: Counter[tuple[int, int, str, float]] = Counter()
    for step in steps:
        for name in names:
            out[(step, -1, name, step_value(step, name))] += 1
        for turn in range(turns):
            out[(step, turn, "ig_mean", step_value(step, "ig", turn))] += 1
    return out


def step_value(step: int, name: str, turn: int = 0) -> float:
    return step * 0.001 + len(name) + turn * 0.5


def log_steps(client: LedgerClient, steps: range, names: tuple[str, ...] = ("loss", "kl"), turns: int = 2) -> None:
    for step in steps:
        client.log(step, {name: step_value(step, name) for name in names})
        client.log_turns(step, {"ig_mean": [step_value(step, "ig", t) for t in range(turns)]})


def trial_count(db: Any) -> int:
    return int(_rows(db, "SELECT COUNT(*) FROM trials")[0][0])


def fast_client(url: str, spool_dir: Path, project: str = "p", token: str | None = None, **kwargs: Any) -> LedgerClient:
    """A client with short intervals and backoff (tests wait on it, not on the defaults), and
    no system metrics sampler unless asked (the tests count every point)."""
    options = {
        "spool_interval": 0.02,
        "backoff": (0.02, 0.2),
        "close_timeout": 120.0,
        "timeout": 30.0,
        "system_metrics": False,
        **kwargs,
    }
    return LedgerClient(url, token, project, spool_dir=spool_dir, **options)


def offline_client(tmp_path: Path, run_id: str, hypothesis: str) -> tuple[str, int, Path, LedgerClient]:
    """A client whose project and planned trial went to its spool while no ledger listens
    yet: ``(db, port, spool_dir, client)``, the database and port a ledger is served on later."""
    from tests.api.conftest import free_port

    db, port, spool_dir = str(tmp_path / "ledger.db"), free_port(), tmp_path / "spool"
    client = fast_client(f"http://127.0.0.1:{port}", spool_dir, run_id=run_id)
    client.ensure_project()
    client.plan_trial(hypothesis=hypothesis)
    return db, port, spool_dir, client


def point_rows(steps: range) -> list[Any]:
    """Telemetry rows of ``steps`` as the client makes them: ``loss`` and ``kl`` a step,
    two turns of ``ig_mean``."""
    from trainer_hooks.client.points import step_rows, turn_rows

    found: list[Any] = []
    for step in steps:
        found += step_rows(step, {name: step_value(step, name) for name in ("loss", "kl")}, None, 1.7e9)[0]
        found += turn_rows(step, {"ig_mean": [step_value(step, "ig", t) for t in range(2)]}, 1.7e9)[0]
    return found


@pytest.fixture
def proxy() -> Iterator[Any]:
    """``proxy(upstream_url, fault)``: a started :class:`FaultyProxy`, stopped after the test."""
    started: list[FaultyProxy] = []

    def start(upstream: str, fault: Any) -> FaultyProxy:
        found = FaultyProxy(upstream, fault)
        found.start()
        started.append(found)
        return found

    yield start
    for found in started:
        found.stop()
