"""fieldkit's ``results.tsv``: read and write it byte for byte as fieldkit 0.34.1 does.

The dialect is the one of ``fieldkit.lineage.LineageStore``: the ``csv`` module with
``delimiter="\\t"``, ``lineterminator="\\n"`` and the default ``QUOTE_MINIMAL`` quoting
(a cell is wrapped in double quotes only when it holds a tab, a double quote or ``\\n``;
a double quote inside is doubled). Every cell is ``str(value)``, so a float is
``str(float)`` (``0.1``, ``1e-07``, ``-0.0``, ``14260.0``) and ``None`` is the empty cell.
One deliberate difference: we also quote a cell holding ``\\r``, which fieldkit leaves
bare and then cannot read back (see :func:`write_trials`).

Layouts (the header line decides):

* **canonical** -- the 17 columns of :data:`FIELDKIT_COLUMNS`, in that order. This is
  what fieldkit writes and what :func:`write_trials` writes by default.
* **extended** -- the 17 columns, then :data:`CLIP_SCALE_COLUMNS`, then ``extra`` (a JSON
  object written compact with sorted keys; the empty cell is ``{}``). fieldkit itself
  reads such a file too: ``csv.DictReader`` ignores the columns it does not know.

Streams must be opened the way fieldkit opens them: text mode, UTF-8, ``newline=""``
(so a ``\\r`` or ``\\r\\n`` inside a quoted cell survives). :func:`open_results` does it.

Reading is a generator (:func:`read_trials`): a row is parsed, checked and yielded
before the next is read, so a file of any size runs in constant memory (but for the
set of ``exp_id`` seen, to refuse duplicates). The first bad row raises
:class:`~lineage.errors.InvalidInput` with the physical ``line`` on which that row
starts, the 1-based ``column`` and the ``field`` (column name); trials yielded before it
are the caller's to discard -- the store inserts inside one transaction, so a bad file
imports nothing.

Progress: pass ``progress=callback`` to :func:`read_trials`; it is called as
``callback(rows_read, lines_read)`` every ``progress_every`` rows and once at the end.
:func:`count_lines` gives the total of physical lines for a progress bar. The stream is
not wrapped by the caller (``TextIOWrapper.tell()`` does not work while iterating).

Streaming out: :func:`iter_tsv` is the one batched TSV stream every face sends (the
header, then the rows a batch at a time; joined, exactly :func:`write_trials`'s bytes).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter
from typing import Any, TextIO, cast

from lineage.domain import (
    CLIP_SCALE_COLUMNS,
    DURATION_COLUMNS,
    FIELDKIT_COLUMNS,
    FIELDKIT_LABELS,
    FLOAT_COLUMNS,
    FRACTION_COLUMNS,
    LONG_TEXT_COLUMNS,
    MAX_DURATION_S,
    MAX_LONG_TEXT,
    MAX_SHORT_TEXT,
    SHORT_TEXT_COLUMNS,
    TRIAL_FIELD_NAMES,
    FailureLabel,
    Trial,
)
from lineage.errors import InvalidInput

__all__ = [
    "NAME",
    "DESCRIPTION",
    "EXTENSIONS",
    "HEADER",
    "EXTENDED_HEADER",
    "read_trials",
    "write_trials",
    "iter_tsv",
    "sniff",
    "count_lines",
    "open_results",
]

NAME = "fieldkit"
DESCRIPTION = "fieldkit 0.34.1 results.tsv (17 tab-separated columns; optional clip-scale + extra)"
EXTENSIONS: tuple[str, ...] = (".tsv",)

#: The canonical header, as fieldkit writes it.
HEADER: tuple[str, ...] = FIELDKIT_COLUMNS
#: The ledger's extended header: canonical, clip-scale statistics, ``extra``.
EXTENDED_HEADER: tuple[str, ...] = FIELDKIT_COLUMNS + CLIP_SCALE_COLUMNS + ("extra",)

_DELIMITER = "\t"
_LINETERMINATOR = "\n"
_BOM = "\ufeff"

_N_CANONICAL = len(HEADER)
_STATUS_INDEX = HEADER.index("status")
_EXTRA_INDEX = EXTENDED_HEADER.index("extra")
_PARENT_INDEX = HEADER.index("parent_exp")
_STATUS_BY_VALUE: dict[str, FailureLabel] = {label.value: label for label in FIELDKIT_LABELS}
_TEXT_LIMIT = {
    **{name: MAX_SHORT_TEXT for name in SHORT_TEXT_COLUMNS},
    **{name: MAX_LONG_TEXT for name in LONG_TEXT_COLUMNS},
}
#: (0-based index, name, limit) of every text column of the canonical layout, in order.
_TEXT_SPECS: tuple[tuple[int, str, int], ...] = tuple(
    (i, name, _TEXT_LIMIT[name]) for i, name in enumerate(HEADER) if name in _TEXT_LIMIT
)
#: No field of a row whose longest cell is this short can break a length limit.
_SAFE_CELL_LEN = min(_TEXT_LIMIT.values())
#: (0-based index, name, is_duration, is_fraction) of the float columns, per layout.
_FLOAT_SPECS: dict[bool, tuple[tuple[int, str, bool, bool], ...]] = {
    extended: tuple(
        (i, name, name in DURATION_COLUMNS, name in FRACTION_COLUMNS)
        for i, name in enumerate(EXTENDED_HEADER if extended else HEADER)
        if name in FLOAT_COLUMNS
    )
    for extended in (False, True)
}
_NO_CLIP = (None,) * len(CLIP_SCALE_COLUMNS)

# Rows become Trials positionally (cells..., extra, seq): the dataclass must keep that order.
if TRIAL_FIELD_NAMES[: len(EXTENDED_HEADER) + 1] != (*EXTENDED_HEADER, "seq"):  # pragma: no cover
    raise ImportError("lineage.domain.Trial fields no longer follow the extended fieldkit header")

# Dialect of fieldkit's csv.writer / csv.DictReader (excel, with a tab).
_READ_KW: dict[str, Any] = {"delimiter": _DELIMITER}
_WRITE_KW: dict[str, Any] = {"delimiter": _DELIMITER, "lineterminator": _LINETERMINATOR}

ProgressCallback = Callable[[int, int], None]


# --------------------------------------------------------------------------- sniffing


def sniff(first_line: str) -> bool:
    """True if ``first_line`` is a fieldkit header (canonical or extended layout).

    Trailing ``\\n``/``\\r\\n`` and a leading UTF-8 byte-order mark are ignored.
    """
    cells = tuple(first_line.lstrip(_BOM).rstrip("\r\n").split(_DELIMITER))
    return cells == HEADER or cells == EXTENDED_HEADER


def _check_header(cells: list[str], *, source: str) -> bool:
    """Validate the header row; return True for the extended layout."""
    if cells:
        cells = [cells[0].lstrip(_BOM), *cells[1:]]
    if len(cells) == len(EXTENDED_HEADER) and tuple(cells) == EXTENDED_HEADER:
        return True
    if tuple(cells) == HEADER:
        return False
    # Point at the first cell that differs from the closest layout.
    expected = EXTENDED_HEADER if len(cells) > _N_CANONICAL else HEADER
    for i in range(max(len(cells), len(expected))):
        found = cells[i] if i < len(cells) else None
        wanted = expected[i] if i < len(expected) else None
        if found == wanted:
            continue
        if wanted is None:
            message = f"unexpected column {found!r}; the header ends after {expected[-1]!r}"
        elif found is None:
            message = f"missing column {wanted!r}"
        else:
            message = f"expected column {wanted!r}, found {found!r}"
        raise InvalidInput(
            found or wanted or "header",
            f"{message}; not a fieldkit results.tsv header (in {source})",
            line=1,
            column=i + 1,
        )
    raise AssertionError("unreachable")  # pragma: no cover


# --------------------------------------------------------------------------- reading


class _Lines:
    """The stream's lines as ``csv.reader`` pulls them, keeping those of the current record.

    The kept lines give the physical line numbers (counted by ``\\n`` only, so a bare
    ``\\r`` in a quoted cell, which Python's line iteration splits on, shifts nothing),
    the NUL check, and the column of a cell the csv module refuses.
    """

    __slots__ = ("_next", "record")

    def __init__(self, stream: Iterable[str]) -> None:
        self._next = iter(stream).__next__
        self.record: list[str] = []

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self._next()
        self.record.append(line)
        return line


def read_trials(
    stream: TextIO | Iterable[str],
    *,
    source: str = "<stream>",
    progress: ProgressCallback | None = None,
    progress_every: int = 10_000,
    row_lines: list[int] | None = None,
) -> Iterator[Trial]:
    """Yield the trials of a fieldkit ``results.tsv``, one at a time, in file order.

    ``stream`` is a text stream opened with ``newline=""`` (or any iterable of lines).
    Values are kept as fieldkit reads them: text as-is, numbers through ``float()``,
    ``delta_vs_best`` as written; ``Trial.seq`` is the 0-based row index. Blank lines
    are skipped, as ``csv.DictReader`` does; an empty stream yields nothing, and so
    does a header alone. Nothing is read before the first ``next()``.

    Raises :class:`InvalidInput` (``line``, ``column``, ``field``) on the first problem:
    a header that is neither layout (line 1); in a row, a wrong number of cells, an
    empty, malformed or duplicate ``exp_id``, a text cell over its length limit or
    holding NUL, an unknown status, a number that is not a finite float, a negative
    duration, a fraction outside [0, 1], a trial that is its own parent, an ``extra``
    that is not a JSON object, a cell the csv module cannot parse, or bytes that are not
    UTF-8. ``line`` is the physical line on which the row starts. ``source`` names the
    stream in messages. ``progress(rows, lines)`` is called every ``progress_every``
    rows and once at the end, with the rows yielded and the physical lines consumed.
    ``row_lines``, when given, gets the start line of every row yielded (so a caller that
    finds a problem later, such as an exp_id already stored, can name the line).
    """
    if isinstance(stream, (io.RawIOBase, io.BufferedIOBase)):
        raise TypeError("read_trials needs a text stream: open the file with encoding='utf-8', newline=''")
    if progress_every < 1:
        raise ValueError(f"progress_every must be at least 1, got {progress_every}")
    lines = _Lines(stream)
    record = lines.record
    # each row's cells become the trial's values in place (a status, numbers, extra)
    reader: Iterator[list[Any]] = csv.reader(lines, **_READ_KW)
    newlines = 0  # physical lines ("\n") consumed by the records already parsed
    try:
        header = next(reader, None)
        if header is None:
            return
        if not header:  # csv.reader gives [] for a blank line
            raise InvalidInput("header", f"line 1 is empty, not the fieldkit header (in {source})", line=1, column=1)
        if len(record) > 1:
            raise InvalidInput("header", f"a header cell spans lines (in {source})", line=1, column=1)
        extended = _check_header(header, source=source)
        newlines = int(record[0].endswith("\n"))
        record.clear()

        width = len(EXTENDED_HEADER) if extended else _N_CANONICAL
        float_specs = _FLOAT_SPECS[extended]
        status_by_value = _STATUS_BY_VALUE
        seen: set[str] = set()
        seq = 0
        for row in reader:
            line = newlines + 1
            if len(record) == 1:
                text = record[0]
                has_nul = "\x00" in text
            else:  # a quoted cell spans lines
                newlines += sum(text.endswith("\n") for text in record[:-1])
                text = record[-1]
                has_nul = any("\x00" in text for text in record)
            end = text[-1:]
            if end == "\n":
                newlines += 1
            elif end == "\r":
                _raise_bare_cr(row, width, line, source)
            if len(row) != width:
                if not row:
                    record.clear()
                    continue  # a blank line
                _raise_width(row, width, line, source, record)
            record.clear()

            exp_id = row[0]
            if (
                not exp_id
                or exp_id.strip() != exp_id
                or "/" in exp_id
                or "\t" in exp_id
                or "\n" in exp_id
                or "\r" in exp_id
            ):
                _raise_exp_id(exp_id, line, source)
            if exp_id in seen:
                raise InvalidInput("exp_id", f"duplicate exp_id {exp_id!r} (in {source})", line=line, column=1)
            seen.add(exp_id)
            if row_lines is not None:
                row_lines.append(line)

            # Length and NUL: one cheap test for the whole row, cell by cell only if it fails.
            if has_nul or max(map(len, row)) > _SAFE_CELL_LEN:
                _check_text(row, line, source)

            status = status_by_value.get(row[_STATUS_INDEX])
            if status is None:
                _raise_status(row[_STATUS_INDEX], line, source)
            row[_STATUS_INDEX] = status

            for index, name, is_duration, is_fraction in float_specs:
                raw = row[index]
                if raw == "":
                    row[index] = None
                    continue
                try:
                    value = float(raw)
                except ValueError:
                    value = math.nan
                if (
                    value - value != 0.0  # not a number, NaN or infinite
                    or (is_duration and not 0.0 <= value <= MAX_DURATION_S)
                    or (is_fraction and not 0.0 <= value <= 1.0)
                ):
                    _raise_number(raw, index, name, line, source)
                row[index] = value

            if row[_PARENT_INDEX] == exp_id:
                raise InvalidInput(
                    "parent_exp",
                    f"trial {exp_id!r} cannot be its own parent (in {source})",
                    line=line,
                    column=_PARENT_INDEX + 1,
                )

            if extended:
                row[_EXTRA_INDEX] = _parse_extra(row[_EXTRA_INDEX], line, source)
                yield Trial(*row, seq)  # type: ignore[call-arg]  # row: every field before seq (mypy cannot count it)
            else:
                yield Trial(*row, *_NO_CLIP, {}, seq)  # type: ignore[call-arg]  # row: fieldkit's 17 fields
            seq += 1
            if progress is not None and seq % progress_every == 0:
                progress(seq, newlines)
    except csv.Error as exc:
        column = _failing_column("".join(text for text in record if isinstance(text, str)))
        field = EXTENDED_HEADER[column - 1] if column <= len(EXTENDED_HEADER) else "row"
        raise InvalidInput(field, f"unreadable cell: {exc} (in {source})", line=newlines + 1, column=column) from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            "encoding",
            f"not UTF-8 text ({exc.reason}) at or after this line (in {source})",
            line=newlines + 1 + sum(text.count("\n") for text in record),
        ) from None
    if progress is not None:
        progress(seq, newlines)


def _raise_number(raw: str, index: int, name: str, line: int, source: str) -> None:
    try:
        value = float(raw)
    except ValueError:
        message = f"{raw!r} is not a number"
    else:
        if not math.isfinite(value):
            message = f"must be finite, got {raw!r}"
        elif name in DURATION_COLUMNS:
            message = f"must be from 0 to {MAX_DURATION_S:g} seconds, got {raw!r}"
        else:
            message = f"must lie in [0, 1], got {raw!r}"
    raise InvalidInput(name, f"{message} (in {source})", line=line, column=index + 1)


def _raise_status(raw: str, line: int, source: str) -> None:
    known = ", ".join(_STATUS_BY_VALUE)
    raise InvalidInput(
        "status", f"unknown status {raw!r}; known: {known} (in {source})", line=line, column=_STATUS_INDEX + 1
    )


def _failing_column(text: str) -> int:
    """1-based index of the cell the csv parser was inside when it gave up on ``text``.

    A small copy of the csv module's state machine (excel dialect, tab delimiter):
    a quote opens a quoted cell only at the start of a cell; ``""`` inside it is a quote.
    """
    column = 1
    at_start, quoted, quote_seen = True, False, False
    for ch in text:
        if quoted:
            if quote_seen:
                quote_seen = False
                if ch == '"':
                    continue
                quoted = False  # the quote closed the cell; fall through
            elif ch == '"':
                quote_seen = True
                continue
            else:
                continue
        if ch == _DELIMITER:
            column += 1
            at_start = True
        elif ch in "\r\n":
            at_start = True
        elif ch == '"' and at_start:
            quoted = True
            at_start = False
        else:
            at_start = False
    return column


def _raise_width(row: list[str], width: int, line: int, source: str, record: list[str]) -> None:
    header = EXTENDED_HEADER if width > _N_CANONICAL else HEADER
    hint = ""
    if len(record) > 1 and len(row) < width:
        hint = " (a quoted cell that never closes?)"
    elif len(row) > width:
        hint = " (a tab in an unquoted cell?)"
    if len(row) < width:
        missing = header[len(row)]
        raise InvalidInput(
            missing,
            f"row has {len(row)} cells, the header {width}; {missing!r} is missing{hint} (in {source})",
            line=line,
            column=len(row) + 1,
        )
    raise InvalidInput(
        "row", f"row has {len(row)} cells, the header {width}{hint} (in {source})", line=line, column=width + 1
    )


def _raise_bare_cr(row: list[str], width: int, line: int, source: str) -> None:
    """A record that ends at a bare ``\\r``: the csv module cut a cell there."""
    header = EXTENDED_HEADER if width > _N_CANONICAL else HEADER
    column = max(len(row), 1)
    raise InvalidInput(
        header[column - 1] if column <= len(header) else "row",
        "a carriage return in an unquoted cell cuts the row there (fieldkit writes such cells"
        f" unquoted and cannot read them back), or the file has old Mac line endings (in {source})",
        line=line,
        column=column,
    )


def _raise_exp_id(exp_id: str, line: int, source: str) -> None:
    if not exp_id.strip():
        message = "must not be empty"
    else:
        message = "must not contain whitespace at its ends, tabs, newlines or '/'"
    raise InvalidInput("exp_id", f"{message}, got {exp_id!r} (in {source})", line=line, column=1)


def _check_text(row: list[str], line: int, source: str) -> None:
    for index, name, limit in _TEXT_SPECS:
        cell = row[index]
        if len(cell) > limit:
            raise InvalidInput(
                name, f"is {len(cell)} characters long; the limit is {limit} (in {source})", line=line, column=index + 1
            )
        if "\x00" in cell:
            raise InvalidInput(name, f"must not contain NUL characters (in {source})", line=line, column=index + 1)
    for index in range(len(row)):
        if "\x00" in row[index]:  # a number or extra cell
            name = EXTENDED_HEADER[index]
            raise InvalidInput(name, f"must not contain NUL characters (in {source})", line=line, column=index + 1)


def _parse_extra(raw: str, line: int, source: str) -> dict[str, Any]:
    if raw == "":
        return {}
    try:
        value = json.loads(raw, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise InvalidInput("extra", f"is not JSON: {exc} (in {source})", line=line, column=_EXTRA_INDEX + 1) from None
    if not isinstance(value, dict):
        kind = type(value).__name__
        raise InvalidInput(
            "extra", f"must be a JSON object, got {kind} (in {source})", line=line, column=_EXTRA_INDEX + 1
        )
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# --------------------------------------------------------------------------- writing

_CANONICAL_VALUES = attrgetter(*HEADER)
_CLIP_VALUES = attrgetter(*CLIP_SCALE_COLUMNS)
_TEXT_VALUES = attrgetter(*(name for _, name, _ in _TEXT_SPECS))


def _dump_extra(extra: Any) -> str:
    if not extra:
        return ""
    try:
        return json.dumps(dict(extra), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput("extra", f"cannot be written as JSON: {exc}") from None


def write_trials(trials: Iterable[Trial], stream: TextIO, *, extended: bool = False) -> int:
    """Write the header and one row per trial, as fieldkit's ``LineageStore.append`` would.

    Every cell is what fieldkit's ``Trial.to_row`` makes of the value -- ``str(value)``
    (so ``str(float)`` for numbers), the status's value, ``""`` for ``None`` -- and the
    csv module quotes it (``QUOTE_MINIMAL``, tab, ``\\n``). With ``extended=True`` the
    clip-scale columns and ``extra`` (compact JSON, sorted keys, ``""`` when empty)
    follow. The header is written even for no trials. A ``running`` trial has no row
    (fieldkit writes a trial when it ends). Returns the number of rows.
    ``stream`` should be opened with ``newline=""``.

    One deliberate difference: a cell holding a carriage return is always quoted.
    fieldkit's writer (``lineterminator="\\n"``) leaves a cell such as ``"a\\rb"``
    unquoted, and then neither fieldkit nor the csv module can read the file back (the
    row splits at the ``\\r``). Such files never round-trip, so every file fieldkit can
    read is still reproduced byte for byte.
    """
    writer = csv.writer(stream, **_WRITE_KW)
    writerow = writer.writerow
    write = stream.write
    writerow(EXTENDED_HEADER if extended else HEADER)
    count = 0
    for trial in trials:
        if trial.status is FailureLabel.RUNNING:  # fieldkit appends a trial when it ends
            continue
        row = list(_CANONICAL_VALUES(trial))
        status = row[_STATUS_INDEX]
        row[_STATUS_INDEX] = status.value if isinstance(status, FailureLabel) else status
        if extended:
            row.extend(_CLIP_VALUES(trial))
            row.append(_dump_extra(trial.extra))
        try:
            has_cr = "\r" in "".join(_TEXT_VALUES(trial))
        except TypeError:  # a text field that is not text (None): let str() decide
            has_cr = any("\r" in str(cell) for cell in row)
        if has_cr:
            write(_quoted_row(row))
        else:
            # csv.writer turns None into "" and a float into repr(float) == str(float):
            # exactly fieldkit's to_row() followed by its writerow().
            writerow(row)
        count += 1
    return count


def iter_tsv(trials: Iterable[Trial], *, extended: bool = False, batch: int = 2_000) -> Iterator[str]:
    """The file :func:`write_trials` writes, as text chunks for a streamed response: the
    header first, then the rows ``batch`` at a time (a project of any size in bounded
    memory). ``"".join(iter_tsv(trials))`` is exactly ``write_trials``'s output; with no
    trials the header alone is the one chunk. ``trials`` is consumed lazily, a batch
    ahead of what was yielded."""
    buffer = io.StringIO(newline="")
    write_trials((), buffer, extended=extended)
    header = buffer.getvalue()
    yield header
    pending: list[Trial] = []
    for trial in trials:
        pending.append(trial)
        if len(pending) >= batch:
            yield _batch_text(pending, extended, len(header))
            pending = []
    if pending:
        yield _batch_text(pending, extended, len(header))


def _batch_text(trials: list[Trial], extended: bool, header_length: int) -> str:
    buffer = io.StringIO(newline="")
    write_trials(trials, buffer, extended=extended)
    return buffer.getvalue()[header_length:]


def _quoted_row(row: list[Any]) -> str:
    """A row as the csv module writes it (QUOTE_MINIMAL), quoting ``\\r`` as well."""
    cells = []
    for value in row:
        cell = "" if value is None else repr(value) if isinstance(value, float) else str(value)
        if "\t" in cell or '"' in cell or "\n" in cell or "\r" in cell:
            cell = '"' + cell.replace('"', '""') + '"'
        cells.append(cell)
    return _DELIMITER.join(cells) + _LINETERMINATOR


# --------------------------------------------------------------------------- files


def open_results(path: str | os.PathLike[str], mode: str = "r") -> TextIO:
    """Open a results.tsv the way fieldkit does: UTF-8 text with ``newline=""``."""
    if mode not in ("r", "w", "x", "a"):
        raise ValueError(f"mode must be r, w, x or a, got {mode!r}")
    return cast(TextIO, open(path, mode, encoding="utf-8", newline=""))  # a text mode, checked above


def count_lines(path: str | os.PathLike[str], *, chunk_size: int = 1 << 20) -> int:
    """Physical lines of a file (``\\n`` count, plus a last unterminated line), for a progress bar.

    Reads the bytes once without decoding (about 1 GB/s); compare with the ``lines``
    argument of the ``progress`` callback of :func:`read_trials`.
    """
    count = 0
    last = b"\n"
    with open(path, "rb") as fh:
        while chunk := fh.read(chunk_size):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")
