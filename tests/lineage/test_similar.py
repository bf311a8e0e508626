"""'Was this tried?' (lineage.similar, lineage.store.search, Ledger.find_similar) on a real
SQLite file and a real PostgreSQL: what must match, what must not, the same answers on
both backends, the index kept in step by every write path, and bad queries."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from lineage.errors import InvalidInput
from lineage.service import Ledger
from lineage.similar import MAX_QUERY_CHARS, PRIOR_THRESHOLD, tokens

#: Trials written by the tests: (hypothesis, notes).
PAST = [
    ("baseline: vanilla GRPO, fixed clip", ""),
    ("turn-group normalization with α=0.3", "normalize IG per (prompt, turn) group"),
    ("lr 3e-4 with cosine decay", ""),
    ("Normalize outcome and IG rewards separately instead of jointly", "deep-turn advantages drift"),
    ("increase batch size to 512 sequences", "memory 71 GB"),
    ("Lernrate für Übergänge halbieren", "Größere Schritte"),
    ("<b>dropout</b> 0.1 on the <i>value head</i>", ""),
]


def _load(ledger: Ledger, slug: str = "p") -> None:
    ledger.projects.create_project(slug)
    for hypothesis, notes in PAST:
        ledger.recording.record_trial(
            slug, {"status": "discard", "core_metric": 1.0, "hypothesis": hypothesis, "notes": notes}
        )


def _ids(found) -> list[str]:  # type: ignore[no-untyped-def]
    return [s.exp_id for s in found]


def test_reordered_words_and_split_numbers_match(ledger: Ledger) -> None:
    _load(ledger)
    found = ledger.agent.find_similar("p", "α = 0.3 turn group norm")
    assert found[0].exp_id == "001"
    assert found[0].score >= PRIOR_THRESHOLD


def test_paraphrase_with_other_inflections_matches(ledger: Ledger) -> None:
    _load(ledger)
    found = ledger.agent.find_similar("p", "normalise IG and outcome rewards separately, not jointly")
    assert found[0].exp_id == "003"
    assert found[0].score >= 0.8


def test_unrelated_text_does_not_match(ledger: Ledger) -> None:
    _load(ledger)
    assert ledger.agent.find_similar("p", "swap the tokenizer for byte-level BPE") == []
    assert "004" not in _ids(ledger.agent.find_similar("p", "batch normalization in the critic"))


def test_numbers_alone_do_not_make_texts_similar(ledger: Ledger) -> None:
    _load(ledger)
    # "lr 3e-4" and "learning rate 0.0003" are the same idea in other words: not required
    # to match, and a shared number must not pull in unrelated trials
    assert "005" not in _ids(ledger.agent.find_similar("p", "learning rate 0.0003 and 512 warmup steps"))


def test_unicode_text_matches_without_its_accents(ledger: Ledger) -> None:
    _load(ledger)
    assert ledger.agent.find_similar("p", "lernrate fur ubergange halbieren")[0].exp_id == "005"
    assert ledger.agent.find_similar("p", "LERNRATE FÜR ÜBERGÄNGE")[0].exp_id == "005"


def test_markup_in_text_and_query_is_ignored(ledger: Ledger) -> None:
    _load(ledger)
    found = ledger.agent.find_similar("p", "<script>value head</script> dropout 0.1")
    assert found[0].exp_id == "006"
    assert "script" not in tokens("<script>value</script>")


def test_results_carry_status_metric_delta_and_a_bounded_score(ledger: Ledger) -> None:
    ledger.projects.create_project("p", lower_is_better=True)
    ledger.recording.record_trial("p", {"status": "keep", "core_metric": 2.0, "hypothesis": "warmup 500 steps"})
    ledger.recording.record_trial("p", {"status": "keep", "core_metric": 1.5, "hypothesis": "warmup 1000 steps longer"})
    found = ledger.agent.find_similar("p", "longer warmup", limit=5)
    assert [s.exp_id for s in found] == ["001", "000"]
    assert found[0].status == "keep" and found[0].core_metric == 1.5 and found[0].delta_vs_best == pytest.approx(-0.5)
    assert found[1].delta_vs_best is None
    assert all(0.0 <= s.score <= 1.0 for s in found) and found[0].score > found[1].score


def test_limit_caps_the_results(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    for i in range(8):
        ledger.recording.record_trial("p", {"status": "discard", "hypothesis": f"entropy bonus sweep {i}"})
    assert len(ledger.agent.find_similar("p", "entropy bonus", limit=3)) == 3


def test_other_projects_are_not_searched(ledger: Ledger) -> None:
    _load(ledger, "p")
    ledger.projects.create_project("q")
    assert ledger.agent.find_similar("q", "turn group normalization") == []


@pytest.mark.parametrize(
    "query, reason",
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("x" * (MAX_QUERY_CHARS + 1), "at most"),
        ("a" * 1_048_576, "at most"),
        ("the of and with", "no words"),
        ("<p></p> ... !!", "no words"),
    ],
)
def test_bad_queries_are_errors_naming_the_field(ledger: Ledger, query: str, reason: str) -> None:
    _load(ledger)
    with pytest.raises(InvalidInput) as caught:
        ledger.agent.find_similar("p", query)
    assert caught.value.field == "text" and reason in caught.value.reason


@pytest.mark.parametrize("limit", [0, 51, -1])
def test_limit_out_of_range_is_an_error(ledger: Ledger, limit: int) -> None:
    _load(ledger)
    with pytest.raises(InvalidInput) as caught:
        ledger.agent.find_similar("p", "dropout", limit)
    assert caught.value.field == "limit"


def test_recording_returns_close_earlier_trials(ledger: Ledger) -> None:
    _load(ledger)
    result = ledger.recording.record_trial(
        "p", {"status": "discard", "hypothesis": "α = 0.3 turn group norm"}, similar_prior=True
    )
    assert [s.exp_id for s in result.similar_prior] == ["001"]
    assert result.similar_prior[0].score >= PRIOR_THRESHOLD
    fresh = ledger.recording.record_trial(
        "p", {"status": "discard", "hypothesis": "mixture of experts router"}, similar_prior=True
    )
    assert fresh.similar_prior == ()


def test_recording_without_the_option_skips_the_search(ledger: Ledger) -> None:
    _load(ledger)
    assert (
        ledger.recording.record_trial("p", {"status": "discard", "hypothesis": "α = 0.3 turn group norm"}).similar_prior
        == ()
    )


def test_the_index_follows_updates(ledger: Ledger) -> None:
    _load(ledger)
    ledger.recording.update_trial("p", "004", {"hypothesis": "gradient checkpointing everywhere", "notes": ""})
    assert _ids(ledger.agent.find_similar("p", "gradient checkpointing")) == ["004"]
    assert "004" not in _ids(ledger.agent.find_similar("p", "increase batch size 512 sequences"))


def test_the_index_follows_imports_and_deletes(ledger: Ledger) -> None:
    from lineage.demo_data import DEMO_PROJECT, DEMO_TRIALS

    ledger.projects.create_project(**DEMO_PROJECT)
    ledger.tables.import_trials(DEMO_PROJECT["slug"], iter(DEMO_TRIALS))
    assert ledger.agent.find_similar(DEMO_PROJECT["slug"], "normalize rewards separately")[0].exp_id == "002"
    ledger.projects.delete_project(DEMO_PROJECT["slug"])
    assert _indexed(ledger, "separately") == 0


def _indexed(ledger: Ledger, word: str) -> int:
    """Trials of any project that the database's text index finds for ``word``."""
    with ledger.store.read() as conn:
        if ledger.store.sqlite:
            found = conn.execute(text("SELECT count(*) FROM trial_search WHERE trial_search MATCH :w"), {"w": word})
        else:
            found = conn.execute(
                text(
                    "SELECT count(*) FROM trials WHERE to_tsvector('simple', search_text) @@ to_tsquery('simple', :w)"
                ),
                {"w": word},
            )
        return found.scalar()


def test_backends_rank_the_same_data_the_same_way(tmp_path, postgres_url: str) -> None:  # type: ignore[no-untyped-def]
    """One ranking, whatever the database: the same candidates (also when more trials than
    lineage.similar.CANDIDATES hold a query word), scores and order."""
    answers = []
    for url in (str(tmp_path / "same.db"), postgres_url):
        ledger = Ledger.open(url)
        ledger.projects.create_project("same-ranking")
        for i, (hypothesis, notes) in enumerate(PAST * 60):
            ledger.recording.record_trial(
                "same-ranking", {"status": "discard", "hypothesis": f"{hypothesis} v{i % 13}", "notes": notes}
            )
        answers.append(
            [
                [(s.exp_id, s.score) for s in ledger.agent.find_similar("same-ranking", query, limit=50)]
                for query in (
                    "turn group norm α 0.3",
                    "normalise rewards separately",
                    "batch 512",
                    "halbieren",
                    "value head dropout",
                    "v3",
                    # more than lineage.similar.CANDIDATES trials hold one of these words
                    "turn group rewards separately baseline clip batch",
                )
            ]
        )
        ledger.projects.delete_project("same-ranking")
        ledger.close()
    assert answers[0] == answers[1]
    assert all(answers[0])


def test_prefix_terms_find_every_word_under_them(ledger: Ledger) -> None:
    """A prefix term is searched through the vocabulary (lineage.store.search): as the OR
    of its words while they are few, as a prefix when more; both find the same trials,
    also words that only an update or an import brought."""
    from lineage.domain import FailureLabel, Trial
    from lineage.store.search import MAX_EXPANSION

    ledger.projects.create_project("p")
    many = [f"normx{chr(97 + i % 26)}{i}" for i in range(MAX_EXPANSION + 4)]
    for word in many:
        ledger.recording.record_trial("p", {"status": "discard", "hypothesis": f"{word} sweep"})
    ledger.recording.record_trial("p", {"status": "discard", "hypothesis": "placeholder"})
    ledger.recording.update_trial("p", f"{len(many):03d}", {"hypothesis": "quantile regression sweep"})
    ledger.tables.import_trials(
        "p", iter([Trial(exp_id="900", status=FailureLabel.DISCARD, hypothesis="quantization sweep")])
    )
    found = ledger.agent.find_similar("p", "normx sweep", limit=50)  # the prefix form
    assert sorted(s.hypothesis.split()[0] for s in found if s.score >= PRIOR_THRESHOLD) == sorted(many)
    assert sorted(_ids(ledger.agent.find_similar("p", "quant", limit=50))) == [f"{len(many):03d}", "900"]
    # after an import, single writes are indexed again (SQLite: the import's flag is gone)
    ledger.recording.record_trial("p", {"status": "discard", "hypothesis": "zebra finch"})
    assert _ids(ledger.agent.find_similar("p", "zebra")) == ["901"]


def test_deleting_a_large_project_keeps_the_index_right(ledger: Ledger, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Past lineage.store.search.COMPACT_AFTER_DELETING trials, SQLite's index is merged
    in the deleting transaction: the other project's trials stay findable, the deleted
    ones are gone."""
    import lineage.store.search

    monkeypatch.setattr(lineage.store.search, "COMPACT_AFTER_DELETING", 5)
    _load(ledger, "keep")
    _load(ledger, "gone")
    ledger.recording.record_trial("gone", {"status": "discard", "hypothesis": "separately tuned zebra"})
    ledger.projects.delete_project("gone")
    assert ledger.agent.find_similar("keep", "normalize rewards separately")[0].exp_id == "003"
    assert _indexed(ledger, "zebra") == 0 and _indexed(ledger, "separately") == 1


def test_similar_prior_finds_an_old_idea_beyond_the_newest_trials(ledger: Ledger) -> None:
    """similar_prior ranks a bounded shortlist (lineage.similar): the newest trials and those
    sharing a band of the new trial's sketch, so an idea tried long ago is still found, and
    the sketch follows an update of the hypothesis."""
    from lineage.similar import PRIOR_RECENT

    ledger.projects.create_project("p")
    ledger.recording.record_trial(
        "p", {"status": "discard", "hypothesis": "turn-group normalization with α=0.3 for deep turns"}
    )
    ledger.recording.record_trial("p", {"status": "discard", "hypothesis": "placeholder"})
    for i in range(PRIOR_RECENT * 2):
        ledger.recording.record_trial(
            "p", {"status": "discard", "hypothesis": f"swap tokenizer variant {i} with byte fallback"}
        )
    found = ledger.recording.record_trial(
        "p", {"status": "discard", "hypothesis": "α = 0.3 turn group norm for deep turns"}, similar_prior=True
    ).similar_prior
    assert [s.exp_id for s in found] == ["000"]
    ledger.recording.update_trial("p", "001", {"hypothesis": "cosine schedule for the muon optimizer momentum"})
    moved = ledger.recording.record_trial(
        "p", {"status": "discard", "hypothesis": "muon momentum with a cosine schedule"}, similar_prior=True
    ).similar_prior
    assert [s.exp_id for s in moved] == ["001"]
