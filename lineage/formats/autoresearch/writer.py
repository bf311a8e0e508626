"""Writing trials back as a results file: each imported trial's own text while it still
says what it said (:func:`trial_says`, by re-parsing that text), every other trial
rendered in the file's columns, number formats and status words (:func:`render_row`);
the header before and the trailer after (:class:`Writer`, :func:`write_trials`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import IO, Any

from lineage.domain import FailureLabel, Trial
from lineage.errors import InvalidInput
from lineage.formats.autoresearch.layout import (
    LINE_KEY,
    PART_KEY,
    RESERVED_KEYS,
    ROW_DESCRIPTION_KEY,
    ROW_KEY,
    SPAN_KEY,
    Layout,
    default_layout,
    format_number,
)
from lineage.formats.autoresearch.rows import RowParser, split_lines
from lineage.formats.autoresearch.vocabulary import CRASH_LIKE


def _clean(text: str, layout: Layout) -> str:
    if layout.is_csv:
        return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    out = text
    for ch in ("\r\n", "\n", "\r", layout.delimiter):
        out = out.replace(ch, " ")
    return out


def render_cells(trial: Trial, layout: Layout, *, parent_value: str | None = None) -> list[str]:
    """The cells of ``trial`` in the file's columns, numbers and words."""
    cells: list[str] = []
    extra = trial.extra
    field_of = layout.fields
    for name in layout.columns:
        key = layout.extra_key(name)
        if name == layout.metric:
            if trial.core_metric is None:
                written = extra.get(key)  # a record's metric cell that is not a number
                if isinstance(written, str):
                    cell = written
                else:
                    cell = layout.placeholder if trial.status in CRASH_LIKE else ""
            else:
                cell = format_number(trial.core_metric, layout.formats.get(name))
        elif name == layout.status:
            word = extra.get(key)
            if isinstance(word, str):
                cell = word
            elif ROW_KEY in extra:  # a row of the file wrote the label's own name
                cell = trial.status.value
            else:  # recorded elsewhere: the file's word for the label
                cell = layout.words.get(trial.status.value, trial.status.value)
        elif name == layout.description:
            cell = row_description(trial)
        elif name == layout.id_column:
            cell = trial.exp_id
        elif name in field_of and key not in extra:
            value = getattr(trial, field_of[name])
            cell = format_number(value, layout.formats.get(name)) if not isinstance(value, str) else value
        elif name == layout.parent and key not in extra:
            cell = parent_value if parent_value is not None else trial.parent_exp
        elif name == layout.long_names and key not in extra:  # recorded elsewhere: the project's metric
            cell = layout.long_metric or ""
        else:
            cell = format_number(extra.get(key), layout.formats.get(name))
        cells.append(_clean(cell, layout))
    return cells


def row_description(trial: Trial) -> str:
    """The text of the trial's description cell: the row's own
    (``extra["row_description"]``) when the trial keeps a fuller hypothesis, else the
    hypothesis."""
    text = trial.extra.get(ROW_DESCRIPTION_KEY)
    return text if isinstance(text, str) else trial.hypothesis


def render_row(trial: Trial, layout: Layout, *, parent_value: str | None = None) -> str:
    """One line (with the file's line end) for ``trial``."""
    cells = render_cells(trial, layout, parent_value=parent_value)
    if layout.is_csv:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator=layout.newline).writerow(cells)
        return buffer.getvalue()
    return layout.delimiter.join(cells) + layout.newline


def _same(a: Any, b: Any) -> bool:
    if type(a) is bool or type(b) is bool:
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def trial_says(trial: Trial, parsed: Trial, layout: Layout) -> bool:
    """Whether ``trial`` still says what ``parsed`` (its own text, re-parsed) says."""
    if (
        trial.status is not parsed.status
        or not _same(trial.core_metric, parsed.core_metric)
        or row_description(trial) != parsed.hypothesis
    ):
        return False
    extra = trial.extra
    for key, value in parsed.extra.items():
        if key in RESERVED_KEYS:
            continue
        if key not in extra or not _same(extra[key], value):
            return False
    status_key = layout.extra_key(layout.status) if layout.status else None
    if status_key and status_key not in parsed.extra and status_key in extra:
        return False  # the trial has a word of its own now
    for name in layout.fields.values():
        if not _same(getattr(trial, name), getattr(parsed, name)):
            return False
    return True


def _row_text(raw: str, span: int = 1) -> str:
    """The row's own physical line(s) in a stored ``_line`` (after blank or stray lines):
    the last ``span`` lines (2 for a record broken over two lines)."""
    end = len(raw) - 1 if raw.endswith("\n") else len(raw)
    for _ in range(span):
        start = raw.rfind("\n", 0, end) + 1
        end = start - 1
    return raw[start:]


class Writer:
    """Writes trials in a layout: each trial's own text while it still says the same,
    rendered rows otherwise. Call :meth:`write` for every trial, then :meth:`close`."""

    def __init__(self, stream: IO[str], layout: Layout) -> None:
        self.stream = stream
        self.layout = layout
        self.parser = RowParser(layout)
        self.pending: list[Trial] = []  # trials sharing one physical line (merged rows)
        self.ends_open = False
        self.count = 0
        self.commits: dict[str, str] = {}
        stream.write(layout.header_text)
        self.ends_open = bool(layout.header_text) and not layout.header_text.endswith("\n")

    def _out(self, text: str) -> None:
        if not text:
            return
        if self.ends_open:
            self.stream.write(self.layout.newline)
        self.stream.write(text)
        self.ends_open = not text.endswith("\n")

    def write(self, trial: Trial) -> None:
        if trial.status is FailureLabel.RUNNING:  # not a row yet: a loop writes it when it finishes
            return
        raw = trial.extra.get(LINE_KEY)
        part = trial.extra.get(PART_KEY, 0)
        if self.pending and not (isinstance(raw, str) and part and raw == self.pending[0].extra.get(LINE_KEY)):
            self._flush()
        if isinstance(raw, str):
            self.pending.append(trial)
        else:
            self._render(trial, prefix="")
        self.count += 1
        if self.layout.commit:
            commit = trial.extra.get(self.layout.extra_key(self.layout.commit))
            if isinstance(commit, str):
                self.commits[trial.exp_id] = commit

    def _flush(self) -> None:
        group, self.pending = self.pending, []
        raw = group[0].extra[LINE_KEY]
        line = _row_text(raw, int(group[0].extra.get(SPAN_KEY, 1) or 1))
        prefix = raw[: len(raw) - len(line)]
        rows = self._reparse(line)
        parts = [t.extra.get(PART_KEY, 0) for t in group]
        if (
            rows is not None
            and parts == list(range(len(rows)))
            and all(trial_says(t, rows[p], self.layout) for t, p in zip(group, parts))
        ):
            self._out(raw)
            return
        for i, trial in enumerate(group):
            self._render(trial, prefix=prefix if i == 0 else "")

    def _reparse(self, line: str) -> list[Trial] | None:
        parser = self.parser
        for kept in (
            parser.rows,
            parser.lines,
            parser.texts,
            parser.prefix,
            parser.warnings,
            parser.stray,
            parser.unnumbered,
            parser.text_lines,
        ):
            kept.clear()
        parser.prefix_line = None
        try:
            parser.feed(split_lines(line))
        except InvalidInput:
            return None
        rows = list(parser.rows)
        return rows or None

    def _render(self, trial: Trial, *, prefix: str) -> None:
        parent_value = None
        if self.layout.parent and trial.parent_exp:
            parent_value = self.commits.get(trial.parent_exp, trial.parent_exp)
        self._out(prefix + render_row(trial, self.layout, parent_value=parent_value))

    def close(self) -> int:
        if self.pending:
            self._flush()
        self._out(self.layout.trailer)
        return self.count


def write_trials(
    trials: Iterable[Trial],
    stream: IO[str],
    *,
    layout: Layout | Mapping[str, Any] | None = None,
    metric_name: str = "val_bpb",
    **_: Any,
) -> int:
    """Write ``trials`` (insertion order) in ``layout`` (a project's
    ``settings["results_file"]``; default: autoresearch's own header). Returns the rows."""
    if layout is None:
        layout = default_layout(metric_name)
    elif not isinstance(layout, Layout):
        layout = Layout.from_dict(layout)
    writer = Writer(stream, layout)
    for trial in trials:
        writer.write(trial)
    return writer.close()
