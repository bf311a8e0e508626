"""The field types of the API's request schemas, each carrying into the OpenAPI document
the constraint the server enforces (one source: the type validates and documents).

:data:`Text`
    Any text that reaches the database: no NUL character and no lone surrogate
    (PostgreSQL refuses the first, UTF-8 the second), so such input is a 422 on every
    backend rather than a driver error. Documented as the pattern :data:`NO_NUL` (a
    lone surrogate cannot be written in UTF-8 JSON at all).
:data:`JsonObject`
    ``extra``: a JSON object whose keys and strings, at any depth, hold no NUL, with
    finite numbers, within the ledger's limits on keys, depth and bytes
    (:func:`lineage.domain.check_extra`); documented as :data:`JSON_VALUE_SCHEMA`
    (recursive: the document holds it as the component ``JsonValue``).
:data:`TEXT_CHECKS`
    :data:`Text`'s checks for a string with constraints of its own (a pattern, lengths).
:class:`WholeNumber`
    A JSON integer within bounds, ``8020.0`` included, never ``true`` or ``"8020"``.
:func:`non_blank`
    A pattern for text that must hold something besides white space.
:class:`Strict`
    The base of a request body: unknown fields refused.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, GetJsonSchemaHandler, StrictBool, StrictFloat
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema as cs

from lineage.domain import check_extra
from lineage.errors import InvalidInput

__all__ = [
    "Flag",
    "JSON_VALUE_REF",
    "JSON_VALUE_SCHEMA",
    "JsonObject",
    "NO_NUL",
    "Number",
    "Strict",
    "TEXT_CHECKS",
    "Text",
    "WholeNumber",
    "non_blank",
    "text",
    "whole_number",
    "word_list",
]

#: Text without NUL (ECMA 262 and Python read the escape alike).
NO_NUL = "^[^\\u0000]*$"
JSON_VALUE_REF = "#/components/schemas/JsonValue"
_NO_NUL_STRING = {"type": "string", "pattern": NO_NUL}
#: Any JSON value whose strings and keys hold no NUL.
JSON_VALUE_SCHEMA: dict[str, Any] = {
    "description": "Any JSON value; no NUL character in a string or key",
    "anyOf": [
        _NO_NUL_STRING,
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "array", "items": {"$ref": JSON_VALUE_REF}},
        {"type": "object", "propertyNames": _NO_NUL_STRING, "additionalProperties": {"$ref": JSON_VALUE_REF}},
    ],
}


def non_blank(excluded: str = "\\u0000") -> str:
    """A pattern: characters other than ``excluded`` (a character-class body), at least
    one of them not white space (Python's ``str.strip`` and ECMA's ``\\S`` agree on the
    characters left once control characters are excluded)."""
    return f"^[^{excluded}]*[^\\s{excluded}][^{excluded}]*$"


def _clean_text(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (it holds a lone surrogate)") from None
    return value


def _clean_extra(value: dict[str, Any]) -> dict[str, Any]:
    """``extra`` within the ledger's limits (:func:`lineage.domain.check_extra`, checked
    first: it bounds the depth the walk below recurses to), then its text and numbers."""
    try:
        check_extra(value)
    except InvalidInput as bad:
        raise ValueError(bad.reason) from None
    return _clean_json(value)


def _clean_json(value: Any) -> Any:
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must hold finite numbers only")
    if isinstance(value, dict):
        for key, item in value.items():
            _clean_text(key)
            _clean_json(item)
    elif isinstance(value, list):
        for item in value:
            _clean_json(item)
    return value


class _NoNulPattern:
    """Documents :data:`NO_NUL` on a string schema that has no pattern of its own."""

    def __get_pydantic_json_schema__(self, schema: cs.CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        out = handler(schema)
        if out.get("type") == "string":
            out.setdefault("pattern", NO_NUL)
        return out


class _JsonObjectSchema:
    def __get_pydantic_json_schema__(self, schema: cs.CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {
            "type": "object",
            "propertyNames": dict(_NO_NUL_STRING),
            "additionalProperties": {"$ref": JSON_VALUE_REF},
        }


#: :data:`Text`'s checks, to follow a string's own constraints:
#: ``Annotated[str, Field(pattern=...), *TEXT_CHECKS]`` (pydantic drops a ``pattern`` given
#: after a validator from the JSON schema, so the constraints come first).
TEXT_CHECKS = (AfterValidator(_clean_text), _NoNulPattern())
Text = Annotated[str, *TEXT_CHECKS]
#: A number of a request body: a JSON number, not ``true`` or ``"1.5"`` coerced.
Number = StrictFloat
#: A flag of a request body: ``true`` or ``false``, not ``"yes"`` or ``1`` coerced.
Flag = StrictBool
JsonObject = Annotated[dict[str, Any], AfterValidator(_clean_extra), _JsonObjectSchema()]


class WholeNumber:
    """A JSON integer from ``minimum`` to ``maximum`` as JSON Schema reads one, for
    ``Annotated[int, WholeNumber(...)]``: ``8020`` and ``8020.0`` alike (a number without a
    fractional part is an integer there), never ``true`` or ``"8020"``; validated to a
    Python ``int``, with one error at the field itself."""

    def __init__(self, minimum: int, maximum: int, description: str | None = None) -> None:
        self.minimum, self.maximum, self.description = minimum, maximum, description

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> cs.CoreSchema:
        return cs.union_schema(
            [
                cs.int_schema(strict=True, ge=self.minimum, le=self.maximum),
                cs.no_info_plain_validator_function(self._whole_float),
            ],
            custom_error_type="whole_number",
            custom_error_message=f"Input should be a whole number from {self.minimum} to {self.maximum}",
        )

    def _whole_float(self, value: Any) -> int:
        """A JSON float without a fraction within the bounds (a JSON int is the other branch's)."""
        if type(value) is not float or not value.is_integer() or not self.minimum <= value <= self.maximum:
            raise ValueError("not a whole number in range")
        return int(value)

    def __get_pydantic_json_schema__(self, schema: cs.CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        out: dict[str, Any] = {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}
        if self.description:
            out["description"] = self.description
        return out


class Strict(BaseModel):
    """A request body: an unknown field is a 422 naming it, never silently dropped."""

    model_config = ConfigDict(extra="forbid")


def whole_number(minimum: int, maximum: int, description: str | None = None) -> Any:
    """``Annotated[int, WholeNumber(...)]`` built at run time (mypy cannot read the result
    as a type: a static alias spells the ``Annotated`` out)."""
    return Annotated[int, WholeNumber(minimum, maximum, description)]


def text(*, pattern: str | None = None, min_length: int | None = None, max_length: int | None = None) -> Any:
    """:data:`Text` with constraints, documented with them, built at run time (mypy cannot
    read the result as a type: a static alias spells out
    ``Annotated[str, Field(...), *TEXT_CHECKS]``)."""
    from pydantic import Field

    return Annotated[str, Field(pattern=pattern, min_length=min_length, max_length=max_length), *TEXT_CHECKS]


def word_list(words: tuple[str, ...]) -> str:
    """A pattern: ``words`` separated by commas; a part may also be empty or white space
    (skipped), never a word with white space around it."""
    word = "|".join(words)
    return f"^(\\s*|{word})(,(\\s*|{word}))*$"
