"""Fixtures of the web-page tests: the demo project on each backend, an ASGI client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import Settings
from lineage.demo_data import DEMO_PROJECT, DEMO_TRIALS
from lineage.service import Ledger

SLUG = DEMO_PROJECT["slug"]
#: The hypothesis the XSS tests record: a script and an event handler.
XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'


def load_demo(ledger: Ledger) -> Ledger:
    ledger.projects.create_project(**DEMO_PROJECT)
    ledger.tables.import_trials(SLUG, iter(DEMO_TRIALS))
    return ledger


def api_points(points: list[dict]) -> list[dict]:
    """Points as the telemetry API takes them: ``name`` (not ``key``), finite values."""
    out = []
    for point in points:
        if point["value"] != point["value"]:  # NaN: the API refuses it (the reader test drops it)
            continue
        out.append(
            {
                "step": point["step"],
                "name": point.get("name") or point["key"],
                "value": point["value"],
                **({"turn": point["turn"]} if "turn" in point else {}),
            }
        )
    return out


@pytest.fixture
def demo(ledger: Ledger) -> Ledger:
    """The (emptied) ledger of the current backend with the demo project."""
    return load_demo(ledger)


def make_client(db_url: str, **settings: object) -> TestClient:
    return TestClient(create_app(Settings(database_url=db_url, **settings)))


@pytest.fixture
def client(demo: Ledger, db_url: str) -> Iterator[TestClient]:
    with make_client(db_url) as test_client:
        yield test_client
