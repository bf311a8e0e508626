"""``Ledger.record_trials`` (a batch) on SQLite and PostgreSQL stores and answers what the
same records one after the other would, also where the batch defers work to its end
(parents' chain links read once, adoptions of stored orphans checked once)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from lineage.domain import FailureLabel, Trial
from lineage.errors import InvalidInput
from lineage.service import Ledger
from tests.lineage.test_chain_links import assert_links
from tests.lineage.test_group_commit import CLOCK_FIELDS, stored_rows


def _items(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """A loop's records: parents left out (the best so far), explicit parents (earlier
    items, stored trials), roots, chosen ids that stored orphans wait for, keys, crashes."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        item: dict[str, Any] = {
            "status": rng.choice(["keep", "discard", "discard", "crash"]),
            "core_metric": round(1.0 - i / 1000 + rng.uniform(-0.01, 0.01), 6),
            "hypothesis": f"idea {i} " + rng.choice(["warmup", "cosine", "wider mlp", "dropout"]),
        }
        kind = rng.random()
        if kind < 0.1:
            item["parent_exp"] = ""
        elif kind < 0.25 and i:
            item["parent_exp"] = rng.choice(["seed", "w1"])  # stored trials
        if i in (7, 19):  # ids stored orphans wait for
            item["exp_id"] = f"w{2 if i == 7 else 3}"
        if i % 9 == 0:
            item["idempotency_key"] = f"key-{i}"
        out.append(item)
    out.append(dict(out[3], idempotency_key="key-x"))  # the same body again, under a new key: a new trial
    out.append(dict(out[9]))  # item 9 again with its key: a replay
    return out


def _seed(ledger: Ledger, slug: str) -> None:
    ledger.projects.create_project(slug, lower_is_better=True)
    ledger.tables.import_trials(
        slug,
        iter(
            [
                Trial(exp_id="seed", status=FailureLabel.BASELINE, core_metric=1.0),
                Trial(exp_id="w1", parent_exp="seed", status=FailureLabel.DISCARD, core_metric=1.1),
                Trial(exp_id="o2", parent_exp="w2", status=FailureLabel.DISCARD, core_metric=1.2),  # waits for w2
                Trial(exp_id="o3", parent_exp="w3", status=FailureLabel.KEEP, core_metric=0.99),  # waits for w3
                Trial(exp_id="o4", parent_exp="o3", status=FailureLabel.DISCARD, core_metric=1.3),
            ]
        ),
    )


@pytest.mark.parametrize("seed", [1, 2])
def test_a_batch_is_the_same_records_one_after_another(ledger: Ledger, seed: int) -> None:
    _seed(ledger, "batch")
    _seed(ledger, "single")
    items = _items(random.Random(seed), 40)
    told = ledger.recording.record_trials("batch", items).results
    alone = [
        ledger.recording.record_trial(
            "single",
            {k: v for k, v in item.items() if k != "idempotency_key"},
            idempotency_key=item.get("idempotency_key"),
        )
        for item in items
    ]

    def said(result: Any) -> dict[str, Any]:
        out = result.to_dict()
        for name in CLOCK_FIELDS:
            out["trial"].pop(name, None)
        return out

    assert [said(r) for r in told] == [said(r) for r in alone]
    assert stored_rows(ledger, "batch") == stored_rows(ledger, "single")
    for words in ("warmup", "cosine", "wider mlp", "idea 12"):  # the search index holds the batch's trials too
        found = {
            slug: [(hit.exp_id, hit.score) for hit in ledger.agent.find_similar(slug, words, limit=20)]
            for slug in ("batch", "single")
        }
        assert found["batch"] == found["single"] and found["batch"], words
    for slug in ("batch", "single"):
        assert_links(ledger, slug)
    assert ledger.trials.trial("batch", "o4").parent_exp == "o3"  # the adopted orphans kept their parents


def test_an_adoption_cycle_is_the_first_bad_item_though_found_at_the_end(ledger: Ledger) -> None:
    _seed(ledger, "p")
    cycle = {"exp_id": "w3", "parent_exp": "o4", "status": "keep", "core_metric": 0.5}  # w3 -> o4 -> o3 -> w3
    ok = {"status": "discard", "core_metric": 2.0}
    with pytest.raises(InvalidInput) as refused:
        ledger.recording.record_trials("p", [ok, cycle, ok])
    assert refused.value.field == "trials[1].parent_exp" and "cycle" in refused.value.reason
    with pytest.raises(InvalidInput) as refused:  # a later item's own error does not hide it
        ledger.recording.record_trials("p", [ok, cycle, ok, {"status": "sideways"}])
    assert refused.value.field == "trials[1].parent_exp"
    with pytest.raises(InvalidInput) as refused:  # an earlier item's does
        ledger.recording.record_trials("p", [{"status": "sideways"}, cycle])
    assert refused.value.field == "trials[0].status"
    assert len(ledger.trials.list_trials("p")) == 5


def test_a_batch_of_reruns_judges_each_item_against_the_floor_before_it(ledger: Ledger) -> None:
    """The noise floor moves only with an item that writes repeat keys (a commit, a patch,
    a baseline, a declared rerun); the batch reads it again after each such item, so every
    verdict (and every ``status: "auto"``) is the one the records alone get."""
    from tests.lineage.test_noise import LOOP

    items: list[dict[str, Any]] = []
    for status, metric, extra, rerun_of in LOOP * 2:
        item: dict[str, Any] = {"status": status, "core_metric": metric, "extra": extra}
        if rerun_of:
            item["rerun_of"] = rerun_of
        items.append(item)
    items += [
        {"status": "auto", "core_metric": 0.9899, "extra": {"commit": "c1"}},  # within noise of the best
        {"status": "auto", "core_metric": 0.9, "keep_margin": 0.001},
        {"status": "discard", "core_metric": 0.95},  # no keys: the floor stays
    ]
    for slug in ("batch", "single"):
        ledger.projects.create_project(slug, lower_is_better=True, settings={"auto_keep_above_noise": True})
    told = ledger.recording.record_trials("batch", items).results
    alone = [ledger.recording.record_trial("single", item) for item in items]

    def verdict(result: Any) -> tuple[Any, ...]:
        return result.trial.status.value, result.noise.to_dict()

    assert [verdict(r) for r in told] == [verdict(r) for r in alone]
    assert told[-1].noise.floor.reruns > 0
    assert stored_rows(ledger, "batch") == stored_rows(ledger, "single")
