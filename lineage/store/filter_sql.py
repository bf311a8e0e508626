"""The filter language and the trials' sort orders in SQL, per backend.

:func:`compile_filter` turns a :mod:`lineage.filter_language` tree into one WHERE clause
with ``?`` placeholders and its parameters: every value is bound, nothing a user typed is
spliced into the SQL (field names are checked against the field table; ``extra`` keys
travel as bound JSON paths; an expression is bound afresh at each use). Every test is
two-valued (a missing value makes a test false, never NULL: ``col IS NOT NULL AND ...``
on a column, so an index still serves it, ``(...) IS TRUE`` on an expression), so
``not`` means what it says on both backends.

``extra`` is JSON text on both backends (migration 0006): SQLite reads it with
``json_type``/``json_extract`` and a ``$."key"`` path, PostgreSQL with ``json_typeof`` and
``->``/``->>`` (``extra`` is ``json``, so no cast is needed to reach a key). A number
literal meets the key's JSON numbers (``=`` also its text equal to the literal as
written), a text literal its JSON strings.

:func:`sort_phases` gives a sort key's phases: the ORDER BY walks the trials with a value
first, in value order, then (numbers; ``extra``: strings) the next kind, the trials
without one last, each phase tie-broken by ``seq``, so keyset pages are stable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lineage.errors import InvalidInput
from lineage.exp_ids import exp_sort_key, shown_forms
from lineage.filter_language import BoolOp, Node, Not, Test, Word, field_kind, parse_time, resolve_field, status_value

__all__ = ["SortPhase", "compile_filter", "parse_sort", "sort_phases", "sort_value"]

#: JSON's number grammar: text fields holding one compare numerically with a number
#: (``expected_delta < 0``)
_JSON_NUMBER = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$"
_TEXT_ORDER_OPS = ("<", "<=", ">", ">=")


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _extra_path(key: str) -> str:
    return f'$."{key}"'


def _height(node: Node) -> int:
    if isinstance(node, BoolOp):
        return 1 + max(_height(n) for n in node.nodes)
    if isinstance(node, Not):
        return 1 + _height(node.node)
    return 0


def _deepest_first(node: BoolOp) -> list[Node]:
    """The operands of ``node``, a nested operand of the same operator spliced in, the
    deepest first. SQLite's parser keeps a short stack (about 100 entries) for every
    group still open: ``a and (b or (c and (d ...)))`` overflows it within 30 levels,
    while the same tree written deepest first opens its groups one after the other.
    ``and``/``or`` of two-valued tests do not depend on the order."""
    operands: list[Node] = []
    for operand in node.nodes:
        if isinstance(operand, BoolOp) and operand.op == node.op:
            operands.extend(_deepest_first(operand))
        else:
            operands.append(operand)
    return sorted(operands, key=_height, reverse=True)


class _Compiler:
    def __init__(self, sqlite: bool, db_time: Callable[[Any], Any]) -> None:
        self.sqlite = sqlite
        self.db_time = db_time
        self.params: list[Any] = []
        self.collate = "" if sqlite else ' COLLATE "C"'

    def bind(self, value: Any) -> str:
        self.params.append(value)
        return "?"

    # -- extra ----------------------------------------------------------------------------

    def extra_type(self, key: str) -> str:
        if self.sqlite:
            return f"json_type(extra, {self.bind(_extra_path(key))})"
        return f"json_typeof(extra -> CAST({self.bind(key)} AS text))"

    def extra_number(self, key: str) -> str:
        if self.sqlite:
            return (
                f"(CASE WHEN json_type(extra, {self.bind(_extra_path(key))}) IN ('integer', 'real') "
                f"THEN json_extract(extra, {self.bind(_extra_path(key))}) END)"
            )
        return (
            f"(CASE WHEN json_typeof(extra -> CAST({self.bind(key)} AS text)) = 'number' "
            f"THEN CAST(extra ->> CAST({self.bind(key)} AS text) AS double precision) END)"
        )

    def extra_text(self, key: str) -> str:
        if self.sqlite:
            return (
                f"(CASE WHEN json_type(extra, {self.bind(_extra_path(key))}) = 'text' "
                f"THEN json_extract(extra, {self.bind(_extra_path(key))}) END)"
            )
        return (
            f"(CASE WHEN json_typeof(extra -> CAST({self.bind(key)} AS text)) = 'string' "
            f"THEN extra ->> CAST({self.bind(key)} AS text) END)"
        )

    def text_number(self, column: str) -> str:
        """A text column's value as a number when it holds a JSON number, else NULL."""
        if self.sqlite:
            return (
                f"(CASE WHEN json_valid({column}) AND json_type({column}) IN ('integer', 'real') "
                f"THEN CAST({column} AS REAL) END)"
            )
        return f"(CASE WHEN {column} ~ {self.bind(_JSON_NUMBER)} THEN CAST({column} AS double precision) END)"

    # -- nodes ----------------------------------------------------------------------------

    def node(self, node: Node) -> str:
        if isinstance(node, BoolOp):
            joiner = " AND " if node.op == "and" else " OR "
            return "(" + joiner.join(self.node(n) for n in _deepest_first(node)) + ")"
        if isinstance(node, Not):
            if isinstance(node.node, Not):  # every test is two-valued: not not x is x
                return self.node(node.node.node)
            if isinstance(node.node, BoolOp):  # already in parentheses: one group fewer to keep open
                return f"NOT {self.node(node.node)}"
            return f"(NOT {self.node(node.node)})"
        if isinstance(node, Word):
            pattern = _like(node.text)
            return (
                "("
                + " OR ".join(
                    f"LOWER({c}) LIKE {self.bind(pattern)} ESCAPE '\\'" for c in ("hypothesis", "notes", "exp_id")
                )
                + ")"
            )
        return self.test(node)

    def test(self, test: Test) -> str:
        if test.op in ("notin", "!=", "!~", "notnull"):
            positive = {"notin": "in", "!=": "=", "!~": "~", "notnull": "null"}[test.op]
            return f"(NOT {self.test(Test(test.field, positive, test.values, test.column))})"
        kind = field_kind(test.field)
        if kind == "extra":
            return self.extra_test(test)
        column = test.field
        if test.op == "null":
            return f"{column} IS NULL" if kind in ("number", "time") else f"{column} = ''"
        if test.op == "~":
            if kind in ("number", "time"):
                raise InvalidInput("filter", f"~ matches text; {column} is a {kind}", column=test.column)
            return f"LOWER({column}) LIKE {self.bind(_like(test.values[0].text))} ESCAPE '\\'"
        if kind == "number":
            if test.op == "in":
                marks = ", ".join(self.bind(v.number) for v in test.values)
                return f"({column} IS NOT NULL AND {column} IN ({marks}))"
            return f"({column} IS NOT NULL AND {column} {test.op} {self.bind(test.values[0].number)})"
        if kind == "time":
            if test.op == "in":
                marks = ", ".join(self.bind(self.db_time(parse_time(v.text))) for v in test.values)
                return f"{column} IN ({marks})"
            return f"{column} {test.op} {self.bind(self.db_time(parse_time(test.values[0].text)))}"
        if kind == "status":
            marks = ", ".join(self.bind(status_value(v.text)) for v in test.values)
            return f"status IN ({marks})"
        if kind == "id":
            if test.op in ("=", "in"):
                forms = list(dict.fromkeys(f for v in test.values for f in shown_forms(v.text)))
                return f"{column} IN ({', '.join(self.bind(f) for f in forms)})"
            typed = shown_forms(test.values[0].text)[-1]
            if column == "exp_id":  # numeric-aware, on the exp_key index
                return f"exp_key {test.op} {self.bind(exp_sort_key(typed))}"
            return f"{column}{self.collate} {test.op} {self.bind(typed)}"
        # text
        if test.op == "in":
            return f"{column} IN ({', '.join(self.bind(v.text) for v in test.values)})"
        value = test.values[0]
        if value.number is not None and test.op in _TEXT_ORDER_OPS:
            return f"({self.text_number(column)} {test.op} {self.bind(value.number)}) IS TRUE"
        return f"{column}{self.collate} {test.op} {self.bind(value.text)}"

    def extra_test(self, test: Test) -> str:
        key = test.extra_key or ""
        if test.op == "null":
            return f"({self.extra_type(key)} IS NULL OR {self.extra_type(key)} = 'null')"
        if test.op == "~":
            return f"(LOWER({self.extra_text(key)}) LIKE {self.bind(_like(test.values[0].text))} ESCAPE '\\') IS TRUE"
        if test.op in ("=", "in"):
            parts = []
            for value in test.values:
                parts.append(f"({self.extra_text(key)} = {self.bind(value.text)}) IS TRUE")
                if value.number is not None:
                    parts.append(f"({self.extra_number(key)} = {self.bind(value.number)}) IS TRUE")
            return "(" + " OR ".join(parts) + ")"
        value = test.values[0]
        if value.number is not None:
            return f"({self.extra_number(key)} {test.op} {self.bind(value.number)}) IS TRUE"
        return f"({self.extra_text(key)}{self.collate} {test.op} {self.bind(value.text)}) IS TRUE"


def compile_filter(node: Node, *, sqlite: bool, db_time: Callable[[Any], Any]) -> tuple[str, list[Any]]:
    """``(where, params)``: the SQL of ``node`` (``?`` placeholders) and its values.
    ``db_time``: a UTC datetime in the driver's form (``StoreCore.db_time``)."""
    compiler = _Compiler(sqlite, db_time)
    sql = compiler.node(node)
    return sql, compiler.params


# -- sort orders ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SortPhase:
    """The trials one phase of a sort walks (``where``) and the expression they are
    ordered by (None: by ``seq`` alone), each with its parameters."""

    where: str
    where_params: tuple[Any, ...]
    expr: str | None
    expr_params: tuple[Any, ...]


#: Sort keys that are not fields.
SORT_ALIASES = {"metric": "core_metric"}


def parse_sort(sort: str) -> tuple[str, bool | None]:
    """``(key, descending)`` of a sort as the API and the table take it: a field, ``seq``,
    ``metric`` or ``extra.KEY``, with a leading ``-`` for descending (``descending`` None
    when the text does not say). :class:`InvalidInput` (``sort``) for an unknown key."""
    text = (sort or "seq").strip()
    descending: bool | None = None
    if text.startswith("-"):
        text, descending = text[1:], True
    elif text.startswith("+"):
        text, descending = text[1:], False
    key = SORT_ALIASES.get(text, text)
    field = resolve_field(key)
    if field is None or field in ("created_at", "updated_at") or (field.startswith("extra.") and '"' in field):
        raise InvalidInput(
            "sort",
            f"unknown sort {sort!r}; sort by seq, exp_id, a trial field (core_metric, "
            "delta_vs_best, status, ...) or extra.KEY, with a leading - for descending",
        )
    return field, descending


def sort_phases(key: str, *, sqlite: bool) -> tuple[SortPhase, ...]:
    """The phases of sort ``key`` (from :func:`parse_sort`) in order."""
    if key == "seq":
        return (SortPhase("", (), None, ()),)
    if key == "exp_id":
        return (SortPhase("", (), "exp_key", ()),)
    collate = "" if sqlite else ' COLLATE "C"'
    kind = field_kind(key)
    if kind == "number":
        return (SortPhase(f" AND {key} IS NOT NULL", (), key, ()), SortPhase(f" AND {key} IS NULL", (), None, ()))
    if kind == "extra":
        extra = _Compiler(sqlite, lambda v: v)
        name = key[6:]
        number, number_params = extra.extra_number(name), tuple(extra.params)
        extra.params.clear()
        text, text_params = extra.extra_text(name), tuple(extra.params)
        return (
            SortPhase(f" AND {number} IS NOT NULL", number_params, number, number_params),
            SortPhase(
                f" AND {number} IS NULL AND {text} IS NOT NULL",
                number_params + text_params,
                f"{text}{collate}",
                text_params,
            ),
            SortPhase(f" AND {number} IS NULL AND {text} IS NULL", number_params + text_params, None, ()),
        )
    return (SortPhase("", (), f"{key}{collate}", ()),)


def sort_value(key: str, trial: Any) -> tuple[int, Any]:
    """``(phase, value)`` of ``trial`` under sort ``key``: what its keyset holds."""
    if key == "seq":
        return 0, None
    if key == "exp_id":
        return 0, exp_sort_key(trial.exp_id)
    kind = field_kind(key)
    if kind == "extra":
        value = trial.extra.get(key[6:])
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return 0, value
        if isinstance(value, str):
            return 1, value
        return 2, None
    value = getattr(trial, key)
    if kind == "number":
        return (0, value) if value is not None else (1, None)
    return 0, value.value if kind == "status" else value
