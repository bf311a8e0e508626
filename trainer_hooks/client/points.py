"""Telemetry points: a step's metrics to checked records and rows, and those to the JSON the
API takes (:func:`encode_columns`: the columnar form, one array per field with a names
table, what the client spools and sends; :func:`encode_rows`: point objects, what spools
of earlier clients hold).

A record is one ``log`` call, ``(step, turn, names, values, wall_time)``: checked per call
(the names once per distinct key set, the values by their sum and largest magnitude), so a
step of ten scalars costs a few microseconds and no Python object per point. A record is
tuples all the way down (``names`` and ``values`` too): the garbage collector stops
tracking a tuple of numbers and strings at its first pass, so the records a client holds
never make its full collections longer. (Records holding lists cost more than their
conversion: each full collection walked every record buffered, and in a process of
torch's size a full collection walks millions of objects.)

A row is ``(step, turn, name, value, wall_time)`` (``turn`` None for a quantity that is not
per turn). All points of one log call share the sender's clock, so only the call's first
point carries ``wall_time`` (the others None): half the bytes per point on the wire and
in the spool, and a third of the encoding time. The rules are the ledger's (``lineage.telemetry``): ``step`` an integer in
``[0, 2**53]``, ``turn`` in ``[0, 2**31 - 1]``, ``name`` 1-200 characters without control
characters, ``value`` finite with magnitude <= 1e150. A bad step, turn or name is the
caller's bug and raises ``ValueError`` at once (it would make the server refuse the
whole batch); a non-finite value (a diverging loss) is not stored anywhere and is
counted instead, so a NaN never stops training nor poisons the spool.

Values may be Python numbers or 0-dim tensors (any device): tensors are converted with
one ``torch.stack(...).tolist()`` (one device sync per call, not one per value), without
this module importing torch.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

__all__ = [
    "MAX_ABS_VALUE",
    "MAX_STEP",
    "MAX_TURN",
    "Record",
    "Row",
    "check_name",
    "dumps",
    "encode_columns",
    "encode_rows",
    "metric_values",
    "step_record",
    "step_rows",
    "turn_rows",
]

MAX_STEP = 2**53
MAX_TURN = 2**31 - 1
MAX_NAME = 200
MAX_ABS_VALUE = 1e150
_NAME = re.compile(r"^[^\x00-\x1f\x7f]+$")

Row = tuple[int, "int | None", str, float, "float | None"]
#: one ``log`` call: ``(step, turn, names, values, wall_time)``, the wall time the first point's
Record = tuple[int, "int | None", tuple[str, ...], tuple[float, ...], float]

_checked_names: dict[str, str] = {}


def check_name(name: str) -> str:
    """The name's JSON text; ``ValueError`` when the ledger would refuse the name."""
    found = _checked_names.get(name)
    if found is not None:
        return found
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or not _NAME.match(name):
        raise ValueError(f"telemetry name {name!r} must be 1-{MAX_NAME} characters without control characters")
    text = json.dumps(name, ensure_ascii=False)
    if len(_checked_names) < 100_000:
        _checked_names[name] = text
    return text


#: key sets checked, each to its one tuple (the records of a run share it)
_checked_keys: dict[tuple[str, ...], tuple[str, ...]] = {}
_FLOATS = {float}
_isfinite = math.isfinite


def metric_values(values: Sequence[Any]) -> list[float]:
    """Floats from numbers and tensors (0-dim tensors stacked: one transfer for all)."""
    kinds = set(map(type, values))
    if kinds <= {float, int}:  # the common case: plain numbers, no per-value check
        return list(values) if int not in kinds else [float(v) for v in values]
    tensors = [i for i, v in enumerate(values) if not isinstance(v, (int, float))]
    if not tensors:
        return [float(v) for v in values]
    out: list[Any] = list(values)
    picked = [values[i] for i in tensors]
    if all(hasattr(v, "detach") and getattr(v, "ndim", 1) == 0 for v in picked):
        import torch  # only reached when the caller already holds tensors

        same_device = len({v.device for v in picked}) == 1
        floats = (
            torch.stack([v.detach().to(torch.float64) for v in picked]).tolist()
            if same_device
            else [float(v) for v in picked]
        )
    else:
        floats = [float(v.item() if hasattr(v, "item") else v) for v in picked]
    for i, f in zip(tensors, floats):
        out[i] = f
    return [float(v) for v in out]


def step_rows(step: int, metrics: Mapping[str, Any], turn: int | None, wall: float) -> tuple[list[Row], int]:
    """Checked rows of one call, and how many non-finite values were left out."""
    if type(step) is not int or not 0 <= step <= MAX_STEP:
        raise ValueError(f"telemetry step must be an integer from 0 to {MAX_STEP}, got {step!r}")
    if turn is not None and (type(turn) is not int or not 0 <= turn <= MAX_TURN):
        raise ValueError(f"telemetry turn must be an integer from 0 to {MAX_TURN} or None, got {turn!r}")
    names = list(metrics)
    for name in names:
        check_name(name)
    rows: list[Row] = []
    dropped = 0
    isfinite = math.isfinite
    stamp: float | None = wall
    for name, value in zip(names, metric_values(list(metrics.values()))):
        if isfinite(value) and abs(value) <= MAX_ABS_VALUE:
            rows.append((step, turn, name, value, stamp))
            stamp = None
        else:
            dropped += 1
    return rows, dropped


def step_record(step: int, metrics: Mapping[str, Any], turn: int | None, wall: float) -> tuple[Record | None, int]:
    """One call's points as a :data:`Record` (None when every value was dropped), and how
    many non-finite values were left out: :func:`step_rows`'s rules, checked per call
    (the names once per distinct key set, the values by their sum and largest magnitude)."""
    if type(step) is not int or not 0 <= step <= MAX_STEP:
        raise ValueError(f"telemetry step must be an integer from 0 to {MAX_STEP}, got {step!r}")
    if turn is not None and (type(turn) is not int or not 0 <= turn <= MAX_TURN):
        raise ValueError(f"telemetry turn must be an integer from 0 to {MAX_TURN} or None, got {turn!r}")
    names = tuple(metrics)
    known = _checked_keys.get(names)
    if known is not None:
        names = known
    else:
        for name in names:
            check_name(name)
        if len(_checked_keys) < 10_000:
            _checked_keys[names] = names
    values = tuple(metrics.values())
    if set(map(type, values)) != _FLOATS:  # the common case (all floats) needs no conversion
        values = tuple(metric_values(values))
        if not values:
            return None, 0
    # finite values within the limit cannot sum to a non-finite value (1e150 * len is far from overflow)
    if _isfinite(sum(values)) and max(map(abs, values)) <= MAX_ABS_VALUE:
        return (step, turn, names, values, wall), 0
    kept = [(n, v) for n, v in zip(names, values) if math.isfinite(v) and abs(v) <= MAX_ABS_VALUE]
    dropped = len(values) - len(kept)
    if not kept:
        return None, dropped
    return (step, turn, tuple(n for n, _ in kept), tuple(v for _, v in kept), wall), dropped


def turn_rows(step: int, per_turn: Mapping[str, Any], wall: float) -> tuple[list[Row], int]:
    """Rows of per-turn metrics: ``name -> sequence [T]`` (or a 1-D tensor) gives one point
    per turn ``0 .. T-1``."""
    if type(step) is not int or not 0 <= step <= MAX_STEP:
        raise ValueError(f"telemetry step must be an integer from 0 to {MAX_STEP}, got {step!r}")
    rows: list[Row] = []
    dropped = 0
    isfinite = math.isfinite
    for name, values in per_turn.items():
        check_name(name)
        seq = values.detach().to("cpu").double().tolist() if hasattr(values, "detach") else metric_values(list(values))
        if len(seq) > MAX_TURN:
            raise ValueError(f"telemetry {name!r} has more than {MAX_TURN} turns")
        for turn, value in enumerate(seq):
            if isfinite(value) and abs(value) <= MAX_ABS_VALUE:
                rows.append((step, turn, name, value, None if rows else wall))
            else:
                dropped += 1
    return rows, dropped


def encode_rows(rows: Iterable[Row]) -> tuple[str, int]:
    """The rows as comma-joined JSON point objects (no brackets), and their count.
    ``repr`` of a finite float is valid JSON and round-trips exactly."""
    names = _checked_names
    parts = []
    for step, turn, name, value, wall in rows:
        nm = names.get(name) or check_name(name)
        where = f'"step":{step}' if turn is None else f'"step":{step},"turn":{turn}'
        if wall is None:
            parts.append(f'{{{where},"name":{nm},"value":{value!r}}}')
        else:
            parts.append(f'{{{where},"name":{nm},"value":{value!r},"wall_time":{wall!r}}}')
    return ",".join(parts), len(parts)


def dumps(obj: Any) -> bytes:
    """JSON as UTF-8 bytes: orjson where installed (about 5x the standard library on number
    arrays), else the standard library (the same text for finite floats: the shortest repr)."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - a trainer install without orjson
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    return orjson.dumps(obj)


def encode_columns(items: Iterable[Record | list[Row]]) -> tuple[bytes, int]:
    """Records and row lists as the API's columnar form (``lineage.telemetry_columns``):
    its JSON (UTF-8 bytes: what the spool stores and the request carries, never decoded)
    and the number of points. Names go into a ``names`` table once each; ``turn`` is
    written only when some point has one."""
    steps: list[int] = []
    index: list[int] = []
    values: list[float] = []
    walls: list[float | None] = []
    turns: list[int | None] | None = None
    table: dict[str, int] = {}
    known: dict[tuple[str, ...], list[int]] = {}
    # Both branches bind these: a record's wall time is a float, a row's may be None.
    step: int
    turn: int | None
    wall: float | None
    for item in items:
        if type(item) is tuple:
            step, turn, names, vals, wall = item
            k = len(vals)
            idx = known.get(names)
            if idx is None:
                idx = known[names] = [table.setdefault(n, len(table)) for n in names]
            if turn is not None and turns is None:
                turns = [None] * len(steps)
            steps += [step] * k
            index += idx
            values += vals
            walls.append(wall)
            walls += [None] * (k - 1)
            if turns is not None:
                turns += [turn] * k
            continue
        # ``type(...) is tuple`` narrows only its own branch: what is left is a row list.
        for step, turn, name, value, wall in cast("list[Row]", item):
            if turn is not None and turns is None:
                turns = [None] * len(steps)
            steps.append(step)
            index.append(table.setdefault(name, len(table)))
            values.append(value)
            walls.append(wall)
            if turns is not None:
                turns.append(turn)
    columns: dict[str, Any] = {"step": steps, "names": list(table), "name": index, "value": values}
    if turns is not None:
        columns["turn"] = turns
    if any(w is not None for w in walls):
        columns["wall_time"] = walls
    return dumps(columns), len(steps)


def encode_batch(key: str, items: Iterable[Record | list[Row]] | Sequence[Row]) -> bytes:
    """A whole telemetry request body in the columnar form: ``batch_id`` and ``columns``
    (a sequence of rows is taken as one row list)."""
    found = list(items)
    if found and type(found[0]) is tuple and len(found[0]) == 5 and type(found[0][2]) is str:
        found = [found]  # type: ignore[list-item]
    block, _ = encode_columns(found)  # type: ignore[arg-type]
    return b'{"batch_id":' + json.dumps(key).encode() + b',"columns":' + block + b"}"
