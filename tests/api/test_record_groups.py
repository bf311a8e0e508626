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
    ledger.projects.create_project("p", lower_is_better=True)
    server = serve(db_url, "--log-level", "warning")
    answers: list[tuple[dict[str, Any], int, dict[str, Any]]] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            for i in range(PER_THREAD):
                body: dict[str, Any] = {
                    "status": "keep" if i % 3 else "discard",
                    "core_metric": 1.0 - (k * 100 + i) / 1e4,
                    "hypothesis": f"client {k} idea {i} warmup cosine schedule",
                    "notes": f"{k}-{i}",
                }
                if i % 10 == 7:  # a bad one among the good ones
                    body["parent_exp"] = "nowhere"
                response = http.post(
                    f"{API}/projects/p/trials",
                    json=body,
                    headers={"Idempotency-Key": f"k{k}-{i}"} if i % 5 == 0 else {},
                )
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
    stored = {trial.exp_id: trial for trial in ledger.trials.list_trials("p")}
    assert len(stored) == len(good) == ledger.projects.project("p").trial_count
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
            earlier = [
                t.core_metric
                for t in stored.values()
                if t.seq < out["trial"]["seq"] and t.status.value in ("keep", "baseline") and t.core_metric is not None
            ]
            assert all(out["trial"]["core_metric"] < metric for metric in earlier)
    assert " 500 " not in server.output()


class _Groups:
    """A ledger stand-in for RecordGroups: records each group's size, answers each item."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.recording = self  # the part RecordGroups calls: ledger.recording.record_group

    def record_group(self, project: str, requests: list[Any]) -> list[Any]:
        from lineage.domain import RecordResult, trial_from_mapping

        self.sizes.append(len(requests))
        return [
            RecordResult(trial_from_mapping({"exp_id": str(i), "status": "keep"}), True, None, False, ())
            for i, _ in enumerate(requests)
        ]


def _groups(**options: float) -> tuple[Any, _Groups]:
    from api.record_groups import RecordGroups
    from lineage.service import RecordRequest

    async def inline(fn, *args):  # type: ignore[no-untyped-def]
        return fn(*args)

    groups, ledger = RecordGroups(inline, **options), _Groups()
    groups.request = RecordRequest({"status": "keep"})  # type: ignore[attr-defined]
    return groups, ledger


def test_a_group_waits_for_the_writers_in_a_loop_and_not_for_others() -> None:
    """Writers that sent a record before on the same connection are waited for (up to the
    wait); connections used once are not."""
    import asyncio

    async def scenario() -> None:
        groups, ledger = _groups(peer_wait_s=60.0, peer_window_s=60.0)

        def send(writer: Any, project: str = "p") -> Any:
            return groups.record(ledger, project, groups.request, writer)

        for _ in range(2):  # a, b and c record together, twice: writers in a loop
            await asyncio.wait_for(asyncio.gather(*map(send, "abc")), 5)
        assert ledger.sizes[-1] == 3
        # a and b send together, c a little later: the group waits for c
        both = asyncio.gather(send("a"), send("b"))
        await asyncio.sleep(0.01)
        await asyncio.wait_for(asyncio.gather(both, send("c")), 5)
        assert ledger.sizes[-1] == 3
        # connections used once each (a client without keep-alive) are never waited for
        before = len(ledger.sizes)
        for k in range(3):
            await asyncio.wait_for(send(("10.0.0.1", 40000 + k), "q"), 5)
        assert ledger.sizes[before:] == [1, 1, 1]

    asyncio.run(scenario())


def test_a_writer_that_stopped_costs_at_most_the_wait() -> None:
    import asyncio

    async def scenario() -> None:
        groups, ledger = _groups(peer_wait_s=0.05, peer_window_s=60.0)
        for _ in range(2):
            await asyncio.gather(*(groups.record(ledger, "p", groups.request, w) for w in "abc"))
        await asyncio.wait_for(asyncio.gather(*(groups.record(ledger, "p", groups.request, w) for w in "ab")), 5)
        assert ledger.sizes[-1] == 2  # c never came: the group went without it

    asyncio.run(scenario())
