"""Knob memory benchmarks (issue 32). Run: ``.venv/bin/python bench/knob_memory.py
[--postgres URL] [--trials N]``.

In one run, on SQLite (and PostgreSQL when given):

* ``extraction``: the knob work of a record -- ``extract_changes`` and the patch digest of
  an autoresearch-like body (a ~2 KB git patch, a hypothesis, results-file columns) --
  against the whole ``Ledger.record_trial`` (with ``similar_prior``, as agents record), p50
  of each, and their ratio. Target <= 10%. Beside it, the record with the store's knob
  writes and look-ups switched off, for the wall-clock ratio.
* ``knob_history``: ``ledger.knobs.knob_history`` of a project of N trials (default
  100,000), every knob and one knob, p50. Target <= 20 ms.
* ``paraphrase recall``: "was this tried?" on concept paraphrases ("bigger batch",
  "deeper model") with the concept table and without it (the spelling table alone), recall
  at 5, and how many unrelated trials score at or above a true hit.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lineage import ml_concepts  # noqa: E402
from lineage.domain import FailureLabel, Trial  # noqa: E402
from lineage.knobs import extract_changes  # noqa: E402
from lineage.knobs.extract import patch_digest  # noqa: E402
from lineage.service import Ledger  # noqa: E402

KNOBS = ["MATRIX_LR", "EMBEDDING_LR", "SCALAR_LR", "WEIGHT_DECAY", "WARMUP_STEPS", "DEPTH", "TOTAL_BATCH_SIZE"]
CONTEXT = "".join(f" line_{i} = compute({i})  # unchanged context of train.py\n" for i in range(40))


def patch(knob: str, old: float, new: float) -> str:
    return (
        "diff --git a/train.py b/train.py\nindex 3f1c2e1..9ab0c7d 100644\n--- a/train.py\n+++ b/train.py\n"
        f"@@ -431,40 +431,40 @@ class GPTConfig:\n{CONTEXT}-{knob} = {old}\n+{knob} = {new}\n{CONTEXT}"
    )


def body(rng: random.Random, i: int) -> dict:  # type: ignore[type-arg]
    knob = rng.choice(KNOBS)
    old, new = round(rng.uniform(0.01, 0.1), 3), round(rng.uniform(0.01, 0.1), 3)
    return {
        "status": rng.choice(["keep", "discard", "discard", "crash"]),
        "core_metric": 1.0 - i * 1e-5,
        "hypothesis": f"change {knob} from {old} to {new} to see if it helps",
        "extra": {
            "commit": f"{rng.getrandbits(28):07x}",
            "lr": new,
            "memory_gb": 40.0,
            "_git": {"patch": patch(knob, old, new)},
        },
    }


def p50(times: list[float]) -> float:
    return statistics.median(times)


def bench_extraction(url: str) -> None:
    ledger = Ledger.open(url)
    slug = "knob-extraction"
    try:
        ledger.projects.delete_project(slug)
    except Exception:
        pass
    ledger.projects.create_project(slug, lower_is_better=True)
    rng = random.Random(3)
    bodies = [body(rng, i) for i in range(600)]
    for b in bodies[:100]:  # warm: the project, caches, the rapidfuzz import
        ledger.recording.record_trial(slug, b, similar_prior=True)
    extract, records, without = [], [], []
    store = ledger.store.knobs
    write, tried = store.write, store.tried
    for i, b in enumerate(bodies[100:]):
        t0 = time.perf_counter()
        extract_changes(b["hypothesis"], b["extra"], None, parent_columns={"lr": "0.05"})
        patch_digest(b["extra"]["_git"]["patch"])
        extract.append((time.perf_counter() - t0) * 1000)
        off = i % 2 == 1
        if off:  # the same record without the store's knob work (writes and look-ups)
            store.write = lambda *a, **k: None  # type: ignore[method-assign]
            store.tried = lambda *a, **k: ([], [])  # type: ignore[method-assign]
        t0 = time.perf_counter()
        ledger.recording.record_trial(slug, b, similar_prior=True)
        (without if off else records).append((time.perf_counter() - t0) * 1000)
        store.write, store.tried = write, tried  # type: ignore[method-assign]
    ledger.projects.delete_project(slug)
    ledger.close()
    share = p50(extract) / p50(records)
    print(f"  extraction p50 {p50(extract):.3f} ms of a record's {p50(records):.3f} ms -> {share:.1%} (target <= 10%)")
    print(
        f"  record with knob work p50 {p50(records):.3f} ms, without {p50(without):.3f} ms"
        f" -> {p50(records) / p50(without):.2f}x"
    )


def bench_history(url: str, n: int) -> None:
    ledger = Ledger.open(url)
    slug = "knob-history"
    try:
        ledger.projects.delete_project(slug)
    except Exception:
        pass
    ledger.projects.create_project(slug, lower_is_better=True)
    rng = random.Random(7)

    def trials():  # type: ignore[no-untyped-def]
        for i in range(n):
            b = body(rng, i)
            yield Trial(
                exp_id=f"{i:06d}",
                status=FailureLabel.parse(b["status"]),
                core_metric=None if b["status"] == "crash" else b["core_metric"],
                hypothesis=b["hypothesis"],
                extra={"_git": {"patch": b["extra"]["_git"]["patch"][:400]}},
            )

    t0 = time.perf_counter()
    ledger.tables.import_trials(slug, trials())
    imported = time.perf_counter() - t0
    every, one = [], []
    for _ in range(5):
        ledger.knobs.knob_history(slug)
    for _ in range(40):
        t0 = time.perf_counter()
        ledger.knobs.knob_history(slug)
        every.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        ledger.knobs.knob_history(slug, "MATRIX_LR")
        one.append((time.perf_counter() - t0) * 1000)
    ledger.projects.delete_project(slug)
    ledger.close()
    print(f"  import of {n:,} trials with patches: {imported:.1f} s ({n / imported:,.0f} rows/s)")
    print(f"  knob_history at {n:,} trials: every knob p50 {p50(every):.2f} ms, one knob p50 {p50(one):.2f} ms")


#: (stored hypothesis, notes) and concept paraphrases with the trials each must find
PAST = [
    ("TOTAL_BATCH_SIZE 2**19 -> 2**20", ""),  # 000
    ("double batch size (OOM)", ""),  # 001
    ("switch to 16 layers", ""),  # 002
    ("n_layer 12 -> 16", ""),  # 003
    ("n_embd 768 -> 1024", ""),  # 004
    ("d_model 512", "hidden size up"),  # 005
    ("n_head 6 -> 8", ""),  # 006
    ("max_iters 5000 -> 8000", ""),  # 007
    ("WARMDOWN_RATIO 0.5 -> 0.7", ""),  # 008
    ("add rotary position embedding", ""),  # 009
    ("num_experts 8", ""),  # 010
    ("lower MATRIX_LR to 0.03", ""),  # 011
    ("swap AdamW for Muon on matrices", ""),  # 012
    ("add dropout 0.1 to attention", ""),  # 013
    ("use the byte pair encoding tokenizer", ""),  # 014
    ("label smoothing 0.1", ""),  # 015
]
QUERIES = [
    ("bigger batch", {"000", "001"}),
    ("deeper model", {"002", "003"}),
    ("more layers", {"002", "003"}),
    ("wider model", {"004", "005"}),
    ("increase the width", {"004", "005"}),
    ("more attention heads", {"006"}),
    ("train for more iterations", {"007"}),
    ("longer cooldown", {"008"}),
    ("rotary embeddings", {"009"}),
    ("more experts", {"010"}),
]


def bench_recall(url: str) -> None:
    ledger = Ledger.open(url)
    slug = "knob-recall"
    try:
        ledger.projects.delete_project(slug)
    except Exception:
        pass
    ledger.projects.create_project(slug, lower_is_better=True)
    for hypothesis, notes in PAST:
        ledger.recording.record_trial(
            slug, {"status": "discard", "core_metric": 1.0, "hypothesis": hypothesis, "notes": notes}
        )

    def measure() -> tuple[float, int]:
        found = wanted_total = above = 0
        for query, wanted in QUERIES:
            hits = ledger.agent.find_similar(slug, query, 5)
            ids = {h.exp_id for h in hits}
            found += len(wanted & ids)
            wanted_total += len(wanted)
            true_scores = [h.score for h in hits if h.exp_id in wanted]
            if true_scores:
                above += sum(1 for h in hits if h.exp_id not in wanted and h.score >= min(true_scores))
        return found / wanted_total, above

    with_table = measure()
    saved = ml_concepts.CONCEPTS
    ml_concepts.CONCEPTS = {}  # the spelling table alone: before the concept table
    try:
        without = measure()
    finally:
        ml_concepts.CONCEPTS = saved
    ledger.projects.delete_project(slug)
    ledger.close()
    print(
        f"  paraphrase recall@5 on {len(QUERIES)} concept queries: spellings only {without[0]:.0%}"
        f" (unrelated at or above a hit: {without[1]}), with concepts {with_table[0]:.0%}"
        f" (unrelated at or above a hit: {with_table[1]})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", help="also run on this PostgreSQL URL")
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--parts", default="recall,extraction,history", help="which measures, comma-separated")
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    import os

    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        backends = [] if args.skip_sqlite else [("sqlite", f"sqlite:///{tmp}/knobs.db")]
        if args.postgres:
            backends.append(("postgres", args.postgres))
        parts = set(args.parts.split(","))
        for label, url in backends:
            print(f"[{label}]")
            if "recall" in parts:
                bench_recall(url)
            if "extraction" in parts:
                bench_extraction(url)
            if "history" in parts:
                bench_history(url, args.trials)


if __name__ == "__main__":
    main()
