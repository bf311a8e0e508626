"""Many agents, one ledger (issue 33): the claims soak.

Real ``lineage serve`` processes (two on one PostgreSQL database; one on SQLite) and
eight agent processes (``tests/swarm_agent.py``) speaking MCP Streamable HTTP through the
SDK's client, each on one of the servers. They draw ideas from one pool in which a third
are duplicates or paraphrases of another, claim them (the project refuses duplicate
claims), heartbeat, finish them; three crash mid-lease and their claims lapse. Then, from
the agents' logs and the database:

* no idea ran twice while claimed (no two agents' held intervals of one idea overlap);
* every refusal named a running claim of the same idea;
* every lapsed lease ended as ``harness_abort`` with the lapse note;
* every finished claim holds its result (metric, verdict, owner);
* the trials are exactly the claims made (refusals stored nothing), none still running;
* every trial's chain runs from the baseline through its parents.

Nothing is timed: a loaded machine only makes the run longer (a live claim that lapsed
anyway is logged as ``lost`` by its agent and held to the lapse rule like a crash).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from lineage.domain import FailureLabel
from lineage.service import Ledger
from tests.servers import ROOT, serving
from tests.swarm_agent import CRASH_STATUS

pytestmark = pytest.mark.slow

AGENTS = 8
#: agent index -> the claim it dies in
CRASHES = {1: 2, 4: 1, 6: 2}
LEASE_S = 10
#: the pool: 16 ideas and 8 more texts of them (a third of the pool): paraphrases, ML
#: spellings of one concept, and exact repeats
IDEAS = {
    "lr": ["raise the learning rate to 0.05", "raise the LR to 0.05", "Raise the learning-rate to 0.05"],
    "warm": ["cosine warmup schedule over 500 steps", "cosine warm-up schedule over 500 steps"],
    "wd": ["weight decay 0.1 on embeddings", "weight-decay 0.1 on embeddings"],
    "bs": ["double the batch size to 512", "double the batch-size to 512"],
    "qk": ["qk-norm in every attention layer", "QK norm in every attention layer"],
    "drop": ["dropout 0.1 after the MLP", "dropout of 0.1 after the MLP"],
    "rope": ["rotary embeddings with base 50000", "rotary embeddings with base 50000"],
    "muon": ["muon optimizer for matrix parameters"],
    "ema": ["exponential moving average of the weights"],
    "clip": ["gradient clipping at norm 1.0"],
    "swiglu": ["SwiGLU activation in the feed-forward block"],
    "tie": ["untie input and output embeddings"],
    "depth": ["twelve layers instead of eight"],
    "heads": ["sixteen attention heads"],
    "label": ["label smoothing 0.1"],
    "seq": ["sequence length 2048 with sliding window"],
}
POOL = [{"key": key, "text": text} for key, texts in IDEAS.items() for text in texts]


@pytest.fixture
def servers(fresh_db_url: str, backend: str, tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """The database (migrated, project ``swarm`` refusing duplicate claims, a baseline)
    and its servers: two on PostgreSQL, one on SQLite."""
    ledger = Ledger.open(fresh_db_url)
    ledger.projects.create_project("swarm", lower_is_better=True, settings={"duplicate_claims": "refuse"})
    ledger.recording.record_trial("swarm", {"status": "baseline", "core_metric": 1.0, "hypothesis": "baseline"})
    ledger.close()
    with ExitStack() as stack:
        count = 2 if backend == "postgres" else 1
        urls = [stack.enter_context(serving(tmp_path, "--db", fresh_db_url)) for _ in range(count)]
        yield fresh_db_url, urls


def _run_agents(urls: list[str], tmp_path: Path) -> list[dict[str, Any]]:
    """The agents, all at once; their events, after each exited as it should."""
    pool = tmp_path / "pool.json"
    pool.write_text(json.dumps(POOL))
    log = tmp_path / "agents.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    procs = []
    for i in range(AGENTS):
        args = ["--url", urls[i % len(urls)], "--project", "swarm", "--agent", f"agent-{i}", "--pool", str(pool)]
        args += ["--log", str(tmp_path / f"agent-{i}.jsonl"), "--seed", str(i), "--lease", str(LEASE_S)]
        args += ["--crash-at", str(CRASHES.get(i, 0))]
        out = open(tmp_path / f"agent-{i}.out", "w")  # noqa: SIM115 - closed with the process
        procs.append(
            (
                i,
                out,
                subprocess.Popen(
                    [sys.executable, "-m", "tests.swarm_agent", *args],
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                ),
            )
        )
    events = []
    for i, out, proc in procs:
        code = proc.wait(timeout=600)
        out.close()
        said = (tmp_path / f"agent-{i}.out").read_text()[-3000:]
        lines = (tmp_path / f"agent-{i}.jsonl").read_text().splitlines()
        got = [json.loads(line) for line in lines]
        crashed = any(event["event"] == "crashed" for event in got)
        # an agent that crashes dies with its status; one whose crash claim was refused or lost ends cleanly
        assert code == (CRASH_STATUS if crashed else 0), f"agent-{i} exited {code}:\n{said}"
        events += got
    log.write_text("\n".join(json.dumps(event) for event in events))
    return events


def _settled(url: str) -> None:
    """Poll (reads end lapsed claims) until nothing runs; the lapses need one lease."""
    deadline = time.monotonic() + 180
    while httpx.get(f"{url}/api/v1/projects/swarm/running", timeout=60).json()["items"]:
        assert time.monotonic() < deadline, "claims still running three minutes after the agents ended"
        time.sleep(1)


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_agents_claiming_from_one_pool_never_run_an_idea_twice(servers, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db_url, urls = servers
    events = _run_agents(urls, tmp_path)
    _settled(urls[-1])
    by = defaultdict(list)
    for event in events:
        by[event["event"]].append(event)
    assert by["claimed"] and by["finished"] and by["crashed"]

    # no idea ran twice while claimed: the held intervals of one idea never overlap
    held = by["finished"] + by["crashed"] + by["lost"]
    assert sorted(e["exp_id"] for e in held) == sorted(e["exp_id"] for e in by["claimed"])
    for key in IDEAS:
        spans = sorted((e["claimed_at"], e["held_until"], e["agent"], e["exp_id"]) for e in held if e["key"] == key)
        for first, second in zip(spans, spans[1:], strict=False):
            assert first[1] < second[0], f"idea {key!r} ran twice while claimed: {first} and {second}"

    ledger = Ledger.open(db_url)
    try:
        trials = {trial.exp_id: trial for trial in ledger.trials.list_trials("swarm")}
        key_of = {e["exp_id"]: e["key"] for e in by["claimed"]}
        # every refusal named a running claim of the same idea, held by another agent
        for refusal in by["refused"]:
            named = refusal["error"]["existing"]
            assert key_of.get(named["exp_id"]) == refusal["key"], refusal
            assert named["owner"] != refusal["agent"]
        # trial counts equal the work done: the baseline and one trial per claim, none running
        assert sorted(trials) == sorted(["000", *key_of])
        assert all(trial.status is not FailureLabel.RUNNING for trial in trials.values())
        # every finished claim holds its result
        for done in by["finished"]:
            trial = trials[done["exp_id"]]
            assert trial.core_metric == done["core_metric"] and trial.status.value == done["status"]
            assert trial.status in (FailureLabel.KEEP, FailureLabel.DISCARD)
            assert trial.hypothesis == next(e["text"] for e in by["claimed"] if e["exp_id"] == done["exp_id"])
        # every lapsed lease ended as harness_abort, with the note
        for ended in by["crashed"] + by["lost"]:
            trial = trials[ended["exp_id"]]
            assert trial.status is FailureLabel.HARNESS_ABORT and trial.core_metric is None
            assert f"lease {LEASE_S} s" in trial.notes and "lease lapsed" in trial.notes
        owners = {e["exp_id"]: e["agent"] for e in by["claimed"]}
        with ledger.store.read() as conn:
            project = ledger.store.projects.project(conn, "swarm")
            for exp_id, owner in owners.items():
                assert ledger.store.leases.holder(conn, project, exp_id) == owner
        # chains are consistent: each runs from the baseline through stored parents
        for exp_id, trial in trials.items():
            chain = ledger.trials.chain("swarm", exp_id)
            assert chain[0].exp_id == "000" and chain[-1].exp_id == exp_id
            for parent, child in zip(chain, chain[1:], strict=False):
                assert child.parent_exp == parent.exp_id
                assert parent.status in (FailureLabel.BASELINE, FailureLabel.KEEP)
        assert ledger.projects.project("swarm").trial_count == len(trials)
    finally:
        ledger.close()
