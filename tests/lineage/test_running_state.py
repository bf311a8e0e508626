"""``running``: a trial under way is a state, not a failure and never the best (issue 31).

The domain rules here; the lease (heartbeat, lapse) in ``test_leases.py``."""

from __future__ import annotations

import io

import pytest

from lineage.domain import NO_RESULT_LABELS, BestPolicy, FailureLabel, is_no_result
from lineage.service import Ledger


def _record(ledger: Ledger, status: str, metric: float | None = None, **fields: object) -> str:
    body = {"status": status, "core_metric": metric, **fields}
    return ledger.recording.record_trial("p", body).trial.exp_id


def test_running_is_neither_informational_nor_settled_nor_a_no_result() -> None:
    running = FailureLabel.RUNNING
    assert not running.is_settled and not running.is_informational
    assert running not in NO_RESULT_LABELS
    assert not is_no_result(0.0, running)
    for policy in BestPolicy:
        assert running.value not in policy.eligible_statuses()
        assert running.value not in policy.fallback_statuses()
        assert FailureLabel.CRASH.value not in policy.fallback_statuses()


@pytest.mark.parametrize("policy", [BestPolicy.KEPT, BestPolicy.FIELDKIT])
def test_a_running_trial_with_the_best_metric_is_never_the_best(ledger: Ledger, policy: BestPolicy) -> None:
    ledger.projects.create_project("p", best_policy=policy)
    _record(ledger, "baseline", 1.0)
    running = _record(ledger, "running", 0.1)  # a trainer may report a metric while it runs
    best = ledger.trials.best("p")
    assert best is not None and best.exp_id == "000"
    assert running not in [t.exp_id for t in ledger.trials.chain("p")]


def test_a_project_with_only_a_running_trial_has_no_best(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    _record(ledger, "running")
    assert ledger.trials.best("p") is None
    assert ledger.trials.chain("p") == []
    summary = ledger.agent.summary("p").to_dict()
    assert summary["best"] is None and summary["baseline"] is None
    assert summary["trend"] == "starting"
    assert summary["by_status"] == {"running": 1}
    assert summary["keep_rate"] is None  # a running trial is not judged yet


def test_a_first_trial_crash_is_never_the_best_nor_the_root_of_the_kept_chain(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    _record(ledger, "crash", 0.0)
    assert ledger.trials.best("p") is None
    assert ledger.trials.chain("p") == []
    # the next trial's parent is not defaulted to the crash: the kept chain starts at the keep
    kept = ledger.recording.record_trial("p", {"status": "keep"}).trial
    assert kept.parent_exp == ""
    best = ledger.trials.best("p")
    assert best is not None and best.exp_id == kept.exp_id  # unscored: the first that may stand in
    assert [t.exp_id for t in ledger.trials.chain("p")] == [kept.exp_id]
    assert ledger.agent.summary("p").to_dict()["trend"] == "plateauing"


def test_a_running_trial_is_not_counted_as_a_failure_or_a_no_result(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    _record(ledger, "baseline", 1.0)
    _record(ledger, "keep", 0.9)
    _record(ledger, "running", 0.0)
    stored = ledger.trials.trial("p", "002")
    assert stored.status is FailureLabel.RUNNING and stored.core_metric == 0.0  # 0 is a value, not "no result"
    summary = ledger.agent.summary("p").to_dict()
    assert summary["keep_rate"] == 1.0
    assert summary["crash_streak"] == 0


def test_the_autoresearch_export_leaves_a_running_trial_out(ledger: Ledger) -> None:
    ledger.projects.create_project("p", metric_name="val_bpb")
    _record(ledger, "keep", 0.99, hypothesis="baseline")
    before = io.StringIO()
    ledger.files.export_results("p", before)
    _record(ledger, "running", hypothesis="training now")
    after = io.StringIO()
    assert ledger.files.export_results("p", after) == 1
    assert after.getvalue() == before.getvalue()


def test_the_session_start_prompt_lists_the_trials_running_now(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    _record(ledger, "baseline", 1.0)
    quiet = ledger.agent.prompt_document("p", face="mcp")[1]
    assert "Running now" not in quiet
    exp_id = _record(ledger, "running", hypothesis="ppo lr 3e-4\n## not a heading")
    ledger.leases.heartbeat("p", exp_id, owner="run-7@gpu3")
    prompt = ledger.agent.prompt_document("p", face="mcp")[1]
    section = prompt[prompt.index("## Running now") : prompt.index("## Recording")]
    (line,) = [line for line in section.splitlines() if line.startswith("- exp")]
    assert line.startswith(f"- exp {exp_id} by run-7@gpu3, since ") and "last heartbeat" in line
    assert line.endswith("ppo lr 3e-4 ## not a heading")  # folded to one line: no heading slips in
    assert "Current best: `000`" in prompt


def test_find_similar_and_similar_prior_call_a_running_trial_running(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    _record(ledger, "running", hypothesis="turn-group normalization with alpha 0.3 on deep turns")
    (found,) = ledger.agent.find_similar("p", "alpha 0.3 turn group normalization")
    assert found.status == "running"
    prior = ledger.recording.record_trial(
        "p", {"status": "discard", "hypothesis": "alpha 0.3 turn group norm on deep turns"}, similar_prior=True
    ).similar_prior
    assert [s.status for s in prior] == ["running"]
