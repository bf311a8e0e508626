"""The API's trial models (``api.schemas``) hold the trial's fields as
``lineage.trial_fields.TRIAL_FIELDS`` declares them, field by field.

The models are written out (a class per body, which mypy and readers can see), so this
test is what keeps them to the table: a field added to, removed from or re-limited in
``TRIAL_FIELDS`` fails here until the models follow.

- ``TrialCreate``: the recordable fields, plus ``delta_vs_best`` (taken and ignored, so
  that a trial read back can be sent again); only ``status`` is required.
- ``TrialUpdate``: the updatable fields; none required.
- ``TrialOut``: every field, in the table's order, typed as ``Trial.to_dict`` answers it.

In the request bodies a text field has its ``max_length`` and :data:`NO_NUL`'s pattern, a
number its bounds (and is a JSON number, never coerced), ``status`` the statuses and
``extra`` a JSON object; text and numbers also take ``null``. The table's descriptions
go to the MCP tools' schemas (``record_schema``), not to these models: the OpenAPI
document does not carry them.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import BaseModel

from api.schema_types import JSON_VALUE_REF, NO_NUL
from api.schemas import TrialCreate, TrialOut, TrialUpdate
from lineage.domain import AUTO_STATUS, MAX_SHORT_TEXT, FailureLabel, Trial
from lineage.trial_fields import TRIAL_FIELDS, FieldSpec

#: What a body's JSON Schema says of one value of each kind of field (before ``null``).
_OBJECT_SCHEMA = {
    "type": "object",
    "propertyNames": {"type": "string", "pattern": NO_NUL},
    "additionalProperties": {"$ref": JSON_VALUE_REF},
}


def _expected_value(spec: FieldSpec) -> dict[str, Any]:
    """The JSON Schema of a non-null value of ``spec``'s field in a request body."""
    if spec.kind == "text":
        return {"type": "string", "maxLength": spec.max_length, "pattern": NO_NUL}
    if spec.kind == "number":
        bounds = {"minimum": spec.minimum, "maximum": spec.maximum}
        return {"type": "number", **{key: value for key, value in bounds.items() if value is not None}}
    if spec.kind == "status":  # or "auto": the ledger's verdict
        return {"type": "string", "enum": [label.value for label in FailureLabel] + [AUTO_STATUS]}
    assert spec.kind == "object", spec
    return dict(_OBJECT_SCHEMA)


@pytest.fixture(scope="module")
def components(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The OpenAPI document's schemas: the models as clients read them."""
    from api.app import create_app
    from api.settings import Settings

    database = tmp_path_factory.mktemp("schema_fields") / "l.db"
    return create_app(Settings(database_url=str(database))).openapi()["components"]["schemas"]


def _value_and_null(components: dict[str, Any], model: str, name: str) -> tuple[dict[str, Any], bool]:
    """The document's schema of ``model``'s field ``name`` without its documentation (title,
    default, description), references resolved, split into (a value's schema, whether null is taken)."""
    schema = dict(components[model]["properties"][name])
    options = schema.pop("anyOf", None)
    nullable = False
    if options is not None:
        values = [option for option in options if option != {"type": "null"}]
        nullable = len(values) < len(options)
        assert len(values) == 1, (name, options)
        schema.update(values[0])
    ref = schema.pop("$ref", None)
    if ref is not None and ref != JSON_VALUE_REF:
        schema.update(components[ref.rsplit("/", 1)[1]])
    for key in ("title", "default", "description"):
        schema.pop(key, None)
    return schema, nullable


def request_mismatches(
    components: dict[str, Any], model: type[BaseModel], specs: tuple[FieldSpec, ...], *, required: frozenset[str]
) -> list[str]:
    """How ``model`` differs from ``specs`` as a request body: missing or extra fields, a
    value schema (type, limits) or nullability not the spec's, required-ness not ``required``'s."""
    wanted = {spec.name: spec for spec in specs}
    fields = model.model_fields
    problems = [f"{name}: in TRIAL_FIELDS, not in {model.__name__}" for name in wanted if name not in fields]
    problems += [
        f"{name}: in {model.__name__}, not in TRIAL_FIELDS"
        for name in fields
        if name not in wanted and name not in REQUEST_ONLY
    ]
    if _value_and_null(components, model.__name__, "keep_margin") != ({"type": "number", "minimum": 0}, True):
        problems.append("keep_margin: not a nullable number >= 0")
    if "rerun_of" in fields and _value_and_null(components, model.__name__, "rerun_of") != (
        {"type": "string", "maxLength": MAX_SHORT_TEXT, "pattern": NO_NUL},
        True,
    ):
        problems.append("rerun_of: not a nullable short text")
    for name, spec in wanted.items():
        if name not in fields:
            continue
        value, nullable = _value_and_null(components, model.__name__, name)
        if value != _expected_value(spec):
            problems.append(f"{name}: {value} is not the spec's {_expected_value(spec)}")
        if nullable != (spec.kind in ("text", "number")):
            problems.append(f"{name}: null {'taken' if nullable else 'refused'}")
        if fields[name].is_required() != (name in required):
            problems.append(f"{name}: {'required' if fields[name].is_required() else 'optional'}")
    return problems


def _answered_type(annotation: Any) -> Any:
    """A ``Trial`` field's type as ``Trial.to_dict`` answers it: the status as its word,
    ``extra`` a dict."""
    if annotation is FailureLabel:
        return str
    if typing.get_origin(annotation) is Mapping:
        return dict[typing.get_args(annotation)]
    return annotation


def output_mismatches(model: type[BaseModel], specs: tuple[FieldSpec, ...]) -> list[str]:
    """How ``model`` differs from a stored trial as the ledger answers it: its fields not
    ``specs``' in their order, a type not ``Trial``'s, a field not required."""
    names = [spec.name for spec in specs]
    if list(model.model_fields) != names:
        return [f"{model.__name__} has {list(model.model_fields)}, TRIAL_FIELDS {names}"]
    hints = typing.get_type_hints(Trial)
    problems = []
    for name, info in model.model_fields.items():
        if info.annotation != _answered_type(hints[name]):
            problems.append(f"{name}: {info.annotation} is not Trial's {_answered_type(hints[name])}")
        if not info.is_required():
            problems.append(f"{name}: optional in an answer")
    return problems


#: Parts of a request that are not fields of the trial: the margin of a "status": "auto",
#: and the trial a new one reruns (a creation's only).
REQUEST_ONLY = ("keep_margin", "rerun_of")

_CREATE = tuple(spec for spec in TRIAL_FIELDS if spec.recordable or spec.name == "delta_vs_best")
_UPDATE = tuple(spec for spec in TRIAL_FIELDS if spec.updatable)


def test_trial_create_is_the_recordable_fields(components: dict[str, Any]) -> None:
    assert request_mismatches(components, TrialCreate, _CREATE, required=frozenset({"status"})) == []


def test_trial_update_is_the_updatable_fields(components: dict[str, Any]) -> None:
    assert request_mismatches(components, TrialUpdate, _UPDATE, required=frozenset()) == []


def test_trial_out_is_every_field() -> None:
    assert output_mismatches(TrialOut, TRIAL_FIELDS) == []


def test_a_field_the_models_lack_or_a_changed_limit_is_caught(components: dict[str, Any]) -> None:
    """The checks fail when the table and a model part: the table gains a field, loses one,
    or changes a limit, a bound, a kind."""
    added = FieldSpec("lr", "number", "The learning rate.", updatable=True)
    assert request_mismatches(components, TrialCreate, (*_CREATE, added), required=frozenset({"status"})) == [
        "lr: in TRIAL_FIELDS, not in TrialCreate"
    ]
    assert request_mismatches(components, TrialUpdate, _UPDATE[1:], required=frozenset()) == [
        f"{_UPDATE[0].name}: in TrialUpdate, not in TRIAL_FIELDS"
    ]
    assert output_mismatches(TrialOut, (*TRIAL_FIELDS, added))

    def changed(name: str, **values: Any) -> tuple[FieldSpec, ...]:
        return tuple(
            FieldSpec(**{**{k: getattr(s, k) for k in s.__slots__}, **values}) if s.name == name else s for s in _UPDATE
        )

    for name, values in (
        ("notes", {"max_length": 100}),
        ("train_s", {"maximum": 60.0}),
        ("ig_clip_scale_frac_low", {"minimum": None, "maximum": None}),
        ("core_metric", {"kind": "text", "max_length": 512}),
        ("status", {"kind": "text", "max_length": 512}),
    ):
        problems = request_mismatches(components, TrialUpdate, changed(name, **values), required=frozenset())
        assert problems and all(problem.startswith(f"{name}: ") for problem in problems), (name, problems)
    assert request_mismatches(components, TrialCreate, _CREATE, required=frozenset()) == ["status: required"]
