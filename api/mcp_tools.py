"""The ledger's MCP tools, prompt and resource as plain functions of a :class:`Ledger`,
and :data:`TOOLS`, the table ``api.mcp_server.build_server`` registers them from.

Each function takes the ledger first and the tool's arguments after it; the server
binds the ledger, checks access and turns ledger errors into MCP errors, so a function
here is one call of the service layer (the same calls the HTTP API makes) and can be
called directly. A tool's name is its function's name, its description the function's
docstring (:func:`tool_description`), and its input schema comes from the parameters'
annotations: every parameter is described once, below.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from lineage.alerts import ALERT_LEVELS
from lineage.auth import Role
from lineage.domain import MAX_BATCH, TRIAL_FIELD_NAMES, FailureLabel
from lineage.errors import Conflict, InvalidInput, NotFound
from lineage.service import Ledger
from lineage.trial_fields import DEFAULT_LIST_FIELDS, changes_schema, check_fields, record_schema, select_fields

#: The resource that holds a project's session-start prompt.
PROMPT_RESOURCE = "lineage://projects/{project}/prompt"

# -- parameters, described once ----------------------------------------------------------------


def _bounded(low: int, high: int, description: str) -> Any:
    """A whole-number parameter whose range the schema states and the ledger checks, so a
    value out of range is the ledger's tool error naming the parameter, like any bad input."""
    return Field(description=description, json_schema_extra={"minimum": low, "maximum": high})


ProjectArg = Annotated[str, Field(description="The project's slug (list_projects names them).")]
ExpIdArg = Annotated[str, Field(description="The trial's exp_id, e.g. 004.")]
SpecialistArg = Annotated[
    str,
    Field(
        description="Who starts the session (an agent or role), shown in the prompt; leave empty in loops without "
        "specialists."
    ),
]
TopKArg = Annotated[int, _bounded(0, 100_000, "Kept trials in the leaderboard.")]
RecentArg = Annotated[int, _bounded(1, 100_000, "Trials in the recent-activity table.")]
LastArg = Annotated[int, _bounded(1, 100_000, "Latest trials shown in full.")]
TimestampArg = Annotated[str, Field(description="The session's time, shown in the prompt's heading (optional).")]
FormatArg = Annotated[
    Literal["auto", "fieldkit", "loop"],
    Field(
        description="auto: fieldkit's exact text for a fieldkit-style project given a specialist, else the loop's own "
        "sections; fieldkit: fieldkit's exact text; loop: the loop's own sections."
    ),
]
TrialArg = Annotated[dict[str, Any], WithJsonSchema(record_schema())]
ChangesArg = Annotated[dict[str, Any], WithJsonSchema(changes_schema())]
FieldsArg = Annotated[
    list[str] | None,
    WithJsonSchema(
        {
            "type": "array",
            "items": {"type": "string", "enum": list(TRIAL_FIELD_NAMES)},
            "description": f"The trial fields to return; default: {', '.join(DEFAULT_LIST_FIELDS)}.",
        }
    ),
]
StatusesArg = Annotated[
    list[str] | None,
    WithJsonSchema(
        {
            "type": "array",
            "items": {"type": "string", "enum": [label.value for label in FailureLabel]},
            "description": "Only trials with any of these statuses.",
        }
    ),
]


def _batch_item_schema() -> dict[str, Any]:
    """record_trial's trial, with the item's own optional idempotency key."""
    schema = record_schema()
    schema["properties"] = {
        **schema["properties"],
        "idempotency_key": {
            "type": "string",
            "description": "Your key for this trial alone (1-255 printable characters).",
        },
    }
    return schema


def tool_description(doc: str | None) -> str:
    """A docstring as a tool description: dedented, each paragraph on one line."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in paragraph.splitlines()) for paragraph in paragraphs)


# -- projects ------------------------------------------------------------------------------


def list_projects(ledger: Ledger) -> dict[str, Any]:
    """The projects of this ledger: slug, title, metric_name, direction, trial_count and
    the current best. Start here; on a blank ledger create a project with create_project."""
    out = []
    for project in ledger.projects.projects():
        best = ledger.trials.best(project.slug)
        out.append(
            {
                "slug": project.slug,
                "title": project.title,
                "metric_name": project.metric_name,
                "lower_is_better": project.lower_is_better,
                "trial_count": project.trial_count,
                "fed_by": "results file" if (project.settings or {}).get("results_file") else "records",
                "best": None if best is None else {"exp_id": best.exp_id, "core_metric": best.core_metric},
            }
        )
    return {"projects": out}


def create_project(
    ledger: Ledger,
    slug: Annotated[str, Field(description="The project's name in URLs and tools: a-z, 0-9, '-', '_', '.'.")],
    metric_name: Annotated[str, Field(description="What core_metric measures, e.g. val_bpb, accuracy, score.")],
    lower_is_better: Annotated[
        bool, Field(description="true: a smaller metric is better (a loss); false: a larger one (an accuracy).")
    ],
    title: Annotated[str, Field(description="A human title (optional).")] = "",
) -> dict[str, Any]:
    """Create a project (one research loop against one metric). Creating it again with the
    same metric and direction returns it (created=false); with others it is an error."""
    try:
        found = ledger.projects.project(slug)
    except NotFound:
        made = ledger.projects.create_project(
            slug, metric_name=metric_name, lower_is_better=lower_is_better, title=title
        )
        return {"project": _project(made), "created": True}
    if (found.metric_name, found.lower_is_better) != (metric_name, lower_is_better):
        raise Conflict(
            f"project {slug!r} exists with metric_name={found.metric_name!r}, lower_is_better={found.lower_is_better}",
            field="slug",
            existing=_project(found),
            proposed={"slug": slug, "metric_name": metric_name, "lower_is_better": lower_is_better},
        )
    return {"project": _project(found), "created": False}


# -- the session-start prompt: a tool, a prompt and a resource -------------------------------


def get_prompt(
    ledger: Ledger,
    project: ProjectArg,
    specialist: SpecialistArg = "",
    top_k: TopKArg = 20,
    recent_n: RecentArg = 30,
    last_m: LastArg = 10,
    timestamp: TimestampArg = "",
    raw: Annotated[bool, Field(description="true: the lineage block alone, without how to record.")] = False,
    format: FormatArg = "auto",
) -> str:
    """The session-start prompt of a project (Markdown): the current best and its commit,
    the chain of kept changes to it, recent trials, where the loop stands, and how to
    record this session's trial. Read it first and follow it."""
    return ledger.agent.prompt_document(
        project,
        specialist=specialist,
        top_k=top_k,
        recent_n=recent_n,
        last_m=last_m,
        timestamp=timestamp,
        wrap=not raw,
        base_url=None,
        face="mcp",
        style=format,
    )[1]


def session_start(ledger: Ledger, project: ProjectArg, specialist: SpecialistArg = "") -> str:
    """The ``session_start`` MCP prompt: get_prompt's wrapped prompt, with the defaults."""
    return ledger.agent.prompt_document(project, specialist=specialist, wrap=True, base_url=None, face="mcp")[1]


def prompt_resource(ledger: Ledger, project: str) -> str:
    """The resource :data:`PROMPT_RESOURCE`: the session-start prompt with no specialist."""
    return session_start(ledger, project)


def get_knowledge(
    ledger: Ledger,
    project: ProjectArg,
    recent_n: RecentArg = 30,
    last_m: LastArg = 10,
    format: Annotated[
        Literal["markdown", "json"],
        Field(description="markdown: the KNOWLEDGE.md block; json: the best, its chain and the recent trials."),
    ] = "markdown",
) -> str:
    """The KNOWLEDGE.md block of a project: the chain to the best and the recent trials."""
    if format == "json":
        found, data = ledger.agent.knowledge_data(project, recent_n=recent_n)
        return json.dumps(data.to_dict(found), ensure_ascii=False)
    return ledger.agent.knowledge_document(project, recent_n=recent_n, last_m=last_m)[1]


# -- trials --------------------------------------------------------------------------------


def list_trials(
    ledger: Ledger,
    project: ProjectArg,
    fields: FieldsArg = None,
    status: StatusesArg = None,
    specialist: Annotated[str | None, Field(description="Only this specialist's trials.")] = None,
    domain: Annotated[str | None, Field(description="Only trials of this domain.")] = None,
    parent: Annotated[str | None, Field(description="Only children of this exp_id ('' : roots).")] = None,
    metric_min: Annotated[float | None, Field(description="Only trials with core_metric >= this.")] = None,
    metric_max: Annotated[float | None, Field(description="Only trials with core_metric <= this.")] = None,
    q: Annotated[str | None, Field(description="Text in the hypothesis, notes or exp_id.")] = None,
    filter: Annotated[
        str | None,
        Field(
            description="A filter expression: `status = keep and core_metric < 0.99`, "
            "`extra.memory_gb >= 45`, `hypothesis ~ warmup`, `exp_id > 1000`, "
            "`status in (crash, discard)`; a bare word matches the text."
        ),
    ] = None,
    sort: Annotated[
        str, Field(description="seq, metric, exp_id, any trial field or extra.KEY; a leading - sorts descending.")
    ] = "seq",
    order: Annotated[Literal["asc", "desc"], Field(description="asc or desc.")] = "asc",
    limit: Annotated[int, _bounded(1, 1000, "Trials per page.")] = 50,
    cursor: Annotated[str | None, Field(description="next_cursor of the previous page.")] = None,
) -> dict[str, Any]:
    """A page of a project's trials, filtered and sorted, with the fields asked for
    (default: exp_id, status, core_metric, delta_vs_best, parent_exp, hypothesis, notes).
    Pass next_cursor back as cursor for the next page."""
    names = check_fields(fields)
    if limit > 1000:
        raise InvalidInput("limit", f"must be an integer from 1 to 1000, got {limit!r}")
    if status:
        for word in status:
            FailureLabel.parse(word)
    page = ledger.tables.trials_query(
        project,
        sort=sort,
        descending=order == "desc",
        cursor=cursor,
        limit=limit,
        status=status,
        specialist=specialist,
        domain=domain,
        parent=parent,
        metric_min=metric_min,
        metric_max=metric_max,
        text_query=q,
        expression=filter,
    ).to_dict()
    page["items"] = [select_fields(item, names) for item in page["items"]]
    page["fields"] = list(names)
    return page


def get_trial(ledger: Ledger, project: ProjectArg, exp_id: ExpIdArg) -> dict[str, Any]:
    """One trial of a project with every field (extra holds a results file's other
    columns and _git, the commit's diffstat)."""
    return ledger.trials.trial(project, exp_id).to_dict()


def record_trial(
    ledger: Ledger,
    project: ProjectArg,
    trial: TrialArg,
    idempotency_key: Annotated[
        str | None,
        Field(
            description="Your key for this trial (1-255 printable characters); reuse it on a retry and the "
            "trial is never stored twice."
        ),
    ] = None,
    metric_name: Annotated[
        str | None,
        Field(
            description="Only for a project that does not exist yet: its metric's name; with lower_is_better "
            "the project is created."
        ),
    ] = None,
    lower_is_better: Annotated[
        bool | None, Field(description="Only for a project that does not exist yet: the metric's direction.")
    ] = None,
) -> dict[str, Any]:
    """Record a finished trial. Leave parent_exp out to fork from the branch tip, the last
    keep (parent_defaulted says so), and exp_id out to get the next number. Send status
    "auto" with core_metric to let the ledger decide keep or discard against the best. The answer holds the
    stored trial, its delta against the best before it, whether it is the new best,
    warnings (what the ledger read differently) and earlier trials like it (similar_prior)."""
    created = False
    if metric_name is not None and lower_is_better is not None:
        try:
            ledger.projects.project(project)
        except NotFound:
            ledger.projects.create_project(project, metric_name=metric_name, lower_is_better=lower_is_better)
            created = True
    result = ledger.recording.record_trial(project, trial, idempotency_key=idempotency_key, similar_prior=True)
    return {**result.to_dict(), "project_created": created}


def record_trials(
    ledger: Ledger,
    project: ProjectArg,
    trials: Annotated[
        list[dict[str, Any]],
        WithJsonSchema(
            {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_BATCH,
                "items": _batch_item_schema(),
                "description": f"1 to {MAX_BATCH:,} finished trials, each as record_trial's trial (plus an optional "
                "idempotency_key of its own), recorded in this order.",
            }
        ),
    ],
    idempotency_key: Annotated[
        str | None,
        Field(
            description="Your key for the whole batch; the same batch again gets the same trials back, never "
            "stored twice."
        ),
    ] = None,
    similar: Annotated[bool, Field(description="Also return each trial's similar_prior.")] = False,
) -> dict[str, Any]:
    """Record many finished trials at once, all or nothing (a day's results, a
    migration). Each follows record_trial's rules in order: exp_id allocated, a left-out
    parent_exp is the best so far (earlier trials of the batch included). A bad trial
    stores nothing; the error names it as trials[i].field."""
    return ledger.recording.record_trials(
        project, trials, idempotency_key=idempotency_key, similar_prior=similar
    ).to_dict()


def update_trial(ledger: Ledger, project: ProjectArg, exp_id: ExpIdArg, changes: ChangesArg) -> dict[str, Any]:
    """Change fields of a stored trial (status, core_metric, notes, timings, ...); the
    ledger recomputes delta_vs_best."""
    return ledger.recording.update_trial(project, exp_id, changes).to_dict()


def heartbeat(
    ledger: Ledger,
    project: ProjectArg,
    exp_id: ExpIdArg,
    owner: Annotated[
        str | None, Field(description="who holds the trial (a run id, your name); null: as stored")
    ] = None,
) -> dict[str, Any]:
    """Keep a running trial (status running) alive while you work on it: without a
    heartbeat for the project's lease (default 10 minutes) it becomes harness_abort.
    Finish it with update_trial and its outcome. An error naming status when the
    trial is not running."""
    return ledger.leases.heartbeat(project, exp_id, owner=owner).to_dict()


def claim_trial(
    ledger: Ledger,
    project: ProjectArg,
    hypothesis: Annotated[str, Field(description="The idea you are about to run, in words.")],
    owner: Annotated[str, Field(description="Who runs it: your name or run id (heartbeats name it too).")],
    parent_exp: Annotated[
        str | None, Field(description="The trial it forks from; left out: the branch tip (the last keep).")
    ] = None,
    notes: Annotated[str | None, Field(description="Knob changes or a patch summary.")] = None,
    idempotency_key: Annotated[
        str | None, Field(description="Your key for this claim; a retry with it gets the same claim back.")
    ] = None,
) -> dict[str, Any]:
    """Claim an idea before running it, so parallel agents do not run it twice: it becomes
    a running trial held by owner, with its near-duplicates among the trials tried and
    other agents' running claims (and warnings naming them). A project that refuses
    duplicate claims answers an error naming the running claim and its owner instead:
    pick another idea. Keep the claim alive with heartbeat; finish it with update_trial
    (status auto and core_metric: the ledger decides keep or discard)."""
    return ledger.claims.claim(
        project, hypothesis, owner=owner, parent_exp=parent_exp, notes=notes, idempotency_key=idempotency_key
    ).to_dict()


def list_running(ledger: Ledger, project: ProjectArg) -> dict[str, Any]:
    """Who is running what: the project's running trials, oldest first: exp_id, owner,
    hypothesis, since, last heartbeat. Read it before claiming an idea."""
    return {"items": [lease.to_dict() for lease in ledger.leases.running(project)]}


def get_frontier(ledger: Ledger, project: ProjectArg) -> dict[str, Any]:
    """Where the project's agents stand, in one read: the best trial, the branch tip (what
    a trial without parent_exp forks from) and the running claims (who is running what)."""
    return ledger.claims.frontier(project).to_dict()


# -- the agent's memory ----------------------------------------------------------------------


def find_similar(
    ledger: Ledger,
    project: ProjectArg,
    text: Annotated[str, Field(description="The idea to look for, in words (at most 2,000 characters).")],
    limit: Annotated[int, _bounded(1, 50, "Trials to return.")] = 5,
) -> dict[str, Any]:
    """Was this tried? The past trials whose hypothesis and notes are closest to the text,
    closest first: exp_id, status, core_metric, delta_vs_best and a score in [0, 1]. ML
    spellings count as one (lr and learning rate, MATRIX_LR and matrix lr). Ask before
    proposing a trial. same_knob: earlier trials that changed a knob the text names
    ("increase MATRIX_LR from 0.04 to 0.06"), each with the value it set; tried_before:
    "sweep of MATRIX_LR: 0.04 keep, 0.06 discard" or "repeat of exp_017: ..."."""
    found = ledger.agent.find_similar(project, text, limit)
    tried, said = ledger.knobs.tried_of_text(project, text)
    return {
        "items": [similar.to_dict() for similar in found],
        "same_knob": [attempt.to_dict() for attempt in tried],
        "tried_before": [one.to_dict() for one in said],
    }


def knob_history(
    ledger: Ledger,
    project: ProjectArg,
    knob: Annotated[
        str | None,
        Field(description="The knob in any spelling (MATRIX_LR, matrix lr, learning_rate); omit for every knob."),
    ] = None,
) -> dict[str, Any]:
    """What was each knob tried at, and how did each value do? Per knob, the values in the
    order first tried, each with its trials (exp_id, status, core_metric, delta_vs_best),
    read from the trials' git patches, configs, results-file columns and hypotheses."""
    return ledger.knobs.knob_history(project, knob)


def get_summary(
    ledger: Ledger,
    project: ProjectArg,
    last: Annotated[int, _bounded(1, 100_000, "The window of the recent keep rate and trend.")] = 20,
) -> dict[str, Any]:
    """Where a project's loop stands: trials per status, keep rate, the best and when it
    was reached, trials since the last new best, crash streak, time spent, the trend
    (starting / improving / plateauing / stuck) and any tripped guardrail."""
    return ledger.agent.summary(project, last_n=last).to_dict()


def list_alerts(
    ledger: Ledger,
    project: ProjectArg,
    exp_id: Annotated[str | None, Field(description="Only this trial's alerts.")] = None,
    level: Annotated[
        list[str] | None,
        WithJsonSchema(
            {
                "type": "array",
                "items": {"type": "string", "enum": list(ALERT_LEVELS)},
                "description": "Only alerts of these levels.",
            }
        ),
    ] = None,
    limit: Annotated[int, _bounded(1, 1000, "Alerts per page.")] = 20,
    before_id: Annotated[int | None, Field(description="next_before_id of the previous page.")] = None,
) -> dict[str, Any]:
    """Alerts that the project's training code raised ("loss is diverging"), newest
    first: id, exp_id, level (info / warn / error), title, text, step, when. Pass
    next_before_id back as before_id for older ones. Check it with the summary before
    starting a trial."""
    items, next_before_id = ledger.alerts.alerts_page(
        project, exp_id=exp_id, levels=level, before_id=before_id, limit=limit
    )
    return {"items": [alert.to_dict() for alert in items], "next_before_id": next_before_id}


def _project(project: Any) -> dict[str, Any]:
    return {
        "slug": project.slug,
        "title": project.title,
        "metric_name": project.metric_name,
        "lower_is_better": project.lower_is_better,
        "trial_count": project.trial_count,
    }


# -- the table ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class McpTool:
    """One tool: its function and the role a call needs over HTTP (reads: reader, writes:
    writer). Its name is the function's name, its description the function's docstring."""

    function: Callable[..., Any]
    role: Role

    @property
    def name(self) -> str:
        return self.function.__name__

    @property
    def description(self) -> str:
        return tool_description(self.function.__doc__)


#: Every tool, in the order ``tools/list`` lists them.
TOOLS: tuple[McpTool, ...] = (
    McpTool(list_projects, Role.READER),
    McpTool(create_project, Role.WRITER),
    McpTool(get_prompt, Role.READER),
    McpTool(get_knowledge, Role.READER),
    McpTool(list_trials, Role.READER),
    McpTool(get_trial, Role.READER),
    McpTool(record_trial, Role.WRITER),
    McpTool(record_trials, Role.WRITER),
    McpTool(update_trial, Role.WRITER),
    McpTool(heartbeat, Role.WRITER),
    McpTool(claim_trial, Role.WRITER),
    McpTool(list_running, Role.READER),
    McpTool(get_frontier, Role.READER),
    McpTool(find_similar, Role.READER),
    McpTool(knob_history, Role.READER),
    McpTool(get_summary, Role.READER),
    McpTool(list_alerts, Role.READER),
)

#: The prompt's and the resource's role: they are get_prompt under other names.
PROMPT_ROLE = Role.READER
