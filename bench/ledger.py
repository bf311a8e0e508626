"""Ledger core benchmarks (issue: ledger core). Run: ``.venv/bin/python bench/ledger.py``.

Measures, side by side in one run on the same generated sweep:

* the session-start prompt (KNOWLEDGE.md included) on a 100,000-trial project: our
  median vs fieldkit 0.34.1 rendering the same sweep from its results.tsv;
* TSV import and export of 100,000 rows on SQLite (and PostgreSQL with --postgres);
* single-writer trial inserts through the service API.

Targets: render median <= 20 ms and >= 50x fieldkit; import <= 5 s; export <= 3 s;
inserts >= 2,000 rows/s. Ratios are printed next to the figures.
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import tempfile
import time
from pathlib import Path

from lineage.domain import FIELDKIT_LABELS, FailureLabel, Trial
from lineage.formats.fieldkit import read_trials, write_trials
from lineage.service import Ledger

#: a sweep as a results file holds it: fieldkit's labels (a running trial has no row yet)
STATUSES = [label for label in FIELDKIT_LABELS if label not in (FailureLabel.BASELINE, FailureLabel.KEEP)]


def generate_sweep(n: int, seed: int = 7) -> list[Trial]:
    """A realistic sweep: a baseline, keeps that advance a branch, discards and failures off it."""
    rng = random.Random(seed)
    trials = [
        Trial(
            exp_id="000",
            status=FailureLabel.BASELINE,
            core_metric=1.5,
            specialist="baseline",
            hypothesis="baseline run",
            timestamp="2026-01-01T00:00:00Z",
            seq=0,
        )
    ]
    tip, best = "000", 1.5
    for i in range(1, n):
        # about 1% of trials improve on the best: the chain to the best is ~1,000 long
        status = FailureLabel.KEEP if rng.random() < 0.01 else rng.choice(STATUSES)
        metric = (
            None
            if status.value in ("crash", "preflight_crash", "harness_abort")
            else round(best + rng.gauss(0, 0.01), 6)
        )
        if status is FailureLabel.KEEP and metric is not None:
            metric = min(metric, best - abs(rng.gauss(0, 0.001)))
        exp_id = str(i).zfill(3)
        trials.append(
            Trial(
                exp_id=exp_id,
                timestamp=f"2026-01-01T00:{i % 60:02d}:00Z",
                specialist=f"spec-{i % 7}",
                parent_exp=tip,
                baseline_exp="000",
                domain="lm",
                hypothesis=f"try idea {i}: change lr schedule variant {rng.randint(0, 999)}",
                expected_delta="-0.001 bpb",
                status=status,
                core_metric=metric,
                delta_vs_best=None if metric is None else metric - best,
                train_s=300.0,
                total_s=320.0,
                job_name=f"job-{i}",
                notes=f"notes for {i}",
                seq=i,
            )
        )
        if status is FailureLabel.KEEP and metric is not None:
            tip, best = exp_id, metric
    return trials


def median_ms(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def bench_backend(db: str, label: str, tsv_text: str, n: int, fieldkit_ms: float | None) -> None:
    ledger = Ledger.open(db)
    ledger.projects.create_project("bench", lower_is_better=True, best_policy="fieldkit")
    start = time.perf_counter()
    ledger.tables.import_trials("bench", read_trials(io.StringIO(tsv_text)))
    import_s = time.perf_counter() - start
    out = io.StringIO()
    start = time.perf_counter()
    write_trials(ledger.tables.stream_trials("bench"), out)
    export_s = time.perf_counter() - start
    assert out.getvalue() == tsv_text, "export is not byte-identical to the imported file"

    def render() -> str:
        return ledger.agent.render_prompt("bench", specialist="next", timestamp="t")

    render()
    ours_ms = median_ms(render, 30)
    knowledge_ms = median_ms(lambda: ledger.agent.render_knowledge("bench"), 30)

    ledger.projects.create_project("inserts")
    count = 2_000
    start = time.perf_counter()
    for i in range(count):
        ledger.recording.record_trial(
            "inserts", {"status": "discard", "core_metric": float(i % 97), "hypothesis": f"h{i}"}
        )
    insert_rate = count / (time.perf_counter() - start)
    ledger.close()

    print(f"\n[{label}] {n:,} trials")
    print(f"  import             {import_s:7.2f} s   ({n / import_s:,.0f} rows/s; target <= 5 s)")
    print(f"  export             {export_s:7.2f} s   ({n / export_s:,.0f} rows/s; target <= 3 s)")
    print(f"  prompt render      {ours_ms:7.2f} ms  median (target <= 20 ms)")
    print(f"  KNOWLEDGE.md only  {knowledge_ms:7.2f} ms  median")
    if fieldkit_ms is not None:
        print(
            f"  fieldkit render    {fieldkit_ms:7.1f} ms  median -> ours is {fieldkit_ms / ours_ms:,.0f}x faster (target >= 50x)"
        )
    print(f"  record_trial       {insert_rate:7,.0f} rows/s single writer (target >= 2,000)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--postgres", default=None, help="also run on this PostgreSQL URL (an empty database)")
    args = parser.parse_args()

    sweep = generate_sweep(args.trials)
    buffer = io.StringIO()
    write_trials(sweep, buffer)
    tsv_text = buffer.getvalue()

    fieldkit_ms = None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            from fieldkit.lineage import LineageStore
        except ImportError:
            print("fieldkit is not installed: no side-by-side render figure")
        else:
            (Path(tmp) / "results.tsv").write_text(tsv_text, encoding="utf-8")
            store = LineageStore(Path(tmp), lower_is_better=True)
            fieldkit_ms = median_ms(lambda: store.render_prompt("next", session_timestamp="t"), 5)
        bench_backend(str(Path(tmp) / "bench.db"), "SQLite", tsv_text, args.trials, fieldkit_ms)
    if args.postgres:
        bench_backend(args.postgres, "PostgreSQL", tsv_text, args.trials, fieldkit_ms)


if __name__ == "__main__":
    main()
