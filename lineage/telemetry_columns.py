"""The columnar form of a telemetry batch: the same points as ``lineage.telemetry``'s point
list, one array per field, checked a column at a time.

Form (the ``columns`` member of a batch)::

    {"step":  [0, 0, 1, ...],            # one entry per point
     "names": ["train_loss", "lr"],      # optional: the batch's distinct names ...
     "name":  [0, 1, 0, ...],            # ... and an index into it per point (else the names themselves)
     "value": [2.31, 0.0003, 2.29, ...],
     "turn":  [null, null, ...],         # optional; absent: no point is per turn
     "wall_time": [1.7e9, null, ...]}    # optional; absent: none

``columns`` may also be an array of such blocks, concatenated in order (each with its own
``names``): a sender joins what it buffered without decoding it. Every array has one entry
per point (``step``'s length); the rules of a point are the
point list's (:func:`lineage.telemetry.check_points`), and a bad entry is named as the
point it belongs to (``points[i].field``); a bad ``names`` entry as ``columns.names[j]``,
a missing, unknown or short column as ``columns.<column>``. The rows come out exactly as
:func:`~lineage.telemetry.check_points` makes them from the same points, so a batch key
replayed in the other form is the same batch.

The checks run a column at a time with C-level builtins (``set(map(type, ...))``, ``min``,
``max``, ``sum``); a Python loop runs only to find the first bad entry of a column that
failed, so a valid batch of a million points costs no per-point Python bytecode here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lineage.errors import InvalidInput

__all__ = ["COLUMNS", "PointColumns", "check_columns"]


@dataclass(frozen=True, slots=True)
class PointColumns:
    """Checked points a field at a time (what :func:`lineage.telemetry.check_columns`
    gives): ``turn`` -1 for a quantity that is not per turn, ``wall_time`` None where the
    sender gave none. Here, not in ``lineage.telemetry``, so the store can name it without
    importing the module that uses the store."""

    step: Sequence[int]
    turn: Sequence[int]
    name: Sequence[str]
    value: Sequence[float]
    wall_time: Sequence[float | None]

    def __len__(self) -> int:
        return len(self.step)

    def rows(self) -> list[tuple[int, int, str, float, float | None]]:
        """The same points as :func:`lineage.telemetry.check_points`'s rows."""
        return list(zip(self.step, self.turn, self.name, self.value, self.wall_time))


#: the members of ``columns``: required, then optional
REQUIRED = ("step", "name", "value")
COLUMNS = (*REQUIRED, "names", "turn", "wall_time")

_NONE = type(None)


def _first(column: list[Any], bad: Callable[[Any], bool]) -> int:
    """The index of the first entry ``bad`` holds for (-1: none)."""
    return next((i for i, v in enumerate(column) if bad(v)), -1)


def _bad(index: int, name: str, message: str) -> InvalidInput:
    return InvalidInput(f"points[{index}].{name}", message)


def check_columns(columns: Any, limits: Mapping[str, Any]) -> tuple[list[int], Any, list[str], list[float], Any]:
    """``(step, turn, name, value, wall_time)`` columns (turn -1 for none) from the columnar
    form, one block or an array of blocks (concatenated in order, each with its own
    ``names``); the first bad entry raises :class:`InvalidInput` (module doc; in a block
    array a point's index counts from the first block's first point, and a block is
    ``columns[b]``). ``limits``: ``lineage.telemetry``'s constants (``MAX_STEP``,
    ``MAX_TURN``, ``MAX_NAME``, ``MAX_ABS_VALUE``, ``MAX_BATCH_POINTS``, ``NAME``: the
    compiled name pattern)."""
    if not isinstance(columns, list):
        return _check_block(columns, limits)
    out: tuple[list[Any], ...] = ([], [], [], [], [])
    for b, block in enumerate(columns):
        offset = len(out[0])
        try:
            found = _check_block(block, limits)
        except InvalidInput as exc:
            raise _moved(exc, b, offset) from None
        for whole, part in zip(out, found):
            whole += part
        if len(out[0]) > limits["MAX_BATCH_POINTS"]:
            raise InvalidInput("columns", f"holds more than {limits['MAX_BATCH_POINTS']} points, the limit per batch")
    return out  # type: ignore[return-value]


def _moved(exc: InvalidInput, block: int, offset: int) -> InvalidInput:
    """A block's error as the batch's: points counted from the first block, the block named."""
    field = exc.field
    message = str(exc)[len(field) + 2 :]
    if field.startswith("points["):
        end = field.index("]")
        return InvalidInput(f"points[{int(field[7:end]) + offset}]{field[end + 1 :]}", message)
    return InvalidInput(f"columns[{block}]{field[len('columns') :]}", message)


def _check_block(columns: Any, limits: Mapping[str, Any]) -> tuple[list[int], Any, list[str], list[float], Any]:
    if not isinstance(columns, Mapping):
        raise InvalidInput(
            "columns", "must be an object of arrays (step, name, value; names, turn, wall_time optional)"
        )
    for key in columns:
        if key not in COLUMNS:
            raise InvalidInput(f"columns.{key}", f"is not a column; the columns are {', '.join(COLUMNS)}")
    for key in REQUIRED:
        if not isinstance(columns.get(key), list):
            raise InvalidInput(f"columns.{key}", "must be an array (one entry per point)")
    steps: list[Any] = columns["step"]
    n = len(steps)
    if n > limits["MAX_BATCH_POINTS"]:
        raise InvalidInput("columns", f"holds {n} points; the limit is {limits['MAX_BATCH_POINTS']} per batch")
    for key in ("step", "name", "value", "turn", "wall_time"):
        found = columns.get(key)
        if found is not None and (not isinstance(found, list) or len(found) != n):
            raise InvalidInput(
                f"columns.{key}",
                f"must be an array of {n} entries (as columns.step), "
                f"got {len(found) if isinstance(found, list) else type(found).__name__}",
            )
    if not n:
        return [], [], [], [], []
    max_step = limits["MAX_STEP"]
    if set(map(type, steps)) != {int} or min(steps) < 0 or max(steps) > max_step:
        i = _first(steps, lambda s: type(s) is not int or not 0 <= s <= max_step)
        raise _bad(i, "step", f"must be an integer from 0 to {max_step}, got {steps[i]!r}")
    turns = _turns(columns.get("turn"), n, limits["MAX_TURN"])
    names = _names(columns, n, limits)
    values = _numbers(columns["value"], "value", limits["MAX_ABS_VALUE"])
    walls = columns.get("wall_time")
    walls = [None] * n if walls is None else _walls(walls)
    return steps, turns, names, values, walls


def _turns(turns: list[Any] | None, n: int, max_turn: int) -> Any:
    """Turns with None as -1 (every point -1 when the column is absent)."""
    if turns is None:
        return [-1] * n
    kinds = set(map(type, turns))
    ints = turns if _NONE not in kinds else [t for t in turns if t is not None]
    if not kinds <= {int, _NONE} or (ints and (min(ints) < 0 or max(ints) > max_turn)):
        i = _first(turns, lambda t: t is not None and (type(t) is not int or not 0 <= t <= max_turn))
        raise _bad(i, "turn", f"must be an integer from 0 to {max_turn} or null, got {turns[i]!r}")
    return turns if _NONE not in kinds else [-1 if t is None else t for t in turns]


def _names(columns: Mapping[str, Any], n: int, limits: Mapping[str, Any]) -> list[str]:
    """The name of every point: looked up in ``names`` when given, each distinct name checked once."""
    max_name, pattern = limits["MAX_NAME"], limits["NAME"]
    message = f"must be 1-{max_name} characters without control characters"

    def bad_name(name: Any) -> bool:
        return type(name) is not str or not 0 < len(name) <= max_name or not pattern.match(name)

    column: list[Any] = columns["name"]
    table = columns.get("names")
    if table is None:
        if set(map(type, column)) != {str} or any(map(bad_name, set(column))):
            raise _bad(_first(column, bad_name), "name", message)
        return column
    if not isinstance(table, list):
        raise InvalidInput("columns.names", "must be an array of the batch's names (name holds indexes into it)")
    for j, name in enumerate(table):
        if bad_name(name):
            raise InvalidInput(f"columns.names[{j}]", message)
    size = len(table)
    if set(map(type, column)) != {int} or min(column) < 0 or max(column) >= size:
        i = _first(column, lambda k: type(k) is not int or not 0 <= k < size)
        raise _bad(i, "name", f"must be an index into columns.names (0 to {size - 1}), got {column[i]!r}")
    return list(map(table.__getitem__, column))


def _numbers(column: list[Any], field: str, limit: float) -> list[float]:
    """Finite floats of magnitude at most ``limit`` (JSON integers become floats)."""
    kinds = set(map(type, column))
    if not kinds <= {float, int}:
        i = _first(column, lambda v: type(v) not in (float, int))
        raise _bad(i, field, f"must be a number, got {column[i]!r}")
    if int in kinds:
        column = list(map(float, column))
    # a NaN or an infinity makes the sum non-finite; values within the limit cannot overflow it
    if not math.isfinite(sum(column)) or max(map(abs, column)) > limit:
        i = _first(column, lambda v: not math.isfinite(v) or abs(v) > limit)
        raise _bad(i, field, f"must be finite and at most {limit:g} in magnitude, got {column[i]!r}")
    return column


def _walls(column: list[Any]) -> list[Any]:
    kinds = set(map(type, column))
    if not kinds <= {float, int, _NONE}:
        i = _first(column, lambda w: type(w) not in (float, int, _NONE))
        raise _bad(i, "wall_time", f"must be a number or null, got {column[i]!r}")
    if kinds <= {_NONE}:
        return column
    present = [w for w in column if w is not None] if _NONE in kinds else column
    i = -1 if math.isfinite(sum(present)) else _first(column, lambda w: w is not None and not math.isfinite(w))
    if i >= 0:  # (a finite sum that overflowed has no bad entry)
        raise _bad(i, "wall_time", f"must be finite, got {column[i]!r}")
    if int in kinds:
        column = [w if w is None else float(w) for w in column]
    return column
