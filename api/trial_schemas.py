"""The API's trial bodies (pydantic 2): a trial to record, its changes, a stored trial, a
batch, the answers of a record, the listing's filters and pages, a lineage chain.

The fields are ``lineage.trial_fields.TRIAL_FIELDS``': :class:`TrialCreate` the recordable
ones and ``delta_vs_best``, :class:`TrialUpdate` the updatable ones, :class:`TrialOut` all;
``tests/api/test_schema_fields.py`` holds them to the table. The rules of ``api.schemas``'
module doc apply (unknown fields refused, nothing coerced); ``api.schemas`` re-exports
every name here, so the API keeps one namespace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from api.schema_types import JsonObject, Number, Strict, Text
from lineage.domain import (
    AUTO_STATUS,
    IDEMPOTENCY_KEY_PATTERN,
    MAX_BATCH,
    MAX_CLAIM_LEASE_S,
    MAX_DURATION_S,
    MAX_IDEMPOTENCY_KEY,
    MAX_LONG_TEXT,
    MAX_SHORT_TEXT,
    MIN_CLAIM_LEASE_S,
    FailureLabel,
)

if TYPE_CHECKING:  # a Literal built from FailureLabel is no static type: the statuses are text to mypy
    StatusName: TypeAlias = str
    RequestStatus: TypeAlias = str
else:
    StatusName = Literal[tuple(label.value for label in FailureLabel)]
    #: what a writer may send: a status, or "auto" (the ledger decides keep or discard)
    RequestStatus = Literal[(*(label.value for label in FailureLabel), AUTO_STATUS)]

#: how much an "auto" trial's metric must beat the best by to be kept
KeepMargin = Annotated[Number, Field(ge=0)]

#: The types of a trial's fields in the request bodies, by their limits in
#: ``lineage.trial_fields`` (``tests/api/test_schema_fields.py`` holds each field to its spec).
ShortText = Annotated[Text, Field(max_length=MAX_SHORT_TEXT)]
LongText = Annotated[Text, Field(max_length=MAX_LONG_TEXT)]
TrialNumber = Number
Seconds = Annotated[Number, Field(ge=0, le=MAX_DURATION_S)]
Fraction = Annotated[Number, Field(ge=0, le=1)]


class TrialCreate(Strict):
    """A trial to record. ``exp_id`` omitted: the next number is allocated.
    ``delta_vs_best`` is computed by the server; a value sent here is ignored.
    ``parent_exp`` omitted: the branch tip (the last keep or baseline) becomes the parent (``parent_defaulted`` in
    the answer); ``""`` or ``null``: a root. Other keys go to the ledger, which reads the
    project's metric under its own name (``val_bpb``, ``score``) as ``core_metric`` and
    refuses any other key with a 422 naming it (``lineage.service.recording.prepare_record``)."""

    # the document says no other keys: the project's metric under its own name (val_bpb,
    # score) is the one the ledger also reads, and it cannot be named in a static schema
    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": False})

    exp_id: ShortText | None = None
    timestamp: ShortText | None = ""
    specialist: ShortText | None = ""
    parent_exp: ShortText | None = ""
    baseline_exp: ShortText | None = ""
    domain: ShortText | None = ""
    hypothesis: LongText | None = ""
    expected_delta: LongText | None = ""
    status: RequestStatus
    core_metric: TrialNumber | None = None
    val_bpb: TrialNumber | None = None
    delta_vs_best: TrialNumber | None = Field(None, description="Ignored: the server computes it")
    train_s: Seconds | None = None
    total_s: Seconds | None = None
    job_name: ShortText | None = ""
    snapshot_path: ShortText | None = ""
    notes: LongText | None = ""
    ig_clip_scale_mean: TrialNumber | None = None
    ig_clip_scale_std: TrialNumber | None = None
    ig_clip_scale_min: TrialNumber | None = None
    ig_clip_scale_max: TrialNumber | None = None
    ig_clip_scale_frac_low: Fraction | None = None
    ig_clip_scale_frac_high: Fraction | None = None
    extra: JsonObject = Field(default_factory=dict)
    keep_margin: KeepMargin | None = Field(None, description='Only with status "auto" (default 0)')
    rerun_of: ShortText | None = Field(
        None,
        description="The exp_id of a trial of this project that this one reruns (the same code again): "
        "the reruns estimate the project's noise floor σ",
    )


class HeartbeatIn(Strict):
    """A running trial's heartbeat: its owner says it is still at work."""

    owner: Annotated[ShortText, Field(min_length=1)] | None = Field(
        None, description="who holds the trial (a run id, an agent); null or left out: as stored"
    )


class LeaseOut(BaseModel):
    """A running trial's lease: its owner, its start and its last heartbeat."""

    exp_id: str
    owner: str
    since: str | None
    heartbeat_at: str | None
    hypothesis: str
    specialist: str
    lease_s: float | None = Field(
        None, description="The lease's length in seconds (the claim's own, else the project's)"
    )
    expires_at: str | None = Field(None, description="When the trial lapses to harness_abort without another heartbeat")


class TrialUpdate(Strict):
    """Fields to change after the run: status, metric, notes, timings, clip-scale
    statistics; and the hypothesis and parent, for a results file whose row was rewritten
    (a new parent must be a trial of the project and must not make a cycle)."""

    status: RequestStatus = Field(None)  # type: ignore[assignment]
    hypothesis: LongText | None = None
    parent_exp: ShortText | None = None
    core_metric: TrialNumber | None = None
    val_bpb: TrialNumber | None = None
    notes: LongText | None = None
    train_s: Seconds | None = None
    total_s: Seconds | None = None
    job_name: ShortText | None = None
    snapshot_path: ShortText | None = None
    ig_clip_scale_mean: TrialNumber | None = None
    ig_clip_scale_std: TrialNumber | None = None
    ig_clip_scale_min: TrialNumber | None = None
    ig_clip_scale_max: TrialNumber | None = None
    ig_clip_scale_frac_low: Fraction | None = None
    ig_clip_scale_frac_high: Fraction | None = None
    extra: JsonObject = Field(None)  # type: ignore[arg-type]
    keep_margin: KeepMargin | None = Field(None, description='Only with status "auto" (default 0)')


class TrialOut(BaseModel):
    exp_id: str
    timestamp: str
    specialist: str
    parent_exp: str
    baseline_exp: str
    domain: str
    hypothesis: str
    expected_delta: str
    status: str
    core_metric: float | None
    val_bpb: float | None
    delta_vs_best: float | None
    train_s: float | None
    total_s: float | None
    job_name: str
    snapshot_path: str
    notes: str
    ig_clip_scale_mean: float | None
    ig_clip_scale_std: float | None
    ig_clip_scale_min: float | None
    ig_clip_scale_max: float | None
    ig_clip_scale_frac_low: float | None
    ig_clip_scale_frac_high: float | None
    extra: dict[str, Any]
    seq: int | None
    created_at: str | None
    updated_at: str | None


class ResumeOut(BaseModel):
    """A resumed trial: running again under the new owner, and where the run takes up."""

    trial: TrialOut
    last_step: int | None = Field(description="The highest step of the trial's telemetry (null: none yet)")
    last_values: dict[str, float] = Field(description="Each per-step series' value at its highest step")


class TrialDetailOut(TrialOut):
    """One trial, with what its writer declared of it beyond its fields."""

    rerun_of: str | None = Field(
        None, description="The trial this one declared itself a rerun of (the same code again); absent: none declared"
    )


class SimilarOut(BaseModel):
    """A past trial close to a text ("was this tried?"); rule: ``lineage.similar``."""

    exp_id: str
    status: str
    core_metric: float | None
    delta_vs_best: float | None = Field(description="Its metric against the best before it")
    score: float = Field(ge=0, le=1, description="Closeness of its hypothesis and notes to the text")
    hypothesis: str


class KnobTryOut(BaseModel):
    """An earlier trial that changed the same knob (rule: ``lineage.service.knobs``)."""

    knob: str = Field(description="The knob, its name normalised (MATRIX_LR is 'matrix lr')")
    name: str = Field(description="The knob as that trial wrote it")
    value: str = Field(description="The value it set, or its factor ('x2' for 'double the batch size')")
    old: str | None = Field(description="The value before, as written; null: not known")
    new: str | None
    number: float | None = Field(description="The value set, as a number")
    factor: float | None
    source: str = Field(description="Where the change was read: patch, config, column, hypothesis or unparsed")
    exp_id: str
    status: str
    core_metric: float | None
    delta_vs_best: float | None
    same_value: bool | None = Field(None, description="Whether it set the value the new trial (or text) sets")


class NoiseFloorOut(BaseModel):
    """A project's noise floor (``lineage.noise``): σ pooled from its reruns, or set by hand."""

    sigma: float | None = Field(description="The noise floor σ; null: unknown (no reruns, none set)")
    source: Literal["reruns", "setting", "none"] = Field(
        description="reruns (the pooled estimate), setting (noise_sigma) or none"
    )
    reruns: int = Field(description="Reruns the estimate rests on: the sum of each group's size minus one")
    groups: int = Field(description="Groups of two or more trials that ran the same code")
    k: float = Field(description="The multiple: |delta| < k·σ is within noise")
    threshold: float | None = Field(description="k·σ")
    auto_keep_above_noise: bool
    text: str


class NoiseOut(NoiseFloorOut):
    """A new trial's delta against the project's noise floor."""

    delta: float | None = Field(description="The trial's delta_vs_best")
    within_noise: bool | None = Field(description="|delta| < k·σ; null: no σ or no delta")
    text: str = Field(description='In words: "within noise: +0.0004 against σ 0.0011 from 5 reruns"')


class TriedBeforeOut(BaseModel):
    """A sweep or a repeat of earlier trials (rule: ``lineage.knobs.sweeps``)."""

    kind: str = Field(description="repeat (the same change tried before) or sweep (the knob tried at other values)")
    knob: str = Field(description="The knob, its name normalised; '' for a repeated patch")
    name: str = Field(description="The knob as the newest earlier trial wrote it")
    exp_ids: list[str] = Field(description="The earlier trials it names, oldest first")
    says: str = Field(
        description="The sentence: 'sweep of MATRIX_LR: 0.04 keep, 0.06 discard', 'repeat of exp_017: ...'"
    )


class UpdatedOut(TrialOut):
    """A changed trial (its fields) and its delta against the project's noise floor."""

    noise: NoiseOut | None = Field(None, description="The trial's delta_vs_best against the noise floor")


class RecordOut(BaseModel):
    trial: TrialOut
    #: False: the trial was already stored (a retry with the same exp_id or key)
    created: bool
    is_new_best: bool
    best_before: str | None = Field(description="exp_id of the best before this trial")
    parent_defaulted: bool = Field(
        False, description="parent_exp was left out: the branch tip (the last keep or baseline) became the parent"
    )
    warnings: list[str] = Field(
        default_factory=list, description="What the ledger read differently from the body, in words"
    )
    similar_prior: list[SimilarOut] = Field(
        default_factory=list, description="Earlier trials close to this one (new trials only), closest first"
    )
    same_knob: list[KnobTryOut] = Field(
        default_factory=list,
        description="With similar_prior: earlier trials that changed a knob this one changes, oldest first",
    )
    noise: NoiseOut | None = Field(
        None, description="The delta against the project's noise floor (new trials only; null on a replay)"
    )
    tried_before: list[TriedBeforeOut] = Field(
        default_factory=list, description="With similar_prior: whether this trial is a sweep or a repeat"
    )


class ClaimIn(Strict):
    """An idea to claim before running it: recorded as a running trial held by ``owner``,
    unless the project refuses duplicate claims and another owner runs a close idea."""

    hypothesis: Annotated[LongText, Field(min_length=1)] = Field(description="The idea, in words")
    owner: Annotated[ShortText, Field(min_length=1)] = Field(description="Who runs it (a run id, an agent)")
    parent_exp: ShortText | None = Field(None, description="The trial it forks from; left out: the branch tip")
    notes: LongText | None = Field(None, description="Knob changes or a patch summary")
    extra: JsonObject | None = Field(None, description="Free-form fields (knobs, commit) kept with the trial")
    lease_s: float | None = Field(
        None,
        description=f"Seconds the claim lives without a heartbeat, {MIN_CLAIM_LEASE_S} to {MAX_CLAIM_LEASE_S} "
        "(10 s to 24 h; outside them a 422 naming lease_s); left out: the project's running_lease_s",
    )
    # the rest of a trainer's plan (lineage.service.claims.PLAN_FIELDS), recorded as a record would
    exp_id: ShortText | None = Field(None, description="Left out: the next number")
    timestamp: ShortText | None = None
    specialist: ShortText | None = None
    baseline_exp: ShortText | None = None
    domain: ShortText | None = None
    expected_delta: LongText | None = None
    job_name: ShortText | None = None
    snapshot_path: ShortText | None = None
    rerun_of: ShortText | None = Field(None, description="The exp_id of a trial this one reruns (the noise floor)")


class FinishIn(TrialUpdate):
    """The result of a claim, sent by its owner: the trial's changes (``status`` left out:
    ``auto``, the ledger's verdict from ``core_metric``)."""

    owner: Annotated[ShortText, Field(min_length=1)] = Field(description="The owner that claimed the trial")


class ClaimedOut(SimilarOut):
    """Another owner's running claim close to this one."""

    owner: str


class ClaimDuplicatesOut(BaseModel):
    tried: list[SimilarOut] = Field(description="Trials tried already whose idea is close, closest first")
    running: list[ClaimedOut] = Field(description="Other owners' running claims whose idea is close")


class ClaimOut(BaseModel):
    trial: TrialOut
    lease: LeaseOut | None = Field(description="The claim's lease (null: a replayed claim that has ended)")
    #: False: the claim was already stored (a retry with the same Idempotency-Key)
    created: bool
    duplicates: ClaimDuplicatesOut
    warnings: list[str] = Field(description="The near-duplicates, and what the ledger read differently, in words")


class RunningOut(BaseModel):
    """Who is running what: the project's running trials, oldest first."""

    items: list[LeaseOut]


class BranchTipOut(BaseModel):
    """The tip of one branch of kept trials."""

    exp_id: str
    core_metric: float | None
    hypothesis: str


class RefusedClaimOut(BaseModel):
    """An idea refused because another agent's running claim was close to it."""

    duplicate_of: str = Field(description="The running claim it duplicated")
    idea: str = Field(description="The refused claim's hypothesis")
    owner: str = Field(description="Who asked for it")
    at: str | None = Field(description="When it was refused")


class FrontierOut(BaseModel):
    """Where the project's agents stand: the best, the branch tip (what a trial without a
    parent forks from) and the running claims, oldest first."""

    best: TrialOut | None
    tip: TrialOut | None
    tips: list[BranchTipOut] = Field(description="The tip of every branch: a keep or baseline no keep forked from")
    running: list[LeaseOut]
    refused: list[RefusedClaimOut] = Field(description="Ideas refused as duplicates of a running claim, newest first")


class TrialBatchItem(TrialCreate):
    """One trial of a batch: the body of ``POST .../trials``, with its own optional key."""

    idempotency_key: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_IDEMPOTENCY_KEY,
        pattern=IDEMPOTENCY_KEY_PATTERN,
        description="This item's key: a later batch or single record with it gets this trial back",
    )


class TrialBatchIn(Strict):
    """``POST .../trials:batch``: 1 to 1,000 trials, recorded in order, all or nothing."""

    trials: list[TrialBatchItem] = Field(min_length=1, max_length=MAX_BATCH)


class BatchOut(BaseModel):
    #: trials stored by this request (0 on a replay)
    created: int
    #: True: the Idempotency-Key was used before with the same trials; nothing was written
    replayed: bool
    results: list[RecordOut] = Field(description="One answer per item, in the batch's order")


class TrialPage(BaseModel):
    items: list[TrialOut]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on the last")
    total: int | None = Field(description="Trials matching the filters (null when count=false)")


#: The filter expression's help (the grammar: lineage.filter_language).
FILTER_HELP = (
    "A filter expression, e.g. `status = keep and core_metric < 0.99`, `extra.memory_gb >= 45`, "
    "`not hypothesis ~ warmup`, `exp_id > exp_1000`, `status in (crash, discard)`, `specialist is null`; "
    "a bare word matches the hypothesis, notes or exp_id. Errors name the column."
)
SORT_HELP = (
    "seq, metric, exp_id (numeric-aware), any trial field (core_metric, delta_vs_best, status, ...) or "
    "extra.KEY; a leading - sorts descending (overrides order). Trials without a value come last."
)


class TrialFilters(Strict):
    """Filters, order and page of the trials listing."""

    status: list[StatusName] | None = Field(None, description="Any of these statuses (repeat the parameter)")
    specialist: Text | None = None
    domain: Text | None = None
    parent: Text | None = Field(None, description="Children of this exp_id ('' for trials without a parent)")
    metric_min: float | None = Field(None, allow_inf_nan=False)
    metric_max: float | None = Field(None, allow_inf_nan=False)
    q: Text | None = Field(None, description="Text in the hypothesis, notes or exp_id (case-insensitive)")
    created_after: str | None = Field(
        None, description="Stored at or after this ISO 8601 time", json_schema_extra={"format": "date-time"}
    )
    created_before: str | None = Field(
        None, description="Stored before this ISO 8601 time", json_schema_extra={"format": "date-time"}
    )
    timestamp_from: Text | None = Field(None, description="Trial timestamp text >= this")
    timestamp_to: Text | None = Field(None, description="Trial timestamp text < this")
    filter: Text | None = Field(None, max_length=2000, description=FILTER_HELP)
    sort: Text = Field("seq", description=SORT_HELP)
    order: Literal["asc", "desc"] = "asc"
    limit: int = Field(100, ge=1, le=1000)
    cursor: Text | None = None
    count: bool = True
    format: Literal["json", "tsv"] | None = Field(None, description="tsv: the same rows as fieldkit TSV")
    extended: bool = Field(False, description="TSV: add the clip-scale columns and extra")
    include_patch: bool = Field(False, description="JSON: also each trial's extra._git.patch (left out by default)")


class LineageOut(BaseModel):
    exp_id: str
    #: root first, this trial last
    chain: list[TrialOut]
