"""Agents from a blank database (issue 18). Run: ``.venv/bin/python bench/agents.py
[--postgres URL] [--trials N]``.

On a generated 100,000-trial loop (hypotheses from bench/agent_memory.py's vocabulary;
each trial's parent is the last keep before it, so the chain to the best is long):

* MCP ``get_prompt`` over Streamable HTTP: a JSON-RPC ``tools/call`` to ``/mcp`` of a real
  uvicorn server (in a thread of the bench, one keep-alive client), p50 and p95. Target
  p50 <= 30 ms. The JSON API's ``GET .../prompt`` is printed beside it.
* recording with the parent left out (the ledger defaults it to the current best)
  against recording a root (``"parent_exp": ""``: what an omitted parent stored before),
  alternating in one run on the same project, service level and HTTP. Target ratio
  <= 1.1x.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

# the repository first: bench/api.py must not shadow the api package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.agent_memory import ACTIONS, KNOBS, TAILS, generate_ideas, percentile  # noqa: E402
from lineage.domain import FailureLabel, Trial  # noqa: E402
from lineage.service import Ledger  # noqa: E402

SLUG = "agents"


def loop_trials(n: int) -> list[Trial]:
    """generate_ideas with parents: the last keep (or the baseline) before each trial."""
    out, tip = [], ""
    for trial in generate_ideas(n):
        out.append(trial.with_changes(parent_exp=tip))
        if trial.status in (FailureLabel.KEEP, FailureLabel.BASELINE):
            tip = trial.exp_id
    return out


def serve(url: str):  # type: ignore[no-untyped-def]
    import uvicorn

    from api.app import create_app
    from api.settings import Settings

    app = create_app(Settings(database_url=url, log_level="warning"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, thread, port


def timed(
    conn: http.client.HTTPConnection,
    method: str,
    path: str,
    body: object | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[float, int, bytes]:
    t0 = time.perf_counter()
    conn.request(
        method,
        path,
        body=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    response = conn.getresponse()
    data = response.read()
    return (time.perf_counter() - t0) * 1000, response.status, data


def bench(url: str, label: str, n: int) -> None:
    ledger = Ledger.open(url)
    try:
        ledger.projects.delete_project(SLUG)
    except Exception:  # noqa: BLE001 - a fresh database
        pass
    ledger.projects.create_project(SLUG, metric_name="val_bpb", lower_is_better=True)
    ledger.tables.import_trials(SLUG, iter(loop_trials(n)))
    chain = len(ledger.trials.chain(SLUG))

    rng = random.Random(18)
    service: tuple[list[float], list[float]] = ([], [])
    for i in range(600):
        body = {
            "status": "discard",
            "core_metric": 2.0,
            "hypothesis": f"{rng.choice(ACTIONS)} {rng.choice(KNOBS)} {rng.choice(TAILS)}",
        }
        if i % 2:
            body["parent_exp"] = ""
        t0 = time.perf_counter()
        ledger.recording.record_trial(SLUG, body, similar_prior=True)
        if i >= 40:
            service[i % 2].append((time.perf_counter() - t0) * 1000)

    server, thread, port = serve(url)
    conn = http.client.HTTPConnection("127.0.0.1", port)
    mcp_headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "get_prompt", "arguments": {"project": SLUG}},
    }
    mcp_ms, api_ms = [], []
    http_record: tuple[list[float], list[float]] = ([], [])
    try:
        for i in range(230):
            ms, status, data = timed(conn, "POST", "/mcp", call, mcp_headers)
            assert status == 200 and b"record_trial" in data, (status, data[:300])
            if i >= 30:
                mcp_ms.append(ms)
            ms, status, _ = timed(conn, "GET", f"/api/v1/projects/{SLUG}/prompt")
            assert status == 200
            if i >= 30:
                api_ms.append(ms)
        for i in range(440):
            body = {
                "status": "discard",
                "core_metric": 2.0,
                "hypothesis": f"{rng.choice(ACTIONS)} {rng.choice(KNOBS)} {rng.choice(TAILS)}",
            }
            if i % 2:
                body["parent_exp"] = ""
            ms, status, _ = timed(conn, "POST", f"/api/v1/projects/{SLUG}/trials", body)
            assert status == 201, status
            if i >= 40:
                http_record[i % 2].append(ms)
    finally:
        conn.close()
        server.should_exit = True
        thread.join(timeout=15)
    ledger.projects.delete_project(SLUG)
    ledger.close()

    print(f"\n[{label}] {n:,} trials, chain to the best {chain:,} trials")
    print(
        f"  MCP get_prompt (Streamable HTTP) p50 {statistics.median(mcp_ms):6.2f} ms  "
        f"p95 {percentile(mcp_ms, 0.95):6.2f} ms  (target p50 <= 30 ms)"
    )
    print(
        f"  GET .../prompt (JSON API)        p50 {statistics.median(api_ms):6.2f} ms  "
        f"p95 {percentile(api_ms, 0.95):6.2f} ms"
    )
    for level, (defaulted, root) in (("service", service), ("HTTP   ", http_record)):
        a, b = statistics.median(defaulted), statistics.median(root)
        print(
            f"  record ({level}) parent left out p50 {a:6.2f} ms, a root {b:6.2f} ms -> ratio {a / b:.2f}x "
            "(target <= 1.1x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--postgres", default=None, help="also run on this PostgreSQL URL (an empty database)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench(str(Path(tmp) / "agents.db"), "SQLite", args.trials)
    if args.postgres:
        bench(args.postgres, "PostgreSQL", args.trials)


if __name__ == "__main__":
    main()
