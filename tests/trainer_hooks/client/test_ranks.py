"""Only rank 0 of a distributed job records: a real ``torchrun --nproc_per_node 2`` (gloo,
CPU) gives one trial, and a process told (``rank=``, ``RANK``) that it is another rank
records nothing and leaves no spool."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import API, free_port
from tests.servers import ROOT
from tests.trainer_hooks.client.conftest import fast_client, trial_count
from trainer_hooks.callbacks import TrialRecorder
from trainer_hooks.client.rank import process_rank

TORCHRUN_TIMEOUT_S = 300  # an upper bound for a busy 2-core machine


def test_a_rank_other_than_zero_records_nothing_and_leaves_no_spool(serve, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    spool_dir = tmp_path / "spool"
    monkeypatch.setenv("RANK", "1")
    for client in (fast_client(server.url, spool_dir), fast_client(server.url, spool_dir, rank=3)):
        assert not client.active and client.rank in (1, 3)
        client.ensure_project()
        with TrialRecorder(client, hypothesis="not rank 0") as rec:
            rec.log(0, {"loss": 1.0})
            rec.result(0.5)
        assert rec.exp_id is None and rec.outcome is None and client.close().points_logged == 0
    assert not spool_dir.exists() or not list(spool_dir.iterdir())
    assert httpx.get(f"{server.url}{API}/projects", timeout=60).json() == []
    # rank= wins over RANK: a plain loop that knows it is rank 0 records
    client = fast_client(server.url, spool_dir, rank=0)
    client.ensure_project()
    with TrialRecorder(client, hypothesis="rank 0") as rec:
        rec.result(0.5)
    assert trial_count(str(tmp_path / "ledger.db")) == 1


def test_the_rank_comes_from_the_argument_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANK", raising=False)
    assert process_rank() == 0 and process_rank(2) == 2
    monkeypatch.setenv("RANK", "1")
    assert process_rank() == 1 and process_rank(0) == 0
    monkeypatch.setenv("RANK", "one")
    with pytest.raises(ValueError, match="RANK"):
        process_rank()


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "project"), [("plain", "ddp"), ("hf", "ddp-hf")])
def test_torchrun_with_two_ranks_records_one_trial(serve, tmp_path: Path, mode: str, project: str) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("torch")
    if mode == "hf":
        pytest.importorskip("transformers")
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    spool_dir = tmp_path / "spool"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("RANK", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            str(free_port()),
            str(Path(__file__).with_name("ddp_process.py")),
            server.url,
            str(spool_dir),
            mode,
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TORCHRUN_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = sorted(line for line in done.stdout.splitlines() if line.startswith("rank "))
    assert lines[0].startswith("rank 0 active True exp_id ") and lines[1] == "rank 1 active False exp_id None", lines
    stored = httpx.get(f"{server.url}{API}/projects/{project}/trials", timeout=60).json()["items"]
    assert len(stored) == 1 and stored[0]["exp_id"] == lines[0].rsplit(" ", 1)[1]
    assert stored[0]["status"] == "keep" and stored[0]["extra"]["state"] == "finished"
    assert len(list(spool_dir.glob("*.spool"))) == 1  # rank 0's, kept; rank 1 left none
