"""The autoresearch / generic results-table format, without a database: every variant and
quirk of :mod:`tests.lineage.autoresearch_files` parses as documented and writes back
byte for byte; status words, placeholders, direction, lineage and exp_ids follow the rules
of :mod:`lineage.formats.autoresearch`."""

from __future__ import annotations

import io

import pytest

from lineage.domain import BestPolicy, FailureLabel, Trial, ordered_best
from lineage.errors import InvalidInput
from lineage.formats import FORMATS, detect_format, get_format
from lineage.formats import autoresearch as ar
from tests.lineage.autoresearch_files import NOT_TABLES, ORIGINAL, QUIRKS, WELL_FORMED, Case, tsv


def read(text: str, **options) -> tuple[list[Trial], ar.Layout, list[str]]:  # type: ignore[no-untyped-def]
    warnings: list[str] = []
    layouts: list[ar.Layout] = []
    fmt = options.pop("fmt", ar.NAME)
    policy = options.pop("best_policy", BestPolicy.KEPT)
    trials = list(
        ar.read_trials(
            io.StringIO(text, newline=""),
            options=ar.ImportOptions(**options),
            warnings=warnings,
            layout_out=layouts,
            fmt=fmt,
            best_policy=policy,
        )
    )
    return trials, layouts[0], warnings


def write(trials: list[Trial], layout: ar.Layout) -> str:
    out = io.StringIO(newline="")
    ar.write_trials(trials, out, layout=layout)
    return out.getvalue()


def best_of(trials: list[Trial], lower: bool) -> Trial | None:
    eligible = BestPolicy.KEPT.eligible_statuses()
    seq = [t.with_changes(seq=i) for i, t in enumerate(trials) if t.status.value in eligible]
    return ordered_best(seq, lower_is_better=lower)


def fmt_of(name: str) -> str:
    return ar.GENERIC if name.startswith("csv") else ar.NAME


@pytest.mark.parametrize("name", sorted(WELL_FORMED))
def test_well_formed_files_round_trip_byte_for_byte(name: str) -> None:
    case: Case = WELL_FORMED[name]
    trials, layout, warnings = read(case.text, fmt=fmt_of(name), **case.options)
    assert len(trials) == case.rows
    assert layout.metric == case.metric
    assert write(trials, layout) == case.text
    for expected in case.warns:
        assert any(expected in w for w in warnings), (expected, warnings)
    if case.best is not None:
        found = best_of(trials, case.lower)  # type: ignore[arg-type]
        assert found is not None and found.exp_id == case.best


@pytest.mark.parametrize("name", sorted(QUIRKS))
def test_quirks_are_repaired_with_one_warning_per_row_and_still_round_trip(name: str) -> None:
    case = QUIRKS[name]
    trials, layout, warnings = read(case.text)
    assert len(trials) == case.rows
    assert [t.exp_id for t in trials] == [f"{i:03d}" for i in range(case.rows)]
    for expected in case.warns:
        assert sum(expected in w for w in warnings) == 1, (expected, warnings)
    assert write(trials, layout) == case.text
    # what the row says survives the repair
    clean, _, _ = read(ORIGINAL)
    for got, want in zip(trials, clean):
        assert (got.status, got.core_metric) == (want.status, want.core_metric)
    if name == "tab_in_description":
        assert trials[2].hypothesis == "switch to GeLU\tactivation"
    if name.startswith("merged_rows"):
        assert trials[1].hypothesis == "increase LR to 0.04" and trials[2].extra["commit"] == "c3d4e5f"
        assert trials[2].extra["_part"] == 1


@pytest.mark.parametrize("name", sorted(NOT_TABLES))
def test_a_file_that_is_not_a_results_table_is_one_error_naming_the_line(name: str) -> None:
    data, line, word = NOT_TABLES[name]
    with pytest.raises(InvalidInput) as info:
        text = ar.check_text(data, source="in.tsv")
        list(ar.read_trials(io.StringIO(text, newline=""), source="in.tsv"))
    assert info.value.line == line or (name == "binary" and info.value.line == data.count(b"\n", 0, data.index(0)) + 1)
    assert word in info.value.message


# -- status words ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "label"),
    [
        ("keep", "keep"),
        ("KEEP", "keep"),
        ("Kept", "keep"),
        ("accepted", "keep"),
        ("improved", "keep"),
        ("discard", "discard"),
        ("REVERT", "discard"),
        ("reverted", "discard"),
        ("rejected", "discard"),
        ("crash", "crash"),
        ("CRASHED", "crash"),
        ("oom", "crash"),
        ("OOM", "crash"),
        ("error", "crash"),
        ("failed", "crash"),
        ("nan", "crash"),
        ("timeout", "train_budget_overrun"),
        ("timed-out", "train_budget_overrun"),
        ("eval_timeout", "eval_budget_overrun"),
        ("killed", "harness_abort"),
        ("running", "harness_abort"),
        ("pending", "harness_abort"),
        ("BASELINE", "baseline"),
        ("baseline", "baseline"),
        ("behalten", "keep"),
        ("verworfen", "discard"),
        ("崩溃", "crash"),
        ("保留", "keep"),
        ("gardé", "keep"),
        ("too_big", "size_blocked"),
        ("disqualified", "disqualified"),
        ("syntax error", "preflight_crash"),
    ],
)
def test_status_words_map_case_insensitively_onto_failure_labels(word: str, label: str) -> None:
    assert ar.map_status(word) == (FailureLabel(label), True)


def test_an_unknown_word_is_discard_never_an_error_and_listed_once() -> None:
    assert ar.map_status("meh") == (FailureLabel.DISCARD, False)
    text = tsv(
        "commit\tval_bpb\tstatus\tdescription",
        "a1b2c3d\t1.0\tkeep\tbase",
        "b2c3d4e\t0.5\tmeh\tx",
        "c3d4e5f\t0.4\tmeh\ty",
        "d4e5f6a\t0.3\tzut\tz",
    )
    trials, layout, warnings = read(text)
    assert [t.status for t in trials[1:]] == [FailureLabel.DISCARD] * 3
    assert [t.extra["status"] for t in trials[1:]] == ["meh", "meh", "zut"]  # the word as written
    listed = [w for w in warnings if "not in the table" in w]
    assert len(listed) == 1 and "'meh' (2 rows)" in listed[0] and "'zut' (1 row)" in listed[0]
    assert best_of(trials, True).exp_id == "000"  # type: ignore[union-attr]  # 0.3 is never the best
    assert write(trials, layout) == text


def test_status_map_adds_words_and_overrides_the_table() -> None:
    mapping = ar.parse_status_map(["meh=keep", "OOM=discard,flaky=crash"])
    assert mapping == {"meh": "keep", "oom": "discard", "flaky": "crash"}
    assert ar.map_status("Meh", mapping) == (FailureLabel.KEEP, True)
    assert ar.map_status("oom", mapping) == (FailureLabel.DISCARD, True)
    with pytest.raises(InvalidInput, match="known"):
        ar.parse_status_map("x=great")
    with pytest.raises(InvalidInput, match="WORD=LABEL"):
        ar.parse_status_map("oops")


# -- no result ---------------------------------------------------------------------------


def test_placeholders_are_no_metric_and_crash_zero_is_never_a_record() -> None:
    text = tsv(
        "commit\tval_bpb\tstatus\tdescription",
        "a1b2c3d\t1.000000\tkeep\tbase",
        "b2c3d4e\t0.000000\tcrash\toom",
        "c3d4e5f\t-999\tdiscard\tplaceholder",
        "d4e5f6a\t-\tkeep\tdash",
        "e5f6a7b\t\tkeep\tempty",
        "f6a7b8c\tnan\tkeep\tnan",
        "a7b8c9d\t0.0\tkeep\ta real zero on a kept row",
    )
    trials, _, _ = read(text, lower_is_better=True)
    assert [t.core_metric for t in trials] == [1.0, None, None, None, None, None, 0.0]
    assert trials[1].delta_vs_best is None


def test_percent_numbers_are_numbers_and_written_back_with_their_sign() -> None:
    trials, layout, _ = read(WELL_FORMED["accuracy_percent"].text)
    assert [t.core_metric for t in trials] == [71.2, 73.9, 72.0, None, 75.5]
    new = Trial(
        "005", status=FailureLabel.KEEP, core_metric=76.1, hypothesis="mixup + cutmix", extra={"commit": "5f6a7b8"}
    )
    assert write([*trials, new], layout).endswith("5f6a7b8\t76.1%\taccepted\tmixup + cutmix\n")


# -- direction ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "lower"),
    [
        ("val_bpb", True),
        ("val_loss", True),
        ("perplexity", True),
        ("test_error", True),
        ("WER", True),
        ("score", False),
        ("sharpe", False),
        ("accuracy", False),
        ("mean_reward", False),
        ("throughput", False),
        ("winRate", False),
        ("col2", None),
        ("memory_gb", None),
    ],
)
def test_direction_from_the_metric_name(name: str, lower: bool | None) -> None:
    assert ar.direction_of_name(name) is lower


def test_direction_name_checked_against_kept_values() -> None:
    assert ar.infer_direction("val_bpb", [1.0, 0.99, 0.98])[0] is True
    assert ar.infer_direction("score", [0.1, 0.2, 0.3])[0] is False
    assert ar.infer_direction("col2", [3.0, 2.0, 1.0, 0.5]) == (
        True,
        "from the kept values (3 of 3 moves between kept values go down, 0 go up)",
    )
    assert ar.infer_direction("score", [0.3, 0.2, 0.1], flag=False)[0] is False  # the flag wins
    with pytest.raises(InvalidInput) as info:
        ar.infer_direction("score", [0.5, 0.4, 0.3, 0.2])
    assert "says higher is better" in info.value.message and "--higher-is-better" in info.value.message
    with pytest.raises(InvalidInput) as info:
        ar.infer_direction("col2", [1.0, 2.0, 1.0, 2.0, 1.0])
    assert "cannot tell" in info.value.message and "--lower-is-better" in info.value.message


def test_headerless_file_whose_values_do_not_decide_asks_for_the_flag() -> None:
    text = tsv("a1b2c3d\t5.0\tkeep\tx", "b2c3d4e\t6.0\tkeep\ty", "c3d4e5f\t5.5\tkeep\tz")
    with pytest.raises(InvalidInput) as info:
        read(text)
    assert info.value.field == "direction" and "--higher-is-better" in info.value.message
    trials, layout, warnings = read(text, lower_is_better=False)
    assert layout.columns == ["col1", "col2", "col3", "col4"] and not layout.has_header
    assert any("no header line" in w for w in warnings)
    assert write(trials, layout) == text


# -- lineage and ids ---------------------------------------------------------------------


def test_parent_is_the_last_keep_before_the_row_and_the_first_row_is_the_baseline() -> None:
    trials, _, _ = read(ORIGINAL)
    assert [(t.exp_id, t.parent_exp, t.baseline_exp) for t in trials] == [
        ("000", "", ""),
        ("001", "000", "000"),
        ("002", "001", "000"),
        ("003", "001", "000"),
        ("004", "001", "000"),
        ("005", "004", "000"),
        ("006", "004", "000"),
        ("007", "004", "000"),
    ]
    assert trials[1].delta_vs_best == pytest.approx(0.9932 - 0.9979)
    assert trials[5].delta_vs_best == pytest.approx(0.991 - 0.9901)


def test_rows_before_any_keep_hang_off_the_first_row() -> None:
    text = tsv(
        "commit\tval_bpb\tstatus\tdescription",
        "a1b2c3d\t0.0\tcrash\tbaseline crashed",
        "b2c3d4e\t1.0\tdiscard\tx",
        "c3d4e5f\t0.9\tkeep\ty",
        "d4e5f6a\t0.95\tdiscard\tz",
    )
    trials, _, _ = read(text, lower_is_better=True)
    assert [t.parent_exp for t in trials] == ["", "000", "000", "002"]


def test_a_file_that_names_parents_is_taken_at_its_word() -> None:
    text = tsv(
        "commit\tparent_commit\tscore\tstatus\tdescription",
        "a1b2c3d\t\t0.1\tkeep\tbase",
        "b2c3d4e\ta1b2c3d\t0.2\tkeep\tx",
        "c3d4e5f\ta1b2c3d\t0.3\tkeep\tbranch off the base",
        "d4e5f6a\tfffffff\t0.4\tkeep\tunknown parent",
    )
    warnings: list[str] = []
    trials, layout, warnings = read(text)
    assert layout.parent == "parent_commit"
    assert [t.parent_exp for t in trials] == ["", "000", "000", ""]
    assert trials[3].extra["parent_commit"] == "fffffff"
    assert write(trials, layout) == text


def test_id_column_gives_the_exp_ids_and_a_duplicate_names_its_line() -> None:
    text = WELL_FORMED["extra_columns"].text
    trials, _, _ = read(text, id_column="run")
    assert [t.exp_id for t in trials] == ["r0", "r1", "r2", "r3"]
    assert [t.parent_exp for t in trials] == ["", "r0", "r1", "r1"]
    with pytest.raises(InvalidInput) as info:
        read(text.replace("r2\t", "r1\t"), id_column="run")
    assert info.value.line == 4 and "duplicate" in info.value.message


def test_mapping_flags_choose_the_columns() -> None:
    text = WELL_FORMED["extra_columns"].text
    trials, layout, _ = read(text, metric="throughput", status="-", description="commit", lower_is_better=False)
    assert layout.metric == "throughput" and layout.status is None and layout.description == "commit"
    assert [t.status for t in trials] == [FailureLabel.KEEP] * 4  # no status column: all measurements
    assert trials[0].extra["kept_or_reverted"] == "kept"  # nothing dropped
    assert trials[0].extra["reward"] == 12.5
    with pytest.raises(InvalidInput, match="no column 'nope'"):
        read(text, metric="nope")


def test_every_other_column_is_kept_in_extra() -> None:
    trials, _, _ = read(WELL_FORMED["extra_columns"].text)
    assert {k: v for k, v in trials[1].extra.items() if not k.startswith("_")} == {
        "run": "r1",
        "commit": "bc23de4",
        "throughput": 1790,
        "gpu_hours": 0.52,
        "kept_or_reverted": "kept",
    }
    trials, _, _ = read(WELL_FORMED["sharpe_verdict"].text)
    assert trials[0].extra["max_drawdown"] == -0.21 and trials[0].extra["iteration"] == 1
    assert trials[4].extra["max_drawdown"] is None and trials[4].extra["verdict"] == "crashed"


def test_val_bpb_fills_the_trial_field_too() -> None:
    trials, _, _ = read(ORIGINAL)
    assert trials[0].val_bpb == trials[0].core_metric == 0.9979
    assert trials[3].val_bpb is None


# -- writing new and changed trials --------------------------------------------------------


def test_trials_recorded_later_are_written_in_the_files_own_format() -> None:
    trials, layout, _ = read(WELL_FORMED["score_upper"].text.replace("\n", "\r\n"))
    new = [
        Trial(
            "006",
            status=FailureLabel.KEEP,
            core_metric=0.5,
            hypothesis="new\tidea\nwith breaks",
            extra={"commit": "7a8b9c0"},
        ),
        Trial("007", status=FailureLabel.CRASH, core_metric=None, hypothesis="boom", extra={"commit": "8b9c0d1"}),
    ]
    text = write([*trials, *new], layout)
    assert text.endswith("7a8b9c0\t0.500\tKEEP\tnew idea with breaks\r\n8b9c0d1\t0.000\tCRASH\tboom\r\n")


def test_a_trial_changed_since_import_is_rendered_not_copied() -> None:
    trials, layout, _ = read(ORIGINAL)
    trials[2] = trials[2].with_changes(status=FailureLabel.KEEP, hypothesis="switch to GeLU (kept after all)")
    lines = write(trials, layout).splitlines()
    assert lines[3] == "c3d4e5f\t1.005000\t44.0\tkeep\tswitch to GeLU (kept after all)"
    assert lines[4] == ORIGINAL.splitlines()[4]


def test_default_layout_writes_autoresearch_header() -> None:
    trial = Trial(
        "000",
        status=FailureLabel.KEEP,
        core_metric=0.99,
        hypothesis="baseline",
        extra={"commit": "a1b2c3d", "memory_gb": 44.0},
    )
    out = io.StringIO(newline="")
    ar.write_trials([trial], out)
    assert (
        out.getvalue() == "commit\tval_bpb\tmemory_gb\tstatus\tdescription\na1b2c3d\t0.990000\t44.0\tkeep\tbaseline\n"
    )


def test_layout_survives_its_json_form() -> None:
    _, layout, _ = read(WELL_FORMED["summary_after"].text)
    again = ar.Layout.from_dict(layout.to_dict())
    assert again.to_dict() == layout.to_dict() and again.exp_id(12) == "012"
    again.segments.append([10, 500])
    assert again.exp_id(9) == "009" and again.exp_id(10) == "500" and again.exp_id(11) == "501"


# -- sniffing ----------------------------------------------------------------------------


def test_registry_tries_fieldkit_then_autoresearch_then_generic() -> None:
    assert list(FORMATS)[:3] == ["fieldkit", "autoresearch", "generic"]
    from lineage.formats.fieldkit import HEADER

    assert detect_format("\t".join(HEADER) + "\n").name == "fieldkit"
    for header in (
        "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n",
        "iteration\tsharpe\tverdict\tnotes",
        "run\tscore\tdecision",
        "a1b2c3d\t0.997900\t44.0\tkeep\tbaseline\n",
    ):
        assert detect_format(header).name == "autoresearch", header  # type: ignore[union-attr]
    assert detect_format("alpha\tbeta\tgamma\n").name == "generic"  # type: ignore[union-attr]
    assert detect_format("exp,loss,status\n").name == "generic"  # type: ignore[union-attr]
    assert detect_format("exp_id\tcore_metric\tstatus\n") is None  # a broken fieldkit header: fieldkit's error
    assert detect_format("just prose\n") is None
    assert get_format("autoresearch").write is ar.write_trials


def test_generic_reads_csv_with_quotes() -> None:
    trials, layout, _ = read(WELL_FORMED["csv_generic"].text, fmt=ar.GENERIC)
    assert layout.delimiter == "," and trials[1].hypothesis == "warmup, then cosine"
    assert trials[2].hypothesis == 'bigger "wide" model'
    new = Trial("004", status=FailureLabel.KEEP, core_metric=0.86, hypothesis="a, b", extra={"exp": "e4"})
    assert write([*trials, new], layout).endswith('e4,0.86,keep,"a, b"\n')


def test_bulk_parse_stores_the_text_only_when_the_trial_cannot_give_it_back() -> None:
    trials, _, _ = read(WELL_FORMED["many_words"].text)
    stored = ["_line" in t.extra for t in trials]
    # -999 and an empty metric on rows whose placeholder is "0.000000" need their text
    assert stored == [False, False, False, True, True, False, False, False]
    assert all(t.extra["_row"] == i for i, t in enumerate(trials))
