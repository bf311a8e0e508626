"""``Accelerator(log_with="lineage")`` (``trainer_hooks.integrations.accelerate``) with a real
accelerate ``Accelerator`` against a real ledger: the project, the trial's config, its
telemetry at the logged steps and the ledger's verdict on the metric's last value; the
instance form; a script that raises before ``end_training``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from lineage.service import Ledger
from tests.api.conftest import API
from tests.servers import ROOT

pytest.importorskip("torch")
pytest.importorskip("accelerate")

pytestmark = pytest.mark.slow


def _trials(url: str, project: str) -> list[dict[str, Any]]:
    return httpx.get(f"{url}{API}/projects/{project}/trials", timeout=60).json()["items"]


def _points(db: str, project: str, exp_id: str) -> set[tuple[str, int, float]]:
    ledger = Ledger.open(db)
    try:
        return {(p["name"], p["step"], p["value"]) for p in ledger.telemetry.telemetry_points(project, exp_id)}
    finally:
        ledger.close()


def test_log_with_lineage_records_config_telemetry_and_the_verdict(serve, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from accelerate import Accelerator

    import trainer_hooks.integrations.accelerate as integration

    db = str(tmp_path / "ledger.db")
    server = serve(db)
    monkeypatch.setenv("LINEAGE_URL", server.url)
    monkeypatch.setenv("LINEAGE_SPOOL", str(tmp_path / "spool"))
    monkeypatch.setenv("LINEAGE_SYSTEM_METRICS", "0")
    accuracies = [0.5, 0.7, 0.6]
    for run, shift in enumerate((0.0, 0.1)):  # the second run's last accuracy is better: kept
        accelerator = Accelerator(log_with="lineage", cpu=True)
        accelerator.init_trackers(
            "Acc Sweep",
            config={"lr": 0.01 * (run + 1), "layers": 2, "schedule": {"warmup": 10}, "path": tmp_path},
            init_kwargs={"lineage": {"metric": "eval/acc", "lower_is_better": False, "hypothesis": f"run {run}"}},
        )
        for step, acc in enumerate(accuracies):
            accelerator.log({"eval/acc": acc + shift, "train/loss": 1.0 / (step + 1), "note": "text"}, step=step * 10)
        accelerator.log({"train/loss": 0.1})  # no step: the one after the last
        accelerator.end_training()
        tracker = accelerator.get_tracker("lineage", unwrap=False)
        assert isinstance(tracker, integration.LedgerTracker)
        assert tracker.outcome is not None and tracker.outcome.status == "keep"

    first, second = _trials(server.url, "acc-sweep")
    assert (first["hypothesis"], first["status"], first["core_metric"]) == ("run 0", "keep", 0.6)
    assert (second["status"], second["core_metric"]) == ("keep", pytest.approx(0.7))
    assert second["extra"]["config"] == {"lr": 0.02, "layers": 2, "schedule": {"warmup": 10}, "path": str(tmp_path)}
    assert second["job_name"] == "Acc Sweep"
    project = httpx.get(f"{server.url}{API}/projects/acc-sweep", timeout=60).json()
    assert (project["metric_name"], project["lower_is_better"]) == ("eval/acc", False)
    expected = {("eval/acc", s * 10, a) for s, a in enumerate(accuracies)}
    expected |= {("train/loss", s * 10, 1.0 / (s + 1)) for s in range(3)} | {("train/loss", 21, 0.1)}
    assert _points(db, "acc-sweep", first["exp_id"]) == expected


def test_the_instance_form_and_a_client_of_ones_own(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from accelerate import Accelerator

    from tests.trainer_hooks.client.conftest import fast_client
    from trainer_hooks.integrations.accelerate import LedgerTracker

    server = serve(str(tmp_path / "ledger.db"))
    tracker = LedgerTracker("inst", client=fast_client(server.url, tmp_path / "spool", "inst"), metric="loss")
    accelerator = Accelerator(log_with=[tracker], cpu=True)
    accelerator.init_trackers("ignored: the tracker is made already")
    accelerator.log({"loss": 0.25}, step=3)
    accelerator.end_training()
    (found,) = _trials(server.url, "inst")
    assert (found["status"], found["core_metric"], found["extra"]["config"]) == ("keep", 0.25, {})


SCRIPT = """
import trainer_hooks.integrations.accelerate
from accelerate import Accelerator
accelerator = Accelerator(log_with="lineage", cpu=True)
accelerator.init_trackers("crashy", config={"lr": 1})
accelerator.log({"loss": 1.0}, step=0)
raise IndexError("index out of range in self")
"""


def test_a_script_that_raises_before_end_training_is_a_crash(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    env = {**os.environ, "LINEAGE_URL": server.url, "LINEAGE_SPOOL": str(tmp_path / "spool"), "PYTHONPATH": str(ROOT)}
    env["LINEAGE_SYSTEM_METRICS"] = "0"
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "IndexError" in done.stderr
    (found,) = _trials(server.url, "crashy")
    assert found["status"] == "crash" and found["notes"].startswith("IndexError: index out of range in self")
    assert found["extra"]["config"] == {"lr": 1}
