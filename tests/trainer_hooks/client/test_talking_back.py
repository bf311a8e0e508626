"""A client that talks back, against real ``lineage serve`` processes: one log line when
the ledger goes away and one when delivery resumes; the outcome the ledger decided, on
the recorder; an existing project costs no ``409 Conflict``; delivered spools are
deleted and undelivered ones kept (the retention rule); an omitted parent is not sent."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import API, free_port
from tests.trainer_hooks.client.conftest import expected_points, fast_client, log_steps, stored_points
from tests.trainer_hooks.client.proxy import Fault
from tests.trainer_hooks.client.test_adapters import recorder, trial
from tests.trainer_hooks.client.test_durability import FLUSH_TIMEOUT_S, flush_cli
from trainer_hooks.client import TrialOutcome
from trainer_hooks.client.spool import Spool, spool_files

pytestmark = pytest.mark.slow

LOGGER = "trainer_hooks.client"


def said(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


def test_one_line_when_the_ledger_goes_away_and_one_when_delivery_resumes(serve, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    client = fast_client(server.url, tmp_path / "spool", run_id="outage")
    caplog.set_level(logging.INFO, logger=LOGGER)
    client.ensure_project()
    client.plan_trial(hypothesis="the ledger restarts")
    log_steps(client, range(100))
    assert client.flush(timeout=FLUSH_TIMEOUT_S)
    assert said(caplog) == []
    server.kill()
    log_steps(client, range(100, 300))  # 800 points held while the ledger is away
    deadline = time.monotonic() + FLUSH_TIMEOUT_S
    while not said(caplog) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)  # several retries fail meanwhile: still one line
    (away,) = said(caplog)
    assert away.startswith(f"ledger at {server.url} unreachable (") and str(tmp_path / "spool" / "outage.spool") in away
    server.start()
    assert client.flush(timeout=FLUSH_TIMEOUT_S)
    client.finish_trial(core_metric=1.0)
    report = client.close()
    assert report.delivered
    back = said(caplog)[1:]
    assert len(back) == 1 and back[0].startswith(f"ledger at {server.url} reachable again after ")
    assert "delivering the 800 points (" in back[0] and back[0].endswith("writes) held in the spool")
    assert said(caplog, logging.INFO) == [f"ledger: trial {report.exp_id}: keep, the new best"]
    assert stored_points(db) == expected_points(range(300))


def test_the_recorder_holds_the_outcome_the_ledger_decided(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    outcomes = []
    for metric, margin in ((1.0, 0.0), (0.8, 0.0), (0.9, 0.0), (0.75, 0.1)):
        with recorder(server, tmp_path, keep_margin=margin) as rec:
            rec.log(0, {"loss": metric})
            rec.result(metric)
        outcomes.append(rec.outcome)
        stored = trial(server, rec.exp_id)
        assert rec.outcome is not None and (rec.outcome.status, rec.outcome.delta_vs_best) == (
            stored["status"],
            stored["delta_vs_best"],
        )
    first, second, worse, not_by_the_margin = outcomes
    none = "no noise floor: no reruns yet"  # the verdict with no reruns
    assert first == TrialOutcome("000", "keep", 1.0, None, True, "000", noise=none) and first.kept
    assert second == TrialOutcome(
        "001", "keep", 0.8, pytest.approx(-0.2), True, "001", noise=none + " to tell this delta from noise"
    )
    assert worse == TrialOutcome(
        "002", "discard", 0.9, pytest.approx(0.1), False, "001", noise=none + " to tell this delta from noise"
    )
    assert not worse.kept
    assert not_by_the_margin == TrialOutcome(
        "003", "discard", 0.75, pytest.approx(-0.05), False, "001", noise=none + " to tell this delta from noise"
    )
    rec = recorder(server, tmp_path)
    with pytest.raises(RuntimeError):
        with rec:
            raise RuntimeError("diverged")
    assert rec.outcome == TrialOutcome("004", "crash", None, None, False, "001", noise=none)


def test_an_existing_project_is_used_without_a_conflict(serve, proxy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    front = proxy(server.url, lambda number, method, path: Fault())
    for run in range(3):
        client = fast_client(front.url, tmp_path / "spool")
        client.ensure_project(lower_is_better=False)
        client.plan_trial(hypothesis=f"run {run}")
        client.finish_trial(core_metric=float(run))
        assert client.close().delivered
    project = [
        (method, status)
        for method, path, status in front.answered
        if path.startswith(f"{API}/projects/p") and path.count("/") == 4 or path == f"{API}/projects"
    ]
    assert project == [("GET", 404), ("POST", 201), ("GET", 200), ("GET", 200)]
    assert all(status < 400 for _, path, status in front.answered if path != f"{API}/projects/p")
    assert httpx.get(f"{server.url}{API}/projects/p", timeout=60).json()["lower_is_better"] is False


def test_a_delivered_spool_is_deleted_at_close_unless_kept(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    for keep in (False, True):
        spool_dir = tmp_path / f"spool-{keep}"
        client = fast_client(server.url, spool_dir, keep_spool=keep)
        client.ensure_project()
        client.plan_trial(hypothesis="delivered")
        log_steps(client, range(50))
        client.finish_trial(core_metric=1.0)
        report = client.close()
        assert report.delivered and report.spool_removed is not keep
        assert sorted(p.name for p in spool_dir.iterdir()) == ([f"{client.run_id}.spool"] if keep else [])
        assert client.exp_id == report.exp_id and client.close() == report  # no spool reopened


def test_an_undelivered_spool_stays_until_flush_delivers_it(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    port = free_port()
    spool_dir = tmp_path / "spool"
    client = fast_client(f"http://127.0.0.1:{port}", spool_dir, run_id="later")  # nothing listens
    client.ensure_project()
    client.plan_trial(hypothesis="delivered later")
    log_steps(client, range(50))
    client.finish_trial(core_metric=2.0)
    report = client.close(timeout=0.2)
    assert not report.delivered and not report.spool_removed and client.outcome is None
    assert [p.name for p in spool_files(spool_dir)] == ["later.spool"]
    serve(db, port=port)
    code, out, err = flush_cli(spool_dir)
    assert code == 0, err
    line = json.loads(out)
    assert line["removed"] and line["outcome"] == {
        "exp_id": "000",
        "status": "keep",
        "core_metric": 2.0,
        "delta_vs_best": None,
        "is_new_best": True,
        "best_exp": "000",
        "within_noise": None,
        "noise": "no noise floor: no reruns yet",
    }
    assert list(spool_dir.iterdir()) == []
    assert stored_points(db) == expected_points(range(50))


def test_flush_never_deletes_the_spool_of_a_run_still_going(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    spool_dir = tmp_path / "spool"
    client = fast_client(server.url, spool_dir, run_id="live")
    client.ensure_project()
    client.plan_trial(hypothesis="still running")
    log_steps(client, range(50))
    assert client.flush(timeout=FLUSH_TIMEOUT_S)
    code, out, err = flush_cli(spool_dir)  # caught up, but the run goes on
    assert code == 0 and json.loads(out)["removed"] is False
    log_steps(client, range(50, 100))
    client.finish_trial(core_metric=1.0)
    assert client.close().spool_removed
    assert stored_points(db) == expected_points(range(100))


def test_an_omitted_parent_is_not_sent(tmp_path: Path) -> None:
    # None leaves the parent to the ledger's rule (the current best); "" asks for a root,
    # as it does over HTTP and MCP
    client = fast_client(f"http://127.0.0.1:{free_port()}", tmp_path / "spool", run_id="parents")  # nothing listens
    client.plan_trial(hypothesis="the ledger's default parent")
    client.plan_trial(hypothesis="a root", parent_exp="")
    client.plan_trial(hypothesis="a child", parent_exp="007")
    client.close(timeout=0)
    plans: list[dict[str, Any]] = [
        json.loads(op.body) for op in Spool(tmp_path / "spool" / "parents.spool").ops() if op.kind == "plan"
    ]
    assert ["parent_exp" in plan for plan in plans] == [False, True, True]
    assert plans[1]["parent_exp"] == "" and plans[2]["parent_exp"] == "007"


def test_runs_finishing_together_are_judged_by_the_ledger_so_a_tie_never_keeps(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Four runs planned, then finished at once with the same metric: the ledger decides
    each verdict in its write, against the best at that moment, so exactly one keeps (the
    client used to read the best and then PATCH: each read the same old best and kept)."""
    import threading

    server = serve(str(tmp_path / "ledger.db"))
    base = fast_client(server.url, tmp_path / "spool", run_id="base")
    base.ensure_project()
    base.plan_trial(hypothesis="baseline")
    base.finish_trial(core_metric=1.0)
    assert base.close().delivered
    clients = [fast_client(server.url, tmp_path / "spool", run_id=f"run-{i}") for i in range(4)]
    for i, client in enumerate(clients):
        client.plan_trial(hypothesis=f"run {i}")
        assert client.flush(timeout=FLUSH_TIMEOUT_S)
    start = threading.Barrier(len(clients))

    def finish(client: Any) -> None:
        start.wait()
        client.finish_trial(core_metric=0.9)
        assert client.close().delivered

    threads = [threading.Thread(target=finish, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    listed = httpx.get(f"{server.url}{API}/projects/p/trials", params={"limit": 100}).json()
    statuses = sorted(t["status"] for t in listed["items"] if t["hypothesis"].startswith("run "))
    assert statuses == ["discard", "discard", "discard", "keep"]
