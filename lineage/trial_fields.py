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
    CLIP_SCALE_COLUMNS,
    FRACTION_COLUMNS,
    MAX_DURATION_S,
    MAX_EXTRA_BYTES,
    MAX_EXTRA_KEYS,
    MAX_LONG_TEXT,
    MAX_SHORT_TEXT,
    NO_RESULT_NUMBERS,
    TRIAL_FIELD_NAMES,
    FailureLabel,
)

#: ``extra`` keys the trainer client writes for its own bookkeeping (``trainer_hooks``'
#: ``LedgerClient``: the run's id, its state, how many points it sent and dropped): they
#: say how the trial was recorded, not what it tried, so they are never a file column nor
#: a knob (the trial page lists them under "other extra keys").
CLIENT_KEYS = frozenset({"run_id", "state", "telemetry_points", "nonfinite_dropped"})

__all__ = [
    "AGENT_FIELDS",
    "DEFAULT_LIST_FIELDS",
    "EXTRA_PREFIX",
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

    def json_schema(self, *, answer: bool = False, limits: bool = True) -> dict[str, Any]:
        """This field's JSON Schema (with its description), in the portable dialect: one
        ``type`` per schema, ``anyOf`` for a nullable number or a :attr:`nullable` text
        (what a writer may send; ``answer``: the stored value, which is never a null text).
        ``limits=False``: without lengths and ranges (the ledger checks them either way)."""
        if self.kind == "text":
            schema: dict[str, Any] = {"type": "string"}
            if self.max_length is not None and limits:
                schema["maxLength"] = self.max_length
            if self.nullable and not answer:
                schema = {"anyOf": [schema, {"type": "null"}]}
        elif self.kind == "number":
            number: dict[str, Any] = {"type": "number"}
            if self.minimum is not None and limits:
                number["minimum"] = self.minimum
            if self.maximum is not None and limits:
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

#: The statuses in a line, for the agents' schemas (``STATUS_MEANINGS`` in full is the prompt's).
_STATUS_BRIEF = (
    "keep: improved, kept; discard: no gain, reverted; crash: no result; harness_abort: stopped by the "
    "harness; baseline: the reference run; running: under way"
)

_CLIP = "A²TGPO's adaptive clip scale over the run"

#: Every field of a trial, in :data:`lineage.domain.TRIAL_FIELD_NAMES` order.
TRIAL_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec(
        "exp_id",
        "text",
        "Left out: the next id.",
        max_length=MAX_SHORT_TEXT,
    ),
    FieldSpec("timestamp", "text", "When it ran (text).", max_length=MAX_SHORT_TEXT),
    FieldSpec(
        "specialist",
        "text",
        "Who ran it (optional).",
        max_length=MAX_SHORT_TEXT,
    ),
    FieldSpec(
        "parent_exp",
        "text",
        'The trial it changes. Left out: the branch tip (the last keep). "" or null: a root.',
        updatable=True,
        max_length=MAX_SHORT_TEXT,
        nullable=True,
    ),
    FieldSpec(
        "baseline_exp",
        "text",
        "The baseline it is compared with (optional).",
        max_length=MAX_SHORT_TEXT,
    ),
    FieldSpec(
        "domain",
        "text",
        "Area of the change: optimizer, data, ... (optional).",
        max_length=MAX_SHORT_TEXT,
    ),
    FieldSpec(
        "hypothesis",
        "text",
        "What changed and why. Searched by find_similar.",
        updatable=True,
        max_length=MAX_LONG_TEXT,
    ),
    FieldSpec(
        "expected_delta",
        "text",
        "The metric change you expect (text).",
        max_length=MAX_LONG_TEXT,
    ),
    FieldSpec(
        "status",
        "status",
        f"{_STATUS_BRIEF}. {AUTO_STATUS}: the ledger decides keep or discard against the best.",
        updatable=True,
    ),
    FieldSpec(
        "core_metric",
        "number",
        f"The project's metric. null: no result (so are 0 and {_SENTINELS} on a failure status).",
        updatable=True,
    ),
    FieldSpec(
        "val_bpb",
        "number",
        "Validation bits per byte, when measured apart from core_metric.",
        updatable=True,
    ),
    FieldSpec(
        "delta_vs_best",
        "number",
        "The ledger's: core_metric minus the best before it.",
        recordable=False,
    ),
    FieldSpec("train_s", "number", "Training seconds.", updatable=True, minimum=0, maximum=MAX_DURATION_S),
    FieldSpec(
        "total_s",
        "number",
        "Seconds of the whole trial.",
        updatable=True,
        minimum=0,
        maximum=MAX_DURATION_S,
    ),
    FieldSpec("job_name", "text", "Scheduler job name (optional).", updatable=True, max_length=MAX_SHORT_TEXT),
    FieldSpec(
        "snapshot_path",
        "text",
        "Checkpoint or code snapshot path (optional).",
        updatable=True,
        max_length=MAX_SHORT_TEXT,
    ),
    FieldSpec(
        "notes",
        "text",
        "What was learned. Searched by find_similar.",
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
        "Other values (commit, memory_gb, ...); _keys are the ledger's. "
        f"At most {MAX_EXTRA_KEYS:,} keys, {MAX_EXTRA_BYTES:,} bytes.",
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
    "description": f"With status {AUTO_STATUS}: how much core_metric must beat the best by (default 0).",
}


#: ``rerun_of``: not a field of the trial, what a writer declares when it runs a trial's code again.
RERUN_OF_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "string", "maxLength": 512}, {"type": "null"}],
    "description": "exp_id of the trial this one reruns (the same code): reruns give the noise floor",
}


#: The fields an agent's record schema lists (:func:`record_schema`); the others are taken too.
AGENT_FIELDS: tuple[str, ...] = (
    "exp_id",
    "specialist",
    "parent_exp",
    "hypothesis",
    "expected_delta",
    "status",
    "core_metric",
    "notes",
    "extra",
)


def record_schema(*, full: bool = False) -> dict[str, Any]:
    """The JSON Schema of a trial to record, every field with its meaning; ``status`` is
    required. (A body may also carry the project's metric under its own name, e.g.
    ``val_bpb`` or ``score``: read as ``core_metric``, with a warning.)

    By default the agent's schema: the fields of :data:`AGENT_FIELDS` and ``keep_margin``,
    the others named in its description and taken as well (the ledger checks every field:
    an unknown one is an error naming it), so that ``tools/list`` stays short. ``full``:
    every recordable field, A²TGPO's six ``ig_clip_scale_*`` included, and nothing else."""
    shown = [spec for spec in TRIAL_FIELDS if spec.recordable and (full or spec.name in AGENT_FIELDS)]
    properties = {spec.name: spec.json_schema(limits=full) for spec in shown}
    properties["keep_margin"] = dict(KEEP_MARGIN_SCHEMA)
    properties["rerun_of"] = dict(RERUN_OF_SCHEMA)
    description = "Only status is required; send core_metric when there is a result, and hypothesis."
    if full:
        return _object(properties, ["status"], description)
    others = [spec.name for spec in TRIAL_FIELDS if spec.recordable and spec.name not in properties]
    clip = [name for name in others if name in CLIP_SCALE_COLUMNS]
    others = [name for name in others if name not in CLIP_SCALE_COLUMNS] + (["ig_clip_scale_*"] if clip else [])
    schema = _object(properties, ["status"], f"{description} Also taken: {', '.join(others)}.")
    schema["additionalProperties"] = True
    return schema


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


#: ``fields`` names an ``extra`` key as ``extra.KEY`` (a path into nested objects: ``extra._git.subject``)
EXTRA_PREFIX = "extra."
_MAX_FIELD_NAME = 200


def check_fields(names: Any, *, field: str = "fields") -> tuple[str, ...]:
    """``names`` (a list of trial field names, or ``extra.KEY``) checked; :class:`InvalidInput`
    naming the first unknown one. Empty or None: :data:`DEFAULT_LIST_FIELDS`."""
    from lineage.errors import InvalidInput

    if not names:
        return DEFAULT_LIST_FIELDS
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise InvalidInput(field, "must be a list of trial field names")
    for name in names:
        if name.startswith(EXTRA_PREFIX):
            if not name[len(EXTRA_PREFIX) :] or len(name) > _MAX_FIELD_NAME:
                raise InvalidInput(field, f"{name!r}: extra.KEY needs a key of 1-{_MAX_FIELD_NAME} characters")
        elif name not in _BY_NAME:
            raise InvalidInput(
                field, f"{name!r} is not a trial field or extra.KEY; known: {', '.join(TRIAL_FIELD_NAMES)}"
            )
    return tuple(dict.fromkeys(names))


def _extra_value(extra: Any, path: str) -> Any:
    """The value at ``path`` in ``extra``: the key as written, else a walk by its dots."""
    if not isinstance(extra, dict):
        return None
    if path in extra:
        return extra[path]
    head, dot, rest = path.partition(".")
    return _extra_value(extra.get(head), rest) if dot and head in extra else None


def select_fields(trial: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The ``names`` of a trial as the ledger answers it (``Trial.to_dict``); ``extra.KEY``
    is the value of that key (null when the trial has none)."""
    return {
        name: _extra_value(trial.get("extra"), name[len(EXTRA_PREFIX) :])
        if name.startswith(EXTRA_PREFIX)
        else trial[name]
        for name in names
    }
