"""Telemetry points: a step's metrics to checked rows, and rows to the JSON the API takes.

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
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["MAX_ABS_VALUE", "MAX_STEP", "MAX_TURN", "Row", "check_name", "encode_rows", "metric_values", "step_rows", "turn_rows"]

MAX_STEP = 2**53
MAX_TURN = 2**31 - 1
MAX_NAME = 200
MAX_ABS_VALUE = 1e150
_NAME = re.compile(r"^[^\x00-\x1f\x7f]+$")

Row = tuple[int, "int | None", str, float, "float | None"]

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


def metric_values(values: Sequence[Any]) -> list[float]:
    """Floats from numbers and tensors (0-dim tensors stacked: one transfer for all)."""
    tensors = [i for i, v in enumerate(values) if not isinstance(v, (int, float))]
    if not tensors:
        return [float(v) for v in values]
    out: list[Any] = list(values)
    picked = [values[i] for i in tensors]
    if all(hasattr(v, "detach") and getattr(v, "ndim", 1) == 0 for v in picked):
        import torch  # only reached when the caller already holds tensors

        same_device = len({v.device for v in picked}) == 1
        floats = (torch.stack([v.detach().to(torch.float64) for v in picked]).tolist() if same_device
                  else [float(v) for v in picked])
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
