"""Single records arriving together at a real ``lineage serve`` (they share commits,
``api.record_groups``): each request still gets its own answer, a bad one its own
problem, and what each was told is what the ledger stored."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from lineage.service import Ledger
from tests.api.conftest import API

THREADS = 6
PER_THREAD = 40


def test_concurrent_records_each_get_their_own_answer(serve, ledger: Ledger, db_url: str) -> None:  # type: ignore[no-untyped-def]
    ledger.create_project("p", lower_is_better=True)
    server = serve(db_url, "--log-level", "warning")
    answers: list[tuple[dict[str, Any], int, dict[str, Any]]] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            for i in range(PER_THREAD):
                body: dict[str, Any] = {"status": "keep" if i % 3 else "discard", "core_metric": 1.0 - (k * 100 + i) / 1e4,
                                        "hypothesis": f"client {k} idea {i} warmup cosine schedule", "notes": f"{k}-{i}"}
                if i % 10 == 7:  # a bad one among the good ones
                    body["parent_exp"] = "nowhere"
                response = http.post(f"{API}/projects/p/trials", json=body,
                                     headers={"Idempotency-Key": f"k{k}-{i}"} if i % 5 == 0 else {})
                with lock:
                    answers.append((body, response.status_code, response.json()))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    bad = [(status, out) for body, status, out in answers if body.get("parent_exp") == "nowhere"]
    assert len(bad) == THREADS * (PER_THREAD // 10)
    assert all(status == 422 and out["field"] == "parent_exp" for status, out in bad), bad[:2]
    good = [(body, status, out) for body, status, out in answers if body.get("parent_exp") != "nowhere"]
    assert all(status == 201 for _, status, _ in good), [out for _, status, out in good if status != 201][:2]
    stored = {trial.exp_id: trial for trial in ledger.list_trials("p")}
    assert len(stored) == len(good) == ledger.project("p").trial_count
    assert sorted(stored) == [str(i).zfill(3) for i in range(len(good))]
    for body, _, out in good:
        trial = stored[out["trial"]["exp_id"]]
        assert trial.notes == body["notes"] and out["trial"]["notes"] == body["notes"]
        assert out["trial"]["parent_exp"] == trial.parent_exp and out["trial"]["seq"] == trial.seq
        assert out["trial"]["delta_vs_best"] == trial.delta_vs_best
        assert "similar_prior" in out
    # the best moved as the answers say: each "is_new_best" trial beats every trial stored before it
    for _, _, out in good:
        if out["is_new_best"]:
            earlier = [t.core_metric for t in stored.values() if t.seq < out["trial"]["seq"]
                       and t.status.value in ("keep", "baseline") and t.core_metric is not None]
            assert all(out["trial"]["core_metric"] < metric for metric in earlier)
    assert " 500 " not in server.output()
