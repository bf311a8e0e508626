"""Real ``lineage serve`` processes (uvicorn on a free loopback port): end to end, many
clients at once on SQLite and PostgreSQL, and kill -9 in the middle of a write storm."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from api.cli import cli
from lineage.service import Ledger
from tests.api.conftest import API, ROOT, bearer, free_port

pytestmark = pytest.mark.slow

CLIENTS, PER_CLIENT = 8, 250
#: Upper bounds, generous for a busy 2-core machine (what is done sooner goes on at once):
#: one HTTP request of the test, one client process's whole run.
HTTP_TIMEOUT_S = 60.0
CLIENT_TIMEOUT_S = 600.0


def _client_cmd(url: str, project: str, count: int, prefix: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tests.api.load_client", url, project, str(count), prefix, *extra]


def _parse(output: str) -> tuple[dict[str, str], list[str]]:
    acks: dict[str, str] = {}
    fails: list[str] = []
    for line in output.splitlines():
        parts = line.split(" ", 3)
        if parts[0] == "ack":
            acks[parts[1]] = parts[2]
        elif parts[0] == "fail":
            fails.append(line)
    return acks, fails


def test_three_servers_starting_at_once_on_a_fresh_database_all_come_up(fresh_db_url: str, tmp_path: Path) -> None:
    """A team's first `docker compose up` of several instances: every `lineage serve`
    upgrades the new database on start (and loads the demo); all come up, ready, and the
    schema is at head once (before the fix, PostgreSQL's second upgrade died with
    UniqueViolation on alembic_version)."""
    import threading

    from lineage import migrate
    from lineage.db import make_engine
    from tests.api.conftest import Server

    servers = [
        Server(db=fresh_db_url, port=free_port(), log=tmp_path / f"server-{i}.log", args=("--demo",)) for i in range(3)
    ]
    failures: list[str] = []

    def start(server: Server) -> None:
        try:
            server.start()
        except AssertionError as exc:
            failures.append(str(exc))

    threads = [threading.Thread(target=start, args=(server,)) for server in servers]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        for server in servers:
            ready = httpx.get(f"{server.url}/ready", timeout=HTTP_TIMEOUT_S)
            assert ready.status_code == 200 and ready.json()["schema_revision"] == migrate.head_revision()
            projects = httpx.get(f"{server.url}{API}/projects", timeout=HTTP_TIMEOUT_S).json()
            assert [p["slug"] for p in projects] == ["a2tgpo-demo"]
    finally:
        for server in servers:
            server.stop()
    engine = make_engine(fresh_db_url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").all() == [(migrate.head_revision(),)]
    engine.dispose()


def test_end_to_end_over_real_http(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "e2e.db")
    server = serve(db, "--log-format", "json")
    with httpx.Client(base_url=server.url, timeout=HTTP_TIMEOUT_S) as http:
        assert http.get("/ready").json()["status"] == "ready"
        assert http.post(f"{API}/projects", json={"slug": "p", "lower_is_better": False}).status_code == 201
        made = http.post(
            f"{API}/projects/p/trials",
            json={"status": "baseline", "core_metric": 1.0},
            headers={"X-Request-ID": "e2e-1", "Idempotency-Key": "k"},
        )
        assert made.status_code == 201 and made.headers["x-request-id"] == "e2e-1"
        assert (
            http.post(
                f"{API}/projects/p/trials",
                json={"status": "baseline", "core_metric": 1.0},
                headers={"Idempotency-Key": "k"},
            ).status_code
            == 200
        )
        points = [{"step": i, "name": "kl", "value": i / 10} for i in range(5000)]
        sent = http.post(
            f"{API}/projects/p/trials/000/telemetry",
            content=gzip.compress(json.dumps({"points": points}).encode()),
            headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
        )
        assert sent.status_code == 201 and sent.json()["accepted"] == 5000
        prompt = http.get(f"{API}/projects/p/prompt", params={"specialist": "s"})
        assert prompt.status_code == 200 and f"{server.url}/api/v1/projects/p/trials" in prompt.text
        assert (
            http.get(
                f"{API}/projects/p/prompt",
                params={"specialist": "s"},
                headers={"If-None-Match": prompt.headers["etag"]},
            ).status_code
            == 304
        )
        assert http.get("/projects/p").status_code == 200  # the pages are served too
    server.stop()
    records = [json.loads(line) for line in server.output().splitlines() if line.startswith("{")]
    assert any(r.get("request_id") == "e2e-1" and r.get("status") == 201 for r in records), server.output()[-2000:]


def test_public_bind_with_a_token_serves_and_keeps_it_out_of_the_log(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "public.db")
    made = CliRunner().invoke(
        cli, ["--db", db, "token", "create", "--role", "writer", "--name", "ci"], catch_exceptions=False
    )
    secret = made.stdout.strip()
    server = serve(db, "--host", "0.0.0.0", "--log-level", "debug")
    with httpx.Client(base_url=server.url, timeout=HTTP_TIMEOUT_S) as http:
        assert http.post(f"{API}/projects", json={"slug": "p"}).status_code == 401
        assert (
            http.post(
                f"{API}/projects", json={"slug": "p"}, headers={**bearer(secret), "X-Request-ID": "text-log-1"}
            ).status_code
            == 201
        )
        assert http.get(f"{API}/projects").status_code == 200  # anonymous reads: on by default
        assert http.get(f"{API}/projects", headers=bearer(secret + "x")).status_code == 401
        assert http.get(f"{API}/projects?token={secret}").status_code == 200
    server.stop()
    log = server.output()
    assert "POST /api/v1/projects 201" in log
    assert any("[text-log-1]" in line and "POST /api/v1/projects 201" in line for line in log.splitlines())
    assert secret not in log and secret[4:] not in log


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_eight_clients_recording_at_once(serve, ledger: Ledger, db_url: str, backend: str) -> None:  # type: ignore[no-untyped-def]
    """8 processes x 250 creations against one server: exactly 2,000 rows, distinct
    exp_ids, no 5xx, no "database is locked". On PostgreSQL the server runs two worker
    processes (instances that share nothing but the database); a SQLite ledger has one
    writer at a time anyway, so one process serves it best."""
    ledger.projects.create_project("race")
    server = serve(db_url, "--workers", "2" if backend == "postgres" else "1", "--log-level", "warning")
    procs = [
        subprocess.Popen(
            _client_cmd(server.url, "race", PER_CLIENT, f"c{i}"),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(CLIENTS)
    ]
    acks: dict[str, str] = {}
    fails: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=CLIENT_TIMEOUT_S)
        assert proc.returncode == 0, err
        found, failed = _parse(out)
        acks.update(found)
        fails += failed
    assert fails == []
    assert len(acks) == CLIENTS * PER_CLIENT
    stored = {t.exp_id: t for t in ledger.trials.list_trials("race")}
    assert len(stored) == CLIENTS * PER_CLIENT == ledger.projects.project("race").trial_count
    assert set(stored) == {str(i).zfill(3) for i in range(CLIENTS * PER_CLIENT)}
    assert len(set(acks.values())) == len(acks)
    for key, exp_id in acks.items():
        assert stored[exp_id].notes == key.rsplit("-", 1)[0]
    assert "database is locked" not in server.output()
    assert " 500 " not in server.output()


def test_kill_9_mid_storm_loses_no_acknowledged_write(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "storm.db")
    Ledger.open(db).projects.create_project("storm")
    server = serve(db, "--log-level", "warning")
    client = subprocess.Popen(
        _client_cmd(server.url, "storm", 100_000, "s", "--give-up", "10"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[str] = []
    assert client.stdout is not None
    for line in client.stdout:
        seen.append(line)
        if len(seen) >= 300:
            break
    server.kill()  # SIGKILL, mid-request
    rest, _ = client.communicate(timeout=CLIENT_TIMEOUT_S)
    acks, fails = _parse("".join(seen) + rest)
    assert len(acks) >= 300
    assert not [f for f in fails if f.split(" ")[2].startswith("5")], fails  # refused connections only, no 5xx

    restarted = serve(db, "--log-level", "warning", port=free_port())
    with httpx.Client(base_url=restarted.url, timeout=HTTP_TIMEOUT_S) as http:
        listed = http.get(f"{API}/projects/storm/trials", params={"limit": 1000, "count": "true"}).json()
        total = listed["total"]
        stored = {t["exp_id"]: t for t in listed["items"]}
        while listed["next_cursor"]:
            listed = http.get(
                f"{API}/projects/storm/trials", params={"limit": 1000, "cursor": listed["next_cursor"]}
            ).json()
            stored.update({t["exp_id"]: t for t in listed["items"]})
    assert len(stored) == total
    for key, exp_id in acks.items():
        assert exp_id in stored, f"acknowledged {key} -> {exp_id} is missing after the crash"
    # the client retries every key from the start: nothing it had written is written twice
    again = subprocess.run(
        _client_cmd(restarted.url, "storm", len(acks) + 5, "s"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S,
    )
    replayed, failed = _parse(again.stdout)
    assert failed == []
    assert all(replayed[key] == exp_id for key, exp_id in acks.items())
    restarted.stop()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT COUNT(*), COUNT(DISTINCT exp_id) FROM trials").fetchone()
    assert rows[0] == rows[1] == len(replayed) == len(set(replayed.values()))
