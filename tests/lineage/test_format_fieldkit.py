"""fieldkit's results.tsv: byte-for-byte compatibility, error locations, streaming.

fieldkit 0.34.1 itself is the oracle: its ``LineageStore.append`` writes the files we
read, and its ``all_trials()`` reads the files we write.
"""

from __future__ import annotations

import csv
import inspect
import io
import random
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from fieldkit.lineage import FailureLabel as FkLabel
from fieldkit.lineage import LineageStore
from fieldkit.lineage import Trial as FkTrial
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.domain import (
    CLIP_SCALE_COLUMNS,
    FIELDKIT_COLUMNS,
    FIELDKIT_LABELS,
    MAX_DURATION_S,
    MAX_LONG_TEXT,
    MAX_SHORT_TEXT,
    FailureLabel,
    Trial,
    validate_trial,
)
from lineage.errors import InvalidInput
from lineage.formats import FORMATS, Format, detect_format, get_format, register
from lineage.formats import fieldkit as fmt

HEADER_LINE = "\t".join(FIELDKIT_COLUMNS) + "\n"
EXTENDED_LINE = "\t".join((*FIELDKIT_COLUMNS, *CLIP_SCALE_COLUMNS, "extra")) + "\n"
NASTY_TEXT = [
    "",
    "plain",
    "tab\tinside",
    "new\nline",
    "crlf\r\ninside",
    'bare\rcr "quoted"',
    'say "hi"',
    '"starts with a quote',
    "trailing space ",
    " leading space",
    "ünïcødé — λ ≥ 0.5 🚀",
    'multi\n\nparagraph\twith\t"everything"\r\n',
    "\u2028line separator\x1cfs\x85nel",
]
NASTY_FLOATS = [0.1, 1e-7, 33.21, 14260.0, -0.0, 0.0, 1e300, -2.5e-308, 3.0000000000000004, 123456789.123]


# --------------------------------------------------------------------------- helpers


def fieldkit_file(directory: Path, trials: Iterable[FkTrial]) -> Path:
    """results.tsv as fieldkit writes it, one ``LineageStore.append`` per trial."""
    store = LineageStore(directory)
    for trial in trials:
        store.append(trial)
    return store.results_path


def read_text(text: str, **kwargs) -> list[Trial]:  # type: ignore[no-untyped-def]
    return list(fmt.read_trials(io.StringIO(text, newline=""), **kwargs))


def write_text(trials: Iterable[Trial], *, extended: bool = False) -> str:
    out = io.StringIO(newline="")
    fmt.write_trials(trials, out, extended=extended)
    return out.getvalue()


def import_all(text: str) -> list[Trial]:
    """What the store does: stage every row, keep them only if the whole file reads."""
    return list(fmt.read_trials(io.StringIO(text, newline=""), source="results.tsv"))


def tsv(*rows: list[str], header: str = HEADER_LINE) -> str:
    out = io.StringIO(newline="")
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerows(rows)
    return header + out.getvalue()


def good_row(exp_id: str = "001", **cells: str) -> list[str]:
    row = dict.fromkeys(FIELDKIT_COLUMNS, "")
    row.update(exp_id=exp_id, status="keep", core_metric="1.5", train_s="10.0", total_s="12.5")
    row.update(cells)
    return [row[name] for name in FIELDKIT_COLUMNS]


def error_of(text: str) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        import_all(text)
    return info.value


def where(err: InvalidInput) -> tuple[int | None, int | None, str]:
    return err.line, err.column, err.field


def col(name: str) -> int:
    return (*FIELDKIT_COLUMNS, *CLIP_SCALE_COLUMNS, "extra").index(name) + 1


def random_sweep(rng: random.Random, n: int) -> list[FkTrial]:
    """A fieldkit sweep: every status, None metrics, nasty text and floats."""
    labels = list(FkLabel)
    trials = []
    for i in range(n):
        exp_id = f"{i:03d}"

        def num(nonneg: bool = False) -> float | None:
            roll = rng.random()
            if roll < 0.2:
                return None
            value = rng.choice(NASTY_FLOATS) if roll < 0.6 else rng.uniform(-5, 5) * 10 ** rng.randint(-8, 6)
            if nonneg and value is not None:  # a duration: from 0 to MAX_DURATION_S
                return min(abs(value), MAX_DURATION_S)
            return value

        trials.append(
            FkTrial(
                exp_id=exp_id,
                timestamp=f"2026-05-{1 + i % 28:02d}T12:{i % 60:02d}:00Z",
                specialist=rng.choice(["arch", "optim", "données", ""]),
                parent_exp=f"{rng.randrange(i):03d}" if i else "",
                baseline_exp="000" if i else "",
                domain=rng.choice(["lm", "rl", "vision"]),
                hypothesis=rng.choice(NASTY_TEXT) + rng.choice(NASTY_TEXT),
                expected_delta=rng.choice(["", "-0.01", "≈ −1 %", "tab\t?"]),
                status=labels[i % len(labels)],
                core_metric=num(),
                val_bpb=num(),
                delta_vs_best=num(),
                train_s=num(nonneg=True),
                total_s=num(nonneg=True),
                job_name=rng.choice(["", f"job-{i}", 'job "quoted"']),
                snapshot_path=rng.choice(["", f"snapshots/{exp_id}"]),
                notes=rng.choice(NASTY_TEXT),
            )
        )
    return trials


# --------------------------------------------------------------------------- compatibility


def test_fieldkit_sweep_round_trips_byte_for_byte(tmp_path: Path) -> None:
    original = fieldkit_file(tmp_path, random_sweep(random.Random(7), 60)).read_bytes()
    with open(tmp_path / "results.tsv", newline="", encoding="utf-8") as fh:
        trials = list(fmt.read_trials(fh))
    assert write_text(trials).encode("utf-8") == original


def test_fieldkit_reads_our_output_as_it_reads_its_own(tmp_path: Path) -> None:
    theirs = fieldkit_file(tmp_path / "theirs", random_sweep(random.Random(11), 60))
    ours_dir = tmp_path / "ours"
    ours_dir.mkdir()
    with open(theirs, newline="", encoding="utf-8") as src, fmt.open_results(ours_dir / "results.tsv", "w") as dst:
        fmt.write_trials(fmt.read_trials(src), dst)
    assert LineageStore(ours_dir).all_trials() == LineageStore(theirs.parent).all_trials()


def test_values_are_kept_as_fieldkit_reads_them(tmp_path: Path) -> None:
    path = fieldkit_file(tmp_path, random_sweep(random.Random(3), 40))
    expected = LineageStore(tmp_path).all_trials()
    with fmt.open_results(path) as fh:
        ours = list(fmt.read_trials(fh))
    assert [t.seq for t in ours] == list(range(len(expected)))
    for mine, theirs in zip(ours, expected, strict=True):
        for name in FIELDKIT_COLUMNS:
            a, b = getattr(mine, name), getattr(theirs, name)
            if isinstance(b, float):
                assert repr(a) == repr(b), name  # -0.0 stays -0.0; delta_vs_best as written
            else:
                assert getattr(a, "value", a) == getattr(b, "value", b), name


def test_every_trial_read_passes_the_domain_rules(tmp_path: Path) -> None:
    path = fieldkit_file(tmp_path, random_sweep(random.Random(5), 40))
    with fmt.open_results(path) as fh:
        trials = list(fmt.read_trials(fh))
    assert {t.status for t in trials} == set(FIELDKIT_LABELS)
    assert all(validate_trial(t) is t for t in trials)


def fieldkit_can_read(cell: str) -> bool:
    """fieldkit quotes a cell for a tab, a quote or \\n, not for \\r alone (then it cannot read it)."""
    return "\r" not in cell or any(c in cell for c in '\t"\n')


fk_text = st.one_of(
    st.sampled_from(NASTY_TEXT),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40),
).filter(fieldkit_can_read)
fk_float = st.one_of(st.none(), st.sampled_from(NASTY_FLOATS), st.floats(allow_nan=False, allow_infinity=False))
fk_duration = st.one_of(
    st.none(), st.sampled_from([0.0, -0.0, 14260.0, 1e-7]), st.floats(min_value=0, max_value=MAX_DURATION_S)
)


@st.composite
def fk_sweeps(draw) -> list[FkTrial]:  # type: ignore[no-untyped-def]
    n = draw(st.integers(min_value=1, max_value=12))
    trials = []
    for i in range(n):
        trials.append(
            FkTrial(
                exp_id=f"{i:03d}",
                timestamp=draw(fk_text),
                specialist=draw(fk_text),
                parent_exp=f"{draw(st.integers(0, i - 1)):03d}" if i else "",
                baseline_exp=draw(fk_text),
                domain=draw(fk_text),
                hypothesis=draw(fk_text),
                expected_delta=draw(fk_text),
                status=draw(st.sampled_from(list(FkLabel))),
                core_metric=draw(fk_float),
                val_bpb=draw(fk_float),
                delta_vs_best=draw(fk_float),
                train_s=draw(fk_duration),
                total_s=draw(fk_duration),
                job_name=draw(fk_text),
                snapshot_path=draw(fk_text),
                notes=draw(fk_text),
            )
        )
    return trials


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fk_sweeps())
def test_any_fieldkit_sweep_is_a_fixed_point(sweep: list[FkTrial]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = fieldkit_file(Path(tmp), sweep)
        original = path.read_bytes()
        with fmt.open_results(path) as fh:
            ours = write_text(fmt.read_trials(fh)).encode("utf-8")
        assert ours == original
        path.write_bytes(ours)
        assert LineageStore(Path(tmp)).all_trials() == sweep


any_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(any_text, any_text, st.sampled_from(list(FIELDKIT_LABELS)), fk_float), min_size=1, max_size=8)
)
def test_any_ledger_trials_round_trip_and_fieldkit_agrees(
    cells: list[tuple[str, str, FailureLabel, float | None]],
) -> None:
    trials = [
        Trial(exp_id=f"{i:03d}", hypothesis=h, notes=n, status=s, core_metric=m, seq=i)
        for i, (h, n, s, m) in enumerate(cells)
    ]
    text = write_text(trials)
    assert read_text(text) == trials
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "results.tsv").write_text(text, encoding="utf-8", newline="")
        seen = [(t.hypothesis, t.notes, t.status.value, t.core_metric) for t in LineageStore(Path(tmp)).all_trials()]
    assert seen == [(h, n, s.value, m) for h, n, s, m in cells]


def test_blank_lines_are_skipped_as_fieldkit_does(tmp_path: Path) -> None:
    text = HEADER_LINE + "\n" + tsv(good_row("001"), header="") + "\n\n" + tsv(good_row("002"), header="")
    (tmp_path / "results.tsv").write_text(text, newline="")
    fieldkit_ids = [t.exp_id for t in LineageStore(tmp_path).all_trials()]
    assert [t.exp_id for t in read_text(text)] == fieldkit_ids == ["001", "002"]
    assert [t.seq for t in read_text(text)] == [0, 1]


def test_empty_file_and_header_alone_hold_no_trials() -> None:
    assert read_text("") == []
    assert read_text(HEADER_LINE) == []
    assert read_text(EXTENDED_LINE) == []


def test_crlf_file_reads_and_byte_order_mark_is_ignored() -> None:
    text = "\ufeff" + tsv(good_row("001"), good_row("002")).replace("\n", "\r\n")
    assert [t.exp_id for t in read_text(text)] == ["001", "002"]


# --------------------------------------------------------------------------- writing


def test_write_returns_the_row_count_and_always_writes_the_header() -> None:
    out = io.StringIO(newline="")
    assert fmt.write_trials([], out) == 0
    assert out.getvalue() == HEADER_LINE
    out = io.StringIO(newline="")
    assert fmt.write_trials(iter([Trial(exp_id="a"), Trial(exp_id="b")]), out) == 2


def test_default_export_leaves_the_extended_columns_out() -> None:
    trial = Trial(exp_id="001", ig_clip_scale_mean=0.5, extra={"k": 1})
    text = write_text([trial])
    assert text.splitlines()[0] == HEADER_LINE.rstrip("\n")
    assert all(line.count("\t") == len(FIELDKIT_COLUMNS) - 1 for line in text.splitlines())


def test_write_formats_cells_like_fieldkit_to_row() -> None:
    trial = Trial(
        exp_id="007",
        status=FailureLabel.EVAL_BUDGET_OVERRUN,
        core_metric=0.1,
        val_bpb=1e-7,
        delta_vs_best=-0.0,
        train_s=14260.0,
        total_s=None,
        notes='a\tb "c"\nd',
    )
    fk = FkTrial(**{name: getattr(trial, name) for name in FIELDKIT_COLUMNS} | {"status": FkLabel.EVAL_BUDGET_OVERRUN})
    row_line = write_text([trial])[len(HEADER_LINE) :]
    assert row_line == '007\t\t\t\t\t\t\t\teval_budget_overrun\t0.1\t1e-07\t-0.0\t14260.0\t\t\t\t"a\tb ""c""\nd"\n'
    assert next(csv.reader(io.StringIO(row_line, newline=""), delimiter="\t")) == fk.to_row()


def test_extended_round_trips_clip_scale_and_extra() -> None:
    trial = Trial(
        exp_id="042",
        status=FailureLabel.KEEP,
        core_metric=1.25,
        ig_clip_scale_mean=0.93,
        ig_clip_scale_std=0.0,
        ig_clip_scale_min=-0.0,
        ig_clip_scale_max=1e-7,
        ig_clip_scale_frac_low=0.0,
        ig_clip_scale_frac_high=1.0,
        extra={"z": [1, 2.5, None], "a": {"nested": "tab\there ü"}, "m": True},
        notes="x",
    )
    empty = Trial(exp_id="043", parent_exp="042")
    text = write_text([trial, empty], extended=True)
    back = read_text(text)
    assert back == [trial.with_changes(seq=0), empty.with_changes(seq=1)]
    assert write_text(back, extended=True) == text


def test_extended_extra_cell_is_compact_sorted_json_or_empty() -> None:
    text = write_text([Trial(exp_id="1", extra={"b": 1, "a": "é"}), Trial(exp_id="2")], extended=True)
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter="\t"))
    assert rows[0] == [*FIELDKIT_COLUMNS, *CLIP_SCALE_COLUMNS, "extra"]
    assert rows[1][-1] == '{"a":"é","b":1}'
    assert rows[2][-1] == ""


def nasty_trials(n: int) -> list[Trial]:
    """Ledger trials with every status, nasty text (quotes, tabs, CR), floats and extras."""
    labels = list(FIELDKIT_LABELS)
    return [
        Trial(
            exp_id=f"{i:03d}",
            parent_exp=f"{i - 1:03d}" if i else "",
            status=labels[i % len(labels)],
            core_metric=NASTY_FLOATS[i % len(NASTY_FLOATS)] if i % 4 else None,
            hypothesis=NASTY_TEXT[i % len(NASTY_TEXT)],
            notes=NASTY_TEXT[(i * 7) % len(NASTY_TEXT)],
            ig_clip_scale_mean=0.5 if i % 3 else None,
            extra={"i": i, "t": NASTY_TEXT[(i * 3) % len(NASTY_TEXT)]} if i % 2 else {},
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("extended", [False, True])
@pytest.mark.parametrize(("rows", "batch"), [(0, 2_000), (1, 1), (7, 1), (7, 3), (9, 3), (40, 7), (40, 2_000)])
def test_iter_tsv_streams_exactly_what_write_trials_writes(rows: int, batch: int, extended: bool) -> None:
    trials = nasty_trials(rows)
    chunks = list(fmt.iter_tsv(iter(trials), extended=extended, batch=batch))
    assert "".join(chunks) == write_text(trials, extended=extended)
    # the header alone first, then ceil(rows / batch) chunks of at most `batch` rows each
    assert chunks[0] == (EXTENDED_LINE if extended else HEADER_LINE)
    assert len(chunks) == 1 + -(-rows // batch)
    sizes = [len(read_text(chunks[0] + chunk)) for chunk in chunks[1:]]
    assert sum(sizes) == rows and all(size <= batch for size in sizes)


def test_iter_tsv_reads_its_trials_lazily_a_batch_at_a_time() -> None:
    taken: list[int] = []

    def source() -> Iterator[Trial]:
        for trial in nasty_trials(10):
            taken.append(1)
            yield trial

    chunks = fmt.iter_tsv(source(), batch=4)
    assert next(chunks) == HEADER_LINE and not taken  # the header goes out before any read
    next(chunks)
    assert len(taken) == 4


def test_fieldkit_reads_an_extended_file(tmp_path: Path) -> None:
    trials = [Trial(exp_id="1", status=FailureLabel.BASELINE, core_metric=2.0, ig_clip_scale_mean=0.5, extra={"a": 1})]
    with fmt.open_results(tmp_path / "results.tsv", "w") as fh:
        fmt.write_trials(trials, fh, extended=True)
    (only,) = LineageStore(tmp_path).all_trials()
    assert (only.exp_id, only.status, only.core_metric) == ("1", FkLabel.BASELINE, 2.0)


# --------------------------------------------------------------------------- header errors


@pytest.mark.parametrize(
    ("header", "column", "field"),
    [
        pytest.param(HEADER_LINE.replace("status", "state"), col("status"), "state", id="renamed-column"),
        pytest.param(HEADER_LINE.replace("\tnotes", ""), col("notes"), "notes", id="missing-column"),
        pytest.param(
            HEADER_LINE.replace("domain\thypothesis", "hypothesis\tdomain"), col("domain"), "hypothesis", id="reordered"
        ),
        pytest.param(HEADER_LINE.rstrip("\n") + "\tcomment\n", 18, "comment", id="unknown-extra-column"),
        pytest.param(EXTENDED_LINE.replace("\textra", ""), col("extra"), "extra", id="partial-extended"),
        pytest.param(EXTENDED_LINE.rstrip("\n") + "\tmore\n", 25, "more", id="after-extended"),
        pytest.param("exp_id,timestamp,specialist\n", 1, "exp_id,timestamp,specialist", id="comma-separated"),
        pytest.param("\n", 1, "header", id="blank-first-line"),
    ],
)
def test_bad_header_names_line_1_and_the_column(header: str, column: int, field: str) -> None:
    err = error_of(header + "\t".join(good_row()) + "\n")
    assert where(err) == (1, column, field)


# --------------------------------------------------------------------------- row errors

MULTILINE_ROW = good_row("000", hypothesis="spans\nthree\nlines", notes='"quoted"\ttoo')


@pytest.mark.parametrize(
    ("bad_row", "column", "field"),
    [
        pytest.param(good_row("002")[:-2], 16, "snapshot_path", id="too-few-cells"),
        pytest.param(good_row("002") + ["surplus"], 18, "row", id="too-many-cells"),
        pytest.param(good_row("002", status="kept"), col("status"), "status", id="unknown-status"),
        pytest.param(good_row("002", status=""), col("status"), "status", id="empty-status"),
        pytest.param(good_row("002", core_metric="1,5"), col("core_metric"), "core_metric", id="not-a-float"),
        pytest.param(good_row("002", val_bpb="nan"), col("val_bpb"), "val_bpb", id="nan"),
        pytest.param(good_row("002", delta_vs_best="-inf"), col("delta_vs_best"), "delta_vs_best", id="inf"),
        pytest.param(good_row("002", core_metric="1e999"), col("core_metric"), "core_metric", id="overflow"),
        pytest.param(good_row("002", train_s="-0.5"), col("train_s"), "train_s", id="negative-train-s"),
        pytest.param(good_row("002", total_s="-1"), col("total_s"), "total_s", id="negative-total-s"),
        pytest.param(
            good_row("002", hypothesis="h" * (MAX_LONG_TEXT + 1)), col("hypothesis"), "hypothesis", id="oversized-long"
        ),
        pytest.param(
            good_row("002", job_name="j" * (MAX_SHORT_TEXT + 1)), col("job_name"), "job_name", id="oversized-short"
        ),
        pytest.param(good_row("002", notes="n" * 200_000), col("notes"), "notes", id="over-csv-field-limit"),
        pytest.param(good_row("002", domain="a\x00b"), col("domain"), "domain", id="nul"),
        pytest.param(good_row(""), 1, "exp_id", id="empty-exp-id"),
        pytest.param(good_row("  "), 1, "exp_id", id="blank-exp-id"),
        pytest.param(good_row("a/b"), 1, "exp_id", id="slash-in-exp-id"),
        pytest.param(good_row("001"), 1, "exp_id", id="duplicate-exp-id"),
        pytest.param(good_row("002", parent_exp="002"), col("parent_exp"), "parent_exp", id="own-parent"),
    ],
)
def test_bad_row_names_its_physical_line_column_and_field(bad_row: list[str], column: int, field: str) -> None:
    # Line 1 header, lines 2-4 a row with a quoted three-line cell, line 5 a plain row,
    # line 6 the bad row: a reader counting records instead of lines would say 4.
    text = tsv(MULTILINE_ROW, good_row("001"), bad_row, good_row("003"))
    err = error_of(text)
    assert where(err) == (6, column, field)
    assert err.as_dict()["line"] == 6 and "results.tsv" in err.message


def test_bad_row_that_itself_spans_lines_is_reported_where_it_starts() -> None:
    text = tsv(good_row("001"), good_row("002", notes="a\nb\nc", status="bogus"))
    assert where(error_of(text)) == (3, col("status"), "status")


def test_bare_cr_inside_a_quoted_cell_does_not_shift_line_numbers() -> None:
    text = tsv(good_row("001"), good_row("002", status="bogus"))
    text = text.replace("\t\n", '\t"old\rmac\rbreaks"\n', 1)  # notes of row 001
    assert text.count("\n") == 3 and read_text(text.split("002")[0])[0].notes == "old\rmac\rbreaks"
    assert where(error_of(text)) == (3, col("status"), "status")


def test_cell_with_a_carriage_return_is_quoted_so_fieldkit_can_read_it(tmp_path: Path) -> None:
    trial = Trial(exp_id="001", status=FailureLabel.KEEP, notes="a\rb", hypothesis="x")
    with fmt.open_results(tmp_path / "results.tsv", "w") as fh:
        fmt.write_trials([trial, Trial(exp_id="002")], fh)
    assert (
        (tmp_path / "results.tsv")
        .read_bytes()
        .endswith(b'\tx\t\tkeep\t\t\t\t\t\t\t\t"a\rb"\n002' + b"\t" * 8 + b"discard" + b"\t" * 8 + b"\n")
    )
    assert [t.notes for t in LineageStore(tmp_path).all_trials()] == ["a\rb", ""]
    with fmt.open_results(tmp_path / "results.tsv") as fh:
        assert [t.notes for t in fmt.read_trials(fh)] == ["a\rb", ""]
    # fieldkit's own writer leaves that cell unquoted and cannot read its file back.
    fk_dir = tmp_path / "fk"
    fieldkit_file(fk_dir, [FkTrial(**{n: getattr(trial, n) for n in FIELDKIT_COLUMNS} | {"status": FkLabel.KEEP})])
    with pytest.raises(ValueError):
        LineageStore(fk_dir).all_trials()
    with fmt.open_results(fk_dir / "results.tsv") as fh, pytest.raises(InvalidInput, match="carriage return") as info:
        list(fmt.read_trials(fh))
    assert where(info.value) == (2, col("notes"), "notes")


def test_unclosed_quote_swallows_the_rest_and_fails_where_it_started() -> None:
    text = (
        HEADER_LINE + "\t".join(good_row("001", hypothesis='"never closed')) + "\n" + "\t".join(good_row("002")) + "\n"
    )
    err = error_of(text)
    assert where(err) == (2, col("expected_delta"), "expected_delta") and "never closes" in err.message


@pytest.mark.parametrize(
    ("cells", "column", "field"),
    [
        pytest.param(
            {"ig_clip_scale_frac_low": "1.5"}, col("ig_clip_scale_frac_low"), "ig_clip_scale_frac_low", id="fraction"
        ),
        pytest.param({"ig_clip_scale_std": "inf"}, col("ig_clip_scale_std"), "ig_clip_scale_std", id="clip-inf"),
        pytest.param({"extra": "{not json"}, col("extra"), "extra", id="extra-not-json"),
        pytest.param({"extra": "[1, 2]"}, col("extra"), "extra", id="extra-not-object"),
        pytest.param({"extra": '{"x": NaN}'}, col("extra"), "extra", id="extra-nan"),
    ],
)
def test_bad_extended_cell_is_located(cells: dict[str, str], column: int, field: str) -> None:
    row = dict.fromkeys(CLIP_SCALE_COLUMNS + ("extra",), "") | cells
    bad = good_row("002") + [row[name] for name in (*CLIP_SCALE_COLUMNS, "extra")]
    ok = good_row("001") + [""] * 7
    text = tsv(ok, bad, header=EXTENDED_LINE)
    assert where(error_of(text)) == (3, column, field)


def test_error_in_the_last_row_imports_nothing() -> None:
    rows = [good_row(f"{i:03d}") for i in range(50)] + [good_row("bad", status="?")]
    staged: list[Trial] = []
    with pytest.raises(InvalidInput):
        staged = import_all(tsv(*rows))
    assert staged == []


def test_undecodable_bytes_are_an_invalid_input_with_a_line(tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    path.write_bytes(tsv(good_row("001")).encode() + b"002\t\xff\xfe\n")
    with fmt.open_results(path) as fh, pytest.raises(InvalidInput) as info:
        list(fmt.read_trials(fh))
    assert info.value.field == "encoding" and info.value.line is not None


def test_binary_stream_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    path.write_text(HEADER_LINE)
    with open(path, "rb") as fh, pytest.raises(TypeError, match="newline=''"):
        next(fmt.read_trials(fh))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- streaming


def test_read_trials_is_a_lazy_generator() -> None:
    pulled = 0

    def lines() -> Iterator[str]:
        nonlocal pulled
        for line in [HEADER_LINE] + ["\t".join(good_row(f"{i:06d}")) + "\n" for i in range(3)]:
            pulled += 1
            yield line

    reader = fmt.read_trials(lines())
    assert inspect.isgenerator(reader)
    assert pulled == 0
    assert next(reader).exp_id == "000000"
    assert pulled == 2


def test_100k_rows_stream_without_materializing() -> None:
    n = 100_000
    row_tail = "\t" + "\t".join(good_row("x")[1:]) + "\n"
    pulled = 0

    def lines() -> Iterator[str]:
        nonlocal pulled
        pulled += 1
        yield HEADER_LINE
        for i in range(n):
            pulled += 1
            yield f"{i:06d}{row_tail}"

    count = 0
    for trial in fmt.read_trials(lines()):
        count += 1
        assert pulled == count + 1  # never more than the current row read ahead
    assert count == n and trial.seq == n - 1


def test_progress_callback_reports_rows_and_lines() -> None:
    calls: list[tuple[int, int]] = []
    text = tsv(*(good_row(f"{i:03d}", notes="two\nlines") for i in range(25)))
    trials = read_text(text, progress=lambda rows, lines: calls.append((rows, lines)), progress_every=10)
    assert len(trials) == 25
    assert calls == [(10, 21), (20, 41), (25, 51)]


def test_count_lines_counts_physical_lines(tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    path.write_text(tsv(good_row("1", notes="a\nb"), good_row("2")), newline="")
    assert fmt.count_lines(path) == 4
    path.write_text("a\nb", newline="")
    assert fmt.count_lines(path) == 2


# --------------------------------------------------------------------------- sniffing and registry


def test_sniff_recognises_both_layouts_only() -> None:
    assert fmt.sniff(HEADER_LINE)
    assert fmt.sniff(EXTENDED_LINE.replace("\n", "\r\n"))
    assert fmt.sniff("\ufeff" + HEADER_LINE.rstrip("\n"))
    assert not fmt.sniff(HEADER_LINE.replace("\t", ","))
    assert not fmt.sniff("step\tloss\tval_bpb\n")
    assert not fmt.sniff("")


def test_registry_serves_fieldkit_by_name_and_by_header() -> None:
    fk = get_format("fieldkit")
    assert FORMATS["fieldkit"] is fk and isinstance(fk, Format)
    assert fk.read is fmt.read_trials and fk.write is fmt.write_trials
    assert detect_format(HEADER_LINE) is fk
    assert detect_format("commit\tval_bpb\n") is not fk  # autoresearch's header (lineage.formats.autoresearch)
    out = io.StringIO(newline="")
    assert fk.write_trials(fk.read_trials(io.StringIO(tsv(good_row()), newline="")), out) == 1


def test_import_only_format_refuses_to_write() -> None:
    reader_only = Format(name="probe", description="", sniff=lambda line: False, read=fmt.read_trials)
    with pytest.raises(InvalidInput) as info:
        reader_only.write_trials([], io.StringIO())
    assert info.value.field == "format"


def test_unknown_format_is_invalid_input_and_names_are_unique() -> None:
    with pytest.raises(InvalidInput) as info:
        get_format("excel")
    assert info.value.field == "format" and "fieldkit" in info.value.message
    with pytest.raises(ValueError):
        register(FORMATS["fieldkit"])


def test_float_cells_survive_str_float_exactly() -> None:
    rows = [good_row(f"{i:03d}", core_metric=repr(v)) for i, v in enumerate(NASTY_FLOATS)]
    back = read_text(tsv(*rows))
    assert [repr(t.core_metric) for t in back] == [repr(v) for v in NASTY_FLOATS]
    assert write_text(back)[len(HEADER_LINE) :] == tsv(*rows, header="")


def test_the_fieldkit_labels_are_fieldkits_own_and_running_is_the_ledgers() -> None:
    assert [label.value for label in FIELDKIT_LABELS] == [label.value for label in FkLabel]
    assert FailureLabel.RUNNING not in FIELDKIT_LABELS


def test_a_running_trial_has_no_row_and_a_file_saying_running_is_refused() -> None:
    # fieldkit appends a trial when it ends: the file of a project with a trial under way
    # is the file of its finished trials, byte for byte
    done = [Trial(exp_id="000", status=FailureLabel.BASELINE, core_metric=1.0, seq=0)]
    running = Trial(exp_id="001", status=FailureLabel.RUNNING, hypothesis="training now", seq=1)
    assert write_text([*done, running]) == write_text(done)
    assert "".join(fmt.iter_tsv([*done, running])) == write_text(done)
    with pytest.raises(InvalidInput, match="unknown status 'running'"):
        read_text(tsv(good_row("001", status="running")))
