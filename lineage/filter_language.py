"""The trial filter language: one expression shared by the trials table, the explorer's
selection, the API (``?filter=``), MCP and the CLI (``lineage trials --filter``).

Examples::

    status = keep and core_metric < 0.99
    extra.memory_gb >= 45 or status in (crash, discard)
    not hypothesis ~ "warmup" and exp_id > exp_1000
    warmup                       # a bare word: hypothesis, notes or exp_id contains it
    specialist is null           # empty text or no value
    extra.commit = a1b2c3d and delta_vs_best < 0

Grammar (keywords and field names are case-insensitive; ``#`` is not a comment)::

    expr       := or
    or         := and ("or" and)*
    and        := unary (["and"] unary)*        # juxtaposition means "and"
    unary      := "not" unary | primary
    primary    := "(" expr ")" | test | word
    test       := field op value
                | field ["not"] "in" "(" value ("," value)* ")"
                | field "is" ["not"] "null"
    op         := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">=" | "~" | "!~" | "contains"
    field      := NAME | "extra" "." (NAME | STRING)
    value      := NUMBER | STRING | NAME         # a bare NAME is text: status = keep
    word       := STRING | NAME | NUMBER         # text match on hypothesis, notes, exp_id
    NAME       := a letter or "_", then letters, digits and _ . : / + -   (unicode letters too)
    NUMBER     := [+-]? digits ["." digits] [("e"|"E") [+-] digits]
    STRING     := '...' or "..." with \\ escaping the quote and itself

Meaning:

* Fields are the trial's (:data:`lineage.trial_fields.TRIAL_FIELDS`) with aliases
  (``metric`` → ``core_metric``, ``label``/``failure_label`` → ``status``, ``description``
  → ``hypothesis``, ``parent`` → ``parent_exp``, ``id``/``exp`` → ``exp_id``, ``created`` →
  ``created_at``), and ``extra.KEY`` for a key of the trial's ``extra`` (a results file's
  own columns: ``extra.memory_gb``, ``extra.commit``; quote odd keys: ``extra."mem gb"``).
* Number fields compare numerically with a number; a trial without the value matches no
  comparison (and ``is null``). Text fields compare as text (code-point order); an empty
  text is null. ``status`` takes a known label. ``exp_id``, ``parent_exp`` and
  ``baseline_exp`` take ids as shown (``exp_1995``) and order them numeric-aware
  (:mod:`lineage.exp_ids`). ``created_at``/``updated_at`` take an ISO 8601 time (UTC
  when it has no zone).
* ``extra.KEY`` with a number compares the trial's numeric values numerically (``=``
  also matches the same text, so an all-digit commit hash is found); with text, its text
  values as text.
* ``~``/``contains`` (``!~``: does not contain) is a case-insensitive substring match.
* ``not`` binds tighter than ``and``, ``and`` tighter than ``or``. Every test is two-valued:
  ``not (core_metric > 1)`` also holds for a trial without a metric.

:func:`parse` gives the tree (:class:`Test`, :class:`Word`, :class:`Not`, :class:`BoolOp`);
``lineage.store.filter_sql`` compiles it to one parameterised WHERE clause per backend
(values are always bound, never spliced into the SQL). A bad expression raises
:class:`~lineage.errors.InvalidInput` on field ``filter`` with the 1-based ``column`` of
the offending character and a caret excerpt in the message. The limits
(:data:`MAX_LENGTH` characters, :data:`MAX_TERMS` terms, :data:`MAX_DEPTH` levels) keep every
expression the parser takes inside what both backends run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from lineage.domain import FailureLabel
from lineage.errors import InvalidInput
from lineage.exp_ids import shown_forms
from lineage.trial_fields import TRIAL_FIELDS

__all__ = [
    "ALIASES",
    "FIELD_KINDS",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "MAX_TERMS",
    "BoolOp",
    "Node",
    "Not",
    "Test",
    "Word",
    "field_kind",
    "parse",
    "resolve_field",
]

#: Longest expression accepted (characters).
MAX_LENGTH = 2_000
#: Deepest nesting of parentheses and ``not``. SQLite's parser keeps about 100 groups
#: open at once; the compiled SQL of the worst nesting (``a or not (b and (c or not (...``)
#: overflows it near 75 levels, so 40 leaves room for the query around the filter.
MAX_DEPTH = 40
#: Most terms: words, tests, and each value of an ``in`` list. SQLite refuses an expression
#: tree deeper than 1,000, and a chain of terms is as deep as it is long (an ``extra`` value
#: compiles to two alternatives), so 256 terms stay well inside it. PostgreSQL runs both
#: caps without complaint.
MAX_TERMS = 256

#: Field name -> kind: ``number``, ``text``, ``status``, ``id`` (ids as shown, numeric-aware
#: order), ``time`` (the ledger's stored times).
FIELD_KINDS: dict[str, str] = {}
for _spec in TRIAL_FIELDS:
    if _spec.name == "extra":
        continue
    if _spec.name in ("exp_id", "parent_exp", "baseline_exp"):
        FIELD_KINDS[_spec.name] = "id"
    elif _spec.name in ("created_at", "updated_at"):
        FIELD_KINDS[_spec.name] = "time"
    else:
        FIELD_KINDS[_spec.name] = _spec.kind
ALIASES: dict[str, str] = {
    "metric": "core_metric",
    "label": "status",
    "failure_label": "status",
    "description": "hypothesis",
    "parent": "parent_exp",
    "id": "exp_id",
    "exp": "exp_id",
    "created": "created_at",
    "updated": "updated_at",
    "delta": "delta_vs_best",
}

_KEYWORDS = {"and", "or", "not", "in", "is", "null", "contains"}
_OPS = ("==", "!=", "<>", "<=", ">=", "!~", "=", "<", ">", "~")
_CANONICAL = {"==": "=", "<>": "!=", "contains": "~"}
_TOKEN = re.compile(
    r"""(?P<ws>\s+)
      | (?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?![\w.:/+\-]))
      | (?P<name>[^\W\d][\w.:/+\-]*)
      | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<op>==|!=|<>|<=|>=|!~|=|<|>|~)
      | (?P<punct>[(),])
      | (?P<word>[^\s()'",=<>!~]+)
    """,
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Value:
    """A literal: ``text`` as written (quotes removed), ``number`` when it is a number
    token, ``column`` where it starts."""

    text: str
    number: float | None
    column: int


@dataclass(frozen=True, slots=True)
class Test:
    """``field op value(s)``; ``field`` is a trial field or ``extra.KEY``; ``op`` is one of
    ``= != < <= > >= ~ !~ in notin null notnull``."""

    field: str
    op: str
    values: tuple[Value, ...]
    column: int

    @property
    def extra_key(self) -> str | None:
        return self.field[6:] if self.field.startswith("extra.") else None


@dataclass(frozen=True, slots=True)
class Word:
    """A bare word or string: hypothesis, notes or exp_id contains it (any case)."""

    text: str
    column: int


@dataclass(frozen=True, slots=True)
class Not:
    node: Node


@dataclass(frozen=True, slots=True)
class BoolOp:
    op: str  # "and" | "or"
    nodes: tuple[Node, ...]


Node = Test | Word | Not | BoolOp


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # number, name, string, op, punct, word, end
    text: str  # the value (strings unquoted)
    column: int  # 1-based

    @property
    def keyword(self) -> str | None:
        lowered = self.text.lower()
        return lowered if self.kind == "name" and lowered in _KEYWORDS else None


def _fail(source: str, column: int, message: str) -> InvalidInput:
    excerpt = source.replace("\n", " ").replace("\t", " ")
    start = max(0, column - 1 - 40)
    shown = excerpt[start : start + 80]
    caret = " " * (column - 1 - start) + "^"
    return InvalidInput("filter", f"{message}\n  {shown}\n  {caret}", column=column)


def _tokens(source: str) -> list[_Token]:
    out: list[_Token] = []
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:  # an unterminated quote
            raise _fail(source, position + 1, "a quoted text is not closed")
        kind = match.lastgroup or "word"
        text = match.group()
        if kind == "string":
            text = re.sub(r"\\(.)", r"\1", text[1:-1], flags=re.S)
        elif kind == "name" and text.lower() == "contains":
            kind = "op"
        if (
            kind == "string"
            and out
            and out[-1].kind == "name"
            and out[-1].text.lower() == "extra."
            and out[-1].column + 6 == position + 1
        ):  # extra."odd key"
            out[-1] = _Token("name", out[-1].text + text, out[-1].column)
        elif kind != "ws":
            out.append(_Token(kind, text, position + 1))
        position = match.end()
    out.append(_Token("end", "", len(source) + 1))
    return out


def resolve_field(name: str) -> str | None:
    """The field a name in an expression means (``extra.KEY`` kept), or None."""
    lowered = name.lower()
    if lowered.startswith("extra.") and len(name) > 6:
        return "extra." + name[6:]
    lowered = ALIASES.get(lowered, lowered)
    return lowered if lowered in FIELD_KINDS else None


def field_kind(field: str) -> str:
    """``number``, ``text``, ``status``, ``id``, ``time`` or ``extra``."""
    return "extra" if field.startswith("extra.") else FIELD_KINDS[field]


class _Parser:
    def __init__(self, source: str, names: Mapping[str, str] | None = None) -> None:
        self.source = source
        #: a project's own names of fields (its metric's name: ``val_fid`` is core_metric)
        self.names = {name.lower(): field for name, field in (names or {}).items()}
        self.tokens = _tokens(source)
        self.at = 0
        self.depth = 0
        self.terms = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.at]

    def _next(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def fail(self, token: _Token, message: str) -> InvalidInput:
        return _fail(self.source, token.column, message)

    def count_term(self, token: _Token) -> None:
        """One more term, starting at ``token``; refused past :data:`MAX_TERMS`."""
        self.terms += 1
        if self.terms > MAX_TERMS:
            raise self.fail(token, f"more than {MAX_TERMS} terms (words, tests and listed values)")

    def parse(self) -> Node:
        node = self.or_()
        if self.token.kind != "end":
            raise self.fail(self.token, f"unexpected {self.token.text!r}; expected and, or or the end")
        return node

    def or_(self) -> Node:
        nodes = [self.and_()]
        while self.token.keyword == "or":
            self._next()
            nodes.append(self.and_())
        return nodes[0] if len(nodes) == 1 else BoolOp("or", tuple(nodes))

    def and_(self) -> Node:
        nodes = [self.unary()]
        while True:
            token = self.token
            if token.keyword == "and":
                self._next()
            elif token.kind == "end" or token.keyword == "or" or token.text == ")" or token.text == ",":
                break
            nodes.append(self.unary())
        return nodes[0] if len(nodes) == 1 else BoolOp("and", tuple(nodes))

    def unary(self) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(self.token, f"nested deeper than {MAX_DEPTH}")
        try:
            if self.token.keyword == "not":
                self._next()
                return Not(self.unary())
            return self.primary()
        finally:
            self.depth -= 1

    def primary(self) -> Node:
        token = self.token
        if token.text == "(" and token.kind == "punct":
            self._next()
            node = self.or_()
            if self.token.text != ")":
                raise self.fail(self.token, f"expected ')' to close the '(' at column {token.column}")
            self._next()
            return node
        if token.kind == "end":
            raise self.fail(token, "expected a test or a word, got the end")
        if token.kind in ("op", "punct") or token.keyword in ("and", "or", "in", "is", "null"):
            raise self.fail(token, f"expected a field or a word, got {token.text!r}")
        following = self.tokens[self.at + 1]
        is_test = token.kind == "name" and (
            following.kind == "op"
            or following.keyword in ("in", "is")
            or (following.keyword == "not" and self.tokens[self.at + 2].keyword == "in")
        )
        self.count_term(token)
        if not is_test:
            self._next()
            if token.kind != "string" and not token.text:
                raise self.fail(token, "expected a word")
            return Word(token.text, token.column)
        return self.test()

    def test(self) -> Test:
        name = self._next()
        field = resolve_field(name.text) or self.names.get(name.text.lower())
        if field is None:
            known = ", ".join(sorted({*FIELD_KINDS, *self.names}))
            raise self.fail(
                name,
                f"unknown field {name.text!r}; known: {known}, or extra.KEY "
                "(a key of the trial's extra, e.g. extra.memory_gb)",
            )
        if field.startswith("extra.") and '"' in field:
            raise self.fail(name, "an extra key cannot hold '\"'")
        token = self._next()
        if token.keyword == "is":
            negate = self.token.keyword == "not"
            if negate:
                self._next()
            null = self._next()
            if null.keyword != "null":
                raise self.fail(null, "expected null after is")
            return Test(field, "notnull" if negate else "null", (), name.column)
        if token.keyword in ("in", "not"):
            negate = token.keyword == "not"
            if negate:
                self._next()  # "in"
            opening = self._next()
            if opening.text != "(":
                raise self.fail(opening, "expected '(' after in")
            values = [self.value(field)]
            while self.token.text == ",":
                self._next()
                self.count_term(self.token)
                values.append(self.value(field))
            closing = self._next()
            if closing.text != ")":
                raise self.fail(closing, "expected ',' or ')' in the list")
            return Test(field, "notin" if negate else "in", tuple(values), name.column)
        op = _CANONICAL.get(token.text.lower(), token.text)
        value = self.value(field, text_match=op in ("~", "!~"))
        if op in ("<", "<=", ">", ">=") and field_kind(field) == "status":
            raise self.fail(token, "status compares with =, !=, in or ~ only")
        return Test(field, op, (value,), name.column)

    def value(self, field: str, *, text_match: bool = False) -> Value:
        token = self._next()
        if token.kind not in ("number", "name", "string", "word") or token.keyword in ("and", "or", "not"):
            raise self.fail(token, f"expected a value, got {token.text!r}" if token.text else "expected a value")
        number = float(token.text) if token.kind == "number" else None
        kind = field_kind(field)
        if text_match:
            return Value(token.text, None, token.column)
        if kind == "number" and number is None:
            raise self.fail(token, f"{field} is a number; {token.text!r} is not")
        if kind == "status":
            try:
                FailureLabel.parse(token.text)
            except InvalidInput as bad:
                raise self.fail(token, bad.reason) from None
        if kind == "time":
            parse_time(token.text, fail=lambda message: self.fail(token, message))
        return Value(token.text, number, token.column)


def parse_time(text: str, *, fail: Callable[[str], Exception] | None = None) -> datetime:
    """An ISO 8601 time (a date alone is its midnight), in UTC."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        if fail is None:
            raise
        raise fail(f"{text!r} is not an ISO 8601 time (e.g. 2026-05-01 or 2026-05-01T06:00Z)") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def status_value(text: str) -> str:
    return FailureLabel.parse(text).value


def id_forms(text: str) -> tuple[str, ...]:
    """The stored ids a value of an id field may mean (:func:`lineage.exp_ids.shown_forms`)."""
    return shown_forms(text)


def parse(source: str, names: Mapping[str, str] | None = None) -> Node | None:
    """The tree of ``source``; None for an empty expression. Raises
    :class:`InvalidInput` (field ``filter``, ``column``) for a bad one. ``names``: a
    project's own names for fields (:func:`project_names`), read where no field has the name."""
    if not isinstance(source, str):
        raise InvalidInput("filter", "must be text")
    if len(source) > MAX_LENGTH:
        raise _fail(source[: MAX_LENGTH + 1], MAX_LENGTH + 1, f"longer than {MAX_LENGTH} characters")
    if not source.strip():
        return None
    return _Parser(source, names).parse()


def project_names(metric_name: str | None) -> dict[str, str]:
    """The names a project's filters also take: its metric's name for ``core_metric``
    (a loop writes ``val_fid < 60``, the name its table and range inputs show)."""
    if not metric_name or resolve_field(metric_name) is not None:
        return {}
    return {metric_name.lower(): "core_metric"}
