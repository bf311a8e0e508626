"""HTTP API benchmarks (issue: API). Run: ``.venv/bin/python bench/api.py``.

Everything goes through a real ``lineage serve`` process (uvicorn, one worker) on a
loopback port and a fresh SQLite file, with one client (httpx, keep-alive), and prints
the ratio to the target next to each figure:

* trial ingest: sequential ``POST /trials`` (exp_id allocated by the server, each with an
  ``Idempotency-Key``), against the same loop calling ``Ledger.record_trial`` in process
  (the ratio is what HTTP costs); MLflow's ``log_metric`` only if mlflow is installed;
* telemetry ingest: batches of points through ``POST .../telemetry`` (bodies encoded
  before the clock starts: the figure is the server's), plain JSON and gzip;
* the agent's reads on a 100,000-trial project (``bench/ledger.py``'s sweep): p50 and
  p95 of the wrapped prompt, the raw prompt, KNOWLEDGE.md and a 304 poll, end to end.

Targets: ingest >= 500 trials/s; telemetry >= 100,000 points/s; prompt p50 <= 25 ms.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ledger import generate_sweep  # noqa: E402
from lineage.service import Ledger  # noqa: E402

INGEST_TARGET = 500.0
TELEMETRY_TARGET = 100_000.0
PROMPT_TARGET_MS = 25.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self, db: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("LINEAGE_DATABASE_URL", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "--db", db, "serve", "--port", str(self.port), "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"server did not start: {self.proc.stderr.read().decode() if self.proc.stderr else ''}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=15)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(math.ceil(q * len(ordered))) - 1)]


def bench_ingest(tmp: Path, count: int) -> float:
    ledger = Ledger.open(str(tmp / "inprocess.db"))
    ledger.create_project("bench")
    start = time.perf_counter()
    for i in range(count):
        ledger.record_trial("bench", {"status": "discard", "core_metric": float(i % 97), "hypothesis": f"h{i}"},
                            idempotency_key=f"k{i}")
    in_process = count / (time.perf_counter() - start)
    ledger.close()

    db = str(tmp / "ingest.db")
    Ledger.open(db).create_project("bench")
    server = Server(db)
    url = "/api/v1/projects/bench/trials"
    rates: dict[str, float] = {}
    try:
        # the standard library's HTTP/1.1 client: what the server sustains for one client
        conn = http.client.HTTPConnection("127.0.0.1", server.port)
        for i in range(50):  # warm up
            conn.request("POST", url, body=b'{"status":"discard"}',
                         headers={"Content-Type": "application/json", "Idempotency-Key": f"w{i}"})
            conn.getresponse().read()
        start = time.perf_counter()
        for i in range(count):
            payload = json.dumps({"status": "discard", "core_metric": float(i % 97), "hypothesis": f"h{i}"})
            conn.request("POST", url, body=payload.encode(),
                         headers={"Content-Type": "application/json", "Idempotency-Key": f"k{i}"})
            response = conn.getresponse()
            response.read()
            assert response.status == 201, response.status
        rates["http.client"] = count / (time.perf_counter() - start)
        conn.close()
        # httpx, a heavier client: the same requests (its own cost included)
        with httpx.Client(base_url=server.url) as client:
            start = time.perf_counter()
            for i in range(count):
                response = client.post(url, json={"status": "discard", "core_metric": float(i % 97), "hypothesis": f"x{i}"},
                                       headers={"Idempotency-Key": f"x{i}"})
                assert response.status_code == 201, response.text
            rates["httpx"] = count / (time.perf_counter() - start)
    finally:
        server.stop()
    over_http = rates["http.client"]
    print(f"\n[trial ingest, SQLite, one client, {count:,} trials, each with an Idempotency-Key]")
    print(f"  over HTTP (http.client) {over_http:7,.0f} trials/s   target >= {INGEST_TARGET:,.0f}: "
          f"{over_http / INGEST_TARGET:4.2f}x the target")
    print(f"  over HTTP (httpx)       {rates['httpx']:7,.0f} trials/s   (client cost included)")
    print(f"  in-process service      {in_process:7,.0f} trials/s   HTTP / in-process = {over_http / in_process:4.2f}")
    try:
        import mlflow  # noqa: F401
    except ImportError:
        print("  MLflow               not installed: no comparison")
    else:
        bench_mlflow(tmp, count, over_http)
    return over_http


def bench_mlflow(tmp: Path, count: int, ours: float) -> None:
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp / 'mlflow.db'}")
    start = time.perf_counter()
    for i in range(count // 10):
        with mlflow.start_run():
            mlflow.log_metric("core_metric", float(i))
    rate = (count // 10) / (time.perf_counter() - start)
    print(f"  MLflow runs (sqlite) {rate:9,.0f} runs/s     ours / MLflow = {ours / rate:4.1f}")


def bench_telemetry(tmp: Path, batches: int, per_batch: int) -> float:
    db = str(tmp / "telemetry.db")
    ledger = Ledger.open(db)
    ledger.create_project("bench")
    ledger.record_trial("bench", {"exp_id": "000", "status": "baseline", "core_metric": 1.0})
    ledger.close()
    names = [f"metric_{k}" for k in range(10)]

    def body(b: int) -> bytes:
        points = [{"step": b * per_batch // len(names) + i // len(names), "name": names[i % len(names)],
                   "value": math.sin(i) * 0.1 + b} for i in range(per_batch)]
        return json.dumps({"batch_id": f"b{b}", "points": points}).encode()

    plain = [body(b) for b in range(batches)]
    zipped = [gzip.compress(body(batches + b), 1) for b in range(batches)]
    server = Server(db)
    rates = {}
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            url = "/api/v1/projects/bench/trials/000/telemetry"
            http.post(url, json={"points": [{"step": 0, "name": "warm", "value": 0.0}]})
            for label, bodies, headers in (("JSON", plain, {}), ("gzip JSON", zipped, {"Content-Encoding": "gzip"})):
                start = time.perf_counter()
                for data in bodies:
                    response = http.post(url, content=data, headers={"Content-Type": "application/json", **headers})
                    assert response.status_code == 201, response.text
                rates[label] = batches * per_batch / (time.perf_counter() - start)
            replay_start = time.perf_counter()
            assert http.post(url, content=plain[0], headers={"Content-Type": "application/json"}).status_code == 200
            replay_ms = (time.perf_counter() - replay_start) * 1000
    finally:
        server.stop()
    print(f"\n[telemetry ingest, SQLite, {batches} batches of {per_batch:,} points per encoding]")
    for label, rate in rates.items():
        print(f"  {label:<20} {rate:9,.0f} points/s   target >= {TELEMETRY_TARGET:,.0f}: "
              f"{rate / TELEMETRY_TARGET:4.2f}x the target")
    print(f"  replayed batch       {replay_ms:9.1f} ms (nothing written)")
    return min(rates.values())


def bench_prompt(tmp: Path, n: int, repeat: int) -> float:
    db = str(tmp / "prompt.db")
    ledger = Ledger.open(db)
    ledger.create_project("bench", lower_is_better=True, best_policy="fieldkit")
    start = time.perf_counter()
    ledger.import_trials("bench", iter(generate_sweep(n)))
    import_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(repeat):
        ledger.render_prompt("bench", specialist="next", timestamp="t")
    in_process_ms = (time.perf_counter() - start) / repeat * 1000
    ledger.close()
    server = Server(db)
    results: dict[str, list[float]] = {}
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            base = "/api/v1/projects/bench"
            cases = {
                "prompt (wrapped)": (f"{base}/prompt", {"specialist": "next", "timestamp": "t"}, {}),
                "prompt (raw=1)": (f"{base}/prompt", {"specialist": "next", "timestamp": "t", "raw": "1"}, {}),
                "knowledge": (f"{base}/knowledge", {}, {}),
                "knowledge (json)": (f"{base}/knowledge", {"format": "json"}, {}),
            }
            tag = http.get(f"{base}/prompt", params={"specialist": "next", "timestamp": "t"}).headers["etag"]
            cases["prompt, 304 poll"] = (f"{base}/prompt", {"specialist": "next", "timestamp": "t"}, {"If-None-Match": tag})
            for label, (path, params, headers) in cases.items():
                for _ in range(3):
                    http.get(path, params=params, headers=headers)
                times = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    response = http.get(path, params=params, headers=headers)
                    times.append((time.perf_counter() - t0) * 1000)
                    assert response.status_code in (200, 304)
                results[label] = times
    finally:
        server.stop()
    print(f"\n[agent reads, SQLite, {n:,}-trial project (imported in {import_s:.1f} s), {repeat} requests each]")
    for label, times in results.items():
        p50 = statistics.median(times)
        flag = f"target <= {PROMPT_TARGET_MS:.0f} ms: {PROMPT_TARGET_MS / p50:4.2f}x under" if label.startswith("prompt (w") else ""
        print(f"  {label:<20} p50 {p50:6.2f} ms   p95 {percentile(times, 0.95):6.2f} ms   {flag}")
    print(f"  in-process render    {in_process_ms:6.2f} ms (Ledger.render_prompt, no HTTP)")
    return statistics.median(results["prompt (wrapped)"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2_000, help="trials of the ingest benchmark")
    parser.add_argument("--batches", type=int, default=10, help="telemetry batches per encoding")
    parser.add_argument("--batch-points", type=int, default=50_000)
    parser.add_argument("--project-size", type=int, default=100_000, help="trials of the prompt benchmark's project")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ingest = bench_ingest(Path(tmp), args.trials)
        points = bench_telemetry(Path(tmp), args.batches, args.batch_points)
        prompt = bench_prompt(Path(tmp), args.project_size, args.repeat)
    ok = ingest >= INGEST_TARGET and points >= TELEMETRY_TARGET and prompt <= PROMPT_TARGET_MS
    print(f"\nall targets met: {'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
