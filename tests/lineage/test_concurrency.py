"""Several processes recording into one project never share an exp_id or lose a row; the
writers of one process queue on the store."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from pathlib import Path

import pytest

from lineage.service import Ledger

WRITERS = 4
PER_WRITER = 40


def _writer(url: str, project: str, worker: int, queue) -> None:  # type: ignore[no-untyped-def]
    ledger = Ledger.open(url, upgrade=False)
    ids = []
    try:
        for i in range(PER_WRITER):
            result = ledger.recording.record_trial(
                project, {"status": "discard", "core_metric": float(i), "notes": f"w{worker}"}
            )
            ids.append(result.trial.exp_id)
        queue.put(("ok", ids))
    except Exception as exc:  # reported to the parent, which fails the test
        queue.put(("error", repr(exc)))
    finally:
        ledger.close()


@pytest.mark.slow
def test_concurrent_writers_get_distinct_exp_ids_and_lose_no_row(ledger: Ledger, db_url: str) -> None:
    ledger.projects.create_project("race")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(db_url, "race", w, queue)) for w in range(WRITERS)]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    errors = [r[1] for r in results if r[0] == "error"]
    assert errors == []
    ids = [exp_id for _, batch in results for exp_id in batch]
    assert len(ids) == len(set(ids)) == WRITERS * PER_WRITER
    stored = ledger.trials.list_trials("race")
    assert sorted(t.exp_id for t in stored) == sorted(ids)
    assert sorted(ids) == [str(i).zfill(3) for i in range(WRITERS * PER_WRITER)]
    assert ledger.projects.project("race").trial_count == WRITERS * PER_WRITER


def test_the_writers_of_one_process_queue_on_the_store_not_on_sqlites_busy_handler(tmp_path: Path) -> None:
    """A second thread's write waits on the store (``StoreCore.write``) while the first holds
    its transaction, so it begins as the first commits: it succeeds even where SQLite itself
    would not wait at all (a busy timeout of 0 fails ``BEGIN IMMEDIATE`` at once)."""
    from sqlalchemy import event

    ledger = Ledger.open(str(tmp_path / "queue.db"))
    ledger.projects.create_project("q")

    @event.listens_for(ledger.engine, "connect")
    def _no_wait(dbapi_connection, _record):  # type: ignore[no-untyped-def]  # after the library's own hook
        dbapi_connection.execute("PRAGMA busy_timeout=0")

    ledger.engine.dispose()
    store = ledger.store
    trying = threading.Event()
    outcome: list[str] = []

    def second() -> None:
        trying.set()
        try:
            with store.write() as conn:
                store.core.execute(conn, "UPDATE projects SET title = 'second' WHERE slug = 'q'")
            outcome.append("ok")
        except Exception as exc:  # noqa: BLE001 - reported by the assertion
            outcome.append(repr(exc))

    with store.write() as conn:
        store.core.execute(conn, "UPDATE projects SET title = 'first' WHERE slug = 'q'")
        writer = threading.Thread(target=second)
        writer.start()
        assert trying.wait(30)
        time.sleep(0.2)  # let the second writer reach its wait (were it slower, the test only proves less)
    writer.join(30)
    assert outcome == ["ok"]
    assert ledger.projects.project("q").title == "second"
    ledger.close()


def test_updates_given_as_functions_of_the_stored_trial_merge_and_lose_nothing(ledger: Ledger) -> None:
    """``update_trial(changes=function)`` reads the trial inside its write, so threads that
    each add one entry to ``extra`` at once keep all of them; what the function raises
    stores nothing."""
    ledger.projects.create_project("merge")
    exp_id = ledger.recording.record_trial("merge", {"status": "running", "extra": {"config": {}}}).trial.exp_id
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def add(key: str) -> None:
        def changes(current):  # type: ignore[no-untyped-def]
            return {"extra": {**current.extra, "config": {**current.extra["config"], key: key}}}

        try:
            start.wait(timeout=60)
            ledger.recording.update_trial("merge", exp_id, changes)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(f"k{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert ledger.trials.trial("merge", exp_id).extra["config"] == {f"k{i}": f"k{i}" for i in range(8)}

    def refuse(current):  # type: ignore[no-untyped-def]
        raise ValueError(f"not with {len(current.extra['config'])} entries")

    with pytest.raises(ValueError, match="not with 8 entries"):
        ledger.recording.update_trial("merge", exp_id, refuse)
    assert len(ledger.trials.trial("merge", exp_id).extra["config"]) == 8
