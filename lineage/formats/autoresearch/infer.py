"""What a whole results file is: the layout inferred from its header (or the names of
the columns option) and first rows (:func:`infer_layout`: which column is the metric,
the status, the description..., a long-format file's metric name), and the file parsed
into rows with its warnings (:func:`parse_table`). The first line's own rules (header
or data) are :mod:`.header`'s; the direction is :mod:`.direction`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lineage.domain import FailureLabel, Trial
from lineage.errors import InvalidInput
from lineage.formats.autoresearch.header import (
    data_evidence,
    delimiter_of,
    first_nonblank,
    header_end,
    headerless_hint,
)
from lineage.formats.autoresearch.layout import GENERIC, NAME, ImportOptions, Layout
from lineage.formats.autoresearch.rows import MAX_LINE_CHARS, RowParser, name_lines, split_cells, split_lines
from lineage.formats.autoresearch.vocabulary import (
    COMMIT_COLUMN_NAMES,
    CRASH_LIKE,
    DESCRIPTION_COLUMN_NAMES,
    HEX,
    LONG_NAME_COLUMNS,
    LONG_NAME_SURE,
    LONG_VALUE_COLUMNS,
    NOT_MEASURED_WORDS,
    NUMBER_FIELD_COLUMNS,
    PARENT_COLUMN_NAMES,
    STATUS_COLUMN_NAMES,
    STATUS_WORDS,
    TEXT_FIELD_COLUMNS,
    UNKNOWN_LABEL,
    direction_of_name,
    is_id_column,
    is_number,
    is_resource,
    map_status,
    metric_value,
    name_tokens,
    normalize_word,
    parse_number,
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


def _header_names(cells: Sequence[str]) -> list[str]:
    names: list[str] = []
    seen: set[str] = set()
    for i, cell in enumerate(cells):
        name = cell.strip() or f"col{i + 1}"
        base, k = name, 2
        while name in seen:
            name = f"{base}_{k}"
            k += 1
        seen.add(name)
        names.append(name)
    return names


def _by_name(columns: Sequence[str], wanted: Iterable[str], exclude: Collection[int] = frozenset()) -> int:
    lowered = [c.strip().lower().replace(" ", "_").replace("-", "_") for c in columns]
    for name in wanted:
        for i, col in enumerate(lowered):
            if col == name and i not in exclude:
                return i
    return -1


def _find_column(columns: Sequence[str], name: str) -> int:
    if name in columns:
        return list(columns).index(name)
    lowered = [c.lower() for c in columns]
    if name.lower() in lowered:
        return lowered.index(name.lower())
    if name.isdigit() and 1 <= int(name) <= len(columns):
        return int(name) - 1
    return -1


def _column_index(columns: Sequence[str], name: str, flag: str) -> int:
    found = _find_column(columns, name)
    if found < 0:
        raise InvalidInput(flag, f"no column {name!r}; the columns are {', '.join(columns)}")
    return found


def _long_format(
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    used: set[int],
    numeric: Sequence[bool],
    options: ImportOptions,
) -> tuple[int, int, str] | None:
    """``(name column, value column, the project's metric name)`` of a long-format file
    (one metric name and its value per row), else None. The name column is named like
    ``metric``/``name``/``key`` and holds text (a name repeated over rows, unless it is
    called ``metric``/``metric_name``); the value column is named like ``value`` and holds
    numbers. The project's metric is ``options.metric`` when it is one of the names, else
    the name with the most numeric values (then one that is not a resource such as
    ``cost_usd`` or ``seconds``, then the first seen)."""
    ln = _by_name(columns, LONG_NAME_COLUMNS, used)
    if ln < 0 or numeric[ln] or not rows:
        return None
    lv = _by_name(columns, LONG_VALUE_COLUMNS, used | {ln})
    if lv < 0:  # a value column named in more words: ``actual_value``, not ``predicted_value``
        lv = next(
            (
                j
                for j, col in enumerate(columns)
                if j not in used
                and j != ln
                and "value" in name_tokens(col)[1:]
                and not set(name_tokens(col)) & NOT_MEASURED_WORDS
            ),
            -1,
        )
    if lv < 0 or not any(is_number(r[lv]) for r in rows):
        return None
    names = [r[ln].strip() for r in rows]
    sure = columns[ln].strip().lower().replace(" ", "_").replace("-", "_") in LONG_NAME_SURE
    if not sure and len(set(names)) == len(names):
        return None  # each name once: the names of experiments, not of metrics
    if options.metric and _find_column(columns, options.metric) < 0:
        wanted = [name for name in dict.fromkeys(names) if name == options.metric.strip()] or [
            name for name in dict.fromkeys(names) if name.lower() == options.metric.strip().lower()
        ]
        if not wanted:
            raise InvalidInput(
                "metric",
                f"no column and no {columns[ln]!r} name {options.metric!r}; the columns are "
                f"{', '.join(columns)}, the names {', '.join(list(dict.fromkeys(names))[:20])}",
            )
        return ln, lv, wanted[0]
    if options.metric and _find_column(columns, options.metric) != lv:
        return None  # another column named as the metric: a wide table
    counts = Counter(name for r, name in zip(rows, names) if is_number(r[lv]))
    first = {name: i for i, name in reversed(list(enumerate(names)))}
    chosen = max(counts, key=lambda name: (counts[name], not is_resource(name), -first[name]))
    return ln, lv, chosen


@dataclass(slots=True)
class _Sample:
    """The table the layout is inferred from: its column names (as given and normalized
    like :func:`_by_name`'s), its well-formed sample rows, and per column what its
    non-blank cells are."""

    columns: list[str]
    lowered: list[str]
    rows: list[list[str]]
    #: share of numbers and placeholders (0 when no cell is a real number)
    numeric_share: list[float]
    #: numbers, placeholders and words of a failed run ("FAIL", "oom")
    metric_share: list[float]
    #: share of real numbers
    real_share: list[float]
    #: every cell a hex digest (with a letter somewhere: not a column of decimal numbers)
    hex_col: list[bool]

    @property
    def width(self) -> int:
        return len(self.columns)

    def values(self, i: int) -> list[str]:
        return [r[i] for r in self.rows]

    def is_numeric(self, i: int) -> bool:
        return self.numeric_share[i] >= 0.8

    def metric_like(self, i: int) -> bool:
        """Named like a metric, and mostly numbers (its other cells: records without a result)."""
        return direction_of_name(self.columns[i]) is not None and self.real_share[i] >= 0.5


def _sample(header_cells: list[str] | None, sample: list[list[str]]) -> _Sample:
    """Decides the columns (the header's names, made unique, or ``col1``... as wide as the
    widest row), keeps the rows of that width and measures each column's cells."""
    n = len(header_cells) if header_cells is not None else max((len(r) for r in sample), default=0)
    columns = _header_names(header_cells) if header_cells is not None else [f"col{i + 1}" for i in range(n)]
    rows = [r for r in sample if len(r) == n]
    numeric_share: list[float] = []
    metric_share: list[float] = []
    real_share: list[float] = []
    hex_col: list[bool] = []
    for i in range(n):
        cells = [r[i] for r in rows if r[i].strip()]
        parsed = [parse_number(c) for c in cells]
        nums = sum(1 for v in parsed if v is not False)
        real = sum(1 for v in parsed if v is not False and v is not None)
        numeric_share.append(nums / len(cells) if cells and real else 0.0)
        words = sum(
            1 for c, v in zip(cells, parsed) if v is False and STATUS_WORDS.get(normalize_word(c)) in CRASH_LIKE
        )
        metric_share.append((nums + words) / len(cells) if cells and real else 0.0)
        real_share.append(real / len(cells) if cells else 0.0)
        hex_col.append(
            bool(cells)
            and all(HEX.fullmatch(c.strip()) for c in cells)
            and any(any(ch.isalpha() for ch in c) for c in cells)
        )
    lowered = [c.strip().lower().replace(" ", "_").replace("-", "_") for c in columns]
    return _Sample(columns, lowered, rows, numeric_share, metric_share, real_share, hex_col)


def _commit_column(table: _Sample) -> int:
    """Decides the commit column: by name, else the first whose cells are all hex digests; -1: none."""
    ci = _by_name(table.columns, COMMIT_COLUMN_NAMES)
    if ci < 0:
        ci = next((i for i in range(table.width) if table.hex_col[i]), -1)
    return ci


def _status_column(table: _Sample, used: set[int], options: ImportOptions, notes: list[str]) -> int:
    """Decides the status column: the ``status`` option (``-``: none), else a text column
    named like a status (exactly, then holding ``status``/``verdict``/... in its name), else
    one whose cells are at least 80% status words (said in ``notes``); -1: none."""
    if options.status == "-":
        return -1
    if options.status:
        return _column_index(table.columns, options.status, "status")
    for name in STATUS_COLUMN_NAMES:
        j = _by_name(table.columns, (name,), used)
        if j >= 0 and not table.is_numeric(j):
            return j
    for name in ("status", "verdict", "decision", "outcome"):
        j = next(
            (k for k, col in enumerate(table.lowered) if name in col and k not in used and not table.is_numeric(k)),
            -1,
        )
        if j >= 0:
            return j
    for j in range(table.width):
        cells = [c for c in table.values(j) if c.strip()]
        if j in used or table.is_numeric(j) or not cells:
            continue
        known = sum(1 for c in cells if normalize_word(c) in STATUS_WORDS)
        if known / len(cells) >= 0.8:
            notes.append(f"status column {table.columns[j]!r} found by its words")
            return j
    return -1


def _description_column(
    table: _Sample, used: set[int], options: ImportOptions, *, has_header: bool
) -> tuple[int, bool]:
    """Decides the description column and whether it was found by its name: the
    ``description`` option, else a text column named like one, else the text column with
    the longest cells (none when a file with a header has them all empty); -1: none."""
    if options.description:
        return _column_index(table.columns, options.description, "description"), False
    di = _by_name(table.columns, DESCRIPTION_COLUMN_NAMES, used)
    if di >= 0 and table.is_numeric(di):
        di = -1
    if di >= 0:
        return di, True
    texts = [
        j
        for j in range(table.width)
        if j not in used and not table.is_numeric(j) and not table.hex_col[j] and not table.metric_like(j)
    ]
    if texts:
        di = max(texts, key=lambda j: (sum(len(c) for c in table.values(j)) / max(1, len(table.rows)), j))
        if has_header and sum(len(c) for c in table.values(di)) == 0:
            di = -1
    return di, False


def _long_format_metric(table: _Sample, long: tuple[int, int, str], notes: list[str]) -> int:
    """Decides a long-format file's metric column (its value column), saying in ``notes``
    which rows are the project's metric and which are trials without one."""
    columns, rows = table.columns, table.rows
    mi = long[1]
    others = [name for name in dict.fromkeys(r[long[0]].strip() for r in rows) if name != long[2]]
    notes.append(
        f"long format: column {columns[long[0]]!r} names each row's metric and {columns[mi]!r} holds its value; "
        f"the project's metric is {long[2]!r}"
        + (
            f"; the rows of {', '.join(map(repr, others[:5]))}{' ...' if len(others) > 5 else ''} are trials "
            f"without a metric, their value kept in extra[{columns[mi]!r}]"
            if others
            else ""
        )
        + "; choose another with --metric NAME"
    )
    return mi


def _inferred_metric(table: _Sample, used: set[int], *, header_only: bool) -> int:
    """Decides the metric column when nothing names it: the first column not taken that
    can hold it (numeric, mostly numbers and failed-run words, or named like a metric),
    and not an id or time column, preferring a name that says a direction over plain
    names over resource names. A header-only file: the first column named like a metric,
    else the first that is not a resource. A column named like a metric but too seldom
    a number is refused rather than silently passed over."""
    columns, n = table.columns, table.width
    candidates = [
        j
        for j in range(n)
        if j not in used
        and (table.is_numeric(j) or table.metric_share[j] >= 0.8 or table.metric_like(j))
        and not is_id_column(columns[j])
    ]
    if not candidates and header_only:
        # a header-only file: the first column named like a metric, else the second column
        candidates = [j for j in range(n) if j not in used and not is_id_column(columns[j])]
        named = [j for j in candidates if direction_of_name(columns[j]) is not None]
        candidates = named or [j for j in candidates if not is_resource(columns[j])] or candidates
    if not candidates:
        raise InvalidInput(
            "metric",
            "no numeric column to take as the metric; name it with --metric COLUMN "
            f"(the columns are {', '.join(columns)})",
        )
    named = [j for j in candidates if direction_of_name(columns[j]) is not None]
    plain = [j for j in candidates if not is_resource(columns[j])]
    mi = (named or plain or candidates)[0]
    shadowed = [
        j
        for j in range(n)
        if j not in used
        and j not in candidates
        and table.real_share[j] > 0
        and direction_of_name(columns[j]) is not None
        and not is_id_column(columns[j])
    ]
    if not named and shadowed:  # never a silently different metric
        j = shadowed[0]
        raise InvalidInput(
            "metric",
            f"column {columns[j]!r} is named like a metric but only {table.real_share[j]:.0%} of its cells "
            f"are numbers, so {columns[mi]!r} would be taken instead; name the metric with --metric COLUMN",
        )
    return mi


def _field_columns(table: _Sample, used: set[int], id_column: int) -> dict[str, str]:
    """Decides which of the other columns are trial fields by name (``domain``, ``notes``;
    a number field only when numeric): column -> field."""
    fields: dict[str, str] = {}
    for j, name in enumerate(table.lowered):
        if j in used or j == id_column:
            continue
        if name in TEXT_FIELD_COLUMNS:  # (the description column, even "notes", is in ``used``)
            fields[table.columns[j]] = name
        elif name in NUMBER_FIELD_COLUMNS and table.is_numeric(j):
            fields[table.columns[j]] = name
    return fields


def _crash_placeholder(rows: Sequence[Sequence[str]], mi: int, si: int, options: ImportOptions) -> str:
    """Decides the metric cell written for a failed run (export): the most common one
    without a result on crash-like rows; "" when there is none (or no status column)."""
    crash_cells = Counter(
        r[mi]
        for r in rows
        if si >= 0
        and map_status(r[si], options.status_map)[0] in CRASH_LIKE
        and metric_value(r[mi], FailureLabel.CRASH) is None
    )
    return crash_cells.most_common(1)[0][0] if crash_cells else ""


def _status_words(rows: Sequence[Sequence[str]], si: int, options: ImportOptions) -> dict[str, str]:
    """Decides the file's own word for each status label (export): the most common known
    word of the label's rows; none without a status column."""
    if si < 0:
        return {}
    by_label: dict[str, Counter[str]] = {}
    for r in rows:
        label, known = map_status(r[si], options.status_map)
        if known:
            by_label.setdefault(label.value, Counter())[r[si]] += 1
    return {label: counts.most_common(1)[0][0] for label, counts in by_label.items()}


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
    table = _sample(header_cells, sample)
    columns, rows = table.columns, table.rows
    used: set[int] = set()
    ci = _commit_column(table)
    if ci >= 0:
        used.add(ci)
    ii = -1
    if options.id_column:
        ii = _column_index(columns, options.id_column, "id")
        used.add(ii)
    si = _status_column(table, used, options, notes)
    if si >= 0:
        used.add(si)
    if options.parent:
        pi = _column_index(columns, options.parent, "parent")
    else:
        pi = _by_name(columns, PARENT_COLUMN_NAMES, used)
    if pi >= 0:
        used.add(pi)
    long = _long_format(columns, rows, used, [table.is_numeric(j) for j in range(table.width)], options)
    if long is not None:
        used.update(long[:2])
    di, described = _description_column(table, used, options, has_header=header_cells is not None)
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
        mi = _long_format_metric(table, long, notes)
    elif options.metric:
        mi = _column_index(columns, options.metric, "metric")
    else:
        mi = _inferred_metric(table, used, header_only=header_cells is not None and not rows)
    if mi == si:
        si = -1
    used.add(mi)

    fields = _field_columns(table, used, ii)
    numeric = [
        columns[j]
        for j in range(table.width)
        if table.is_numeric(j) and j != mi and not table.hex_col[j] and j != ci and j != pi
    ]
    formats = {
        columns[j]: _number_format(table.values(j)) for j in range(table.width) if j == mi or columns[j] in numeric
    }
    placeholder = _crash_placeholder(rows, mi, si, options)
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
        words=_status_words(rows, si, options),
        placeholder=placeholder,
        long_names=columns[long[0]] if long is not None else None,
        long_metric=long[2] if long is not None else None,
    )
    return layout, notes


def _number_format(cells: Iterable[str]) -> list[Any]:
    decimals: Counter[int | None] = Counter()
    suffix = ""
    for cell in cells:
        text = cell.strip()
        if text.endswith("%"):
            suffix = "%"
            text = text[:-1]
        if not is_number(text):
            continue
        if "e" in text.lower():
            decimals[None] += 1
        elif "." in text:
            decimals[len(text) - text.index(".") - 1] += 1
        else:
            decimals[0] += 1
    if not decimals:
        return [6, suffix]
    if len(decimals) == 1:
        return [next(iter(decimals)), suffix]
    if set(decimals) == {0, 1} or None in decimals:
        return [None, suffix]
    return [decimals.most_common(1)[0][0], suffix]


def parse_table(
    text: str,
    *,
    source: str = "<stream>",
    fmt: str = NAME,
    options: ImportOptions = ImportOptions(),
    layout: Layout | None = None,
) -> ParsedTable:
    """Parse a whole results file. With ``layout`` (a project's), columns are not inferred
    again (watch, export); otherwise they are, from the header and the first rows."""
    lines = split_lines(text)
    if layout is None:
        layout, notes, start = _layout_from_lines(lines, source=source, fmt=fmt, options=options)
    else:
        notes = []
        start = header_end(lines, layout)
    parser = RowParser(layout, source=source, first_line=start + 1)
    parser.feed(lines[start:])
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
