"""Agent research memory benchmarks (issue 11). Run: ``.venv/bin/python bench/agent_memory.py
[--postgres URL]``.

Measures, on a generated 100,000-trial project (varied hypotheses built from a research
vocabulary, see :func:`generate_ideas`):

* ``similar``: ``Ledger.find_similar`` p50 and p95 over a fixed set of queries (some
  repeat a stored idea, some paraphrase one, some match nothing). Target p50 <= 30 ms.
* recording with ``similar_prior`` against recording without it, side by side in one
  run, alternating, on the same project. Target ratio <= 2x, measured where an agent
  records: an HTTP create (``POST .../trials``, one keep-alive client, a real uvicorn
  server in a thread of the bench; the bench switches the option that the route passes
  to the ledger, so both arms share the server, the connection pool and the project).
  The service-level ratio (``Ledger.record_trial`` alone, ~0.3 ms on SQLite) is printed
  beside it: there the lookup's fixed cost (two or three SQL statements and the ranking
  of its shortlist, PRIOR_RECENT + SKETCH_BANDS x PRIOR_PER_BAND trials at most, in Python, ~0.6 ms) weighs more than a whole insert.
  The 1,000-trial figure is taken after the 100,000-trial project was deleted.
* TSV-free bulk import of the project (``Ledger.import_trials``): the search index is
  kept in step inside the import; the figure is printed for comparison with
  ``bench/ledger.py`` runs before migration 0003.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

# the repository first: bench/api.py must not shadow the api package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lineage.domain import FailureLabel, Trial  # noqa: E402
from lineage.service import Ledger  # noqa: E402

ACTIONS = ["increase", "decrease", "halve", "double", "remove", "add", "tune", "swap", "freeze", "anneal"]
KNOBS = [
    "learning rate",
    "warmup steps",
    "batch size",
    "clip range",
    "entropy bonus",
    "kl penalty",
    "value head",
    "dropout",
    "weight decay",
    "turn-group normalization",
    "advantage whitening",
    "reward scaling",
    "gradient clipping",
    "rollout length",
    "gae lambda",
    "discount gamma",
    "adam beta2",
    "label smoothing",
    "context length",
    "sampling temperature",
    "top-p",
    "lora rank",
    "critic width",
    "policy depth",
]
TAILS = [
    "with cosine decay",
    "per turn",
    "for deep turns",
    "on the critic only",
    "after step 2000",
    "with α=0.3",
    "in the first epoch",
    "and re-tune the rest",
    "to fix instability",
    "",
]
QUERIES = [
    "turn group norm α = 0.3",  # a reordered stored idea
    "increase the learning rate with cosine decay",
    "halve kl penalty per turn",
    "weight decay on the critic",
    "anneal sampling temperature after step 2000",
    "swap tokenizer for byte level bpe",  # nothing like it was tried
    "double lora rank and re-tune",
    "entropy",
]
STATUSES = [FailureLabel.DISCARD, FailureLabel.DISCARD, FailureLabel.DISCARD, FailureLabel.CRASH, FailureLabel.KEEP]


def generate_ideas(n: int, seed: int = 11) -> list[Trial]:
    rng = random.Random(seed)
    trials = []
    best = 2.0
    for i in range(n):
        status = FailureLabel.BASELINE if i == 0 else rng.choice(STATUSES)
        metric = None if status is FailureLabel.CRASH else round(best + rng.gauss(0, 0.01), 6)
        if status is FailureLabel.KEEP and metric is not None:
            best = metric = min(metric, best - 0.0001)
        value = rng.choice(["0.1", "0.3", "3e-4", "512", "2x", "1/2"])
        hypothesis = f"{rng.choice(ACTIONS)} {rng.choice(KNOBS)} to {value} {rng.choice(TAILS)}".strip()
        trials.append(
            Trial(
                exp_id=str(i).zfill(6),
                status=status,
                core_metric=metric,
                hypothesis=hypothesis,
                notes=f"run {i} on node {rng.randint(1, 64)}",
                seq=i,
            )
        )
    return trials


def percentile(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_backend(url: str, label: str, n: int) -> None:
    ledger = Ledger.open(url)
    for slug in ("memory", "memory-records"):
        try:
            ledger.projects.delete_project(slug)
        except Exception:
            pass
    ledger.projects.create_project("memory", lower_is_better=True)
    ideas = generate_ideas(n)
    start = time.perf_counter()
    ledger.tables.import_trials("memory", iter(ideas))
    import_s = time.perf_counter() - start

    for query in QUERIES:  # warm the caches
        ledger.agent.find_similar("memory", query)
    times = []
    for _ in range(15):
        for query in QUERIES:
            t0 = time.perf_counter()
            ledger.agent.find_similar("memory", query)
            times.append((time.perf_counter() - t0) * 1000)

    big = record_pair(ledger, "memory")
    big_http = http_record_pair(url, "memory")
    ledger.projects.delete_project("memory")
    ledger.projects.create_project("memory-records", lower_is_better=True)
    ledger.tables.import_trials("memory-records", iter(generate_ideas(1_000)))
    small = record_pair(ledger, "memory-records")
    ledger.projects.delete_project("memory-records")
    ledger.close()

    print(f"\n[{label}] {n:,} trials")
    print(f"  import (index kept in step) {import_s:7.2f} s   ({n / import_s:,.0f} rows/s)")
    print(
        f"  similar                     p50 {statistics.median(times):6.2f} ms  p95 {percentile(times, 0.95):6.2f} ms"
        "  (target p50 <= 30 ms)"
    )
    for size, (p50_with, p50_without), level in (
        (1_000, small, "service"),
        (n, big, "service"),
        (n, big_http, "HTTP   "),
    ):
        print(
            f"  record ({level}) on {size:>7,} trials: with similar_prior p50 {p50_with:6.2f} ms, without"
            f" {p50_without:6.2f} ms -> ratio {p50_with / p50_without:.2f}x (target <= 2x)"
        )


def record_pair(ledger: Ledger, slug: str, count: int = 400) -> tuple[float, float]:
    """Median ms of ``record_trial`` with and without ``similar_prior``, alternating."""
    rng = random.Random(5)
    with_ms, without_ms = [], []
    for i in range(count):
        fields = {
            "status": "discard",
            "core_metric": 2.0,
            "hypothesis": f"{rng.choice(ACTIONS)} {rng.choice(KNOBS)} {rng.choice(TAILS)}",
        }
        prior = i % 2 == 0
        t0 = time.perf_counter()
        ledger.recording.record_trial(slug, fields, similar_prior=prior)
        (with_ms if prior else without_ms).append((time.perf_counter() - t0) * 1000)
    return statistics.median(with_ms), statistics.median(without_ms)


def http_record_pair(url: str, slug: str, count: int = 400) -> tuple[float, float]:
    """Median ms of an HTTP create (``POST .../trials``, one keep-alive client) with and
    without ``similar_prior``, alternating, on one real uvicorn server (in a thread of this
    process, one database connection pool): the bench switches the option that the route
    passes to the ledger before each request."""
    import http.client
    import json
    import socket
    import threading

    import uvicorn

    from api.app import create_app
    from api.settings import Settings

    app = create_app(Settings(database_url=url, log_level="warning"))
    ledger = app.state.ledger
    prior = {"on": True}

    def record_switched(*args, **kwargs):  # type: ignore[no-untyped-def]
        return Ledger.record_trial(ledger, *args, **{**kwargs, "similar_prior": prior["on"]})

    ledger.record_trial = record_switched
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    rng = random.Random(6)
    times: tuple[list[float], list[float]] = ([], [])
    conn = http.client.HTTPConnection("127.0.0.1", port)
    try:
        for i in range(count + 20):
            body = {
                "status": "discard",
                "core_metric": 2.0,
                "hypothesis": f"{rng.choice(ACTIONS)} {rng.choice(KNOBS)} {rng.choice(TAILS)}",
            }
            prior["on"] = i % 2 == 0
            t0 = time.perf_counter()
            conn.request(
                "POST",
                f"/api/v1/projects/{slug}/trials",
                body=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            response.read()
            assert response.status == 201, response.status
            if i >= 20:  # the first ones warm the server up
                times[i % 2].append((time.perf_counter() - t0) * 1000)
    finally:
        conn.close()
        server.should_exit = True
        thread.join(timeout=15)
        ledger.close()
    return statistics.median(times[0]), statistics.median(times[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--postgres", default=None, help="also run on this PostgreSQL URL (an empty database)")
    parser.add_argument("--progress-only", action="store_true", help="only the summary/guardrail/webhook figures")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.progress_only:
            bench_backend(str(Path(tmp) / "memory.db"), "SQLite", args.trials)
        bench_progress(str(Path(tmp) / "progress.db"), "SQLite", args.trials)
    if args.postgres:
        if not args.progress_only:
            bench_backend(args.postgres, "PostgreSQL", args.trials)
        bench_progress(args.postgres, "PostgreSQL", args.trials)


# -- progress summary, guardrails and webhooks (helper-summary's part of issue 11) ------------
#
# * ``summary``: ``Ledger.summary`` p50 / p95 on the 100,000-trial project (every trial with a
#   total_s). Target p50 <= 20 ms.
# * recording on a project with guardrails (all three limits) and a webhook subscribed to
#   every event, against recording on an identical project without them, alternating in one
#   run: what the outbox and the trip check add to a write (delivery itself is never part
#   of a write).


def bench_progress(url: str, label: str, n: int) -> None:
    ledger = Ledger.open(url)
    for slug in ("progress", "progress-plain", "progress-guarded"):
        try:
            ledger.projects.delete_project(slug)
        except Exception:
            pass
    rng = random.Random(3)
    ideas = generate_ideas(n)
    for trial in ideas:
        trial.total_s = rng.uniform(600, 30_000)
    ledger.projects.create_project("progress", lower_is_better=True)
    ledger.tables.import_trials("progress", iter(ideas))
    for _ in range(5):
        ledger.agent.summary("progress")
    times = []
    for _ in range(200):
        t0 = time.perf_counter()
        ledger.agent.summary("progress")
        times.append((time.perf_counter() - t0) * 1000)
    ledger.projects.delete_project("progress")

    for slug in ("progress-plain", "progress-guarded"):
        ledger.projects.create_project(slug, lower_is_better=True)
        ledger.tables.import_trials(slug, iter(generate_ideas(1_000)))
    ledger.agent.set_guardrails(
        "progress-guarded", {"max_crash_streak": 10_000, "max_trials_without_improvement": 10_000, "budget_hours": 1e6}
    )
    ledger.agent.add_hook("progress-guarded", "http://127.0.0.1:9/bench")  # never delivered here
    plain, guarded = [], []
    for i in range(600):
        fields = {
            "status": rng.choice(["discard", "crash", "keep"]),
            "core_metric": rng.uniform(1.9, 2.1),
            "total_s": 100.0,
            "hypothesis": "bench",
        }
        slug = "progress-guarded" if i % 2 else "progress-plain"
        t0 = time.perf_counter()
        ledger.recording.record_trial(slug, fields)
        (guarded if i % 2 else plain).append((time.perf_counter() - t0) * 1000)
    for slug in ("progress-plain", "progress-guarded"):
        ledger.projects.delete_project(slug)
    ledger.close()
    p50_plain, p50_guarded = statistics.median(plain), statistics.median(guarded)
    print(f"\n[{label}] progress summary, guardrails, webhooks")
    print(
        f"  summary on {n:,} trials      p50 {statistics.median(times):6.2f} ms  p95 {percentile(times, 0.95):6.2f} ms"
        "  (target p50 <= 20 ms)"
    )
    print(
        f"  record with guardrails + hook p50 {p50_guarded:6.2f} ms, without {p50_plain:6.2f} ms"
        f" -> ratio {p50_guarded / p50_plain:.2f}x"
    )


if __name__ == "__main__":
    main()
