"""The real ``mlflow`` client logging into a real ``lineage serve``: nested runs, params,
metrics at their steps, tags, a finished and a failed run, the metric history and a search.

The client runs in its own interpreter: ``mlflow-skinny`` cannot join the project's venv
without changing the versions of packages there (3.17.2 pins ``importlib_metadata<10``).
Set ``LINEAGE_TEST_MLFLOW_PYTHON`` to a Python that imports ``mlflow`` (for example
``python3 -m venv /tmp/mlflow-venv && /tmp/mlflow-venv/bin/pip install mlflow-skinny==3.17.2``);
the test interpreter itself is used when it imports ``mlflow``; otherwise the test skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lineage.service import Ledger
from tests.servers import serving

SCRIPT = r"""
import json, sys
import mlflow
from mlflow import MlflowClient

mlflow.set_tracking_uri(sys.argv[1])
mlflow.set_experiment("Tiny Sweep")
out = {}
with mlflow.start_run(run_name="lr sweep") as parent:
    mlflow.log_param("grid", "lr")
    with mlflow.start_run(run_name="lr 0.01", nested=True) as child:
        mlflow.log_params({"lr": 0.01, "batch_size": 32})
        for step in range(5):
            mlflow.log_metric("core_metric", 1.0 - step / 10, step=step)
        mlflow.log_metrics({"loss": 0.5, "acc": 0.9}, step=4)
        mlflow.log_metric("loss", float("nan"), step=5)  # MLflow takes it; the ledger leaves it out and counts it
        mlflow.set_tag("mlflow.note.content", "a higher learning rate")
        out["child"] = child.info.run_id
    out["parent"] = parent.info.run_id
try:
    with mlflow.start_run(run_name="broken"):
        mlflow.log_metric("core_metric", 0.1, step=0)
        raise RuntimeError("boom")
except RuntimeError:
    pass
client = MlflowClient()
out["found"] = [e.experiment_id for e in client.search_experiments(filter_string="name = 'Tiny Sweep'")]
out["failed"] = mlflow.last_active_run().info.run_id
out["history"] = [[m.step, m.value] for m in client.get_metric_history(out["child"], "core_metric")]
out["searched"] = sorted(r.info.run_id for r in client.search_runs([parent.info.experiment_id]))
run = client.get_run(out["child"])
out["status"] = run.info.status
out["params"] = run.data.params
out["lineage_status"] = run.data.tags["lineage.status"]
try:
    client.log_param(out["child"], "lr", "0.5")
except mlflow.exceptions.MlflowException as error:
    out["changed_param"] = error.error_code
print(json.dumps(out))
"""


def _mlflow_python() -> str | None:
    found = os.environ.get("LINEAGE_TEST_MLFLOW_PYTHON")
    for python in (found, sys.executable) if found else (sys.executable,):
        if python and subprocess.run([python, "-c", "import mlflow"], capture_output=True).returncode == 0:
            return python
    return None


def test_the_mlflow_client_logs_trials_verdicts_telemetry_and_parents(tmp_path: Path) -> None:
    python = _mlflow_python()
    if python is None:
        pytest.skip("no Python that imports mlflow: set LINEAGE_TEST_MLFLOW_PYTHON (the module doc says how)")
    db = tmp_path / "ledger.db"
    with serving(tmp_path, "--db", str(db)) as base:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
        done = subprocess.run(
            [python, "-c", SCRIPT, base], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr[-4000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["parent"] == "tiny-sweep__000" and out["child"] == "tiny-sweep__001"
    assert out["history"] == [[0, 1.0], [1, 0.9], [2, 0.8], [3, 0.7], [4, 0.6]]
    assert out["searched"] == sorted([out["parent"], out["child"], out["failed"]])
    assert (out["status"], out["lineage_status"]) == ("FINISHED", "keep")
    assert out["params"] == {"lr": "0.01", "batch_size": "32"}
    assert out["changed_param"] == "INVALID_PARAMETER_VALUE"
    assert out["found"] == ["tiny-sweep"]

    ledger = Ledger.open(str(db))
    try:
        project = ledger.projects.project("tiny-sweep")
        assert project.title == "Tiny Sweep"
        parent, child, failed = ledger.trials.list_trials("tiny-sweep")
        assert (child.parent_exp, child.hypothesis, child.status.value, child.core_metric) == (
            "000",
            "a higher learning rate",
            "keep",
            0.6,
        )
        assert child.extra["config"] == {"lr": "0.01", "batch_size": "32"}
        assert child.extra["nonfinite_dropped"] == 1
        assert child.extra["tags"]["mlflow.note.content"] == "a higher learning rate"
        assert parent.extra["config"] == {"grid": "lr"}
        assert parent.status.value == "discard"  # it logged no core_metric: the ledger's rule
        assert failed.status.value == "crash" and failed.hypothesis == "broken"
        points = {(p["name"], p["step"], p["value"]) for p in ledger.telemetry.telemetry_points("tiny-sweep", "001")}
        assert points == {("core_metric", s, 1.0 - s / 10) for s in range(5)} | {("loss", 4, 0.5), ("acc", 4, 0.9)}
    finally:
        ledger.close()
