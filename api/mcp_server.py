"""The ledger as an MCP server: the agent-facing tools, the session-start prompt (as a
tool, an MCP prompt and a resource), over stdio (``lineage mcp``) and over Streamable
HTTP (mounted at ``/mcp`` by ``lineage serve``: :func:`http_routes`).

Each tool is one call of the service layer -- the same calls the HTTP API makes -- so no
rule exists twice: ``record_trial`` is ``ledger.recording.record_trial`` (exp_id allocation, the
parent default and the other recording rules, idempotency, ``delta_vs_best``),
``get_prompt`` is ``Ledger.prompt_document``, and so on.

Schemas
    Every parameter has a description. The trial of ``record_trial`` and the changes of
    ``update_trial`` are typed from the core's field table (``lineage.trial_fields``:
    types, the status enum, each field's meaning, the required ``status``); the ledger
    checks them (so a wrong type, an unknown status or an unknown field is a tool error
    naming the field, and nothing is written).

Errors
    A ledger error becomes a tool error whose text is a JSON object: ``code``, ``detail``
    and, where they apply, ``field``, ``line``, ``column``, ``existing``, ``proposed``; an
    unknown project adds ``known_projects`` and how to create one.

Access
    Over stdio the server runs with the caller's own access to the database (a local
    process), so it asks for no token. Over HTTP each tool call is checked like the JSON
    API's requests (``lineage.auth.check_access``): the ``Authorization: Bearer`` header,
    the tool's role (reads: reader, writes: writer) and the server's anonymous-read
    setting; a call without the token it needs is a tool error naming the fix.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field, WithJsonSchema

if TYPE_CHECKING:  # typed against mcp 2.x, the installed SDK (its fastmcp module is a stub that raises)
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
else:
    try:  # mcp 2.x
        from mcp.server.mcpserver import Context, MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:  # mcp 1.x calls the same server FastMCP
        from mcp.server.fastmcp import Context
        from mcp.server.fastmcp import FastMCP as MCPServer
        from mcp.server.fastmcp.exceptions import ToolError

from api.hosts import HostAllowList, mcp_transport_lists
from lineage.alerts import ALERT_LEVELS
from lineage.auth import Role, Unauthorized, check_access
from lineage.domain import MAX_BATCH, TRIAL_FIELD_NAMES, FailureLabel
from lineage.errors import InvalidInput, LedgerError, NotFound
from lineage.service import Ledger
from lineage.trial_fields import DEFAULT_LIST_FIELDS, changes_schema, check_fields, record_schema, select_fields

F = TypeVar("F", bound=Callable[..., Any])

INSTRUCTIONS = """\
Lineage Ledger: the research loop's memory.
1. list_projects; on a blank ledger create_project (slug, metric_name, lower_is_better).
2. At session start call get_prompt (project) and follow it; get_summary says where the loop stands.
3. Before proposing a trial ask find_similar: was this tried?
4. Record each finished trial with record_trial: status, core_metric (the project's metric),
   hypothesis. Leave parent_exp out to fork from the current best; leave exp_id out to get the
   next number; pass an idempotency_key and reuse it on retries. Never send delta_vs_best.
"""

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


def _description(doc: str | None) -> str:
    """A docstring as a tool description: dedented, each paragraph on one line."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in paragraph.splitlines()) for paragraph in paragraphs)


def _tool_error(exc: LedgerError, ledger: Ledger) -> ToolError:
    data = exc.as_dict()
    if isinstance(exc, NotFound) and exc.entity == "project":
        known = sorted(project.slug for project in ledger.projects.projects())
        data["known_projects"] = known
        data["detail"] = (
            f"project {exc.key!r} does not exist; known projects: {', '.join(known) or 'none'}. "
            "Create it with create_project (slug, metric_name, lower_is_better), or pass metric_name "
            "and lower_is_better to record_trial."
        )
    return ToolError(json.dumps(data, ensure_ascii=False, default=str))


def _headers(ctx: Any) -> Any:
    """The HTTP request's headers of a tool call; None over stdio."""
    try:
        found = ctx.headers  # mcp 2.x
    except AttributeError:  # mcp 1.x
        found = getattr(getattr(ctx.request_context, "request", None), "headers", None)
    except ValueError:  # no request (a direct call)
        return None
    return found


class _Access:
    """The access check of a tool call (module doc): none over stdio."""

    def __init__(self, ledger: Ledger, anonymous_read: bool | None, exposed: bool = False) -> None:
        self.ledger = ledger
        self.anonymous_read = anonymous_read
        self.exposed = exposed

    def check(self, ctx: Any, role: Role) -> None:
        if self.anonymous_read is None:  # stdio: the caller's own database
            return
        headers = _headers(ctx)
        header = headers.get("authorization") if headers is not None else None
        principal = self.ledger.tokens.principal(header)
        try:
            check_access(
                principal,
                role,
                anonymous_read=self.anonymous_read,
                exposed=self.exposed,
                ledger_open=self.ledger.tokens.anonymous_writes_open,
            )
        except Unauthorized as exc:
            raise Unauthorized(
                f"{exc.message}. Over MCP, send the header 'Authorization: Bearer <token>' "
                f"with a {role.value} token (e.g. in the client's MCP server config)"
            ) from None


def build_server(ledger: Ledger, *, anonymous_read: bool | None = None, exposed: bool = False) -> MCPServer:
    """The MCP server over ``ledger``. ``anonymous_read`` None: stdio, no access checks;
    True/False: HTTP, each call checked as the JSON API checks a request (``exposed``: the
    server listens on a non-loopback address, as the API's setting)."""
    # log_level: the SDK configures the root logger; the server's own logging stays as it is
    server = MCPServer(name="lineage-ledger", instructions=INSTRUCTIONS, log_level="WARNING")
    access = _Access(ledger, anonymous_read, exposed)

    def tool(role: Role) -> Callable[[F], F]:
        """Register ``fn`` as a tool: dedented description, access check, ledger errors."""

        def register(fn: F) -> F:
            @functools.wraps(fn)
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                try:
                    access.check(kwargs.get("ctx"), role)
                    return fn(*args, **kwargs)
                except LedgerError as exc:
                    raise _tool_error(exc, ledger) from None

            server.add_tool(wrapped, name=fn.__name__, description=_description(fn.__doc__))
            return fn

        return register

    def prompt_text(project: str, specialist: str = "") -> str:
        return ledger.agent.prompt_document(project, specialist=specialist, wrap=True, base_url=None, face="mcp")[1]

    # -- projects ------------------------------------------------------------------------------

    @tool(Role.READER)
    def list_projects(ctx: Context) -> dict[str, Any]:
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

    @tool(Role.WRITER)
    def create_project(
        ctx: Context,
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
            from lineage.errors import Conflict

            raise Conflict(
                f"project {slug!r} exists with metric_name={found.metric_name!r}, "
                f"lower_is_better={found.lower_is_better}",
                field="slug",
                existing=_project(found),
                proposed={"slug": slug, "metric_name": metric_name, "lower_is_better": lower_is_better},
            )
        return {"project": _project(found), "created": False}

    # -- the session-start prompt: a tool, a prompt and a resource -------------------------------

    @tool(Role.READER)
    def get_prompt(
        ctx: Context,
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

    @server.prompt(
        name="session_start",
        description="The session-start prompt of a project: the lineage so far and how to record this session's trial.",
    )
    def session_start(project: str, specialist: str = "") -> str:
        try:
            return prompt_text(project, specialist)
        except LedgerError as exc:
            raise _tool_error(exc, ledger) from None

    @server.resource(
        PROMPT_RESOURCE,
        name="prompt",
        mime_type="text/markdown",
        description="A project's session-start prompt (Markdown).",
    )
    def prompt_resource(project: str) -> str:
        try:
            return prompt_text(project)
        except LedgerError as exc:
            raise _tool_error(exc, ledger) from None

    @tool(Role.READER)
    def get_knowledge(
        ctx: Context,
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

    @tool(Role.READER)
    def list_trials(
        ctx: Context,
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

    @tool(Role.READER)
    def get_trial(ctx: Context, project: ProjectArg, exp_id: ExpIdArg) -> dict[str, Any]:
        """One trial of a project with every field (extra holds a results file's other
        columns and _git, the commit's diffstat)."""
        return ledger.trials.trial(project, exp_id).to_dict()

    @tool(Role.WRITER)
    def record_trial(
        ctx: Context,
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
        """Record a finished trial. Leave parent_exp out to fork from the current best
        (parent_defaulted says so) and exp_id out to get the next number. The answer holds the
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

    @tool(Role.WRITER)
    def record_trials(
        ctx: Context,
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

    @tool(Role.WRITER)
    def update_trial(ctx: Context, project: ProjectArg, exp_id: ExpIdArg, changes: ChangesArg) -> dict[str, Any]:
        """Change fields of a stored trial (status, core_metric, notes, timings, ...); the
        ledger recomputes delta_vs_best."""
        return ledger.recording.update_trial(project, exp_id, changes).to_dict()

    # -- the agent's memory ----------------------------------------------------------------------

    @tool(Role.READER)
    def find_similar(
        ctx: Context,
        project: ProjectArg,
        text: Annotated[str, Field(description="The idea to look for, in words (at most 2,000 characters).")],
        limit: Annotated[int, _bounded(1, 50, "Trials to return.")] = 5,
    ) -> dict[str, Any]:
        """Was this tried? The past trials whose hypothesis and notes are closest to the text,
        closest first: exp_id, status, core_metric, delta_vs_best and a score in [0, 1]. ML
        spellings count as one (lr and learning rate, MATRIX_LR and matrix lr). Ask before
        proposing a trial."""
        return {"items": [similar.to_dict() for similar in ledger.agent.find_similar(project, text, limit)]}

    @tool(Role.READER)
    def get_summary(
        ctx: Context,
        project: ProjectArg,
        last: Annotated[int, _bounded(1, 100_000, "The window of the recent keep rate and trend.")] = 20,
    ) -> dict[str, Any]:
        """Where a project's loop stands: trials per status, keep rate, the best and when it
        was reached, trials since the last new best, crash streak, time spent, the trend
        (improving / plateauing / stuck) and any tripped guardrail."""
        return ledger.agent.summary(project, last_n=last).to_dict()

    @tool(Role.READER)
    def list_alerts(
        ctx: Context,
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

    return server


def http_app(
    ledger: Ledger, *, anonymous_read: bool, exposed: bool = False, allowed: HostAllowList | None = None
) -> tuple[MCPServer, Any]:
    """The server for ``lineage serve`` and its Starlette app: Streamable HTTP at ``/mcp``,
    stateless (any server process answers any request; several workers share nothing but
    the database) with JSON answers. The app's routes go into the FastAPI app; its session
    manager must run for the app's lifetime (``server.session_manager.run()``). The SDK's
    DNS-rebinding protection takes the server's hosts (``allowed``, ``api.hosts``; None:
    the loopback names), the list the app's ``HostGuard`` checks first."""
    server = build_server(ledger, anonymous_read=anonymous_read, exposed=exposed)
    try:
        from mcp.server.transport_security import TransportSecuritySettings

        enable, hosts, origins = mcp_transport_lists(allowed or HostAllowList.build(None))
        app = server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(
                enable_dns_rebinding_protection=enable, allowed_hosts=hosts, allowed_origins=origins
            ),
        )
    except TypeError:  # mcp 1.x: the same options are settings of the server
        server.settings.stateless_http = True  # type: ignore[attr-defined]
        server.settings.json_response = True  # type: ignore[attr-defined]
        server.settings.streamable_http_path = "/mcp"  # type: ignore[attr-defined]
        app = server.streamable_http_app()
    return server, app


class McpEndpoint:
    """The ASGI endpoint of ``/mcp`` in the FastAPI app: a fresh :func:`http_app` for each
    lifespan of the app (:meth:`running`; an SDK session manager runs only once), 503
    outside one."""

    def __init__(
        self, ledger: Ledger, *, anonymous_read: bool, exposed: bool = False, allowed: HostAllowList | None = None
    ) -> None:
        self.ledger = ledger
        self.anonymous_read = anonymous_read
        self.exposed = exposed
        self.allowed = allowed
        self.app: Any = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        server, app = http_app(
            self.ledger, anonymous_read=self.anonymous_read, exposed=self.exposed, allowed=self.allowed
        )
        async with server.session_manager.run():
            self.app = app
            try:
                yield
            finally:
                self.app = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.app is None:
            from starlette.responses import PlainTextResponse

            await PlainTextResponse("MCP is not running (the app's lifespan has not started)", 503)(
                scope, receive, send
            )
            return
        await self.app(scope, receive, send)


def _project(project: Any) -> dict[str, Any]:
    return {
        "slug": project.slug,
        "title": project.title,
        "metric_name": project.metric_name,
        "lower_is_better": project.lower_is_better,
        "trial_count": project.trial_count,
    }
