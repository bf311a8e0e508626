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

from lineage.agent.reading import agent_answer
from lineage.auth import Role
from lineage.domain import MAX_BATCH, MAX_CLAIM_LEASE_S, MIN_CLAIM_LEASE_S, FailureLabel
from lineage.errors import Conflict, InvalidInput, NotFound
from lineage.patches import PATCH_FIELD
from lineage.service import Ledger
from lineage.trial_fields import DEFAULT_LIST_FIELDS, check_fields, record_schema, select_fields

#: The resource that holds a project's session-start prompt.
PROMPT_RESOURCE = "lineage://projects/{project}/prompt"

# -- parameters, described once ----------------------------------------------------------------


def _bounded(low: int, high: int, description: str) -> Any:
    """A whole-number parameter whose range the description states and the ledger checks, so a
    value out of range is the ledger's tool error naming the parameter, like any bad input
    (left out of the schema, which every agent reads at every session start)."""
    return Field(description=description)


#: Every tool's first parameter, left undescribed: the server's instructions say once that it
#: is a project's slug (20 descriptions would cost tools/list half a kilobyte).
ProjectArg = str
#: A trial's id, undescribed for the same reason (the instructions say it once).
ExpIdArg = str
SpecialistArg = Annotated[str, Field(description="Who starts the session (optional).")]
RecentArg = Annotated[int, _bounded(1, 100_000, "Recent trials listed.")]
LastArg = Annotated[int, _bounded(1, 100_000, "Trials shown in full.")]
TimestampArg = Annotated[str, Field(description="The session's time (optional).")]
FormatArg = Annotated[
    Literal["auto", "fieldkit", "loop"],
    Field(description="auto, fieldkit or loop."),
]
TrialArg = Annotated[dict[str, Any], WithJsonSchema(record_schema())]
ChangesArg = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {
            "type": "object",
            "minProperties": 1,
            "description": "Fields of record_trial's trial to change; the others stay.",
        }
    ),
]
FieldsArg = Annotated[
    list[str] | None,
    WithJsonSchema(
        {
            "type": "array",
            "items": {"type": "string"},
            "description": f"Fields or extra.KEY (default: {', '.join(DEFAULT_LIST_FIELDS)}; "
            "extra._git.patch only by name).",
        }
    ),
]
StatusesArg = Annotated[
    list[str] | None,
    WithJsonSchema({"type": "array", "items": {"type": "string"}, "description": "Only these statuses."}),
]


def _without_titles(schema: Any) -> Any:
    """A JSON Schema without pydantic's generated ``title`` keywords (a property *named*
    title stays)."""
    if isinstance(schema, list):
        return [_without_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs") and isinstance(value, dict):
            out[key] = {name: _without_titles(sub) for name, sub in value.items()}
        else:
            out[key] = _without_titles(value)
    return out


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input or output schema as ``tools/list`` sends it: no generated titles; an
    optional parameter whose default is null written as its type alone (``anyOf [T,
    null]`` with ``default: null`` is T: leaving it out means null); no default that goes
    without saying (an empty text, a false flag). The ledger checks every argument
    itself, so the shorter schema admits nothing new."""
    out = _without_titles(schema)
    if out.get("additionalProperties") is True and "properties" not in out:
        del out["additionalProperties"]  # a dict's output: any object, the default
    for name, prop in (out.get("properties") or {}).items():
        options = prop.get("anyOf")
        default = prop.get("default", 0)
        if name in out.get("required", ()) or not (default is None or default == "" or default is False):
            continue
        if default is None and isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
            kept = next(option for option in options if option != {"type": "null"})
            prop = {**kept, **{k: v for k, v in prop.items() if k not in ("anyOf", "default")}}
        else:
            prop = {k: v for k, v in prop.items() if k != "default"}
        out["properties"][name] = prop
    return out


def tool_description(doc: str | None) -> str:
    """A docstring as a tool description: dedented, each paragraph on one line."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in paragraph.splitlines()) for paragraph in paragraphs)


# -- projects ------------------------------------------------------------------------------


def list_projects(ledger: Ledger) -> dict[str, Any]:
    """The projects: slug, metric_name, direction, trial count, best. Start here."""
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
    slug: Annotated[str, Field(description="a-z, 0-9, '-', '_', '.'.")],
    metric_name: Annotated[str, Field(description="What core_metric measures, e.g. val_bpb.")],
    lower_is_better: Annotated[bool, Field(description="true for a loss, false for an accuracy.")],
    title: Annotated[str, Field(description="Optional.")] = "",
) -> dict[str, Any]:
    """Create a project (one loop, one metric); again with the same metric: created=false."""
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
    timestamp: TimestampArg = "",
    raw: Annotated[bool, Field(description="Without how to record.")] = False,
    format: FormatArg = "auto",
) -> str:
    """The session-start prompt (Markdown): the best, its chain, recent trials, the notebook,
    how to record. Read it first and follow it."""
    return ledger.agent.prompt_document(
        project,
        specialist=specialist,
        timestamp=timestamp,
        wrap=not raw,
        base_url=None,
        face="mcp",
        style=format,
    )[1]


def session_start(
    ledger: Ledger, project: Annotated[str, Field(description="The project's slug.")], specialist: SpecialistArg = ""
) -> str:
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
        Field(description="markdown or json."),
    ] = "markdown",
) -> str:
    """KNOWLEDGE.md: the chain to the best and the recent trials."""
    if format == "json":
        found, data = ledger.agent.knowledge_data(project, recent_n=recent_n)
        return json.dumps(_for_agent(ledger, project, data.to_dict(found)), ensure_ascii=False)
    return ledger.agent.knowledge_document(project, recent_n=recent_n, last_m=last_m)[1]


# -- trials --------------------------------------------------------------------------------


def list_trials(
    ledger: Ledger,
    project: ProjectArg,
    fields: FieldsArg = None,
    status: StatusesArg = None,
    filter: Annotated[
        str | None,
        Field(
            description="E.g. `status = keep and metric < 0.99`, `extra.memory_gb >= 45`, `parent = 004`, "
            "`hypothesis ~ lr`."
        ),
    ] = None,
    sort: Annotated[str, Field(description="seq, metric, a field or extra.KEY; -: descending.")] = "-seq",
    limit: Annotated[int, _bounded(1, 1000, "Trials per page.")] = 50,
    cursor: Annotated[str | None, Field(description="next_cursor of the previous page.")] = None,
) -> dict[str, Any]:
    """A page of trials, newest first; next_cursor pages on."""
    names = check_fields(fields)
    if limit > 1000:
        raise InvalidInput("limit", f"must be an integer from 1 to 1000, got {limit!r}")
    if status:
        for word in status:
            FailureLabel.parse(word)
    query = ledger.tables.trials_query(project, sort=sort, cursor=cursor, limit=limit, status=status, expression=filter)
    page = query.to_dict(patch=PATCH_FIELD in names)
    page["items"] = [select_fields(item, names) for item in page["items"]]
    page["fields"] = list(names)
    return _for_agent(ledger, project, page)


def get_trial(
    ledger: Ledger,
    project: ProjectArg,
    exp_id: ExpIdArg,
    include_patch: Annotated[bool, Field(description="Also extra._git.patch (the commit's diff).")] = False,
) -> dict[str, Any]:
    """One trial, every field (rerun_of: the trial it reruns, when declared)."""
    found, rerun_of = ledger.trials.trial_with_rerun(project, exp_id)
    trial = found.to_dict() if rerun_of is None else {**found.to_dict(), "rerun_of": rerun_of}
    if include_patch:
        patch = (trial.get("extra") or {}).get("_git", {}).get("patch")
        return {**_for_agent(ledger, project, trial), PATCH_FIELD: patch}
    return _for_agent(ledger, project, trial)


def _for_agent(ledger: Ledger, project: str, answer: Any) -> Any:
    """``answer`` as an agent reads it (``lineage.agent.reading``): trials without their
    patch, metrics at the project's precision."""
    return agent_answer(answer, ledger.agent.metric_decimals(project))


def record_trial(
    ledger: Ledger,
    project: ProjectArg,
    trial: TrialArg,
    idempotency_key: Annotated[
        str | None,
        Field(description="Reuse it on a retry: never stored twice."),
    ] = None,
    metric_name: Annotated[
        str | None,
        Field(description="With lower_is_better: creates a missing project."),
    ] = None,
    lower_is_better: Annotated[bool | None, Field(description="A missing project's direction.")] = None,
) -> dict[str, Any]:
    """Record a finished trial; leave parent_exp and exp_id out. Answers its delta,
    is_new_best, warnings and similar_prior."""
    created = False
    if metric_name is not None and lower_is_better is not None:
        try:
            ledger.projects.project(project)
        except NotFound:
            ledger.projects.create_project(project, metric_name=metric_name, lower_is_better=lower_is_better)
            created = True
    result = ledger.recording.record_trial(project, trial, idempotency_key=idempotency_key, similar_prior=True)
    return _for_agent(ledger, project, {**result.to_dict(), "project_created": created})


def record_trials(
    ledger: Ledger,
    project: ProjectArg,
    trials: Annotated[
        list[dict[str, Any]],
        WithJsonSchema(
            {
                "type": "array",
                "items": {"type": "object"},
                "description": f"1-{MAX_BATCH:,} of record_trial's trials, each with an optional idempotency_key.",
            }
        ),
    ],
    idempotency_key: Annotated[
        str | None,
        Field(description="The batch's key: a retry gets the same trials back."),
    ] = None,
    similar: Annotated[bool, Field(description="Also each similar_prior.")] = False,
) -> dict[str, Any]:
    """Record many trials at once, all or nothing, each by record_trial's rules in order;
    an error names trials[i].field."""
    result = ledger.recording.record_trials(project, trials, idempotency_key=idempotency_key, similar_prior=similar)
    return _for_agent(ledger, project, result.to_dict())


def update_trial(ledger: Ledger, project: ProjectArg, exp_id: ExpIdArg, changes: ChangesArg) -> dict[str, Any]:
    """Change fields of a stored trial; noise: its delta against the noise floor."""
    return _for_agent(ledger, project, ledger.recording.update_judged(project, exp_id, changes).to_dict())


def heartbeat(
    ledger: Ledger,
    project: ProjectArg,
    exp_id: ExpIdArg,
    owner: Annotated[str | None, Field(description="Who holds it; left out: as stored.")] = None,
) -> dict[str, Any]:
    """Keep a running trial alive: without a heartbeat within its lease it becomes
    harness_abort. Errors name status (not running: stop) or owner (another agent's)."""
    return ledger.leases.heartbeat(project, exp_id, owner=owner).to_dict()


def claim_trial(
    ledger: Ledger,
    project: ProjectArg,
    hypothesis: Annotated[str, Field(description="The idea, in words.")],
    owner: Annotated[str, Field(description="Your name or run id.")],
    parent_exp: Annotated[str | None, Field(description="Left out: the branch tip.")] = None,
    notes: Annotated[str | None, Field(description="Knob changes or a patch summary.")] = None,
    lease_s: Annotated[
        float | None,
        Field(description=f"Seconds without a heartbeat before it lapses, {MIN_CLAIM_LEASE_S} to {MAX_CLAIM_LEASE_S}."),
    ] = None,
    idempotency_key: Annotated[str | None, Field(description="A retry gets the same claim.")] = None,
) -> dict[str, Any]:
    """Claim an idea before running it: a running trial held by owner, with its
    near-duplicates; an error naming the running claim when the project refuses
    duplicates. Heartbeat it; finish it with finish_claim."""
    claimed = ledger.claims.claim(
        project,
        hypothesis,
        owner=owner,
        parent_exp=parent_exp,
        notes=notes,
        lease_s=lease_s,
        idempotency_key=idempotency_key,
    )
    return _for_agent(ledger, project, claimed.to_dict())


def finish_claim(
    ledger: Ledger,
    project: ProjectArg,
    exp_id: ExpIdArg,
    owner: Annotated[str, Field(description="As in claim_trial.")],
    changes: ChangesArg,
) -> dict[str, Any]:
    """Record your claim's result: changes as in update_trial (status left out: auto).
    Errors name owner (another agent's claim) or status (finished or lapsed)."""
    finished = ledger.claims.finish(project, exp_id, owner=owner, changes=changes)
    return _for_agent(ledger, project, finished.to_dict())


def list_running(ledger: Ledger, project: ProjectArg) -> dict[str, Any]:
    """Who is running what: running trials with owner, hypothesis, last heartbeat."""
    return {"items": [lease.to_dict() for lease in ledger.leases.running(project)]}


def get_frontier(ledger: Ledger, project: ProjectArg) -> dict[str, Any]:
    """The best, the branch tip and the running claims, in one read."""
    return _for_agent(ledger, project, ledger.claims.frontier(project).to_dict())


# -- the agent's memory ----------------------------------------------------------------------


def find_similar(
    ledger: Ledger,
    project: ProjectArg,
    text: Annotated[str, Field(description="The idea, in words.")],
    limit: Annotated[int, _bounded(1, 50, "Trials to return.")] = 5,
) -> dict[str, Any]:
    """Was this tried? The closest past trials with a score in [0, 1]; same_knob: trials
    that changed a knob the text names; tried_before: "sweep of MATRIX_LR: 0.04 keep,
    0.06 discard" or "repeat of exp_017". Ask before proposing a trial."""
    found = ledger.agent.find_similar(project, text, limit)
    tried, said = ledger.knobs.tried_of_text(project, text)
    answer = {
        "items": [similar.to_dict() for similar in found],
        "same_knob": [attempt.to_dict() for attempt in tried],
        "tried_before": [one.to_dict() for one in said],
    }
    return _for_agent(ledger, project, answer)


def knob_history(
    ledger: Ledger,
    project: ProjectArg,
    knob: Annotated[
        str | None,
        Field(description="Any spelling: MATRIX_LR, matrix lr; omit for every knob."),
    ] = None,
) -> dict[str, Any]:
    """Each value a knob was tried at, with its trials' status and metric."""
    return _for_agent(ledger, project, ledger.knobs.knob_history(project, knob))


def get_summary(
    ledger: Ledger,
    project: ProjectArg,
    last: Annotated[int, _bounded(1, 100_000, "Trend window.")] = 20,
) -> dict[str, Any]:
    """Where the loop stands: keep rate, best, trials since it, crash streak, trend,
    tripped guardrails."""
    return _for_agent(ledger, project, ledger.agent.summary(project, last_n=last).to_dict())


def list_alerts(
    ledger: Ledger,
    project: ProjectArg,
    exp_id: Annotated[str | None, Field(description="Only this trial's.")] = None,
    level: Annotated[
        list[str] | None,
        WithJsonSchema({"type": "array", "items": {"type": "string"}, "description": "info, warn, error."}),
    ] = None,
    limit: Annotated[int, _bounded(1, 1000, "Alerts per page.")] = 20,
    before_id: Annotated[int | None, Field(description="next_before_id of the previous page.")] = None,
) -> dict[str, Any]:
    """Alerts raised by training code or agents, newest first."""
    items, next_before_id = ledger.alerts.alerts_page(
        project, exp_id=exp_id, levels=level, before_id=before_id, limit=limit
    )
    return {"items": [alert.to_dict() for alert in items], "next_before_id": next_before_id}


def raise_alert(
    ledger: Ledger,
    project: ProjectArg,
    exp_id: ExpIdArg,
    title: Annotated[str, Field(description="One line.")],
    text: Annotated[str, Field(description="Details.")] = "",
    level: Annotated[Literal["info", "warn", "error"], Field(description="Severity.")] = "warn",
    step: Annotated[int | None, Field(description="Training step.")] = None,
) -> dict[str, Any]:
    """Raise an alert about a trial ("eval is broken"): sent to webhooks, shown in the prompt."""
    fields = {"title": title, "text": text, "level": level, "step": step}
    stored = ledger.trials.trial(project, exp_id).exp_id  # as people type it: exp_012 is 012
    alert, _ = ledger.alerts.record_alert(project, stored, fields)
    return alert.to_dict()


# -- the notebook ----------------------------------------------------------------------------


def add_note(
    ledger: Ledger,
    project: ProjectArg,
    text: Annotated[str, Field(description="E.g. 'LR above 0.06 diverges at depth 12'.")],
    cites: Annotated[list[str], Field(description="exp_ids that show it (1-20).")],
    author: Annotated[str, Field(description="Optional.")] = "",
) -> dict[str, Any]:
    """Note what you learned across trials, citing them; the prompt carries the best notes."""
    return ledger.notes.add_note(project, {"text": text, "cites": cites, "author": author}).to_dict()


def list_notes(
    ledger: Ledger,
    project: ProjectArg,
    limit: Annotated[int, _bounded(1, 200, "Notes per page.")] = 20,
    before_id: Annotated[int | None, Field(description="next_before_id of the previous page.")] = None,
) -> dict[str, Any]:
    """The notebook, newest first; contradicted: a later keep that changed what a note
    speaks against."""
    items, next_before_id = ledger.notes.notes(project, before_id=before_id, limit=limit)
    return {"items": [note.to_dict() for note in items], "next_before_id": next_before_id}


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
    McpTool(finish_claim, Role.WRITER),
    McpTool(list_running, Role.READER),
    McpTool(get_frontier, Role.READER),
    McpTool(find_similar, Role.READER),
    McpTool(knob_history, Role.READER),
    McpTool(get_summary, Role.READER),
    McpTool(list_alerts, Role.READER),
    McpTool(raise_alert, Role.WRITER),
    McpTool(add_note, Role.WRITER),
    McpTool(list_notes, Role.READER),
)

#: The prompt's and the resource's role: they are get_prompt under other names.
PROMPT_ROLE = Role.READER
