"""Issue 23's workload over HTTP (``bench/api.py --only workload``), side by side with peers.

On SQLite and PostgreSQL, each against a real ``lineage serve`` (uvicorn, one worker):

* single-trial ingest: 5,000 trials (``--trials``) of :mod:`bench.workload` (200-character
  hypotheses from a 40-word ML vocabulary, ~30% keep), ``POST .../trials`` from 4
  keep-alive client threads, every answer with its ``similar_prior``; three rounds
  (``SINGLE_ROUNDS``), alternating with ``--baseline-src`` when given, medians reported
  (the shared host drifts by 20% within minutes, so one run after the other misleads);
* batch ingest: the same trials as ``POST .../trials:batch`` of 500 (``--batch``), one
  client;
* cold start (process start to the first 200 on ``/health``, best of 3) and idle RSS
  (1 s after that answer).

Peers in the same run, each from its own virtual environment (never our dependency):
trackio (``/tmp/peers/trackio``, in process: one run per trial, ``bench/peers/``) and,
when found, an MLflow tracking server (``/tmp/peers/mlflow``: create + log-batch + update
per trial). ``--baseline-src DIR``: also the ledger served from another source tree (e.g.
``git archive`` of main), for a before/after ratio on the same machine.

Every figure is printed with the load average at its end, the wall rate and the rate per
CPU-second (client and server processes together; in process for trackio; PostgreSQL's
own processes are not counted).

Where a single record's time went (py-spy, 200 Hz, a real ``lineage serve`` under this
workload on SQLite, 5,000 trials; 2 shared cores). Before (main at 866217f): the
similar-trial look-up was 79% of the server's samples: its two full-text candidate
queries 44% (the AND of ~22 common words walks every posting list, then the OR), the
ranking 30% (re-tokenizing each candidate's text 17%, fuzzy closeness of every word pair
13%); the insert, commit, routing and response the other 21%. After: the look-up is 14%
(a bounded shortlist from two index walks 2%, ranking stored concepts 9%); the rest is
the response's socket write (~20% under load), the commit (~11%: ~26 WAL pages a trial:
the row, six indexes, FTS5's segment, the sketch), the insert (8%) and FastAPI's
dependencies and validation (~8%). Per CPU-second, client and server: 135 -> 512 trials/s
(3.8x) in one run. On PostgreSQL the server's time is mostly waiting on ~13 round trips a
record, made from the event loop one request at a time (the connection's pre-ping, the
access check, the project lock, reads, the writes, the commit): the next lever there is
fewer round trips (psycopg pipeline mode for the writes), not CPU.

Round trips on PostgreSQL (``bench/roundtrips.py``, counted at libpq): 17 a record
before (pre-ping, BEGIN, the access check's SELECT between BEGIN and ROLLBACK, another
pre-ping and BEGIN, 10 statements, COMMIT), 9 after: a pooled connection is pinged only
after 2 s idle, the access check runs in autocommit (1), and the record's transaction in
pipeline mode: BEGIN (psycopg syncs it alone), the project lock, the best, the cycle
check, the similar shortlist, then the four writes with the hooks and guardrail reads in
one flush, COMMIT, leaving the pipeline. Same run, alternate rounds, 1,500 trials,
load 5-6: 92 -> 176 and 77 -> 91 trials/s wall (pipeline mode alone: 123-130 without
it); 3,000 trials, load 6.4-7.1: 59 -> 90/s wall, 228 -> 269 per CPU-second. Still far
from 500/s on 2 shared cores: what is left is mostly four reads that each wait for the
previous (lock, best, cycle check, shortlist) and the server's CPU per request.

SQLite, the service alone (``Ledger.record_trial`` with ``similar_prior``, cProfile,
trials 1,000-2,500 of the workload): 1.22 ms CPU a record; the ranking is ~32% of it,
the commit ~12%, the statements ~12%; a per-word ``import`` in the ranking was 2%
(hoisted). The HTTP path (uvicorn, FastAPI, the response) roughly doubles that.

Next round (py-spy of the server under this workload, SQLite, 3,000 trials): the
server was one busy core (0.97) at 1.39 ms CPU a record, the client 0.18 ms; 55% the
ledger (similar_prior 18%, the statements 10%, the commit 7%), 45% HTTP (the response's
socket writes ~14%, FastAPI's dependencies ~6%, the access check's read 4%, parsing
the bind address per request 1.4%, a uuid4 per request id 1.5%). The four agents' records
now share a transaction (``api/record_groups.py``): one BEGIN, lock, best and commit per
group, and the group waits four turns of the event loop so that the requests already on
the wire join it (groups of 1-3 -> 4); 1.39 -> ~1.1 ms a record. Tried and dropped:
writing groups from a worker thread (GIL hand-offs: 860 -> 580/s) and two worker
processes (SQLite's busy handler sleeps 1 ms and more per wait: no gain). What is left is
similar_prior's ranking (~15%, Python over ~48 distinct words a record) and FastAPI.

PostgreSQL, the service alone, groups of 4 (client CPU and the backend's CPU from
``/proc``): 3.4 ms wall a record at first; similar_prior's shortlist query was planned
without statistics on a young database (a walk of the whole project: 2 ms at 1,000
trials, growing) and, with them, re-planned at every execution (PostgreSQL kept custom
plans: 0.9 ms of planning for 0.25 ms of work). Now the server refreshes stale
statistics every 2 s (``lineage.db.refresh_statistics``), a record's transaction uses
generic plans, its three reads go out together and its ranking runs while the database
stores its writes: 1.32 ms wall a record (client 1.0 ms CPU, backend 0.5 ms). Over HTTP
the four agents are one group, so a cycle is the group's write plus the answers and
the next four requests' parsing, in turn: ~380-410 trials/s at load 1.5-2.7.

Third round (2026-11-25). SQLite: the server is one busy core at ~1.0-1.1 ms CPU a
record: the group's write 0.79 ms (the service alone takes 0.62-0.69 ms a record in
groups of 2-4; ~20% more inside the server, between HTTP work), HTTP 0.25-0.34 ms (a
server whose ledger answers from a cache: 0.25 ms CPU a request). similar_prior's
ranking was 208 us of it: each ranking compared its ~50 words with the query through
rapidfuzz; close words are now a process-wide table and a field's exact and far words
set operations (121 us, identical scores on 1,999 captured rankings). The groups hold
2.8-3.2 records on average: the client's four threads share a GIL, so their requests
arrive staggered. PostgreSQL: psycopg spends ~50 us of CPU a statement in a pipeline,
and the server waited on round trips a third of the time (the machine was 1.25 of 2
cores busy). A group of four ran 28 statements: the access check per request (now read
in the group's transaction), and each item's three reads (now read once for the group,
``lineage.service.group_reads``) -> 20 statements, a lone record 7 -> 5 round trips
(BEGIN now goes out with the first statements). Over HTTP the groups held 2.2 records
(alternating 1-3, 2-2: the requests that arrived during a write formed the next group);
a group now waits up to 2 ms for the writers in a loop (``api.record_groups``).
Tried and dropped: two SQLite workers with a cross-process lock in front of BEGIN
IMMEDIATE (694 vs 725/s: each process's page cache is thrown away by the other's
commits, and the groups halve); ``gc.freeze`` (fewer than 200 collections in 4,000
records); SQLite's cache_size and mmap_size (no change); PostgreSQL groups written from
a worker thread, with smaller GIL switch intervals (257-281 vs 346/s); ``malloc_trim``
for the idle RSS (-0.4 MiB; PostgreSQL's server holds psycopg, 9 MiB, and its SQLAlchemy
dialect, 2.4 MiB, from the command line's schema check on).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import workload
from bench.workload import CpuClock, Measured

ROOT = Path(__file__).resolve().parent.parent
POSTGRES_ADMIN = os.environ.get("LINEAGE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
TRACKIO_PYTHON = Path(os.environ.get("LINEAGE_BENCH_TRACKIO", "/tmp/peers/trackio/bin/python"))
MLFLOW = Path(os.environ.get("LINEAGE_BENCH_MLFLOW", "/tmp/peers/mlflow/bin/mlflow"))
SINGLE_TARGET = {"sqlite": 1000.0, "postgres": 500.0}
START_TARGET_S = 0.5
RSS_TARGET_MIB = 80.0


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Served:
    """``lineage serve`` on ``db`` from source tree ``src``; ``started_s``: to the first 200."""

    def __init__(self, db: str, src: Path = ROOT) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if k != "LINEAGE_DATABASE_URL"}
        start = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "--db", db, "serve", "--port", str(self.port), "--log-level", "warning"],
            cwd=src,
            env={**env, "PYTHONPATH": str(src)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"lineage serve ({src}) exited with {self.proc.returncode}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.005)
        self.started_s = time.perf_counter() - start

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def _packaged(src: Path) -> None:
    """A source tree outside the install (``--baseline-src``): its ``migrations/`` and
    ``templates/`` are the packages ``lineage.migrations`` and ``lineage.templates`` only
    in a wheel, so they are linked in place, or the install's own would be found."""
    for name in ("migrations", "templates"):
        link = src / "lineage" / name
        if src != ROOT and not link.exists() and (src / name).is_dir():
            link.symlink_to(src / name, target_is_directory=True)


def _upgrade(db: str, src: Path) -> None:
    _packaged(src)
    subprocess.run(
        [sys.executable, "-m", "api.cli", "--db", db, "db", "upgrade"],
        cwd=src,
        check=True,
        env={**os.environ, "PYTHONPATH": str(src)},
        capture_output=True,
    )


def _post(port: int, path: str, body: Any) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status not in (200, 201):
        raise SystemExit(f"POST {path}: {response.status} {data[:300]!r}")
    return json.loads(data)


class Databases:
    """Fresh databases of one backend for a run: SQLite files in ``tmp``, or PostgreSQL
    databases created on the server and dropped at the end."""

    def __init__(self, backend: str, tmp: Path) -> None:
        self.backend, self.tmp = backend, tmp
        self.made: list[str] = []

    def new(self) -> str:
        name = f"lineage_bench_{uuid.uuid4().hex[:10]}"
        if self.backend == "sqlite":
            return str(self.tmp / f"{name}.db")
        self._admin(f'CREATE DATABASE "{name}"')
        self.made.append(name)
        return POSTGRES_ADMIN.rsplit("/", 1)[0] + f"/{name}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(POSTGRES_ADMIN, autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def drop(self) -> None:
        for name in self.made:
            self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def ledger_single(db: str, count: int, src: Path = ROOT) -> Measured:
    _upgrade(db, src)
    server = Served(db, src)
    try:
        _post(server.port, "/api/v1/projects", {"slug": "bench", "lower_is_better": True})
        bodies = workload.trials(count)

        def told(answer: dict[str, Any]) -> None:
            assert "similar_prior" in answer, answer

        with CpuClock([server.proc.pid]) as clock:
            workload.post_parallel(server.port, "/api/v1/projects/bench/trials", bodies, check=told)
        return clock.measured(count)
    finally:
        server.stop()


def ledger_batch(db: str, count: int, batch: int) -> Measured:
    _upgrade(db, ROOT)
    server = Served(db)
    try:
        _post(server.port, "/api/v1/projects", {"slug": "bench", "lower_is_better": True})
        bodies = workload.trials(count)
        with CpuClock([server.proc.pid]) as clock:
            for first in range(0, count, batch):
                out = _post(
                    server.port, "/api/v1/projects/bench/trials:batch", {"trials": bodies[first : first + batch]}
                )
                assert out["created"] == len(bodies[first : first + batch])
        return clock.measured(count)
    finally:
        server.stop()


def startup(db: str, src: Path = ROOT, rounds: int = 3) -> tuple[float, float, float]:
    """Best cold start in seconds, idle RSS in MiB (of that process), load average."""
    _upgrade(db, src)
    best, rss = float("inf"), float("nan")
    for _ in range(rounds):
        server = Served(db, src)
        time.sleep(1.0)
        if server.started_s < best:
            best, rss = server.started_s, workload.rss_mib(server.proc.pid)
        server.stop()
    return best, rss, os.getloadavg()[0]


def trackio_peer(count: int, tmp: Path) -> Measured | None:
    if not TRACKIO_PYTHON.exists():
        return None
    done = subprocess.run(
        [str(TRACKIO_PYTHON), str(ROOT / "bench" / "peers" / "trackio_trials.py"), str(count), str(tmp / "trackio")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        print(f"  trackio failed: {done.stderr[-500:]}")
        return None
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return Measured(figures["items"], figures["wall"], figures["cpu"], os.getloadavg()[0])


def mlflow_peer(count: int, tmp: Path) -> Measured | None:
    """MLflow's tracking server (SQLite), the workload's trials as runs over REST from 4
    threads: create, log-batch (fields as params, the metric, status as a tag), update."""
    if not MLFLOW.exists():
        return None
    port = free_port()
    proc = subprocess.Popen(
        [
            str(MLFLOW),
            "server",
            "--backend-store-uri",
            f"sqlite:///{tmp / 'mlflow.db'}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    print("  MLflow server did not start")
                    return None
                time.sleep(0.2)
        import threading

        bodies = workload.trials(count)
        items = iter(range(count))
        lock = threading.Lock()

        def call(conn: http.client.HTTPConnection, path: str, body: dict[str, Any]) -> dict[str, Any]:
            conn.request(
                "POST",
                f"/api/2.0/mlflow/{path}",
                body=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            data = response.read()
            assert response.status == 200, data[:300]
            return json.loads(data or b"{}")

        def worker() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            while True:
                with lock:
                    i = next(items, None)
                if i is None:
                    return
                body, now = bodies[i], int(time.time() * 1000)
                run = call(conn, "runs/create", {"experiment_id": "0", "start_time": now})["run"]["info"]["run_id"]
                call(
                    conn,
                    "runs/log-batch",
                    {
                        "run_id": run,
                        "params": [{"key": k, "value": str(body[k])[:500]} for k in ("hypothesis", "specialist")],
                        "metrics": [
                            {"key": "core_metric", "value": body.get("core_metric", 0.0), "timestamp": now, "step": 0}
                        ],
                        "tags": [{"key": "status", "value": body["status"]}],
                    },
                )
                call(conn, "runs/update", {"run_id": run, "status": "FINISHED", "end_time": now})

        pids = [proc.pid] + _children(proc.pid)
        with CpuClock(pids) as clock:
            threads = [threading.Thread(target=worker) for _ in range(workload.CLIENT_THREADS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        return clock.measured(count)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


#: Rounds of single-trial ingest (alternating with ``--baseline-src``); the median is reported.
SINGLE_ROUNDS = 3


def _median(runs: list[Measured]) -> Measured:
    """The round with the median wall rate."""
    return sorted(runs, key=lambda run: run.rate)[len(runs) // 2]


def _backends(which: str) -> Iterator[str]:
    yield from (["sqlite", "postgres"] if which == "both" else [which])


def run(tmp: Path, *, trials: int, batch: int, peer_trials: int, backends: str, baseline_src: Path | None) -> bool:
    ok = True
    for backend in _backends(backends):
        dbs = Databases(backend, tmp)
        try:
            print(
                f"\n[issue 23 workload, {backend}: {trials:,} trials, {workload.CLIENT_THREADS} client threads, "
                "keep-alive HTTP, similar_prior on every answer]"
            )
            # rounds, alternating with the baseline: this shared host drifts by 20% within minutes
            nows: list[Measured] = []
            befores: list[Measured] = []
            for number in range(SINGLE_ROUNDS):
                order = ["now", "before"] if number % 2 == 0 else ["before", "now"]
                for which in order if baseline_src is not None else ["now"]:
                    if which == "now":
                        nows.append(ledger_single(dbs.new(), trials))
                        print(f"  round {number + 1}: single POST   {nows[-1].line()}")
                    else:
                        befores.append(ledger_single(dbs.new(), trials, baseline_src))  # type: ignore[arg-type]
                        print(f"  round {number + 1}: from {baseline_src.name:<9}{befores[-1].line()}")  # type: ignore[union-attr]
            single = _median(nows)
            target = SINGLE_TARGET[backend]
            print(
                f"  single POST .../trials     {single.line()}   median of {len(nows)}; target >= {target:,.0f}/s "
                f"wall: {single.rate / target:4.2f}x"
            )
            ok &= single.rate >= target
            if baseline_src is not None:
                before = _median(befores)
                print(f"  same, from {baseline_src.name:<14} {before.line()}   median of {len(befores)}")
                wall = statistics.median(a.rate / b.rate for a, b in zip(nows, befores))
                cpu = statistics.median(a.per_cpu / b.per_cpu for a, b in zip(nows, befores))
                print(
                    f"  now / before               {wall:5.2f}x wall   {cpu:5.2f}x per CPU-second   "
                    f"(medians of the rounds' ratios)"
                )
            batched = ledger_batch(dbs.new(), trials, batch)
            goal = 14_500 * 0.7
            print(
                f"  POST .../trials:batch x{batch:<4} {batched.line()}   near {goal:,.0f}/s (0.7 x the store's "
                f"14.5k): {batched.rate / goal:4.2f}x"
            )
            start, rss, load = startup(dbs.new())
            print(
                f"  cold start (best of 3)     {start:6.3f} s (target <= {START_TARGET_S}; load {load:.2f})   "
                f"idle RSS {rss:5.1f} MiB (target <= {RSS_TARGET_MIB:.0f})"
            )
            if baseline_src is not None:
                b_start, b_rss, b_load = startup(dbs.new(), baseline_src)
                print(
                    f"  same, from {baseline_src.name:<14} {b_start:6.3f} s (load {b_load:.2f})   "
                    f"idle RSS {b_rss:5.1f} MiB"
                )
        finally:
            dbs.drop()
        if backend == "sqlite":
            print(f"\n[peers: the same workload's first {peer_trials:,} trials]")
            for name, measured in (
                ("trackio (in process)", trackio_peer(peer_trials, tmp)),
                ("MLflow server (REST)", mlflow_peer(peer_trials, tmp)),
            ):
                if measured is None:
                    print(f"  {name:<26} not installed (see the module doc)")
                    continue
                print(f"  {name:<26} {measured.line()}")
                print(
                    f"  ledger / {name.split()[0]:<17} {single.rate / measured.rate:5.1f}x wall   "
                    f"{single.per_cpu / measured.per_cpu:5.1f}x per CPU-second"
                )
    return ok
