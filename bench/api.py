"""HTTP API benchmarks (issue: API). Run: ``.venv/bin/python bench/api.py``.

Everything goes through a real ``lineage serve`` process (uvicorn, one worker) on a
loopback port and a fresh SQLite file, with one keep-alive client, and prints
the ratio to the target next to each figure:

* trial ingest: sequential ``POST /trials`` (exp_id allocated by the server, each with an
  ``Idempotency-Key``; best of three rounds), against the same loop calling
  ``Ledger.record_trial`` in process (the ratio is what HTTP costs); and, when an
  ``mlflow`` executable is found (``--mlflow PATH``, ``$LINEAGE_BENCH_MLFLOW`` or on
  ``PATH``), an MLflow tracking server (``mlflow server``, one worker, SQLite backend),
  its rounds alternating with ours, doing the equivalent work per trial over its REST API
  with the same client: ``runs/create``, ``runs/log-batch`` (params, metrics,
  tags in one request, MLflow's cheapest way) and ``runs/update`` (end). MLflow is never
  a dependency of the ledger: install it anywhere, e.g. its own venv
  (``python -m venv /tmp/mlflow && /tmp/mlflow/bin/pip install mlflow``), and pass
  ``--mlflow /tmp/mlflow/bin/mlflow``;
* telemetry ingest: batches of points through ``POST .../telemetry``: bodies encoded
  before the clock starts (the server's figure), plain JSON and gzip; and end to end,
  the client's ``json.dumps`` of each batch inside the clock;
* ``--only workload``: issue 23's workload (overlapping 200-character hypotheses, 4
  client threads, 5,000 trials) on SQLite and PostgreSQL, single and batch ingest, cold
  start and idle RSS, beside trackio and MLflow in their own venvs
  (``bench/api_workload.py``);
* the agent's reads on a 100,000-trial project (``bench/ledger.py``'s sweep): p50 and
  p95 of the wrapped prompt, the raw prompt, KNOWLEDGE.md and a 304 poll, end to end;
  then trials recorded into that project (ingest where every look-up has 100,000 rows).

Targets: ingest >= 500 trials/s and >= 10x MLflow's server; telemetry >= 100,000
points/s; prompt p50 <= 25 ms.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ledger import generate_sweep  # noqa: E402
from lineage.service import Ledger  # noqa: E402

INGEST_TARGET = 500.0
MLFLOW_RATIO_TARGET = 10.0
TELEMETRY_TARGET = 100_000.0
PROMPT_TARGET_MS = 25.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float) -> bool:  # type: ignore[type-arg]
    """Whether ``url/health`` answered 200 before ``proc`` exited or ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    return False


class Server:
    def __init__(self, db: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("LINEAGE_DATABASE_URL", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "--db", db, "serve", "--port", str(self.port), "--log-level", "warning"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if not wait_healthy(self.url, self.proc, 30):
            raise SystemExit(f"server did not start: {self.proc.stderr.read().decode() if self.proc.stderr else ''}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=15)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(math.ceil(q * len(ordered))) - 1)]


def trial_body(i: int, prefix: str = "h") -> dict[str, object]:
    """One trial of the ingest benchmarks: what the MLflow side logs as params, a metric and a tag."""
    return {"status": "discard", "core_metric": float(i % 97), "hypothesis": f"{prefix}{i}", "specialist": "bench"}


INGEST_ROUNDS = 3
#: trials recorded into the prompt benchmark's large project
LARGE_INGEST = 500


def bench_ingest(tmp: Path, count: int, mlflow: str | None) -> float:
    """Trials/s of one client over HTTP, best of :data:`INGEST_ROUNDS` rounds; with MLflow,
    its rounds alternate with ours (both servers up), so both see the same machine."""
    ledger = Ledger.open(str(tmp / "inprocess.db"))
    ledger.projects.create_project("bench")
    start = time.perf_counter()
    for i in range(count):
        ledger.recording.record_trial("bench", trial_body(i), idempotency_key=f"k{i}")
    in_process = count / (time.perf_counter() - start)
    ledger.close()

    db = str(tmp / "ingest.db")
    Ledger.open(db).projects.create_project("bench")
    server = Server(db)
    other = MlflowServer(tmp, mlflow) if mlflow else None
    url = "/api/v1/projects/bench/trials"
    per_round = count // INGEST_ROUNDS
    best = {"http.client": 0.0, "mlflow": 0.0}
    try:

        def ours(first: int, n: int, prefix: str) -> float:
            return post_trials(server.port, url, ((f"{prefix}{i}", trial_body(i)) for i in range(first, first + n)))

        ours(0, 50, "w")  # warm up
        if other is not None:
            other.runs(0, 20)
        for r in range(INGEST_ROUNDS):
            best["http.client"] = max(best["http.client"], ours(r * per_round, per_round, "k"))
            if other is not None:
                runs = max(20, per_round // 10)
                best["mlflow"] = max(best["mlflow"], other.runs(r * runs, runs))
        # httpx, a heavier client: the same requests (its own cost included), one round
        with httpx.Client(base_url=server.url) as client:
            start = time.perf_counter()
            for i in range(per_round):
                response = client.post(url, json=trial_body(i, "x"), headers={"Idempotency-Key": f"x{i}"})
                assert response.status_code == 201, response.text
            best["httpx"] = per_round / (time.perf_counter() - start)
    finally:
        server.stop()
        if other is not None:
            other.stop()
    over_http = best["http.client"]
    print(
        f"\n[trial ingest, SQLite, one client, {INGEST_ROUNDS} rounds of {per_round:,} trials (best), "
        "each with an Idempotency-Key]"
    )
    print(
        f"  over HTTP (http.client) {over_http:7,.0f} trials/s   target >= {INGEST_TARGET:,.0f}: "
        f"{over_http / INGEST_TARGET:4.2f}x the target"
    )
    print(f"  over HTTP (httpx)       {best['httpx']:7,.0f} trials/s   (client cost included)")
    print(f"  in-process service      {in_process:7,.0f} trials/s   HTTP / in-process = {over_http / in_process:4.2f}")
    if other is None:
        print("  MLflow tracking server  no mlflow executable (--mlflow PATH): no comparison")
    else:
        rate = best["mlflow"]
        print(f"  MLflow tracking server  {rate:7,.0f} runs/s     (create + log-batch + update, http.client)")
        print(
            f"  ours / MLflow           {over_http / rate:7.1f}x            target >= {MLFLOW_RATIO_TARGET:.0f}x: "
            f"{over_http / rate / MLFLOW_RATIO_TARGET:4.2f}x the target"
        )
    return over_http


def post_trials(port: int, url: str, trials: Iterable[tuple[str, dict[str, object]]]) -> float:
    """POST ``(Idempotency-Key, trial)`` pairs one after another with the standard
    library's HTTP/1.1 client on one fresh keep-alive connection (an idle one may have
    been closed by the server); trials per second, each answered 201."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    count = 0
    start = time.perf_counter()
    for key, trial in trials:
        conn.request(
            "POST",
            url,
            body=json.dumps(trial).encode(),
            headers={"Content-Type": "application/json", "Idempotency-Key": key},
        )
        response = conn.getresponse()
        response.read()
        assert response.status == 201, response.status
        count += 1
    rate = count / (time.perf_counter() - start)
    conn.close()
    return rate


def find_mlflow(given: str | None) -> str | None:
    """The ``mlflow`` executable: ``--mlflow``, ``$LINEAGE_BENCH_MLFLOW``, else on ``PATH``."""
    found = given or os.environ.get("LINEAGE_BENCH_MLFLOW") or shutil.which("mlflow")
    return found if found and Path(found).exists() else None


class MlflowServer:
    """An MLflow tracking server (one worker, SQLite backend) and one keep-alive client;
    :meth:`runs` records runs the way the ledger records trials: each created with its
    params, metric and tag and ended, in three REST calls (MLflow's fewest)."""

    def __init__(self, tmp: Path, mlflow: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                mlflow,
                "server",
                "--backend-store-uri",
                f"sqlite:///{tmp / 'mlflow.db'}",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            # its background job runner (AI features) has nothing to do with tracking and
            # only competes for the CPU
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        )
        if not wait_healthy(f"http://127.0.0.1:{self.port}", self.proc, 120):
            self.stop()
            raise SystemExit("the MLflow server did not start")
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port)  # one a round: see runs()

    def _call(self, path: str, body: dict[str, object]) -> dict[str, Any]:
        self.conn.request(
            "POST",
            f"/api/2.0/mlflow/{path}",
            body=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        response = self.conn.getresponse()
        data = response.read()
        assert response.status == 200, (response.status, data[:300])
        return json.loads(data or b"{}")

    def runs(self, first: int, n: int) -> float:
        """Record runs ``first .. first + n - 1`` on a fresh connection; runs per second."""
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port)
        start = time.perf_counter()
        for i in range(first, first + n):
            now = int(time.time() * 1000)
            trial = trial_body(i)
            run = self._call("runs/create", {"experiment_id": "0", "start_time": now})["run"]["info"]["run_id"]
            self._call(
                "runs/log-batch",
                {
                    "run_id": run,
                    "params": [{"key": k, "value": str(trial[k])} for k in ("hypothesis", "specialist")],
                    "metrics": [{"key": "core_metric", "value": trial["core_metric"], "timestamp": now, "step": 0}],
                    "tags": [{"key": "status", "value": trial["status"]}],
                },
            )
            self._call("runs/update", {"run_id": run, "status": "FINISHED", "end_time": now})
        rate = n / (time.perf_counter() - start)
        self.conn.close()
        return rate

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def bench_telemetry(tmp: Path, batches: int, per_batch: int) -> float:
    db = str(tmp / "telemetry.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("bench")
    ledger.recording.record_trial("bench", {"exp_id": "000", "status": "baseline", "core_metric": 1.0})
    ledger.close()
    names = [f"metric_{k}" for k in range(10)]

    def batch(b: int) -> dict[str, object]:
        points = [
            {
                "step": b * per_batch // len(names) + i // len(names),
                "name": names[i % len(names)],
                "value": math.sin(i) * 0.1 + b,
            }
            for i in range(per_batch)
        ]
        return {"batch_id": f"b{b}", "points": points}

    def body(b: int) -> bytes:
        return json.dumps(batch(b)).encode()

    plain = [body(b) for b in range(batches)]
    zipped = [gzip.compress(body(batches + b), 1) for b in range(batches)]
    in_memory = [batch(2 * batches + b) for b in range(batches)]  # a trainer's points, not yet encoded
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
            # end to end: the client's JSON encoding inside the clock, as a trainer sends
            start = time.perf_counter()
            for points in in_memory:
                response = http.post(
                    url, content=json.dumps(points).encode(), headers={"Content-Type": "application/json"}
                )
                assert response.status_code == 201, response.text
            rates["JSON, client encoding"] = batches * per_batch / (time.perf_counter() - start)
            replay_start = time.perf_counter()
            assert http.post(url, content=plain[0], headers={"Content-Type": "application/json"}).status_code == 200
            replay_ms = (time.perf_counter() - replay_start) * 1000
    finally:
        server.stop()
    print(f"\n[telemetry ingest, SQLite, {batches} batches of {per_batch:,} points per encoding]")
    for label, rate in rates.items():
        print(
            f"  {label:<22} {rate:9,.0f} points/s   target >= {TELEMETRY_TARGET:,.0f}: "
            f"{rate / TELEMETRY_TARGET:4.2f}x the target"
        )
    print(f"  replayed batch       {replay_ms:9.1f} ms (nothing written)")
    return min(rates.values())


def bench_prompt(tmp: Path, n: int, repeat: int) -> float:
    db = str(tmp / "prompt.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("bench", lower_is_better=True, best_policy="fieldkit")
    start = time.perf_counter()
    ledger.tables.import_trials("bench", iter(generate_sweep(n)))
    import_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(repeat):
        ledger.agent.render_prompt("bench", specialist="next", timestamp="t")
    in_process_ms = (time.perf_counter() - start) / repeat * 1000
    ledger.close()
    server = Server(db)
    results: dict[str, list[float]] = {}
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            base = "/api/v1/projects/bench"
            cases = {
                "prompt (wrapped)": (f"{base}/prompt", {"specialist": "next", "timestamp": "t"}, {}),
                "prompt (raw=1)": (f"{base}/prompt", {"specialist": "next", "timestamp": "t", "raw": "1"}, {}),
                "knowledge": (f"{base}/knowledge", {}, {}),
                "knowledge (json)": (f"{base}/knowledge", {"format": "json"}, {}),
            }
            tag = client.get(f"{base}/prompt", params={"specialist": "next", "timestamp": "t"}).headers["etag"]
            cases["prompt, 304 poll"] = (
                f"{base}/prompt",
                {"specialist": "next", "timestamp": "t"},
                {"If-None-Match": tag},
            )
            for label, (path, params, headers) in cases.items():
                for _ in range(3):
                    client.get(path, params=params, headers=headers)
                times = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    response = client.get(path, params=params, headers=headers)
                    times.append((time.perf_counter() - t0) * 1000)
                    assert response.status_code in (200, 304)
                results[label] = times
        # trials recorded into the large project (what a long-lived loop's ingest costs):
        # sweep-like hypotheses, so the "was this tried?" look-up of each has work to do
        large_rate = post_trials(
            server.port,
            "/api/v1/projects/bench/trials",
            (
                (f"big{i}", {**trial_body(i), "hypothesis": f"raise the clip scale warmup to {i} steps"})
                for i in range(LARGE_INGEST)
            ),
        )
    finally:
        server.stop()
    print(f"\n[agent reads, SQLite, {n:,}-trial project (imported in {import_s:.1f} s), {repeat} requests each]")
    for label, times in results.items():
        p50 = statistics.median(times)
        flag = (
            f"target <= {PROMPT_TARGET_MS:.0f} ms: {PROMPT_TARGET_MS / p50:4.2f}x under"
            if label.startswith("prompt (w")
            else ""
        )
        print(f"  {label:<20} p50 {p50:6.2f} ms   p95 {percentile(times, 0.95):6.2f} ms   {flag}")
    print(f"  in-process render    {in_process_ms:6.2f} ms (Ledger.render_prompt, no HTTP)")
    print(
        f"  ingest into it       {large_rate:6,.0f} trials/s (http.client, {LARGE_INGEST} trials; "
        f"target >= {INGEST_TARGET:,.0f}: {large_rate / INGEST_TARGET:4.2f}x)"
    )
    return statistics.median(results["prompt (wrapped)"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2_000, help="trials of the ingest benchmark")
    parser.add_argument("--batches", type=int, default=10, help="telemetry batches per encoding")
    parser.add_argument("--batch-points", type=int, default=50_000)
    parser.add_argument("--project-size", type=int, default=100_000, help="trials of the prompt benchmark's project")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--mlflow", default=None, help="mlflow executable for the comparison (optional)")
    parser.add_argument(
        "--only",
        choices=["ingest", "telemetry", "prompt", "workload"],
        default=None,
        help="run one benchmark (workload: issue 23's, bench/api_workload.py, with peers)",
    )
    parser.add_argument("--workload-trials", type=int, default=5_000)
    parser.add_argument("--batch", type=int, default=500, help="trials per POST .../trials:batch")
    parser.add_argument("--peer-trials", type=int, default=500, help="trials of the workload the peers log")
    parser.add_argument("--backends", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="another source tree of the ledger (git archive of main) for a before/after ratio",
    )
    args = parser.parse_args()
    if args.only == "workload":
        from bench.api_workload import run as run_workload

        with tempfile.TemporaryDirectory() as tmp:
            met = run_workload(
                Path(tmp),
                trials=args.workload_trials,
                batch=args.batch,
                peer_trials=args.peer_trials,
                backends=args.backends,
                baseline_src=args.baseline_src,
            )
        print(f"\nsingle-ingest targets met: {'yes' if met else 'NO'}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        run = lambda name: args.only in (None, name)  # noqa: E731
        ingest = bench_ingest(Path(tmp), args.trials, find_mlflow(args.mlflow)) if run("ingest") else INGEST_TARGET
        points = bench_telemetry(Path(tmp), args.batches, args.batch_points) if run("telemetry") else TELEMETRY_TARGET
        prompt = bench_prompt(Path(tmp), args.project_size, args.repeat) if run("prompt") else PROMPT_TARGET_MS
    ok = ingest >= INGEST_TARGET and points >= TELEMETRY_TARGET and prompt <= PROMPT_TARGET_MS
    print(f"\nall targets met: {'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
