"""Schemathesis against the app's own OpenAPI schema: whatever it sends, no 5xx, and
every error is problem+json. Bounded: a few examples per operation, on SQLite and
PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from api.app import create_app
from api.settings import Settings

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 12
#: Upper bound on one request (schemathesis's own default, 10 s, applies in-process too and
#: a busy 2-core machine can pass it): a slow answer is not a failure here, a 5xx is.
REQUEST_TIMEOUT_S = 300.0
KNOWN_PATH = {"project": "p", "exp_id": "000"}


@pytest.fixture
def fuzz_app(engine, db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """An open ledger (no tokens, so writes are exercised) with one project and trial,
    on the (emptied) database of the backend. Webhook delivery is off: schemathesis keeps
    the app's lifespan running for the rest of the worker process, and its background loop
    would go on posting to the generated hook URLs (tests/lineage/test_hooks.py tests delivery)."""
    monkeypatch.setenv("LINEAGE_HOOK_DELIVERY", "off")
    app = create_app(Settings(database_url=db_url, log_level="warning"))
    with TestClient(app) as client:
        client.post("/api/v1/projects", json={"slug": "p"})
        client.post("/api/v1/projects/p/trials", json={"exp_id": "000", "status": "baseline", "core_metric": 1.0})
        yield app


def _check(case) -> None:  # type: ignore[no-untyped-def]
    response = case.call(timeout=REQUEST_TIMEOUT_S)
    where = f"{case.method} {case.formatted_path}"
    assert response.status_code < 500, f"{where}: {response.status_code} {response.text[:500]}"
    if response.status_code >= 400:
        content_type = response.headers.get("content-type", [""])[0]
        assert content_type.startswith("application/problem+json"), (where, response.status_code, content_type)
        body = response.json()
        assert body["status"] == response.status_code and body["title"] and body["detail"] and body["type"], where


def test_no_server_error_and_every_error_is_a_problem(fuzz_app: object) -> None:
    """Every operation of the schema, MAX_EXAMPLES generated requests each (derandomized,
    so a failure reproduces)."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzz_app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    for operation in operations:
        # random paths, paths of the project and trial that exist, and requests that break the schema
        known = {k: v for k, v in KNOWN_PATH.items() if "{" + k + "}" in operation.path}
        strategies = [operation.as_strategy(), operation.as_strategy(GenerationMode.NEGATIVE)]
        if known:
            strategies.append(operation.as_strategy(path_parameters=known))
        run = settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )(given(case=st.one_of(strategies))(_check))
        run()
