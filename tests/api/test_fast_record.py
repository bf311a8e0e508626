"""``POST .../trials`` answered by the common-case path (``api.routes.fast_record``) is
answered exactly as FastAPI's documented route answers it: the same statuses, problems
and records for good requests and for every kind of bad one (those it hands back)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from api.routes.fast_record import FastRecordRoute
from lineage.service import Ledger
from tests.api.conftest import API, make_client

_CLOCK = ("created_at", "updated_at", "timestamp")


def _without_fast_path(client: TestClient) -> TestClient:
    routes = client.app.router.routes  # type: ignore[attr-defined]
    routes[:] = [route for route in routes if not isinstance(route, FastRecordRoute)]
    return client


def _requests(admin: str, reader: str) -> list[tuple[str, dict[str, str], bytes | None, Any]]:
    """``(project, headers, raw body or None, JSON body)``: good ones and every kind of bad one."""
    json_type = {"Content-Type": "application/json"}
    good = {"status": "keep", "core_metric": 0.9, "hypothesis": "cosine warmup", "extra": {"lr": 3e-4}}
    return [
        ("p", {}, None, good),
        ("p", {"Idempotency-Key": "k-1"}, None, {"status": "discard", "core_metric": 0.95}),
        ("p", {"Idempotency-Key": "k-1"}, None, {"status": "discard", "core_metric": 0.95}),  # replay: 200
        ("p", {"Idempotency-Key": "k-1"}, None, {"status": "discard", "core_metric": 0.5}),  # 409
        ("p", {}, None, {"exp_id": "000", "status": "keep", "core_metric": 0.1}),  # 409: another body
        ("p", {}, None, {"status": "crash", "core_metric": 0, "parent_exp": ""}),
        ("p", {}, None, {"status": "keep", "core_metric": 0.8, "parent_exp": "404"}),  # ledger's 422
        ("nowhere", {}, None, good),  # 404
        ("p", {}, None, {"status": "sideways"}),  # schema 422
        ("p", {}, None, {"core_metric": "0.5"}),
        ("p", {}, None, {"status": "keep", "no_such_field": 1}),
        ("p", {}, None, [good]),
        ("p", json_type, b"{not json", None),
        ("p", json_type, b"", None),
        ("p", {"Content-Type": "text/plain"}, b'{"status": "keep"}', None),
        ("p", {"Idempotency-Key": "has space"}, None, good),
        ("p", {"Idempotency-Key": "x" * 300}, None, good),
        ("p", {"Authorization": "Bearer nope"}, None, good),  # 401
        ("p", {"Authorization": f"Bearer {reader}"}, None, good),  # 403
        ("p", {"Authorization": "Basic abc"}, None, good),
        ("p", {"Authorization": ""}, None, good),  # anonymous: 401
        ("nowhere", {"Authorization": ""}, None, good),  # 401 before 404
    ]


def _unclocked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unclocked(v) for k, v in value.items() if k not in _CLOCK and k != "request_id"}
    if isinstance(value, list):
        return [_unclocked(v) for v in value]
    return value


def _said(response: Any) -> tuple[int, str, Any]:
    return response.status_code, response.headers.get("content-type", ""), _unclocked(response.json())


def test_every_answer_is_the_documented_routes(ledger: Ledger, db_url: str, token_of) -> None:  # type: ignore[no-untyped-def]
    admin, reader = token_of("admin"), token_of("reader")
    answers: list[list[tuple[int, str, Any]]] = []
    for fast in (True, False):
        if not fast:
            ledger.projects.delete_project("p")  # the same requests again, on the same start
        ledger.projects.create_project("p", lower_is_better=True)
        ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})
        with make_client(db_url) as client:
            if not fast:
                _without_fast_path(client)
            said = []
            for project, headers, raw, body in _requests(admin, reader):
                headers = {"Authorization": f"Bearer {admin}", **headers}
                if not headers["Authorization"]:
                    del headers["Authorization"]
                url = f"{API}/projects/{project}/trials"
                response = (
                    client.post(url, content=raw, headers=headers)
                    if raw is not None
                    else client.post(url, json=body, headers=headers)
                )
                said.append(_said(response))
            answers.append(said)
    fast_answers, route_answers = answers
    assert fast_answers == route_answers
    statuses = [status for status, _, _ in fast_answers]
    assert {200, 201, 401, 403, 404, 409, 422} <= set(statuses), statuses
