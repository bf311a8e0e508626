"""The recording rules every writer shares (``lineage.service.recording.prepare_record``),
on SQLite and PostgreSQL: a parent left out is the current best, a root is explicit, a
failure's 0 or sentinel is no result, a keep without a metric is accepted with a warning,
and the project's metric under its own name is read or refused."""

from __future__ import annotations

import pytest

from lineage.chain import walk_chain
from lineage.errors import InvalidInput
from lineage.service import Ledger


def _chain(ledger: Ledger, slug: str) -> list[str]:
    best = ledger.trials.best(slug)
    assert best is not None
    return [t.exp_id for t in ledger.trials.chain(slug, best.exp_id)]


def test_a_parent_left_out_is_the_branch_tip_and_the_answer_says_so(ledger: Ledger) -> None:
    """The tip is the most recent keep or baseline (a git loop's HEAD), not the best: a
    keep that does not improve ("simpler code? keep") is the next trial's parent."""
    ledger.projects.create_project("p", metric_name="val_bpb", lower_is_better=True)
    first = ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})
    assert first.trial.parent_exp == "" and not first.parent_defaulted  # nothing to fork from yet
    kept = ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.9, "hypothesis": "a"})
    assert kept.parent_defaulted and kept.trial.parent_exp == "000"
    assert not any("parent" in w for w in kept.warnings)  # a field, not a warning
    assert kept.to_dict()["parent_defaulted"] is True
    worse = ledger.recording.record_trial("p", {"status": "discard", "core_metric": 0.95})
    assert worse.trial.parent_exp == "001"  # the tip, not the last trial
    crash = ledger.recording.record_trial("p", {"status": "crash", "core_metric": 0})
    assert crash.trial.parent_exp == "001"
    simpler = ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.92, "hypothesis": "simpler"})
    assert simpler.trial.parent_exp == "001" and not simpler.is_new_best
    after = ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.8})
    assert after.trial.parent_exp == "004"  # the last keep, though 001 is still the best there
    assert ledger.trials.best("p").exp_id == "005"
    assert _chain(ledger, "p") == ["000", "001", "004", "005"]


def test_without_a_keep_a_parent_left_out_is_a_root(ledger: Ledger) -> None:
    """A project whose trials are all failures has no tip: the next trial is a root, so a
    first-trial crash never roots the kept chain."""
    ledger.projects.create_project("p")
    ledger.recording.record_trial("p", {"status": "crash", "core_metric": 0})
    kept = ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.5})
    assert kept.trial.parent_exp == "" and not kept.parent_defaulted
    assert _chain(ledger, "p") == ["001"]


def test_a_batch_and_a_group_fork_from_the_tip_their_earlier_items_move(ledger: Ledger) -> None:
    ledger.projects.create_project("p", lower_is_better=True)
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})
    batch = ledger.recording.record_trials(
        "p",
        [
            {"status": "keep", "core_metric": 1.1},  # kept, not better
            {"status": "discard", "core_metric": 0.5},
            {"status": "keep", "core_metric": 0.9},
        ],
    )
    assert [r.trial.parent_exp for r in batch.results] == ["000", "001", "001"]
    from lineage.service.group_commit import RecordRequest

    outcomes = ledger.recording.record_group(
        "p", [RecordRequest({"status": "keep", "core_metric": 2.0}), RecordRequest({"status": "discard"})]
    )
    assert [o.trial.parent_exp for o in outcomes] == ["003", "004"]  # type: ignore[union-attr]


@pytest.mark.parametrize("root", ["", None])
def test_an_explicit_empty_parent_records_a_root(ledger: Ledger, root: str | None) -> None:
    ledger.projects.create_project("p")
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})
    result = ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.5, "parent_exp": root})
    assert result.trial.parent_exp == "" and not result.parent_defaulted
    assert not any("parent" in w for w in result.warnings)


def test_an_explicit_parent_is_kept(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})
    ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.5})
    result = ledger.recording.record_trial("p", {"status": "discard", "core_metric": 0.7, "parent_exp": "000"})
    assert result.trial.parent_exp == "000" and not result.parent_defaulted


def test_a_retry_of_a_defaulted_parent_is_the_same_trial(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})
    body = {"status": "keep", "core_metric": 0.5, "hypothesis": "x"}
    first = ledger.recording.record_trial("p", body, idempotency_key="k1")
    ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.4})  # the best moves on
    retry = ledger.recording.record_trial("p", body, idempotency_key="k1")
    assert not retry.created and retry.trial.exp_id == first.trial.exp_id and retry.parent_defaulted
    by_id = ledger.recording.record_trial("p", {**body, "exp_id": first.trial.exp_id})
    assert not by_id.created and by_id.trial.parent_exp == "000"
    assert ledger.projects.project("p").trial_count == 3


@pytest.mark.parametrize("status", ["crash", "preflight_crash", "train_budget_overrun", "harness_abort"])
@pytest.mark.parametrize("metric", [0, 0.0, -999, -9999.0])
def test_a_failure_with_zero_or_a_sentinel_is_no_result(ledger: Ledger, status: str, metric: float) -> None:
    ledger.projects.create_project("p", lower_is_better=True)
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 0.99})
    result = ledger.recording.record_trial("p", {"status": status, "core_metric": metric})
    trial = result.trial
    assert trial.core_metric is None and trial.delta_vs_best is None
    assert trial.extra["_reported_metric"] == metric and type(trial.extra["_reported_metric"]) is type(metric)
    assert not result.is_new_best and ledger.trials.best("p").exp_id == "000"
    assert any("means no result" in w for w in result.warnings)


def test_a_sentinel_on_a_keep_is_no_result_and_a_real_zero_on_a_keep_is_a_result(ledger: Ledger) -> None:
    ledger.projects.create_project("p", lower_is_better=True)
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 0.99})
    sentinel = ledger.recording.record_trial("p", {"status": "keep", "core_metric": -999})
    assert sentinel.trial.core_metric is None and not sentinel.is_new_best
    zero = ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0})
    assert zero.trial.core_metric == 0 and zero.is_new_best
    discard = ledger.recording.record_trial("p", {"status": "discard", "core_metric": 0.5})
    assert discard.trial.core_metric == 0.5  # a discard's metric is a result


def test_a_crash_the_autoresearch_way_is_not_an_improvement_in_the_prompt(ledger: Ledger) -> None:
    ledger.projects.create_project("p", metric_name="val_bpb", lower_is_better=True)
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 0.9932})
    ledger.recording.record_trial("p", {"status": "crash", "core_metric": 0})
    text = ledger.agent.render_prompt("p", specialist="s")
    assert "-0.99" not in text


def test_a_keep_without_a_metric_is_accepted_with_a_warning(ledger: Ledger) -> None:
    ledger.projects.create_project("p", metric_name="val_bpb")
    result = ledger.recording.record_trial("p", {"status": "keep", "hypothesis": "forgot the metric"})
    assert result.created and result.trial.core_metric is None
    assert any("without a metric can never be the best" in w and "val_bpb" in w for w in result.warnings)
    quiet = ledger.recording.record_trial("p", {"status": "discard"})
    assert not quiet.warnings[1:] and not any("without a metric" in w for w in quiet.warnings)


def test_the_metric_under_its_own_name_is_read_as_core_metric(ledger: Ledger) -> None:
    ledger.projects.create_project("s", metric_name="score", lower_is_better=False)
    result = ledger.recording.record_trial("s", {"status": "baseline", "score": 0.71})
    assert result.trial.core_metric == 0.71 and "score" not in result.trial.extra
    assert any("score is this project's metric" in w for w in result.warnings)
    same = ledger.recording.record_trial("s", {"status": "keep", "score": 0.8, "core_metric": 0.8})
    assert same.trial.core_metric == 0.8
    with pytest.raises(InvalidInput) as conflict:
        ledger.recording.record_trial("s", {"status": "keep", "score": 0.9, "core_metric": 0.7})
    assert conflict.value.field == "score" and "conflicts with core_metric" in conflict.value.message
    with pytest.raises(InvalidInput) as typed:
        ledger.recording.record_trial("s", {"status": "keep", "score": "high"})
    assert typed.value.field == "score"
    with pytest.raises(InvalidInput) as unknown:
        ledger.recording.record_trial("s", {"status": "keep", "accuracy": 0.9})
    assert unknown.value.field == "accuracy"
    assert ledger.projects.project("s").trial_count == 2


def test_val_bpb_is_the_metric_of_a_val_bpb_project(ledger: Ledger) -> None:
    ledger.projects.create_project("v", metric_name="val_bpb", lower_is_better=True)
    read = ledger.recording.record_trial("v", {"status": "baseline", "val_bpb": 0.998})
    assert read.trial.core_metric == 0.998 == read.trial.val_bpb
    mirrored = ledger.recording.record_trial("v", {"status": "keep", "core_metric": 0.99})
    assert mirrored.trial.val_bpb == 0.99
    with pytest.raises(InvalidInput) as conflict:
        ledger.recording.record_trial("v", {"status": "keep", "core_metric": 0.98, "val_bpb": 0.97})
    assert conflict.value.field == "val_bpb"
    crash = ledger.recording.record_trial("v", {"status": "crash", "val_bpb": 0.0})
    assert crash.trial.core_metric is None and crash.trial.val_bpb is None


def test_val_bpb_is_its_own_field_where_the_metric_is_another(ledger: Ledger) -> None:
    ledger.projects.create_project("f")  # core_metric: fieldkit's two columns differ
    result = ledger.recording.record_trial("f", {"status": "keep", "core_metric": 34.9, "val_bpb": 1.2})
    assert (result.trial.core_metric, result.trial.val_bpb) == (34.9, 1.2) and not result.warnings


def test_updates_follow_the_same_rules(ledger: Ledger) -> None:
    ledger.projects.create_project("p", metric_name="score", lower_is_better=False)
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 0.5})
    planned = ledger.recording.record_trial("p", {"status": "harness_abort"}).trial
    finished = ledger.recording.update_trial("p", planned.exp_id, {"status": "crash", "core_metric": 0})
    assert finished.core_metric is None and finished.extra["_reported_metric"] == 0
    scored = ledger.recording.update_trial("p", planned.exp_id, {"status": "keep", "score": 0.6})
    assert scored.core_metric == 0.6 and ledger.trials.best("p").exp_id == planned.exp_id
    notes_only = ledger.recording.update_trial("p", planned.exp_id, {"notes": "n"})
    assert notes_only.core_metric == 0.6
    with pytest.raises(InvalidInput) as unknown:
        ledger.recording.update_trial("p", planned.exp_id, {"colour": "red"})
    assert unknown.value.field == "colour"


def test_the_kept_chain_is_the_chain_to_the_best_with_no_parent_fields(ledger: Ledger) -> None:
    """The issue's case: baseline, then keeps, discards and crashes, none naming a parent."""
    ledger.projects.create_project("nano", metric_name="val_bpb", lower_is_better=True)
    steps = [
        ("baseline", 0.998),
        ("keep", 0.99),
        ("discard", 0.995),
        ("crash", 0),
        ("keep", 0.985),
        ("crash", -999),
        ("discard", 0.99),
        ("keep", 0.98),
    ]
    for status, metric in steps:
        ledger.recording.record_trial(
            "nano", {"status": status, "core_metric": metric, "hypothesis": f"{status} {metric}"}
        )
    assert _chain(ledger, "nano") == ["000", "001", "004", "007"]
    trials = {t.exp_id: t for t in ledger.tables.stream_trials("nano")}
    assert walk_chain("007", trials)[-1].status.value == "keep"
    assert all(t.core_metric is None for t in trials.values() if t.status.value == "crash")


def test_a_keep_carrying_the_crash_marker_is_warned_about(ledger: Ledger) -> None:
    ledger.projects.create_project("cm", metric_name="val_bpb", lower_is_better=True)
    kept = ledger.recording.record_trial("cm", {"status": "keep", "core_metric": 0.0})
    assert any("marks a crash" in w for w in kept.warnings)
    crash = ledger.recording.record_trial("cm", {"status": "crash", "core_metric": 0.0})
    assert not any("marks a crash" in w for w in crash.warnings) and crash.trial.core_metric is None
    fine = ledger.recording.record_trial("cm", {"status": "keep", "core_metric": 0.97})
    assert not any("marks a crash" in w for w in fine.warnings)


def test_an_older_clients_plan_is_stored_as_running(ledger: Ledger) -> None:
    """Clients before the running state planned a trial as harness_abort with
    extra.state=running: it is running, never a failure (a real abort has no such state)."""
    ledger.projects.create_project("old")
    planned = ledger.recording.record_trial("old", {"status": "harness_abort", "extra": {"state": "running"}})
    assert planned.trial.status.value == "running"
    aborted = ledger.recording.record_trial("old", {"status": "harness_abort", "extra": {"state": "finished"}})
    assert aborted.trial.status.value == "harness_abort"
