"""Batched ingest against its limit (issue 36, "Headroom"). Run:
``.venv/bin/python bench/batch_headroom.py [--baseline-src DIR]``.

Batches of 500 (``--batch``) of :mod:`bench.workload`'s trials, posted by 4 client
processes (``--clients``; processes, not threads sharing one GIL) with keep-alive
``http.client``, on SQLite, into:

* the reference: :mod:`bench.batch_reference`, a minimal FastAPI app inserting the same
  trial-like rows in one transaction per batch (the limit; on this 2-core machine the
  issue measured 14.5k trials/s);
* the ledger: ``lineage serve`` from this tree, ``POST /api/v1/projects/bench/trials:batch``;
* with ``--baseline-src DIR``, also the ledger served from another source tree (e.g.
  ``git worktree add /tmp/base main``), for a before/after in the same run;
* single records (``--single`` trials, one ``POST .../trials`` each, from the same client
  processes): the issue's floor of 1,000 trials/s on SQLite.

The ledger gets one batch into a project of its own before the clock starts (the first
imports and compiles what the path needs). Each round starts every target on a fresh
database, in turn (the shared host drifts by
20% within minutes, so rounds alternate); the medians are printed with each target's
ratio to the reference and the load average (``os.getloadavg()``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import workload  # noqa: E402
from bench.api_workload import Served, _packaged, _post, _upgrade, free_port  # noqa: E402

#: Single records a second that batches must not cost (issue 36), 4 client processes.
SINGLE_TARGET = 1_000.0


def _client(port: int, path: str, bodies: Sequence[bytes], errors: Any) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    for body in bodies:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        if response.status != 201:
            errors.put(f"{response.status}: {data[:300]!r}")
            return
    conn.close()


def post_batches(port: int, path: str | Sequence[str], batches: list[bytes], clients: int) -> tuple[float, float]:
    """Wall seconds to POST every batch from ``clients`` processes (batch i from process
    i mod clients; ``path``: one for all, or one a process), and the load average at the end."""
    errors: Any = multiprocessing.Queue()
    paths = [path] * clients if isinstance(path, str) else list(path)
    workers = [
        multiprocessing.Process(target=_client, args=(port, paths[k], batches[k::clients], errors))
        for k in range(clients)
    ]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - start
    if not errors.empty():
        raise SystemExit(f"{path}: {errors.get()}")
    return wall, os.getloadavg()[0]


class Reference:
    """:mod:`bench.batch_reference` under uvicorn (one worker) on a fresh SQLite file."""

    def __init__(self, db: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "bench.batch_reference:app", "--port", str(self.port)]
            + ["--log-level", "warning", "--no-access-log"],
            cwd=ROOT,
            env={**os.environ, "BATCH_REFERENCE_DB": db, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"the reference app exited with {self.proc.returncode}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/docs")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.01)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def measure(
    target: str, src: Path, tmp: Path, batches: list[bytes], clients: int, *, single: bool = False
) -> tuple[float, float, float]:
    """Wall seconds, the load average at the end, and the server's CPU seconds.
    ``single``: ``batches`` are single trials for ``POST .../trials`` (the ledger only)."""
    db = str(tmp / f"{target}-{time.monotonic_ns()}.db")
    if target == "reference":
        server: Any = Reference(db)
        path = "/batch"
    else:
        _upgrade(db, src)
        server = Served(db, src)
        _post(server.port, "/api/v1/projects", {"slug": "bench", "lower_is_better": True})
        path = "/api/v1/projects/bench/trials" + ("" if single else ":batch")
        # warm: the first batch imports and compiles what the path needs once (startup, not ingest)
        _post(server.port, "/api/v1/projects", {"slug": "warm", "lower_is_better": True})
        post_batches(server.port, path.replace("/bench/", "/warm/"), batches[:1], 1)
    try:
        cpu = workload.proc_cpu(server.proc.pid)
        wall, load = post_batches(server.port, path, batches, clients)
        return wall, load, workload.proc_cpu(server.proc.pid) - cpu
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10_000, help="trials per measurement")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-src", type=Path, help="also serve the ledger from this source tree")
    parser.add_argument(
        "--single", type=int, default=2_000, help="also single records (POST .../trials, one a request): how many"
    )
    args = parser.parse_args()
    singles = [json.dumps(body).encode() for body in workload.trials(args.single)]
    bodies = workload.trials(args.trials)
    batches = [
        json.dumps({"trials": bodies[first : first + args.batch]}).encode()
        for first in range(0, args.trials, args.batch)
    ]
    targets: dict[str, Path] = {"reference": ROOT, "ledger": ROOT}
    if args.baseline_src is not None:
        _packaged(args.baseline_src.resolve())
        targets["baseline"] = args.baseline_src.resolve()
    rates: dict[str, list[float]] = {name: [] for name in targets}
    per_cpu: dict[str, list[float]] = {name: [] for name in targets}  # steadier than wall on a busy host
    single_rates: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for name, src in targets.items():
                wall, load, cpu = measure(name, src, Path(tmp), batches, args.clients)
                rates[name].append(args.trials / wall)
                per_cpu[name].append(args.trials / cpu)
                print(
                    f"  round {round_ + 1} {name:9} {args.trials / wall:9,.0f} trials/s   "
                    f"{args.trials / cpu:9,.0f} per server CPU-s   (load {load:.2f})"
                )
            for name, src in list(targets.items())[1:] if args.single else ():
                wall, load, cpu = measure("single", src, Path(tmp), singles, args.clients, single=True)
                single_rates.setdefault(name, []).append(args.single / wall)
                print(
                    f"  round {round_ + 1} {name:9} {args.single / wall:9,.0f} single records/s   "
                    f"{args.single / cpu:9,.0f} per server CPU-s   (load {load:.2f}; one trial a request)"
                )
    limit = statistics.median(rates["reference"])
    cpu_limit = statistics.median(per_cpu["reference"])
    print(
        f"\n[batched ingest, SQLite, batches of {args.batch}, {args.clients} client processes, "
        f"{args.trials:,} trials, median of {args.rounds}]"
    )
    for name, values in rates.items():
        rate, cpu_rate = statistics.median(values), statistics.median(per_cpu[name])
        print(
            f"  {name:9} {rate:9,.0f} trials/s   {rate / limit:6.1%} of the reference   "
            f"{cpu_rate:9,.0f} per server CPU-s   {cpu_rate / cpu_limit:6.1%}"
        )
    for name, values in single_rates.items():
        rate = statistics.median(values)
        print(
            f"  {name:9} single records ({args.clients} client processes): {rate:,.0f} trials/s "
            f"(target >= {SINGLE_TARGET:,.0f}: {'met' if rate >= SINGLE_TARGET else 'NOT met'})"
        )
    print(f"  load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
