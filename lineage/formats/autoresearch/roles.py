"""The roles of a results table's columns, one step each, in the order
:func:`~lineage.formats.autoresearch.infer.infer_layout` takes them: the sample the
inference looks at (:func:`sample_table`), then the commit, status, parent, long-format,
description and metric columns, the trial fields, the number formats, a failed run's
placeholder and the file's own status words. Each step decides one role; the order and the
layout they make up are :mod:`.infer`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lineage.domain import FailureLabel
from lineage.errors import InvalidInput
from lineage.formats.autoresearch.layout import ImportOptions
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
    STATUS_COLUMN_NAMES,
    STATUS_WORDS,
    TEXT_FIELD_COLUMNS,
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


def by_name(columns: Sequence[str], wanted: Iterable[str], exclude: Collection[int] = frozenset()) -> int:
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


def column_index(columns: Sequence[str], name: str, flag: str) -> int:
    found = _find_column(columns, name)
    if found < 0:
        raise InvalidInput(flag, f"no column {name!r}; the columns are {', '.join(columns)}")
    return found


def long_format(
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
    ln = by_name(columns, LONG_NAME_COLUMNS, used)
    if ln < 0 or numeric[ln] or not rows:
        return None
    lv = by_name(columns, LONG_VALUE_COLUMNS, used | {ln})
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
class ColumnSample:
    """The table the layout is inferred from: its column names (as given and normalized
    like :func:`by_name`'s), its well-formed sample rows, and per column what its
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


def sample_table(header_cells: list[str] | None, sample: list[list[str]]) -> ColumnSample:
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
    return ColumnSample(columns, lowered, rows, numeric_share, metric_share, real_share, hex_col)


def commit_column(table: ColumnSample) -> int:
    """Decides the commit column: by name, else the first whose cells are all hex digests; -1: none."""
    ci = by_name(table.columns, COMMIT_COLUMN_NAMES)
    if ci < 0:
        ci = next((i for i in range(table.width) if table.hex_col[i]), -1)
    return ci


def status_column(table: ColumnSample, used: set[int], options: ImportOptions, notes: list[str]) -> int:
    """Decides the status column: the ``status`` option (``-``: none), else a text column
    named like a status (exactly, then holding ``status``/``verdict``/... in its name), else
    one whose cells are at least 80% status words (said in ``notes``); -1: none."""
    if options.status == "-":
        return -1
    if options.status:
        return column_index(table.columns, options.status, "status")
    for name in STATUS_COLUMN_NAMES:
        j = by_name(table.columns, (name,), used)
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


def description_column(
    table: ColumnSample, used: set[int], options: ImportOptions, *, has_header: bool
) -> tuple[int, bool]:
    """Decides the description column and whether it was found by its name: the
    ``description`` option, else a text column named like one, else the text column with
    the longest cells (none when a file with a header has them all empty); -1: none."""
    if options.description:
        return column_index(table.columns, options.description, "description"), False
    di = by_name(table.columns, DESCRIPTION_COLUMN_NAMES, used)
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


def long_format_metric(table: ColumnSample, long: tuple[int, int, str], notes: list[str]) -> int:
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


def inferred_metric(table: ColumnSample, used: set[int], *, header_only: bool, commit: int = -1) -> int:
    """Decides the metric column when nothing names it: the first column not taken that
    can hold it (numeric, mostly numbers and failed-run words, or named like a metric),
    and not an id or time column, preferring autoresearch's convention (the column right
    after a leading ``commit`` column: ``commit, val_bpb, ...``, ``commit, acs, ...``), then
    a name that says a direction over plain names over resource names. A header-only
    file: the first column named like a metric,
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
    if commit == 0 and 1 in plain and not header_only and _varies(table.values(1)) and not _counter(table.values(1)):
        return 1  # the convention's place: a plain name there beats a later "score"
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


def _varies(cells: Sequence[str]) -> bool:
    """Whether the cells hold two or more numbers: a constant column (every run passed
    the same checks) is not what the loop optimises, whatever its place."""
    return len({v for v in (parse_number(c) for c in cells) if v is not None and v is not False}) > 1


def _counter(cells: Sequence[str]) -> bool:
    """Whether the cells count rows (whole numbers, rising): a cycle or step column."""
    numbers = [v for v in (parse_number(c) for c in cells) if v is not None and v is not False]
    return bool(numbers) and all(float(v).is_integer() for v in numbers) and numbers == sorted(set(numbers))


def field_columns(table: ColumnSample, used: set[int], id_column: int) -> dict[str, str]:
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


def crash_placeholder(rows: Sequence[Sequence[str]], mi: int, si: int, options: ImportOptions) -> str:
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


def file_status_words(rows: Sequence[Sequence[str]], si: int, options: ImportOptions) -> dict[str, str]:
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


def number_format(cells: Iterable[str]) -> list[Any]:
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
