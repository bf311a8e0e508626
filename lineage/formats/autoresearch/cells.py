"""What a cell of a results table is worth: :func:`parse_number` (a number, a placeholder
such as ``n/a`` or ``—``, or neither), :func:`metric_value` (``-999`` and a crash's ``0`` are
no result: ``lineage.domain.is_no_result``) and :func:`typed_cell` (a numeric extra column's cell).

Pure values and functions; :mod:`lineage.formats.autoresearch.vocabulary` re-exports them.
"""

from __future__ import annotations

from typing import Any

from lineage.domain import NO_RESULT_NUMBERS, FailureLabel, is_no_result

#: Cells that mean "no result" in a number column (compared lower case, stripped).
PLACEHOLDERS = frozenset(
    {
        "",
        "-",
        "--",
        "—",
        "–",
        "n/a",
        "na",
        "nan",
        "-nan",
        "none",
        "null",
        "?",
        "inf",
        "-inf",
        "+inf",
        "infinity",
        "-infinity",
        "x",
        "missing",
    }
)
#: Numbers that mean "no result" on any row.
PLACEHOLDER_NUMBERS = NO_RESULT_NUMBERS


def parse_number(cell: str) -> float | None | bool:
    """A cell as a number: a float, None for a placeholder, False when it is neither."""
    try:
        value = float(cell)
    except ValueError:
        text = cell.strip()
        if text.endswith("%"):
            try:
                value = float(text[:-1])
            except ValueError:
                return False
        elif text.lower() in PLACEHOLDERS:
            return None
        else:
            return False
    if value - value != 0.0:  # NaN or infinite
        return None
    return value


def is_number(cell: str) -> bool:
    """Whether ``cell`` is a number (``0`` included), not a placeholder or a word."""
    value = parse_number(cell)
    return value is not False and value is not None


def metric_value(cell: str, label: FailureLabel | None) -> float | None | bool:
    """The metric of a cell on a row of ``label``: None for "no result", False if not a number."""
    value = parse_number(cell)
    if value is None or value is False:
        return value
    if is_no_result(value, label):
        return None
    return value


def typed_cell(cell: str) -> Any:
    """A cell of a numeric extra column: int, float, None (empty) or the text as written
    (a placeholder, a ``%`` number, anything else)."""
    if not cell:
        return None
    if cell[-1] != "%":
        try:
            value = float(cell)
        except ValueError:
            return cell
        if value - value == 0.0:
            return int(cell) if cell.lstrip("+-").isdigit() else value
    return cell
