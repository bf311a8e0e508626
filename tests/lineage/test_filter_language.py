"""The filter language (lineage.filter_language) and its SQL (lineage.store.filter_sql):
the grammar, errors with their column, and on both backends the same rows as a plain
Python reading of the expression over a random sweep with a results file's extra keys."""

from __future__ import annotations

import operator
import random
import re
from typing import Any

import pytest

from lineage.domain import FailureLabel, Trial
from lineage.errors import InvalidInput
from lineage.exp_ids import exp_sort_key, shown_forms
from lineage.filter_language import BoolOp, Not, Word, field_kind, parse
from lineage.filter_language import Test as Cmp
from lineage.service import Ledger
from tests.sweeps import random_sweep

# -- the grammar ------------------------------------------------------------------------------


def test_not_binds_tighter_than_and_and_and_than_or() -> None:
    tree = parse("a or b and not c")
    assert isinstance(tree, BoolOp) and tree.op == "or"
    assert tree.nodes[0] == Word("a", 1)
    right = tree.nodes[1]
    assert isinstance(right, BoolOp) and right.op == "and"
    assert right.nodes[0] == Word("b", 6) and right.nodes[1] == Not(Word("c", 16))


def test_parentheses_and_juxtaposition_group_as_written() -> None:
    tree = parse("(status = keep or status = discard) warmup")
    assert isinstance(tree, BoolOp) and tree.op == "and"
    assert isinstance(tree.nodes[0], BoolOp) and tree.nodes[0].op == "or"
    assert tree.nodes[1] == Word("warmup", 37)


def test_keywords_fields_and_aliases_in_any_case() -> None:
    tree = parse("METRIC < 1 AND Label IN (keep, crash) Or description CONTAINS 'x'")
    assert isinstance(tree, BoolOp) and tree.op == "or"
    first = tree.nodes[0]
    assert isinstance(first, BoolOp)
    assert first.nodes[0] == Cmp("core_metric", "<", first.nodes[0].values, 1)  # type: ignore[union-attr]
    assert first.nodes[1].field == "status" and first.nodes[1].op == "in"  # type: ignore[union-attr]
    assert tree.nodes[1].field == "hypothesis" and tree.nodes[1].op == "~"  # type: ignore[union-attr]


def test_extra_keys_plain_and_quoted() -> None:
    assert parse("extra.memory_gb >= 45").field == "extra.memory_gb"  # type: ignore[union-attr]
    assert parse('extra."mem gb" = 3').field == "extra.mem gb"  # type: ignore[union-attr]
    assert parse("extra.a.b = x").field == "extra.a.b"  # type: ignore[union-attr]


def test_empty_expression_is_no_filter() -> None:
    assert parse("") is None and parse("   ") is None


@pytest.mark.parametrize(
    ("source", "column", "words"),
    [
        ("status = kep", 10, "unknown status"),
        ("core_metric < abc", 15, "is a number"),
        ("(status = keep", 15, "expected ')'"),
        ("core_metric <", 14, "expected a value"),
        ("nosuchfield = 3", 1, "unknown field 'nosuchfield'"),
        ("status = keep and", 18, "got the end"),
        ("hypothesis ~ 'open", 14, "not closed"),
        ("status in (keep, crash", 23, "expected ',' or ')'"),
        ("specialist is nul", 15, "expected null"),
        ("status > keep", 8, "status compares with"),
        ("status = = keep", 10, "expected a value"),
        ("x ) y", 3, "unexpected ')'"),
        ("created_at > yesterday", 14, "not an ISO 8601 time"),
    ],
)
def test_errors_name_the_filter_and_point_at_the_column(source: str, column: int, words: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse(source)
    assert info.value.field == "filter"
    assert info.value.column == column, str(info.value)
    assert words in info.value.reason
    excerpt, caret = info.value.reason.splitlines()[-2:]
    assert excerpt.strip() == source.strip()
    assert caret.index("^") - 2 == column - 1  # under the character, past the two-space indent


def test_a_very_long_or_deeply_nested_expression_is_refused_not_crashing() -> None:
    with pytest.raises(InvalidInput):
        parse("x " * 1500)
    with pytest.raises(InvalidInput, match="nested deeper"):
        parse("not " * 200 + "x")
    with pytest.raises(InvalidInput, match="nested deeper"):
        parse("(" * 200 + "x" + ")" * 200)


# -- a Python reading of an expression (the reference the SQL is checked against) -------------

_JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_OPS = {"=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def reference(node: Any, trial: Trial) -> bool:
    if isinstance(node, BoolOp):
        results = [reference(n, trial) for n in node.nodes]
        return all(results) if node.op == "and" else any(results)
    if isinstance(node, Not):
        return not reference(node.node, trial)
    if isinstance(node, Word):
        needle = node.text.lower()
        return any(needle in text.lower() for text in (trial.hypothesis, trial.notes, trial.exp_id))
    negated = {"notin": "in", "!=": "=", "!~": "~", "notnull": "null"}
    if node.op in negated:
        return not reference(Cmp(node.field, negated[node.op], node.values, node.column), trial)
    kind = field_kind(node.field)
    if kind == "extra":
        value = trial.extra.get(node.field[6:])
        if node.op == "null":
            return value is None
        if node.op == "~":
            return isinstance(value, str) and node.values[0].text.lower() in value.lower()
        if node.op in ("=", "in"):
            return any(
                (isinstance(value, str) and value == v.text)
                or (v.number is not None and _is_number(value) and value == v.number)
                for v in node.values
            )
        literal = node.values[0]
        if literal.number is not None:
            return _is_number(value) and _OPS[node.op](value, literal.number)
        return isinstance(value, str) and _OPS[node.op](value, literal.text)
    value = getattr(trial, node.field)
    if kind == "status":
        value = value.value
    if node.op == "null":
        return value is None if kind == "number" else value == ""
    if node.op == "~":
        return node.values[0].text.lower() in value.lower()
    if kind == "number":
        return value is not None and any(
            _OPS["=" if node.op == "in" else node.op](value, v.number) for v in node.values
        )
    if kind == "status":
        return value in {FailureLabel.parse(v.text).value for v in node.values}
    if kind == "id":
        if node.op in ("=", "in"):
            return value in {form for v in node.values for form in shown_forms(v.text)}
        typed = shown_forms(node.values[0].text)[-1]
        if node.field == "exp_id":
            return _OPS[node.op](exp_sort_key(value), exp_sort_key(typed))
        return _OPS[node.op](value, typed)
    if node.op == "in":
        return value in {v.text for v in node.values}
    literal = node.values[0]
    if literal.number is not None and node.op in ("<", "<=", ">", ">="):
        return bool(_JSON_NUMBER.fullmatch(value)) and _OPS[node.op](float(value), literal.number)
    return _OPS[node.op](value, literal.text)


# -- SQL against the reference ---------------------------------------------------------------

ATOMS = (
    "status = keep",
    "status != discard",
    "status in (crash, discard, baseline)",
    "label = eval_budget_overrun",
    "core_metric < 1",
    "core_metric >= 0.95",
    "metric > 33",
    "core_metric is null",
    "core_metric is not null",
    "delta_vs_best < 0",
    "delta_vs_best >= 0",
    "delta_vs_best != 0",
    "val_bpb is null",
    "specialist is null",
    "specialist = grpo-baseline",
    "specialist ~ atpo",
    "specialist != ''",
    "hypothesis ~ clip",
    "hypothesis !~ IG",
    "notes ~ turn",
    "clip",
    "IG",
    "'prompt, turn'",
    "turn",
    "exp_id > 020",
    "exp_id <= exp_010",
    "exp_id = exp_007",
    "exp_id in (001, exp_002, 0003)",
    "parent_exp = exp_000",
    "parent = 003",
    "parent_exp is null",
    "parent_exp > 010",
    "expected_delta < 0",
    "expected_delta >= -0.01",
    "expected_delta ~ 0.0",
    "extra.memory_gb >= 45",
    "extra.memory_gb < 44.5",
    "extra.memory_gb = 44",
    "extra.memory_gb is null",
    "extra.memory_gb in (44, 46.5)",
    "extra.commit = 1234567",
    "extra.commit ~ ab",
    "extra.commit > 5",
    "extra.commit >= b",
    "extra.commit is not null",
    "extra.mixed > 2",
    "extra.mixed = two",
    "extra.mixed ~ o",
    "extra.mixed is null",
    "extra.flag = true",
    "extra.flag is null",
    'extra."odd key" = 1',
    "extra.nowhere = 1",
    "train_s > 100",
    "seq < 10",
    "seq >= 25",
)


def _expressions(rng: random.Random, count: int) -> list[str]:
    out = list(ATOMS)
    for _ in range(count):

        def build(depth: int) -> str:
            if depth == 0 or rng.random() < 0.3:
                atom = rng.choice(ATOMS)
                return f"not {atom}" if rng.random() < 0.2 else atom
            joiner = rng.choice([" and ", " or ", " "])
            inner = joiner.join(build(depth - 1) for _ in range(rng.randint(2, 3)))
            return f"({inner})" if rng.random() < 0.5 else (f"not ({inner})" if rng.random() < 0.3 else inner)

        out.append(build(3))
    return out


def _with_extra(rng: random.Random, trials: list[Trial]) -> list[Trial]:
    out = []
    for trial in trials:
        extra: dict[str, Any] = {}
        roll = rng.random()
        if roll < 0.8:
            extra["memory_gb"] = rng.choice([44, 44.0, 46.5, round(rng.uniform(40, 50), 1)])
        if rng.random() < 0.9:
            extra["commit"] = rng.choice([f"{rng.getrandbits(28):07x}", "1234567", "abc1234", "b"])
        mixed = rng.random()
        extra["mixed"] = 3 if mixed < 0.3 else "two" if mixed < 0.6 else None if mixed < 0.7 else 1.5
        if rng.random() < 0.3:
            extra["flag"] = rng.random() < 0.5
        if rng.random() < 0.2:
            extra["odd key"] = rng.choice([1, "1", 2])
        delta = (
            trial.expected_delta if rng.random() < 0.5 else rng.choice(["-0.002", "+0.01", "0.0", "1e-3", "soon", ""])
        )
        out.append(trial.with_changes(extra=extra, expected_delta=delta))
    return out


def test_sql_gives_the_rows_of_the_python_reading(ledger: Ledger) -> None:
    rng = random.Random(20)
    trials = _with_extra(rng, random_sweep(rng, 60, lower_is_better=True))
    ledger.tables.import_trials("sweep", trials, create_with={"lower_is_better": True})
    stored = list(ledger.tables.stream_trials("sweep"))
    checked = 0
    for expression in _expressions(rng, 120):
        tree = parse(expression)
        expected = [t.exp_id for t in stored if reference(tree, t)]
        got = [t.exp_id for t in ledger.tables.iter_trials_page("sweep", expression=expression)]
        assert got == expected, expression
        page = ledger.tables.trials_query("sweep", limit=5, expression=expression)
        assert page.page.total == len(expected), expression
        checked += bool(expected) and len(expected) < len(stored)
    assert checked > 60  # most expressions split the sweep: the comparison says something


def test_injection_attempts_stay_data(ledger: Ledger) -> None:
    hostile = "x'); DROP TABLE trials; --"
    ledger.tables.import_trials(
        "p",
        [Trial(exp_id="000", status=FailureLabel.KEEP, hypothesis=f"a {hostile} b", extra={"k'ey": hostile, 'q"': 1})],
        create_with={},
    )
    for expression in (
        f'hypothesis ~ "{hostile}"',
        f'extra."k\'ey" = "{hostile}"',
        f'"{hostile}"',
        "hypothesis ~ '%'",
        "hypothesis ~ '_'",
        "exp_id = \"000' OR '1'='1\"",
    ):
        rows = [t.exp_id for t in ledger.tables.iter_trials_page("p", expression=expression)]
        assert rows == (
            ["000"] if "OR" not in expression and "%" not in expression and "'_'" not in expression else []
        ), expression
    with pytest.raises(InvalidInput) as info:
        list(ledger.tables.iter_trials_page("p", expression="status; DROP TABLE trials = 1"))
    assert info.value.field == "filter"
    with pytest.raises(InvalidInput):
        list(ledger.tables.iter_trials_page("p", expression='extra."a""b" = 1'))
    assert ledger.projects.project("p").trial_count == 1 and len(list(ledger.tables.stream_trials("p"))) == 1


def test_the_explorer_selection_takes_the_filter(ledger: Ledger) -> None:
    from lineage.browse.explore import ExploreQuery

    trials = [
        Trial(
            exp_id=f"{i:03d}",
            status=FailureLabel.KEEP if i % 2 else FailureLabel.DISCARD,
            core_metric=1.0 - i / 100,
            extra={"memory_gb": 40 + i},
        )
        for i in range(10)
    ]
    ledger.tables.import_trials("p", trials, create_with={})
    answer = ledger.browse.explore(
        "p", ExploreQuery(metrics=("core_metric",), filters={"expression": "status = keep and extra.memory_gb >= 45"})
    )
    assert [t["exp_id"] for t in answer["trials"]] == ["005", "007", "009"]


def test_a_projects_metric_name_filters_as_core_metric(ledger) -> None:  # type: ignore[no-untyped-def]
    """A loop writes its metric's own name (``val_fid < 60``), as its table shows it."""
    from lineage.errors import InvalidInput

    ledger.projects.create_project("fid", metric_name="val_fid", lower_is_better=True)
    for value in (55.0, 70.0):
        ledger.recording.record_trial("fid", {"status": "keep", "core_metric": value})
    found = ledger.tables.trials_page("fid", expression="val_fid < 60").trials
    assert [t.core_metric for t in found] == [55.0]
    with pytest.raises(InvalidInput) as refused:
        ledger.tables.trials_page("fid", expression="val_fdi < 60")
    assert "val_fid" in refused.value.reason  # the project's own name is listed among the known
