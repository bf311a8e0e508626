"""The system metrics sampler on this machine (no GPU): it records the process and the
machine, through psutil and through /proc, says nothing of GPUs, and its points reach the
trial through the client's spool. The GPU path is checked with a stand-in for
``torch.cuda`` (its real interface: ``is_initialized``, ``device_count``, ``memory_stats``)
in a training script's own process, since no GPU runs here: the peak lands in the trial's
``extra["memory_gb"]``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import API, ROOT
from tests.trainer_hooks.client.conftest import fast_client
from trainer_hooks.client.sysmetrics import DEFAULT_INTERVAL_S, ProcProcess, SystemSampler, sampler_settings

MACHINE = {"sys/proc/rss_gb", "sys/proc/cpu_pct", "sys/cpu_pct", "sys/memory_pct"}


@pytest.mark.parametrize(
    ("given", "env", "interval"),
    [
        (None, None, DEFAULT_INTERVAL_S),
        (None, "0", None),
        (None, "off", None),
        (None, "2.5", 2.5),
        (None, "on", DEFAULT_INTERVAL_S),
        (False, "5", None),
        (True, "0", DEFAULT_INTERVAL_S),
        (0.5, None, 0.5),
    ],
)
def test_settings_from_the_argument_or_the_environment(
    monkeypatch: pytest.MonkeyPatch, given: bool | float | None, env: str | None, interval: float | None
) -> None:
    if env is None:
        monkeypatch.delenv("LINEAGE_SYSTEM_METRICS", raising=False)
    else:
        monkeypatch.setenv("LINEAGE_SYSTEM_METRICS", env)
    assert sampler_settings(given) == interval


def test_bad_settings_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAGE_SYSTEM_METRICS", "often")
    with pytest.raises(ValueError, match="LINEAGE_SYSTEM_METRICS"):
        sampler_settings(None)
    with pytest.raises(ValueError, match="> 0"):
        sampler_settings(0.0)


def test_without_a_gpu_the_process_and_the_machine_are_recorded_and_nothing_else() -> None:
    sampler = SystemSampler(lambda values: None)
    sampler.sample()
    time.sleep(0.05)
    found = sampler.sample()
    assert set(found) == MACHINE  # no sys/gpu*: this machine has none, and says nothing about it
    assert 0 < found["sys/proc/rss_gb"] < 64 and 0 < found["sys/memory_pct"] < 100
    assert found["sys/proc/cpu_pct"] >= 0 and 0 <= found["sys/cpu_pct"] <= 100
    assert sampler.peak_gpu_gb is None


def test_proc_fallback_reads_the_same_figures_as_psutil() -> None:
    import psutil

    proc = ProcProcess()
    spent = time.process_time() + 0.05
    while time.process_time() < spent:  # 50 ms of CPU: five of /proc's 10 ms ticks at least
        sum(i * i for i in range(1000))
    out: dict[str, float] = {}
    proc.read(out)
    assert set(out) == MACHINE
    assert out["sys/proc/rss_gb"] == pytest.approx(psutil.Process().memory_info().rss / 2**30, rel=0.2)
    assert out["sys/memory_pct"] == pytest.approx(psutil.virtual_memory().percent, abs=5)
    assert out["sys/proc/cpu_pct"] > 0


def test_the_sampler_runs_on_its_own_thread_until_stopped() -> None:
    got: list[dict[str, float]] = []
    sampler = SystemSampler(got.append, interval=0.02)
    sampler.start()
    deadline = time.monotonic() + 60
    while len(got) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    seen = len(got)
    time.sleep(0.1)
    assert seen >= 3 and len(got) == seen and set(got[0]) == MACHINE
    assert sampler.samples >= 3 and sampler.cpu_s / sampler.samples < 0.02  # a sample costs little CPU


@pytest.mark.slow
def test_samples_reach_the_trial_through_the_spool_and_stop_with_the_run(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    client = fast_client(server.url, tmp_path / "spool", system_metrics=0.05)
    client.ensure_project()
    client.plan_trial(hypothesis="sampled")
    for step in range(40):
        client.log(step, {"loss": 1.0})
        time.sleep(0.01)
    client.finish_trial(core_metric=1.0)
    sent = client.system_points
    time.sleep(0.2)
    report = client.close()
    assert report.delivered and sent > 0 and client.system_points == sent  # nothing after finish
    with httpx.Client(base_url=server.url, timeout=60) as http:
        trial = http.get(f"{API}/projects/p/trials/{report.exp_id}").json()
        series = http.get(f"{API}/projects/p/trials/{report.exp_id}/telemetry").json()["series"]
    names = {s["name"] for s in series}
    assert names == MACHINE | {"loss"}
    assert sum(s["count"] for s in series if s["name"] in MACHINE) == sent
    assert all(0 <= step <= 39 for s in series for step in s["step"])  # at the training's steps
    assert "memory_gb" not in trial["extra"] and trial["extra"]["telemetry_points"] == 40


STAND_IN_CUDA = """\
    import sys, types

    class Cuda:  # torch.cuda's interface; the allocator's peak grows after the first reading
        calls = 0
        def is_initialized(self): return True
        def device_count(self): return 2
        def memory_stats(self, index):
            if index == 1:
                return {}  # a device this process never touched
            Cuda.calls += 1
            gb = 2 ** 30
            return {"allocated_bytes.all.current": 1 * gb, "reserved_bytes.all.current": 2 * gb,
                    "allocated_bytes.all.peak": (1.5 if Cuda.calls == 1 else 7.5) * gb}

    sys.modules["torch"] = types.SimpleNamespace(cuda=Cuda())
"""


@pytest.mark.slow
def test_the_peak_gpu_memory_is_the_trials_memory_gb(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(STAND_IN_CUDA)
        + textwrap.dedent("""\
        import time
        import trainer_hooks.wandb as wandb
        run = wandb.init(project="gpu", url=sys.argv[1], spool_dir=sys.argv[2])
        for step in range(30):
            wandb.log({"loss": 1.0})
            time.sleep(0.02)
        wandb.finish()
        print(run.exp_id)
        """)
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LINEAGE_SYSTEM_METRICS": "0.05"}
    done = subprocess.run(
        [sys.executable, str(script), server.url, str(tmp_path / "spool")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    exp_id = done.stdout.split()[-1]
    with httpx.Client(base_url=server.url, timeout=60) as http:
        trial = http.get(f"{API}/projects/gpu/trials/{exp_id}").json()
        series = {s["name"]: s for s in http.get(f"{API}/projects/gpu/trials/{exp_id}/telemetry").json()["series"]}
    assert trial["extra"]["memory_gb"] == 7.5  # the largest peak seen, in GB of 2**30 bytes
    assert {"sys/gpu0/memory_allocated_gb", "sys/gpu0/memory_reserved_gb", "sys/gpu0/memory_peak_gb"} <= set(series)
    assert not any(name.startswith("sys/gpu1/") for name in series)  # an unused device says nothing
    assert set(series["sys/gpu0/memory_reserved_gb"]["value"]) == {2.0}
