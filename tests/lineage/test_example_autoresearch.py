"""examples/autoresearch/README.md, step by step, with real processes: the fake loop
appends rows, ``lineage watch`` follows the file into ./lineage.db, ``lineage serve``
shows the project in the pages, and the CLI steps of the README answer from the same file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port, stop

pytest.importorskip("watchfiles")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ROWS = 40
#: Upper bounds, generous because three processes share a busy 2-core machine (a step
#: that is done sooner goes on at once): one step of the README, one HTTP request.
STEP_TIMEOUT_S = 300.0
HTTP_TIMEOUT_S = 30.0


def lineage(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        check=True,
    )


def poll(what: str, check, timeout: float = STEP_TIMEOUT_S) -> None:  # type: ignore[no-untyped-def]
    """Wait until ``check()`` holds (a request that fails or times out counts as not yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except (httpx.TransportError, subprocess.CalledProcessError):
            pass
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_the_readme_steps_watch_a_fake_loop_and_show_it_in_the_pages(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("LINEAGE_DATABASE_URL", None)
    results = tmp_path / "results.tsv"
    port = free_port()
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=HTTP_TIMEOUT_S)
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"{len(started)}.log").open("wb")  # a file: a full pipe would stall the process
        proc = subprocess.Popen([sys.executable, *args], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        started.append(proc)
        return proc

    try:
        loop = start(
            str(ROOT / "examples/autoresearch/fake_loop.py"),
            str(results),
            "--every",
            "0.05",
            "--count",
            str(ROWS),
            "--seed",
            "3",
        )
        start("-m", "api.cli", "watch", str(results), "--project", "demo-loop")
        start("-m", "api.cli", "serve", "--port", str(port), "--log-level", "warning")
        poll("the server", lambda: http.get("/health").status_code == 200)
        # while the loop runs, the dashboard already shows what has arrived
        poll("the project page", lambda: http.get("/projects/demo-loop").status_code == 200)
        assert loop.wait(timeout=STEP_TIMEOUT_S) == 0
        poll(f"all {ROWS} rows", lambda: http.get("/api/v1/projects/demo-loop").json()["trial_count"] == ROWS)

        project = http.get("/api/v1/projects/demo-loop").json()
        assert project["metric_name"] == "val_bpb" and project["lower_is_better"] is True
        dashboard = http.get("/projects/demo-loop").text
        assert "val_bpb" in dashboard and 'class="best-line"' in dashboard
        tree = http.get("/projects/demo-loop/tree")
        assert tree.status_code == 200 and tree.text.count('class="node') >= 1
        assert http.get("/projects/demo-loop/trials").status_code == 200

        best = json.loads(lineage(tmp_path, env, "best", "--project", "demo-loop", "--format", "json").stdout)
        crashes = [line for line in results.read_text().splitlines() if "\tcrash\t" in line]
        assert crashes, "the seeded loop writes crash rows"
        assert best["status"] in ("keep", "baseline") and best["core_metric"] > 0
        kept = [
            float(line.split("\t")[1]) for line in results.read_text().splitlines()[1:] if line.split("\t")[3] == "keep"
        ]
        assert best["core_metric"] == min(kept)
        assert "val_bpb" in lineage(tmp_path, env, "knowledge", "--project", "demo-loop").stdout
        lineage(tmp_path, env, "export", "--project", "demo-loop", "--format", "autoresearch", "-o", "copy.tsv")
        assert (tmp_path / "copy.tsv").read_bytes() == results.read_bytes()
    except AssertionError as failure:
        for index, proc in enumerate(started):  # what the processes said, to tell which step failed
            said = (tmp_path / f"{index}.log").read_text(errors="replace")[-2000:]
            failure.add_note(f"{proc.args[1:3]} exit {proc.poll()}: {said}")
        raise
    finally:
        http.close()
        for proc in reversed(started):
            if proc.poll() is None:
                stop(proc)
