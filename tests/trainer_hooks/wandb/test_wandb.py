"""``trainer_hooks.wandb`` against a real ``lineage serve``: wandb's own quickstart, unchanged
but for the import line, becomes a trial with its telemetry and its outcome; wandb's step
and commit rules; what is kept and what is skipped; the summary as the result; failures
labelled from exceptions and exit codes; a run made while the ledger is down reaches it
through the spool."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch
from click.testing import CliRunner

import trainer_hooks.wandb as wandb
from tests.servers import ROOT, free_port, serving
from trainer_hooks.client.cli import spool

pytestmark = pytest.mark.slow

API = "/api/v1"
HERE = Path(__file__).resolve().parent
PROCESS_TIMEOUT_S = 300  # an upper bound for a busy 2-core machine


@pytest.fixture(scope="module")
def ledger_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the module's server keeps its database (``lineage.db``)."""
    return tmp_path_factory.mktemp("wandb-ledger")


@pytest.fixture(scope="module")
def ledger(ledger_dir: Path) -> Iterator[str]:
    """One real server for the module (each test uses projects of its own)."""
    with serving(ledger_dir, "--hook-private-targets") as url:  # the alert test's receiver is on loopback
        yield url


def get(url: str, path: str, **params: Any) -> Any:
    response = httpx.get(f"{url}{API}{path}", params=params, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def make_project(url: str, slug: str, **fields: Any) -> None:
    response = httpx.post(f"{url}{API}/projects", json={"slug": slug, **fields}, timeout=60)
    assert response.status_code == 201, response.text


def trials(url: str, project: str) -> list[dict[str, Any]]:
    return get(url, f"/projects/{project}/trials", limit=100)["items"]


def series(url: str, project: str, exp_id: str) -> dict[str, tuple[list[int], list[float]]]:
    found = get(url, f"/projects/{project}/trials/{exp_id}/telemetry")["series"]
    return {s["name"]: (s["step"], s["value"]) for s in found if not s["name"].startswith("sys/")}


def run_script(path: Path, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "LINEAGE_SYSTEM_METRICS": "0", **env}
    return subprocess.run(
        [sys.executable, str(path)], env=full, cwd=cwd, capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S
    )


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(body))
    return path


@pytest.fixture
def spool_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LINEAGE_SYSTEM_METRICS", "0")
    return tmp_path / "spool"


# -- wandb's quickstart, unchanged but for the import ---------------------------------------


def test_wandb_quickstart_unchanged_but_the_import_is_a_trial_with_telemetry_and_outcome(
    ledger: str, tmp_path: Path
) -> None:
    make_project(ledger, "my-awesome-project", metric_name="loss", lower_is_better=True)
    env = {"LINEAGE_URL": ledger, "LINEAGE_SPOOL": str(tmp_path / "spool")}
    for _ in range(2):
        done = run_script(HERE / "docs_quickstart.py", env, tmp_path)
        assert done.returncode == 0, done.stderr
    first, second = trials(ledger, "my-awesome-project")
    for trial in (first, second):
        assert trial["hypothesis"] == "a CNN on CIFAR-100 with learning rate 0.02"
        assert trial["job_name"] == "cnn-cifar100"
        extra = trial["extra"]
        assert extra["config"] == {
            "learning_rate": 0.02,
            "architecture": "CNN",
            "dataset": "CIFAR-100",
            "epochs": 10,
            "batch_size": 128,
        }
        assert extra["tags"] == ["baseline", "cnn"] and extra["state"] == "finished"
        curves = series(ledger, "my-awesome-project", trial["exp_id"])
        assert set(curves) == {"acc", "loss"}
        assert curves["loss"][0] == list(range(8)) and curves["acc"][0] == list(range(8))  # epochs 2..9 at steps 0..7
        # the result: the project's metric (loss) from the summary, i.e. its last logged value
        assert trial["core_metric"] == curves["loss"][1][-1]
        assert extra["metric_from_summary"] == "loss"
        assert extra["summary"]["best_accuracy"] == max(curves["acc"][1])
        assert extra["summary"]["loss"] == curves["loss"][1][-1] and extra["telemetry_points"] == 16
    assert first["status"] == "keep"  # nothing to beat
    assert second["status"] == ("keep" if second["core_metric"] < first["core_metric"] else "discard")
    assert second["delta_vs_best"] == pytest.approx(second["core_metric"] - first["core_metric"])


# -- steps, commits, values -------------------------------------------------------------------


def test_steps_and_commits_follow_wandb(ledger: str, spool_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    run = wandb.init(project="steps", url=ledger, spool_dir=spool_dir)
    assert wandb.run is run and run.step == 0
    wandb.log({"a": 1.0})  # step 0, committed -> 1
    wandb.log({"a": 2.0}, commit=False)  # step 1, pending
    wandb.log({"b": 3.0})  # step 1 too, committed -> 2
    wandb.log({"a": 4.0}, step=5)  # jumps to 5, pending
    wandb.log({"a": 5.0}, step=5)  # same step: the last value wins
    wandb.log({"b": 6.0}, step=7)  # commits step 5, pending at 7
    with caplog.at_level(logging.WARNING, "trainer_hooks.wandb"):
        wandb.log({"a": 0.5}, step=3)  # below the current step: ignored
    assert "below the run's current step" in caplog.text
    wandb.log({"c": 7.0}, step=7, commit=True)  # commits step 7 -> 8
    assert run.step == 8
    wandb.finish()
    assert wandb.run is None
    exp_id = run.exp_id
    assert exp_id is not None and run.report is not None and run.report.delivered
    assert series(ledger, "steps", exp_id) == {
        "a": ([0, 1, 5], [1.0, 2.0, 5.0]),
        "b": ([1, 7], [3.0, 6.0]),
        "c": ([7], [7.0]),
    }


def test_nested_keys_numpy_and_tensors_are_kept_the_rest_skipped_once(
    ledger: str, spool_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = wandb.init(project="values", url=ledger, spool_dir=spool_dir)
    with caplog.at_level(logging.WARNING, "trainer_hooks.wandb"):
        for step in range(3):
            wandb.log(
                {
                    "train": {"loss": torch.tensor(1.5 + step), "lr": np.float32(0.25)},
                    "eval/acc": np.array(0.5),
                    "count": np.int64(step),
                    "flag": True,
                    "caption-v": "a string",
                    "hist-v": [1, 2, 3],
                    "none-v": None,
                    "image-v": wandb.Image(np.zeros((2, 2))),
                    "vector-v": torch.ones(3),
                    "bad\nname-v": 1.0,
                    "nan-v": float("nan"),
                }
            )
    skipped = [r.getMessage() for r in caplog.records if "is not recorded" in r.getMessage()]
    assert sorted(m.split("'")[1] for m in skipped) == sorted(
        ["caption-v", "hist-v", "none-v", "image-v", "vector-v", "bad\\nname-v"]
    )  # once per key, not per step
    assert run.summary["train/loss"] == 3.5 and run.summary["flag"] == 1.0
    wandb.finish()
    curves = series(ledger, "values", run.exp_id or "")
    assert set(curves) == {"train/loss", "train/lr", "eval/acc", "count", "flag"}  # NaN: counted, not stored
    assert curves["train/loss"] == ([0, 1, 2], [1.5, 2.5, 3.5]) and curves["count"][1] == [0.0, 1.0, 2.0]
    assert run.report is not None and run.report.nonfinite_dropped == 3


def test_summary_modes_and_a_suffix_match_give_the_result(ledger: str, spool_dir: Path) -> None:
    make_project(ledger, "summaries", metric_name="loss", lower_is_better=True)
    run = wandb.init(project="summaries", url=ledger, spool_dir=spool_dir, config={"lr": 0.1})
    run.define_metric("val/loss", summary="min")
    for value in (3.0, 1.0, 2.0):
        run.log({"val/loss": value, "train/acc": value / 10})
    run.config.lr = 0.2
    run.finish()
    trial = get(ledger, f"/projects/summaries/trials/{run.exp_id}")
    assert trial["core_metric"] == 1.0 and trial["extra"]["metric_from_summary"] == "val/loss"
    assert trial["extra"]["config"] == {"lr": 0.2} and trial["status"] == "keep"
    # an explicit key (init(metric=)) picks another entry; set by hand, the summary wins
    other = wandb.init(project="summaries", url=ledger, spool_dir=spool_dir, metric="score")
    other.log({"score": 5.0})
    other.summary["score"] = 0.5
    other.finish()
    trial = get(ledger, f"/projects/summaries/trials/{other.exp_id}")
    assert trial["core_metric"] == 0.5 and trial["status"] == "keep" and trial["delta_vs_best"] == -0.5


def test_a_summary_without_the_metric_is_discarded_with_no_metric_and_a_warning(
    ledger: str, spool_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_project(ledger, "nometric", metric_name="val_bpb")
    run = wandb.init(project="nometric", url=ledger, spool_dir=spool_dir)
    run.log({"train/val_bpb": 1.0, "eval/val_bpb": 2.0})  # two candidates: neither is taken
    with caplog.at_level(logging.WARNING, "trainer_hooks.client"):
        run.finish()
    trial = get(ledger, f"/projects/nometric/trials/{run.exp_id}")
    assert trial["core_metric"] is None and trial["status"] == "discard" and "metric_from_summary" not in trial["extra"]
    assert "the metric 'val_bpb' is not in the run's summary (summary keys: eval/val_bpb, train/val_bpb)" in caplog.text
    assert run.report is not None and run.report.outcome is not None
    assert "new best" not in run.report.outcome.describe()
    # wandb's README, unchanged: no metric named, so the new project's 'core_metric' is missing
    caplog.clear()
    with wandb.init(project="readme-no-metric", url=ledger, spool_dir=spool_dir) as readme:
        readme.log({"accuracy": 0.9, "loss": 0.1})
    assert "the metric 'core_metric' is not in the run's summary (summary keys: accuracy, loss)" in caplog.text
    assert "init(metric=...)" in caplog.text


# -- init: the project, the trial's fields, reinit, modes ------------------------------------


def test_init_plans_the_trial_from_notes_name_and_lineage_trial(
    ledger: str, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(ledger, "fields-project")
    made = httpx.post(f"{ledger}{API}/projects/fields-project/trials", json={"exp_id": "007", "status": "keep"})
    assert made.status_code == 201, made.text
    monkeypatch.setenv("LINEAGE_TRIAL", '{"parent_exp": "007", "expected_delta": "-0.01"}')
    run = wandb.init(
        project="Fields Project",
        name="run-a",
        tags=("x",),
        group="g",
        job_type="train",
        url=ledger,
        spool_dir=spool_dir,
        trial={"specialist": "opt"},
    )
    assert run.project == "fields-project"
    run.finish()
    trial = get(ledger, f"/projects/fields-project/trials/{run.exp_id}")
    assert (
        trial["hypothesis"],
        trial["job_name"],
        trial["parent_exp"],
        trial["expected_delta"],
        trial["specialist"],
    ) == ("run-a", "run-a", "007", "-0.01", "opt")
    assert trial["extra"]["group"] == "g" and trial["extra"]["job_type"] == "train" and trial["extra"]["tags"] == ["x"]
    with pytest.raises(ValueError, match="unknown field 'parent'"):
        wandb.init(project="fields-project", url=ledger, spool_dir=spool_dir, trial={"parent": "1"})


def test_reinit_and_calls_before_init(ledger: str, spool_dir: Path) -> None:
    with pytest.raises(wandb.Error, match="before wandb.log"):
        wandb.log({"a": 1})
    with pytest.raises(wandb.Error, match="before wandb.config"):
        wandb.config.lr = 1
    first = wandb.init(project="reinit", url=ledger, spool_dir=spool_dir)
    assert wandb.init(project="reinit", url=ledger, spool_dir=spool_dir, reinit="return_previous") is first
    second = wandb.init(project="reinit", url=ledger, spool_dir=spool_dir)  # default: finish the previous
    assert first.status == "auto" and first.report is not None and wandb.run is second
    third = wandb.init(project="reinit", url=ledger, spool_dir=spool_dir, reinit="create_new")
    assert wandb.run is third and second.status is None  # both active
    wandb.finish()
    assert wandb.run is second
    wandb.teardown()
    assert wandb.run is None and second.status == "auto"
    assert len(trials(ledger, "reinit")) == 3


def test_a_new_project_takes_the_wandb_name_as_title_and_the_metric(ledger: str, spool_dir: Path) -> None:
    run = wandb.init(project="New Project", url=ledger, spool_dir=spool_dir, metric="val/acc")
    run.finish()
    project = get(ledger, "/projects/new-project")
    assert (project["title"], project["metric_name"]) == ("New Project", "val/acc")


ACCURACY_SCRIPT = """\
import os
import trainer_hooks.wandb as wandb

run = wandb.init(project="Acc Proj", metric="val/acc", config={"lr": float(os.environ["LR"])})
run.define_metric("val/acc", summary="max", goal="maximize")
for step, acc in enumerate((0.2, float(os.environ["ACC"]), 0.1)):
    run.log({"train/loss": 1.0 - acc, "val/acc": acc})
wandb.finish()
"""


def test_define_metric_goal_makes_the_project_it_creates_higher_is_better(ledger: str, tmp_path: Path) -> None:
    path = script(tmp_path, ACCURACY_SCRIPT)
    for lr, acc in (("0.001", "0.9"), ("0.0003", "0.5")):
        env = {"LINEAGE_URL": ledger, "LINEAGE_SPOOL": str(tmp_path / "spool"), "LR": lr, "ACC": acc}
        done = run_script(path, env, tmp_path)
        assert done.returncode == 0, done.stderr
        assert "left as it is" not in done.stderr
    project = get(ledger, "/projects/acc-proj")
    assert (project["metric_name"], project["lower_is_better"]) == ("val/acc", False)
    first, second = sorted(trials(ledger, "acc-proj"), key=lambda t: t["exp_id"])
    assert (first["status"], first["core_metric"]) == ("keep", 0.9)  # the summary's max
    assert (second["status"], second["core_metric"]) == ("discard", 0.5)  # worse: not the new best


@pytest.mark.parametrize(
    ("slug", "calls", "lower_is_better"),
    [
        ("dir-max", "run.define_metric('acc', summary='max')", False),
        ("dir-pattern", "run.define_metric('val/*', summary='max')", False),
        ("dir-best", "run.define_metric('acc', summary='best', goal='MAXIMIZE')", False),
        ("dir-other", "run.define_metric('loss', goal='maximize')", True),  # another key: the default
    ],
)
def test_the_direction_of_a_new_project_comes_from_define_metric_of_its_metric(
    ledger: str, spool_dir: Path, slug: str, calls: str, lower_is_better: bool
) -> None:
    metric = "val/acc" if "val/*" in calls else "acc"
    run = wandb.init(project=slug, url=ledger, spool_dir=spool_dir, metric=metric)
    exec(calls, {"run": run})
    run.log({metric: 0.5, "loss": 0.1})
    run.finish()
    assert get(ledger, f"/projects/{slug}")["lower_is_better"] is lower_is_better


def test_init_lower_is_better_and_its_variable_set_the_direction(
    ledger: str, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with wandb.init(project="dir-init", url=ledger, spool_dir=spool_dir, metric="acc", lower_is_better=False) as run:
        run.log({"acc": 0.5})
    assert get(ledger, "/projects/dir-init")["lower_is_better"] is False
    monkeypatch.setenv("LINEAGE_LOWER_IS_BETTER", "0")
    with wandb.init(project="dir-env", url=ledger, spool_dir=spool_dir, metric="acc") as run:
        run.log({"acc": 0.5})
    assert get(ledger, "/projects/dir-env")["lower_is_better"] is False
    monkeypatch.setenv("LINEAGE_LOWER_IS_BETTER", "maybe")
    with pytest.raises(ValueError, match="LINEAGE_LOWER_IS_BETTER must be 1 or 0"):
        wandb.init(project="dir-env", url=ledger, spool_dir=spool_dir)
    assert wandb.run is None
    monkeypatch.delenv("LINEAGE_LOWER_IS_BETTER")
    with pytest.raises(ValueError, match="goal must be 'minimize' or 'maximize'"):
        wandb.init(project="dir-env", mode="disabled").define_metric("acc", goal="up")
    wandb.finish()


def test_a_goal_against_an_existing_project_is_a_warning_and_the_project_stays(ledger: str, tmp_path: Path) -> None:
    make_project(ledger, "acc-existing", metric_name="val/acc", lower_is_better=True)
    path = script(tmp_path, ACCURACY_SCRIPT.replace("Acc Proj", "acc-existing"))
    env = {"LINEAGE_URL": ledger, "LINEAGE_SPOOL": str(tmp_path / "spool"), "LR": "0.001", "ACC": "0.9"}
    done = run_script(path, env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "project 'acc-existing' keeps 'val/acc' lower-is-better, but this run declared "
        "define_metric('val/acc', goal='maximize'); the project is left as it is"
    ) in done.stderr
    assert get(ledger, "/projects/acc-existing")["lower_is_better"] is True


def test_a_goal_declared_after_the_first_log_is_checked_not_applied(
    ledger: str, spool_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = wandb.init(project="dir-late", url=ledger, spool_dir=spool_dir, metric="acc")
    run.log({"acc": 0.5})  # the project is created here: lower is better
    run.define_metric("acc", goal="maximize")
    with caplog.at_level(logging.WARNING, "trainer_hooks.client"):
        run.finish()
    assert get(ledger, "/projects/dir-late")["lower_is_better"] is True
    assert "this run declared define_metric('acc', goal='maximize')" in caplog.text


def test_disabled_mode_records_nothing(tmp_path: Path) -> None:
    run = wandb.init(project="off", mode="disabled", spool_dir=tmp_path / "spool", config={"a": 1})
    wandb.log({"x": 1.0})
    assert run.summary["x"] == 1.0 and wandb.config.a == 1
    wandb.finish()
    assert not (tmp_path / "spool").exists() and run.exp_id is None


def test_stand_ins_do_nothing_and_say_so_once(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    run = wandb.init(project="standins", mode="disabled")
    with caplog.at_level(logging.WARNING, "trainer_hooks.wandb"):
        for _ in range(2):
            wandb.watch(object(), log="all")
            run.log_artifact(wandb.Artifact("model", type="model"))
            wandb.Table(columns=["a"]).add_data(1)
            assert wandb.plot.line(None, "x", "y") is not None
    said = [r.getMessage() for r in caplog.records]
    for name in ("wandb.watch", "wandb.log_artifact", "wandb.Artifact", "wandb.Table", "wandb.plot.line"):
        assert sum(m.startswith(name + " ") for m in said) == 1, (name, said)
    wandb.finish()


# -- failures: exceptions, exit codes, the end of the script ----------------------------------


@pytest.mark.parametrize(
    ("body", "status", "note"),
    [
        (
            "run = wandb.init(project='fails')\nrun.log({'loss': 1.0})\n"
            "raise RuntimeError('CUDA out of memory. Tried to allocate 2 GiB')\n",
            "size_blocked",
            "RuntimeError: CUDA out",
        ),
        (
            "run = wandb.init(project='fails')\nrun.log({'loss': 1.0})\nimport sys\nsys.exit(3)\n",
            "crash",
            "exit code 3",
        ),
        (
            "with wandb.init(project='fails') as run:\n    run.log({'loss': 1.0})\n    raise ValueError('bad batch')\n",
            "crash",
            "ValueError: bad batch",
        ),
        (
            "run = wandb.init(project='fails')\nrun.log({'loss': 1.0})\nwandb.finish(exit_code=130)\n",
            "harness_abort",
            "exit code 130",
        ),
        ("run = wandb.init(project='fails')\nrun.log({'loss': 1.0})\n", "keep", None),  # never finished: at exit
    ],
)
def test_failures_are_labelled_and_a_script_that_never_finishes_is_finished_at_exit(
    ledger: str, tmp_path: Path, body: str, status: str, note: str | None
) -> None:
    path = script(tmp_path, "import trainer_hooks.wandb as wandb\n" + body)
    env = {"LINEAGE_URL": ledger, "LINEAGE_SPOOL": str(tmp_path / "spool"), "LINEAGE_METRIC": "loss"}
    before = (
        {t["exp_id"] for t in trials(ledger, "fails")}
        if any(p["slug"] == "fails" for p in get(ledger, "/projects"))
        else set()
    )
    run_script(path, env, tmp_path)
    (trial,) = [t for t in trials(ledger, "fails") if t["exp_id"] not in before]
    assert trial["extra"]["state"] == "finished"
    if status == "keep":
        assert trial["status"] in ("keep", "discard") and trial["core_metric"] == 1.0 and not trial["notes"]
    else:
        assert trial["status"] == status and note in trial["notes"] and trial["core_metric"] is None
    assert series(ledger, "fails", trial["exp_id"])["loss"] == ([0], [1.0])


# -- the ledger down: everything waits in the spool --------------------------------------------


def test_a_run_while_the_ledger_is_down_arrives_through_the_spool(ledger: str, tmp_path: Path) -> None:
    env = {
        "LINEAGE_URL": f"http://127.0.0.1:{free_port()}",
        "LINEAGE_SPOOL": str(tmp_path / "spool"),
        "LINEAGE_CLOSE_TIMEOUT": "0.3",
        "LINEAGE_METRIC": "loss",
    }
    path = script(
        tmp_path,
        """\
        import trainer_hooks.wandb as wandb
        run = wandb.init(project="offline-run", notes="written while the ledger was down")
        for step in range(50):
            wandb.log({"loss": 1.0 / (step + 1), "lr": 0.1})
        wandb.finish()
        """,
    )
    done = run_script(path, env, tmp_path)
    assert done.returncode == 0 and "not delivered yet" in done.stderr, done.stderr
    flushed = CliRunner().invoke(spool, ["flush", str(tmp_path / "spool"), "--url", ledger])
    assert flushed.exit_code == 0, flushed.output
    (trial,) = trials(ledger, "offline-run")
    assert trial["hypothesis"] == "written while the ledger was down" and trial["status"] == "keep"
    assert trial["core_metric"] == pytest.approx(1 / 50)
    curves = series(ledger, "offline-run", trial["exp_id"])
    assert curves["loss"][0] == list(range(50)) and len(curves["lr"][1]) == 50


# -- alerts from training code, end to end ------------------------------------------------------


def test_alerts_from_a_run_reach_the_trial_and_a_signed_webhook(
    ledger: str, ledger_dir: Path, spool_dir: Path, private_hook_targets: None
) -> None:
    from lineage.service import Ledger
    from tests.lineage.test_hooks import _verify
    from tests.lineage.webhook_receiver import Receiver

    make_project(ledger, "alerting")
    with Receiver("ok") as receiver:
        admin = Ledger.open(str(ledger_dir / "lineage.db"))  # hooks are an admin's: added on the server's database
        _, secret = admin.agent.add_hook("alerting", receiver.url, events=["alert"], body_format="slack")
        admin.close()
        run = wandb.init(project="alerting", url=ledger, spool_dir=spool_dir)
        for step in range(5):
            wandb.log({"loss": 10.0**step})
        wandb.alert(title="loss diverging", text="loss grew 10x per step", level=wandb.AlertLevel.WARN)
        wandb.alert(title="loss diverging", text="again", level="WARN")  # same title within 60 s: dropped
        run.alert("giving up", "stopping at step 5", level="error", wait_duration=0)
        with pytest.raises(ValueError, match="INFO, WARN or ERROR"):
            run.alert("x", "y", level="fatal")
        wandb.finish()
        found = get(ledger, f"/projects/alerting/trials/{run.exp_id}/alerts")["items"]
        assert [(a["title"], a["level"], a["step"], a["text"]) for a in found] == [
            ("giving up", "error", 5, "stopping at step 5"),
            ("loss diverging", "warn", 5, "loss grew 10x per step"),
        ]
        assert all(a["wall_time"] is not None for a in found)
        deadline = time.monotonic() + 120  # the server's delivery loop polls every few seconds
        while len(receiver.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        texts = sorted(_verify(secret, r)["text"] for r in receiver.requests)
    assert len(texts) == 2 and texts[0].startswith(":rotating_light: [alerting] ERROR alert from exp ")
    assert texts[1].endswith("at step 5: *loss diverging*\n> loss grew 10x per step")


def test_an_alert_raised_while_the_ledger_is_down_arrives_with_the_spool(ledger: str, tmp_path: Path) -> None:
    env = {
        "LINEAGE_URL": f"http://127.0.0.1:{free_port()}",
        "LINEAGE_SPOOL": str(tmp_path / "spool"),
        "LINEAGE_CLOSE_TIMEOUT": "0.2",
    }
    path = script(
        tmp_path,
        """\
        import trainer_hooks.wandb as wandb
        wandb.init(project="alert-offline")
        wandb.alert(title="before any step", text="raised first", level=wandb.AlertLevel.INFO)
        wandb.log({"loss": 1.0})
        wandb.alert(title="NaN loss", text="at step 1", level=wandb.AlertLevel.ERROR)
        """,
    )
    done = run_script(path, env, tmp_path)
    assert done.returncode == 0, done.stderr
    flushed = CliRunner().invoke(spool, ["flush", str(tmp_path / "spool"), "--url", ledger])
    assert flushed.exit_code == 0, flushed.output
    (trial,) = trials(ledger, "alert-offline")
    found = get(ledger, "/projects/alert-offline/alerts")["items"]
    assert [(a["exp_id"], a["title"], a["level"], a["step"]) for a in found] == [
        (trial["exp_id"], "NaN loss", "error", 1),
        (trial["exp_id"], "before any step", "info", 0),
    ]
    again = CliRunner().invoke(spool, ["flush", str(tmp_path / "spool"), "--url", ledger])
    assert again.exit_code == 0 and len(get(ledger, "/projects/alert-offline/alerts")["items"]) == 2
