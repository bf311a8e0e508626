"""The batch write through its other faces, against real processes: the Python client
(``LedgerClient.record_trials``) on a real ``lineage serve`` on both backends, and the
MCP tool ``record_trials`` over stdio."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession

from lineage.service import Ledger
from tests.api.test_mcp import _data, _failed, _session_run, _text
from tests.trainer_hooks.client.conftest import fast_client
from trainer_hooks.client import LedgerRejected

pytestmark = pytest.mark.slow


def test_client_records_many_trials_in_order_and_a_retry_is_the_same(
    serve,
    ledger: Ledger,
    db_url: str,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    ledger.projects.create_project("p", lower_is_better=True)
    server = serve(db_url)
    client = fast_client(server.url, tmp_path / "spool", run_id="batcher")
    try:
        trials = [
            {"status": "keep" if i % 3 == 0 else "discard", "core_metric": 2.0 - i / 1000, "hypothesis": f"step {i}"}
            for i in range(1200)
        ]  # two requests
        results = client.record_trials(trials, idempotency_key="day-7")
        assert [r["trial"]["exp_id"] for r in results] == [f"{i:03d}" for i in range(1200)]
        assert all(r["created"] for r in results)
        assert results[1]["trial"]["parent_exp"] == "000"
        again = client.record_trials(trials, idempotency_key="day-7")
        assert [r["trial"]["exp_id"] for r in again] == [r["trial"]["exp_id"] for r in results]
        assert not any(r["created"] for r in again)
        with pytest.raises(LedgerRejected) as refused:
            client.record_trials([{"status": "discard"}, {"status": "keep", "core_metric": "high"}])
        assert refused.value.status == 422 and "trials[1].core_metric" in str(refused.value)
        assert ledger.projects.project("p").trial_count == 1200
    finally:
        client.close()


def test_mcp_record_trials_is_atomic_and_names_the_item(tmp_path: Path) -> None:
    db = str(tmp_path / "mcp.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("p")

    async def steps(session: ClientSession) -> dict[str, Any]:
        bad = await session.call_tool(
            "record_trials",
            {"project": "p", "trials": [{"status": "baseline", "core_metric": 1.0}, {"status": "exploded"}]},
        )
        good = await session.call_tool(
            "record_trials",
            {
                "project": "p",
                "idempotency_key": "b1",
                "trials": [
                    {"status": "baseline", "core_metric": 1.0, "hypothesis": "warmup 500 steps"},
                    {"status": "keep", "core_metric": 0.5, "hypothesis": "warmup 500 steps", "idempotency_key": "t2"},
                ],
                "similar": True,
            },
        )
        again = await session.call_tool(
            "record_trials",
            {
                "project": "p",
                "idempotency_key": "b1",
                "trials": [
                    {"status": "baseline", "core_metric": 1.0, "hypothesis": "warmup 500 steps"},
                    {"status": "keep", "core_metric": 0.5, "hypothesis": "warmup 500 steps", "idempotency_key": "t2"},
                ],
                "similar": True,
            },
        )
        return {"bad": (_failed(bad), _text(bad)), "good": _data(good), "again": _data(again)}

    out = anyio.run(_session_run, db, steps)
    failed, text = out["bad"]
    assert failed and json.loads(text[text.index("{") :])["field"] == "trials[1].status"
    good = out["good"]
    assert [r["trial"]["exp_id"] for r in good["results"]] == ["000", "001"]
    assert good["results"][1]["trial"]["parent_exp"] == "000" and good["results"][1]["is_new_best"]
    assert [s["exp_id"] for s in good["results"][1]["similar_prior"]] == ["000"]
    assert out["again"]["replayed"] is True
    assert [r["trial"]["exp_id"] for r in out["again"]["results"]] == ["000", "001"]
    assert ledger.projects.project("p").trial_count == 2
    ledger.close()
