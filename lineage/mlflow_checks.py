"""MLflow's errors and limits, and the checks of its request bodies (``lineage.mlflow_compat``
maps what passes them onto the ledger).

Errors are :class:`MlflowError`: MLflow's ``{"error_code", "message"}``, which its clients
parse. A body over MLflow's limits (``mlflow.utils.validation``: per ``log-batch`` 1,000
metrics, 100 params plus tags and 1 MB; keys up to 250 characters, param values up to
6,000, tag values up to 8,000) is ``INVALID_PARAMETER_VALUE`` and nothing of it is stored.
Metric keys are telemetry names, so the ledger's own limit (200 characters) applies to them.

Metric values are what MLflow's JSON carries: a number, or protobuf's strings ``"NaN"``,
``"Infinity"``, ``"-Infinity"`` (or a number written as a string). MLflow stores NaN and
infinities; the ledger's telemetry never does (``lineage.telemetry``: a finite value of
magnitude at most 1e150). As the ledger's own trainer client does, such a point is left
out and counted (:attr:`Batch.dropped`; the trial's ``extra.nonfinite_dropped``), never a
refusal of the batch: a diverging loss does not stop a trainer's logging.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lineage.auth import Forbidden, Unauthorized
from lineage.errors import Conflict, InvalidInput, LedgerError, NotFound
from lineage.telemetry import MAX_ABS_VALUE, Row, check_points

#: MLflow's limits (``mlflow.utils.validation``).
MAX_BATCH_METRICS = 1000
MAX_BATCH_PARAMS_TAGS = 100
MAX_BATCH_BYTES = 1_000_000
MAX_KEY = 250
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000

#: protobuf's JSON for the doubles JSON has no number for
_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class MlflowError(Exception):
    """An error MLflow clients parse: ``{"error_code": ..., "message": ...}`` with ``status``."""

    def __init__(self, error_code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.status = status

    def as_dict(self) -> dict[str, str]:
        return {"error_code": self.error_code, "message": self.message}


def invalid(message: str) -> MlflowError:
    """MLflow's ``INVALID_PARAMETER_VALUE`` (400)."""
    return MlflowError("INVALID_PARAMETER_VALUE", message)


def missing(message: str) -> MlflowError:
    """MLflow's ``RESOURCE_DOES_NOT_EXIST`` (404)."""
    return MlflowError("RESOURCE_DOES_NOT_EXIST", message, 404)


def as_mlflow_error(error: LedgerError) -> MlflowError:
    """The ledger's error in MLflow's words: no or a bad token 401, a role too low 403, not
    found 404, a conflict or bad input 400."""
    if isinstance(error, Unauthorized):
        return MlflowError("UNAUTHENTICATED", str(error), 401)
    if isinstance(error, Forbidden):
        return MlflowError("PERMISSION_DENIED", str(error), 403)
    if isinstance(error, NotFound):
        return missing(str(error))
    if isinstance(error, Conflict):
        return MlflowError("INVALID_STATE", str(error))
    if isinstance(error, InvalidInput):
        return invalid(str(error))
    return MlflowError("INTERNAL_ERROR", str(error), 500)


def key_of(value: object, what: str) -> str:
    """A param, tag or metric key: 1 to 250 characters."""
    if not isinstance(value, str) or not value or len(value) > MAX_KEY:
        raise invalid(f"{what} key must be 1-{MAX_KEY} characters, got {value!r:.300}")
    return value


def text_of(value: object, what: str, limit: int) -> str:
    """A value as MLflow stores it: a string (a number is written out), at most ``limit``."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        raise invalid(f"{what} value is {len(text)} characters long; the limit is {limit}")
    return text


def pairs_of(items: object, what: str, limit: int) -> dict[str, str]:
    """``[{key, value}, ...]`` (params or tags) as a dict; a later entry of a key wins."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise invalid(f"{what}s must be a list of {{key, value}} objects")
    out: dict[str, str] = {}
    for item in items:
        if not isinstance(item, Mapping):
            raise invalid(f"each {what} must be a {{key, value}} object")
        key = key_of(item.get("key"), what)
        out[key] = text_of(item.get("value"), f"{what} {key!r}", limit)
    return out


def millis_of(value: object, what: str) -> int | None:
    """An int64 of MLflow's JSON (a number, or digits in a string, as protobuf writes it)."""
    if value is None:
        return None
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"{what} must be milliseconds since the epoch, got {value!r}")
    return int(value)


def metric_value(value: object, what: str) -> float:
    """A metric's value as a float, NaN and infinities included (module doc)."""
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    if isinstance(value, str):
        if value in _SPECIAL:
            return _SPECIAL[value]
        try:
            return float(value)
        except ValueError:
            pass
    raise invalid(f"{what} must be a number (or 'NaN', 'Infinity', '-Infinity'), got {value!r:.100}")


@dataclass(frozen=True, slots=True)
class Batch:
    """A checked ``log-batch``: telemetry rows, params and tags, and the ``(key, step)`` of
    each metric left out for a value the ledger does not store (module doc)."""

    rows: list[Row]
    params: dict[str, str]
    tags: dict[str, str]
    dropped: list[tuple[str, int]]


def check_batch(body: Mapping[str, Any], *, size: int = 0) -> Batch:
    """A ``log-batch`` body held to MLflow's limits: over any, nothing is stored."""
    if size > MAX_BATCH_BYTES:
        raise invalid(f"the batch is {size} bytes; the limit is {MAX_BATCH_BYTES}")
    metrics = body.get("metrics") or []
    if not isinstance(metrics, list):
        raise invalid("metrics must be a list")
    if len(metrics) > MAX_BATCH_METRICS:
        raise invalid(f"a batch holds {len(metrics)} metrics; the limit is {MAX_BATCH_METRICS}")
    params = pairs_of(body.get("params"), "param", MAX_PARAM_VALUE)
    tags = pairs_of(body.get("tags"), "tag", MAX_TAG_VALUE)
    given = len(body.get("params") or []) + len(body.get("tags") or [])
    if given > MAX_BATCH_PARAMS_TAGS:
        raise invalid(f"a batch holds {given} params and tags; the limit is {MAX_BATCH_PARAMS_TAGS}")
    points, dropped = [], []
    for index, metric in enumerate(metrics):
        if not isinstance(metric, Mapping):
            raise invalid(f"metrics[{index}] must be a {{key, value, timestamp, step}} object")
        key = key_of(metric.get("key"), "metric")
        stamp = millis_of(metric.get("timestamp"), f"metrics[{index}].timestamp")
        step = millis_of(metric.get("step", 0) or 0, f"metrics[{index}].step")
        value = metric_value(metric.get("value"), f"metrics[{index}].value")
        if not (math.isfinite(value) and abs(value) <= MAX_ABS_VALUE):
            dropped.append(index)
            value = 0.0  # its key and step are still checked below: a bad one is the client's bug
        points.append({"name": key, "step": step, "value": value, "wall_time": None if stamp is None else stamp / 1e3})
    try:
        rows = check_points(points)
    except InvalidInput as error:  # name MLflow's field: metrics[i].step, not points[i].step
        raise invalid(str(error).replace("points[", "metrics[", 1)) from None
    if dropped:
        left_out = set(dropped)
        gone = [(rows[i][2], rows[i][0]) for i in dropped]
        rows = [row for i, row in enumerate(rows) if i not in left_out]
        return Batch(rows, params, tags, gone)
    return Batch(rows, params, tags, [])
