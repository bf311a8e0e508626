"""Telemetry ingest against trackio, in one run (issue 36, "Headroom"). Run:
``.venv/bin/python bench/telemetry_headroom.py [--baseline-src DIR]``.

The points of :mod:`bench.telemetry_e2e`'s workload (one run logging ``--steps`` steps of
its scalars, plus ``val_bpb`` every 250 steps), into SQLite:

* **trackio in process**: ``trackio.log`` of each step's dict, in its own virtual
  environment and process (``/tmp/peers/trackio``, never our dependency), until its
  SQLite file holds every step (:func:`bench.telemetry_e2e.trackio_side`);
* **ledger, row form**: ``POST .../telemetry`` with ``{"points": [{"step", "name",
  "value"}, ...]}``, ``--row-batch`` points a request (5,000, as the issue measured);
* **ledger, column form**: the same points as ``{"columns": {"step": [...], "names":
  [...], "name": [indexes], "value": [...]}}``, ``--column-batch`` points a request.

The ledger's bodies are encoded before the clock starts and posted by ``--clients``
processes (not threads sharing one GIL) with keep-alive ``http.client``, each to a trial of
its own (four trainers), to a ``lineage serve`` on a fresh database, after one batch to a
trial of its own (the first imports the telemetry path and builds its validators). Rounds alternate the
sides (the shared host drifts by 20% within minutes); the medians are printed with the
ratios to trackio, the targets (row form >= 2x trackio, column form >= 400k points/s) and
the load average. ``--baseline-src DIR``: also the ledger served from another source tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import telemetry_e2e, workload  # noqa: E402
from bench.api_workload import Served, _packaged, _post, _upgrade  # noqa: E402
from bench.batch_headroom import post_batches  # noqa: E402

ROW_RATIO_TARGET = 2.0
COLUMN_TARGET = 400_000.0


def points(steps: int) -> list[tuple[int, str, float]]:
    """``(step, name, value)`` of the workload, in logging order."""
    out: list[tuple[int, str, float]] = []
    telemetry_e2e.workload_fn()(lambda step, metrics: out.extend((step, k, v) for k, v in metrics.items()), steps)
    return out


def row_bodies(found: list[tuple[int, str, float]], batch: int) -> list[bytes]:
    return [
        json.dumps({"points": [{"step": s, "name": n, "value": v} for s, n, v in found[at : at + batch]]}).encode()
        for at in range(0, len(found), batch)
    ]


def column_bodies(found: list[tuple[int, str, float]], batch: int) -> list[bytes]:
    bodies = []
    for at in range(0, len(found), batch):
        chunk = found[at : at + batch]
        names = sorted({n for _, n, _ in chunk})
        index = {n: i for i, n in enumerate(names)}
        columns = {
            "step": [s for s, _, _ in chunk],
            "names": names,
            "name": [index[n] for _, n, _ in chunk],
            "value": [v for _, _, v in chunk],
        }
        bodies.append(json.dumps({"columns": columns}).encode())
    return bodies


def ledger_side(src: Path, tmp: Path, bodies: list[bytes], clients: int, count: int) -> dict[str, float]:
    """Points/s wall and per server CPU-s of ``bodies`` posted by ``clients`` processes."""
    db = str(tmp / f"ledger-{time.monotonic_ns()}.db")
    _upgrade(db, src)
    server = Served(db, src)
    try:
        _post(server.port, "/api/v1/projects", {"slug": "bench", "lower_is_better": True})
        trials = [
            _post(server.port, "/api/v1/projects/bench/trials", {"status": "running", "hypothesis": f"trainer {k}"})
            for k in range(clients)
        ]
        paths = [f"/api/v1/projects/bench/trials/{t['trial']['exp_id']}/telemetry" for t in trials]
        # warm: the first batch imports the telemetry path and builds its validators (startup, not ingest)
        warm = _post(server.port, "/api/v1/projects/bench/trials", {"status": "running", "hypothesis": "warm-up"})
        post_batches(
            server.port, [paths[0].replace(trials[0]["trial"]["exp_id"], warm["trial"]["exp_id"])], bodies[:1], 1
        )
        cpu = workload.proc_cpu(server.proc.pid)
        wall, load = post_batches(server.port, paths, bodies, clients)
        used = workload.proc_cpu(server.proc.pid) - cpu
    finally:
        server.stop()
    return {"rate": count / wall, "per_cpu": count / max(used, 1e-9), "load": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40_000, help="steps of the workload (11 points each)")
    parser.add_argument("--row-batch", type=int, default=5_000, help="points a request, row form")
    parser.add_argument("--column-batch", type=int, default=50_000, help="points a request, column form")
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trackio-python", default=os.environ.get("TRACKIO_PYTHON") or "/tmp/peers/trackio/bin/python")
    parser.add_argument("--baseline-src", type=Path, help="also serve the ledger from this source tree")
    args = parser.parse_args()
    found = points(args.steps)
    forms = {"rows": row_bodies(found, args.row_batch), "columns": column_bodies(found, args.column_batch)}
    trees = {"ledger": ROOT}
    if args.baseline_src is not None:
        _packaged(args.baseline_src.resolve())
        trees["baseline"] = args.baseline_src.resolve()
    results: dict[str, list[dict[str, float]]] = {}
    print(
        f"[telemetry headroom: {len(found):,} points ({args.steps:,} steps), SQLite, {args.clients} client "
        f"processes; rows {args.row_batch:,} a request, columns {args.column_batch:,}; load {os.getloadavg()[0]:.2f}]"
    )
    with tempfile.TemporaryDirectory(prefix="lineage-bench-telemetry-") as tmp_name:
        tmp = Path(tmp_name)
        for round_ in range(args.rounds):
            side: Any = telemetry_e2e.trackio_side(args.trackio_python, tmp, args.steps)
            if isinstance(side, str):
                print(f"  trackio: not measured ({side})")
            else:
                got = {"rate": side["points"] / side["elapsed"], "per_cpu": side["points"] / side["cpu"]}
                results.setdefault("trackio", []).append({**got, "load": os.getloadavg()[0]})
            for tree, src in trees.items():
                for form, bodies in forms.items():
                    results.setdefault(f"{tree} {form}", []).append(
                        ledger_side(src, tmp, bodies, args.clients, len(found))
                    )
            for name, runs in results.items():
                last = runs[-1]
                print(
                    f"  round {round_ + 1} {name:18} {last['rate']:10,.0f} points/s  "
                    f"{last['per_cpu']:10,.0f} per CPU-s  (load {last['load']:.2f})"
                )
    medians = {
        name: {k: statistics.median(r[k] for r in runs) for k in ("rate", "per_cpu")} for name, runs in results.items()
    }
    print(f"\n[medians of {args.rounds}; ledger per CPU-s: the server's; trackio's: its process]")
    trackio = medians.get("trackio")
    for name, got in medians.items():
        ratio = f"   {got['rate'] / trackio['rate']:5.2f}x trackio" if trackio and name != "trackio" else ""
        print(f"  {name:18} {got['rate']:10,.0f} points/s  {got['per_cpu']:10,.0f} per CPU-s{ratio}")
    for tree in trees:
        rows, columns = medians[f"{tree} rows"], medians[f"{tree} columns"]
        verdict = (
            f"row form {rows['rate'] / trackio['rate']:.2f}x trackio (target >= {ROW_RATIO_TARGET}x: "
            f"{'met' if rows['rate'] >= ROW_RATIO_TARGET * trackio['rate'] else 'NOT met'})"
            if trackio
            else "row form: no trackio to compare"
        )
        print(
            f"  {tree}: {verdict}; column form {columns['rate']:,.0f} points/s (target >= {COLUMN_TARGET:,.0f}: "
            f"{'met' if columns['rate'] >= COLUMN_TARGET else 'NOT met'}; per server CPU-s, what one free core "
            f"would do: {columns['per_cpu']:,.0f})"
        )
    print(f"  load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
