"""The service's read models for the pages, against brute force over random sweeps,
on SQLite and PostgreSQL."""

from __future__ import annotations

import random

import pytest

from lineage.domain import BestPolicy, Trial, is_better
from lineage.service import Ledger, parse_expected_delta, walk_chain
from tests.sweeps import random_sweep


def brute_best(trials: list[Trial], policy: BestPolicy, lower: bool) -> float | None:
    eligible = policy.eligible_statuses()
    best = None
    for t in trials:
        if t.core_metric is None or t.status.value not in eligible:
            continue
        if best is None or is_better(t.core_metric, best, lower_is_better=lower):
            best = t.core_metric
    return best


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("policy", ["kept", "fieldkit"])
def test_running_best_of_the_chart_window_matches_brute_force(ledger: Ledger, seed: int, policy: str) -> None:
    rng = random.Random(seed)
    lower = seed % 2 == 0
    trials = random_sweep(rng, 120, lower_is_better=lower)
    ledger.projects.create_project("p", lower_is_better=lower, best_policy=policy)
    ledger.tables.import_trials("p", iter(trials))
    for before in (None, 7, 50, 119):
        board = ledger.browse.dashboard("p", window=20, before_seq=before, bins=9)
        window = [t for t in trials if before is None or t.seq < before][-20:]
        assert [p.exp_id for p in board.window] == [t.exp_id for t in window]
        first = window[0].seq
        start = brute_best(trials[:first], BestPolicy(policy), lower)
        expected: list[tuple[int, float]] = []
        current = start
        if start is not None:
            expected.append((first, start))
        for t in window:
            value = brute_best([t], BestPolicy(policy), lower)
            if value is not None and (current is None or is_better(value, current, lower_is_better=lower)):
                current = value
                expected.append((t.seq, value))
        assert list(board.window_running_best) == expected, before
    # the whole-project step line ends at the project's best metric
    board = ledger.browse.dashboard("p", bins=9)
    overall = brute_best(trials, BestPolicy(policy), lower)
    assert (board.running_best[-1][1] if board.running_best else None) == overall


def test_status_counts_and_recent_activity(ledger: Ledger) -> None:
    trials = random_sweep(random.Random(3), 40, lower_is_better=True)
    ledger.projects.create_project("p")
    ledger.tables.import_trials("p", iter(trials))
    board = ledger.browse.dashboard("p", recent_n=5)
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.status.value] = counts.get(t.status.value, 0) + 1
    assert dict(board.status_counts) == counts
    assert [t.exp_id for t in board.recent] == [t.exp_id for t in reversed(trials[-5:])]
    chain = [t.exp_id for t in ledger.trials.chain("p")]
    assert board.chain.length == len(chain)
    assert [t.exp_id for t in board.chain.head] + [t.exp_id for t in board.chain.tail] == (
        chain if len(chain) <= 25 else chain[:5] + chain[-15:]
    )


def brute_tree(trials: list[Trial]) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {}
    for t in trials:
        children.setdefault(t.parent_exp, []).append(t.exp_id)
    return children


def flatten(nodes) -> list[tuple[str, list[str]]]:  # type: ignore[no-untyped-def]
    out = []
    for node in nodes:
        out.append((node.trial.exp_id, [c.trial.exp_id for c in node.children] if node.loaded else None))
        out += flatten(node.children)
    return out


def test_an_unbounded_tree_window_is_the_whole_tree(ledger: Ledger) -> None:
    trials = random_sweep(random.Random(4), 80, lower_is_better=True)
    ledger.projects.create_project("p")
    ledger.tables.import_trials("p", iter(trials))
    window = ledger.browse.tree_window("p", depth=50, per_node=500, budget=100_000)
    children = brute_tree(trials)
    ids = {t.exp_id for t in trials}
    reachable = flatten(window.nodes)
    assert [n.trial.exp_id for n in window.nodes] == children.get("", [])
    for exp_id, kids in reachable:
        if kids is not None:
            assert kids == children.get(exp_id, []), exp_id
    orphans = [t.exp_id for t in trials if t.parent_exp and t.parent_exp not in ids]
    assert [t.exp_id for t in window.orphans or ()] == orphans[: window.per_node]
    shown = {e for e, _ in reachable}
    assert shown == {
        t.exp_id for t in trials if t.exp_id not in set(orphans) and _rooted(t, {x.exp_id: x for x in trials})
    }


def _rooted(trial: Trial, by_id: dict[str, Trial]) -> bool:
    """Whether the trial descends from a top-level trial (not from an orphan)."""
    chain = walk_chain(trial.exp_id, by_id)
    return not chain[0].parent_exp


def test_a_tree_window_always_shows_the_chain_to_the_best(ledger: Ledger) -> None:
    trials = random_sweep(random.Random(6), 150, lower_is_better=True)
    ledger.projects.create_project("p")
    ledger.tables.import_trials("p", iter(trials))
    chain = [t.exp_id for t in ledger.trials.chain("p")]
    window = ledger.browse.tree_window("p", depth=len(chain) + 1, per_node=1, budget=1)
    shown = [e for e, _ in flatten(window.nodes)]
    assert all(e in shown for e in chain) and window.chain_ids == frozenset(chain)


def test_trials_page_counts_only_when_filtered(ledger: Ledger) -> None:
    trials = random_sweep(random.Random(8), 30, lower_is_better=True)
    ledger.projects.create_project("p")
    ledger.tables.import_trials("p", iter(trials))
    assert ledger.tables.trials_page("p").total == 30
    keeps = ledger.tables.trials_page("p", status=["keep"])
    assert keeps.total == sum(t.status.value == "keep" for t in trials)


@pytest.mark.parametrize(
    "text,value",
    [
        ("+0.75 EM over turn-group", 0.75),
        ("-0.001 bpb", -0.001),
        ("−2%", -2.0),
        ("about .5", 0.5),
        ("1e-3", 0.001),
        ("", None),
        ("a bigger number", None),
        ("x+3", 3.0),
    ],
)
def test_parse_expected_delta(text: str, value: float | None) -> None:
    assert parse_expected_delta(text) == value


def test_calibration_pairs_expectations_with_observed_deltas(ledger: Ledger) -> None:
    ledger.projects.create_project("c", lower_is_better=False)
    ledger.recording.record_trial("c", {"exp_id": "0", "status": "baseline", "core_metric": 1.0})
    ledger.recording.record_trial(
        "c", {"exp_id": "1", "status": "keep", "core_metric": 1.5, "expected_delta": "+0.4 EM", "specialist": "a"}
    )
    ledger.recording.record_trial("c", {"exp_id": "2", "status": "crash", "expected_delta": "+1"})
    ledger.recording.record_trial(
        "c", {"exp_id": "3", "status": "discard", "core_metric": 1.2, "expected_delta": "more"}
    )
    cal = ledger.browse.calibration("c")
    assert [(p.exp_id, p.expected, p.observed) for p in cal.points] == [("1", 0.4, 0.5)]
    assert (cal.unparsed, cal.unobserved, cal.considered) == (1, 1, 3)
