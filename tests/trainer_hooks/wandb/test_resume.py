"""Resuming after a preemption, and a second process attached to a run, through the wandb
front and the client, against a real ``lineage serve``: a resumed run equals an
uninterrupted one (same trial, steps appended, each point once); a finished trial is
refused by name; ``define_metric(step_metric=)`` is kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import trainer_hooks.wandb as wandb
from tests.servers import ROOT, serving
from trainer_hooks.client import LedgerClient, LedgerRejected

pytestmark = pytest.mark.slow

API = "/api/v1"
PROCESS_TIMEOUT_S = 300

# A training script written for wandb: STOP steps from where the run stands, then either
# finishes or is preempted (SIGKILL: no exit handler runs; the points logged are spooled).
TRAIN = textwrap.dedent(
    """
    import os, signal, sys
    import trainer_hooks.wandb as wandb

    project, run_id, stop, end = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    run = wandb.init(project=project, id=run_id, resume="allow", config={"lr": 0.1, "layers": 2},
                     metric="loss", notes="resumable")
    run.define_metric("val/*", step_metric="epoch")
    for step in range(run.step, stop):
        if step % 3 == 2:
            run.log({"epoch": step // 3, "val/acc": step / 20}, commit=False)
        run.log({"loss": 1.0 / (step + 1), "acc": step / 10})
    if end == "kill":
        run.client.flush(timeout=0)  # spooled: durable, maybe not delivered yet
        os.kill(os.getpid(), signal.SIGKILL)
    wandb.finish()
    print("step", run.step, "resumed", run.resumed)
    """
)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("resume-ledger")) as url:
        yield url


def get(url: str, path: str, **params: Any) -> Any:
    response = httpx.get(f"{url}{API}{path}", params=params, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def train(url: str, tmp_path: Path, project: str, run_id: str, stop: int, end: str) -> subprocess.CompletedProcess[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "LINEAGE_SYSTEM_METRICS": "0",
        "LINEAGE_URL": url,
        "LINEAGE_SPOOL": str(tmp_path / "spool"),
    }
    return subprocess.run(
        [sys.executable, str(path), project, run_id, str(stop), end],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
    )


def points(url: str, project: str, exp_id: str) -> list[tuple[str, int, float]]:
    found = get(url, f"/projects/{project}/trials/{exp_id}/telemetry")["series"]
    return sorted((s["name"], step, value) for s in found for step, value in zip(s["step"], s["value"], strict=True))


def the_trial(url: str, project: str) -> dict[str, Any]:
    items = get(url, f"/projects/{project}/trials")["items"]
    assert len(items) == 1, items
    return items[0]


def test_a_resumed_wandb_run_equals_an_uninterrupted_one(ledger: str, tmp_path: Path) -> None:
    whole = train(ledger, tmp_path / "a", "uninterrupted", "run-a", 10, "finish")
    assert whole.returncode == 0, whole.stderr
    first = train(ledger, tmp_path / "b", "preempted", "run-b", 6, "kill")
    assert first.returncode == -signal.SIGKILL
    assert list((tmp_path / "b" / "spool").glob("run-b*.spool"))  # it left its spool behind
    second = train(ledger, tmp_path / "b", "preempted", "run-b", 10, "finish")
    assert second.returncode == 0, second.stderr
    assert "step 10 resumed True" in second.stdout
    assert not list((tmp_path / "b" / "spool").glob("*.spool"))  # everything delivered, nothing left

    a, b = the_trial(ledger, "uninterrupted"), the_trial(ledger, "preempted")  # one trial each
    assert points(ledger, "preempted", b["exp_id"]) == points(ledger, "uninterrupted", a["exp_id"])
    for field in ("status", "core_metric", "hypothesis", "job_name"):
        assert b[field] == a[field], field
    assert b["status"] == "keep" and b["core_metric"] == pytest.approx(0.1)
    same = ("config", "summary", "tags", "step_metrics", "state")
    assert {k: b["extra"].get(k) for k in same} == {k: a["extra"].get(k) for k in same}
    assert b["extra"]["step_metrics"] == {"val/*": "epoch"}
    assert b["extra"]["run_id"] == "run-b"


def test_a_resume_of_a_finished_trial_is_refused_naming_it(ledger: str, tmp_path: Path) -> None:
    done = train(ledger, tmp_path, "finished", "run-f", 3, "finish")
    assert done.returncode == 0, done.stderr
    exp_id = the_trial(ledger, "finished")["exp_id"]
    with pytest.raises(LedgerRejected, match=rf"trial '{exp_id}' is finished \(keep\)"):
        LedgerClient(ledger, None, "finished", run_id="run-f", resume="must", spool_dir=tmp_path / "s")
    again = train(ledger, tmp_path, "finished", "run-f", 5, "finish")  # the wandb front says the same
    assert again.returncode != 0 and f"trial '{exp_id}' is finished (keep)" in again.stderr
    assert len(get(ledger, "/projects/finished/trials")["items"]) == 1


def test_resume_must_needs_a_trial_and_allow_plans_one(
    ledger: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LINEAGE_SYSTEM_METRICS", "0")
    with pytest.raises(wandb.Error, match="no trial of run 'nobody'"):
        wandb.init(project="empty", id="nobody", resume="must", url=ledger, spool_dir=str(tmp_path))
    run = wandb.init(project="empty", id="somebody", resume="allow", url=ledger, spool_dir=str(tmp_path))
    assert not run.resumed and run.step == 0
    run.log({"loss": 1.0})
    run.finish()
    assert the_trial(ledger, "empty")["extra"]["run_id"] == "somebody"


def test_a_client_resumes_appending_steps_and_drops_what_is_stored(
    ledger: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = LedgerClient(ledger, None, "client-resume", run_id="c1", spool_dir=tmp_path, system_metrics=False)
    first.ensure_project(lower_is_better=True)
    first.plan_trial(hypothesis="c")
    for step in range(5):
        first.log(step, {"loss": float(step)})
    assert first.flush(60)
    first.stand_down(1)  # the process is gone (as a preempted one: no finish, no close)
    # its trial was ended as harness_abort meanwhile (a SIGTERM's label, or a lapsed lease)
    exp_id = the_trial(ledger, "client-resume")["exp_id"]
    ended = httpx.patch(f"{ledger}{API}/projects/client-resume/trials/{exp_id}", json={"status": "harness_abort"})
    assert ended.status_code == 200, ended.text
    second = LedgerClient(
        ledger, None, "client-resume", run_id="c1", resume="allow", spool_dir=tmp_path, system_metrics=False
    )
    assert second.resumed and second.resumed_step == 4 and second.resumed_values == {"loss": 4.0}
    second.plan_trial(hypothesis="ignored: the trial exists")
    for step in range(3, 8):  # restarted from a checkpoint at step 3
        second.log(step, {"loss": float(step)})
    second.finish_trial(core_metric=7.0)
    second.close()
    assert "points at steps up to it are already stored" in caplog.text
    trial = the_trial(ledger, "client-resume")
    assert trial["hypothesis"] == "c" and trial["status"] == "keep" and "resumed by c1" in trial["notes"]
    assert points(ledger, "client-resume", trial["exp_id"]) == [("loss", s, float(s)) for s in range(8)]


def test_a_second_process_attaches_to_a_running_run(
    ledger: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LINEAGE_SYSTEM_METRICS", "0")
    train_run = wandb.init(project="shared", id="trainer", url=ledger, spool_dir=str(tmp_path / "t"), metric="loss")
    train_run.log({"loss": 0.5})
    assert train_run.client is not None and train_run.client.flush(60)
    # wandb's eval.py: the same id, shared mode, not primary
    settings = wandb.Settings(mode="shared", x_primary=False, x_label="eval")
    evaluator = wandb.init(
        project="shared",
        id="trainer",
        settings=settings,
        url=ledger,
        spool_dir=str(tmp_path / "e"),
        reinit="create_new",
    )
    evaluator.define_metric("eval/acc", step_metric="eval_step")
    evaluator.log({"eval_step": 0, "eval/acc": 0.7})
    evaluator.finish()  # leaves the trial to its owner
    trial = the_trial(ledger, "shared")
    assert trial["status"] == "running"
    train_run.log({"loss": 0.25})
    train_run.finish()
    trial = the_trial(ledger, "shared")  # still one trial: the evaluator logged into it
    assert trial["status"] == "keep" and trial["core_metric"] == 0.25
    names = {name for name, _, _ in points(ledger, "shared", trial["exp_id"])}
    assert names == {"loss", "eval_step", "eval/acc"}
