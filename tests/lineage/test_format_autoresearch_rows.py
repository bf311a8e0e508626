"""``RowParser.feed`` inlines ``RowParser._row`` for speed: a differential test pins the two.

Every physical line of every results file of the test corpus (:mod:`tests.lineage.
autoresearch_files`, plus generated rows that stress the number formats and status
words) is fed through ``feed``; each row the inlined hot path made must be the very
trial ``_row`` makes of the same cells, and a row stored without its text (``_line``)
must render back to that text byte for byte.
"""

from __future__ import annotations

import random

import pytest

from lineage.domain import Trial
from lineage.formats.autoresearch import (
    GENERIC,
    LINE_KEY,
    NAME,
    ROW_KEY,
    ImportOptions,
    Layout,
    RowParser,
    header_end,
    parse_table,
    render_row,
    split_lines,
)
from tests.lineage.autoresearch_files import ORIGINAL, QUIRKS, RECORDS, WELL_FORMED, tsv


def generated(rows: int, seed: int) -> str:
    """An autoresearch file whose cells take every shape the hot path decides on: numbers
    written in and out of the column's format, placeholders, crash zeros, known, unknown
    and upper-case status words, empty cells, ``%`` cells, a non-numeric metric."""
    rng = random.Random(seed)
    metrics = [
        "0.997900",
        "1.0",
        "0.98",
        "+0.991000",
        "1e-3",
        "-999",
        "0.000000",
        "0",
        "",
        "-",
        "nan",
        "inf",
        "0.993200",
        "12",
        "FAIL",
    ]
    memories = ["44.0", "44", "44.25", "", "-", "n/a", "7%", "0.0", "1e3", "x"]
    words = ["keep", "discard", "crash", "KEEP", "kept", "reverted", "oom", "timeout", "meh", "", "running"]
    lines = ["commit\tval_bpb\tmemory_gb\tstatus\tdescription"]
    for i in range(rows):
        metric = rng.choice(metrics) if rng.random() < 0.4 else f"{0.9 + rng.random() / 10:.6f}"
        memory = rng.choice(memories) if rng.random() < 0.4 else f"{40 + rng.random() * 8:.1f}"
        lines.append(f"{rng.getrandbits(28):07x}\t{metric}\t{memory}\t{rng.choice(words)}\tidea {i}")
    return tsv(*lines, nl=rng.choice(["\n", "\r\n"]))


def corpus() -> dict[str, tuple[str, str, dict]]:
    """name -> (text, format, import options)."""
    files: dict[str, tuple[str, str, dict]] = {}
    for group in (WELL_FORMED, QUIRKS, RECORDS):
        for name, case in group.items():
            files[name] = (case.text, GENERIC if name.startswith("csv") else NAME, dict(case.options))
    files["status_column_extra"] = (
        tsv("iteration\tsharpe\tmax_drawdown\tverdict\tcomment", "1\t1.12\t-0.21\tkept\ta", "2\t1.35\t\tnope\tb"),
        NAME,
        {},
    )
    for seed in range(4):
        files[f"generated_{seed}"] = (generated(300, seed), NAME, {})
    return files


CORPUS = corpus()


def hot_and_cold(text: str, layout: Layout, reference: type[RowParser] = RowParser) -> tuple[int, int]:
    """Feed ``text`` once; check each hot-path row against ``reference._row``. Returns
    (rows the hot path made, all rows)."""
    lines = split_lines(text)
    start = header_end(lines, layout)
    parser = RowParser(layout, first_line=start + 1)
    cold_lines: set[int] = set()
    line_of_row = parser._line

    def cold(text: str, body: str) -> None:  # the lines feed hands to the general path
        cold_lines.add(parser.line)
        line_of_row(text, body)

    parser._line = cold  # type: ignore[method-assign]
    parser.feed(lines[start:])
    other = reference(layout, first_line=start + 1)
    hot = 0
    for trial, line, text_of_row in zip(parser.rows, parser.lines, parser.texts):
        if line in cold_lines:
            continue
        hot += 1
        body = text_of_row[:-1] if text_of_row[-1:] == "\n" else text_of_row
        if body[-1:] == "\r":
            body = body[:-1]
        made = other._row(body.split(layout.delimiter))
        assert made is not None, (line, text_of_row)
        made.extra[ROW_KEY] = trial.extra[ROW_KEY]
        extra = dict(trial.extra)
        kept_text = extra.pop(LINE_KEY, None)
        assert trial.with_changes(extra=extra) == made, (line, text_of_row)
        if kept_text is None:  # the trial alone gives its text back
            assert render_row(trial, layout) == text_of_row, (line, text_of_row)
        else:
            assert kept_text == text_of_row
    return hot, len(parser.rows)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_the_inlined_hot_path_makes_the_trial_row_makes(name: str) -> None:
    text, fmt, options = CORPUS[name]
    table = parse_table(text, fmt=fmt, options=ImportOptions(**options))
    hot, rows = hot_and_cold(text, table.layout)
    assert rows == len(table.rows)
    # a layout the hot path serves (tab-separated, no field columns, not long-format) with
    # rows of the header's width after the first two lines: the hot path took some of them
    layout = table.layout
    widths = [len(line.rstrip("\r\n").split("\t")) for line in split_lines(text)[2:]]
    served = layout.delimiter == "\t" and not layout.fields and layout.long_names is None
    if served and len(layout.columns) in widths:
        assert hot > 0


def test_the_differential_test_sees_the_hot_path_take_ordinary_rows() -> None:
    layout = parse_table(ORIGINAL).layout
    assert hot_and_cold(ORIGINAL, layout) == (8, 8)
    generated_text = generated(300, 0)
    hot, rows = hot_and_cold(generated_text, parse_table(generated_text).layout)
    assert rows > 250 and hot > rows // 2


def test_a_difference_between_the_paths_is_caught() -> None:
    """The check can fail: a ``_row`` that reads one cell differently is told apart."""

    class Skewed(RowParser):
        def _row(self, cells: list[str]) -> Trial | None:
            trial = super()._row(cells)
            return trial.with_changes(hypothesis=trial.hypothesis + "!") if trial is not None else None

    with pytest.raises(AssertionError):
        hot_and_cold(ORIGINAL, parse_table(ORIGINAL).layout, reference=Skewed)
