"""The trial's fields as data: the one source of truth for what a writer may send.

Owns :data:`TRIAL_FIELDS` (per field: its JSON type, its meaning, its limits, whether a
writer sets it), :data:`STATUS_MEANINGS` (each failure label in a sentence) and the JSON
Schemas generated from them (:func:`record_schema`, :func:`changes_schema`,
:func:`trial_output_schema`), which the MCP server hands to agents as its tools' input
schemas. Pure data, no I/O; a test holds the table equal to :class:`lineage.domain.Trial`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lineage.domain import (
    AUTO_STATUS,
    FRACTION_COLUMNS,
    MAX_DURATION_S,
    MAX_EXTRA_BYTES,
    MAX_EXTRA_DEPTH,
    MAX_EXTRA_KEYS,
    MAX_LONG_TEXT,
    MAX_SHORT_TEXT,
    NO_RESULT_NUMBERS,
    TRIAL_FIELD_NAMES,
    FailureLabel,
)

__all__ = [
    "DEFAULT_LIST_FIELDS",
    "STATUS_MEANINGS",
    "TRIAL_FIELDS",
    "FieldSpec",
    "changes_schema",
    "check_fields",
    "record_schema",
    "select_fields",
    "trial_output_schema",
]


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a trial: ``kind`` is ``text``, ``number``, ``status`` or ``object``."""

    name: str
    kind: str
    description: str
    #: a writer may send it when recording (False: the ledger's own, or computed)
    recordable: bool = True
    #: a writer may change it afterwards (``update_trial``)
    updatable: bool = False
    max_length: int | None = None
    minimum: float | None = None
    maximum: float | None = None
    #: a writer may send null for this text field (its description says what null means)
    nullable: bool = False

    def json_schema(self, *, answer: bool = False) -> dict[str, Any]:
        """This field's JSON Schema (with its description), in the portable dialect: one
        ``type`` per schema, ``anyOf`` for a nullable number or a :attr:`nullable` text
        (what a writer may send; ``answer``: the stored value, which is never a null text)."""
        if self.kind == "text":
            schema: dict[str, Any] = {"type": "string"}
            if self.max_length is not None:
                schema["maxLength"] = self.max_length
            if self.nullable and not answer:
                schema = {"anyOf": [schema, {"type": "null"}]}
        elif self.kind == "number":
            number: dict[str, Any] = {"type": "number"}
            if self.minimum is not None:
                number["minimum"] = self.minimum
            if self.maximum is not None:
                number["maximum"] = self.maximum
            schema = {"anyOf": [number, {"type": "null"}]}
        elif self.kind == "status":  # a writer may also ask for the ledger's verdict
            statuses = [label.value for label in FailureLabel]
            schema = {"type": "string", "enum": statuses if answer else [*statuses, AUTO_STATUS]}
        else:
            schema = {"type": "object", "additionalProperties": True}
        schema["description"] = self.description
        return schema


_SENTINELS = ", ".join(f"{value:g}" for value in sorted(NO_RESULT_NUMBERS))

#: What each status says about a trial.
STATUS_MEANINGS: dict[str, str] = {
    FailureLabel.KEEP.value: "the change improved the metric and is kept (the loop builds on it)",
    FailureLabel.DISCARD.value: "it ran but did not improve; the change is reverted",
    FailureLabel.CRASH.value: "it produced no result (error, OOM, divergence)",
    FailureLabel.EVAL_BUDGET_OVERRUN.value: "the evaluation ran out of its time budget",
    FailureLabel.TRAIN_BUDGET_OVERRUN.value: "training ran out of its time budget",
    FailureLabel.SIZE_BLOCKED.value: "the model exceeded a size limit and was not run",
    FailureLabel.PREFLIGHT_CRASH.value: "it failed before training started (syntax, import, build error)",
    FailureLabel.HARNESS_ABORT.value: "the harness stopped it (killed, preempted, its lease lapsed): says "
    "nothing about the idea",
    FailureLabel.DISQUALIFIED.value: "its result is invalid (a leak, a broken evaluation)",
    FailureLabel.BASELINE.value: "the reference run the loop starts from",
    FailureLabel.RUNNING.value: "it is under way (claimed, training); its owner heartbeats, and it becomes "
    "harness_abort when the heartbeats stop; finish it with its outcome",
}

_STATUS_TEXT = "; ".join(f"{word}: {meaning}" for word, meaning in STATUS_MEANINGS.items())

_CLIP = "A²TGPO's adaptive clip scale over the run"

#: Every field of a trial, in :data:`lineage.domain.TRIAL_FIELD_NAMES` order.
TRIAL_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec(
        "exp_id",
        "text",
        "The trial's id. Leave it out: the ledger allocates the next number (000, 001, ...).",
        max_length=MAX_SHORT_TEXT,
    ),
    FieldSpec("timestamp", "text", "When the trial ran, as text (e.g. 2026-05-01T06:00Z).", max_length=MAX_SHORT_TEXT),
    FieldSpec(
        "specialist",
        "text",
        "Who ran the trial (an agent or role); leave it out in loops without specialists.",
        max_length=MAX_SHORT_TEXT,
    ),
    FieldSpec(
        "parent_exp",
        "text",
        "exp_id of the trial this one changes (its parent in the lineage). Leave it out: the ledger uses "
        "the branch tip, the most recent keep or baseline (parent_defaulted). "
        'Send "" or null to record a root without a parent.',
        updatable=True,
        max_length=MAX_SHORT_TEXT,
        nullable=True,
    ),
    FieldSpec(
        "baseline_exp",
        "text",
        "exp_id of the baseline this trial is compared with (optional).",
        max_length=MAX_SHORT_TEXT,
    ),
    FieldSpec(
        "domain",
        "text",
        "The area of the change (optimizer, data, architecture, ...); optional.",
        max_length=MAX_SHORT_TEXT,
    ),
    FieldSpec(
        "hypothesis",
        "text",
        "What the trial changed and why, in a sentence (a results file's description). Searched by find_similar.",
        updatable=True,
        max_length=MAX_LONG_TEXT,
    ),
    FieldSpec(
        "expected_delta",
        "text",
        "The change of the metric you expect, as text (e.g. -0.002).",
        max_length=MAX_LONG_TEXT,
    ),
    FieldSpec(
        "status",
        "status",
        f"The outcome. {_STATUS_TEXT}. Or {AUTO_STATUS}: the ledger decides keep (core_metric beats the "
        "project's best when the trial is stored, strictly, by at least keep_margin) or discard; a tie is a discard.",
        updatable=True,
    ),
    FieldSpec(
        "core_metric",
        "number",
        "The project's metric for this trial (the project's metric_name, e.g. val_bpb; get it from "
        f"list_projects). null or left out: no result. On a failure status 0 and {_SENTINELS} mean no result "
        "and are stored as none (kept in extra._reported_metric).",
        updatable=True,
    ),
    FieldSpec(
        "val_bpb",
        "number",
        "Validation bits per byte when measured apart from core_metric; in a project whose metric is val_bpb "
        "it is the same value as core_metric.",
        updatable=True,
    ),
    FieldSpec(
        "delta_vs_best",
        "number",
        "Computed by the ledger: core_metric minus the best before the trial. Never send it.",
        recordable=False,
    ),
    FieldSpec("train_s", "number", "Training time in seconds.", updatable=True, minimum=0, maximum=MAX_DURATION_S),
    FieldSpec(
        "total_s",
        "number",
        "Wall time of the whole trial in seconds.",
        updatable=True,
        minimum=0,
        maximum=MAX_DURATION_S,
    ),
    FieldSpec("job_name", "text", "The scheduler's job name (optional).", updatable=True, max_length=MAX_SHORT_TEXT),
    FieldSpec(
        "snapshot_path",
        "text",
        "Where the trial's checkpoint or code snapshot is (optional).",
        updatable=True,
        max_length=MAX_SHORT_TEXT,
    ),
    FieldSpec(
        "notes",
        "text",
        "What was learned: surprises, why it failed, what to try next. Searched by find_similar.",
        updatable=True,
        max_length=MAX_LONG_TEXT,
    ),
    *(
        FieldSpec(
            name,
            "number",
            f"{_CLIP}: {what} (optional).",
            updatable=True,
            minimum=0 if name in FRACTION_COLUMNS else None,
            maximum=1 if name in FRACTION_COLUMNS else None,
        )
        for name, what in (
            ("ig_clip_scale_mean", "mean"),
            ("ig_clip_scale_std", "standard deviation"),
            ("ig_clip_scale_min", "minimum"),
            ("ig_clip_scale_max", "maximum"),
            ("ig_clip_scale_frac_low", "fraction of tokens at the lower bound"),
            ("ig_clip_scale_frac_high", "fraction of tokens at the upper bound"),
        )
    ),
    FieldSpec(
        "extra",
        "object",
        "Any other values of the trial as a JSON object: a results file's other columns (commit, "
        "memory_gb, ...). The ledger keeps its own keys there too (_git: the commit's diffstat). "
        f"At most {MAX_EXTRA_KEYS:,} keys, {MAX_EXTRA_DEPTH} levels of nesting and {MAX_EXTRA_BYTES:,} bytes as JSON.",
        updatable=True,
    ),
    FieldSpec("seq", "number", "The trial's position in the project (0 first); the ledger's.", recordable=False),
    FieldSpec("created_at", "text", "When the ledger stored the trial (ISO 8601); the ledger's.", recordable=False),
    FieldSpec("updated_at", "text", "When the trial last changed (ISO 8601); the ledger's.", recordable=False),
)

_BY_NAME = {spec.name: spec for spec in TRIAL_FIELDS}

#: What ``list_trials`` returns per trial when no ``fields`` are asked for.
DEFAULT_LIST_FIELDS: tuple[str, ...] = (
    "exp_id",
    "status",
    "core_metric",
    "delta_vs_best",
    "parent_exp",
    "hypothesis",
    "notes",
)


def _object(properties: dict[str, Any], required: list[str], description: str) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "description": description,
    }
    if required:
        schema["required"] = required
    return schema


#: ``keep_margin``: not a field of the trial, a part of a request that asks for the verdict.
KEEP_MARGIN_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "number", "minimum": 0}, {"type": "null"}],
    "description": f'Only with status "{AUTO_STATUS}": how much core_metric must beat the best by to be '
    "kept (default 0: any strict improvement).",
}


#: ``rerun_of``: not a field of the trial, what a writer declares when it runs a trial's code again.
RERUN_OF_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "string", "maxLength": 512}, {"type": "null"}],
    "description": "The exp_id of a trial of this project that this one reruns (the same code again); "
    "the reruns estimate the noise floor.",
}


def record_schema() -> dict[str, Any]:
    """The JSON Schema of a trial to record: every recordable field with its meaning;
    ``status`` is required. (A body may also carry the project's metric under its own
    name, e.g. ``val_bpb`` or ``score``: read as ``core_metric``, with a warning.)"""
    properties = {spec.name: spec.json_schema() for spec in TRIAL_FIELDS if spec.recordable}
    properties["keep_margin"] = dict(KEEP_MARGIN_SCHEMA)
    properties["rerun_of"] = dict(RERUN_OF_SCHEMA)
    return _object(
        properties,
        ["status"],
        "The trial to record. Only status is required; send core_metric when "
        "there is a result, and hypothesis so that the next agent knows what was tried.",
    )


def changes_schema() -> dict[str, Any]:
    """The JSON Schema of the changes to a stored trial (the fields a writer may change)."""
    properties = {spec.name: spec.json_schema() for spec in TRIAL_FIELDS if spec.updatable}
    properties["keep_margin"] = dict(KEEP_MARGIN_SCHEMA)
    schema = _object(properties, [], "The fields to change; the others stay. delta_vs_best is recomputed.")
    schema["minProperties"] = 1
    return schema


def trial_output_schema() -> dict[str, Any]:
    """The JSON Schema of a stored trial as the ledger answers it (every field)."""
    return {"type": "object", "properties": {spec.name: spec.json_schema(answer=True) for spec in TRIAL_FIELDS}}


def check_fields(names: Any, *, field: str = "fields") -> tuple[str, ...]:
    """``names`` (a list of trial field names) checked; :class:`InvalidInput` naming the
    first unknown one. Empty or None: :data:`DEFAULT_LIST_FIELDS`."""
    from lineage.errors import InvalidInput

    if not names:
        return DEFAULT_LIST_FIELDS
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise InvalidInput(field, "must be a list of trial field names")
    for name in names:
        if name not in _BY_NAME:
            raise InvalidInput(field, f"{name!r} is not a trial field; known: {', '.join(TRIAL_FIELD_NAMES)}")
    return tuple(dict.fromkeys(names))


def select_fields(trial: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The ``names`` of a trial as the ledger answers it (``Trial.to_dict``)."""
    return {name: trial[name] for name in names}
