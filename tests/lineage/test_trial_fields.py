"""The field table (``lineage.trial_fields``) is the trial: same names, same order, the
writable ones recordable, and the schemas generated from it say what the ledger checks."""

from __future__ import annotations

import re

import pytest

from lineage.domain import TRIAL_FIELD_NAMES, WRITABLE_FIELDS, FailureLabel
from lineage.errors import InvalidInput
from lineage.trial_fields import (
    AGENT_FIELDS,
    DEFAULT_LIST_FIELDS,
    STATUS_MEANINGS,
    TRIAL_FIELDS,
    changes_schema,
    check_fields,
    record_schema,
    select_fields,
    trial_output_schema,
)


def test_the_table_is_the_trial() -> None:
    assert tuple(spec.name for spec in TRIAL_FIELDS) == TRIAL_FIELD_NAMES
    assert {spec.name for spec in TRIAL_FIELDS if spec.recordable} == set(WRITABLE_FIELDS) - {"delta_vs_best"}
    assert all(spec.description.strip() for spec in TRIAL_FIELDS)
    assert list(STATUS_MEANINGS) == [label.value for label in FailureLabel]


def test_the_schemas_hold_types_the_status_enum_and_what_is_required() -> None:
    record = record_schema(full=True)
    assert record["required"] == ["status"] and record["additionalProperties"] is False
    props = record["properties"]
    # a writer may also ask for the ledger's verdict, with its margin; a stored status is never "auto"
    assert props["status"]["enum"] == [label.value for label in FailureLabel] + ["auto"]
    assert props["keep_margin"]["anyOf"][0] == {"type": "number", "minimum": 0}
    assert "auto" not in trial_output_schema()["properties"]["status"]["enum"]
    assert props["hypothesis"]["maxLength"] == 65_536 and props["exp_id"]["maxLength"] == 512
    assert props["train_s"]["anyOf"][0]["minimum"] == 0
    assert props["ig_clip_scale_frac_low"]["anyOf"][0]["maximum"] == 1
    # the portable dialect: one type per schema (clients map tools onto single-type dialects)
    assert all(not isinstance(p.get("type"), list) for p in props.values())
    assert "keep:" in props["status"]["description"] and "crash:" in props["status"]["description"]
    assert "seq" not in props and "delta_vs_best" not in props
    changes = changes_schema()
    assert "exp_id" not in changes["properties"] and "status" in changes["properties"]
    assert changes["minProperties"] == 1


def test_a_field_whose_description_allows_null_takes_null_in_the_schemas() -> None:
    said = {spec.name for spec in TRIAL_FIELDS if re.search(r"\bnull\b", spec.description)}
    assert "parent_exp" in said
    for schema in (record_schema(), record_schema(full=True), changes_schema()):
        for name, prop in schema["properties"].items():
            takes_null = {"type": "null"} in prop.get("anyOf", [])
            assert takes_null or name not in said, name
    # a stored trial's parent is always text ("" for a root)
    assert trial_output_schema()["properties"]["parent_exp"]["type"] == "string"


def test_field_selection() -> None:
    assert check_fields(None) == DEFAULT_LIST_FIELDS
    assert check_fields(["exp_id", "extra", "exp_id"]) == ("exp_id", "extra")
    with pytest.raises(InvalidInput) as bad:
        check_fields(["exp_id", "lr"])
    assert bad.value.field == "fields" and "'lr'" in bad.value.message


def test_the_agents_record_schema_lists_the_agents_fields_and_names_the_others() -> None:
    agent = record_schema()
    assert set(agent["properties"]) == set(AGENT_FIELDS) | {"keep_margin", "rerun_of"}
    assert agent["required"] == ["status"] and agent["additionalProperties"] is True
    # A²TGPO's clip-scale fields and val_bpb are taken, named once, not listed field by field
    assert "val_bpb" in agent["description"] and "ig_clip_scale_*" in agent["description"]
    assert not any(name.startswith("ig_clip_scale") or name == "val_bpb" for name in agent["properties"])
    assert all(prop.get("description") for prop in agent["properties"].values())


def test_fields_take_extra_keys() -> None:
    assert check_fields(["exp_id", "extra.commit", "extra._git.patch"]) == (
        "exp_id",
        "extra.commit",
        "extra._git.patch",
    )
    trial = {"exp_id": "1", "extra": {"commit": "abc", "lr.matrix": 0.1, "_git": {"patch": "+x", "subject": "s"}}}
    names = ("exp_id", "extra.commit", "extra.lr.matrix", "extra._git.subject", "extra.missing")
    assert select_fields(trial, names) == {
        "exp_id": "1",
        "extra.commit": "abc",
        "extra.lr.matrix": 0.1,
        "extra._git.subject": "s",
        "extra.missing": None,
    }
    with pytest.raises(InvalidInput) as bad:
        check_fields(["extra."])
    assert bad.value.field == "fields"
