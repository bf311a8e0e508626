"""The database's view of a sweep equals fieldkit's, trial for trial and byte for byte.

fieldkit 0.34.1 is the oracle: the same random sweep goes into fieldkit's own
``LineageStore`` (a results.tsv) and into the ledger's database; the session-start prompt
must come out identical under the ``fieldkit`` best policy, and under the default
``kept`` policy wherever the two policies pick the same best.
"""

from __future__ import annotations

import math
import random

import pytest

from lineage.domain import BestPolicy, FailureLabel, Trial
from lineage.service import Ledger
from tests.sweeps import fieldkit_snapshot, fieldkit_view, random_sweep

SEEDS = range(12)


def _positive_zero(trials: list[Trial]) -> list[Trial]:
    """SQLite stores -0.0 as 0.0 (REAL affinity); see test_sqlite_folds_negative_zero."""

    def fix(value: float | None) -> float | None:
        return 0.0 if value == 0.0 else value

    return [
        t.with_changes(
            core_metric=fix(t.core_metric),
            delta_vs_best=fix(t.delta_vs_best),
            val_bpb=fix(t.val_bpb),
            train_s=fix(t.train_s),
            total_s=fix(t.total_s),
        )
        for t in trials
    ]


def _load(ledger: Ledger, trials: list[Trial], *, lower: bool, policy: BestPolicy) -> str:
    slug = f"s-{policy.value}"
    ledger.projects.create_project(slug, lower_is_better=lower, best_policy=policy)
    ledger.tables.import_trials(slug, iter(trials))
    return slug


def _ids(trials) -> list[str]:  # type: ignore[no-untyped-def]
    return [t.exp_id for t in trials]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("policy", list(BestPolicy))
def test_store_selects_what_the_reference_selects(ledger: Ledger, seed: int, policy: BestPolicy) -> None:
    rng = random.Random(seed)
    lower = rng.random() < 0.5
    trials = _positive_zero(random_sweep(rng, rng.randint(1, 70), lower_is_better=lower))
    top_k, recent_n, last_m = rng.choice([0, 1, 3, 20]), rng.choice([1, 2, 5, 30]), rng.choice([1, 2, 5, 30])
    slug = _load(ledger, trials, lower=lower, policy=policy)
    got = ledger.agent.prompt_view(slug, top_k=top_k, recent_n=recent_n, last_m=last_m)
    want = fieldkit_view(trials, lower_is_better=lower, policy=policy, top_k=top_k, recent_n=recent_n, last_m=last_m)
    assert got.best.exp_id == want.best.exp_id
    assert _ids(got.chain) == _ids(want.chain)
    assert _ids(got.top_kept) == _ids(want.top_kept)
    assert _ids(got.recent) == _ids(want.recent)
    assert _ids(got.recent_full) == _ids(want.recent_full)


@pytest.mark.parametrize("seed", SEEDS)
def test_prompt_is_byte_identical_to_fieldkit(ledger: Ledger, backend: str, seed: int, tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(1000 + seed)
    lower = rng.random() < 0.5
    trials = random_sweep(rng, rng.randint(1, 70), lower_is_better=lower)
    if backend == "sqlite":
        trials = _positive_zero(trials)
    args = dict(top_k=rng.choice([1, 3, 20]), recent_n=rng.choice([1, 5, 30]), last_m=rng.choice([1, 5, 10]))
    expected = fieldkit_snapshot(
        trials, tmp_path, lower_is_better=lower, specialist="spec-next", timestamp="2026-11-23T06:00:00Z", **args
    ).rendered_prompt
    slug = _load(ledger, trials, lower=lower, policy=BestPolicy.FIELDKIT)
    got = ledger.agent.render_prompt(slug, specialist="spec-next", timestamp="2026-11-23T06:00:00Z", **args)
    assert got == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_default_policy_matches_fieldkit_wherever_the_policies_agree(ledger: Ledger, seed: int, tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(2000 + seed)
    lower = rng.random() < 0.5
    trials = _positive_zero(random_sweep(rng, rng.randint(1, 70), lower_is_better=lower))
    fk = fieldkit_view(trials, lower_is_better=lower, policy=BestPolicy.FIELDKIT, top_k=20, recent_n=30, last_m=10)
    kept = fieldkit_view(trials, lower_is_better=lower, policy=BestPolicy.KEPT, top_k=20, recent_n=30, last_m=10)
    slug = _load(ledger, trials, lower=lower, policy=BestPolicy.KEPT)
    got = ledger.agent.render_prompt(slug, specialist="s")
    expected = fieldkit_snapshot(
        trials, tmp_path, lower_is_better=lower, specialist="s", top_k=20, recent_n=30, last_m=10
    ).rendered_prompt
    if fk.best.exp_id == kept.best.exp_id:
        assert got == expected
    else:  # a discard (or similar) out-scored every kept trial: only fieldkit calls it best
        assert got != expected
        assert f"Current best: **exp_{kept.best.exp_id}**" in got


def test_sqlite_folds_negative_zero_and_postgresql_keeps_it(ledger: Ledger, backend: str) -> None:
    ledger.projects.create_project("z")
    ledger.tables.import_trials(
        "z", iter([Trial(exp_id="000", status=FailureLabel.BASELINE, core_metric=1.0, delta_vs_best=-0.0)])
    )
    stored = ledger.trials.trial("z", "000").delta_vs_best
    assert stored == 0.0
    assert math.copysign(1.0, stored) == (1.0 if backend == "sqlite" else -1.0)
