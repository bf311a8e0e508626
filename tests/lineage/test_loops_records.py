"""Results files without loss (issue 19) in the ledger, on SQLite and PostgreSQL: every
record is a stored trial (a metric cell that is not a number, every row of a long-format
file), headerless files import with the ``columns`` option, the loop's kept values
decide an overwhelming direction, and each file exports byte for byte; atomic imports
and watch keep working."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from lineage import loops
from lineage.errors import InvalidInput, NotFound
from lineage.formats import autoresearch as ar
from lineage.service import Ledger
from tests.lineage.autoresearch_files import (
    FAIL_RECORDS,
    HEADERLESS_COLUMNS,
    HEADERLESS_MODELS,
    RECORDS,
    RECORDS_METRIC_NAME,
    score_is_a_time,
)


def imported(ledger: Ledger, text: str, slug: str = "loop", **options: object) -> loops.LoopImport:
    return ledger.files.import_results(slug, text, options=ar.ImportOptions(**options))  # type: ignore[arg-type]


def exported(ledger: Ledger, slug: str = "loop") -> str:
    out = io.StringIO(newline="")
    ledger.files.export_results(slug, out)
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_every_record_is_stored_and_the_file_exports_byte_for_byte(ledger: Ledger, name: str) -> None:
    case = RECORDS[name]
    done = imported(ledger, case.text, **case.options)
    assert done.rows == case.rows and done.created
    project = ledger.projects.project("loop")
    assert project.trial_count == case.rows
    assert project.metric_name == RECORDS_METRIC_NAME.get(name, case.metric)
    assert project.lower_is_better is case.lower
    assert ledger.trials.best("loop").exp_id == case.best  # type: ignore[union-attr]
    assert exported(ledger) == case.text
    for expected in case.warns:
        assert sum(expected in w for w in done.warnings) == 1, (expected, done.warnings)


def test_a_failed_record_is_a_trial_without_a_metric_and_never_the_best(ledger: Ledger) -> None:
    imported(ledger, FAIL_RECORDS)
    failed = ledger.trials.trial("loop", "001")
    assert failed.core_metric is None and failed.extra["val_bpb"] == "FAIL" and failed.status.value == "discard"
    assert ledger.trials.trial("loop", "004").extra["val_bpb"] == "error: CUDA OOM"
    assert ledger.trials.best("loop").exp_id == "005"  # type: ignore[union-attr]
    assert ledger.browse.dashboard("loop").best.exp_id == "005"  # type: ignore[union-attr]
    assert [s.exp_id for s in ledger.agent.find_similar("loop", "double width compile error")][:1] == ["001"]


def test_long_format_project_takes_the_chosen_name_as_its_metric(ledger: Ledger) -> None:
    imported(ledger, RECORDS["long_format"].text, lower_is_better=False)
    project = ledger.projects.project("loop")
    assert project.metric_name == "resolution_rate" and project.lower_is_better is False
    best = ledger.trials.best("loop")
    assert best is not None and best.extra["metric"] == "resolution_rate" and best.core_metric == pytest.approx(0.198)
    trend = ledger.trials.trial("loop", "002")
    assert trend.extra == {**trend.extra, "metric": "trend", "value": "rising"} and trend.core_metric is None


def test_a_headerless_file_needs_its_columns_and_then_exports_without_a_header(ledger: Ledger) -> None:
    with pytest.raises(InvalidInput) as info:
        imported(ledger, HEADERLESS_MODELS)
    assert info.value.line == 1 and "--columns" in info.value.message
    with pytest.raises(NotFound):
        ledger.projects.project("loop")
    done = imported(ledger, HEADERLESS_MODELS, columns=HEADERLESS_COLUMNS)
    assert done.layout.has_header is False and ledger.projects.project("loop").metric_name == "tok_s"
    assert exported(ledger) == HEADERLESS_MODELS


def test_the_loops_own_choices_decide_the_direction_with_a_warning(ledger: Ledger) -> None:
    done = imported(ledger, score_is_a_time())
    assert done.lower_is_better is True and "against the name 'score'" in done.direction
    assert sum("says higher is better, but 26 of 26 moves" in w for w in done.warnings) == 1
    assert ledger.projects.project("loop").lower_is_better is True
    imported(ledger, score_is_a_time(), slug="flagged", lower_is_better=False)  # the flag wins
    assert ledger.projects.project("flagged").lower_is_better is False


def test_a_bad_row_after_failed_records_imports_nothing(ledger: Ledger) -> None:
    bad = FAIL_RECORDS + "b8c9d0e\t8\tFAIL\t44.0\tdiscard\t" + "x" * 70_000 + "\n"
    with pytest.raises(InvalidInput) as info:
        imported(ledger, bad)
    assert info.value.line == 9 and info.value.field == "hypothesis"
    with pytest.raises(NotFound):
        ledger.projects.project("loop")


def test_watch_takes_an_appended_failed_record_as_a_trial(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    lines = FAIL_RECORDS.splitlines(keepends=True)
    path.write_text("".join(lines[:2]), encoding="utf-8")
    sync = loops.ResultsSync(ledger, "w", path)
    assert sync.sync().inserted == ["000"]
    with path.open("a", encoding="utf-8", newline="") as fh:
        fh.write("".join(lines[2:4]))
    assert sync.sync().inserted == ["001", "002"]
    assert ledger.trials.trial("w", "001").extra["val_bpb"] == "FAIL"
    with path.open("a", encoding="utf-8", newline="") as fh:
        fh.write("".join(lines[4:]))
    assert sync.sync().inserted == ["003", "004", "005", "006"]
    assert exported(ledger, "w") == FAIL_RECORDS
