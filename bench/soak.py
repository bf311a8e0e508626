"""Soak test (issue 22): a mixed workload against a real ``lineage serve`` for a long
time, on each backend. Run: ``.venv/bin/python bench/soak.py [--minutes 30]
[--backend sqlite|postgres|both] [--json summary.json]``.

For ``--minutes`` (30 by default; fractions allowed) a fresh server on a fresh database
(a SQLite file; a PostgreSQL database created on ``$LINEAGE_TEST_POSTGRES_URL``, default
127.0.0.1:5432 as user postgres, dropped afterwards) takes at once (``bench/soak_load.py``):

* agents polling the wrapped prompt with ``If-None-Match`` (304 while unchanged:
  ``agent.poll304``; a 200 with the new prompt: ``agent.prompt``) and
  recording trials with an ``Idempotency-Key`` (a quarter retried: 200, no duplicate);
* a trainer streaming telemetry through the project's own client (``LedgerClient`` +
  ``TrialRecorder``, one trial after another, system metrics on);
* a researcher loading the pages: projects, dashboard, trials table, trial, compare, explorer;
* ``lineage watch results.tsv --server URL`` (a subprocess) following a file a writer
  appends autoresearch rows to.

Kinds: ``agent.prompt`` (a 200), ``agent.poll304``, ``agent.record`` (201), ``agent.retry``
(the same request again: 200); ``trainer.telemetry`` and ``trainer.trial`` (each request
the client makes), ``trainer.trial_total`` (the wall time of one trial, plan to close:
the steps plus the delivery left at the end); ``page.*``; ``watch.lag``.

Every 5 s it samples the server's RSS and open file descriptors (``/proc``), the database's
size and the load average. It prints, per minute, each kind's p50/p99 latency (ms; for
``watch.lag`` the seconds from an append to the watcher's ``added`` are in ms too) with
the errors, RSS, fds, database size and load, then a summary, and checks at the end that
the ledger holds exactly what was recorded (agents' trials, the trainer's trials, the
file's rows).

Acceptance rules (exit status 1 when one fails; ``--json`` writes the summary either way):

* errors: 0 (a non-2xx/304 answer, a 304 not asked for, an exception, a client warning,
  a trial not delivered, a row the watcher never added, a count that does not match);
* RSS plateau: the server's RSS at the end (median of the last minute's samples) is at
  most 10% above its RSS at the start of the last 20 minutes (median of that minute's
  samples); in a run shorter than 30 minutes, the window is its last two thirds.
  ``--rss-rule report`` prints the figure without making it a rule (the CI smoke run: a
  server's first minutes are warm-up, too noisy for a rule).

Open descriptors and database size are reported, not judged (a leak of descriptors shows
as a column that only grows). Latencies are never judged: the machine may be shared, so
the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.soak_load import (  # noqa: E402
    AGENTS,
    API,
    PAGES,
    TRAINER,
    WATCHED,
    Recorder,
    Watcher,
    agent,
    percentile,
    researcher,
    trainer,
)
from tests.servers import free_port  # noqa: E402
from tests.servers import stop as stop_process

POSTGRES_ADMIN_URL = os.environ.get(
    "LINEAGE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
SAMPLE_S = 5.0
RSS_GROWTH_LIMIT = 0.10
KINDS = (
    "agent.prompt",
    "agent.poll304",
    "agent.record",
    "agent.retry",
    "trainer.telemetry",
    "trainer.trial",
    "trainer.trial_total",
    *PAGES,
    "watch.lag",
)


# -- the server and its database -------------------------------------------------------------


@contextmanager
def database(backend: str, workdir: Path) -> Iterator[tuple[str, Callable[[], int]]]:
    """A fresh database of ``backend``: its URL and a function giving its size in bytes."""
    if backend == "sqlite":
        path = workdir / "soak.db"
        yield str(path), lambda: sum(p.stat().st_size for p in workdir.glob("soak.db*"))
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    name = f"lineage_soak_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def size() -> int:
        with admin.connect() as conn:
            return int(conn.execute(text("SELECT pg_database_size(:n)"), {"n": name}).scalar_one())

    try:
        yield POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}", size
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def server(db_url: str, workdir: Path, timeout: float = 120.0) -> Iterator[tuple[str, subprocess.Popen]]:  # type: ignore[type-arg]
    """``lineage serve --db URL`` (one process: uvicorn's single worker runs in it) on a free
    loopback port, with no token (an open loopback ledger); yields its URL and process."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    for name in ("LINEAGE_DATABASE_URL", "LINEAGE_ANONYMOUS_READ"):
        env.pop(name, None)
    base = f"http://127.0.0.1:{port}"
    with open(workdir / "server.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "serve", "--db", db_url, "--port", str(port), "--log-level", "warning"],
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"lineage serve did not come up:\n{server_log(workdir)}")
                time.sleep(0.1)
            yield base, proc
        finally:
            stop_process(proc)


def server_log(workdir: Path) -> str:
    return (workdir / "server.log").read_text(errors="replace")[-3000:]


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


# -- one run ---------------------------------------------------------------------------------


def soak(backend: str, minutes: float, *, agents: int, trainer_steps: int, quiet: bool) -> dict[str, Any]:
    """Run the workload on ``backend`` for ``minutes``; the summary (``report``)."""
    with tempfile.TemporaryDirectory(prefix=f"soak-{backend}-") as tmp:
        workdir = Path(tmp)
        with database(backend, workdir) as (db_url, db_size), server(db_url, workdir) as (base, proc):
            httpx.post(
                f"{base}{API}", json={"slug": AGENTS, "title": "soak: agents", "metric_name": "val_loss"}, timeout=60
            ).raise_for_status()
            rec = Recorder()
            stop = threading.Event()
            samples: list[dict[str, float]] = []

            def sample() -> None:
                try:
                    samples.append(
                        {
                            "t": rec.now(),
                            "rss": rss_bytes(proc.pid),
                            "fds": open_fds(proc.pid),
                            "db": db_size(),
                            "load": os.getloadavg()[0],
                        }
                    )
                except Exception as exc:  # the server gone is an error of the soak
                    rec.error("sampler", f"{type(exc).__name__}: {exc}")

            def sampler() -> None:
                while not stop.wait(SAMPLE_S):
                    sample()

            sample()
            watcher = Watcher(rec, base, workdir, every_s=2.0)
            threads = [
                threading.Thread(
                    target=agent,
                    args=(rec, base, stop),
                    kwargs={"seed": i, "poll_s": 0.5, "record_s": 3.0},
                    daemon=True,
                )
                for i in range(agents)
            ]
            threads += [
                threading.Thread(
                    target=trainer,
                    args=(rec, base, stop),
                    kwargs={"spool_dir": workdir / "spool", "steps": trainer_steps, "step_s": 0.05},
                    daemon=True,
                ),
                threading.Thread(target=researcher, args=(rec, base, stop), kwargs={"every_s": 1.0}, daemon=True),
                threading.Thread(target=watcher.write, args=(stop,), daemon=True),
                threading.Thread(target=sampler, daemon=True),
            ]
            for thread in threads:
                thread.start()
            end = rec.now() + minutes * 60
            shown = 0
            while rec.now() < end:
                time.sleep(min(1.0, max(0.0, end - rec.now())))
                if proc.poll() is not None:
                    rec.error("server", f"lineage serve exited with {proc.returncode}:\n{server_log(workdir)}")
                    break
                if not quiet and int(rec.now() // 60) > shown:
                    shown = int(rec.now() // 60)
                    print(minute_line(rec, samples, shown - 1), flush=True)
            stop.set()
            for thread in threads:
                thread.join(timeout=120)
                if thread.is_alive():
                    rec.error("soak", f"{thread.name} did not stop within 120 s")
            watcher.finish()
            sample()
            check_counts(rec, base, watcher)
            return report(backend, minutes, rec, samples)


def check_counts(rec: Recorder, base: str, watcher: Watcher) -> None:
    """The ledger holds exactly what the actors recorded."""
    expected = {
        AGENTS: rec.counts.get("agent_trials", 0),
        TRAINER: rec.counts.get("trainer_trials", 0),
        WATCHED: watcher.written,
    }
    for project, count in expected.items():
        try:
            got = httpx.get(f"{base}{API}/{project}/trials", params={"limit": 1}, timeout=60).json()["total"]
        except Exception as exc:
            rec.error("count", f"{project}: {type(exc).__name__}: {exc}")
            continue
        if got != count:
            rec.error("count", f"{project}: the ledger holds {got} trials, {count} were recorded")


# -- the report ------------------------------------------------------------------------------


def _window_median(samples: list[dict[str, float]], key: str, start: float, stop: float) -> float:
    inside = [s[key] for s in samples if start <= s["t"] <= stop]
    return statistics.median(inside) if inside else float("nan")


def minute_stats(rec: Recorder, samples: list[dict[str, float]], minute: int) -> dict[str, Any]:
    lo, hi = minute * 60.0, (minute + 1) * 60.0
    with rec.lock:
        timed = [(k, ms) for k, t, ms in rec.samples if lo <= t < hi]
        errors = sum(1 for _, t, _ in rec.errors if lo <= t < hi)
    kinds = {}
    for kind in KINDS:
        values = [ms for k, ms in timed if k == kind]
        if values:
            kinds[kind] = {
                "n": len(values),
                "p50_ms": round(percentile(values, 50), 2),
                "p99_ms": round(percentile(values, 99), 2),
            }
    inside = [s for s in samples if lo <= s["t"] < hi] or samples[-1:]
    last = inside[-1] if inside else {"rss": 0, "fds": 0, "db": 0, "load": 0}
    return {
        "minute": minute + 1,
        "errors": errors,
        "rss_mb": round(last["rss"] / 2**20, 1),
        "fds": int(last["fds"]),
        "db_mb": round(last["db"] / 2**20, 2),
        "load1": round(last["load"], 2),
        "kinds": kinds,
    }


def minute_line(rec: Recorder, samples: list[dict[str, float]], minute: int) -> str:
    m = minute_stats(rec, samples, minute)
    head = (
        f"min {m['minute']:>3}  err {m['errors']}  rss {m['rss_mb']:.1f} MB  fds {m['fds']}  "
        f"db {m['db_mb']:.2f} MB  load {m['load1']:.2f} |"
    )
    return head + " ".join(f" {k} {v['p50_ms']:.0f}/{v['p99_ms']:.0f}" for k, v in m["kinds"].items())


def report(backend: str, minutes: float, rec: Recorder, samples: list[dict[str, float]]) -> dict[str, Any]:
    duration = minutes * 60.0
    window = 20 * 60.0 if minutes >= 30 else duration * 2 / 3
    start_at = duration - window
    rss_start = _window_median(samples, "rss", start_at, start_at + 60)
    rss_end = _window_median(samples, "rss", duration - 60, duration + 1e9)
    growth = (rss_end - rss_start) / rss_start if rss_start else float("nan")
    overall = {}
    with rec.lock:
        by_kind: dict[str, list[float]] = {}
        for kind, _, ms in rec.samples:
            by_kind.setdefault(kind, []).append(ms)
        errors = list(rec.errors)
        counts = dict(rec.counts)
    for kind in KINDS:
        if kind in by_kind:
            values = by_kind[kind]
            overall[kind] = {
                "n": len(values),
                "p50_ms": round(percentile(values, 50), 2),
                "p99_ms": round(percentile(values, 99), 2),
            }
    return {
        "backend": backend,
        "minutes": minutes,
        "kinds": overall,
        "per_minute": [minute_stats(rec, samples, m) for m in range(max(1, int(-(-duration // 60))))],
        "errors": len(errors),
        "error_kinds": sorted({k for k, _, _ in errors}),
        "first_errors": [f"{t:.0f}s {k}: {what}" for k, t, what in errors[:20]],
        "counts": counts,
        "rss": {
            "start_mb": round(samples[0]["rss"] / 2**20, 1),
            "end_mb": round(samples[-1]["rss"] / 2**20, 1),
            "window_s": round(window),
            "window_start_mb": round(rss_start / 2**20, 1),
            "window_end_mb": round(rss_end / 2**20, 1),
            "growth": round(growth, 4),
            "max_mb": round(max(s["rss"] for s in samples) / 2**20, 1),
        },
        "fds": {
            "start": int(samples[0]["fds"]),
            "end": int(samples[-1]["fds"]),
            "max": int(max(s["fds"] for s in samples)),
        },
        "db_mb": {"start": round(samples[0]["db"] / 2**20, 2), "end": round(samples[-1]["db"] / 2**20, 2)},
        "load1": {
            "mean": round(statistics.mean(s["load"] for s in samples), 2),
            "max": round(max(s["load"] for s in samples), 2),
        },
        "samples": len(samples),
    }


def judge(summary: dict[str, Any], *, rss_rule: bool) -> list[str]:
    """The acceptance rules that failed, in words (module doc)."""
    failed = []
    if summary["errors"]:
        failed.append(f"{summary['errors']} errors ({', '.join(summary['error_kinds'])})")
    growth = summary["rss"]["growth"]
    if rss_rule and not growth <= RSS_GROWTH_LIMIT:
        failed.append(
            f"RSS grew {growth:.1%} over the last {summary['rss']['window_s'] / 60:.0f} min "
            f"(limit {RSS_GROWTH_LIMIT:.0%})"
        )
    return failed


def print_summary(summary: dict[str, Any], failed: list[str]) -> None:
    rss, fds, db = summary["rss"], summary["fds"], summary["db_mb"]
    print(
        f"\n== {summary['backend']}: {summary['minutes']:g} min, load average mean {summary['load1']['mean']} "
        f"(max {summary['load1']['max']}) =="
    )
    print(f"{'kind':<22}{'n':>8}{'p50 ms':>10}{'p99 ms':>10}")
    for kind, v in summary["kinds"].items():
        print(f"{kind:<22}{v['n']:>8}{v['p50_ms']:>10.1f}{v['p99_ms']:>10.1f}")
    print(f"counts: {summary['counts']}")
    print(f"errors: {summary['errors']}")
    for line in summary["first_errors"]:
        print(f"  {line}")
    print(
        f"RSS: start {rss['start_mb']} MB, end {rss['end_mb']} MB, max {rss['max_mb']} MB; over the last "
        f"{rss['window_s'] / 60:.1f} min {rss['window_start_mb']} -> {rss['window_end_mb']} MB ({rss['growth']:+.1%})"
    )
    print(
        f"open fds: start {fds['start']}, end {fds['end']}, max {fds['max']}; database: {db['start']} -> {db['end']} MB"
    )
    print("PASS" if not failed else "FAIL: " + "; ".join(failed), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="length of each backend's run (default 30)")
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--agents", type=int, default=2, help="agent threads (default 2)")
    parser.add_argument(
        "--trainer-steps",
        type=int,
        default=400,
        help="steps of each trainer trial, 0.05 s apart (default 400: a trial every ~20 s)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the summaries here (a list, one per backend)")
    parser.add_argument(
        "--rss-rule",
        choices=["judge", "report"],
        default="judge",
        help="judge: RSS growth over the window is a rule; report: only printed",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-minute lines while running")
    args = parser.parse_args(argv)
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    summaries, failed_any = [], False
    for backend in backends:
        print(f"soak: {backend} for {args.minutes:g} min, load average {os.getloadavg()[0]:.2f}", flush=True)
        summary = soak(backend, args.minutes, agents=args.agents, trainer_steps=args.trainer_steps, quiet=args.quiet)
        failed = judge(summary, rss_rule=args.rss_rule == "judge")
        summary["passed"], summary["failed_rules"] = not failed, failed
        summary["rss_rule"] = args.rss_rule
        print_summary(summary, failed)
        summaries.append(summary)
        failed_any = failed_any or bool(failed)
        if args.json:
            args.json.write_text(json.dumps(summaries, indent=1))
    return 1 if failed_any else 0


if __name__ == "__main__":
    sys.exit(main())
