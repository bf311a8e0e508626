"""Telemetry batch bodies: a list of point objects, or one array per field (the columnar
form, ``lineage.telemetry_columns``), and the OpenAPI schema of the two. The constraints
are ``lineage.telemetry``'s rules (its constants)."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from pydantic import ConfigDict, Field, TypeAdapter
from typing_extensions import TypedDict

from api.schema_types import WholeNumber
from lineage import telemetry
from lineage.domain import IDEMPOTENCY_KEY_PATTERN, MAX_IDEMPOTENCY_KEY

Step = Annotated[int, WholeNumber(0, telemetry.MAX_STEP, "Training step")]
Turn = Annotated[int, WholeNumber(0, telemetry.MAX_TURN)]


class TelemetryPointIn(TypedDict):
    """A point as sent; the constraints are ``lineage.telemetry``'s rules (its constants).
    Strict, as ``check_points`` is: a JSON integer for ``step``/``turn``, a JSON number for
    ``value``/``wall_time``; no ``true``, ``"3"`` or ``1.0`` step coerced."""

    __pydantic_config__ = ConfigDict(extra="forbid", strict=True)  # type: ignore[misc]
    step: Step
    turn: NotRequired[Turn | None]
    name: Annotated[str, Field(min_length=1, max_length=telemetry.MAX_NAME, pattern=telemetry.NAME_PATTERN)]
    value: Annotated[float, Field(allow_inf_nan=False, ge=-telemetry.MAX_ABS_VALUE, le=telemetry.MAX_ABS_VALUE)]
    wall_time: NotRequired[Annotated[float, Field(allow_inf_nan=False)] | None]


class TelemetryBatchIn(TypedDict):
    """A batch of points. ``batch_id``: the client's id of the batch; a replay with the
    same id (or ``Idempotency-Key``) inserts nothing."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]
    batch_id: NotRequired[
        Annotated[str, Field(min_length=1, max_length=MAX_IDEMPOTENCY_KEY, pattern=IDEMPOTENCY_KEY_PATTERN)] | None
    ]
    points: Annotated[list[TelemetryPointIn], Field(max_length=telemetry.MAX_BATCH_POINTS)]


_NUMBER = Annotated[float, Field(allow_inf_nan=False, ge=-telemetry.MAX_ABS_VALUE, le=telemetry.MAX_ABS_VALUE)]
_NAME = Annotated[str, Field(min_length=1, max_length=telemetry.MAX_NAME, pattern=telemetry.NAME_PATTERN)]


class TelemetryColumnsIn(TypedDict):
    """The points of a batch as one array per field, every array one entry per point (the
    length of ``step``); the compact form, for big batches. Each entry follows the rule of
    the point field of the same name; a bad entry is named as its point,
    ``points[i].field``. ``name`` holds the names, or indexes into ``names`` (the batch's
    distinct names) when ``names`` is given. ``turn`` and ``wall_time`` may be left out
    (no point per turn; no sender clock) or hold nulls."""

    __pydantic_config__ = ConfigDict(extra="forbid", strict=True)  # type: ignore[misc]
    step: Annotated[
        list[Annotated[int, Field(ge=0, le=telemetry.MAX_STEP)]], Field(description="Training step of each point")
    ]
    names: NotRequired[Annotated[list[_NAME], Field(description="The batch's distinct names (name indexes into it)")]]
    name: Annotated[
        list[_NAME] | list[Annotated[int, Field(ge=0)]], Field(description="Each point's name, or its index into names")
    ]
    value: list[_NUMBER]
    turn: NotRequired[list[Annotated[int, Field(ge=0, le=telemetry.MAX_TURN)] | None]]
    wall_time: NotRequired[list[Annotated[float, Field(allow_inf_nan=False)] | None]]


class TelemetryColumnsBatchIn(TypedDict):
    """A batch in the columnar form; ``batch_id`` as in the point list form."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]
    batch_id: NotRequired[
        Annotated[str, Field(min_length=1, max_length=MAX_IDEMPOTENCY_KEY, pattern=IDEMPOTENCY_KEY_PATTERN)] | None
    ]
    columns: Annotated[
        TelemetryColumnsIn | list[TelemetryColumnsIn],
        Field(
            description=f"The points, or blocks of them concatenated in order (each with its own names); at most "
            f"{telemetry.MAX_BATCH_POINTS} points in all"
        ),
    ]


#: Validates a batch straight from the JSON bytes into dicts (in pydantic-core: about a
#: third of the cost of building a model per point; telemetry comes 100,000 points a time).
TELEMETRY_BATCH: TypeAdapter[TelemetryBatchIn] = TypeAdapter(TelemetryBatchIn)


def _inline_refs(schema: Any, defs: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(defs[ref.rsplit("/", 1)[1]], defs)
        return {k: _inline_refs(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline_refs(v, defs) for v in schema]
    return schema


def telemetry_batch_schema() -> dict[str, Any]:
    """The JSON schema of a batch, either form, with its definitions inlined (for the
    OpenAPI document). The columnar form is checked by ``lineage.telemetry.check_columns``
    (a column at a time); its schema here documents it."""
    forms = []
    for adapter in (TELEMETRY_BATCH, TypeAdapter(TelemetryColumnsBatchIn)):
        schema = adapter.json_schema()
        forms.append(_inline_refs(schema, schema.get("$defs", {})))
    return {
        "oneOf": forms,
        "description": "A batch of points: a list of point objects (points) or one array per "
        "field (columns, the compact form for big batches)",
    }
