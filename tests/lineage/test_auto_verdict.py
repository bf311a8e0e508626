"""``status: "auto"``: the ledger decides keep or discard inside the write's transaction,
against the best at that moment (``lineage.domain.auto_verdict``), for a new trial and for
a planned one that finishes; ties never keep.

The concurrent cases run writers on their own ``Ledger`` (their own engine and pool, as
separate ``lineage serve`` processes would have) against one database. The serial order
the ledger imposed is unknown to the test, so what is checked is what any serial order
implies: each trial was judged against a best (``core_metric - delta_vs_best``); the keeps,
from worst to best, were each judged against the keep before them (the first against
the baseline); no discard improved on the best it was judged against; no two keeps tie.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable

import pytest

from lineage.db import make_engine
from lineage.domain import FailureLabel, Trial
from lineage.errors import InvalidInput
from lineage.service import Ledger

WRITERS = 8


def _judged_best(trial: Trial) -> float:
    assert trial.core_metric is not None and trial.delta_vs_best is not None, trial
    return trial.core_metric - trial.delta_vs_best


def assert_serial_verdicts(trials: list[Trial], baseline: float) -> None:
    """What any serial order of lower-is-better "auto" finishes implies (module doc)."""
    keeps = sorted((t for t in trials if t.status is FailureLabel.KEEP), key=lambda t: -(t.core_metric or 0))
    metrics = [t.core_metric for t in keeps]
    assert len(set(metrics)) == len(metrics), f"two keeps tie: {metrics}"
    before = baseline
    for keep in keeps:
        assert math.isclose(_judged_best(keep), before, abs_tol=1e-12), (keep.exp_id, _judged_best(keep), before)
        assert keep.core_metric is not None and keep.core_metric < before
        before = keep.core_metric
    for trial in trials:
        if trial.status is FailureLabel.DISCARD:
            assert trial.core_metric is not None and trial.core_metric >= _judged_best(trial), trial


def _race(db_url: str, work: Callable[[Ledger, int], None]) -> None:
    """``work(ledger, i)`` for each writer at once, each on a Ledger of its own."""
    ledgers = [Ledger(make_engine(db_url)) for _ in range(WRITERS)]
    start = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            start.wait()
            work(ledgers[i], i)
        except BaseException as error:  # noqa: BLE001 - raised below, in the test
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for ledger in ledgers:
        ledger.close()
    assert not errors, errors


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_concurrent_auto_records_keep_only_what_beats_the_best_at_commit(
    ledger: Ledger, db_url: str, seed: int
) -> None:
    slug = f"race{seed}"
    ledger.projects.create_project(slug, lower_is_better=True)
    ledger.recording.record_trial(slug, {"status": "baseline", "core_metric": 1.0})
    rng = random.Random(seed)
    # few distinct values: ties between writers are common
    values = [[rng.choice([0.99, 0.98, 0.97, 0.96, 0.95, 1.01]) for _ in range(4)] for _ in range(WRITERS)]

    def work(mine: Ledger, i: int) -> None:
        for value in values[i]:
            mine.recording.record_trial(slug, {"status": "auto", "core_metric": value, "hypothesis": f"w{i}"})

    _race(db_url, work)
    trials = [t for t in ledger.trials.list_trials(slug) if t.status is not FailureLabel.BASELINE]
    assert len(trials) == WRITERS * 4
    assert_serial_verdicts(trials, 1.0)
    assert ledger.trials.best(slug).core_metric == min(v for row in values for v in row)


@pytest.mark.parametrize("seed", [4, 5])
def test_concurrent_auto_finishes_of_planned_trials_are_judged_against_the_others(
    ledger: Ledger, db_url: str, seed: int
) -> None:
    """The trainer's path: trials planned first (no result yet), finished together by PATCH."""
    slug = f"finish{seed}"
    ledger.projects.create_project(slug, lower_is_better=True)
    ledger.recording.record_trial(slug, {"status": "baseline", "core_metric": 1.0})
    planned = [
        ledger.recording.record_trial(slug, {"status": "harness_abort", "hypothesis": f"run {i}"}).trial.exp_id
        for i in range(WRITERS * 2)
    ]
    rng = random.Random(seed)
    values = [rng.choice([0.99, 0.98, 0.97, 1.02]) for _ in planned]

    def work(mine: Ledger, i: int) -> None:
        for k in (i, i + WRITERS):
            mine.recording.update_trial(slug, planned[k], {"status": "auto", "core_metric": values[k]})

    _race(db_url, work)
    trials = [t for t in ledger.trials.list_trials(slug) if t.exp_id in planned]
    assert_serial_verdicts(trials, 1.0)
    assert ledger.trials.best(slug).core_metric == min(values)


def test_a_tie_is_a_discard_and_the_margin_counts(ledger: Ledger) -> None:
    ledger.projects.create_project("m", lower_is_better=False)
    first = ledger.recording.record_trial("m", {"status": "auto", "core_metric": 0.5})
    assert first.trial.status is FailureLabel.KEEP  # nothing to beat
    tie = ledger.recording.record_trial("m", {"status": "auto", "core_metric": 0.5})
    assert tie.trial.status is FailureLabel.DISCARD and not tie.is_new_best
    short = ledger.recording.record_trial("m", {"status": "auto", "core_metric": 0.55, "keep_margin": 0.1})
    assert short.trial.status is FailureLabel.DISCARD
    enough = ledger.recording.record_trial("m", {"status": "auto", "core_metric": 0.6, "keep_margin": 0.1})
    assert enough.trial.status is FailureLabel.KEEP and enough.is_new_best  # 0.6 - 0.5 is 0.1 up to rounding


def test_auto_without_a_metric_is_a_discard_with_no_result_and_a_warning(ledger: Ledger) -> None:
    ledger.projects.create_project("n", metric_name="val_loss")
    result = ledger.recording.record_trial("n", {"status": "auto"})
    assert result.trial.status is FailureLabel.DISCARD and result.trial.core_metric is None
    assert any('"auto" without a metric' in w and "val_loss" in w for w in result.warnings)
    sentinel = ledger.recording.record_trial("n", {"status": "auto", "core_metric": -999})
    assert sentinel.trial.core_metric is None and sentinel.trial.status is FailureLabel.DISCARD


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"status": "keep", "core_metric": 0.5, "keep_margin": 0.1}, "keep_margin"),
        ({"status": "auto", "core_metric": 0.5, "keep_margin": -1}, "keep_margin"),
        ({"status": "auto", "core_metric": 0.5, "keep_margin": "big"}, "keep_margin"),
        ({"status": "auto", "core_metric": 0.5, "keep_margin": float("nan")}, "keep_margin"),
    ],
)
def test_a_bad_margin_names_it_and_stores_nothing(ledger: Ledger, body: dict, field: str) -> None:  # type: ignore[type-arg]
    ledger.projects.create_project("b")
    with pytest.raises(InvalidInput) as refused:
        ledger.recording.record_trial("b", body)
    assert refused.value.field == field
    assert ledger.trials.list_trials("b") == []


def test_a_retried_auto_record_is_the_stored_trial_whatever_was_decided(ledger: Ledger) -> None:
    ledger.projects.create_project("r", lower_is_better=True)
    ledger.recording.record_trial("r", {"status": "baseline", "core_metric": 1.0})
    body = {"status": "auto", "core_metric": 0.9, "exp_id": "x1"}
    first = ledger.recording.record_trial("r", body, idempotency_key="k-1")
    assert first.trial.status is FailureLabel.KEEP
    ledger.recording.record_trial("r", {"status": "keep", "core_metric": 0.5})  # the best moves on
    again = ledger.recording.record_trial("r", body, idempotency_key="k-1")
    by_id = ledger.recording.record_trial("r", body)
    assert not again.created and not by_id.created
    assert again.trial.status is by_id.trial.status is FailureLabel.KEEP
    # the key stands for "auto", not for the discard an auto body stands as until decided
    with pytest.raises(Exception, match="different body"):
        ledger.recording.record_trial(
            "r", {"status": "discard", "core_metric": 0.9, "exp_id": "x1"}, idempotency_key="k-1"
        )


def test_a_batch_decides_each_item_against_the_items_before_it(ledger: Ledger) -> None:
    ledger.projects.create_project("bt", lower_is_better=True)
    ledger.recording.record_trial("bt", {"status": "baseline", "core_metric": 1.0})
    for similar_prior in (False, True):
        results = ledger.recording.record_trials(
            "bt",
            [{"status": "auto", "core_metric": v} for v in (0.9, 0.9, 0.95, 0.8)],
            similar_prior=similar_prior,
        ).results
        statuses = [r.trial.status.value for r in results]
        if not similar_prior:
            assert statuses == ["keep", "discard", "discard", "keep"]
        else:  # the best is 0.8 now
            assert statuses == ["discard"] * 4
