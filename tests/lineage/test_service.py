"""The ledger's rules through its service layer, on SQLite and PostgreSQL."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import text

from lineage.domain import MAX_LONG_TEXT, BestPolicy, FailureLabel
from lineage.errors import Conflict, InvalidInput, NotFound
from lineage.service import Ledger, find_cycle


def make_project(ledger: Ledger, slug: str = "p", *, lower: bool = False, policy: str = "kept") -> str:
    ledger.projects.create_project(slug, lower_is_better=lower, best_policy=policy)
    return slug


def record(ledger: Ledger, project: str, exp_id: str | None, status: str, metric: float | None, parent: str = "", **kw):
    fields = {"status": status, "core_metric": metric, "parent_exp": parent, **kw}
    if exp_id is not None:
        fields["exp_id"] = exp_id
    return ledger.recording.record_trial(project, fields)


def test_delta_vs_best_is_metric_minus_the_best_before_the_trial(ledger: Ledger) -> None:
    p = make_project(ledger)
    record(ledger, p, "000", "baseline", 33.21)
    result = record(ledger, p, "001", "keep", 34.02, parent="000")
    assert result.trial.delta_vs_best == pytest.approx(34.02 - 33.21)
    assert result.is_new_best
    discard = record(ledger, p, "002", "discard", 33.87, parent="001")
    assert discard.trial.delta_vs_best == pytest.approx(33.87 - 34.02)
    assert not discard.is_new_best


def test_delta_sent_by_the_writer_is_ignored(ledger: Ledger) -> None:
    p = make_project(ledger)
    record(ledger, p, "000", "baseline", 1.0)
    result = record(ledger, p, "001", "keep", 2.0, parent="000", delta_vs_best=99.0)
    assert result.trial.delta_vs_best == pytest.approx(1.0)
    assert ledger.trials.trial(p, "001").delta_vs_best == pytest.approx(1.0)


def test_first_trial_has_no_delta(ledger: Ledger) -> None:
    p = make_project(ledger)
    assert record(ledger, p, "000", "baseline", 5.0).trial.delta_vs_best is None


def test_omitted_exp_id_is_the_next_number_after_the_largest(ledger: Ledger) -> None:
    p = make_project(ledger)
    assert record(ledger, p, None, "baseline", 1.0).trial.exp_id == "000"
    assert record(ledger, p, None, "keep", 2.0).trial.exp_id == "001"
    record(ledger, p, "041", "discard", 0.5)
    record(ledger, p, "run-x", "discard", 0.5)
    assert record(ledger, p, None, "discard", 0.5).trial.exp_id == "042"


def test_same_exp_id_and_body_returns_the_stored_trial(ledger: Ledger) -> None:
    p = make_project(ledger)
    first = record(ledger, p, "000", "baseline", 1.0, hypothesis="h")
    again = record(ledger, p, "000", "baseline", 1.0, hypothesis="h")
    assert first.created and not again.created
    assert again.trial == ledger.trials.trial(p, "000")
    assert ledger.projects.project(p).trial_count == 1


def test_same_exp_id_with_a_different_body_is_a_conflict_naming_both(ledger: Ledger) -> None:
    p = make_project(ledger)
    record(ledger, p, "000", "baseline", 1.0, hypothesis="h")
    with pytest.raises(Conflict) as info:
        record(ledger, p, "000", "baseline", 2.0, hypothesis="h")
    assert info.value.field == "core_metric"
    assert info.value.existing["core_metric"] == 1.0
    assert info.value.proposed["core_metric"] == 2.0


def test_unknown_project_is_not_found(ledger: Ledger) -> None:
    with pytest.raises(NotFound) as info:
        record(ledger, "nope", "000", "keep", 1.0)
    assert info.value.field == "project"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"core_metric": math.nan}, "core_metric"),
        ({"core_metric": math.inf}, "core_metric"),
        ({"train_s": -1.0}, "train_s"),
        ({"hypothesis": "x" * (MAX_LONG_TEXT + 1)}, "hypothesis"),
        ({"status": "exploded"}, "status"),
        ({"parent_exp": "999"}, "parent_exp"),
        ({"baseline_exp": "999"}, "baseline_exp"),
        ({"ig_clip_scale_frac_low": 1.5}, "ig_clip_scale_frac_low"),
        ({"bogus": 1}, "bogus"),
        ({"exp_id": "a\tb"}, "exp_id"),
    ],
)
def test_bad_fields_are_rejected_by_name_and_nothing_is_written(ledger: Ledger, fields: dict, field: str) -> None:
    p = make_project(ledger)
    record(ledger, p, "000", "baseline", 1.0)
    body = {"exp_id": "001", "status": "keep", "core_metric": 2.0, **fields}
    with pytest.raises(InvalidInput) as info:
        ledger.recording.record_trial(p, body)
    assert info.value.field == field
    assert ledger.projects.project(p).trial_count == 1
    assert [t.exp_id for t in ledger.trials.list_trials(p)] == ["000"]


def test_a_parent_in_another_project_is_named_in_the_error(ledger: Ledger) -> None:
    a = make_project(ledger, "a")
    b = make_project(ledger, "b")
    record(ledger, a, "007", "baseline", 1.0)
    with pytest.raises(InvalidInput) as info:
        record(ledger, b, "000", "keep", 1.0, parent="007")
    assert info.value.field == "parent_exp"
    assert "'a'" in info.value.message


def test_an_update_that_would_make_a_cycle_is_rejected(ledger: Ledger) -> None:
    p = make_project(ledger)
    record(ledger, p, "000", "baseline", 1.0)
    record(ledger, p, "001", "keep", 2.0, parent="000")
    record(ledger, p, "002", "keep", 3.0, parent="001")
    with pytest.raises(InvalidInput) as info:
        ledger.recording.update_trial(p, "000", {"parent_exp": "002"})
    assert info.value.field == "parent_exp"
    assert ledger.trials.trial(p, "000").parent_exp == ""


def test_update_recomputes_delta_against_the_best_before_the_trial(ledger: Ledger) -> None:
    p = make_project(ledger)
    record(ledger, p, "000", "baseline", 10.0)
    record(ledger, p, "001", "discard", None, parent="000")
    record(ledger, p, "002", "keep", 12.0, parent="000")
    updated = ledger.recording.update_trial(p, "001", {"status": "keep", "core_metric": 11.0, "delta_vs_best": 50.0})
    assert updated.delta_vs_best == pytest.approx(1.0)
    assert updated.status is FailureLabel.KEEP


def test_best_is_kept_or_baseline_by_default_and_any_informational_under_fieldkit_policy(ledger: Ledger) -> None:
    for slug, policy in (("kept", "kept"), ("fk", "fieldkit")):
        make_project(ledger, slug, policy=policy)
        record(ledger, slug, "000", "baseline", 10.0)
        record(ledger, slug, "001", "keep", 11.0, parent="000")
        record(ledger, slug, "002", "discard", 15.0, parent="001")
        record(ledger, slug, "003", "harness_abort", 99.0, parent="001")
    assert ledger.trials.best("kept").exp_id == "001"
    assert ledger.trials.best("fk").exp_id == "002"


def test_equal_metrics_make_the_earliest_trial_best(ledger: Ledger) -> None:
    p = make_project(ledger, lower=True)
    record(ledger, p, "000", "baseline", 3.0)
    record(ledger, p, "001", "keep", 2.0, parent="000")
    record(ledger, p, "002", "keep", 2.0, parent="000")
    assert ledger.trials.best(p).exp_id == "001"


def test_with_no_scored_kept_trial_the_first_trial_is_best(ledger: Ledger) -> None:
    p = make_project(ledger)
    record(ledger, p, "000", "baseline", None)
    record(ledger, p, "001", "discard", 5.0, parent="000")
    assert ledger.trials.best(p).exp_id == "000"
    assert ledger.trials.best(make_project(ledger, "empty")) is None


def test_chain_walks_from_root_to_best(ledger: Ledger) -> None:
    p = make_project(ledger)
    record(ledger, p, "000", "baseline", 33.21)
    record(ledger, p, "001", "keep", 34.02, parent="000")
    record(ledger, p, "002", "discard", 33.87, parent="001")
    record(ledger, p, "003", "keep", 34.51, parent="001")
    record(ledger, p, "004", "keep", 34.96, parent="003")
    assert [t.exp_id for t in ledger.trials.chain(p)] == ["000", "001", "003", "004"]
    assert [t.exp_id for t in ledger.trials.chain(p, "002")] == ["000", "001", "002"]


def test_chain_stops_at_a_missing_parent_and_never_loops_on_a_stored_cycle(ledger: Ledger, engine) -> None:
    p = make_project(ledger)
    record(ledger, p, "000", "baseline", 1.0)
    record(ledger, p, "001", "keep", 2.0, parent="000")
    record(ledger, p, "002", "keep", 3.0, parent="001")
    with engine.begin() as conn:  # damage the data behind the ledger's back
        conn.execute(text("UPDATE trials SET parent_exp = '002' WHERE exp_id = '000'"))
    assert [t.exp_id for t in ledger.trials.chain(p)] == ["000", "001", "002"]
    with engine.begin() as conn:
        conn.execute(text("UPDATE trials SET parent_exp = 'gone' WHERE exp_id = '000'"))
    assert [t.exp_id for t in ledger.trials.chain(p)] == ["000", "001", "002"]


def test_find_cycle_reports_the_loop() -> None:
    assert find_cycle({"a": "", "b": "a", "c": "b"}) is None
    assert sorted(find_cycle({"a": "c", "b": "a", "c": "b", "d": "a"})) == ["a", "b", "c"]
    assert find_cycle({"a": "missing"}) is None


def test_project_fields_can_be_updated_and_unknown_ones_are_rejected(ledger: Ledger) -> None:
    p = make_project(ledger)
    before = ledger.projects.project(p).revision
    updated = ledger.projects.update_project(p, {"title": "New", "best_policy": "fieldkit"})
    assert updated.title == "New" and updated.best_policy is BestPolicy.FIELDKIT
    assert updated.revision > before
    with pytest.raises(InvalidInput):
        ledger.projects.update_project(p, {"slug": "other"})


def test_duplicate_project_is_a_conflict_and_bad_slug_is_invalid(ledger: Ledger) -> None:
    make_project(ledger, "dup")
    with pytest.raises(Conflict):
        make_project(ledger, "dup")
    with pytest.raises(InvalidInput) as info:
        ledger.projects.create_project("Has Spaces")
    assert info.value.field == "slug"


def test_dataframe_has_one_row_per_trial_in_order(ledger: Ledger) -> None:
    p = make_project(ledger)
    record(ledger, p, "000", "baseline", 1.0)
    record(ledger, p, "001", "keep", 2.0, parent="000")
    frame = ledger.tables.dataframe(p)
    assert list(frame["exp_id"]) == ["000", "001"]
    assert list(frame["core_metric"]) == [1.0, 2.0]
