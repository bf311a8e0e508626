"""``lineage watch`` links a row to the trial a loop already recorded through the API (the
same commit, or the same description and metric) instead of adding a copy; the export is
still the file, byte for byte. On SQLite and PostgreSQL."""

from __future__ import annotations

import io
from pathlib import Path

from lineage import loops
from lineage.domain import Trial
from lineage.loops.watch import same_trial
from lineage.service import Ledger
from tests.lineage.autoresearch_files import ORIGINAL

HEAD, *ROWS = ORIGINAL.splitlines(keepends=True)


def _export(ledger: Ledger, slug: str) -> str:
    out = io.StringIO()
    ledger.files.export_results(slug, out)
    return out.getvalue()


def test_a_row_recorded_through_the_api_first_is_linked_not_copied(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    path.write_text(HEAD + "".join(ROWS[:3]))
    sync = loops.ResultsSync(ledger, "ar", path)
    assert sync.sync().inserted == ["000", "001", "002"]
    # the loop records trial 3 over the API (a crash, the autoresearch way), then appends its row
    api = ledger.recording.record_trial(
        "ar",
        {
            "status": "crash",
            "core_metric": 0,
            "hypothesis": "double model width (OOM)",
            "extra": {"commit": "d4e5f6a"},
            "notes": "OOM at step 12",
        },
    )
    assert api.trial.exp_id == "003" and api.trial.parent_exp == "001"
    # trial 4 by description and metric alone (no commit sent)
    ledger.recording.record_trial("ar", {"status": "keep", "core_metric": 0.9901, "hypothesis": "add 200 warmup steps"})
    with path.open("a") as fh:
        fh.write("".join(ROWS[3:5]))
    report = sync.sync()
    assert report.linked == ["003", "004"] and report.inserted == [] and not report.warnings
    trials = {t.exp_id: t for t in ledger.tables.stream_trials("ar")}
    assert len(trials) == 5
    assert trials["003"].notes == "OOM at step 12" and trials["003"].extra["_reported_metric"] == 0
    assert trials["004"].extra["memory_gb"] == 44.1 and trials["004"].parent_exp == "001"
    with path.open("a") as fh:
        fh.write("".join(ROWS[5:]))
    assert sync.sync().inserted == ["005", "006", "007"]
    assert _export(ledger, "ar") == path.read_text()
    # a restart links nothing twice and adds nothing
    again = loops.ResultsSync(ledger, "ar", path).sync()
    assert not again.changed and ledger.projects.project("ar").trial_count == 8


def test_a_linked_trial_keeps_the_agents_hypothesis_and_the_row_text_goes_to_extra(
    ledger: Ledger, tmp_path: Path
) -> None:
    path = tmp_path / "results.tsv"
    path.write_text(HEAD + "".join(ROWS[:3]))
    sync = loops.ResultsSync(ledger, "ar", path)
    sync.sync()
    words = "double the model width to 1536 to test whether capacity limits val_bpb (expect OOM risk)"
    ledger.recording.record_trial(
        "ar", {"status": "crash", "hypothesis": words, "extra": {"commit": "d4e5f6a", "memory_gb": 0.0}}
    )
    with path.open("a") as fh:
        fh.write(ROWS[3])  # d4e5f6a ... double model width (OOM)
    assert sync.sync().linked == ["003"]
    linked = ledger.trials.trial("ar", "003")
    assert linked.hypothesis == words and linked.extra["row_description"] == "double model width (OOM)"
    assert _export(ledger, "ar") == path.read_text()  # the file's own text, byte for byte
    # the row rewritten in place later (its description edited): the agent's words still stay
    path.write_text(path.read_text().replace("double model width (OOM)", "double model width (OOM at step 12)"))
    assert sync.sync().updated == ["003"]
    rewritten = ledger.trials.trial("ar", "003")
    assert rewritten.hypothesis == words and rewritten.extra["row_description"] == "double model width (OOM at step 12)"
    assert _export(ledger, "ar") == path.read_text()
    assert [hit.exp_id for hit in ledger.agent.find_similar("ar", "capacity limits model width", limit=1)] == ["003"]
    # a trial of the file keeps no words of its own: its row's text is its hypothesis
    assert "row_description" not in ledger.trials.trial("ar", "001").extra


def test_a_different_trial_under_the_rows_exp_id_still_gets_a_fresh_id(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    path.write_text(HEAD + "".join(ROWS[:3]))
    sync = loops.ResultsSync(ledger, "ar", path)
    sync.sync()
    ledger.recording.record_trial(
        "ar", {"status": "keep", "core_metric": 0.5, "hypothesis": "something else", "extra": {"commit": "0000000"}}
    )
    with path.open("a") as fh:
        fh.write(ROWS[3])
    report = sync.sync()
    assert report.linked == [] and report.inserted and any("recorded without this file" in w for w in report.warnings)
    assert ledger.projects.project("ar").trial_count == 5


def test_same_trial() -> None:
    row = Trial("003", hypothesis="h", core_metric=1.0, extra={"commit": "abcdef1"})
    assert same_trial(Trial("003", extra={"commit": "abcdef1234567890"}), row, None)
    assert not same_trial(Trial("003", hypothesis="h", core_metric=1.0, extra={"commit": "1234567"}), row, None)
    assert same_trial(Trial("003", hypothesis="h ", core_metric=1.0 + 1e-12), row.with_changes(extra={}), None)
    assert not same_trial(Trial("003", hypothesis="h", core_metric=1.1), row.with_changes(extra={}), None)
    assert not same_trial(Trial("003", hypothesis="", core_metric=None), Trial("003"), None)
