"""Telemetry end to end against trackio, in one run. Run: ``.venv/bin/python bench/telemetry_e2e.py``
(also ``bench/telemetry.py --only e2e``).

One workload for every side: one run logging ``--steps`` steps of :data:`SCALARS` scalars
(``train_loss``, ``lr``, ``grad_norm``, ...) plus ``val_bpb`` every 250 steps (100,000 steps:
about 1,000,400 points). Figures:

* **ledger, end to end**: :class:`~trainer_hooks.client.LedgerClient` with its defaults
  (durable spool, background delivery) logging every step as fast as the loop can, against
  a real ``lineage serve`` subprocess on a fresh database, until ``close()`` returned with
  every point acknowledged by the server. The clock includes the client's conversion and
  encoding, the spool's fsync'd commits (each block is on disk before it is sent; the
  client sends it from memory), HTTP and the server's validation and insert.
* **ledger, server only**: the same points as request bodies encoded before the clock
  starts (the client's batch size, in the client's wire form), posted one after the other:
  what the server alone takes.
* **trackio in process**: Hugging Face trackio's ``trackio.log`` of the same dicts (with
  ``step``), in its own virtual environment and process, local only (``TRACKIO_DIR`` in
  a temporary folder, ``HF_HUB_OFFLINE=1``, no Space, no system metrics), until
  ``trackio.finish()`` returned and its SQLite file holds every step.

Each side reports points/s of wall time and per CPU-second (the CPU time of the client and
server processes together, from ``/proc``; the end-to-end line also gives the two apart),
with the load average beside it; the ratio
ledger/trackio is quoted from the same run. Both backends for the ledger: SQLite always,
PostgreSQL with ``--postgres URL`` (a server database; a fresh database is made in it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api import Server  # noqa: E402

TARGET = 300_000.0
TARGET_RATIO = 1.8
SCALARS = (
    "train_loss",
    "lr",
    "grad_norm",
    "tokens_per_s",
    "step_time_ms",
    "mfu",
    "loss_scale",
    "weight_norm",
    "update_ratio",
    "train_ppl",
)
VAL_EVERY = 250

#: the loop both sides run: ``LOG(step, metrics)`` is their log call
WORKLOAD = """
names = %(names)r
def workload(LOG, steps):
    for step in range(steps):
        x = 1.0 / (1.0 + step)
        metrics = {name: x * (k + 1) for k, name in enumerate(names)}
        if step %% %(val)d == 0:
            metrics["val_bpb"] = 1.0 + x
        LOG(step, metrics)
"""

TRACKIO_SCRIPT = """
import json, os, sqlite3, sys, time
import trackio
%(workload)s
steps = %(steps)d
trackio.init(project="bench", name="e2e", auto_log_gpu=False, auto_log_cpu=False)
def LOG(step, metrics):
    trackio.log(metrics, step=step)
cpu0, start = time.process_time(), time.perf_counter()
workload(LOG, steps)
trackio.finish()
db = os.path.join(os.environ["TRACKIO_DIR"], "bench.db")
while True:
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT COUNT(*) FROM metrics").fetchone()[0]
    if stored >= steps:
        break
    time.sleep(0.01)
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
print(json.dumps({"version": trackio.__version__, "elapsed": elapsed, "cpu": cpu, "steps": stored}))
"""


def points_of(steps: int) -> int:
    return steps * len(SCALARS) + (steps + VAL_EVERY - 1) // VAL_EVERY


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def workload_fn() -> Any:
    scope: dict[str, Any] = {}
    exec(WORKLOAD % {"names": SCALARS, "val": VAL_EVERY}, scope)  # noqa: S102 - our own text
    return scope["workload"]


def ledger_e2e(server: Server, spool: Path, steps: int, in_flight: int | None = None) -> dict[str, float]:
    from trainer_hooks.client import LedgerClient

    window = {} if in_flight is None else {"in_flight": in_flight}
    client = LedgerClient(
        server.url, None, "bench", spool_dir=spool, close_timeout=600.0, system_metrics=False, **window
    )
    client.ensure_project()
    client.plan_trial(hypothesis="e2e")
    assert client.flush(timeout=30)
    workload = workload_fn()
    cpu0, scpu0, start = time.process_time(), proc_cpu(server.proc.pid), time.perf_counter()
    workload(client.log, steps)
    report = client.close()
    elapsed = time.perf_counter() - start
    client_cpu, server_cpu = time.process_time() - cpu0, proc_cpu(server.proc.pid) - scpu0
    if not report.delivered or report.points_sent != points_of(steps):
        raise SystemExit(f"the ledger did not get everything: {report}")
    return {
        "elapsed": elapsed,
        "cpu": client_cpu + server_cpu,
        "points": report.points_sent,
        "client_cpu": client_cpu,
        "server_cpu": server_cpu,
    }


def ledger_server_only(server: Server, steps: int, batch: int) -> dict[str, float]:
    """Bodies encoded by the client's own encoder before the clock starts."""
    from trainer_hooks.client import points as wire

    http = httpx.Client(base_url=server.url, timeout=600)
    exp = http.post(
        "/api/v1/projects/bench/trials", json={"hypothesis": "server only", "status": "harness_abort"}
    ).json()["trial"]["exp_id"]
    rows: list[Any] = []
    workload_fn()(lambda step, metrics: rows.extend(wire.step_rows(step, metrics, None, 1.0)[0]), steps)
    bodies = [wire.encode_batch(f"so-{uuid.uuid4().hex}", rows[i : i + batch]) for i in range(0, len(rows), batch)]
    url = f"/api/v1/projects/bench/trials/{exp}/telemetry"
    scpu0, start = proc_cpu(server.proc.pid), time.perf_counter()
    for body in bodies:
        done = http.post(url, content=body, headers={"Content-Type": "application/json"})
        assert done.status_code == 201, done.text
    elapsed = time.perf_counter() - start
    cpu = proc_cpu(server.proc.pid) - scpu0
    http.close()
    return {"elapsed": elapsed, "cpu": cpu, "points": len(rows)}


def trackio_side(python: str, tmp: Path, steps: int) -> dict[str, Any] | str:
    if not Path(python).exists():
        return f"no trackio environment at {python}"
    workdir = tmp / f"trackio-{uuid.uuid4().hex[:6]}"
    workdir.mkdir()
    script = TRACKIO_SCRIPT % {"workload": WORKLOAD % {"names": SCALARS, "val": VAL_EVERY}, "steps": steps}
    env = {
        **os.environ,
        "TRACKIO_DIR": str(workdir / "trackio"),
        "HF_HOME": str(workdir / "hf"),
        "HF_HUB_OFFLINE": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
    }
    done = subprocess.run([python, "-c", script], cwd=workdir, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return f"trackio failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}"
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if found["steps"] != steps:
        return f"trackio stored {found['steps']} of {steps} steps"
    found["points"] = points_of(steps)
    return found


def fresh_postgres(url: str) -> str:
    """A new empty database on the server of ``url``; its URL."""
    import psycopg

    name = f"bench_telemetry_{uuid.uuid4().hex[:8]}"
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return plain.rsplit("/", 1)[0] + "/" + name


def line(label: str, found: dict[str, float]) -> str:
    rate, per_cpu = found["points"] / found["elapsed"], found["points"] / max(found["cpu"], 1e-9)
    split = (
        f"; CPU-s: client {found['client_cpu']:.2f}, server {found['server_cpu']:.2f}" if "client_cpu" in found else ""
    )
    return (
        f"  {label:<38} {rate:10,.0f} points/s   {per_cpu:10,.0f} per CPU-s   "
        f"({found['points']:,} points in {found['elapsed']:.2f} s{split})   [{load()}]"
    )


def run(args: argparse.Namespace) -> None:
    steps = args.e2e_steps
    print(
        f"\n[telemetry end to end: 1 run, {len(SCALARS)} scalars a step + val_bpb every {VAL_EVERY}, "
        f"{steps:,} steps = {points_of(steps):,} points; best of {args.e2e_rounds}; "
        f"{os.cpu_count()} CPUs, {load()}]"
    )
    backends = [("SQLite", None)] + ([("PostgreSQL", args.postgres)] if args.postgres else [])
    windows: list[int | None] = [int(n) for n in args.in_flight.split(",")] if args.in_flight else [None]
    with tempfile.TemporaryDirectory(prefix="lineage-bench-e2e-") as tmp_name:
        tmp = Path(tmp_name)
        results: dict[str, dict[str, float]] = {}
        trackio_runs: list[dict[str, Any]] = []
        why = ""
        for r in range(args.e2e_rounds):
            found = trackio_side(args.trackio_python, tmp, steps)  # alternating with the ledger's rounds
            if isinstance(found, str):
                why = found
            else:
                trackio_runs.append(found)
            for label, url in backends:
                db = str(tmp / f"ledger-{r}.db") if url is None else fresh_postgres(url)
                server = Server(db)
                try:
                    sides = [
                        (
                            f"{label} end to end (client{'' if n is None else f', {n} in flight'})",
                            lambda n=n: ledger_e2e(server, tmp / f"spool-{r}-{n}", steps, n),
                        )
                        for n in windows
                    ]
                    sides.append(
                        (f"{label} server only (pre-encoded)", lambda: ledger_server_only(server, steps, args.batch))
                    )
                    for key, one in sides:
                        got = one()
                        if (
                            key not in results
                            or got["points"] / got["elapsed"] > results[key]["points"] / results[key]["elapsed"]
                        ):
                            results[key] = got
                finally:
                    server.stop()
        best_trackio = max(trackio_runs, key=lambda f: f["points"] / f["elapsed"]) if trackio_runs else None
        for key, found in results.items():
            print(line(f"ledger {key}", found))
        if args.postgres:
            print("  (PostgreSQL's CPU: the client and lineage serve only, not PostgreSQL's own processes)")
        if best_trackio is None:
            print(f"  trackio: not measured ({why})")
            return
        print(line(f"trackio {best_trackio['version']} in process", best_trackio))
        t_rate = best_trackio["points"] / best_trackio["elapsed"]
        t_cpu = best_trackio["points"] / best_trackio["cpu"]
        for label, _ in backends:
            for n in windows:
                found = results[f"{label} end to end (client{'' if n is None else f', {n} in flight'})"]
                rate = found["points"] / found["elapsed"]
                ratio = rate / t_rate
                print(
                    f"  {label} end to end{'' if n is None else f' ({n} in flight)'} / trackio: {ratio:.2f}x wall, "
                    f"{found['points'] / found['cpu'] / t_cpu:.2f}x per CPU-s   target >= {TARGET:,.0f} points/s and "
                    f">= {TARGET_RATIO}x: {'met' if rate >= TARGET and ratio >= TARGET_RATIO else 'NOT met'}   [{load()}]"
                )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--e2e-steps", type=int, default=100_000, help="steps of the end-to-end workload")
    parser.add_argument("--e2e-rounds", type=int, default=2, help="end-to-end rounds (best of)")
    parser.add_argument(
        "--batch", type=int, default=200_000, help="points per pre-encoded body (server only; the client's default)"
    )
    parser.add_argument(
        "--in-flight",
        default="",
        help="the client's telemetry requests in flight, e.g. 1,2 "
        "(each measured, in the same rounds; default: the client's default)",
    )
    parser.add_argument("--postgres", default=None, help="also on PostgreSQL: a server URL (a fresh database is made)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--trackio-python", default=os.environ.get("TRACKIO_PYTHON") or "/tmp/peers/trackio/bin/python")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
