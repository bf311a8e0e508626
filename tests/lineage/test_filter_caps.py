"""The filter language's limits (characters, terms, nesting) keep every expression the
parser takes inside what both backends run: generated filters up to and past the caps
either run or are refused as a bad ``filter``, never a database error."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.browse.explore import ExploreQuery
from lineage.domain import FailureLabel, Trial
from lineage.errors import InvalidInput
from lineage.filter_language import MAX_DEPTH, MAX_LENGTH, MAX_TERMS, parse
from lineage.service import Ledger

#: Single terms, among them the ones that compile to the deepest SQL (``extra`` with a
#: number is two alternatives; a bare word three).
_TERMS = (
    "a",
    "'two words'",
    "7",
    "core_metric < 0.5",
    "metric >= -1e3",
    "status = keep",
    "status != crash",
    "hypothesis ~ warm",
    "notes !~ x",
    "expected_delta < 0",
    "specialist is null",
    "extra.k = 1",
    "extra.k >= 2.5",
    'extra."odd key" is not null',
    "extra.k ~ x",
    "exp_id > exp_1",
    "parent in (exp_1, 000)",
    "created_at > 2026-01-01",
)
_JOINERS = (" ", " and ", " or ")


@st.composite
def _lists(draw: st.DrawFn, long: bool) -> str:
    field = draw(st.sampled_from(["extra.k", "status", "exp_id", "core_metric", "hypothesis"]))
    values = {"status": ["keep", "crash"], "exp_id": ["exp_1", "2"], "core_metric": ["1", "2.5"]}.get(
        field, ["1", "x", "2.5"]
    )
    count = draw(st.one_of(st.integers(1, 8), st.integers(MAX_TERMS - 4, MAX_TERMS + 2)) if long else st.integers(1, 3))
    negate = draw(st.booleans())
    listed = ", ".join(draw(st.sampled_from(values)) for _ in range(count))
    return f"{field} {'not in' if negate else 'in'} ({listed})"


@st.composite
def _chain(draw: st.DrawFn, most: int, long_lists: bool = False) -> str:
    count = draw(st.integers(1, max(1, most)))
    term = (
        st.one_of(st.sampled_from(_TERMS), _lists(long_lists))
        if count < 4
        else st.sampled_from(_TERMS[:3] + _TERMS[11:13])
    )
    out = draw(term)
    for _ in range(count - 1):
        out += draw(st.sampled_from(_JOINERS)) + draw(term)
    return out


@st.composite
def expressions(draw: st.DrawFn) -> str:
    """A chain of terms nested in parentheses and ``not`` with siblings on either side
    (the operators alternate at random), sized around the caps: the terms' count near
    :data:`MAX_TERMS`, the nesting near :data:`MAX_DEPTH`."""
    terms = draw(st.one_of(st.integers(1, 30), st.integers(MAX_TERMS - 10, MAX_TERMS + 4)))
    target = draw(st.one_of(st.integers(0, 6), st.integers(MAX_DEPTH - 4, MAX_DEPTH + 1)))
    inner = draw(_chain(terms, long_lists=True))
    depth = 1
    while depth < target:
        shape = draw(st.sampled_from(["not", "not()", "()", "first", "last", "last not"]))
        if shape == "not":
            inner, depth = f"not {inner}", depth + 1
        elif shape == "not()":
            inner, depth = f"not ({inner})", depth + 2
        elif shape == "()":
            inner, depth = f"({inner})", depth + 1
        else:
            sibling = draw(_chain(2))
            joiner = draw(st.sampled_from(_JOINERS))
            if shape == "first":
                inner, depth = f"({inner}){joiner}{sibling}", depth + 1
            elif shape == "last":
                inner, depth = f"({sibling}{joiner}({inner}))", depth + 2
            else:
                inner, depth = f"({sibling}{joiner}not ({inner}))", depth + 3
    return inner


@pytest.fixture
def sweep(ledger: Ledger) -> Ledger:
    trials = [
        Trial(
            exp_id=f"{i:03d}",
            status=FailureLabel.KEEP if i % 2 else FailureLabel.CRASH,
            core_metric=i / 10,
            hypothesis="a warm start" if i % 3 else "two words",
            extra={"k": i, "odd key": "x"} if i % 2 else {"k": "x"},
        )
        for i in range(6)
    ]
    ledger.tables.import_trials("p", trials, create_with={})
    return ledger


def _run(ledger: Ledger, expression: str) -> list[str] | InvalidInput:
    """The rows of the trials page, its count and the explorer's selection, which must
    agree; or the refusal."""
    try:
        rows = [t.exp_id for t in ledger.tables.iter_trials_page("p", expression=expression)]
        assert ledger.tables.trials_query("p", limit=2, expression=expression).page.total == len(rows)
        explored = ledger.browse.explore(
            "p", ExploreQuery(metrics=("core_metric",), filters={"expression": expression})
        )
        assert sorted(t["exp_id"] for t in explored["trials"]) == sorted(rows)
        return rows
    except InvalidInput as refused:
        return refused


@settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(expression=expressions())
def test_a_generated_filter_runs_or_is_refused_as_a_bad_filter(sweep: Ledger, expression: str) -> None:
    answer = _run(sweep, expression)  # a database error (too deep, too many values) fails here
    if isinstance(answer, InvalidInput):
        assert answer.field == "filter"
        assert answer.column is not None


def _listed(count: int) -> str:
    return "extra.k in (" + ",".join(["1"] * count) + ")"


#: Levels of ``(a or not (b and (...))``, the nesting whose SQL keeps the most groups open.
_WORST_LEVELS = (MAX_DEPTH - 1) // 3


@pytest.mark.parametrize(
    "expression",
    [
        " ".join(["a"] * MAX_TERMS),  # the review's 996 bare words, at the cap
        " or ".join(["extra.k = 1"] * (MAX_LENGTH // 15)),
        _listed(MAX_TERMS),  # the deepest term: two alternatives a value
        "(" * (MAX_DEPTH - 1) + _listed(MAX_TERMS - MAX_DEPTH + 1) + " a)" * (MAX_DEPTH - 1),
        "(a " * (MAX_DEPTH - 1) + "a" + ")" * (MAX_DEPTH - 1),
        "not " * (MAX_DEPTH - 2) + "(" + " ".join(["a"] * (MAX_TERMS - 1)) + ")",
        "(extra.k ~ x or not (hypothesis ~ y and exp_id in (1, 2) " * _WORST_LEVELS
        + "extra.k in (1, 2)"
        + "))" * _WORST_LEVELS,
        "(extra.k = 1 or (extra.k in (1, 2) " * ((MAX_DEPTH - 1) // 2) + "a" + "))" * ((MAX_DEPTH - 1) // 2),
    ],
)
def test_filters_at_the_caps_run(sweep: Ledger, expression: str) -> None:
    assert len(expression) <= MAX_LENGTH
    answer = _run(sweep, expression)
    assert isinstance(answer, list), answer


@pytest.mark.parametrize(
    ("expression", "column"),
    [
        (" ".join(["a"] * 996), 2 * MAX_TERMS + 1),
        (_listed(MAX_TERMS + 1), len("extra.k in (") + 2 * MAX_TERMS + 1),
    ],
)
def test_one_term_past_the_cap_is_refused_at_that_term(expression: str, column: int) -> None:
    with pytest.raises(InvalidInput, match=f"more than {MAX_TERMS} terms") as info:
        parse(expression)
    assert info.value.field == "filter" and info.value.column == column
