"""Every error is RFC 9457 problem+json naming what went wrong; body limits (also after
gzip decoding); request ids in and out; structured logs."""

from __future__ import annotations

import gzip
import json

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import API, assert_problem, make_client, new_project


@pytest.fixture
def small(db_url: str, ledger) -> TestClient:  # type: ignore[no-untyped-def]
    """An app whose API takes bodies of at most 4 KiB."""
    with make_client(db_url, max_body_bytes=4096) as client:
        new_project(client)
        yield client


def test_unknown_routes_and_methods(client: TestClient) -> None:
    assert_problem(client.get("/api/v1/nothing-here"), 404)
    assert_problem(client.get("/no/such/page"), 404)
    response = assert_problem(client.put(f"{API}/projects"), 405)
    assert "GET" in response["detail"] and "POST" in response["detail"]


def test_body_limit_by_content_length_by_stream_and_after_gzip(small: TestClient) -> None:
    url = f"{API}/projects/p/trials"
    big = json.dumps({"status": "keep", "notes": "x" * 5000}).encode()
    body = assert_problem(small.post(url, content=big, headers={"Content-Type": "application/json"}), 413)
    assert body["limit"] == 4096
    chunked = small.post(url, content=iter([big[:3000], big[3000:]]), headers={"Content-Type": "application/json"})
    assert_problem(chunked, 413)
    bomb = gzip.compress(b'{"status": "keep", "notes": "' + b"0" * 2_000_000 + b'"}')
    assert len(bomb) < 4096
    assert_problem(
        small.post(url, content=bomb, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}), 413
    )
    fine = gzip.compress(json.dumps({"status": "keep", "notes": "y" * 3000}).encode())
    assert (
        small.post(
            url, content=fine, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
        ).status_code
        == 201
    )
    assert_problem(small.post(url, content=b"{}", headers={"Content-Length": "abc"}), 400)


def test_unexpected_errors_are_a_generic_500_that_leaks_nothing(db_url: str, ledger) -> None:  # type: ignore[no-untyped-def]
    client = make_client(db_url)

    async def boom() -> None:
        raise RuntimeError("password=hunter2 at /srv/secret/path.py")

    client.app.add_api_route(f"{API}/boom", boom)  # type: ignore[attr-defined]
    response = TestClient(client.app, raise_server_exceptions=False).get(f"{API}/boom")
    body = assert_problem(response, 500)
    assert "hunter2" not in response.text and "secret" not in response.text and "RuntimeError" not in response.text
    assert body["request_id"] == response.headers["x-request-id"]


def test_request_ids_come_back_and_are_made_when_missing_or_odd(client: TestClient) -> None:
    mine = client.get("/health", headers={"X-Request-ID": "trainer-7:step-42"})
    assert mine.headers["x-request-id"] == "trainer-7:step-42"
    made = client.get("/health")
    assert len(made.headers["x-request-id"]) == 32
    odd = client.get("/health", headers={"X-Request-ID": "has spaces and <html>"})
    assert odd.headers["x-request-id"] != "has spaces and <html>"
    problem = client.get(f"{API}/projects/missing", headers={"X-Request-ID": "find-me"})
    assert problem.json()["request_id"] == "find-me" and problem.json()["instance"] == f"{API}/projects/missing"


def test_json_logs_carry_the_request_id(db_url: str, ledger, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    with make_client(db_url, log_format="json") as client:
        client.get(f"{API}/projects", headers={"X-Request-ID": "json-log-test"})
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    access = [line for line in lines if line.get("request_id") == "json-log-test"]
    assert access and access[0]["logger"] == "lineage.access" and access[0]["status"] == 200
    assert access[0]["path"] == f"{API}/projects" and access[0]["level"] == "info"


def test_settings_come_from_the_environment(
    db_url: str,
    ledger,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
    token_of,
) -> None:
    """``Settings`` reads ``LINEAGE_*`` (pydantic-settings): the body limit and anonymous reads."""
    from api.app import create_app
    from api.settings import Settings

    token_of("reader")  # with a token, anonymous reads follow the setting
    monkeypatch.setenv("LINEAGE_MAX_BODY_BYTES", "2048")
    monkeypatch.setenv("LINEAGE_ANONYMOUS_READ", "false")
    monkeypatch.setenv("LINEAGE_DATABASE_URL", db_url)
    settings = Settings()
    assert (settings.max_body_bytes, settings.anonymous_read, settings.database_url) == (2048, False, db_url)
    with TestClient(create_app(settings)) as client:
        assert_problem(client.get(f"{API}/projects"), 401)
        big = client.post(
            f"{API}/projects", content=b'{"slug": "' + b"x" * 3000 + b'"}', headers={"Content-Type": "application/json"}
        )
        assert assert_problem(big, 413)["limit"] == 2048
    monkeypatch.setenv("LINEAGE_MAX_BODY_BYTES", "lots")
    with pytest.raises(ValueError, match="max_body_bytes"):
        Settings()


def test_health_and_readiness(client: TestClient, engine) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/health").json() == {"status": "ok"}
    ready = client.get("/ready")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    assert ready.json()["schema_revision"] == ready.json()["head"]
    client.app.state.schema_head = "9999"  # type: ignore[attr-defined]  # as if the code were newer
    behind = assert_problem(client.get("/ready"), 503)
    assert "lineage db upgrade" in behind["detail"]


def test_openapi_is_served(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert "/api/v1/projects/{project}/trials" in schema["paths"]
    assert client.get("/docs").status_code == 200


def test_small_writes_wait_off_the_event_loop_while_a_long_write_holds_the_lock(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A trial recorded while this process imports (SQLite's lock held) waits in the thread
    pool: the server keeps answering everything else meanwhile."""
    import asyncio
    import threading

    import httpx

    from api.app import create_app
    from api.settings import Settings

    app = create_app(Settings(database_url=str(tmp_path / "lanes.db")))
    ledger = app.state.ledger
    ledger.projects.create_project("p")
    locked, release = threading.Event(), threading.Event()

    def long_write() -> None:
        with ledger.store.write():  # holds the database's write lock, like an import
            locked.set()
            release.wait(60)

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as client:
            holder = asyncio.create_task(app.state.write_lanes.long(long_write))
            while not locked.is_set():
                await asyncio.sleep(0.01)
            post = asyncio.create_task(client.post(f"{API}/projects/p/trials", json={"status": "keep"}))
            await asyncio.sleep(0.1)  # let the POST reach the lock
            # answered while the lock is still held (released only below): the POST waits
            # off the event loop; waiting inline, nothing would be answered until the
            # holder gave up (60 s) and the POST had finished
            health = await client.get("/health")
            assert health.status_code == 200
            assert not post.done() and not release.is_set()
            release.set()
            assert (await post).status_code == 201
            await holder

    asyncio.run(main())
    ledger.close()
