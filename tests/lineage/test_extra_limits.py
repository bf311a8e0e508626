"""``extra``'s limits (keys, depth, bytes) hold on every write path, in one place
(:func:`lineage.domain.check_extra`), and a project's pages list a bounded number of its keys."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lineage.browse.columns import MAX_FILE_COLUMNS
from lineage.domain import (
    MAX_EXTRA_BYTES,
    MAX_EXTRA_DEPTH,
    MAX_EXTRA_KEYS,
    FailureLabel,
    Trial,
    check_extra,
)
from lineage.errors import InvalidInput
from lineage.service import Ledger


def _nested(levels: int) -> dict[str, Any]:
    """An object whose containers nest ``levels`` deep (the top object is level 1)."""
    value: Any = 1
    for level in range(levels - 1):
        value = [value] if level % 2 else {"k": value}
    return {"top": value}


def _sized(size: int) -> dict[str, Any]:
    """One key whose compact JSON is exactly ``size`` bytes."""
    overhead = len(json.dumps({"k": ""}, separators=(",", ":")))
    return {"k": "é" * ((size - overhead) // 2) + "x" * ((size - overhead) % 2)}


@pytest.mark.parametrize(
    ("at_limit", "past_it", "words"),
    [
        ({f"k{i}": i for i in range(MAX_EXTRA_KEYS)}, {f"k{i}": i for i in range(MAX_EXTRA_KEYS + 1)}, "keys"),
        (_nested(MAX_EXTRA_DEPTH), _nested(MAX_EXTRA_DEPTH + 1), "levels"),
        (_sized(MAX_EXTRA_BYTES), _sized(MAX_EXTRA_BYTES + 1), "bytes"),
    ],
)
def test_each_limit_takes_its_value_and_refuses_one_more(at_limit: Any, past_it: Any, words: str) -> None:
    check_extra(at_limit)
    with pytest.raises(InvalidInput, match=f"the limit (is|of) [0-9,]+ {words}") as info:
        check_extra(past_it)
    assert info.value.field == "extra"


def test_a_very_deep_object_is_refused_without_recursion() -> None:
    with pytest.raises(InvalidInput, match="levels"):
        check_extra(_nested(200_000))
    with pytest.raises(InvalidInput, match="JSON"):
        check_extra({"k": {1, 2}})


def test_every_write_path_refuses_an_extra_past_a_limit(ledger: Ledger) -> None:
    too_many = {f"k{i}": i for i in range(MAX_EXTRA_KEYS + 1)}
    ledger.projects.create_project("p")
    with pytest.raises(InvalidInput) as recorded:
        ledger.recording.record_trial("p", {"status": "keep", "extra": too_many})
    with pytest.raises(InvalidInput) as batched:
        ledger.recording.record_trials("p", [{"status": "keep"}, {"status": "keep", "extra": too_many}])
    stored = ledger.recording.record_trial("p", {"status": "keep", "extra": {"a": 1}}).trial
    with pytest.raises(InvalidInput) as updated:
        ledger.recording.update_trial("p", stored.exp_id, {"extra": _nested(MAX_EXTRA_DEPTH + 1)})
    rows = [Trial(exp_id="100", status=FailureLabel.KEEP), Trial(exp_id="101", extra=too_many)]
    with pytest.raises(InvalidInput) as imported:
        ledger.tables.import_trials("p", rows, locate=lambda index: index + 2)
    assert recorded.value.field == updated.value.field == imported.value.field == "extra"
    assert batched.value.field == "trials[1].extra"
    assert imported.value.line == 3
    assert [t.exp_id for t in ledger.tables.stream_trials("p")] == [stored.exp_id]  # nothing else stored
    assert ledger.trials.trial("p", stored.exp_id).extra == {"a": 1}


def test_pages_list_a_bounded_number_of_extra_keys(ledger: Ledger) -> None:
    wide = {f"key{i:04d}": i for i in range(MAX_EXTRA_KEYS - 1)}
    ledger.tables.import_trials(
        "p", [Trial(exp_id="000", extra={"_own": 1, **wide}), Trial(exp_id="001", extra={"key0998": 1})], create_with={}
    )
    columns = ledger.browse.project_columns("p")
    assert len(columns.file) == MAX_FILE_COLUMNS and columns.more_file
    assert columns.file[0].name == "key0998"  # the most common key first
    assert all(not c.name.startswith("_") for c in columns.file)
    assert columns.column("extra.key0500").name == "key0500"  # any other by name
    few = {"a": 1, "b": 2}
    ledger.tables.import_trials("q", [Trial(exp_id="000", extra=few)], create_with={})
    narrow = ledger.browse.project_columns("q")
    assert [c.name for c in narrow.file] == ["a", "b"] and not narrow.more_file
