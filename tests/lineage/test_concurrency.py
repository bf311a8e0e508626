"""Several processes recording into one project never share an exp_id or lose a row."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from lineage.service import Ledger

WRITERS = 4
PER_WRITER = 40


def _writer(url: str, project: str, worker: int, queue) -> None:  # type: ignore[no-untyped-def]
    ledger = Ledger.open(url, upgrade=False)
    ids = []
    try:
        for i in range(PER_WRITER):
            result = ledger.record_trial(project, {"status": "discard", "core_metric": float(i), "notes": f"w{worker}"})
            ids.append(result.trial.exp_id)
        queue.put(("ok", ids))
    except Exception as exc:  # reported to the parent, which fails the test
        queue.put(("error", repr(exc)))
    finally:
        ledger.close()


@pytest.mark.slow
def test_concurrent_writers_get_distinct_exp_ids_and_lose_no_row(ledger: Ledger, db_url: str) -> None:
    ledger.create_project("race")
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
    stored = ledger.list_trials("race")
    assert sorted(t.exp_id for t in stored) == sorted(ids)
    assert sorted(ids) == [str(i).zfill(3) for i in range(WRITERS * PER_WRITER)]
    assert ledger.project("race").trial_count == WRITERS * PER_WRITER
