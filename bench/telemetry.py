"""Telemetry client benchmarks (issue: trainer telemetry). Run: ``.venv/bin/python bench/telemetry.py``.

Against a real ``lineage serve`` process (``bench/api.py``'s ``Server``) on a fresh SQLite
file, all in one run so the figures are side by side:

* **client overhead per logged step**: the time ``LedgerClient.log`` + ``log_turns`` take
  in the training thread for one step's telemetry (the A²TGPO estimator's and the
  policy loss's 0-dim tensors, per-turn ``[T]`` tensors, the allocator's per-group
  entries: :data:`STEP_POINTS` points), median and p99 over ``--steps`` steps, with the
  ledger up, slow (a real proxy in front of it that holds every reply 500 ms) and down
  (nothing listening). Between logs the "training step" sleeps 2 ms (as torch kernels,
  it releases the GIL to the client's threads). Target: median < 1 ms in all three.
* **end-to-end sustained ingest**: ``--points`` points logged as fast as the loop can,
  until the ledger has all of them (``close`` returned, nothing pending), client ->
  spool -> HTTP -> SQLite; the clock includes the client's encoding, the spool's fsync'd
  commits and the server. Best of ``--rounds``. Target: >= 100,000 points/s.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api import Server, free_port, percentile  # noqa: E402
from tests.trainer_hooks.client.proxy import Fault, FaultyProxy  # noqa: E402
from trainer_hooks.client import LedgerClient  # noqa: E402

OVERHEAD_TARGET_MS = 1.0
INGEST_TARGET = 100_000.0
TURNS = 4
STEP_NAMES = (
    "ig_mean", "ig_std", "normed_ig_mean", "normed_ig_std", "clip_scale_mean", "clip_scale_std", "clip_scale_min",
    "clip_scale_max", "clip_scale_frac_low", "clip_scale_frac_high", "turn_adv_mean", "turn_adv_std", "pg_loss",
    "clipfrac_low", "clipfrac_high", "clipfrac_dual", "approx_kl", "ratio_mean", "ratio_min", "ratio_max",
    "ratio_std", "entropy_mean", "adv_mean", "adv_std", "adv_min", "adv_max", "reward_mean", "budget_global",
    "spent_global", "rollbacks", "alloc_mean", "alloc_min", "alloc_max",
    *(f"{kind}:group:{k}" for kind in ("score", "alloc", "cost") for k in range(4)),
)
TURN_NAMES = ("ig_mean", "ig_std", "clip_scale_mean", "clip_scale_std", "clip_scale_min", "clip_scale_max",
              "clip_scale_frac_low", "clip_scale_frac_high", "turn_adv_mean", "turn_adv_std", "turn_count")
STEP_POINTS = len(STEP_NAMES) + len(TURN_NAMES) * (TURNS + 1)


def step_telemetry(step: int) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """One step's telemetry as trainer_hooks hands it over: 0-dim and ``[T+1]`` tensors."""
    values = torch.rand(len(STEP_NAMES) + 1) + step
    per_turn = torch.rand(len(TURN_NAMES), TURNS + 1)
    return dict(zip(STEP_NAMES, values.unbind())), dict(zip(TURN_NAMES, per_turn.unbind()))


def overhead(url: str, spool: Path, steps: int) -> list[float]:
    """Seconds each step's log + log_turns took in the calling thread."""
    client = LedgerClient(url, None, "bench", spool_dir=spool, timeout=5.0, close_timeout=0.5, system_metrics=False)
    client.ensure_project()
    client.plan_trial(hypothesis="overhead")
    prepared = [step_telemetry(step) for step in range(steps)]
    costs = []
    for step, (scalars, per_turn) in enumerate(prepared):
        start = time.perf_counter()
        client.log(step, scalars)
        client.log_turns(step, per_turn)
        costs.append(time.perf_counter() - start)
        time.sleep(0.002)
    client.close(timeout=0.5)
    return costs


def ingest(url: str, spool: Path, points: int, per_step: int = 100) -> float:
    """Points/s from the first log call until the ledger holds every point."""
    client = LedgerClient(url, None, "bench", spool_dir=spool, close_timeout=300.0, system_metrics=False)
    client.ensure_project()
    client.plan_trial(hypothesis="ingest")
    assert client.flush(timeout=30)
    names = [f"m{k}" for k in range(per_step)]
    steps = points // per_step
    start = time.perf_counter()
    for step in range(steps):
        client.log(step, dict.fromkeys(names, step * 0.5))
    report = client.close()
    elapsed = time.perf_counter() - start
    if not report.delivered or report.points_sent != steps * per_step:
        raise SystemExit(f"ingest did not deliver everything: {report}")
    return steps * per_step / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="logged steps per overhead case")
    parser.add_argument("--points", type=int, default=1_000_000, help="points of the ingest run")
    parser.add_argument("--rounds", type=int, default=3, help="ingest rounds (best of)")
    args = parser.parse_args()
    logging.getLogger("trainer_hooks.client").setLevel(logging.ERROR)  # "not delivered yet" is the point when down
    with tempfile.TemporaryDirectory(prefix="lineage-bench-telemetry-") as tmp_name:
        tmp = Path(tmp_name)
        server = Server(str(tmp / "ledger.db"))
        slow = FaultyProxy(server.url, lambda number, method, path: Fault(delay=0.5))
        slow.start()
        try:
            cases = {"up": server.url, "slow (500 ms)": slow.url, "down": f"http://127.0.0.1:{free_port()}"}
            print(f"[client overhead per logged step: {STEP_POINTS} points (0-dim and [T] tensors), {args.steps} steps]")
            for label, url in cases.items():
                costs = overhead(url, tmp / f"spool-{label.split()[0]}", args.steps)
                median_ms = statistics.median(costs) * 1e3
                print(f"  server {label:<14} median {median_ms:6.3f} ms   p99 {percentile(costs, 0.99) * 1e3:6.3f} ms   "
                      f"target < {OVERHEAD_TARGET_MS} ms: {'met' if median_ms < OVERHEAD_TARGET_MS else 'NOT met'} "
                      f"({OVERHEAD_TARGET_MS / median_ms:.1f}x)")
            rates = [ingest(server.url, tmp / f"spool-ingest-{r}", args.points) for r in range(args.rounds)]
            best = max(rates)
            print(f"\n[end-to-end ingest, client -> spool -> HTTP -> SQLite, {args.points:,} points, best of {args.rounds}]")
            print(f"  {best:12,.0f} points/s (rounds: {', '.join(f'{r:,.0f}' for r in rates)})   "
                  f"target >= {INGEST_TARGET:,.0f}: {'met' if best >= INGEST_TARGET else 'NOT met'} ({best / INGEST_TARGET:.2f}x)")
        finally:
            slow.stop()
            server.stop()


if __name__ == "__main__":
    main()
