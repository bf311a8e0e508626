"""Benchmarks of autoresearch-style loops (issue 10). Run: ``.venv/bin/python bench/autoresearch.py``.

* import of a 100,000-row autoresearch ``results.tsv`` on SQLite (target <= 3 s), and its
  byte-identical export;
* ``lineage watch``: append-to-visible latency of single appended rows (p50/p95, target
  p95 <= 1 s), measured by a reader polling the database from another connection;
* the watcher's CPU while idle (target < 1% of a core), from its process CPU time.

Figures are printed; ``--rows`` and ``--appends`` scale the runs.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lineage.formats.text import check_text  # noqa: E402
from lineage.service import Ledger  # noqa: E402
from tests.servers import cpu_seconds  # noqa: E402

HEADER = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n"
IDEAS = [
    "increase LR",
    "switch to GeLU",
    "add warmup",
    "muon lr",
    "weight decay",
    "rope base",
    "wider MLP",
    "deeper model",
    "bigger batch",
    "qk norm",
    "value residual",
    "untied embeddings",
]


def make_row(rng: random.Random, i: int, best: list[float]) -> str:
    roll = rng.random()
    commit = f"{rng.getrandbits(28):07x}"
    if roll < 0.08:
        return f"{commit}\t0.000000\t0.0\tcrash\t{rng.choice(IDEAS)} {i} (OOM)\n"
    metric = best[0] + abs(rng.gauss(0, 0.004))
    status = "discard"
    if roll > 0.9:
        metric = best[0] - abs(rng.gauss(0, 0.0005))
        best[0] = metric
        status = "keep"
    return f"{commit}\t{metric:.6f}\t{44 + rng.random() * 4:.1f}\t{status}\t{rng.choice(IDEAS)} variant {i}\n"


def make_file(path: Path, rows: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    best = [1.0]
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write(HEADER)
        fh.write("a1b2c3d\t1.000000\t44.0\tkeep\tbaseline\n")
        for i in range(1, rows):
            fh.write(make_row(rng, i, best))


def bench_import(tmp: Path, rows: int, repeat: int) -> None:
    path = tmp / "results.tsv"
    make_file(path, rows)
    times = []
    for attempt in range(repeat):
        ledger = Ledger.open(str(tmp / f"import{attempt}.db"))
        start = time.perf_counter()
        text = check_text(path.read_bytes(), source=str(path))
        done = ledger.files.import_results("bench", text, source=str(path))
        times.append(time.perf_counter() - start)
        if attempt < repeat - 1:
            ledger.close()
    took = min(times)
    print(
        f"import   {done.rows:>7,} rows  best {took:5.2f} s, median {statistics.median(times):5.2f} s of {repeat} "
        f"({done.rows / took:,.0f} rows/s)  target <= 3 s: {'ok' if took <= 3 else 'MISSED'}"
    )
    fieldkit = _fieldkit_import(tmp, rows, repeat)
    print(
        f"         the fieldkit import path on the same machine, same run: best {min(fieldkit):5.2f} s, "
        f"median {statistics.median(fieldkit):5.2f} s"
    )
    out = tmp / "export.tsv"
    start = time.perf_counter()
    with out.open("w", encoding="utf-8", newline="") as fh:
        ledger.files.export_results("bench", fh)
    took = time.perf_counter() - start
    same = out.read_bytes() == path.read_bytes()
    print(f"export   {done.rows:>7,} rows  {took:6.2f} s  byte-identical: {same}")
    ledger.close()


def _fieldkit_import(tmp: Path, rows: int, repeat: int) -> list[float]:
    from bench.ledger import generate_sweep
    from lineage.formats.fieldkit import write_trials

    path = tmp / "fieldkit.tsv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        write_trials(generate_sweep(rows), fh)
    times = []
    for attempt in range(repeat):
        ledger = Ledger.open(str(tmp / f"fieldkit{attempt}.db"))
        start = time.perf_counter()
        with path.open("r", encoding="utf-8", newline="") as fh:
            ledger.files.import_file("fk", fh, create_with={})
        times.append(time.perf_counter() - start)
        ledger.close()
    return times


def bench_watch(tmp: Path, appends: int, idle_s: float) -> None:
    path = tmp / "watched.tsv"
    make_file(path, 1_000, seed=11)
    db = tmp / "watch.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "--db", str(db), "watch", str(path), "--project", "w"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        ledger = None
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                ledger = Ledger.open(str(db), upgrade=False)
                if ledger.projects.project("w").trial_count >= 1_000:
                    break
            except Exception:
                pass
            time.sleep(0.1)
        assert ledger is not None, "the watcher did not import the file"
        rng = random.Random(5)
        best = [0.9]
        latencies: list[float] = []
        for i in range(appends):
            line = make_row(rng, 1_000 + i, best)
            expected = 1_000 + i + 1
            start = time.perf_counter()
            with path.open("a", encoding="utf-8", newline="") as fh:
                fh.write(line)
            while ledger.projects.project("w").trial_count < expected:
                if time.perf_counter() - start > 10:
                    raise SystemExit(f"row {i} not visible after 10 s")
                time.sleep(0.002)
            latencies.append(time.perf_counter() - start)
            time.sleep(0.2 + rng.random() * 0.2)
        latencies.sort()
        p50 = statistics.median(latencies)
        p95 = latencies[max(0, int(len(latencies) * 0.95) - 1)]
        print(
            f"watch    {appends} appends  latency p50 {p50 * 1000:.0f} ms  p95 {p95 * 1000:.0f} ms  "
            f"max {latencies[-1] * 1000:.0f} ms  target p95 <= 1000 ms: {'ok' if p95 <= 1 else 'MISSED'}"
        )
        time.sleep(1.0)
        before = cpu_seconds(proc.pid)
        time.sleep(idle_s)
        used = cpu_seconds(proc.pid) - before
        share = used / idle_s * 100
        print(
            f"watch    idle {idle_s:.0f} s  CPU {used * 1000:.1f} ms = {share:.2f}% of a core  target < 1%: "
            f"{'ok' if share < 1 else 'MISSED'}"
        )
        ledger.close()
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--appends", type=int, default=40)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU measurement")
    parser.add_argument("--repeat", type=int, default=3, help="imports to run (the best and the median are printed)")
    parser.add_argument("--skip-watch", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_import(Path(tmp), args.rows, args.repeat)
        if not args.skip_watch:
            bench_watch(Path(tmp), args.appends, args.idle)


if __name__ == "__main__":
    main()
