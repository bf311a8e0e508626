"""Results files without loss (issue 19), without a database: every record is a trial
(a metric cell that is not a number, a long-format file), headerless files are named on
line 1 and take their column names from the ``columns`` option, and the loop's own kept
values decide the direction when they are overwhelming. Every case still exports byte
for byte."""

from __future__ import annotations

import io

import pytest

from lineage.domain import BestPolicy, FailureLabel, Trial, ordered_best
from lineage.errors import InvalidInput
from lineage.formats import autoresearch as ar
from tests.lineage.autoresearch_files import (
    FAIL_RECORDS,
    HEADERLESS_COLUMNS,
    HEADERLESS_MODELS,
    ORIGINAL,
    RECORDS,
    RECORDS_METRIC_NAME,
    long_format,
    score_is_a_time,
    tsv,
)


def read(text: str, **options) -> tuple[list[Trial], ar.Layout, list[str]]:  # type: ignore[no-untyped-def]
    warnings: list[str] = []
    layouts: list[ar.Layout] = []
    trials = list(
        ar.read_trials(
            io.StringIO(text, newline=""), options=ar.ImportOptions(**options), warnings=warnings, layout_out=layouts
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


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_every_case_imports_every_record_and_exports_byte_for_byte(name: str) -> None:
    case = RECORDS[name]
    trials, layout, warnings = read(case.text, **case.options)
    assert len(trials) == case.rows
    assert layout.metric == case.metric
    assert layout.metric_name == RECORDS_METRIC_NAME.get(name, case.metric)
    assert write(trials, layout) == case.text
    for expected in case.warns:
        assert sum(expected in w for w in warnings) == 1, (expected, warnings)
    found = best_of(trials, case.lower)  # type: ignore[arg-type]
    assert found is not None and found.exp_id == case.best


# -- every record is a trial ---------------------------------------------------------------------


def test_a_record_whose_metric_cell_is_not_a_number_is_a_trial_without_a_metric() -> None:
    trials, layout, warnings = read(FAIL_RECORDS)
    failed = trials[1]
    assert (failed.status, failed.core_metric, failed.val_bpb) == (FailureLabel.DISCARD, None, None)
    assert failed.extra["val_bpb"] == "FAIL" and failed.extra["memory_gb"] == "NA"  # visible, as written
    assert failed.hypothesis == "double width (compile error)" and failed.extra["commit"] == "b2c3d4e"
    assert trials[4].extra["val_bpb"] == "error: CUDA OOM" and trials[4].status is FailureLabel.CRASH
    # a placeholder stays what it was: no metric, nothing extra
    assert trials[3].core_metric is None and "val_bpb" not in trials[3].extra
    assert trials[6].core_metric is None and "val_bpb" not in trials[6].extra
    # lineage and deltas step over them
    assert trials[2].parent_exp == "000" and trials[2].delta_vs_best == pytest.approx(0.9932 - 0.9979)
    assert failed.delta_vs_best is None
    assert [w for w in warnings if "not a row" in w] == []  # nothing was left as text


def test_a_changed_record_keeps_its_cell_and_a_measured_one_writes_its_number() -> None:
    trials, layout, _ = read(FAIL_RECORDS)
    relabelled = trials[1].with_changes(status=FailureLabel.CRASH, hypothesis="double width (OOM)")
    measured = trials[4].with_changes(core_metric=0.9951)
    lines = write([trials[0], relabelled, trials[2], trials[3], measured, *trials[5:]], layout).splitlines()
    assert lines[2] == "b2c3d4e\t2\tFAIL\tNA\tcrash\tdouble width (OOM)"
    assert lines[5] == "e5f6a7b\t5\t0.995100\t0.0\tcrash\tbatch 2x"


def test_lines_that_are_not_records_stay_text_each_named_in_one_warning() -> None:
    text = RECORDS["stray_output"].text
    trials, _, warnings = read(text)
    assert len(trials) == 8 and trials[7].extra["val_bpb"] == "FAIL"
    assert "Traceback" in trials[4].extra["_line"] and "step 500" in trials[7].extra["_line"]
    stray = [w for w in warnings if "not a row of the table" in w]
    assert stray == [
        "lines 6, 7: not a row of the table; kept as text before line 8 (in <stream>)",
        "line 11: not a row of the table; kept as text before line 12 (in <stream>)",
    ]


@pytest.mark.parametrize(
    ("line", "record"),
    [
        ("commit\tval_bpb\tmemory_gb\tstatus\tdescription", False),  # the header again
        ("Commit\tVAL_BPB\tmemory_gb\tstate\tnotes", False),  # most cells name the columns
        ("epoch 3\tloss 2.1\tlr 0.1\tok?\tmore", False),  # program output with tabs
        ("b2c3d4e\tFAIL\t44.0\tdiscard\tx", True),  # a known status word
        ("b2c3d4e\ttimeout\t\tmeh\tx", True),  # an unknown word, but a hash and an empty number
        ("zzz\tFAIL\tbig\t\tx", False),  # nothing fits: no hash, a word for a number, no status
    ],
)
def test_a_line_of_the_tables_width_is_a_record_unless_it_is_not(line: str, record: bool) -> None:
    text = ORIGINAL + line + "\n" + "c9d0e1f\t0.985000\t45.0\tkeep\tlast\n"
    trials, layout, warnings = read(text)
    assert len(trials) == 9 + record
    assert any("line 10: not a row" in w for w in warnings) is not record
    assert write(trials, layout) == text


# -- long format -----------------------------------------------------------------------------------


def test_a_long_format_file_imports_every_row_and_one_name_is_the_metric() -> None:
    text = long_format()
    with pytest.raises(InvalidInput) as info:  # no status column: its values are no choices of the loop
        read(text)
    assert info.value.field == "direction" and "no status column" in info.value.message
    trials, layout, warnings = read(text, lower_is_better=False)
    assert (layout.metric, layout.long_names, layout.long_metric) == ("value", "metric", "resolution_rate")
    words = [t for t in trials if t.extra["metric"] == "trend"]
    assert len(words) == 24 and all(t.core_metric is None for t in words)
    assert words[0].extra["value"] == "rising"
    costs = [t for t in trials if t.extra["metric"] == "cost_usd"]
    assert len(costs) == 12 and costs[0].extra["value"] == "1.25" and costs[0].core_metric is None
    rates = [t for t in trials if t.extra["metric"] == "resolution_rate"]
    assert [t.core_metric for t in rates[:2]] == [0.152, 0.154] and "value" not in rates[0].extra
    assert any("long format" in w and "'resolution_rate'" in w for w in warnings)
    # a new trial recorded in the project writes the project's metric name
    new = Trial("060", status=FailureLabel.KEEP, core_metric=0.2, extra={"cycle": 25})
    assert write([*trials, new], layout).endswith("25\tresolution_rate\t0.200\t\n")


def test_metric_flag_chooses_another_name_of_a_long_format_file() -> None:
    trials, layout, _ = read(long_format(), metric="cost_usd", lower_is_better=True)
    assert layout.metric_name == "cost_usd"
    assert [t.core_metric for t in trials if t.core_metric is not None][:2] == [1.25, 3.75]
    with pytest.raises(InvalidInput) as info:
        read(long_format(), metric="accuracy")
    assert info.value.field == "metric" and "resolution_rate" in info.value.message
    # --metric naming the value column keeps the long format
    _, layout, _ = read(long_format(), metric="value", lower_is_better=False)
    assert layout.long_metric == "resolution_rate"


def test_a_name_column_of_distinct_names_is_a_wide_table() -> None:
    text = tsv("name\tvalue\tstatus", "exp-a\t0.5\tkeep", "exp-b\t0.6\tkeep", "exp-c\t0.55\tdiscard")
    _, layout, _ = read(text, lower_is_better=False)
    assert layout.long_names is None and layout.metric == "value"


# -- headerless files ------------------------------------------------------------------------------


def test_a_headerless_file_is_named_on_line_1_with_the_fix() -> None:
    with pytest.raises(InvalidInput) as info:
        read(HEADERLESS_MODELS)
    err = info.value
    assert err.line == 1 and err.field == "direction"
    assert "line 1 is data, not a header" in err.message and "--columns" in err.message
    assert "7 columns" in err.message


def test_columns_option_names_a_headerless_files_columns_and_export_writes_no_header() -> None:
    trials, layout, warnings = read(HEADERLESS_MODELS, columns=HEADERLESS_COLUMNS)
    assert layout.columns == HEADERLESS_COLUMNS.split(",") and not layout.has_header and layout.header_text == ""
    assert (layout.metric, layout.status, layout.description) == ("tok_s", "status", "description")
    assert trials[0].extra["model"] == "Qwen3.5-397B" and trials[0].core_metric == 17.0
    assert not any("no header line" in w for w in warnings)
    assert write(trials, layout) == HEADERLESS_MODELS


def test_a_headerless_file_that_imports_says_why_line_1_is_data() -> None:
    text = "".join(ORIGINAL.splitlines(keepends=True)[1:])
    _, layout, warnings = read(text)
    note = next(w for w in warnings if "no header line" in w)
    assert note.startswith(
        "line 1: no header line -- the line is data (numbers in columns 2, 3; a commit hash in "
        "column 1; the status word 'keep' in column 4)"
    )
    assert "--columns" in note and "metric 'col2'" in note


@pytest.mark.parametrize(
    ("cells", "evidence"),
    [
        (["commit", "val_bpb", "status", "description"], []),
        (["a1b2c3d", "model", "keep", "baseline"], ["a commit hash in column 1", "the status word 'keep' in column 3"]),
        (["HEAD", "tiny", "discarded", "x"], ["the status word 'discarded' in column 3"]),
        (["run", "0.5", "status"], ["numbers in column 2"]),
        (["commit", "score", "keep", "description"], []),  # a column called "keep" among known names
    ],
)
def test_line_1_is_data_when_it_holds_numbers_a_hash_or_a_verdict(cells: list[str], evidence: list[str]) -> None:
    assert ar.data_evidence(cells) == evidence


def test_columns_option_parsing_and_a_header_that_is_these_names() -> None:
    assert ar.parse_columns("commit, val_bpb ,status") == ("commit", "val_bpb", "status")
    assert ar.parse_columns(["a,b", "c"]) == ("a", "b", "c")
    assert ar.ImportOptions(columns=["a", "b"]).columns == ("a", "b")
    assert ar.ImportOptions(columns="").columns is None
    for bad in ("a,,b", "a,b,a"):
        with pytest.raises(InvalidInput) as info:
            ar.parse_columns(bad)
        assert info.value.field == "columns"
    # a file whose first line is these very names: that line is its header
    trials, layout, _ = read(ORIGINAL, columns="commit,val_bpb,memory_gb,status,description")
    assert layout.has_header and len(trials) == 8 and write(trials, layout) == ORIGINAL


def test_columns_of_another_width_are_an_error_naming_line_1() -> None:
    with pytest.raises(InvalidInput) as info:
        read(HEADERLESS_MODELS, columns="commit,model,tok_s")
    assert (info.value.field, info.value.line) == ("columns", 1) and "3 names" in info.value.message


# -- the metric column ---------------------------------------------------------------------------


def test_status_words_in_the_metric_column_do_not_hand_the_metric_to_another_column() -> None:
    text = tsv(
        "commit\tval_bpb\tmemory_gb\tstatus\tdescription",
        "a1b2c3d\t0.997900\t44.0\tkeep\tbase",
        "b2c3d4e\tOOM\t0.0\tcrash\twide",
        "c3d4e5f\tFAIL\t0.0\tcrash\tdeep",
        "d4e5f6a\t0.99\t44.0\tkeep\tx",
    )
    trials, layout, _ = read(text)
    assert layout.metric == "val_bpb" and trials[1].extra["val_bpb"] == "OOM"


def test_a_column_named_like_the_metric_but_mostly_words_is_refused_not_replaced() -> None:
    text = tsv(
        "commit\tval_bpb\tmemory_gb\tstatus\tdescription",
        "a1b2c3d\t0.997900\t44.0\tkeep\tbase",
        "b2c3d4e\tsee log\t44.0\tdiscard\tx",
        "c3d4e5f\tpending eval\t44.2\tkeep\ty",
    )
    with pytest.raises(InvalidInput) as info:
        read(text)
    assert info.value.field == "metric" and "'val_bpb'" in info.value.message and "--metric" in info.value.message
    trials, layout, _ = read(text, metric="val_bpb")
    assert layout.metric == "val_bpb" and len(trials) == 3 and write(trials, layout) == text


# -- direction ---------------------------------------------------------------------------------------


def test_overwhelming_kept_values_overrule_the_name_with_a_warning() -> None:
    falling = [float(100 - i) for i in range(27)]  # 26 of 26 moves go down
    lower, how, warning = ar.weigh_direction("score", falling)
    assert lower is True and "against the name 'score'" in how
    assert warning is not None and "'score' says higher is better" in warning and "26 of 26 moves" in warning
    assert ar.infer_direction("score", falling, flag=False) == (False, "from the flag")  # flags always win
    assert ar.weigh_direction("val_bpb", falling)[2] is None  # name and values agree: no warning


@pytest.mark.parametrize(
    ("kept", "decides"),
    [
        ([9.0, 8, 7, 6, 5, 4, 3, 2], False),  # 7 moves: too few, today's rule (an error)
        ([9.0, 8, 7, 6, 5, 4, 3, 2, 1], True),  # 8 of 8
        ([9.0, 8, 7, 6, 7, 5, 4, 3, 2], False),  # 7 of 8: 87.5%
        ([10.0, 9, 8, 7, 6, 7, 5, 4, 3, 2, 1], True),  # 9 of 10: 90%
        ([9.0, 9, 9, 8, 8, 7, 7, 6, 6, 5, 5, 4], False),  # equal neighbours are no move: 5 moves
    ],
)
def test_the_values_decide_from_8_moves_and_90_percent(kept: list[float], decides: bool) -> None:
    if decides:
        assert ar.infer_direction("score", kept)[0] is True
    else:
        with pytest.raises(InvalidInput, match="says higher is better"):
            ar.infer_direction("score", kept)


def test_decide_direction_puts_the_warning_with_the_files_warnings() -> None:
    trials, layout, warnings = read(score_is_a_time())
    assert sum("'score' says higher is better" in w for w in warnings) == 1
    assert best_of(trials, True).core_metric == min(t.core_metric for t in trials)  # type: ignore[union-attr]
    table = ar.parse_table(score_is_a_time())
    notes: list[str] = []
    assert ar.decide_direction(table, None, notes)[0] is True and len(notes) == 1
    assert ar.decide_direction(table, False, notes) == (False, "from the flag") and len(notes) == 1


def test_a_file_without_a_status_column_decides_the_direction_by_name_or_overwhelming_values() -> None:
    zigzag = ["iteration\tj_index\tnote"] + [
        f"{i}\t{v}\tfeature set {i}" for i, v in enumerate([0.80, 0.79, 0.81, 0.80, 0.82, 0.81, 0.80, 0.83, 0.82, 0.81])
    ]
    with pytest.raises(InvalidInput) as info:  # 6 of 9 moves down: chance, not a loop's choice
        read(tsv(*zigzag))
    assert info.value.field == "direction" and "no status column" in info.value.message
    rising = ["iteration\tj_index\tnote"] + [f"{i}\t{0.5 + i / 100:.2f}\tstep {i}" for i in range(10)]
    _, _, _ = read(tsv(*rising))  # 9 of 9 up: overwhelming even without choices
    trials, layout, _ = read(tsv(*zigzag).replace("j_index", "accuracy"))  # the name decides, unchecked
    assert layout.metric == "accuracy" and len(trials) == 10


# -- which column is the metric ------------------------------------------------------------------


def test_a_rate_says_higher_and_is_no_resource() -> None:
    for name in ("tok_per_sec", "tok_sec", "tg_tok_s", "generations_per_s", "samples/sec"):
        assert ar.is_rate(name) and ar.direction_of_name(name) is False and not ar.is_resource(name)
    for name in ("time_s", "train_s", "wall_sec", "budget_sec"):
        assert not ar.is_rate(name) and ar.is_resource(name)
    text = tsv(
        "commit\ttok_per_sec\tvram_gb\tcache_hit\tstatus\tdescription",
        "a1b2c3d\t2.10\t0.0\t0.1\tkeep\tbase",
        "b2c3d4e\t2.40\t0.0\t0.2\tkeep\tprefetch",
    )
    assert read(text)[1].metric == "tok_per_sec"


def test_id_and_time_columns_and_true_false_cells_are_never_the_metric() -> None:
    assert all(ar.is_id_column(n) for n in ("ts", "candidate_id", "created_at", "exp_id", "timestamp"))
    text = tsv(
        "ts\tcandidate_id\tflag\tloss\tstatus\tdescription",
        "1771000000\t0001\tTrue\t0.9\tkeep\ta",
        "1771000330\t0002\tFalse\t0.8\tkeep\tb",
        "1771000660\t0003\t3\t0.7\tkeep\tc",
        "1771000990\t0004\t-\t0.6\tkeep\td",
    )
    assert read(text)[1].metric == "loss"
    assert ar.name_tokens("val_map50_95")[-1] == "map" and ar.direction_of_name("val_map50_95") is False


def test_a_table_that_records_no_status_commit_or_description_is_no_loops() -> None:
    text = tsv("starttime\tseconds\tctime\tdtime", "Mon 10:00\t1768212000\t80\t5000", "Mon 10:01\t1768212001\t81\t5037")
    with pytest.raises(InvalidInput) as info:
        read(text)
    assert (
        info.value.field == "file" and info.value.line == 1 and "not the results table of a loop" in info.value.message
    )
    trials, layout, _ = read(text, metric="dtime", lower_is_better=True)  # a flag says it is one
    assert layout.metric == "dtime" and len(trials) == 2


# -- lines that are records after all ---------------------------------------------------------------


def test_cells_without_a_column_are_kept_and_the_row_is_a_trial() -> None:
    text = tsv(
        "commit\ttrain_loss\tvram_mb\tstatus\tdescription",
        "baseline\t4.10\t18110\tkeep\tdefault",
        "v1_ode\t1.70\t21950\t1520s\tkeep\tODE, stage B",  # a duration inserted before the status
        "v2_ode\t1.65\t21950\tkeep\tODE only\tsee notes",
    )  # a tab inside the text: the description
    trials, layout, warnings = read(text)
    assert [t.status.value for t in trials] == ["keep", "keep", "keep"]
    assert trials[1].extra["col4"] == "1520s" and trials[1].hypothesis == "ODE, stage B"
    assert trials[2].hypothesis == "ODE only\tsee notes"
    assert any("line 3: 6 cells, the header has 5; cell 4 has no column" in w for w in warnings)
    assert write(trials, layout) == text
    text = tsv("when\thypothesis\tscore\tstatus", "d1\tadd widget 1\t88\tKEEP", "d2\tprobe B0\t58\tKEEP\t100\t51")
    trials, layout, _ = read(text)  # two unnamed cells after the status, the last column
    assert len(trials) == 2 and (trials[1].extra["col5"], trials[1].extra["col6"]) == ("100", "51")
    assert write(trials, layout) == text


def test_a_record_broken_over_two_lines_is_one_trial() -> None:
    text = tsv(
        "date\tversion\tscore\tstatus\tnotes",
        "2026-05-01\tv1.0",
        "v\t0.5\tkeep\tfirst",
        "2026-05-02\tv1.1\t0.6\tkeep\tsecond",
        "2026-05-03\tv2.0",
        "v\t0.7\tkeep\tthird",
    )
    trials, layout, warnings = read(text)
    assert len(trials) == 3 and trials[0].extra["version"] == "v1.0\nv" and trials[2].core_metric == 0.7
    assert any("one record broken over lines 2-3" in w for w in warnings)
    assert write(trials, layout) == text


def test_a_status_word_may_hold_a_comma() -> None:
    assert ar.parse_status_map("best(a:1%,b:2%)=keep,回滚=discard") == {"best(a:1%,b:2%)": "keep", "回滚": "discard"}
    with pytest.raises(InvalidInput):
        ar.parse_status_map("keep=keep,oops")
