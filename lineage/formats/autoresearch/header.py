"""The first line of a results file: its delimiter, whether it is a header or already
data (:func:`data_evidence`: numbers where a header has names, a commit hash, a loop's
verdict word) and the fix to name when it is data (:func:`headerless_hint`); where the
header text ends and the rows begin (:func:`first_nonblank`, :func:`header_end`).
"""

from __future__ import annotations

from collections.abc import Sequence

from lineage.formats.autoresearch.layout import Layout
from lineage.formats.autoresearch.vocabulary import (
    COMMIT_COLUMN_NAMES,
    DESCRIPTION_COLUMN_NAMES,
    HEX,
    ID_COLUMN_NAMES,
    STATUS_COLUMN_NAMES,
    VERDICT_WORDS,
    direction_of_name,
    is_number,
    normalize_word,
)

_COLUMN_NAMES = frozenset({*COMMIT_COLUMN_NAMES, *DESCRIPTION_COLUMN_NAMES, *ID_COLUMN_NAMES, *STATUS_COLUMN_NAMES})


def delimiter_of(line: str, *, allow_csv: bool) -> str | None:
    if "\t" in line:
        return "\t"
    if "\\t" in line:
        return "\\t"
    if allow_csv and "," in line:
        return ","
    return None


def looks_like_data(cells: Sequence[str]) -> bool:
    """A first line that is a row, not a header: a number cell, or a commit hash first."""
    if any(cell.strip() and is_number(cell) for cell in cells):
        return True
    return bool(cells) and bool(HEX.fullmatch(cells[0].strip())) and any(ch.isdigit() for ch in cells[0])


def data_evidence(cells: Sequence[str]) -> list[str]:
    """Why a first line is data, not a header (empty: it reads as a header): numbers where
    a header has names, a commit hash, a loop's verdict word (``keep``, ``discard``...)."""
    evidence: list[str] = []
    numbers = [i + 1 for i, cell in enumerate(cells) if cell.strip() and is_number(cell)]
    if numbers:
        evidence.append(f"numbers in column{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}")
    hashes = [
        i + 1
        for i, cell in enumerate(cells)
        if HEX.fullmatch(cell.strip())
        and any(ch.isdigit() for ch in cell)
        and (i == 0 or any(ch.isalpha() for ch in cell))
        and (i + 1) not in numbers
    ]
    if hashes:
        evidence.append(f"a commit hash in column {hashes[0]}")
    words = [(i + 1, cell.strip()) for i, cell in enumerate(cells) if normalize_word(cell) in VERDICT_WORDS]
    if words and not any(_names_a_column(cell) for cell in cells):  # ("commit, score, keep": a header)
        evidence.append(f"the status word {words[0][1]!r} in column {words[0][0]}")
    return evidence


def first_nonblank(lines: Sequence[str], start: int = 0) -> tuple[int, str] | None:
    for i in range(start, len(lines)):
        body = lines[i].rstrip("\n").rstrip("\r")
        if body.strip():
            return i, body
    return None


def header_end(lines: Sequence[str], layout: Layout) -> int:
    """Index of the first line after the header text (0 for a headerless file)."""
    if not layout.has_header:
        return 0
    consumed = 0
    for i, line in enumerate(lines):
        consumed += len(line)
        if consumed >= len(layout.header_text):
            return i + 1
    return len(lines)


def headerless_hint(line: int, columns: int, evidence: Sequence[str] = ()) -> str:
    """The fix for a file whose first line is data: name its columns."""
    why = f" ({'; '.join(evidence)})" if evidence else ""
    return (
        f"line {line} is data, not a header{why}: the file has no header line; name its {columns} columns "
        "with --columns NAME,NAME,... (the columns option), e.g. --columns commit,val_bpb,...,status,description"
    )


def _names_a_column(cell: str) -> bool:
    """A cell that reads as a column name we know (``commit``, ``status``, ``val_bpb``)."""
    name = cell.strip().lower().replace(" ", "_").replace("-", "_")
    return name in _COLUMN_NAMES or direction_of_name(name) is not None
