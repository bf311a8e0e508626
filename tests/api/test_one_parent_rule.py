"""One parent rule on every face: a trial recorded without ``parent_exp`` forks from the
branch tip (the most recent keep or baseline, what a git loop's HEAD is), whether it
comes over HTTP, MCP (the Python SDK over Streamable HTTP), ``lineage record`` or the
trainer's client, against one real ``lineage serve``. The loop keeps a trial that does
not improve ("simpler code? keep"), so the tip and the best differ."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from lineage.service import Ledger
from tests.api.conftest import API
from tests.servers import serving
from trainer_hooks.client import LedgerClient


async def _mcp_record(url: str, trial: dict[str, Any]) -> dict[str, Any]:
    async with httpx2.AsyncClient(timeout=60) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                answer = await session.call_tool("record_trial", {"project": "p", "trial": trial})
                assert not answer.is_error, answer
                return json.loads(answer.content[0].text)  # type: ignore[union-attr]


def test_every_face_forks_an_omitted_parent_from_the_tip(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with serving(tmp_path, "--db", str(db)) as base:
        api = f"{base}{API}/projects"
        assert httpx.post(api, json={"slug": "p", "metric_name": "val_bpb", "lower_is_better": True}).status_code == 201

        def http(body: dict[str, Any]) -> dict[str, Any]:
            answer = httpx.post(f"{api}/p/trials", json=body, timeout=60)
            assert answer.status_code == 201, answer.text
            return answer.json()["trial"]

        def cli(status: str, metric: str) -> dict[str, Any]:
            command = [sys.executable, "-m", "api.cli", "--db", str(db), "record", "-p", "p"]
            command += ["--status", status, "--metric", metric, "-d", f"cli {status}", "--format", "json"]
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        def trainer(metric: float) -> str:
            client = LedgerClient(base, None, "p", spool_dir=tmp_path / "spool", system_metrics=False)
            client.plan_trial(hypothesis="trainer run")
            client.finish_trial(core_metric=metric)
            report = client.close()
            assert report.delivered
            return str(report.exp_id)

        recorded = [
            http({"status": "baseline", "core_metric": 1.0}),  # 000, a root
            http({"status": "keep", "core_metric": 0.9}),  # 001 under 000
            anyio.run(_mcp_record, base, {"status": "keep", "core_metric": 0.95, "hypothesis": "simpler"})["trial"],
            cli("discard", "0.97"),  # 003 under the tip 002, though 001 is the best
            http({"status": "discard", "core_metric": 0.96}),
        ]
        trained = trainer(0.8)  # planned under 002, kept by the ledger's verdict: the tip moves
        recorded.append(cli("keep", "0.85"))
        recorded.append(anyio.run(_mcp_record, base, {"status": "discard", "core_metric": 0.9})["trial"])
    ledger = Ledger.open(str(db))
    try:
        parents = {t.exp_id: t.parent_exp for t in ledger.trials.list_trials("p")}
        statuses = {t.exp_id: t.status.value for t in ledger.trials.list_trials("p")}
    finally:
        ledger.close()
    assert [t["exp_id"] for t in recorded] == ["000", "001", "002", "003", "004", "006", "007"]
    assert trained == "005" and statuses["005"] == "keep"
    assert parents == {"000": "", "001": "000", "002": "001", "003": "002", "004": "002", "005": "002"} | {
        "006": "005",
        "007": "006",
    }
