"""Trainers that log to MLflow, unchanged, logging into a real ``lineage serve`` through
``MLFLOW_TRACKING_URI`` and ``MLFLOW_TRACKING_TOKEN``: transformers' ``MLflowCallback``
(``report_to="mlflow"``) with a tiny model built in code, accelerate's MLflow tracker
(``Accelerator(log_with="mlflow")``) and verl's ``Tracking(default_backend=["mlflow"])``.
Each trial's config and telemetry are what the library sent (computed in the run by the
library's own functions), and its verdict is the ledger's on the project's metric.

The script runs in the project's interpreter (torch, transformers, accelerate, verl) with
the real MLflow client's packages after its own on ``sys.path``: ``mlflow-skinny`` stays
out of the project's venv (``test_mlflow_client.py`` says why), and what the trainers
import keeps the versions they were tested with.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from lineage.service import Ledger
from tests.api.test_mlflow_client import _mlflow_python
from tests.servers import ROOT, serving

pytestmark = pytest.mark.slow

SCRIPT = r"""
import json, os, sys
if sys.argv[2]:
    sys.path.append(sys.argv[2])  # the MLflow client's venv, after the project's packages
import mlflow, torch
from mlflow.exceptions import MlflowException

out = {}

# transformers: report_to="mlflow"
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments
from transformers.integrations import MLflowCallback

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=16, n_positions=16, n_embd=8, n_layer=1, n_head=2))

class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        ids = torch.tensor([(i + j) % 16 for j in range(8)])
        return {"input_ids": ids, "labels": ids}

seen = []
class Seen(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        seen.extend([k, state.global_step, float(v)] for k, v in logs.items() if isinstance(v, (int, float)))

os.environ["MLFLOW_EXPERIMENT_NAME"] = "HF Tiny"
os.environ["MLFLOW_TAGS"] = json.dumps({"lineage.metric": "loss", "mlflow.note.content": "a one-layer GPT-2"})
args = TrainingArguments(
    output_dir=sys.argv[3], max_steps=4, per_device_train_batch_size=4, logging_steps=1, report_to=["mlflow"],
    run_name="hf run", use_cpu=True, save_strategy="no", disable_tqdm=True,
)
trainer = Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[Seen()])
trainer.train()
callback = next(c for c in trainer.callback_handler.callbacks if isinstance(c, MLflowCallback))
combined = {**model.config.to_dict(), **args.to_dict()}  # what MLflowCallback.setup logs
params = {k: str(v) for k, v in combined.items() if len(str(v)) <= callback._MAX_PARAM_VAL_LENGTH}
out["hf"] = {"params": params, "points": seen, "run_id": mlflow.last_active_run().info.run_id}
del os.environ["MLFLOW_EXPERIMENT_NAME"], os.environ["MLFLOW_TAGS"]

# accelerate: log_with="mlflow", two runs; the second's last accuracy is worse
from accelerate import Accelerator

out["accelerate"] = []
for run, accuracies in enumerate(([0.5, 0.7, 0.8], [0.6, 0.7, 0.75])):
    accelerator = Accelerator(log_with="mlflow", cpu=True)
    config = {"lr": 0.1 * (run + 1), "layers": 2, "name": "tiny"}
    tags = {"lineage.metric": "eval/acc", "lineage.direction": "max"}
    accelerator.init_trackers(
        "Acc Tiny", config=config,
        init_kwargs={"mlflow": {"run_name": f"acc {run}", "description": f"accelerate run {run}", "tags": tags}},
    )
    points = []
    for step, acc in enumerate(accuracies):
        values = {"eval/acc": acc, "train/loss": 1.0 / (step + 1)}
        accelerator.log(values, step=step)
        points += [[k, step, v] for k, v in values.items()]
    run_id = mlflow.active_run().info.run_id
    accelerator.end_training()
    out["accelerate"].append({"params": {k: str(v) for k, v in config.items()}, "points": points, "run_id": run_id})

# verl: Tracking(default_backend=["mlflow"]); the project and its metric made beforehand
from verl.utils.tracking import Tracking, _compute_mlflow_params_from_objects, _MlflowLoggingAdapter

config = {"actor": {"lr": 1e-6, "clip_ratio": 0.2}, "algorithm": {"adv_estimator": "grpo"}, "data": {"files": ["a", "b"]}}
tracking = Tracking(project_name="verl-tiny", experiment_name="grpo lr 1e-6", default_backend=["mlflow"], config=config)
run_id = mlflow.active_run().info.run_id
sanitize = _MlflowLoggingAdapter()._sanitize_key
points = []
for step in range(1, 4):
    values = {"actor/pg_loss": 0.5 / step, "val/score": 0.2 * step, "critic/score@mean": step * 1.0}
    tracking.log(values, step=step)
    points += [[sanitize(k), step, v] for k, v in values.items()]
tracking.finish()
params = {k: str(v) for k, v in _compute_mlflow_params_from_objects(config).items()}
out["verl"] = {"params": params, "points": points, "run_id": run_id}

# a reader's token may read but not write
os.environ["MLFLOW_TRACKING_TOKEN"] = sys.argv[4]
client = mlflow.MlflowClient()
out["reader_reads"] = client.get_run(run_id).info.status
try:
    client.create_run("verl-tiny")
except MlflowException as error:
    out["reader_writes"] = error.error_code
print(json.dumps(out))
"""


def _site_packages(python: str) -> str:
    """The MLflow client's site-packages ('' when this interpreter imports mlflow itself)."""
    if python == sys.executable:
        return ""
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The three trainers' run (``out`` of the script) and the ledger's database."""
    for module in ("torch", "transformers", "accelerate", "verl"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the test extra has it)")
    python = _mlflow_python()
    if python is None:
        pytest.skip("no Python that imports mlflow: set LINEAGE_TEST_MLFLOW_PYTHON (test_mlflow_client.py says how)")
    tmp_path = tmp_path_factory.mktemp("mlflow-trainers")
    db = str(tmp_path / "ledger.db")
    ledger = Ledger.open(db)
    try:
        ledger.projects.create_project("verl-tiny", metric_name="val/score", lower_is_better=False)
        writer = ledger.tokens.create_token(name="trainer", role="writer")[1]
        reader = ledger.tokens.create_token(name="viewer", role="reader")[1]
    finally:
        ledger.close()
    with serving(tmp_path, "--db", db) as base:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "HF_", "WANDB_"))}
        env.update(MLFLOW_TRACKING_URI=base, MLFLOW_TRACKING_TOKEN=writer, PYTHONPATH=str(ROOT))
        env.update(DISABLE_MLFLOW_INTEGRATION="FALSE", TOKENIZERS_PARALLELISM="false")
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, base, _site_packages(python), str(tmp_path / "hf"), reader],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
            cwd=tmp_path,
        )
    assert done.returncode == 0, done.stderr[-4000:]
    return {"out": json.loads(done.stdout.strip().splitlines()[-1]), "db": db}


def _stored(db: str, run_id: str) -> tuple[Any, set[tuple[str, int, float]]]:
    """The trial a run id names and its telemetry points."""
    slug, exp_id = run_id.split("__")
    ledger = Ledger.open(db)
    try:
        points = ledger.telemetry.telemetry_points(slug, exp_id)
        return ledger.trials.trial(slug, exp_id), {(p["name"], p["step"], p["value"]) for p in points}
    finally:
        ledger.close()


def _as_set(points: list[list[Any]]) -> set[tuple[str, int, float]]:
    return {(name, step, value) for name, step, value in points}


def test_transformers_report_to_mlflow_is_a_trial_with_its_args_and_every_logged_value(logged: dict[str, Any]) -> None:
    hf = logged["out"]["hf"]
    assert hf["run_id"] == "hf-tiny__000"
    trial, points = _stored(logged["db"], hf["run_id"])
    assert len(hf["params"]) > 100  # sent in two batches: both stored
    assert trial.extra["config"] == hf["params"]
    assert points == _as_set(hf["points"])
    assert (trial.hypothesis, trial.job_name) == ("a one-layer GPT-2", "hf run")
    last_loss = max((step, value) for name, step, value in hf["points"] if name == "loss")[1]
    assert (trial.status.value, trial.core_metric) == ("keep", last_loss)  # the tag lineage.metric names loss


def test_accelerate_log_with_mlflow_is_a_trial_per_run_judged_on_the_experiments_metric(
    logged: dict[str, Any],
) -> None:
    first, second = logged["out"]["accelerate"]
    assert (first["run_id"], second["run_id"]) == ("acc-tiny__000", "acc-tiny__001")  # one experiment, found by name
    ledger = Ledger.open(logged["db"])
    try:
        project = ledger.projects.project("acc-tiny")
    finally:
        ledger.close()
    assert (project.title, project.metric_name, project.lower_is_better) == ("Acc Tiny", "eval/acc", False)
    verdicts = []
    for run in (first, second):
        trial, points = _stored(logged["db"], run["run_id"])
        assert trial.extra["config"] == run["params"]
        assert points == _as_set(run["points"])
        verdicts.append((trial.hypothesis, trial.status.value, trial.core_metric))
    assert verdicts == [("accelerate run 0", "keep", 0.8), ("accelerate run 1", "discard", 0.75)]


def test_verl_tracking_with_mlflow_is_a_trial_with_its_flattened_config(logged: dict[str, Any]) -> None:
    verl = logged["out"]["verl"]
    trial, points = _stored(logged["db"], verl["run_id"])
    assert trial.extra["config"] == verl["params"]
    assert trial.extra["config"]["actor/lr"] == "1e-06" and "data/files/list_len" in trial.extra["config"]
    assert points == _as_set(verl["points"])
    assert ("critic/score_at_mean", 3, 3.0) in points  # verl's own key sanitising, kept
    assert (trial.hypothesis, trial.status.value) == ("grpo lr 1e-6", "keep")
    assert trial.core_metric == pytest.approx(0.6)  # the project's metric, val/score, last value


def test_mlflow_tracking_token_is_a_ledger_token_with_its_role(logged: dict[str, Any]) -> None:
    assert logged["out"]["reader_reads"] == "FINISHED"
    assert logged["out"]["reader_writes"] == "PERMISSION_DENIED"
