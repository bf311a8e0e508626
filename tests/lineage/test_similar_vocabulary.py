"""'Was this tried?' with ML vocabulary (``lineage.similar.SPELLINGS``, ``concepts``), on
SQLite and PostgreSQL: equivalent spellings and identifiers are one concept, recall on
paraphrases goes up against the same search without the table, and unrelated queries stay
below the true hits."""

from __future__ import annotations

import pytest

from lineage import ml_concepts, similar
from lineage.service import Ledger
from lineage.similar import SPELLINGS, concepts, tokens

#: (hypothesis, notes) of past trials, as loops write them.
PAST = [
    ("MATRIX_LR 0.04 -> 0.06", ""),  # 000
    ("increase LR to 0.04", "faster early loss"),  # 001
    ("lower the learning-rate of the embeddings", ""),  # 002
    ("weight decay 0.2", ""),  # 003
    ("bigger batch size 512", "memory 71 GB"),  # 004
    ("add LayerNorm before attention", ""),  # 005
    ("gradient clipping at 1.0", ""),  # 006
    ("warmupSteps 200", ""),  # 007
    ("n_layer 12 -> 16", "deeper"),  # 008
    ("switch the tokenizer to byte-level BPE", ""),  # 009
    ("context length 2048", ""),  # 010
    ("EMBED_LR 0.6 -> 0.3", ""),  # 011
]

#: (paraphrase, the trials it must find)
PARAPHRASES = [
    ("try a higher matrix learning rate", {"000"}),
    ("increase the learning rate", {"001"}),
    ("tune the embedding lr", {"002", "011"}),
    ("wd 0.1", {"003"}),
    ("bs 1024", {"004"}),
    ("move the layer norm before attn", {"005"}),
    ("grad clip 0.5", {"006"}),
    ("longer warmup", {"007"}),
    ("more layers: num layers 24", {"008"}),
    ("seq len 4096", {"010"}),
    ("use byte pair encoding", {"009"}),
]


def _load(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    for hypothesis, notes in PAST:
        ledger.recording.record_trial(
            "p", {"status": "discard", "core_metric": 1.0, "hypothesis": hypothesis, "notes": notes}
        )


def _recall(ledger: Ledger) -> float:
    found = sum(
        len(wanted & {s.exp_id for s in ledger.agent.find_similar("p", query, 5)}) for query, wanted in PARAPHRASES
    )
    return found / sum(len(wanted) for _, wanted in PARAPHRASES)


def test_spellings_and_identifiers_are_one_concept() -> None:
    assert concepts("MATRIX_LR") == ["matrix", "lr"] == concepts("matrix learning rate")
    assert concepts("warmupSteps") == ["warmup"] == concepts("warm-up steps")
    assert concepts("LayerNorm") == concepts("layer normalization") == concepts("layer_norm") == ["ln"]
    assert concepts("batchSize 64") == ["bs", "64"] == concepts("BS 64")
    assert concepts("embedding dim") == ["dmodel"] and concepts("embedding") == ["emb"]  # the longest spelling
    assert concepts("learning-rate warmup") == ["lr", "warmup"]
    # the stored index keeps the plain tokens: nothing to rebuild
    assert tokens("MATRIX_LR") == ["matrix", "lr"] and similar.search_text("LayerNorm", "") == "layernorm"


def test_every_spelling_of_the_table_is_read_as_its_concept() -> None:
    for concept, spellings in SPELLINGS.items():
        assert concepts(concept) == [concept]
        for spelling in spellings:
            assert concepts(spelling) == [concept], (concept, spelling)


def test_recall_on_paraphrases_goes_up(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    _load(ledger)
    with_table = _recall(ledger)
    monkeypatch.setattr(similar, "SPELLINGS", {})  # the same search without the tables
    monkeypatch.setattr(ml_concepts, "CONCEPTS", {})
    without = _recall(ledger)
    assert with_table == 1.0 and without <= 0.5, (with_table, without)


@pytest.mark.parametrize(("query", "wanted"), PARAPHRASES)
def test_each_paraphrase_finds_its_trials_first(ledger: Ledger, query: str, wanted: set[str]) -> None:
    _load(ledger)
    found = ledger.agent.find_similar("p", query, 5)
    assert {s.exp_id for s in found[: len(wanted)]} == wanted, [(s.exp_id, s.score) for s in found]


def test_unrelated_queries_stay_below_true_hits(ledger: Ledger) -> None:
    _load(ledger)
    assert ledger.agent.find_similar("p", "swap the optimizer for Lion") == []
    assert ledger.agent.find_similar("p", "rotary embeddings base 50000") == [] or all(
        s.exp_id in {"002", "011"} for s in ledger.agent.find_similar("p", "rotary embeddings base 50000")
    )
    hits = ledger.agent.find_similar("p", "learning rate", 10)
    lr_trials = {"000", "001", "002", "011"}
    scores = {s.exp_id: s.score for s in hits}
    assert lr_trials <= set(scores)
    assert all(scores[other] < min(scores[t] for t in lr_trials) for other in set(scores) - lr_trials)
    assert "004" not in {s.exp_id for s in ledger.agent.find_similar("p", "batch normalization in the critic")}


def test_similar_prior_sees_other_spellings(ledger: Ledger) -> None:
    _load(ledger)
    result = ledger.recording.record_trial(
        "p", {"status": "discard", "core_metric": 1.0, "hypothesis": "weight_decay 0.2"}, similar_prior=True
    )
    assert [s.exp_id for s in result.similar_prior] == ["003"]
