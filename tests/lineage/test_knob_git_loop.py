"""Knob memory from a real git loop: an autoresearch-style repository whose commits change
knobs through Python assignments, a YAML and a JSON config and a command-line flag, with a
sweep, a repeat, a crash and a running trial. The knob history (imported with
``--git-repo``, and recorded trial by trial) and the record answers' sweeps and repeats
equal what the commits say."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from lineage import loops
from lineage.formats import autoresearch as ar
from lineage.loops.git import git_details
from lineage.service import Ledger

FILES = {
    "train.py": "MATRIX_LR = 0.04\nDEPTH = 8\nTOTAL_BATCH_SIZE = 2**19\n\n\ndef main():\n    pass\n",
    "config.yaml": "warmup_steps: 100\nschedule: cosine\n",
    "config.json": '{\n  "dropout": 0.1,\n  "seed": 1\n}\n',
    "run.sh": "python train.py --wd 0.0 --seed 1\n",
}


@dataclass(frozen=True)
class Step:
    """One trial of the loop: the edit its commit makes (file, old text, new text)."""

    edit: tuple[str, str, str] | None
    status: str
    metric: float | None
    description: str


STEPS = [
    Step(None, "keep", 1.000, "baseline"),  # 000
    Step(("train.py", "MATRIX_LR = 0.04", "MATRIX_LR = 0.05"), "keep", 0.995, "increase MATRIX_LR to 0.05"),  # 001
    Step(("train.py", "MATRIX_LR = 0.05", "MATRIX_LR = 0.06"), "discard", 0.997, "matrix lr higher still"),  # 002
    Step(("train.py", "2**19", "2**20"), "crash", None, "double batch size (OOM)"),  # 003
    Step(("config.yaml", "warmup_steps: 100", "warmup_steps: 200"), "keep", 0.990, "longer warmup"),  # 004
    Step(("run.sh", "--wd 0.0", "--wd 0.1"), "discard", 0.992, "weight decay on"),  # 005
    Step(("config.json", '"dropout": 0.1', '"dropout": 0.0'), "keep", 0.988, "no dropout"),  # 006
    Step(("train.py", "MATRIX_LR = 0.05", "MATRIX_LR = 0.06"), "discard", 0.989, "retry the higher lr"),  # 007
    Step(("train.py", "MATRIX_LR = 0.05", "MATRIX_LR = 0.07"), "discard", 0.991, "MATRIX_LR a notch up"),  # 008
    Step(("train.py", "DEPTH = 8", "DEPTH = 12"), "keep", 0.985, "deeper model"),  # 009
]


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": "2026-01-02T03:04:05+00:00",
        "GIT_COMMITTER_DATE": "2026-01-02T03:04:05+00:00",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    return subprocess.run(
        ["git", "-c", "user.name=loop", "-c", "user.email=loop@example.org", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout.strip()


class Loop:
    """A repository driven the autoresearch way: commit the change, and reset to the last
    keep unless the trial is kept."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        git(path, "init", "-q", "-b", "main")
        for name, body in FILES.items():
            (path / name).write_text(body, encoding="utf-8")
        git(path, "add", ".")
        self.kept = ""  # the commit of the last keep
        self.kept_exp = ""

    def commit(self, step: Step, message: str) -> str:
        if step.edit is not None:
            name, old, new = step.edit
            text = (self.path / name).read_text(encoding="utf-8")
            assert old in text, (name, old)
            (self.path / name).write_text(text.replace(old, new, 1), encoding="utf-8")
            git(self.path, "add", name)
        git(self.path, "commit", "-q", "--allow-empty", "-m", message)
        return git(self.path, "rev-parse", "--short=7", "HEAD")

    def settle(self, step: Step, sha: str, exp_id: str) -> None:
        if step.status == "keep":
            self.kept, self.kept_exp = sha, exp_id
        else:
            git(self.path, "reset", "-q", "--hard", self.kept)


def _history(ledger: Ledger, slug: str) -> dict[str, list[tuple[str, list[tuple[str, str]]]]]:
    body = ledger.knobs.knob_history(slug)
    return {
        one["knob"]: [(v["value"], [(t["exp_id"], t["status"]) for t in v["trials"]]) for v in one["values"]]
        for one in body["knobs"]
    }


#: what the commits say
EXPECTED = {
    "matrix lr": [
        ("0.05", [("001", "keep")]),
        ("0.06", [("002", "discard"), ("007", "discard")]),
        ("0.07", [("008", "discard")]),
    ],
    "total bs": [("2**20", [("003", "crash")])],  # "double batch size" says it less fully: the patch's knob
    "warmup": [("200", [("004", "keep")])],
    "wd": [("0.1", [("005", "discard")])],
    "dropout": [("0.0", [("006", "keep")])],
    "nlayers": [("12", [("009", "keep")])],
}


def test_an_imported_git_loop_has_the_knob_history_its_commits_say(ledger: Ledger, tmp_path: Path) -> None:
    loop = Loop(tmp_path / "repo")
    lines = ["commit\tval_bpb\tmemory_gb\tstatus\tdescription"]
    for i, step in enumerate(STEPS):
        sha = loop.commit(step, step.description)
        metric = "0.000000" if step.metric is None else f"{step.metric:.6f}"
        lines.append(f"{sha}\t{metric}\t{40 + i}.0\t{step.status}\t{step.description}")
        loop.settle(step, sha, f"{i:03d}")
    ledger.files.import_results("loop", "\n".join(lines) + "\n", fmt=ar.NAME, git_repo=loop.path)
    assert _history(ledger, "loop") == EXPECTED  # memory_gb varies, but is measured: no knob
    sources = {
        t["source"] for one in ledger.knobs.knob_history("loop")["knobs"] for v in one["values"] for t in v["trials"]
    }
    assert sources == {"patch"}


def _record(ledger: Ledger, loop: Loop, step: Step, i: int, *, status: str | None = None) -> dict:  # type: ignore[type-arg]
    sha = loop.commit(step, step.description)
    details = git_details(loop.path, sha, loop.kept or None)
    assert details is not None
    body = {
        "exp_id": f"{i:03d}",
        "status": status or step.status,
        "hypothesis": step.description,
        "parent_exp": loop.kept_exp,
        "extra": {"commit": sha, "_git": details},
    }
    if step.metric is not None and status is None:
        body["core_metric"] = step.metric
    answer = ledger.recording.record_trial("rec", body, similar_prior=True).to_dict()
    loop.settle(step, sha, f"{i:03d}")
    return answer


def _said(answer: dict) -> list[str]:  # type: ignore[type-arg]
    return [one["says"] for one in answer["tried_before"]]


def test_each_record_of_a_git_loop_says_whether_it_is_a_sweep_or_a_repeat(ledger: Ledger, tmp_path: Path) -> None:
    ledger.projects.create_project("rec", metric_name="val_bpb", lower_is_better=True)
    loop = Loop(tmp_path / "repo")
    answers = [_record(ledger, loop, step, i) for i, step in enumerate(STEPS)]
    assert _history(ledger, "rec") == EXPECTED  # the same history, recorded one trial at a time
    said = {f"{i:03d}": _said(answer) for i, answer in enumerate(answers) if answer["tried_before"]}
    assert said == {
        "002": ["sweep of MATRIX_LR: 0.05 keep"],
        "007": ["repeat of exp_002: same patch, discard", "sweep of MATRIX_LR: 0.05 keep, 0.06 discard"],
        "008": ["sweep of MATRIX_LR: 0.05 keep, 0.06 discard/discard"],
    }
    # a running trial is tried already: the same change again is its repeat
    running = Step(
        ("train.py", "MATRIX_LR = 0.05", "MATRIX_LR = 0.08"), "discard", None, "lr 0.08 for the matrix params"
    )
    claimed = _record(ledger, loop, running, 10, status="running")
    assert _said(claimed) == ["sweep of MATRIX_LR: 0.05 keep, 0.06 discard/discard, 0.07 discard"]
    again = _record(ledger, loop, running, 11)
    assert _said(again)[0] == "repeat of exp_010: same patch, running"
    # an idea in words gets the same answers before any commit: the knob it names, its values
    found = ledger.knobs.tried_of_text("rec", "lr 0.08 for the matrix params")[1]
    assert [one.says for one in found] == [
        "repeat of exp_011: MATRIX_LR 0.08, discard (also exp_010 running)",
        "sweep of MATRIX_LR: 0.05 keep, 0.06 discard/discard, 0.07 discard, 0.08 running/discard",
    ]


def test_a_results_files_own_columns_are_knobs_through_import_and_watch(ledger: Ledger, tmp_path: Path) -> None:
    head = "commit\tval_bpb\tmemory_gb\tlr\tdepth\tgpu\tstatus\tdescription\n"
    rows = [
        "a1b2c3d\t1.000000\t40.1\t0.04\t8\tH100\tkeep\tbaseline\n",
        "b2c3d4e\t0.990000\t40.2\t0.05\t8\tH100\tkeep\tlr up\n",
        "c3d4e5f\t0.995000\t40.3\t0.06\t8\tH100\tdiscard\tlr up again\n",
    ]
    path = tmp_path / "results.tsv"
    path.write_text(head + "".join(rows), encoding="utf-8")
    sync = loops.ResultsSync(ledger, "cols", path)
    sync.sync()
    with path.open("a", encoding="utf-8") as out:  # the loop appends: the watcher reads the new row
        out.write("d4e5f6a\t0.985000\t51.0\t0.05\t12\tH100\tkeep\tdeeper\n")
    sync.sync()
    history = _history(ledger, "cols")
    assert history == {
        "lr": [("0.04", [("000", "keep")]), ("0.05", [("001", "keep")]), ("0.06", [("002", "discard")])],
        "nlayers": [("8", [("000", "keep")]), ("12", [("003", "keep")])],  # depth is n_layer
        "gpu": [("H100", [("000", "keep")])],  # set once, at the root: never varied
    }
    sources = {
        t["source"] for one in ledger.knobs.knob_history("cols")["knobs"] for v in one["values"] for t in v["trials"]
    }
    assert sources == {"column"}


@pytest.mark.parametrize("size", [700_000])  # extra holds at most 1 MB (lineage.field_limits)
def test_a_patch_of_a_megabyte_never_fails_its_record(ledger: Ledger, size: int) -> None:
    ledger.projects.create_project("big", lower_is_better=True)
    blob = "".join(f"-LINE_{i} = {i}\n+LINE_{i} = {i + 1}\n" for i in range(size // 30))
    patch = "diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n" + blob
    answer = ledger.recording.record_trial(
        "big",
        {"status": "keep", "core_metric": 1.0, "hypothesis": "rewrite", "extra": {"_git": {"patch": patch}}},
        similar_prior=True,
    )
    assert answer.created
    stored = ledger.knobs.knob_history("big")["knobs"]
    assert 0 < len(stored) <= 64  # read up to its bounds, no further


def test_the_prompt_carries_the_knobs_tried_most_informative_first(ledger: Ledger, tmp_path: Path) -> None:
    loop = Loop(tmp_path / "repo")
    lines = ["commit\tval_bpb\tmemory_gb\tstatus\tdescription"]
    for i, step in enumerate(STEPS):
        sha = loop.commit(step, step.description)
        metric = "0.000000" if step.metric is None else f"{step.metric:.6f}"
        lines.append(f"{sha}\t{metric}\t40.0\t{step.status}\t{step.description}")
        loop.settle(step, sha, f"{i:03d}")
    ledger.files.import_results("loop", "\n".join(lines) + "\n", fmt=ar.NAME, git_repo=loop.path)
    _, text = ledger.agent.prompt_document("loop", face="mcp")
    section = text.split("## Knobs tried\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert section == [
        "- DEPTH: 12 keep (best)",  # the best's value first
        "- MATRIX_LR: 0.05 keep, 0.06 discard×2, 0.07 discard",  # then kept values, most tried first
        "- dropout: 0.0 keep",
        "- warmup_steps: 200 keep",
        "- TOTAL_BATCH_SIZE: 2**20 crash",  # then the values that crashed
        "- wd: 0.1 discard",
    ]


def test_the_knobs_page_plots_values_from_patches(ledger: Ledger, tmp_path: Path) -> None:
    loop = Loop(tmp_path / "repo")
    lines = ["commit\tval_bpb\tmemory_gb\tstatus\tdescription"]
    for i, step in enumerate(STEPS):
        sha = loop.commit(step, step.description)
        metric = "0.000000" if step.metric is None else f"{step.metric:.6f}"
        lines.append(f"{sha}\t{metric}\t40.0\t{step.status}\t{step.description}")
        loop.settle(step, sha, f"{i:03d}")
    ledger.files.import_results("loop", "\n".join(lines) + "\n", fmt=ar.NAME, git_repo=loop.path)
    view = ledger.browse.knobs("loop", ["knob.matrix lr"]).as_dict()  # the file holds no knob column
    assert view["axes"][0]["kind"] == "number"
    plotted = {p["exp_id"]: p["values"][0] for p in view["points"] if p["values"][0] is not None}
    assert plotted == {"001": 0.05, "002": 0.06, "007": 0.06, "008": 0.07}
    assert {"knob.total bs", "knob.warmup", "knob.wd"} <= {c["key"] for c in view["choices"]}
    crash = ledger.browse.knobs("loop", ["knob.total bs"]).as_dict()
    assert [(p["exp_id"], p["status"], p["values"][0]) for p in crash["points"] if p["values"][0]] == [
        ("003", "crash", 2.0**20)
    ]
