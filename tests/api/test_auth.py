"""Who may do what: each role against each class of endpoint, anonymous reads on and off,
the open ledger without tokens, revocation, last-use throttling, the CLI, and secrets
that never reach a log."""

from __future__ import annotations

import logging
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy import text

from api.cli import cli
from lineage.service import Ledger
from tests.api.conftest import API, LINEAGE, ROOT, assert_problem, bearer, free_port, make_client, new_project

P = f"{API}/projects/p"
TELEMETRY = {"points": [{"step": 1, "name": "kl", "value": 0.1}]}


def _requests(n: int):  # type: ignore[no-untyped-def]
    """One request of each endpoint class: (class, method, path, json body)."""
    return [
        ("read", "GET", f"{API}/projects", None),
        ("read", "GET", f"{P}/trials", None),
        ("read", "GET", f"{P}/prompt?specialist=s", None),
        ("read", "GET", f"{P}/knowledge", None),
        ("read", "GET", f"{P}/trials/000/telemetry", None),
        ("write", "POST", f"{P}/trials", {"status": "discard", "exp_id": f"w{n}"}),
        ("write", "PATCH", P, {"title": f"t{n}"}),
        ("write", "POST", f"{P}/trials/000/telemetry", TELEMETRY),
        ("admin", "GET", f"{API}/tokens", None),
    ]


@pytest.fixture
def seeded(client: TestClient) -> TestClient:
    new_project(client)
    assert (
        client.post(f"{P}/trials", json={"exp_id": "000", "status": "baseline", "core_metric": 1.0}).status_code == 201
    )
    return client


@pytest.mark.parametrize("anonymous_read", [True, False])
def test_role_matrix(seeded: TestClient, token_of, db_url: str, anonymous_read: bool) -> None:  # type: ignore[no-untyped-def]
    tokens = {role: token_of(role) for role in ("reader", "writer", "admin")}
    revoked = token_of("writer", "old")
    seeded.app.state.ledger.tokens.revoke_token("old")  # type: ignore[attr-defined]
    principals = {"anonymous": None, **tokens, "revoked": revoked, "bogus": "llt_" + "x" * 43}
    allowed = {
        "anonymous": {"read"} if anonymous_read else set(),
        "reader": {"read"},
        "writer": {"read", "write"},
        "admin": {"read", "write", "admin"},
        "revoked": set(),
        "bogus": set(),
    }
    with make_client(db_url, anonymous_read=anonymous_read) as client:
        for n, (who, token) in enumerate(principals.items()):
            headers = bearer(token) if token else {}
            for kind, method, path, body in _requests(n):
                response = client.request(method, path, json=body, headers=headers)
                if kind in allowed[who]:
                    assert response.status_code < 300, (who, kind, path, response.text)
                else:
                    expected = 403 if who in ("reader", "writer", "admin") else 401
                    problem = assert_problem(response, expected)
                    assert (expected == 401) == ("www-authenticate" in response.headers), (who, path)
                    assert problem["code"] in ("unauthorized", "forbidden")


def test_without_tokens_a_loopback_ledger_is_open_but_admin_needs_a_token(seeded: TestClient) -> None:
    for n, (kind, method, path, body) in enumerate(_requests(0)):
        response = seeded.request(method, path, json=body)
        if kind == "admin":
            assert_problem(response, 401)
        else:
            assert response.status_code < 300, (path, response.text)


def test_a_malformed_authorization_header_is_401_even_where_reads_are_open(seeded: TestClient) -> None:
    assert_problem(seeded.get(f"{API}/projects", headers={"Authorization": "Basic dXNlcjpwYXNz"}), 401)
    assert_problem(seeded.get(f"{API}/projects", headers={"Authorization": "Bearer"}), 401)


def test_tokens_over_http_are_admin_only_and_shown_once(seeded: TestClient, token_of) -> None:  # type: ignore[no-untyped-def]
    admin = bearer(token_of("admin", "root"))
    made = seeded.post(f"{API}/tokens", json={"name": "ci-trainer", "role": "writer"}, headers=admin)
    assert made.status_code == 201 and made.json()["token"].startswith("llt_")
    assert made.headers["cache-control"] == "no-store"
    secret = made.json()["token"]
    listed = seeded.get(f"{API}/tokens", headers=admin).json()
    assert {t["name"]: t["role"] for t in listed} == {"ci-trainer": "writer", "root": "admin"}
    assert secret not in str(listed)
    assert seeded.post(f"{P}/trials", json={"status": "discard"}, headers=bearer(secret)).status_code == 201
    assert_problem(
        seeded.post(f"{API}/tokens", json={"name": "ci-trainer", "role": "reader"}, headers=admin), 409, "name"
    )
    assert_problem(seeded.post(f"{API}/tokens", json={"name": "x", "role": "root"}, headers=admin), 422, "role")
    assert seeded.delete(f"{API}/tokens/ci-trainer", headers=admin).status_code == 204
    assert_problem(seeded.post(f"{P}/trials", json={"status": "discard"}, headers=bearer(secret)), 401)
    assert_problem(seeded.delete(f"{API}/tokens/nobody", headers=admin), 404, "name")
    again = seeded.post(f"{API}/tokens", json={"name": "ci-trainer", "role": "reader"}, headers=admin)
    assert again.status_code == 201  # a revoked token's name can be taken again


def test_last_use_is_recorded_at_most_once_a_minute(seeded: TestClient, token_of, engine) -> None:  # type: ignore[no-untyped-def]
    ledger: Ledger = seeded.app.state.ledger  # type: ignore[attr-defined]
    secret = token_of("reader", "r")
    assert ledger.tokens.list_tokens()[0].last_used_at is None
    seeded.get(f"{API}/projects", headers=bearer(secret))
    first = ledger.tokens.list_tokens()[0].last_used_at
    assert first is not None
    seeded.get(f"{API}/projects", headers=bearer(secret))
    assert ledger.tokens.list_tokens()[0].last_used_at == first
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE api_tokens SET last_used_at = :t"),
            {"t": ledger.store.db_time(datetime.now(UTC) - timedelta(minutes=2))},
        )
    stale = ledger.tokens.list_tokens()[0].last_used_at
    assert ledger.tokens.verify_token(secret) is not None
    assert ledger.tokens.list_tokens()[0].last_used_at != stale


def test_tokens_never_reach_a_log(
    db_url: str,
    ledger: Ledger,
    token_of,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
    capsys: pytest.CaptureFixture[str],
) -> None:
    secrets_ = [token_of("admin", "a"), token_of("writer", "w")]
    bogus = "llt_" + "Q" * 43
    caplog.set_level(logging.DEBUG)
    with make_client(db_url, log_format="json", log_level="debug") as client:
        new_project(client, headers=bearer(secrets_[1]))
        client.get(f"{API}/projects", headers=bearer(secrets_[0]))
        client.get(f"{API}/projects", headers=bearer(bogus))
        client.get(f"{API}/projects?token={secrets_[0]}&access_token={bogus}")
        made = client.post(f"{API}/tokens", json={"name": "new", "role": "reader"}, headers=bearer(secrets_[0]))
        secrets_.append(made.json()["token"])
        client.get(f"{P}/trials", headers={"Authorization": f"Bearer {secrets_[2]}"})
    # every record of the server side (the test client's own httpx logger prints its URLs)
    server = [r for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    logged = capsys.readouterr().err + "".join(f"{r.getMessage()} {r.__dict__}" for r in server)
    assert "GET /api/v1/projects" in logged
    for secret in (*secrets_, bogus):
        assert secret not in logged
        assert secret[4:] not in logged


def test_cli_tokens_create_list_revoke(db_url: str, ledger: Ledger) -> None:
    made = CliRunner().invoke(
        cli, ["--db", db_url, "token", "create", "--role", "writer", "--name", "ci-trainer"], catch_exceptions=False
    )
    assert made.exit_code == 0
    secret = made.stdout.strip()
    assert secret.startswith("llt_") and len(secret.splitlines()) == 1
    assert "shown only this once" in made.stderr
    assert ledger.tokens.verify_token(secret).role.value == "writer"  # type: ignore[union-attr]
    listed = CliRunner().invoke(cli, ["--db", db_url, "token", "list"], catch_exceptions=False).output
    assert "ci-trainer\twriter\tactive" in listed and secret not in listed
    assert CliRunner().invoke(cli, ["--db", db_url, "token", "revoke", "ci-trainer"]).exit_code == 0
    assert ledger.tokens.verify_token(secret) is None
    missing = CliRunner().invoke(cli, ["--db", db_url, "token", "revoke", "nobody"])
    assert missing.exit_code == 2 and "not found" in missing.stderr


def test_the_database_holds_only_a_hash_of_each_token(db_url: str, ledger: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    import hashlib

    made = CliRunner().invoke(
        cli, ["--db", db_url, "token", "create", "--role", "admin", "--name", "root"], catch_exceptions=False
    )
    secret = made.stdout.strip()
    with engine.connect() as conn:
        rows = [tuple(map(str, row)) for row in conn.execute(text("SELECT * FROM api_tokens"))]
    assert len(rows) == 1
    assert not [cell for cell in rows[0] if secret[4:] in cell]
    assert hashlib.sha256(secret.encode()).hexdigest() in rows[0]


def test_serve_refuses_a_public_address_without_tokens(tmp_path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "open.db")
    done = subprocess.run(
        [*LINEAGE, "--db", db, "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "lineage token create" in lines[0] and "0.0.0.0" in lines[0]


def test_a_token_use_never_waits_for_a_busy_sqlite_database(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sqlite3
    import time

    from lineage.db import SQLITE_BUSY_TIMEOUT_MS

    ledger = Ledger.open(str(tmp_path / "busy.db"))

    secret = ledger.tokens.create_token(name="r", role="reader")[1]
    blocker = sqlite3.connect(str(tmp_path / "busy.db"), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the database
    try:
        start = time.perf_counter()
        assert ledger.tokens.verify_token(secret) is not None
        # not an absolute timing: waiting for the lock would take the whole busy timeout
        assert time.perf_counter() - start < SQLITE_BUSY_TIMEOUT_MS / 1000 / 3
        assert ledger.tokens.list_tokens()[0].last_used_at is None  # skipped, not waited for
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert ledger.tokens.verify_token(secret) is not None
    assert ledger.tokens.list_tokens()[0].last_used_at is not None
    ledger.close()


# -- anonymous writes stay closed once the ledger had a token (lineage.auth) -------------------


def _anonymous_write(client: TestClient, n: int) -> int:
    return client.post(f"{P}/trials", json={"status": "discard", "exp_id": f"anon{n}"}).status_code


def test_revoking_the_last_token_does_not_reopen_anonymous_writes(seeded: TestClient, token_of) -> None:  # type: ignore[no-untyped-def]
    """The issue's window: a "revoke old, create new" rotation on a running server."""
    ledger: Ledger = seeded.app.state.ledger  # type: ignore[attr-defined]
    assert _anonymous_write(seeded, 0) == 201  # a ledger that never had a token
    old = token_of("admin", "old")
    assert _anonymous_write(seeded, 1) == 401
    ledger.tokens.revoke_token("old", last_admin=True)
    assert not ledger.tokens.tokens_exist()
    for n, (kind, method, path, body) in enumerate(_requests(2)):
        response = seeded.request(method, path, json=body)
        if kind == "read":
            assert response.status_code == 200, path
        else:
            assert_problem(response, 401)
    new = token_of("admin", "new")
    assert seeded.post(f"{P}/trials", json={"status": "discard"}, headers=bearer(new)).status_code == 201
    assert_problem(seeded.post(f"{P}/trials", json={"status": "discard"}, headers=bearer(old)), 401)
    state = seeded.get(f"{API}/access", headers=bearer(new)).json()
    assert state["anonymous_writes"] == "closed" and not state["anonymous_writes_open"]
    assert state["changed_by"] == "first token 'old'"


def test_an_admin_reopens_anonymous_writes_explicitly_and_it_is_logged(  # type: ignore[no-untyped-def]
    seeded: TestClient, token_of, caplog: pytest.LogCaptureFixture
) -> None:
    admin = bearer(token_of("admin", "root"))
    assert _anonymous_write(seeded, 0) == 401
    caplog.set_level(logging.INFO, logger="lineage.audit")
    assert_problem(seeded.put(f"{API}/access", json={"anonymous_writes": "open"}), 401)
    assert_problem(
        seeded.put(f"{API}/access", json={"anonymous_writes": "open"}, headers=bearer(token_of("writer"))), 403
    )
    assert_problem(
        seeded.put(f"{API}/access", json={"anonymous_writes": "maybe"}, headers=admin), 422, "anonymous_writes"
    )
    opened = seeded.put(f"{API}/access", json={"anonymous_writes": "open"}, headers=admin)
    assert opened.status_code == 200, opened.text
    assert opened.json()["anonymous_writes"] == "open" and opened.json()["changed_by"] == "token 'root'"
    assert opened.json()["changed_at"]
    assert "anonymous writes set to open by token 'root'" in caplog.text
    assert _anonymous_write(seeded, 1) == 201  # with tokens active: open means open
    closed = seeded.put(f"{API}/access", json={"anonymous_writes": "closed"}, headers=admin)
    assert closed.json()["anonymous_writes_open"] is False
    assert _anonymous_write(seeded, 2) == 401


def test_the_last_admin_token_is_revoked_only_explicitly(seeded: TestClient, token_of, db_url: str) -> None:  # type: ignore[no-untyped-def]
    root = bearer(token_of("admin", "root"))
    token_of("writer", "w")
    assert_problem(seeded.delete(f"{API}/tokens/root", headers=root), 409, "name")
    assert seeded.delete(f"{API}/tokens/w", headers=root).status_code == 204  # not an admin: fine
    refused = CliRunner().invoke(cli, ["--db", db_url, "token", "revoke", "root"])
    assert refused.exit_code == 2 and "--last-admin" in refused.stderr
    token_of("admin", "second")
    assert seeded.delete(f"{API}/tokens/root", headers=root).status_code == 204  # another admin remains
    done = CliRunner().invoke(cli, ["--db", db_url, "token", "revoke", "second", "--last-admin"])
    assert done.exit_code == 0, done.stderr
    ledger: Ledger = seeded.app.state.ledger  # type: ignore[attr-defined]
    assert not ledger.tokens.tokens_exist() and _anonymous_write(seeded, 0) == 401


def test_the_cli_shows_and_sets_anonymous_writes(db_url: str, ledger: Ledger) -> None:
    import json

    def run(*args: str) -> dict:
        result = CliRunner().invoke(cli, ["--db", db_url, "token", "anonymous-writes", *args], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)

    assert run() == {
        "anonymous_writes": "until-first-token",
        "anonymous_writes_open": True,
        "active_tokens": False,
        "changed_at": None,
        "changed_by": None,
    }
    ledger.tokens.create_token(name="t", role="reader")
    assert run()["anonymous_writes"] == "closed" and ledger.tokens.anonymous_writes_open() is False
    opened = run("open")
    assert opened["anonymous_writes_open"] is True and opened["changed_by"].startswith("cli (")
    assert run("closed")["anonymous_writes_open"] is False


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "myhost.example"])
def test_a_server_on_a_public_address_never_takes_an_anonymous_write(ledger: Ledger, db_url: str, host: str) -> None:
    ledger.projects.create_project("p")
    assert ledger.tokens.anonymous_writes_open()  # the ledger alone would take it
    with make_client(db_url, bind_host=host) as client:
        assert_problem(client.post(f"{P}/trials", json={"status": "discard"}), 401)
        assert client.get(f"{P}/trials").status_code == 200
    with make_client(db_url, bind_host=host, anonymous_read=False) as client:
        assert_problem(client.get(f"{P}/trials"), 401)
    with make_client(db_url, bind_host="127.0.0.1") as client:
        assert client.post(f"{P}/trials", json={"status": "discard"}).status_code == 201


@pytest.mark.slow
def test_a_public_server_stays_closed_when_its_last_token_goes(serve, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The issue's scenario on a real server bound to 0.0.0.0: the last token revoked,
    even anonymous writes re-opened on the ledger: no anonymous write is taken."""
    import httpx

    db = str(tmp_path / "public.db")
    ledger = Ledger.open(db)
    secret = ledger.tokens.create_token(name="root", role="admin")[1]
    server = serve(db, "--host", "0.0.0.0")
    with httpx.Client(base_url=server.url, timeout=60) as http:
        assert http.post(f"{API}/projects", json={"slug": "p"}, headers=bearer(secret)).status_code == 201
        ledger.tokens.revoke_token("root", last_admin=True)
        assert http.post(f"{API}/projects", json={"slug": "q"}).status_code == 401
        assert http.post(f"{P}/trials", json={"status": "discard"}).status_code == 401
        ledger.tokens.set_anonymous_writes("open", by="test")
        assert http.post(f"{P}/trials", json={"status": "discard"}).status_code == 401
        assert http.get(f"{P}/trials").status_code == 200
    ledger.close()
