"""The API's request and response bodies (pydantic 2).

Request bodies forbid unknown fields (``extra="forbid"``): a misspelt field is a 422
naming it, never silently dropped. Numbers and flags are not coerced (:data:`Number`,
:data:`Flag`): ``"core_metric": true`` is a 422, not 1.0. Types are checked here; the
ledger's rules (lengths, finiteness, references, statuses) are checked once, by
``lineage.domain`` and ``lineage.service``, and come back as 422 problems naming the field.

Every text that reaches the database goes through :data:`Text` (``api.schema_types``):
no NUL character and no lone surrogate, documented as a pattern. Where the ledger has a
rule a JSON Schema can say (lengths, patterns, bounds), the field carries it, so the
OpenAPI document and the validation agree (``tests/api/test_contract.py`` holds them so).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from api.schema_types import (  # noqa: F401  (Number, JsonObject: re-exported for the routes)
    TEXT_CHECKS,
    Flag,
    JsonObject,
    Number,
    Strict,
    Text,
    WholeNumber,
    non_blank,
    word_list,
)

# the trial bodies: api/trial_schemas.py (re-exported: schemas is the API's one namespace)
from api.trial_schemas import (  # noqa: F401
    FILTER_HELP,
    SORT_HELP,
    BatchOut,
    ClaimIn,
    ClaimOut,
    FinishIn,
    FrontierOut,
    HeartbeatIn,
    KnobTryOut,
    LeaseOut,
    LineageOut,
    RecordOut,
    ResumeOut,
    RunningOut,
    SimilarOut,
    TrialBatchIn,
    TrialBatchItem,
    TrialCreate,
    TrialDetailOut,
    TrialFilters,
    TrialOut,
    TrialPage,
    TrialUpdate,
    TriedBeforeOut,
    UpdatedOut,
)
from lineage import telemetry
from lineage.agent.prompt import MAX_PROMPT_TEMPLATE
from lineage.auth import MAX_TOKEN_NAME
from lineage.browse.explore import GROUP_FIELDS
from lineage.domain import DEFAULT_LEASE_S, MAX_LEASE_S, MAX_SLUG, METRIC_NAME_PATTERN, MIN_LEASE_S, FailureLabel
from lineage.service.projects import MAX_TITLE
from lineage.similar import MAX_QUERY_CHARS

BestPolicyName = Literal["kept", "fieldkit"]
RoleName = Literal["reader", "writer", "admin"]

SLUG_PATTERN = "^[a-z0-9._-]+$"
TOKEN_NAME_PATTERN = f"^[a-zA-Z0-9._@-]{{1,{MAX_TOKEN_NAME}}}$"
Slug = Annotated[
    Annotated[str, Field(min_length=1, max_length=MAX_SLUG, pattern=SLUG_PATTERN), *TEXT_CHECKS],
    Field(description=f"URL name: a-z, 0-9, '-', '_', '.' (1 to {MAX_SLUG})"),
]
Title = Annotated[Text, Field(max_length=MAX_TITLE)]
MetricName = Annotated[
    Annotated[str, Field(pattern=METRIC_NAME_PATTERN), *TEXT_CHECKS],
    Field(description="What core_metric measures (shown in the prompt): one line, no '|' or control characters"),
]
PromptTemplate = Annotated[
    Text,
    Field(max_length=MAX_PROMPT_TEMPLATE, description="Jinja2 wrapper of the agent prompt (must compile and render)"),
]
#: The idea to look for in the similar search: some text besides white space.
Query = Annotated[
    Annotated[str, Field(max_length=MAX_QUERY_CHARS, pattern=non_blank()), *TEXT_CHECKS],
    Field(
        description=f"The idea to look for (1 to {MAX_QUERY_CHARS:,} characters, not only white "
        "space; a text with only stop-words, punctuation or markup is a 422 naming q)"
    ),
]
MetricRef = Annotated[str, Field(min_length=1), *TEXT_CHECKS]
SimilarLimit = Annotated[int, WholeNumber(1, 50)]
#: Statuses, comma-separated (the explorer's filter).
StatusList = Annotated[str, Field(pattern=word_list(tuple(label.value for label in FailureLabel))), *TEXT_CHECKS]
#: What the explorer may group by: a trial field or extra.KEY.
GroupBy = Annotated[str, Field(pattern=f"^({'|'.join(GROUP_FIELDS)}|extra\\.[\\s\\S]+)$"), *TEXT_CHECKS]

# -- projects ---------------------------------------------------------------------------------


class ProjectCreate(Strict):
    slug: Slug
    title: Title = ""
    metric_name: MetricName = "core_metric"
    lower_is_better: Flag = True
    best_policy: BestPolicyName = "kept"
    prompt_template: PromptTemplate | None = Field(None, description="null: the default")


class ProjectUpdate(Strict):
    """Fields to change; omitted fields stay. ``prompt_template: null`` restores the default."""

    title: Title = Field(None)  # type: ignore[assignment]
    metric_name: MetricName = Field(None)  # type: ignore[assignment]
    lower_is_better: Flag = Field(None)  # type: ignore[assignment]
    best_policy: BestPolicyName = Field(None)  # type: ignore[arg-type]
    prompt_template: PromptTemplate | None = None
    running_lease_s: float | None = Field(
        None,
        ge=MIN_LEASE_S,
        le=MAX_LEASE_S,
        description="seconds a running trial stays running without a heartbeat before it becomes "
        f"harness_abort (default {DEFAULT_LEASE_S}); null: the default",
    )
    duplicate_claims: Literal["warn", "refuse"] | None = Field(
        None,
        description="what a claim close to another owner's running claim gets: warn (kept, with a warning; "
        "the default) or refuse (409); null: the default",
    )
    noise_sigma: float | None = Field(
        None,
        description="the noise floor σ set by hand (> 0), instead of the pooled standard deviation of the "
        "project's reruns; null: estimated from the reruns",
    )
    noise_k: float | None = Field(
        None, description="the multiple of σ below which a delta is within noise (default 2); null: the default"
    )
    auto_keep_above_noise: Flag | None = Field(
        None,
        description='status "auto" keeps only a gain of at least noise_k·σ (once σ is known); null: off',
    )


class ProjectOut(BaseModel):
    slug: str
    title: str
    metric_name: str
    lower_is_better: bool
    best_policy: str
    prompt_template: str | None
    source_format: str | None
    settings: dict[str, Any]
    revision: int
    trial_count: int
    created_at: str | None
    updated_at: str | None


# -- "was this tried?" ------------------------------------------------------------------------


class SimilarPage(BaseModel):
    project: str
    q: str
    items: list[SimilarOut]
    same_knob: list[KnobTryOut] = Field(
        default_factory=list, description="Earlier trials that changed a knob the text names, oldest first"
    )
    tried_before: list[TriedBeforeOut] = Field(
        default_factory=list, description="Whether the idea is a sweep or a repeat of earlier trials"
    )


class KnobTrialOut(BaseModel):
    exp_id: str
    status: str
    core_metric: float | None
    delta_vs_best: float | None = Field(description="Its metric against the best before it")
    old: str | None = Field(description="The value before, as written; null: not known")
    name: str = Field(description="The knob as this trial wrote it")
    source: str = Field(description="Where the change was read: patch, config, column, hypothesis or unparsed")


class KnobValueOut(BaseModel):
    value: str = Field(description="The value as first written, or a factor ('x2')")
    number: float | None
    trials: list[KnobTrialOut] = Field(description="The trials that set it, oldest first")


class KnobOut(BaseModel):
    knob: str = Field(description="The knob, its name normalised (MATRIX_LR is 'matrix lr')")
    name: str = Field(description="The knob as its newest try wrote it")
    tried: int = Field(description="How many tries are listed")
    values: list[KnobValueOut] = Field(description="Each value in the order first tried")


class KnobsHistoryOut(BaseModel):
    project: str
    knob: str | None = Field(description="The knob asked for, normalised; null: every knob")
    window: int | None = Field(
        description="Without a knob: the history covers the project's newest this many tries (null: all of them)"
    )
    knobs: list[KnobOut] = Field(description="Each knob, most tried first")


class KnobHistoryOut(BaseModel):
    knob: str = Field(description="The knob asked for, its name normalised")
    knobs: list[str] = Field(description="The stored knobs it matched (none: never tried)")
    tried: int = Field(description="How many trials changed it")
    values: list[KnobValueOut] = Field(description="Each value in the order first tried")


class SimilarQuery(Strict):
    q: Query
    limit: int = Field(5, ge=1, le=50)


class SimilarBody(Strict):
    """``POST .../similar``: the same search with the text in a JSON body (long texts)."""

    q: Query
    limit: SimilarLimit = 5


# -- telemetry --------------------------------------------------------------------------------


# the batch bodies (points and columns) and their OpenAPI schema: api/telemetry_schemas.py
from api.telemetry_schemas import (  # noqa: E402,F401  (re-exported: schemas is the API's one namespace)
    TELEMETRY_BATCH,
    TelemetryBatchIn,
    TelemetryColumnsBatchIn,
    TelemetryColumnsIn,
    TelemetryPointIn,
    telemetry_batch_schema,
)


class TelemetryAccepted(BaseModel):
    accepted: int
    replayed: bool
    batch_id: str | None


class SeriesOut(BaseModel):
    name: str
    turn: int | None
    count: int
    method: Literal["raw", "minmax"]
    downsampled: bool
    step: list[int]
    value: list[float] | None = None
    step_last: list[int] | None = None
    min: list[float] | None = None
    max: list[float] | None = None
    mean: list[float] | None = None
    n: list[int] | None = None


class TelemetryOut(BaseModel):
    exp_id: str
    points: int
    max_points: int
    series: list[SeriesOut]


class TelemetryQuery(Strict):
    name: list[Text] | None = Field(None, description="Only these series names (repeat the parameter)")
    step_min: int | None = Field(None, ge=0, le=telemetry.MAX_STEP)
    step_max: int | None = Field(
        None, ge=0, le=telemetry.MAX_STEP, description="Points up to this step; below step_min: no points"
    )
    max_points: int = Field(2000, ge=2, le=100_000, description="Above this a series is min/max-bucketed")


class SummaryOut(BaseModel):
    trial: TrialOut
    derived: dict[str, float]


# -- prompt and knowledge ---------------------------------------------------------------------


class PromptQuery(Strict):
    specialist: Text = Field("", description="Who starts the session (optional; loops without specialists omit it)")
    format: Literal["auto", "fieldkit", "loop"] = Field(
        "auto",
        description="fieldkit: fieldkit's exact text; loop: the loop's own sections (commits, the file's "
        "columns, diff sizes); auto: fieldkit for a project not fed by a results file when a "
        "specialist is given, else loop",
    )
    top_k: int = Field(20, ge=0, le=100_000)
    recent_n: int = Field(30, ge=1, le=100_000)
    last_m: int = Field(10, ge=1, le=100_000)
    timestamp: Text = ""
    raw: bool = Field(False, description="true: exactly what `lineage prompt` prints, without the wrapper")


class KnowledgeQuery(Strict):
    recent_n: int = Field(30, ge=1, le=100_000)
    last_m: int = Field(10, ge=1, le=100_000)
    format: Literal["markdown", "json"] = "markdown"


class KnowledgeOut(BaseModel):
    project: str
    revision: int
    metric_name: str
    lower_is_better: bool
    best: TrialOut | None
    chain: list[TrialOut]
    recent: list[TrialOut]


# -- files ------------------------------------------------------------------------------------


class ImportQuery(Strict):
    """The options of ``lineage import``, by the same names: the one import
    (``Ledger.import_file``) reads them for every face. Column options apply to
    autoresearch/generic files (a fieldkit file's columns are fixed)."""

    format: Literal["auto", "fieldkit", "autoresearch", "generic"] = Field(
        "auto", description="auto: the first non-blank line decides (fieldkit, autoresearch, any tab/comma table)"
    )
    create: bool = Field(False, description="Create the project when it does not exist")
    direction: Literal["infer", "lower", "higher"] | None = Field(
        None,
        description="Which way the metric is better, for a new project; infer (the default): from the file "
        "(its metric's name and kept values; fieldkit: lower)",
    )
    lower_is_better: bool | None = Field(
        None, description="The older spelling of direction=lower|higher; must agree with direction when both are given"
    )
    best_policy: BestPolicyName = "kept"
    metric: Text | None = Field(
        None,
        description="The metric column (a name or a 1-based number); in a long-format "
        "file, one of the names in its metric-name column",
    )
    status: Text | None = Field(None, description="The status column; '-': the file has none")
    description: Text | None = Field(None, description="The description column")
    id: Text | None = Field(None, description="The column holding the exp_ids (default: row numbers 000, 001, ...)")
    parent: Text | None = Field(None, description="A column naming each row's parent (its commit or id)")
    status_map: list[Text] = Field(default_factory=list, description="More status words, WORD=LABEL,... (repeatable)")
    columns: Text | None = Field(None, description="NAME,NAME,...: the column names of a file without a header line")
    preview: bool = Field(False, description="Check and decide everything, store nothing (200, committed: false)")


class ImportOut(BaseModel):
    """What an import stored (or, for a preview, would) and decided."""

    project: str
    rows: int
    committed: bool = True
    created: bool = False
    format: str = ""
    metric: str | None = None
    metric_name: str | None = None
    lower_is_better: bool | None = None
    direction: str = Field("", description="How the direction was decided")
    warnings: list[str] = Field(default_factory=list)
    text_lines: list[int] = Field(default_factory=list, description="1-based lines kept as text (not records)")


class ExportQuery(Strict):
    extended: bool = False


# -- tokens and operations --------------------------------------------------------------------


class TokenCreate(Strict):
    name: Annotated[
        Annotated[str, Field(pattern=TOKEN_NAME_PATTERN), *TEXT_CHECKS],
        Field(description="a-z, A-Z, 0-9, '-', '_', '.', '@'"),
    ]
    role: RoleName


class TokenOut(BaseModel):
    name: str
    role: str
    created_at: str | None
    last_used_at: str | None
    revoked_at: str | None
    active: bool


class TokenCreated(TokenOut):
    token: str = Field(description="The secret: shown this once, stored only as a hash")


class AccessOut(BaseModel):
    """Whether the ledger takes writes without a token (``lineage.auth``'s module doc)."""

    anonymous_writes: Literal["until-first-token", "closed", "open"] = Field(
        description="until-first-token: a ledger that never had a token (open while it has none); closed from the "
        "first token on; open: re-opened by an admin"
    )
    anonymous_writes_open: bool = Field(
        description="Whether a write without a token is taken now (on a server "
        "that listens on loopback only; never on another address)"
    )
    active_tokens: bool
    changed_at: str | None
    changed_by: str | None


class AccessUpdate(Strict):
    anonymous_writes: Literal["open", "closed"]


class ReadyOut(BaseModel):
    status: str
    schema_revision: str
    head: str


# -- metric explorer --------------------------------------------------------------------------


class ExploreArgs(Strict):
    """The explorer's view (``lineage.browse.explore``'s module doc gives every rule); the page
    ``/projects/{p}/explore`` takes the same parameters."""

    metric: list[MetricRef] = Field(
        min_length=1, max_length=6, description="Telemetry names or core_metric (repeat the parameter)"
    )
    select: Literal["filter", "chain", "subtree", "telemetry"] = Field(
        "filter",
        description="Which trials: the filters alone, the chain to `to` (default the best), the subtree "
        "under `root`, or the trials that have telemetry (each narrowed by the filters)",
    )
    to: Text | None = Field(None, description="select=chain: the chain's last trial (default: the current best)")
    root: Text | None = Field(None, description="select=subtree: the subtree's root trial")
    status: list[StatusList] | None = Field(
        None, description="Any of these statuses (repeat the parameter, or comma-separate)"
    )
    specialist: Text | None = None
    domain: Text | None = None
    parent: Text | None = None
    metric_min: float | None = Field(None, allow_inf_nan=False)
    metric_max: float | None = Field(None, allow_inf_nan=False)
    q: Text | None = Field(None, description="Text in the hypothesis, notes or exp_id")
    filter: Text | None = Field(None, max_length=2000, description=FILTER_HELP)
    group: GroupBy | None = Field(None, description="A trial field or extra.KEY to group the curves by")
    band: Literal["minmax", "std", "none"] = Field(
        "minmax", description="Per group: mean with min-max or ± std, or none"
    )
    x: Literal["step", "turn", "wall"] = "step"
    turn: int | None = Field(
        None,
        ge=0,
        le=telemetry.MAX_TURN,
        description="x=step/wall: this turn's series (omitted: the not-per-turn series)",
    )
    step_min: int | None = Field(None, ge=0, le=telemetry.MAX_STEP)
    step_max: int | None = Field(None, ge=0, le=telemetry.MAX_STEP, description="At least step_min (else a 422)")
    buckets: int = Field(400, ge=20, le=2000, description="Buckets of the shared step grid at most")
    limit: int = Field(50, ge=1, le=200, description="Trials at most (the most recent that match)")

    def to_query(self) -> Any:
        """The :class:`lineage.browse.explore.ExploreQuery` of these arguments."""
        from lineage.browse.explore import ExploreQuery

        statuses = [FailureLabel.parse(s).value for raw in self.status or () for s in raw.split(",") if s.strip()]
        filters = {
            "status": statuses or None,
            "specialist": self.specialist,
            "domain": self.domain,
            "parent": self.parent,
            "metric_min": self.metric_min,
            "metric_max": self.metric_max,
            "text_query": self.q,
            "expression": self.filter,
        }
        metrics = tuple(dict.fromkeys(m for m in self.metric if m))  # names may hold commas: repeat the parameter
        return ExploreQuery(
            metrics=metrics,
            select=self.select,
            to=self.to,
            root=self.root,
            filters=filters,
            group_by=self.group,
            band=self.band,
            x=self.x,
            turn=self.turn,
            step_min=self.step_min,
            step_max=self.step_max,
            buckets=self.buckets,
            limit=self.limit,
        )


class ExploreOut(BaseModel):
    project: str
    metric_name: str
    lower_is_better: bool
    selection: dict[str, Any]
    group_by: str | None
    band: str
    x: str
    turn: int | None
    groups: list[dict[str, Any]]
    trials: list[dict[str, Any]]
    names: list[str]
    #: how many of the shown trials have each name
    name_trials: dict[str, int] = {}
    panels: list[dict[str, Any]]
