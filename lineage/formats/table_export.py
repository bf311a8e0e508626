"""The trials as a typed table for a data scientist: CSV and Parquet (``lineage export
--format csv|parquet``, ``lineage trials --format csv``).

The schema does not depend on the data: every trial field has its declared type
(:data:`FIELD_TYPES`; a column that is empty in every trial keeps it, so Parquet stores
``double`` or ``string``, never ``null``), in :data:`lineage.domain.TRIAL_FIELD_NAMES`
order, then one column per key of ``extra`` (``extra.commit``, ``extra.memory_gb``,
sorted by key), typed by content: ``int64`` when every value present is a JSON integer,
``float64`` when every value is a number, else ``string`` (numbers as their JSON text,
objects and lists as compact JSON, true/false as ``true``/``false``).

* ``created_at`` and ``updated_at`` are zone-aware UTC timestamps (``timestamp[us, UTC]``;
  CSV: ISO 8601 with ``+00:00``). A trial's own ``timestamp`` is the text it was given.
* ``delta_vs_best`` is rounded to 12 significant digits: it is a difference of two stored
  floats, so ``0.9953 - 0.99999`` reads ``-0.00469`` and not ``-0.0046900000000000386``
  (metrics are recorded with far fewer digits; 12 keep every one of them).

The fieldkit TSV and a project's own results file (``--format fieldkit|autoresearch``)
are other writers (:mod:`lineage.formats.fieldkit`, :mod:`lineage.formats.autoresearch`),
byte-identical to what they were; this module changes neither. pandas and pyarrow are
imported lazily (the ``parquet`` extra).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from lineage.domain import TRIAL_FIELD_NAMES, Trial
from lineage.trial_fields import TRIAL_FIELDS

__all__ = ["FIELD_TYPES", "delta_text", "export_columns", "extra_types", "to_frame", "write_parquet"]

#: Significant digits a delta keeps (see the module doc).
DELTA_DIGITS = 12

#: Each trial field's column type: ``string``, ``float64``, ``int64`` or ``timestamp``.
FIELD_TYPES: dict[str, str] = {}
for _spec in TRIAL_FIELDS:
    if _spec.name == "extra":
        continue
    if _spec.name == "seq":
        FIELD_TYPES[_spec.name] = "int64"
    elif _spec.name in ("created_at", "updated_at"):
        FIELD_TYPES[_spec.name] = "timestamp"
    elif _spec.kind == "number":
        FIELD_TYPES[_spec.name] = "float64"
    else:
        FIELD_TYPES[_spec.name] = "string"
_FIELDS = tuple(name for name in TRIAL_FIELD_NAMES if name in FIELD_TYPES)


def rounded_delta(value: float | None) -> float | None:
    """``value`` at :data:`DELTA_DIGITS` significant digits (None stays None)."""
    return None if value is None else float(f"{value:.{DELTA_DIGITS}g}")


def delta_text(value: float | None) -> str:
    """A delta as text without float noise (empty for None)."""
    return "" if value is None else repr(rounded_delta(value))


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "other"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "other"


def extra_types(trials: Iterable[Trial]) -> dict[str, str]:
    """``extra.KEY`` column -> ``int64``, ``float64`` or ``string`` by the values present."""
    kinds: dict[str, set[str]] = {}
    for trial in trials:
        for key, value in trial.extra.items():
            kinds.setdefault(key, set()).add(_json_kind(value))
    out: dict[str, str] = {}
    for key in sorted(kinds):
        present = kinds[key] - {"null"}
        out[f"extra.{key}"] = (
            "int64"
            if present <= {"int"} and present
            else "float64"
            if present and present <= {"int", "float"}
            else "string"
        )
    return out


def export_columns(trials: list[Trial]) -> dict[str, str]:
    """Every column of the export with its type, in order."""
    return {**FIELD_TYPES, **extra_types(trials)}


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _time(value: str | None) -> datetime | None:
    return None if not value else datetime.fromisoformat(value)


def to_frame(trials: Iterable[Trial]):
    """The trials as a pandas DataFrame with the export's schema (one row per trial, in
    the order given)."""
    import pandas as pd

    rows = list(trials)
    columns = export_columns(rows)
    data: dict[str, Any] = {}
    for name, kind in columns.items():
        if name.startswith("extra."):
            key = name[6:]
            values: list[Any] = [trial.extra.get(key) for trial in rows]
            if kind == "string":
                data[name] = pd.array([_text(v) for v in values], dtype="string")
            elif kind == "int64":
                data[name] = pd.array(values, dtype="Int64")
            else:
                data[name] = pd.array([None if v is None else float(v) for v in values], dtype="Float64")
            continue
        values = [getattr(trial, name) for trial in rows]
        if name == "status":
            values = [v.value for v in values]
        if name == "delta_vs_best":
            values = [rounded_delta(v) for v in values]
        if kind == "string":
            data[name] = pd.array(values, dtype="string")
        elif kind == "int64":
            data[name] = pd.array(values, dtype="Int64")
        elif kind == "float64":
            data[name] = pd.array(values, dtype="Float64")
        else:
            data[name] = pd.Series(pd.to_datetime([_time(v) for v in values], utc=True), dtype="datetime64[us, UTC]")
    return pd.DataFrame(data, columns=list(columns))


_ARROW = {"string": "string", "int64": "int64", "float64": "float64"}


def write_parquet(frame, target: Any) -> None:
    """``frame`` (from :func:`to_frame`) as Parquet with an explicit schema, so a column
    that is empty in every trial keeps its declared type."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields = []
    for name in frame.columns:
        dtype = str(frame[name].dtype)
        if dtype.startswith("datetime64"):
            fields.append(pa.field(name, pa.timestamp("us", tz="UTC")))
        elif dtype == "Int64":
            fields.append(pa.field(name, pa.int64()))
        elif dtype == "Float64":
            fields.append(pa.field(name, pa.float64()))
        else:
            fields.append(pa.field(name, pa.string()))
    table = pa.Table.from_pandas(frame, schema=pa.schema(fields), preserve_index=False)
    pq.write_table(table, target)
