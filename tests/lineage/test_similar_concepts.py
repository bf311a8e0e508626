"""Concepts, not only spellings (``lineage.ml_concepts``), on SQLite and PostgreSQL:
"bigger batch" finds the batch-size trials, "deeper model" the layer and depth trials,
"wider" the width ones; recall on such paraphrases goes up against the spelling table
alone, and unrelated trials stay below the true hits."""

from __future__ import annotations

import pytest

from lineage import ml_concepts
from lineage.service import Ledger
from lineage.similar import concepts

PAST = [
    "TOTAL_BATCH_SIZE 2**19 -> 2**20",  # 000
    "double batch size (OOM)",  # 001
    "switch to 16 layers",  # 002
    "n_layer 12 -> 16",  # 003
    "n_embd 768 -> 1024",  # 004
    "d_model 512, hidden size up",  # 005
    "n_head 6 -> 8",  # 006
    "max_iters 5000 -> 8000",  # 007
    "WARMDOWN_RATIO 0.5 -> 0.7",  # 008
    "lower MATRIX_LR to 0.03",  # 009
    "swap AdamW for Muon on matrices",  # 010
    "add dropout 0.1 to attention",  # 011
]
QUERIES = [
    ("bigger batch", {"000", "001"}),
    ("deeper model", {"002", "003"}),
    ("more layers", {"002", "003"}),
    ("wider model", {"004", "005"}),
    ("increase the width", {"004", "005"}),
    ("more attention heads", {"006"}),
    ("train for more iterations", {"007"}),
    ("longer cooldown", {"008"}),
]


def _load(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    for hypothesis in PAST:
        ledger.recording.record_trial("p", {"status": "discard", "core_metric": 1.0, "hypothesis": hypothesis})


def _recall(ledger: Ledger) -> float:
    found = sum(len(wanted & {s.exp_id for s in ledger.agent.find_similar("p", q, 5)}) for q, wanted in QUERIES)
    return found / sum(len(wanted) for _, wanted in QUERIES)


def test_concept_words_are_the_knobs_concept() -> None:
    assert concepts("bigger batch") == ["bigger", "bs"] and concepts("TOTAL_BATCH_SIZE") == ["total", "bs"]
    assert concepts("deeper model") == ["nlayers"] == concepts("layers") == concepts("depth")
    assert concepts("wider") == concepts("n_embd") == concepts("d_model") == concepts("hidden") == ["dmodel"]
    assert concepts("batch norm") == ["bn"] and concepts("DEVICE_BATCH_SIZE") == ["device", "bs"]


@pytest.mark.parametrize(("query", "wanted"), QUERIES)
def test_each_concept_paraphrase_finds_its_trials_above_the_rest(ledger: Ledger, query: str, wanted: set[str]) -> None:
    _load(ledger)
    found = ledger.agent.find_similar("p", query, 10)
    hits = [s.score for s in found if s.exp_id in wanted]
    assert len(hits) == len(wanted), [(s.exp_id, s.score) for s in found]
    assert all(s.score < min(hits) for s in found if s.exp_id not in wanted), [(s.exp_id, s.score) for s in found]


def test_recall_on_concept_paraphrases_goes_up(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    _load(ledger)
    with_concepts = _recall(ledger)
    monkeypatch.setattr(ml_concepts, "CONCEPTS", {})  # the spelling table alone
    assert (with_concepts, _recall(ledger)) == (1.0, pytest.approx(0.4, abs=0.15))


def test_unrelated_queries_find_no_concept_trial(ledger: Ledger) -> None:
    _load(ledger)
    assert ledger.agent.find_similar("p", "label smoothing of the targets") == []
    assert ledger.agent.find_similar("p", "batch norm in the critic") == []
