"""The rows of a results file: :class:`RowParser` turns physical lines into trials one line
at a time (the import's hot path, and watch's appended lines), repairing what agents
get wrong (missing or extra cells, two rows on one line, literal ``\\t``) and keeping
every other line as text; :func:`split_lines` and :func:`split_cells` cut a file into
lines and a line into cells.

``RowParser.feed`` inlines ``RowParser._row`` for speed (a third faster on ordinary
numeric rows); ``tests/lineage/test_format_autoresearch_rows.py`` pins the two to the
same trials on every row of the test corpus.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any

from lineage.domain import TRIAL_FIELD_NAMES, FailureLabel, Trial
from lineage.errors import InvalidInput
from lineage.formats.autoresearch.layout import LINE_KEY, PART_KEY, ROW_KEY, SPAN_KEY, Layout, format_number
from lineage.formats.autoresearch.repairs import RowRepairs
from lineage.formats.autoresearch.vocabulary import (
    CRASH_LIKE,
    HEX,
    PLACEHOLDER_NUMBERS,
    TEXT_FIELD_COLUMNS,
    map_status,
    metric_value,
    parse_number,
    typed_cell,
)
from lineage.formats.text import BOM

#: A line longer than this is not a row of a results table ("one giant line").
MAX_LINE_CHARS = 1 << 20


# RowParser.feed builds Trials positionally: the dataclass must keep this field order.
if TRIAL_FIELD_NAMES[:24] != (
    "exp_id",
    "timestamp",
    "specialist",
    "parent_exp",
    "baseline_exp",
    "domain",
    "hypothesis",
    "expected_delta",
    "status",
    "core_metric",
    "val_bpb",
    "delta_vs_best",
    "train_s",
    "total_s",
    "job_name",
    "snapshot_path",
    "notes",
    "ig_clip_scale_mean",
    "ig_clip_scale_std",
    "ig_clip_scale_min",
    "ig_clip_scale_max",
    "ig_clip_scale_frac_low",
    "ig_clip_scale_frac_high",
    "extra",
):  # pragma: no cover
    raise ImportError("lineage.domain.Trial changed its field order; update RowParser.feed")


def _split_csv(body: str) -> list[str]:
    try:
        return next(csv.reader([body]))
    except (csv.Error, StopIteration):
        return body.split(",")


def _printf(spec: Sequence[Any] | None) -> str | None:
    """The ``%`` pattern of a fixed-decimal number column (no suffix), else None."""
    if spec and spec[0] is not None and not spec[1]:
        return f"%.{int(spec[0])}f"
    return None


def number_formatter(spec: Sequence[Any] | None) -> Callable[[Any], str]:
    """``format_number`` for one column, with its format looked up once."""
    decimals, suffix = (spec or [None, ""])[0], (spec or [None, ""])[1]
    if decimals is not None:
        pattern = f"%.{int(decimals)}f" + suffix.replace("%", "%%")

        def fixed(value: Any) -> str:
            if value is None:
                return ""
            if isinstance(value, str):
                return value
            if isinstance(value, int) and not isinstance(value, bool) and decimals == 0:
                return f"{value}{suffix}"
            return pattern % value

        return fixed
    return lambda value: format_number(value, spec)


class RowParser(RowRepairs):
    """Turns the physical lines of a results file into trials, one line at a time (so
    watch can feed appended lines to the parser that read the file so far).

    A row becomes a :class:`~lineage.domain.Trial` with its status, metric,
    description, the fields its columns fill and ``extra`` (the other columns, the word
    as written, ``_line``); exp_id, parent, baseline and delta are
    :class:`LineageBuilder`'s (``exp_id`` is ``""`` until then). ``rows`` and ``lines``
    (the physical line of each row) grow as lines are fed.

    The quirks of files written by agents, and what happens to each:

    * CRLF, blank lines, trailing tabs, a BOM: kept in the row's text; nothing to repair.
    * a row with one or two cells too few: the empty cells go where the row's cells fit
      the columns best (numbers under number columns, a status word under the status);
      a row with cells too many: joined into the description (a tab inside the text),
      or -- one or two cells -- cells without a column, kept as ``col<N>`` (see
      :meth:`_extra_cells`);
      two rows on one line (``2n`` cells, or ``2n - 1`` with the second commit glued to
      the first description): split into two trials; one record broken over two lines
      (a line end inside a cell: two short lines whose cells join to the header's, see
      :meth:`_split_record`): one trial; a literal ``\\t`` instead of tabs: split on it.
      Each repaired row gives one warning naming its line.
    * a line of the header's width whose metric cell is not a number (``FAIL``, ``error``,
      ``see log``): still a record -- a trial without a metric (never the best), the cell
      kept as written in ``extra[<metric column>]`` -- unless it repeats the header or its
      other cells contradict the columns (an empty or numeric status cell, words in the
      number columns, no hash in the commit column; see :meth:`_is_record`).
    * a line that is not a record (a repeated header, stray program output, a summary):
      kept as text before the next row, named in a warning; the lines after the last row
      are the trailer.
    * a long-format file (:attr:`Layout.long_names`): a row of another metric's name is a
      trial without a metric, its value cell kept as written in ``extra``.
    * NUL bytes or a line over :data:`MAX_LINE_CHARS`: :class:`InvalidInput` naming the line.
    """

    def __init__(self, layout: Layout, *, source: str = "<stream>", first_line: int = 1, first_row: int = 0) -> None:
        self.layout = layout
        self.source = source
        self.n = len(layout.columns)
        self.delimiter = layout.delimiter
        self.mi = layout.index(layout.metric)
        if self.mi < 0:
            raise InvalidInput("metric", f"column {layout.metric!r} is not in the file's columns")
        self.si = layout.index(layout.status)
        self.di = layout.index(layout.description)
        self.ci = layout.index(layout.commit)
        numeric = set(layout.numeric)
        self.field_specs = [
            (layout.index(col), col, name) for col, name in layout.fields.items() if layout.index(col) >= 0
        ]
        skip = {self.mi, self.si, self.di, *(i for i, _, _ in self.field_specs)}
        self.extra_specs = [
            (i, layout.extra_key(name), name in numeric) for i, name in enumerate(layout.columns) if i not in skip
        ]
        self.status_key = layout.extra_key(layout.status) if layout.status else None
        self.metric_key = layout.extra_key(layout.metric)
        #: long format: the index of the metric-name column and the project's metric name
        self.li = layout.index(layout.long_names) if layout.long_metric is not None else -1
        self.long_metric = layout.long_metric
        self.metric_is_val_bpb = layout.metric == "val_bpb"
        self.metric_text = number_formatter(layout.formats.get(layout.metric))
        self.number_text = {
            i: number_formatter(layout.formats.get(layout.columns[i])) for i, _, numeric in self.extra_specs if numeric
        }
        self.status_map = dict(layout.status_map)
        self._word_cache: dict[str, tuple[FailureLabel, bool]] = {}
        #: word -> (label, word differs from the label's name, crash-like, known)
        self._hot_words: dict[str, tuple[FailureLabel, bool, bool, bool]] = {}
        self.rows: list[Trial] = []
        self.lines: list[int] = []
        #: each row's text as written (blank or stray lines before it included)
        self.texts: list[str] = []
        self.warnings: list[str] = []
        self.unknown_words: Counter[str] = Counter()
        self.prefix: list[str] = []  # raw lines (blank or stray) waiting for the next row
        self.prefix_line: int | None = None  # line of the first stray (non-blank) line in prefix
        self.stray: list[int] = []  # lines of the stray (non-blank) lines in prefix
        #: lines of the records whose metric cell is not a number (trials without a metric)
        self.unnumbered: list[int] = []
        #: the stray (non-blank, not a record) lines already followed by a record; the
        #: trailer's are still in ``stray``
        self.text_lines: list[int] = []
        self.line = first_line - 1  # the last physical line consumed
        self.first_row = first_row
        self.commit_length = layout.commit_length

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, lines: Iterable[str]) -> None:
        """Consume physical lines, each with its line end (the last may have none)."""
        n, delimiter, mi, si, di = self.n, self.delimiter, self.mi, self.si, self.di
        fast = delimiter != "," and not self.field_specs and self.li < 0
        val_bpb = self.metric_is_val_bpb
        extra_specs, status_key = self.extra_specs, self.status_key
        text_specs = [(i, key) for i, key, numeric in extra_specs if not numeric]
        number_specs: list[Any] = [(i, key) for i, key, numeric in extra_specs if numeric]
        hot = self._hot_words
        rows, row_lines, row_texts, prefix = self.rows, self.lines, self.texts, self.prefix
        metric_text, number_text = self.metric_text, self.number_text
        # printf patterns of fixed-decimal columns (the common case), else None
        metric_pattern = _printf(self.layout.formats.get(self.layout.metric))
        number_specs = [(i, key, _printf(self.layout.formats.get(self.layout.columns[i]))) for i, key in number_specs]
        newline = self.layout.newline
        placeholder = self.layout.placeholder
        placeholder_numbers = PLACEHOLDER_NUMBERS
        no_status = (FailureLabel.KEEP, False, False, True)
        unknown = self.unknown_words
        first_row = self.first_row
        line_no = self.line
        for text in lines:
            line_no += 1
            if len(text) > MAX_LINE_CHARS or "\x00" in text:
                self.line = line_no
                self._refuse(text)
            body = text[:-1] if text[-1:] == "\n" else text
            if body[-1:] == "\r":
                body = body[:-1]
            cells = body.split(delimiter)
            if len(cells) != n or not fast or prefix or line_no == 1 or not body or body.isspace():
                self.line = line_no
                self._line(text, body)
                continue
            # the hot path: a well-formed row (what _row does, inlined)
            if si >= 0:
                word = cells[si]
                found = hot.get(word)
                if found is None:
                    label, known = self._label(word)
                    found = hot[word] = (label, word != label.value, label in CRASH_LIKE, known)
            else:
                word, found = "", no_status
            cell = cells[mi]
            try:
                metric: float | None = float(cell)
            except ValueError:
                metric = metric_value(cell, found[0])
                if metric is False:
                    self.line = line_no
                    self._line(text, body)
                    continue
            else:
                if metric - metric != 0.0 or metric in placeholder_numbers or (metric == 0.0 and found[2]):  # type: ignore[operator]
                    metric = None
            # can the trial alone give this text back (then it is not stored)?
            if metric is None:
                exact = cell == (placeholder if found[2] else "")
            elif metric_pattern is not None:
                exact = metric_pattern % metric == cell
            else:
                exact = metric_text(metric) == cell
            if exact and (not text.endswith(newline) or "\r" in body):
                exact = False
            extra: dict[str, Any] = {}
            for i, key in text_specs:
                extra[key] = cells[i]
            for i, key, pattern in number_specs:
                value = cells[i]
                if not value:
                    extra[key] = None
                    continue
                if value[-1] != "%":
                    try:
                        number = float(value)
                    except ValueError:
                        pass
                    else:
                        if number - number == 0.0:
                            if value.lstrip("+-").isdigit():
                                number = int(value)
                                if exact and number_text[i](number) != value:
                                    exact = False
                            elif (
                                exact and (pattern % number if pattern is not None else number_text[i](number)) != value
                            ):
                                exact = False
                            extra[key] = number
                            continue
                extra[key] = value
            if found[1]:
                extra[status_key] = word  # type: ignore[index]
            extra[ROW_KEY] = first_row + len(rows)
            if not exact:
                extra[LINE_KEY] = text
            row_texts.append(text)
            if not found[3]:
                unknown[word.strip() or "(empty)"] += 1
            # positionally, in Trial's field order (a third faster than keywords)
            rows.append(
                Trial(
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    cells[di] if di >= 0 else "",
                    "",
                    found[0],
                    metric,
                    metric if val_bpb else None,
                    None,
                    None,
                    None,
                    "",
                    "",
                    "",
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    extra,
                )
            )
            row_lines.append(line_no)
        self.line = line_no

    def _refuse(self, text: str) -> None:
        if "\x00" in text:
            raise InvalidInput("file", f"NUL bytes: not a text results table (in {self.source})", line=self.line)
        raise InvalidInput(
            "file", f"line is {len(text):,} characters long: not a results table (in {self.source})", line=self.line
        )

    def _line(self, text: str, body: str) -> None:
        if self.line == 1 and body.startswith(BOM):
            body = body[1:]
        if not body.strip():
            self.prefix.append(text)
            return
        cells = _split_csv(body) if self.delimiter == "," else body.split(self.delimiter)
        if len(cells) == self.n:
            trial = self._row(cells)
            if trial is not None:
                self._emit([(trial, None)], text)
                return
        if len(cells) < self.n and self.stray and self.stray[-1] == self.line - 1:
            joined = self._split_record(cells)
            if joined is not None:
                self._emit(joined, text)
                return
        repaired = self._repair(body, cells)
        if repaired is None:
            if self.prefix_line is None:
                self.prefix_line = self.line
            self.stray.append(self.line)
            self.prefix.append(text)
            return
        self._emit(repaired, text)

    def _split_record(self, cells: list[str]) -> list[tuple[Trial, str | None]] | None:
        """The record that the stray line just before this one and this line make
        together -- one record broken in two by a line end inside a cell -- when their
        cells join to exactly the header's (the last cell of the first continues in the
        first cell of the second) and fit the columns (a known status word under the
        status column). The stray line is then part of the record, not text."""
        previous = self.prefix[-1]
        body = previous[:-1] if previous.endswith("\n") else previous
        body = body[:-1] if body.endswith("\r") else body
        before = split_cells(body, self.delimiter)
        if len(before) + len(cells) - 1 != self.n:
            return None
        joined = before[:-1] + [before[-1] + "\n" + cells[0]] + cells[1:]
        if self._fit(joined) < 0 or (self.si >= 0 and not self._label(joined[self.si])[1]):
            return None
        trial = self._row(joined)
        if trial is None:
            return None
        self.stray.pop()
        self.prefix_line = self.stray[0] if self.stray else None
        trial.extra[SPAN_KEY] = 2  # type: ignore[index]
        where = self.layout.columns[len(before) - 1]
        return [
            (
                trial,
                f"one record broken over lines {self.line - 1}-{self.line} by a line end inside "
                f"{where!r}; read as one trial",
            )
        ]

    def _emit(self, made: list[tuple[Trial, str | None]], text: str) -> None:
        raw = text
        if self.prefix:
            raw = "".join(self.prefix) + text
            if self.prefix_line is not None:
                self.warnings.append(
                    f"{name_lines(self.stray)}: not a row of the table; kept as text before line {self.line} "
                    f"(in {self.source})"
                )
            self.prefix.clear()
            self.prefix_line = None
            self.text_lines.extend(self.stray)
            self.stray.clear()
        if made[0][1]:
            self.warnings.append(f"line {self.line}: {made[0][1]} (in {self.source})")
        for part, (trial, _) in enumerate(made):
            if trial.core_metric is None and self.metric_key in trial.extra and self._own_metric(trial):
                self.unnumbered.append(self.line)
            trial.extra[ROW_KEY] = self.first_row + len(self.rows)  # type: ignore[index]
            trial.extra[LINE_KEY] = raw  # type: ignore[index]
            if part:
                trial.extra[PART_KEY] = part  # type: ignore[index]
            self.rows.append(trial)
            self.lines.append(self.line)
            self.texts.append(raw)

    def trailer(self) -> tuple[str, int | None]:
        """The text after the last row and the line of its first non-blank line."""
        return "".join(self.prefix), self.prefix_line

    # -- one row ---------------------------------------------------------------------------

    def _label(self, word: str) -> tuple[FailureLabel, bool]:
        found = self._word_cache.get(word)
        if found is None:
            found = self._word_cache[word] = map_status(word, self.status_map)
        return found

    def _row(self, cells: list[str]) -> Trial | None:
        """The trial these cells (exactly n) say, or None if they are not a row."""
        si = self.si
        if si >= 0:
            word = cells[si]
            label, known = self._label(word)
        else:
            word, label, known = "", FailureLabel.KEEP, True
        cell = cells[self.mi]
        kept: str | None = None  # the metric cell as written, for a trial without a metric
        if self.li >= 0 and cells[self.li].strip() != self.long_metric:
            metric, kept = None, cell  # another metric's row of a long-format file
        else:
            metric = metric_value(cell, label)
            if metric is False:
                if not self._is_record(cells, known):
                    return None
                metric, kept = None, cell
        extra: dict[str, Any] = {}
        for i, key, numeric in self.extra_specs:
            cell = cells[i]
            extra[key] = typed_cell(cell) if numeric else cell
        if kept is not None:
            extra[self.metric_key] = kept
        if si >= 0 and word != label.value:
            extra[self.status_key] = word  # type: ignore[index]
        fields: dict[str, Any] = {}
        layout = self.layout
        for i, col, name in self.field_specs:
            cell = cells[i]
            if name in TEXT_FIELD_COLUMNS:
                if len(cell) <= TEXT_FIELD_COLUMNS[name]:
                    fields[name] = cell
                else:
                    extra[layout.extra_key(col)] = cell
            else:
                value = parse_number(cell)
                if value is False or (value is not None and name != "val_bpb" and value < 0):
                    extra[layout.extra_key(col)] = cell
                else:
                    fields[name] = value
        if self.metric_is_val_bpb:
            fields["val_bpb"] = metric
        if not known:
            self.unknown_words[word.strip() or "(empty)"] += 1
        return Trial(
            "",
            hypothesis=cells[self.di] if self.di >= 0 else "",
            status=label,
            core_metric=metric,
            extra=extra,
            **fields,
        )

    def _is_record(self, cells: list[str], known: bool) -> bool:
        """Whether ``cells`` (exactly n; the metric cell not a number) are a record of the
        loop: not a repeat of the header (half its cells or more are the column names),
        and a known status word in the status column, or else other cells that do not
        contradict the columns (numbers under number columns, a hash under the commit,
        a word under the status)."""
        same = sum(1 for cell, name in zip(cells, self.layout.columns) if cell.strip().lower() == name.lower())
        if same * 2 >= self.n:
            return False
        if self.si >= 0 and known:
            return True
        score = 0
        if self.si >= 0:
            word = cells[self.si]
            if not word.strip() or parse_number(word) is not False:
                score -= 2
        for i, _, numeric in self.extra_specs:
            if numeric:
                score += 1 if parse_number(cells[i]) is not False else -1
        if self.ci >= 0:
            score += 1 if HEX.fullmatch(cells[self.ci].strip()) else -1
        return score >= 0

    def _own_metric(self, trial: Trial) -> bool:
        """Whether ``trial`` is a row of the project's metric (not another long-format name)."""
        if self.li < 0:
            return True
        name = trial.extra.get(self.layout.extra_key(self.layout.columns[self.li]))
        return isinstance(name, str) and name.strip() == self.long_metric


def name_lines(lines: Sequence[int], most: int = 10) -> str:
    """``line 5`` / ``lines 5, 9, 12`` / ``lines 5, 9, ... (and 40 more)``."""
    if len(lines) == 1:
        return f"line {lines[0]}"
    shown = ", ".join(str(line) for line in lines[:most])
    return f"lines {shown}" + (f" (and {len(lines) - most} more)" if len(lines) > most else "")


def split_lines(text: str) -> list[str]:
    """Physical lines with their line ends (``\\n`` only; a ``\\r`` stays in its line)."""
    parts = text.split("\n")
    last = parts.pop()
    lines = [p + "\n" for p in parts]
    if last:
        lines.append(last)
    return lines


def read_lines(stream: IO[str], chunk_chars: int = 1 << 20) -> list[str]:
    """:func:`split_lines` of what ``stream`` holds from where it stands, read a chunk at a
    time: the file's text is never held whole beside its lines (an upload's memory)."""
    lines: list[str] = []
    pending: list[str] = []  # the start of a line the chunks have not ended yet
    while chunk := stream.read(chunk_chars):
        if "\n" not in chunk:
            pending.append(chunk)
            continue
        parts = chunk.split("\n")
        if pending:
            parts[0] = "".join(pending) + parts[0]
        tail = parts.pop()
        pending = [tail] if tail else []
        lines.extend([part + "\n" for part in parts])
    if pending:
        lines.append("".join(pending))
    return lines


def split_cells(body: str, delimiter: str) -> list[str]:
    return _split_csv(body) if delimiter == "," else body.split(delimiter)
