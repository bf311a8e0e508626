"""Results tables of autoresearch-style loops: karpathy/autoresearch's ``results.tsv`` and
its forks (``autoresearch``), and any other delimited results table (``generic``).

Pure: text in, :class:`~lineage.domain.Trial` and text out; no database, no clock. The
service-level use-cases (import into a project, watch, record, git) are in
:mod:`lineage.loops`. This package is the registry's entrance (:data:`NAME`,
:data:`GENERIC`, :func:`sniff`, :func:`sniff_generic`, :func:`read_trials`,
:func:`write_trials`) and re-exports the names other modules use; the rules live in
its modules, one job each:

* :mod:`.status_words` -- status words and their labels (:func:`map_status`);
* :mod:`.vocabulary` -- column-name and direction words (re-exports the status words and
  the cells);
* :mod:`.cells` -- what a cell is worth (:func:`metric_value`, :func:`typed_cell`);
* :mod:`.layout` -- :class:`ImportOptions`, :class:`Layout`, :func:`default_layout`,
  number formats, the reserved ``extra`` keys;
* :mod:`.rows` -- :class:`RowParser` (the hot path), :func:`split_lines`, :func:`read_lines`;
* :mod:`.repairs` -- the repairs of hand-written rows (a mixin of :class:`RowParser`);
* :mod:`.header` -- the first line: delimiter, header or data, where the rows begin;
* :mod:`.infer` -- :func:`infer_layout` (columns and their roles), :func:`parse_table`;
* :mod:`.roles` -- the steps of :func:`infer_layout`, one column role each;
* :mod:`.direction` -- :func:`infer_direction`, :func:`decide_direction` (the rule and
  its thresholds);
* :mod:`.lineage` -- :class:`LineageBuilder` (exp_id, parent, baseline, delta);
* :mod:`.writer` -- :func:`render_row`, :func:`trial_says`, :class:`Writer`.

Bytes -> text of a file (NUL, UTF-8) is :func:`lineage.formats.text.check_text`.

The file as written in the wild
    ``commit<TAB>val_bpb<TAB>memory_gb<TAB>status<TAB>description``, one line per
    experiment, appended by an agent. Forks rename, reorder and add columns, use other
    status words, drop the status or commit column, write ``%`` after numbers, and leave
    all the quirks of hand-rolled writers (see :class:`RowParser`).

What a file becomes (the rules, each written once here)
    * **Columns** (:func:`infer_layout`): the status column is found by name (``status``,
      ``verdict``, ``decision``, ``result``, ``outcome``, ``kept_or_reverted``, ... see
      :data:`STATUS_COLUMN_NAMES`), else as the text column whose words are at least 80%
      status words; the metric is ``--metric`` or the first numeric column that is not an
      id or time column (``commit``, ``run``, ``step``, a name ending in ``_id``, ``_at``,
      ``ts``...: :func:`is_id_column`) -- numeric meaning at least 80% of its cells are
      numbers, placeholders or words of a failed run (``FAIL``, ``oom``: not ``True`` or
      ``keep``), or, for a column whose name says a direction, at least half are numbers
      -- preferring the convention's place, the column right after a leading ``commit``
      (``commit, acs, ..., self_org_score``: ``acs``) unless it counts rows (``cycle``
      1, 2, 3...) or is a resource, then one whose name says a direction (``val_bpb``, ``score``..., and a
      rate such as ``tok_sec`` or ``generations_per_s``: :func:`is_rate`, higher) over
      plain names over resource columns (``memory_gb``, ``seconds``...); a column named
      like a metric with fewer numbers than that is an
      error asking for ``--metric``, never a silently different metric; the description
      is found by name (``description``, ``idea``, ``hypothesis``...) or is the text
      column with the longest cells. A column named like a trial field (``timestamp``,
      ``notes``, ``val_bpb``...) fills that field; every other column is kept per trial
      in ``extra`` under its own name.
    * **A loop's table**: a file is a loop's results table only when a column records
      a status, a commit or a description (by name, or a status or commit column by its
      cells). Any other table -- a data dump, a key/value list, a benchmark's
      per-request log -- is refused naming its header line, unless a column flag
      (``--metric``, ``--status``, ``--description``, ``--id``, ``--parent``) says it is one.
    * **Records and text** (:class:`RowParser`): every record of the loop is a trial. A
      line with the header's cell count (after the repairs: a missing cell, a tab in the
      text, two rows on one line) is a record, even when its metric cell is not a number
      (``FAIL``, ``error: CUDA OOM``, ``see log``): the trial has no metric (never the best),
      the cell is kept as written in ``extra[<metric column>]`` (exported as it was, shown
      with the trial) and the lines are named in one warning. A line with one or two
      cells more than the header whose other cells fit (a known status word under the
      status column) is a record with cells that have no column -- at the end, or
      inserted before the status -- kept in ``extra`` as ``col<N>``; two short lines
      whose cells join to the header's are one record broken by a line end inside a
      cell. It is *not* a record -- and
      stays text, written back where it was -- when it repeats the header (half its cells
      or more are column names) or its other cells contradict the columns (no known
      status word, and the number columns, the commit column and the status cell score
      below zero: see :meth:`RowParser._is_record`). Lines that are not records (stray
      program output, a repeated header, blank lines) are kept before the next record,
      each group in one warning naming each non-blank line; the text after the last
      record (a summary) is the trailer, named in one warning.
    * **Long format** (:func:`infer_layout`): a file with a metric-name column
      (``metric``, ``metric_name``, ``name``, ``key``...) and a value column (``value``...)
      -- one metric name and its value per row (``resolution_rate  0.177``, ``trend
      declining``) -- imports every row. The
      project's metric is **one of those names**: ``--metric NAME``, else the name with
      the most numeric values (then not a resource such as ``cost_usd``, then the first
      seen); it is the project's ``metric_name`` and :attr:`Layout.long_metric`. Rows of
      that name carry the metric; rows of every other name are trials without a metric,
      their value cell kept as written in ``extra[<value column>]`` and the name in
      ``extra[<name column>]``; so the best is the best of that one quantity.
    * **Headerless files**: line 1 is data, not a header, when it holds a number, a
      commit hash, or a loop's verdict word (``keep``, ``discard``, ``crash``...) among no
      cell that names a known column (see :func:`data_evidence`). Then the columns are
      named ``col1``, ``col2``... with a warning naming line 1, the evidence and the fix;
      an error of such a file (no metric, no direction) names line 1 and the fix: the
      columns option (:attr:`ImportOptions.columns`, ``--columns commit,model,...``)
      supplies the names, after which the usual inference runs on them. A file whose
      first line is these very names has it as its header. A headerless file exports
      without a header line.
    * **Status words** (:data:`STATUS_WORDS`): mapped case-insensitively onto the
      ledger's failure labels (``kept`` -> ``keep``, ``reverted`` -> ``discard``, ``oom`` ->
      ``crash``, ``timeout`` -> ``train_budget_overrun``, ``running`` -> ``harness_abort``...).
      A word not in the table becomes ``discard`` -- never the best under the ``kept``
      policy, never an error -- and is listed once in a warning. The word as written is
      kept in ``extra[<status column>]`` whenever it is not exactly the label's name, so
      export writes it back. A file without a status column: every row is ``keep`` (a
      measurement that can be best).
    * **No result** (:func:`metric_value`): ``-999``, ``-``, ``—``, ``n/a``, ``nan``,
      ``inf``, empty... are no metric on any row; ``0`` (``0.000000``) is no metric on a
      crash-like row (:data:`CRASH_LIKE`). A trial without a metric is never the best.
    * **exp_id**: the zero-padded 0-based row number (``000``, ``001``..., as fieldkit
      numbers trials), counted from the project's next free number when the project
      already has trials; ``--id COL`` takes a column instead. The commit stays in
      ``extra["commit"]``.
    * **Lineage** (:class:`LineageBuilder`): the loop advances its branch on ``keep``
      and resets otherwise, so a row's parent is the last ``keep`` (or ``baseline``) row
      before it, or the first row when there is none; the first row is every row's
      ``baseline_exp``. A file that names parents (``--parent COL`` or a ``parent``
      column) is taken at its word: a cell naming an earlier row's exp_id or commit.
    * **delta_vs_best**: metric minus the best eligible metric before the row.
    * **Direction** (:mod:`.direction`): the flag always wins; else the kept values when
      they decide overwhelmingly -- at least 8 moves between consecutive kept values, at
      least 90% of them one way -- even against the metric's name, with a warning naming
      the name's suggestion and the count; else the metric's name (loss, bpb, perplexity,
      error... lower; score, sharpe, accuracy, reward, a rate... higher) checked against
      the kept values (at least 2 moves, two thirds one way); a name that says nothing:
      the kept values at two thirds; when they disagree or neither decides: an error
      naming the flag to pass. A file without a status column records no choices: its
      values decide only overwhelmingly, else the name, else the flag.

Round trip
    The file's header text, trailing text (a summary after the rows), line ends, number
    formats and status words are in its layout (``project.settings["results_file"]``,
    :class:`Layout`). Each trial from the file has ``extra["_row"]`` (its row number)
    and, when the trial alone does not give its text back byte for byte (a repaired row,
    blank or stray lines before it, a number written another way, a ``-999``...),
    ``extra["_line"]``: the physical line with its line end, after the lines that preceded
    it. The writer emits that text while the trial still says what it says (re-parsed and
    compared), and renders every other trial -- recorded later, or changed since -- in the
    file's own columns, formats and words; so an imported file exports byte for byte.
    ``extra`` also holds every column without a trial field under its own name, the status
    word as written when it is not the label's name, and ``_git`` (``--git-repo``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TextIO

from lineage.domain import BestPolicy, Trial
from lineage.errors import InvalidInput
from lineage.formats.autoresearch.direction import (
    DECISIVE_MOVES,
    DECISIVE_SHARE,
    decide_direction,
    infer_direction,
    kept_values,
    weigh_direction,
)
from lineage.formats.autoresearch.header import (
    data_evidence,
    delimiter_of,
    first_nonblank,
    header_end,
    headerless_hint,
    looks_like_data,
)
from lineage.formats.autoresearch.infer import SAMPLE_ROWS, ParsedTable, infer_layout, parse_table
from lineage.formats.autoresearch.layout import (
    DIRECTIONS,
    GENERIC,
    GIT_KEY,
    ID_WIDTH,
    LINE_KEY,
    NAME,
    PART_KEY,
    RESERVED_KEYS,
    ROW_DESCRIPTION_KEY,
    ROW_KEY,
    SETTINGS_KEY,
    SPAN_KEY,
    ImportOptions,
    Layout,
    default_layout,
    direction_flag,
    format_number,
    parse_columns,
)
from lineage.formats.autoresearch.lineage import LineageBuilder
from lineage.formats.autoresearch.rows import (
    MAX_LINE_CHARS,
    RowParser,
    number_formatter,
    read_lines,
    split_cells,
    split_lines,
)
from lineage.formats.autoresearch.vocabulary import (
    ADVANCING,
    COMMIT_COLUMN_NAMES,
    CRASH_LIKE,
    HEX,
    PLACEHOLDER_NUMBERS,
    PLACEHOLDERS,
    STATUS_COLUMN_NAMES,
    STATUS_WORDS,
    UNKNOWN_LABEL,
    direction_of_name,
    is_id_column,
    is_number,
    is_rate,
    is_resource,
    map_status,
    metric_value,
    name_tokens,
    normalize_word,
    parse_number,
    parse_status_map,
    typed_cell,
)
from lineage.formats.autoresearch.writer import Writer, render_cells, render_row, trial_says, write_trials
from lineage.formats.text import BOM, check_text

__all__ = [
    "ADVANCING",
    "CRASH_LIKE",
    "DECISIVE_MOVES",
    "DECISIVE_SHARE",
    "DIRECTIONS",
    "GENERIC",
    "GIT_KEY",
    "ID_WIDTH",
    "LINE_KEY",
    "MAX_LINE_CHARS",
    "NAME",
    "PART_KEY",
    "PLACEHOLDERS",
    "PLACEHOLDER_NUMBERS",
    "RESERVED_KEYS",
    "ROW_DESCRIPTION_KEY",
    "ROW_KEY",
    "SAMPLE_ROWS",
    "SETTINGS_KEY",
    "SPAN_KEY",
    "STATUS_WORDS",
    "UNKNOWN_LABEL",
    "ImportOptions",
    "Layout",
    "LineageBuilder",
    "ParsedTable",
    "RowParser",
    "Writer",
    "check_text",
    "data_evidence",
    "decide_direction",
    "default_layout",
    "delimiter_of",
    "direction_flag",
    "direction_of_name",
    "first_nonblank",
    "format_number",
    "header_end",
    "headerless_hint",
    "infer_direction",
    "infer_layout",
    "is_id_column",
    "is_number",
    "is_rate",
    "is_resource",
    "kept_values",
    "looks_like_data",
    "map_status",
    "metric_value",
    "name_tokens",
    "normalize_word",
    "number_formatter",
    "parse_columns",
    "parse_number",
    "parse_status_map",
    "parse_table",
    "read_generic",
    "read_lines",
    "read_trials",
    "render_cells",
    "render_row",
    "sniff",
    "sniff_generic",
    "split_cells",
    "split_lines",
    "trial_says",
    "typed_cell",
    "weigh_direction",
    "write_trials",
]

DESCRIPTION = "autoresearch results.tsv (commit, metric, memory, status, description) and its forks"
GENERIC_DESCRIPTION = "any tab- or comma-separated results table with a header (columns inferred)"


# --------------------------------------------------------------------------- reading (registry)


def read_trials(
    stream: TextIO | Iterable[str],
    *,
    source: str = "<stream>",
    row_lines: list[int] | None = None,
    fmt: str = NAME,
    options: ImportOptions | None = None,
    best_policy: BestPolicy | str = BestPolicy.KEPT,
    warnings: list[str] | None = None,
    layout_out: list[Layout] | None = None,
    **_: Any,
) -> Iterator[Trial]:
    """The trials of a results file (the registry's ``read``): the whole file is parsed
    and the direction decided before the first trial is yielded. ``warnings`` and
    ``layout_out``, when given, receive the warnings and the layout."""
    text = stream.read() if hasattr(stream, "read") else "".join(stream)
    options = options or ImportOptions()
    table = parse_table(text, source=source, fmt=fmt, options=options)
    notes: list[str] = []
    lower, _how = decide_direction(table, options.lower_is_better, notes)
    if warnings is not None:
        warnings.extend(table.warnings)
        warnings.extend(notes)
    if layout_out is not None:
        layout_out.append(table.layout)
    builder = LineageBuilder(table.layout, lower_is_better=lower, best_policy=BestPolicy(best_policy), source=source)
    builder.name(table.rows, first_row=0, lines=table.lines)
    builder.check(table.rows, table.lines)
    builder.deltas(table.rows)
    seen: set[str] = set()
    for trial, line in zip(table.rows, table.lines):
        if trial.exp_id in seen:
            raise InvalidInput(
                "exp_id",
                f"duplicate exp_id {trial.exp_id!r} (in {source})",
                line=line,
                column=table.layout.index(table.layout.id_column) + 1,
            )
        seen.add(trial.exp_id)
        if row_lines is not None:
            row_lines.append(line)
        yield trial


def read_generic(stream: TextIO | Iterable[str], **kwargs: Any) -> Iterator[Trial]:
    """:func:`read_trials` of a ``generic`` table (tab- or comma-separated): the registry's
    ``read`` of that format."""
    kwargs["fmt"] = GENERIC
    return read_trials(stream, **kwargs)


# --------------------------------------------------------------------------- sniffing


def _first_cells(first_line: str, *, allow_csv: bool) -> list[str] | None:
    line = first_line.lstrip(BOM).rstrip("\r\n")
    delimiter = delimiter_of(line, allow_csv=allow_csv)
    if delimiter is None:
        return None
    cells = split_cells(line, delimiter)
    while len(cells) > 1 and not cells[-1].strip():
        cells.pop()
    return cells if len(cells) >= 2 else None


def _fieldkit_like(cells: Sequence[str]) -> bool:
    names = {c.strip() for c in cells}
    return "exp_id" in names and ("core_metric" in names or "parent_exp" in names)


def sniff(first_line: str) -> bool:
    """A tab-separated header that names an autoresearch column (a commit, a status, a
    known metric) -- or a first row that starts with a commit hash and holds a number."""
    cells = _first_cells(first_line, allow_csv=False)
    if cells is None or _fieldkit_like(cells):
        return False
    if looks_like_data(cells):
        return bool(HEX.fullmatch(cells[0].strip()))
    lowered = {c.strip().lower().replace(" ", "_").replace("-", "_") for c in cells}
    if lowered & set(COMMIT_COLUMN_NAMES) or lowered & set(STATUS_COLUMN_NAMES):
        return True
    return any(direction_of_name(c) is not None for c in cells)


def sniff_generic(first_line: str) -> bool:
    """Any tab- or comma-separated line of two cells or more (tried last)."""
    cells = _first_cells(first_line, allow_csv=True)
    return cells is not None and not _fieldkit_like(cells)
