"""What a claim costs against a plain record (issue 33): claim latency p50/p95 with 16
agent processes on PostgreSQL, and the same processes' plain records in the same run.

One ``lineage serve`` on a fresh PostgreSQL database (``--backend sqlite``: a file). Each
agent process, started together, repeats: claim an idea (``POST .../claims``: the
project locked, lapses ended, near-duplicates ranked among the tried trials and every
running claim), finish it (``POST .../claims/{exp_id}/finish``, not timed), record a
plain trial (``POST .../trials``). Claims and records are interleaved in every process,
so both meet the same load. The figure is the ratio of the claim's latency to the
record's (the issue's target: at most 1.5x at p50 and p95). Latencies are not judged:
the machine may be shared, so the load average is printed with them.

    python bench/claims.py [--agents 16] [--rounds 25] [--backend postgres|sqlite]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.soak import database  # noqa: E402
from bench.soak_load import percentile  # noqa: E402
from tests.servers import serving  # noqa: E402

PROJECT = "claims-bench"
WORDS = "lr warmup decay batch dropout rope muon ema clip swiglu depth heads smoothing window norm momentum".split()


def _hypothesis(agent: int, n: int, kind: str) -> str:
    """A distinct idea in words (three knobs of the list, by agent and round)."""
    picks = [WORDS[(agent * 7 + n * 3 + k * 5) % len(WORDS)] for k in range(3)]
    return f"{kind} {' '.join(picks)} variant {agent}-{n}"


def _agent(base: str, agent: int, rounds: int, start: Any, out: Any) -> None:
    """One agent process: ``rounds`` of claim (timed), finish, record (timed)."""
    prefix = f"{base}/api/v1/projects/{PROJECT}"
    claims, records = [], []
    with httpx.Client(timeout=120) as http:
        start.wait()
        for n in range(rounds):
            began = time.perf_counter()
            made = http.post(
                f"{prefix}/claims", json={"hypothesis": _hypothesis(agent, n, "claim"), "owner": f"a{agent}"}
            )
            claims.append(time.perf_counter() - began)
            made.raise_for_status()
            exp_id = made.json()["trial"]["exp_id"]
            done = http.post(f"{prefix}/claims/{exp_id}/finish", json={"owner": f"a{agent}", "core_metric": 1.0 + n})
            done.raise_for_status()
            body = {"status": "discard", "core_metric": 2.0 + n, "hypothesis": _hypothesis(agent, n, "record")}
            began = time.perf_counter()
            recorded = http.post(f"{prefix}/trials", json=body)
            records.append(time.perf_counter() - began)
            recorded.raise_for_status()
    out.put((claims, records))


def run(backend: str, agents: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as workdir, database(backend, Path(workdir)) as (url, _size):
        with serving(workdir, "--db", url) as base:
            made = httpx.post(
                f"{base}/api/v1/projects", json={"slug": PROJECT, "metric_name": "loss", "lower_is_better": True}
            )
            made.raise_for_status()
            httpx.post(
                f"{base}/api/v1/projects/{PROJECT}/trials",
                json={"status": "baseline", "core_metric": 1.0, "hypothesis": "baseline"},
            ).raise_for_status()
            context = multiprocessing.get_context("spawn")
            start, out = context.Event(), context.Queue()
            procs = [context.Process(target=_agent, args=(base, i, rounds, start, out)) for i in range(agents)]
            for proc in procs:
                proc.start()
            load_before = os.getloadavg()
            time.sleep(1.0)  # the processes import httpx and connect before the barrier opens
            began = time.monotonic()
            start.set()
            claims: list[float] = []
            records: list[float] = []
            for _ in procs:
                got_claims, got_records = out.get(timeout=900)
                claims += got_claims
                records += got_records
            for proc in procs:
                proc.join()
            wall = time.monotonic() - began
            load_after = os.getloadavg()
    summary: dict[str, Any] = {"backend": backend, "agents": agents, "rounds": rounds, "wall_s": round(wall, 1)}
    for name, values in (("claim", claims), ("record", records)):
        summary[name] = {f"p{q}_ms": round(percentile(values, q) * 1000, 1) for q in (50, 95)} | {"n": len(values)}
    for q in (50, 95):
        summary[f"ratio_p{q}"] = round(summary["claim"][f"p{q}_ms"] / summary["record"][f"p{q}_ms"], 2)
    summary["load_before"] = [round(x, 2) for x in load_before]
    summary["load_after"] = [round(x, 2) for x in load_after]
    summary["cpus"] = os.cpu_count()
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=25, help="claims (and records) per agent")
    args = parser.parse_args()
    summary = run(args.backend, args.agents, args.rounds)
    print(json.dumps(summary, indent=2))
    verdict = "within" if max(summary["ratio_p50"], summary["ratio_p95"]) <= 1.5 else "OVER"
    print(
        f"claim/record latency ratio p50 {summary['ratio_p50']}x, p95 {summary['ratio_p95']}x ({verdict} the 1.5x "
        f"target); load average {summary['load_before']} -> {summary['load_after']} on {summary['cpus']} CPUs"
    )


if __name__ == "__main__":
    main()
