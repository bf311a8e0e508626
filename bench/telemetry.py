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
* **wandb.log of 10 scalars** (``trainer_hooks.wandb``): the time one call takes in the
  training thread, median and p99 over ``--wandb-calls`` calls (1 ms of "training" between
  calls), with the ledger up, slow and down, beside Hugging Face trackio's ``log`` timed
  the same way in the same run. trackio is never our dependency: it runs in its own
  virtual environment (``--trackio-python``, default ``$TRACKIO_PYTHON`` or
  ``/tmp/peers/trackio/bin/python``; make it with ``python3 -m venv /tmp/peers/trackio &&
  /tmp/peers/trackio/bin/python -m pip install trackio``), in a process of its own, logging to a
  temporary folder. Target: median <= 50 us in all three cases, and no slower than trackio.
* **system metrics sampler**: the CPU time of one sample (measured on the sampling thread's
  own clock, so other processes on a shared machine do not count) as a share of its
  interval, which is the share it takes of any training step, e.g. of a 100 ms one. (A
  wall-clock comparison of training steps with and without the sampler was tried: on a
  shared 2-core machine its noise is a hundred times the sampler's cost.)
  Target: <= 0.5% of a 100 ms step at the default interval.

* **end to end against trackio** (:mod:`bench.telemetry_e2e`): one run logging 10 scalars a
  step for 100,000 steps through the client with its defaults until the server acknowledged
  every point, the server alone on pre-encoded bodies, and trackio's in-process ``log`` of
  the same dicts until its SQLite file holds them; wall and per-CPU-second rates, the load
  average beside each, the ratio, SQLite and (``--postgres URL``) PostgreSQL.
  Target: >= 300,000 points/s and >= 1.8x trackio.

The load average is printed at the start and the end: the machine is shared, and the
figures are only as quiet as it was.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import telemetry_e2e  # noqa: E402
from bench.api import Server, free_port, percentile  # noqa: E402
from tests.trainer_hooks.client.proxy import Fault, FaultyProxy  # noqa: E402
from trainer_hooks.client import LedgerClient  # noqa: E402
from trainer_hooks.client.sysmetrics import DEFAULT_BUDGET, DEFAULT_INTERVAL_S, SystemSampler  # noqa: E402

OVERHEAD_TARGET_MS = 1.0
INGEST_TARGET = 100_000.0
WANDB_TARGET_US = 50.0
WANDB_SCALARS = 10
SAMPLER_TARGET = 0.005
STEP_S = 0.1  # the training step the sampler's share is quoted for
TURNS = 4
STEP_NAMES = (
    "ig_mean",
    "ig_std",
    "normed_ig_mean",
    "normed_ig_std",
    "clip_scale_mean",
    "clip_scale_std",
    "clip_scale_min",
    "clip_scale_max",
    "clip_scale_frac_low",
    "clip_scale_frac_high",
    "turn_adv_mean",
    "turn_adv_std",
    "pg_loss",
    "clipfrac_low",
    "clipfrac_high",
    "clipfrac_dual",
    "approx_kl",
    "ratio_mean",
    "ratio_min",
    "ratio_max",
    "ratio_std",
    "entropy_mean",
    "adv_mean",
    "adv_std",
    "adv_min",
    "adv_max",
    "reward_mean",
    "budget_global",
    "spent_global",
    "rollbacks",
    "alloc_mean",
    "alloc_min",
    "alloc_max",
    *(f"{kind}:group:{k}" for kind in ("score", "alloc", "cost") for k in range(4)),
)
TURN_NAMES = (
    "ig_mean",
    "ig_std",
    "clip_scale_mean",
    "clip_scale_std",
    "clip_scale_min",
    "clip_scale_max",
    "clip_scale_frac_low",
    "clip_scale_frac_high",
    "turn_adv_mean",
    "turn_adv_std",
    "turn_count",
)
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


# -- wandb.log against trackio's log -------------------------------------------------------------

#: the timing loop both sides run: ``LOG`` is their log function, ``calls`` the count
TIMED_LOOP = """
import json, statistics, sys, time
payloads = [{f"metric_{k}": step * 0.001 + k for k in range(%(scalars)d)} for step in range(%(calls)d)]
costs = []
for payload in payloads:
    start = time.perf_counter()
    LOG(payload)
    costs.append(time.perf_counter() - start)
    time.sleep(0.001)
"""

TRACKIO_SCRIPT = """
import json, os, statistics, sys, time
import trackio
trackio.init(project="bench-trackio", name="log-cost")
LOG = trackio.log
%(loop)s
trackio.finish()
print(json.dumps({"version": trackio.__version__, "costs": costs}))
"""


def wandb_log_costs(url: str, spool: Path, calls: int) -> list[float]:
    """Seconds each ``wandb.log`` of :data:`WANDB_SCALARS` scalars took (the shared loop)."""
    import trainer_hooks.wandb as wandb

    os.environ["LINEAGE_CLOSE_TIMEOUT"] = "0.5"
    wandb.init(project="bench-wandb", url=url, spool_dir=spool, system_metrics=False)
    scope = {"LOG": wandb.log}
    exec(TIMED_LOOP % {"scalars": WANDB_SCALARS, "calls": calls}, scope)  # noqa: S102 - our own text
    wandb.finish()
    return scope["costs"]


def trackio_log_costs(python: str, workdir: Path, calls: int) -> dict[str, Any] | str:
    """The same loop with trackio's ``log`` in trackio's own environment (``version``,
    ``costs``); or why not."""
    if not Path(python).exists():
        return f"no trackio environment at {python}"
    script = TRACKIO_SCRIPT % {"loop": TIMED_LOOP % {"scalars": WANDB_SCALARS, "calls": calls}}
    env = {**os.environ, "TRACKIO_DIR": str(workdir / "trackio"), "HF_HOME": str(workdir / "hf")}
    done = subprocess.run([python, "-c", script], cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return f"trackio failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}"
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the system metrics sampler ------------------------------------------------------------------


def sampler_cpu_per_sample(samples: int) -> float:
    """Mean CPU seconds of one sample on this machine."""
    sampler = SystemSampler(lambda values: None)
    sampler.sample()  # imports and start-up: once per run, not per sample
    spent = []
    for _ in range(samples):
        start = time.thread_time()
        sampler.sample()
        spent.append(time.thread_time() - start)
        time.sleep(0.001)
    return statistics.mean(spent)


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" ({os.cpu_count()} CPUs)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="logged steps per overhead case")
    parser.add_argument("--points", type=int, default=1_000_000, help="points of the ingest run")
    parser.add_argument("--rounds", type=int, default=3, help="ingest rounds (best of)")
    parser.add_argument("--wandb-calls", type=int, default=3000, help="wandb.log / trackio.log calls per case")
    parser.add_argument(
        "--trackio-python",
        default=os.environ.get("TRACKIO_PYTHON") or "/tmp/peers/trackio/bin/python",
        help="the python of a virtual environment with trackio installed",
    )
    parser.add_argument("--sampler-samples", type=int, default=300, help="samples timed for the sampler's cost")
    parser.add_argument("--only", choices=["client", "wandb", "sampler", "e2e"], default=None, help="run one part only")
    telemetry_e2e.add_arguments(parser)
    args = parser.parse_args()
    if args.only in (None, "e2e"):
        telemetry_e2e.run(args)
        if args.only == "e2e":
            return
    print(f"[{load()} at the start]")
    logging.getLogger("trainer_hooks.client").setLevel(logging.ERROR)  # "not delivered yet" is the point when down
    with tempfile.TemporaryDirectory(prefix="lineage-bench-telemetry-") as tmp_name:
        tmp = Path(tmp_name)
        server = Server(str(tmp / "ledger.db"))
        slow = FaultyProxy(server.url, lambda number, method, path: Fault(delay=0.5))
        slow.start()
        try:
            cases = {"up": server.url, "slow (500 ms)": slow.url, "down": f"http://127.0.0.1:{free_port()}"}
            if args.only in (None, "wandb"):
                wandb_vs_trackio(cases, tmp, args)
            if args.only in (None, "sampler"):
                sampler_cost(args)
            if args.only not in (None, "client"):
                return
            print(
                f"\n[client overhead per logged step: {STEP_POINTS} points (0-dim and [T] tensors), {args.steps} steps]"
            )
            for label, url in cases.items():
                costs = overhead(url, tmp / f"spool-{label.split()[0]}", args.steps)
                median_ms = statistics.median(costs) * 1e3
                print(
                    f"  server {label:<14} median {median_ms:6.3f} ms   p99 {percentile(costs, 0.99) * 1e3:6.3f} ms   "
                    f"target < {OVERHEAD_TARGET_MS} ms: {'met' if median_ms < OVERHEAD_TARGET_MS else 'NOT met'} "
                    f"({OVERHEAD_TARGET_MS / median_ms:.1f}x)"
                )
            rates = [ingest(server.url, tmp / f"spool-ingest-{r}", args.points) for r in range(args.rounds)]
            best = max(rates)
            print(
                f"\n[end-to-end ingest, client -> spool -> HTTP -> SQLite, {args.points:,} points, best of {args.rounds}]"
            )
            print(
                f"  {best:12,.0f} points/s (rounds: {', '.join(f'{r:,.0f}' for r in rates)})   "
                f"target >= {INGEST_TARGET:,.0f}: {'met' if best >= INGEST_TARGET else 'NOT met'} ({best / INGEST_TARGET:.2f}x)"
            )
        finally:
            slow.stop()
            server.stop()
            print(f"\n[{load()} at the end]")


def wandb_vs_trackio(cases: dict[str, str], tmp: Path, args: argparse.Namespace) -> None:
    print(
        f"\n[wandb.log of {WANDB_SCALARS} scalars: per call in the training thread, {args.wandb_calls} calls, "
        "1 ms between calls]"
    )
    trackio = trackio_log_costs(args.trackio_python, tmp, args.wandb_calls)
    trackio_median = statistics.median(trackio["costs"]) * 1e6 if isinstance(trackio, dict) else None
    for label, url in cases.items():
        costs = wandb_log_costs(url, tmp / f"spool-wandb-{label.split()[0]}", args.wandb_calls)
        median_us = statistics.median(costs) * 1e6
        versus = f"   {trackio_median / median_us:.1f}x faster than trackio" if trackio_median else ""
        print(
            f"  trainer_hooks.wandb, server {label:<14} median {median_us:6.1f} us   p99 "
            f"{percentile(costs, 0.99) * 1e6:7.1f} us   target <= {WANDB_TARGET_US:g} us: "
            f"{'met' if median_us <= WANDB_TARGET_US else 'NOT met'}{versus}"
        )
    if isinstance(trackio, dict):
        print(
            f"  trackio {trackio['version']} log (in process, local SQLite)  median {trackio_median:6.1f} us   p99 "
            f"{percentile(trackio['costs'], 0.99) * 1e6:7.1f} us"
        )
    else:
        print(f"  trackio: not measured ({trackio})")


def sampler_cost(args: argparse.Namespace) -> None:
    cpu = sampler_cpu_per_sample(args.sampler_samples)
    share = cpu / DEFAULT_INTERVAL_S
    print(f"\n[system metrics sampler: {args.sampler_samples} samples]")
    print(
        f"  one sample: {cpu * 1e6:7.1f} us of CPU; every {DEFAULT_INTERVAL_S:g} s that is {share * 100:.4f}% of "
        f"any step (a 100 ms step: {share * STEP_S * 1e6:.2f} us)   target <= {SAMPLER_TARGET * 100:g}%: "
        f"{'met' if share <= SAMPLER_TARGET else 'NOT met'} ({SAMPLER_TARGET / share:,.0f}x); the sampler backs "
        f"off whenever a sample exceeds {DEFAULT_BUDGET * 100:g}% of its interval"
    )


if __name__ == "__main__":
    main()
