"""The MLflow client logging a training run into the ledger (``lineage serve``'s MLflow
endpoint) against the same client logging into MLflow's own tracking server.

    .venv/bin/python bench/mlflow_front.py [--steps 500] [--metrics 8] [--rounds 2]

Each side is one server process on loopback with a SQLite file of its own (``lineage
serve --workers 1``; ``mlflow server --workers 1 --backend-store-uri sqlite:///...``). One
client process per side and round runs the same script: ``set_experiment``, ``start_run``,
``log_params`` (20), then ``--steps`` synchronous ``mlflow.log_metrics`` calls of
``--metrics`` values each (what ``report_to="mlflow"`` does per logging step), then
``end_run``. Printed per side: steps per second, the p50 and p95 of one ``log_metrics``
call, and the server's CPU seconds per step (the server and its worker processes); then
the ratio (goal: the ledger at least 10x MLflow's steps per second). Rounds alternate the
order of the sides, after a warm-up run on each (``--warmup`` steps, not measured: a
server's first requests pay for what it opens lazily); the best round of each side is
compared (the least disturbed on a shared machine). The load average is printed before and after: the figures only mean
something on an idle machine. Every side's stored points are counted afterwards.

MLflow's server is never a project dependency. It runs from a venv of its own:
``--mlflow-venv`` (default ``$LINEAGE_BENCH_MLFLOW_VENV`` or
``~/.cache/lineage-bench/mlflow-server-3.17.2``), made with
``python3 -m venv DIR && DIR/bin/pip install mlflow==3.17.2`` (the full package:
``mlflow-skinny`` has no server). Its Python runs the client on both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.servers import ROOT, free_port, stop  # noqa: E402

DEFAULT_VENV = Path.home() / ".cache" / "lineage-bench" / "mlflow-server-3.17.2"

CLIENT = r"""
import json, sys, time
import mlflow

url, steps, width, experiment = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
mlflow.set_tracking_uri(url)
mlflow.set_experiment(experiment)
started = time.perf_counter()
with mlflow.start_run(run_name="bench") as run:
    mlflow.log_params({f"p{i}": i * 0.5 for i in range(20)})
    calls = []
    for step in range(steps):
        values = {f"m{i}": 1.0 / (step + i + 1) for i in range(width)}
        t0 = time.perf_counter()
        mlflow.log_metrics(values, step=step)
        calls.append(time.perf_counter() - t0)
total = time.perf_counter() - started
calls.sort()
print(json.dumps({
    "run_id": run.info.run_id,
    "steps_per_s": steps / sum(calls),
    "p50_ms": calls[len(calls) // 2] * 1e3,
    "p95_ms": calls[int(len(calls) * 0.95)] * 1e3,
    "run_s": total,
}))
"""


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants (MLflow's server runs workers)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    family = {pid}
    grew = True
    while grew:
        grew = False
        for child, parent in parents.items():
            if parent in family and child not in family:
                family.add(child)
                grew = True
    return sum(times.get(p, 0.0) for p in family)


def _wait(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    raise SystemExit(f"the server did not answer {url} within {timeout:g} s:\n{log.read_text()[-3000:]}")


def start_ledger(workdir: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LINEAGE_DATABASE_URL", None)
    log = workdir / "ledger.log"
    command = [sys.executable, "-m", "api.cli", "serve", "--port", str(port), "--log-level", "warning"]
    command += ["--workers", "1", "--db", str(workdir / "ledger.db")]
    proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    _wait(f"{url}/health", proc, log)
    return url, proc


def start_mlflow(workdir: Path, venv: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    log = workdir / "mlflow.log"
    command = [str(venv / "bin" / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    command += ["--backend-store-uri", f"sqlite:///{workdir / 'mlflow.db'}"]
    command += ["--default-artifact-root", str(workdir / "artifacts")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    _wait(f"{url}/health", proc, log)
    return url, proc


def run_client(python: Path, url: str, steps: int, width: int, experiment: str, pid: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    before = _tree_cpu(pid)
    done = subprocess.run(
        [str(python), "-c", CLIENT, url, str(steps), str(width), experiment],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(f"the MLflow client failed against {url}:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["server_cpu_ms_per_step"] = (_tree_cpu(pid) - before) / steps * 1e3
    return result


def stored_points(python: Path, url: str, run_id: str, width: int) -> int:
    """Points the server holds for the run, read back with the MLflow client."""
    code = (
        "import sys, mlflow; c = mlflow.MlflowClient(sys.argv[1]); "
        "print(sum(len(c.get_metric_history(sys.argv[2], f'm{i}')) for i in range(int(sys.argv[3]))))"
    )
    done = subprocess.run([str(python), "-c", code, url, run_id, str(width)], capture_output=True, text=True)
    return int(done.stdout.strip() or -1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--metrics", type=int, default=8, help="values per log_metrics call")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=30, help="steps logged to each server first, not measured")
    parser.add_argument(
        "--mlflow-venv", type=Path, default=Path(os.environ.get("LINEAGE_BENCH_MLFLOW_VENV", DEFAULT_VENV))
    )
    args = parser.parse_args()
    python = args.mlflow_venv / "bin" / "python"
    if not (args.mlflow_venv / "bin" / "mlflow").exists():
        raise SystemExit(f"no MLflow server in {args.mlflow_venv}: the module doc says how to make one")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="mlflow-front-") as tmp:
        work = Path(tmp)
        (work / "ledger").mkdir()
        (work / "mlflow").mkdir()
        ledger_url, ledger_proc = start_ledger(work / "ledger")
        mlflow_url, mlflow_proc = start_mlflow(work / "mlflow", args.mlflow_venv)
        sides = {"ledger": (ledger_url, ledger_proc), "mlflow": (mlflow_url, mlflow_proc)}
        results: dict[str, list[dict[str, Any]]] = {"ledger": [], "mlflow": []}
        try:
            for url, proc in sides.values():  # first requests import and open what a server opens lazily
                run_client(python, url, args.warmup, args.metrics, "warmup", proc.pid)
            for round_ in range(args.rounds):
                order = ["ledger", "mlflow"] if round_ % 2 == 0 else ["mlflow", "ledger"]
                for side in order:
                    url, proc = sides[side]
                    found = run_client(python, url, args.steps, args.metrics, f"bench-{round_}", proc.pid)
                    found["stored"] = stored_points(python, url, found["run_id"], args.metrics)
                    results[side].append(found)
                    print(
                        f"round {round_} {side:>6}: {found['steps_per_s']:8.1f} steps/s  "
                        f"p50 {found['p50_ms']:6.2f} ms  p95 {found['p95_ms']:6.2f} ms  "
                        f"server {found['server_cpu_ms_per_step']:6.2f} CPU-ms/step  "
                        f"stored {found['stored']}/{args.steps * args.metrics} points"
                    )
        finally:
            stop(ledger_proc)
            stop(mlflow_proc)
    best = {side: max(runs, key=lambda r: r["steps_per_s"]) for side, runs in results.items()}
    ratio = best["ledger"]["steps_per_s"] / best["mlflow"]["steps_per_s"]
    p95 = best["mlflow"]["p95_ms"] / best["ledger"]["p95_ms"]
    print(
        f"best: ledger {best['ledger']['steps_per_s']:.1f} steps/s (p95 {best['ledger']['p95_ms']:.2f} ms), "
        f"MLflow {best['mlflow']['steps_per_s']:.1f} steps/s (p95 {best['mlflow']['p95_ms']:.2f} ms)"
    )
    print(
        f"ratio: {ratio:.1f}x steps/s, {p95:.1f}x lower p95 (goal: >= 10x), {args.steps} steps x {args.metrics} metrics"
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
