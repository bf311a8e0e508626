"""Nothing is lost, nothing is stored twice: a real ``lineage serve`` process (and, for
5xx and slow replies, a real proxy in front of it) while the ledger goes away, fails,
answers late, revokes the token, or the trainer is killed. Each test ends with the
ledger's file holding every logged point exactly once."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from api.cli import cli
from tests.api.conftest import ROOT, free_port
from tests.trainer_hooks.client.conftest import (
    expected_points,
    fast_client,
    log_steps,
    offline_client,
    point_rows,
    stored_points,
    trial_count,
)
from tests.trainer_hooks.client.proxy import Fault
from trainer_hooks.client.cli import spool
from trainer_hooks.client.spool import Spool, spool_files

pytestmark = pytest.mark.slow

#: Upper bounds, generous for a busy 2-core machine (what is done sooner goes on at once):
#: a flush to a server that answers, a process's run. The short timeouts below (0.2 s,
#: 0.3 s) are against servers that are down: no answer comes however long one waits.
FLUSH_TIMEOUT_S = 120
PROCESS_TIMEOUT_S = 300


def restore_spool(path: Path, snapshot: bytes) -> None:
    """The spool file back as ``snapshot`` was read, its WAL and journal gone: a trainer
    that died after its writes reached the ledger, before any was marked sent."""
    for leftover in path.parent.glob(path.name + "*"):
        leftover.unlink()
    path.write_bytes(snapshot)


def flush_cli(directory: Path, *args: str) -> tuple[int, str, str]:
    """``lineage spool flush``: the click group the ``lineage.commands`` entry point names,
    invoked as the ``lineage`` CLI invokes it (exit code, stdout, stderr)."""
    done = CliRunner().invoke(spool, ["flush", str(directory), *args])
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return done.exit_code, done.stdout, done.stderr


def test_server_down_at_start_loses_nothing(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    db = str(tmp_path / "ledger.db")
    client = fast_client(f"http://127.0.0.1:{port}", tmp_path / "spool")
    client.ensure_project()
    client.plan_trial(hypothesis="down at start")
    log_steps(client, range(300))
    assert client.flush(timeout=0.3) is False  # nothing answers yet
    serve(db, port=port)
    log_steps(client, range(300, 600))
    client.finish_trial(core_metric=1.0)
    report = client.close()
    assert report.delivered, report
    assert stored_points(db) == expected_points(range(600))
    assert trial_count(db) == 1


def test_server_killed_mid_run_and_restarted_loses_nothing(serve, engine, db_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = engine  # SQLite and PostgreSQL
    server = serve(db_url)
    client = fast_client(server.url, tmp_path / "spool")
    client.ensure_project()
    client.plan_trial(hypothesis="server dies")
    log_steps(client, range(200))
    assert client.flush(timeout=FLUSH_TIMEOUT_S)
    server.kill()
    log_steps(client, range(200, 400))
    assert client.flush(timeout=0.3) is False
    server.start()
    log_steps(client, range(400, 500))
    client.finish_trial(core_metric=1.0)
    assert client.close().delivered
    assert stored_points(db) == expected_points(range(500))


def test_5xx_bursts_and_lost_replies_store_each_point_once(serve, proxy, engine, db_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = engine  # SQLite and PostgreSQL
    server = serve(db_url)

    def fault(number: int, method: str, path: str) -> Fault:
        if number % 7 in (1, 2, 3):  # a burst of refusals
            return Fault(refuse=True, status=503)
        if number % 7 == 5:  # stored by the ledger, but the client hears a 502
            return Fault(drop_reply=True, status=502)
        return Fault()

    front = proxy(server.url, fault)
    client = fast_client(front.url, tmp_path / "spool", max_batch_points=150)
    client.ensure_project()
    client.plan_trial(hypothesis="flaky gateway")
    for chunk in range(10):
        log_steps(client, range(chunk * 50, chunk * 50 + 50))
        time.sleep(0.03)
    client.finish_trial(core_metric=2.0)
    assert client.close().delivered
    assert front.faults >= 5
    assert stored_points(db) == expected_points(range(500))
    assert trial_count(db) == 1


def test_replies_slower_than_the_client_timeout_store_each_point_once(serve, proxy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    posts: list[int] = []

    def fault(number: int, method: str, path: str) -> Fault:
        if not path.endswith("/telemetry"):
            return Fault()
        posts.append(number)
        # every other batch: the ledger stores it, the reply comes after the client gave up
        return Fault(delay=0.5) if len(posts) % 2 else Fault()

    front = proxy(server.url, fault)
    spool_dir = tmp_path / "spool"
    client = fast_client(front.url, spool_dir, timeout=0.25, max_batch_points=200, run_id="slow", keep_spool=True)
    client.ensure_project()
    client.plan_trial(hypothesis="slow gateway")
    log_steps(client, range(400))
    client.finish_trial(core_metric=3.0)
    assert client.close().delivered
    assert stored_points(db) == expected_points(range(400))
    with sqlite3.connect(spool_dir / "slow.spool") as conn:
        batches = conn.execute("SELECT COUNT(DISTINCT group_key) FROM ops WHERE kind = 'points'").fetchone()[0]
    assert len(posts) > batches  # batches were sent again after a timeout, and stored once


def test_sigkilled_trainer_loses_nothing_that_reached_the_spool(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    spool_dir = tmp_path / "spool"
    trainer = subprocess.Popen(
        [sys.executable, "-m", "tests.trainer_hooks.client.trainer_process", server.url, str(spool_dir), "p", "40"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    spooled = 0
    assert trainer.stdout is not None
    while spooled < 400:
        line = trainer.stdout.readline()
        assert line, "the trainer exited early"
        spooled = int(line.split()[1])
    server.kill()  # some batches are in flight or unsent when the trainer dies
    trainer.kill()
    trainer.wait(timeout=PROCESS_TIMEOUT_S)
    with sqlite3.connect(spool_dir / "plain-run.spool") as conn:
        in_spool = conn.execute("SELECT COALESCE(SUM(points), 0) FROM ops").fetchone()[0]
    server.start()
    code, out, err = flush_cli(spool_dir)
    assert code == 0, err
    stored = stored_points(db)
    assert max(stored.values()) == 1  # no point twice
    assert expected_points(range(spooled)) - stored == {}  # every point the trainer saw spooled
    assert in_spool == sum(stored.values())
    assert json.loads(out)["removed"] and spool_files(spool_dir) == []  # delivered, and its trainer is gone


def test_sigterm_labels_the_trial_and_flushes_before_exiting(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    trainer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.trainer_hooks.client.trainer_process",
            server.url,
            str(tmp_path / "spool"),
            "p",
            "40",
            "recorder",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert trainer.stdout is not None
    spooled = 0
    while spooled < 200:
        line = trainer.stdout.readline()
        assert line, "the trainer exited early"
        spooled = int(line.split()[1])
    trainer.terminate()
    assert trainer.wait(timeout=PROCESS_TIMEOUT_S) == 143
    spooled = max([spooled, *(int(line.split()[1]) for line in trainer.stdout.read().splitlines())])
    stored = stored_points(db)
    assert max(stored.values()) == 1 and expected_points(range(spooled)) - stored == {}
    with sqlite3.connect(db) as conn:
        status, notes = conn.execute("SELECT status, notes FROM trials").fetchone()
    assert status == "harness_abort" and notes.startswith("SystemExit: 143")


def test_replaying_a_delivered_spool_stores_nothing_twice(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db, port, spool_dir, client = offline_client(tmp_path, "twice", "replayed")  # nothing listens yet
    log_steps(client, range(300))
    client.finish_trial(core_metric=1.0)
    assert not client.close(timeout=0.2).delivered
    # A copy of the spool before delivery: restoring it after delivery is a trainer that
    # died after every write reached the ledger but before any was marked sent.
    snapshot = (spool_dir / "twice.spool").read_bytes()
    serve(db, port=port)
    for attempt in range(3):
        if attempt:
            restore_spool(spool_dir / "twice.spool", snapshot)
        code, out, err = flush_cli(spool_dir, "--keep")
        assert code == 0, err
        assert '"exp_id": "000"' in out
        assert stored_points(db) == expected_points(range(300))
        assert trial_count(db) == 1
    code, out, err = flush_cli(spool_dir)  # a delivered spool sends nothing, and is deleted now
    assert code == 0 and json.loads(out)["points_sent"] == 0 and json.loads(out)["removed"]
    assert spool_files(spool_dir) == []


def test_revoked_token_stops_sending_keeps_the_spool_and_a_new_token_flushes_it(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    runner = CliRunner()

    def token(name: str) -> str:
        made = runner.invoke(
            cli, ["--db", db, "token", "create", "--role", "writer", "--name", name], catch_exceptions=False
        )
        return made.stdout.strip().splitlines()[0]

    first = token("trainer")
    server = serve(db)
    spool_dir = tmp_path / "spool"
    client = fast_client(server.url, spool_dir, token=first)
    client.ensure_project()
    client.plan_trial(hypothesis="token revoked")
    log_steps(client, range(200))
    assert client.flush(timeout=FLUSH_TIMEOUT_S)
    assert runner.invoke(cli, ["--db", db, "token", "revoke", "trainer"], catch_exceptions=False).exit_code == 0
    log_steps(client, range(200, 400))
    client.finish_trial(core_metric=1.0)
    report = client.close()
    assert not report.delivered and report.pending_points == 400 * 4 - 200 * 4
    assert "HTTP 401" in (report.error or "") and "lineage spool flush" in (report.error or "")
    assert stored_points(db) == expected_points(range(200))
    (spool_file,) = spool_files(spool_dir)
    assert json.loads(Spool(spool_file).get("rejected") or "{}")["status"] == 401
    code, _, err = flush_cli(spool_dir, "--token", first, "--timeout", str(FLUSH_TIMEOUT_S))
    assert code == 1 and "HTTP 401" in err and err.count("\n") == 1
    code, out, err = flush_cli(spool_dir, "--token", token("trainer-2"), "--keep")
    assert code == 0, err
    assert Spool(spool_file).get("rejected") is None
    assert stored_points(db) == expected_points(range(400))
    assert trial_count(db) == 1


def test_a_spool_of_an_older_client_with_point_lists_is_still_delivered_once(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Spools written before the columnar form hold ``points`` ops (joined point objects):
    ``lineage spool flush`` sends them as point lists, the new ``columns`` ops after them as
    columnar batches, in order, and a replay of the whole spool stores nothing twice."""
    from trainer_hooks.client.points import encode_columns, encode_rows

    db, port, spool_dir, client = offline_client(tmp_path, "mixed", "old and new spool ops")
    assert not client.close(timeout=0.2).delivered
    old = Spool(spool_dir / "mixed.spool")
    old.append_points([encode_rows(point_rows(range(40))), encode_rows(point_rows(range(40, 80)))], kind="points")
    old.append_points([encode_columns([point_rows(range(80, 150))])])
    old.append_points([encode_rows(point_rows(range(150, 200)))], kind="points")
    old.close()
    snapshot = (spool_dir / "mixed.spool").read_bytes()
    serve(db, port=port)
    for attempt in range(2):
        if attempt:
            restore_spool(spool_dir / "mixed.spool", snapshot)
        code, out, err = flush_cli(spool_dir, "--keep")
        assert code == 0, err
        assert json.loads(out)["points_sent"] == 800
        assert stored_points(db) == expected_points(range(200))
    with sqlite3.connect(db) as conn:
        walls = conn.execute("SELECT COUNT(wall_time) FROM telemetry_points").fetchone()[0]
    assert walls == 2 * 200  # the first point of each log call carries the sender's clock
