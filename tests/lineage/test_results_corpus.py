"""The variant catalogue of issue 19 through the real importer, on both backends.

Each variant of :mod:`tests.lineage.results_variants` (a generated look-alike of real
results files; ``expected`` is what a person decided by reading the real ones) goes in
through ``Ledger.import_file`` -- the one entrance of every face, with ``auto`` sniffing
and the files' bytes rule -- and must give the catalogue's trial count, metric, direction
and best, and export byte for byte. :data:`VERDICTS` records, per variant, the honest
answer where it is not "no flags": the flags a user needs (and what happens without
them: a refusal, or a reading the importer cannot tell is wrong), a refusal, or a
difference from the catalogue's reading with the rule that decides it.

The figures (:data:`FIGURES`) -- how many variants import without flags, how many need
flags, how many are refused -- are counted from the verdicts and pinned by a test.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from lineage.errors import InvalidInput, NotFound
from lineage.formats.autoresearch import ImportOptions
from lineage.formats.text import check_text
from lineage.service import Ledger
from tests.lineage.results_variants import FLASH_COLUMNS, SKILL_COLUMNS, VARIANTS

NO_FLAGS, FLAGS, REFUSED = "imports without flags", "needs flags", "refused"
#: without its flags, the file is refused (safe) or imported with another reading
REFUSES, MISREADS = "refused", "misread"


@dataclass(frozen=True)
class Verdict:
    #: the flags a user needs, as ImportOptions keywords (empty: none)
    flags: dict[str, Any] = field(default_factory=dict)
    #: what happens without the flags: REFUSES or MISREADS (with flags only)
    without: str | None = None
    #: a refused file: a substring of the error (which names line 1)
    refuse: str | None = None
    #: the importer's answer where it differs from the catalogue's reading, by a rule
    #: named in ``why`` (keys: rows, metric, metric_name, best, text_lines)
    differs: dict[str, Any] = field(default_factory=dict)
    why: str = ""

    @property
    def outcome(self) -> str:
        return REFUSED if self.refuse else FLAGS if self.flags else NO_FLAGS


AUTO = Verdict()
VERDICTS: dict[str, Verdict] = {
    "karpathy_classic": AUTO,
    "wide_extra_metrics_higher": AUTO,  # a rate (tok_per_sec) is a throughput, not a resource
    "uppercase_words_minus_999_sentinel": AUTO,
    "headerless_inference_log": Verdict({"columns": FLASH_COLUMNS}, REFUSES, why="line 1 is data: --columns"),
    "headerless_single_row_cjk": Verdict(
        {"columns": SKILL_COLUMNS, "metric": "new_score"},
        REFUSES,
        why="line 1 is data; then old_score, named like a metric, comes before new_score",
    ),
    "fail_na_score_lower_in_microseconds": AUTO,  # 10 of 10 kept moves down overrule the name 'score'
    "score_minimized_with_parent_column": AUTO,
    "fitness_lower_too_few_moves": Verdict(
        {"lower_is_better": True}, REFUSES, why="5 kept moves down against the name: below the 8-move rule"
    ),
    "long_format_metric_per_row": Verdict(
        {"lower_is_better": True},
        REFUSES,
        differs={"metric": "actual_value", "metric_name": "diffuse_false_accept_on", "best": 25.0},
        why="long format: the project's metric is one of the names (the first of the well-formed rows, all "
        "numeric once); its name gives no direction and there is no status column to weigh",
    ),
    "self_describing_metric_columns": Verdict(
        differs={"metric_name": "separation_score"},
        why="metric_name/metric_value columns are a long format of one name: the project's metric is the name "
        "the file gives, and 'score' says higher (the catalogue expected a --higher flag)",
    ),
    "dash_placeholders_in_metric": AUTO,
    "empty_metric_cells_failed_rows": AUTO,
    "na_on_crash_rows_and_bogus_discard": AUTO,
    "zero_metric_on_non_crash_rows": AUTO,  # the kept policy keeps the discard rows' zeros out of the best
    "accepted_zero_one_flag": Verdict(
        {"status": "accepted", "status_map": {"1": "keep", "0": "discard"}},
        MISREADS,
        why="'accepted' is no status name and 1/0 no status words: every row keep",
    ),
    "verdict_words_ranges_multi_series": Verdict(
        {"metric": "hpd_ks", "lower_is_better": True}, REFUSES, why="alpha comes first; 'ks' says no direction"
    ),
    "correct_ok_fail_zero_rows": AUTO,  # OK/FAIL under 'correct': 3 of 4 kept moves down decide lower
    "correctness_column_mixed_units": AUTO,
    "same_improved_status_words": Verdict({"lower_is_better": False}, REFUSES, why="one keep: no moves"),
    "kept_true_false_json_params": AUTO,
    "crlf_uppercase_sparse_cells": AUTO,
    "comma_csv_fully_quoted": Verdict(
        {"lower_is_better": False}, REFUSES, why="no status column: zig-zagging measurements are no choices"
    ),
    "tsv_with_csv_style_quoting": AUTO,
    "interleaved_program_output": AUTO,  # generations_per_s is a rate: higher
    "separator_line_and_extra_trailing_cells": AUTO,  # two cells without a column: still trials
    "annotation_rows_and_cjk_status": Verdict(
        {
            "metric": "val_score",
            "status_map": "保留✔=keep,保留✔✔=keep,旧最佳(test:-8.1%)=keep,"
            "最新最佳✔✔✔(test:+2.2%,dd:4.9%)=keep,基线=baseline,回滚=discard,"
            "回滚(交易<10)=discard",
        },
        MISREADS,
        differs={"rows": 10, "text_lines": []},
        why="train_score comes first; the '---' rows have the table's shape, so they are records (trials "
        "without a metric, never the best), as the shape rule says",
    ),
    "two_records_on_one_line": Verdict(
        {"lower_is_better": True}, REFUSES, why="3 of 4 kept moves down against the name 'fitness'"
    ),
    "record_split_over_two_lines": Verdict(
        {"metric": "composite_score"}, MISREADS, why="accuracy, named like a metric, comes first"
    ),
    "misaligned_extra_cell_mid_row": AUTO,  # the inserted duration is a cell without a column
    "second_row_layout": Verdict(
        differs={"rows": 8, "text_lines": [8, 9, 10]},
        why="the 7-cell rows of a second layout fit no reading of the header's columns: kept as text, named in "
        "a warning, exported as written",
    ),
    "status_before_metric_annotated_cell": AUTO,  # 2 of 2 kept moves down decide lower
    "old_new_score_pair": Verdict({"metric": "new_score"}, MISREADS, why="old_score comes first"),
    "before_after_pair_negative": Verdict({"metric": "composite_after"}, MISREADS, why="composite_before first"),
    "first_numeric_is_not_the_metric": Verdict(
        {"metric": "exact_match_rate"}, MISREADS, why="format_pass_rate, named like a metric, comes first"
    ),
    "resource_named_objective": Verdict(
        {"metric": "total_ms"},
        MISREADS,
        why="constant 'passes'/'hits' columns are named like metrics; with "
        "total_ms named, 7 of 9 kept moves down decide lower",
    ),
    "column_named_metric_no_status": Verdict(
        {"lower_is_better": False}, REFUSES, why="no status column: zig-zagging measurements are no choices"
    ),
    "metric_cells_with_units": Verdict(
        {"metric": "metric", "lower_is_better": True},
        REFUSES,
        differs={"best": None},
        why="'8.7s' and 'various' are no numbers: 3 trials without a metric, no best (units are not read)",
    ),
    "multi_series_categories": Verdict(
        {"lower_is_better": False}, MISREADS, why="interleaved series: 4 of 6 kept moves down say lower"
    ),
    "no_status_column_capitalised": AUTO,
    "exp_id_first_but_not_fieldkit": Verdict({"metric": "val_map50_95"}, MISREADS, why="val_map50 comes first"),
    "shipped_only_status": Verdict(
        {"status_map": "shipped=keep", "metric": "venture", "lower_is_better": False},
        REFUSES,
        why="'shipped' is unknown (discard); research comes first; no moves",
    ),
    "packed_key_value_cell": AUTO,
    "big_integer_metric": AUTO,
    # 'core' sits where autoresearch's convention puts the metric (right after commit), so it
    # beats win_acc (named like a metric, later); 11 of 11 kept moves up decide the direction
    "name_without_direction_many_kept_moves": AUTO,
    "header_only": AUTO,
    "header_then_blank_line": AUTO,
    "placeholder_no_metric": Verdict(refuse="no numeric column"),
    "not_a_loop_key_value": Verdict(refuse="not the results table of a loop"),
    "not_a_loop_quoted_header": Verdict(refuse="not the results table of a loop"),
    "not_a_loop_benchmark_dump": Verdict(refuse="not the results table of a loop"),
}

#: How the catalogue's variants import (issue 19's corpus figures).
FIGURES = {NO_FLAGS: 26, FLAGS: 20, REFUSED: 4}


def slug_of(name: str) -> str:
    return name.replace("_", "-")[:60]


def import_variant(ledger: Ledger, name: str, text: str, flags: dict[str, Any]):  # type: ignore[no-untyped-def]
    options = ImportOptions.from_text(
        metric=flags.get("metric"),
        status=flags.get("status"),
        status_map=(
            ",".join(f"{k}={v}" for k, v in flags["status_map"].items())
            if isinstance(flags.get("status_map"), dict)
            else flags.get("status_map")
        ),
        columns=flags.get("columns"),
    )
    options = replace(options, lower_is_better=flags.get("lower_is_better"))
    data = text.encode("utf-8")
    return ledger.files.import_file(
        slug_of(name),
        io.StringIO(check_text(data, source=name), newline=""),
        fmt="auto",
        source=name,
        create_with={},
        options=options,
    )


def exported(ledger: Ledger, slug: str) -> str:
    out = io.StringIO(newline="")
    ledger.files.export_results(slug, out)
    return out.getvalue()


def test_every_variant_has_a_verdict_and_the_figures_add_up() -> None:
    assert set(VERDICTS) == set(VARIANTS)
    counted = {outcome: sum(1 for v in VERDICTS.values() if v.outcome == outcome) for outcome in FIGURES}
    assert counted == FIGURES and sum(FIGURES.values()) == len(VARIANTS)
    for name, verdict in VERDICTS.items():
        _text, expected = VARIANTS[name]()
        assert bool(expected.get("refuse")) == bool(verdict.refuse), name  # the catalogue's refusals, exactly
        assert (verdict.without is None) == (not verdict.flags), name


@pytest.mark.parametrize("name", [n for n, v in VERDICTS.items() if not v.refuse])
def test_a_variant_imports_as_the_catalogue_reads_it_and_exports_byte_for_byte(ledger: Ledger, name: str) -> None:
    text, expected = VARIANTS[name]()
    verdict = VERDICTS[name]
    report = import_variant(ledger, name, text, verdict.flags)
    want = {
        "rows": expected["trial_count"],
        "metric": expected["metric"],
        "metric_name": expected["metric"],
        "best": expected["best_value"],
        "text_lines": [n for n in expected.get("text_lines", []) if text.splitlines()[n - 1].strip()],
        **verdict.differs,
    }
    assert report.committed and report.rows == want["rows"], (report.rows, want["rows"])
    assert (report.metric, report.metric_name) == (want["metric"], want["metric_name"])
    lower = expected["lower_is_better"] if expected["lower_is_better"] is not None else verdict.flags["lower_is_better"]
    assert report.lower_is_better is lower, report.direction
    best = ledger.files.best_metric(slug_of(name))
    assert best == (pytest.approx(want["best"]) if want["best"] is not None else None), best
    assert list(report.text_lines) == want["text_lines"], report.warnings
    # records whose metric cell is not a number are trials without a metric; the cells that are
    # no placeholder ('FAIL', '~0.05', not '-' or 'N/A') are named in one warning
    odd = expected.get("non_numeric_metric_lines", [])
    stored = list(ledger.tables.stream_trials(slug_of(name)))
    assert sum(1 for t in stored if t.core_metric is None) >= len(odd)
    warned = [w for w in report.warnings if "cell is not a number" in w]
    assert len(warned) <= 1
    named = {int(n) for n in re.findall(r"\d+", warned[0].split(":")[0])} if warned else set()
    assert named <= set(odd), (named, odd)
    assert exported(ledger, slug_of(name)) == text


@pytest.mark.parametrize("name", [n for n, v in VERDICTS.items() if v.flags])
def test_without_its_flags_a_variant_is_refused_or_read_otherwise(ledger: Ledger, name: str) -> None:
    text, expected = VARIANTS[name]()
    verdict = VERDICTS[name]
    if verdict.without == REFUSES:
        with pytest.raises(InvalidInput) as info:
            import_variant(ledger, name, text, {})
        assert info.value.line is not None, info.value.message  # the header's cell, or line 1 of data
        with pytest.raises(NotFound):
            ledger.projects.project(slug_of(name))
        return
    report = import_variant(ledger, name, text, {})
    project = ledger.projects.project(slug_of(name))
    statuses = {t.status.value for t in ledger.tables.stream_trials(slug_of(name))}
    assert (
        report.metric != expected["metric"]
        or report.lower_is_better is not expected["lower_is_better"]
        or statuses == {"keep"}
    ), report  # a reading the importer cannot tell is wrong: the flags fix it
    assert project.trial_count == report.rows


@pytest.mark.parametrize("name", [n for n, v in VERDICTS.items() if v.refuse])
def test_a_file_that_is_no_loops_log_is_refused_naming_its_line(ledger: Ledger, name: str) -> None:
    text, _expected = VARIANTS[name]()
    with pytest.raises(InvalidInput) as info:
        import_variant(ledger, name, text, {})
    assert info.value.line == 1 and VERDICTS[name].refuse in info.value.message
    with pytest.raises(NotFound):
        ledger.projects.project(slug_of(name))


def test_the_values_overrule_a_names_suggestion_with_a_warning_naming_both(ledger: Ledger) -> None:
    text, _ = VARIANTS["fail_na_score_lower_in_microseconds"]()
    report = import_variant(ledger, "fail_na_score_lower_in_microseconds", text, {})
    assert report.lower_is_better is True and "against the name 'score'" in report.direction
    assert sum("'score' says higher is better, but 10 of 10 moves" in w for w in report.warnings) == 1


def test_flagged_statuses_give_the_loops_lineage(ledger: Ledger) -> None:
    text, _ = VARIANTS["accepted_zero_one_flag"]()
    import_variant(ledger, "accepted_zero_one_flag", text, VERDICTS["accepted_zero_one_flag"].flags)
    statuses = [t.status.value for t in ledger.tables.stream_trials(slug_of("accepted_zero_one_flag"))]
    assert statuses.count("keep") == 5 and statuses.count("discard") == 4
