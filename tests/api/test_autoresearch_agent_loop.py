"""A scripted karpathy/autoresearch loop, its ``program.md`` followed to the letter, with
the ledger beside it: a temp git repository (edit ``train.py``, commit, "train", append the
row to the untracked ``results.tsv``, ``git reset`` on a discard or crash), ``lineage
watch --git-repo`` following the file, and ``lineage serve`` to which some trials are
also recorded over HTTP as the prompt says (with their commit, before the row is
appended). At the end: as many trials as rows, no duplicate, and ``lineage export
--format autoresearch`` byte-identical to the file."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from lineage.service import Ledger
from tests.api.conftest import LINEAGE, ROOT

pytestmark = pytest.mark.slow

HEADER = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n"
#: (status, val_bpb, memory_gb, description, also recorded over HTTP)
EXPERIMENTS = [
    ("keep", 0.997900, 44.0, "baseline", False),
    ("keep", 0.993200, 44.2, "increase MATRIX_LR to 0.04", True),
    ("discard", 1.005000, 44.0, "switch to GeLU activation", False),
    ("crash", 0.0, 0.0, "double model width (OOM)", True),
    ("keep", 0.990100, 44.1, "add 200 warmup steps", False),
    ("discard", 0.991000, 44.1, "weight decay 0.2", True),
    ("keep", 0.987600, 45.3, "muon lr 0.05", True),
    ("crash", 0.0, 0.0, "flash attention variant (segfault)", False),
    ("discard", 0.988000, 45.3, "batch size 1024", False),
    ("keep", 0.985000, 45.0, "embedding lr 0.3", True),
]


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "agent",
        "GIT_AUTHOR_EMAIL": "agent@example.org",
        "GIT_COMMITTER_NAME": "agent",
        "GIT_COMMITTER_EMAIL": "agent@example.org",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()


def _wait(check, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_an_autoresearch_loop_recorded_both_ways_is_its_file(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "nanochat"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "autoresearch/run1")
    (repo / "train.py").write_text("LR = 0.02\n")
    _git(repo, "add", "train.py")
    _git(repo, "commit", "-q", "-m", "baseline")
    results = repo / "results.tsv"
    results.write_text(HEADER)  # program.md: the header first, untracked
    db = str(tmp_path / "ledger.db")
    Ledger.open(db).close()
    server = serve(db)
    log = (tmp_path / "watch.log").open("wb")
    watcher = subprocess.Popen(
        [*LINEAGE, "--db", db, "watch", str(results), "-p", "nano", "--git-repo", str(repo), "--poll"],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    ledger = Ledger.open(db)
    api = f"{server.url}/api/v1/projects/nano"
    try:
        with httpx.Client(timeout=30) as client:
            for i, (status, metric, memory, description, over_http) in enumerate(EXPERIMENTS):
                if i:  # program.md: edit train.py, commit, run
                    (repo / "train.py").write_text(f"LR = 0.02\n# experiment {i}: {description}\n" + "x = 1\n" * i)
                    _git(repo, "commit", "-qam", description)
                commit = _git(repo, "rev-parse", "--short=7", "HEAD")
                if over_http:  # as the prompt says: POST with an Idempotency-Key, the commit in extra
                    prompt = client.get(f"{api}/prompt").text
                    assert "Idempotency-Key" in prompt and '"commit": "<the trial\'s commit>"' in prompt
                    posted = client.post(
                        f"{api}/trials",
                        headers={"Idempotency-Key": str(uuid.uuid4())},
                        json={
                            "status": status,
                            "core_metric": metric,
                            "hypothesis": description,
                            "extra": {"commit": commit},
                        },
                    )
                    assert posted.status_code == 201, posted.text
                    assert posted.json()["trial"]["exp_id"] == f"{i:03d}"
                with results.open("a") as fh:  # program.md: log the row
                    fh.write(f"{commit}\t{metric:.6f}\t{memory:.1f}\t{status}\t{description}\n")
                if status != "keep":  # program.md: discard and crash go back to where we were
                    _git(repo, "reset", "-q", "--hard", "HEAD~1")
                _wait(lambda i=i: _synced(ledger, i + 1))
    finally:
        os.killpg(watcher.pid, 15)
        watcher.wait(timeout=30)
        log.close()
    output = (tmp_path / "watch.log").read_text()
    assert "linked" in output and "warning" not in output, output

    trials = list(ledger.tables.stream_trials("nano"))
    commits = [t.extra.get("commit") for t in trials]
    assert len(trials) == len(EXPERIMENTS) and len(set(commits)) == len(commits)
    assert all(t.extra.get("_git", {}).get("diffstat") for t in trials)
    assert [t.exp_id for t in ledger.trials.chain("nano", ledger.trials.best("nano").exp_id)] == [
        "000",
        "001",
        "004",
        "006",
        "009",
    ]  # type: ignore[union-attr]
    exported = subprocess.run(
        [*LINEAGE, "--db", db, "export", "-p", "nano", "--format", "autoresearch"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    assert exported == results.read_bytes()
    prompt = ledger.agent.prompt_document("nano", face="http", base_url=server.url)[1]
    assert f"--append-tsv {results.resolve()}" in prompt and "| change |" in prompt and "(1 file)" in prompt
    ledger.close()


def _synced(ledger: Ledger, rows: int) -> bool:
    """The watcher has the file's ``rows`` rows (each trial holds its row's text)."""
    try:
        trials = list(ledger.tables.stream_trials("nano"))
    except Exception:  # noqa: BLE001 - the project does not exist until the first row
        return False
    return len(trials) == rows and all("_row" in t.extra for t in trials)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
