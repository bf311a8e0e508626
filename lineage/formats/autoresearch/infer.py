"""What a whole results file is: the layout inferred from its header (or the names of
the columns option) and first rows (:func:`infer_layout`: which column is the metric,
the status, the description..., a long-format file's metric name), and the file parsed
into rows with its warnings (:func:`parse_table`). Each column role's step is
:mod:`.roles`'s (this module takes them in order); the first line's own rules (header or
data) are :mod:`.header`'s; the direction is :mod:`.direction`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from lineage.domain import Trial
from lineage.errors import InvalidInput
from lineage.formats.autoresearch.header import (
    data_evidence,
    delimiter_of,
    first_nonblank,
    header_end,
    headerless_hint,
)
from lineage.formats.autoresearch.layout import GENERIC, NAME, ImportOptions, Layout
from lineage.formats.autoresearch.roles import (
    by_name,
    column_index,
    commit_column,
    crash_placeholder,
    description_column,
    field_columns,
    file_status_words,
    inferred_metric,
    long_format,
    long_format_metric,
    number_format,
    sample_table,
    status_column,
)
from lineage.formats.autoresearch.rows import MAX_LINE_CHARS, RowParser, name_lines, split_cells, split_lines
from lineage.formats.autoresearch.vocabulary import (
    HEX,
    PARENT_COLUMN_NAMES,
    UNKNOWN_LABEL,
)
from lineage.formats.text import BOM

#: How many rows the column inference looks at.
SAMPLE_ROWS = 2_000


@dataclass(slots=True)
class ParsedTable:
    layout: Layout
    #: one trial per row, exp_id ``""`` (see :class:`LineageBuilder`)
    rows: list[Trial]
    #: the physical line of each row
    lines: list[int]
    warnings: list[str]
    #: words not in the status table -> rows
    unknown_words: Counter[str]
    #: the line of the first trailing non-row line, if any
    trailer_line: int | None = None
    #: every non-blank line that is not a record (stray output, a summary), 1-based
    text_lines: tuple[int, ...] = ()


def infer_layout(
    header_cells: list[str] | None,
    sample: list[list[str]],
    *,
    options: ImportOptions,
    fmt: str,
    delimiter: str,
    has_header: bool | None = None,
) -> tuple[Layout, list[str]]:
    """Columns, their roles and formats, from the header (or the names of
    ``options.columns``: then ``has_header=False``) and a sample of well-formed rows.

    The metric is the first column that can hold it -- numeric (at least 80% of its
    cells numbers, placeholders or words of a failed run such as ``FAIL``, ``oom``,
    ``diverged``: :data:`CRASH_LIKE` labels, not ``True``/``keep``), or named like a
    metric (``val_bpb``, ``score``) with at least half of its cells numbers -- and not an
    id or time column (:func:`is_id_column`: ``candidate_id``, ``ts``), preferring a name
    that says a direction (a rate such as ``tok_sec`` says higher) over plain names over
    resource names (``memory_gb``).

    A table is a loop's only when a column records a status, a commit or a description
    (found by name, or a status or commit column by its cells); any other table (a data
    dump, a key/value list, a benchmark's per-request log) is refused unless a column
    flag (metric, status, description, id, parent) says otherwise.

    The roles are decided in this order, each column taken once (``used``): commit, id,
    status, parent, a long format's name and value columns, description; then the metric;
    then the trial fields by name, the numeric columns and their formats, the failed
    run's placeholder and the file's status words.
    """
    notes: list[str] = []
    table = sample_table(header_cells, sample)
    columns, rows = table.columns, table.rows
    used: set[int] = set()
    ci = commit_column(table)
    if ci >= 0:
        used.add(ci)
    ii = -1
    if options.id_column:
        ii = column_index(columns, options.id_column, "id")
        used.add(ii)
    si = status_column(table, used, options, notes)
    if si >= 0:
        used.add(si)
    if options.parent:
        pi = column_index(columns, options.parent, "parent")
    else:
        pi = by_name(columns, PARENT_COLUMN_NAMES, used)
    if pi >= 0:
        used.add(pi)
    long = long_format(columns, rows, used, [table.is_numeric(j) for j in range(table.width)], options)
    if long is not None:
        used.update(long[:2])
    di, described = description_column(table, used, options, has_header=header_cells is not None)
    if di >= 0:
        used.add(di)
    flagged = any((options.metric, options.status, options.description, options.id_column, options.parent))
    if si < 0 and ci < 0 and not described and not flagged:
        raise InvalidInput(
            "file",
            "not the results table of a loop: no column records a status, a commit or a description (the columns "
            f"are {', '.join(columns)}); to import it anyway, name its metric with --metric COLUMN",
        )
    if long is not None:
        mi = long_format_metric(table, long, notes)
    elif options.metric:
        mi = column_index(columns, options.metric, "metric")
    else:
        mi = inferred_metric(table, used, header_only=header_cells is not None and not rows, commit=ci)
    if mi == si:
        si = -1
    used.add(mi)

    fields = field_columns(table, used, ii)
    numeric = [
        columns[j]
        for j in range(table.width)
        if table.is_numeric(j) and j != mi and not table.hex_col[j] and j != ci and j != pi
    ]
    formats = {
        columns[j]: number_format(table.values(j)) for j in range(table.width) if j == mi or columns[j] in numeric
    }
    placeholder = crash_placeholder(rows, mi, si, options)
    layout = Layout(
        columns=columns,
        metric=columns[mi],
        format=fmt,
        delimiter=delimiter,
        has_header=header_cells is not None if has_header is None else has_header,
        status=columns[si] if si >= 0 else None,
        description=columns[di] if di >= 0 else None,
        id_column=columns[ii] if ii >= 0 else None,
        parent=columns[pi] if pi >= 0 else None,
        commit=columns[ci] if ci >= 0 else None,
        fields=fields,
        numeric=numeric,
        formats=formats,
        status_map=dict(options.status_map),
        words=file_status_words(rows, si, options),
        placeholder=placeholder,
        long_names=columns[long[0]] if long is not None else None,
        long_metric=long[2] if long is not None else None,
    )
    return layout, notes


def parse_table(
    text: str | list[str],
    *,
    source: str = "<stream>",
    fmt: str = NAME,
    options: ImportOptions = ImportOptions(),
    layout: Layout | None = None,
) -> ParsedTable:
    """Parse a whole results file: its ``text``, or its lines as :func:`split_lines` gives
    them (:func:`read_lines` of a stream). With ``layout`` (a project's), columns are not
    inferred again (watch, export); otherwise they are, from the header and the first rows."""
    lines = split_lines(text) if isinstance(text, str) else text
    if layout is None:
        layout, notes, start = _layout_from_lines(lines, source=source, fmt=fmt, options=options)
    else:
        notes = []
        start = header_end(lines, layout)
    parser = RowParser(layout, source=source, first_line=start + 1)
    parser.feed(_consumed(lines, start))
    trailer, trailer_line = parser.trailer()
    warnings = list(notes) + parser.warnings
    if trailer_line is not None:
        warnings.append(
            f"line {trailer_line}: import stops at text that is not a row (a summary?); kept for export (in {source})"
        )
    if parser.unnumbered:
        warnings.append(
            f"{name_lines(parser.unnumbered)}: the {layout.metric!r} cell is not a number; imported as trials without "
            f"a metric (never the best), the cell kept as written in extra[{layout.extra_key(layout.metric)!r}] "
            f"(in {source})"
        )
    if parser.unknown_words:
        listed = ", ".join(f"{w!r} ({k} row{'s' if k > 1 else ''})" for w, k in parser.unknown_words.most_common())
        warnings.append(
            f"status words not in the table, stored as {UNKNOWN_LABEL.value!r} (never the best): {listed}; "
            "map them with --status-map WORD=LABEL"
        )
    layout.trailer = trailer
    return ParsedTable(
        layout=layout,
        rows=parser.rows,
        lines=parser.lines,
        warnings=warnings,
        unknown_words=parser.unknown_words,
        trailer_line=trailer_line,
        text_lines=(*parser.text_lines, *parser.stray),
    )


def _consumed(lines: list[str], start: int) -> Iterator[str]:
    """``lines`` from ``start`` on, each let go of once read: the rows built from a file
    replace its lines in memory instead of joining them (the list ends empty)."""
    for at in range(start, len(lines)):
        yield lines[at]
        lines[at] = ""
    lines.clear()


def _commit_length(lines: Sequence[str], layout: Layout) -> int:
    ci = layout.index(layout.commit)
    if ci < 0:
        return 7
    lengths: Counter[int] = Counter()
    for line in lines:
        cells = split_cells(line.rstrip("\n").rstrip("\r"), layout.delimiter)
        if len(cells) == len(layout.columns) and HEX.fullmatch(cells[ci].strip()):
            lengths[len(cells[ci].strip())] += 1
    return lengths.most_common(1)[0][0] if lengths else 7


def _layout_from_lines(
    lines: Sequence[str], *, source: str, fmt: str, options: ImportOptions
) -> tuple[Layout, list[str], int]:
    first = first_nonblank(lines)
    if first is None:
        raise InvalidInput("file", f"the file is empty: not a results table (in {source})", line=1)
    at, body = first
    body_no_bom = body.lstrip(BOM)
    if len(body_no_bom) > MAX_LINE_CHARS:
        raise InvalidInput(
            "file", f"line is {len(body_no_bom):,} characters long: not a results table (in {source})", line=at + 1
        )
    if "\x00" in body_no_bom:
        raise InvalidInput("file", f"NUL bytes: not a text results table (in {source})", line=at + 1)
    delimiter = delimiter_of(body_no_bom, allow_csv=fmt == GENERIC)
    if delimiter is None:
        expected = "tab- or comma-separated" if fmt == GENERIC else "tab-separated"
        raise InvalidInput(
            "file",
            f"not a results table: line {at + 1} has no {'tab or comma' if fmt == GENERIC else 'tab'} "
            f"(expected a {expected} header such as commit<TAB>val_bpb<TAB>memory_gb<TAB>status<TAB>description; "
            f"in {source})",
            line=at + 1,
        )
    cells = split_cells(body_no_bom, delimiter)
    while len(cells) > 1 and not cells[-1].strip():
        cells.pop()  # trailing delimiters after the header
    names = list(options.columns) if options.columns else None
    if names is not None and [c.strip().lower() for c in cells] == [name.lower() for name in names]:
        names = None  # the first line is these very names: the header
        evidence: list[str] = []
        headerless = False
    else:
        evidence = data_evidence(cells)
        headerless = names is not None or bool(evidence)
    notes: list[str] = []
    if headerless:
        start = 0
        header_cells = names
    else:
        start = at + 1
        header_cells = cells
        if len(cells) < 2:
            raise InvalidInput("file", f"not a results table: the header has one column (in {source})", line=at + 1)
        too_long = [c for c in cells if len(c) > 200]
        if too_long:
            raise InvalidInput(
                "file",
                f"not a results table: line {at + 1} is not a header (a cell of {len(too_long[0])} "
                f"characters; in {source})",
                line=at + 1,
            )
    sample: list[list[str]] = []
    data_lines = 0
    for line in lines[start : start + SAMPLE_ROWS * 2]:
        body_i = line.rstrip("\n").rstrip("\r")
        if not body_i.strip():
            continue
        data_lines += 1
        row = split_cells(body_i.lstrip(BOM) if not sample and headerless else body_i, delimiter)
        width = len(header_cells) if header_cells is not None else len(cells)
        if len(row) > width and not any(row[width:]):
            row = row[:width]
        if sample and len(row) < width and len(sample[-1]) < width and len(sample[-1]) + len(row) - 1 == width:
            before = sample.pop()  # one record broken over two lines (see RowParser._split_record)
            row = before[:-1] + [before[-1] + "\n" + row[0]] + row[1:]
        sample.append(row)
        if len(sample) >= SAMPLE_ROWS:
            break
    if header_cells is None:
        width = len(cells)
        sample = [r for r in sample if len(r) == width]
    else:
        width = len(header_cells)
    well_formed = [r for r in sample if len(r) == width]
    if data_lines and not well_formed and names is not None:
        raise InvalidInput(
            "columns",
            f"{len(names)} names, but no line of the file has {len(names)} cells (line {at + 1} has "
            f"{len(cells)}; in {source})",
            line=at + 1,
        )
    if data_lines and not well_formed:
        raise InvalidInput(
            "file",
            f"not a results table: no line after the header has its {width} cells (line {at + 2}...; in {source})",
            line=at + 2 if header_cells is not None else at + 1,
        )
    try:
        layout, inferred = infer_layout(
            header_cells, well_formed, options=options, fmt=fmt, delimiter=delimiter, has_header=not headerless
        )
    except InvalidInput as exc:
        if not headerless or names is not None:
            if exc.line is None:  # about the columns: the header's line (the first data line of a headerless file)
                raise InvalidInput(exc.field, f"{exc.reason} (in {source})", line=at + 1) from None
            raise
        hint = headerless_hint(at + 1, len(cells), evidence)
        raise InvalidInput(exc.field, f"{exc.reason}; {hint}", line=at + 1) from None
    if headerless and names is None:
        roles = [f"metric {layout.metric!r}", f"status {layout.status!r}" if layout.status else "no status column"]
        if layout.description:
            roles.append(f"description {layout.description!r}")
        notes.append(
            f"line {at + 1}: no header line -- the line is data ({'; '.join(evidence)}); columns named "
            f"{', '.join(layout.columns)} ({', '.join(roles)}); name them with --columns NAME,NAME,... "
            f"(in {source})"
        )
    notes.extend(inferred)
    layout.commit_length = _commit_length(lines[start : start + SAMPLE_ROWS], layout)
    if header_cells is not None:
        layout.header_text = "".join(lines[:start])
    layout.newline = _dominant_newline(lines)
    return layout, notes, start


def _dominant_newline(lines: Sequence[str]) -> str:
    crlf = sum(1 for line in lines[:SAMPLE_ROWS] if line.endswith("\r\n"))
    lf = sum(1 for line in lines[:SAMPLE_ROWS] if line.endswith("\n"))
    return "\r\n" if crlf * 2 > lf else "\n"
