"""The ledger as an MCP server: the agent-facing tools, the session-start prompt (as a
tool, an MCP prompt and a resource), over stdio (``lineage mcp``) and over Streamable
HTTP (mounted at ``/mcp`` by ``lineage serve``: :func:`http_app`).

The tools are plain functions in ``api.mcp_tools``, listed with their roles in its table
``TOOLS``; :func:`build_server` registers each one, bound to the ledger and behind the
access check (:func:`_bind`). Each tool is one call of the service layer -- the same calls
the HTTP API makes -- so no rule exists twice: ``record_trial`` is
``ledger.recording.record_trial`` (exp_id allocation, the parent default and the other
recording rules, idempotency, ``delta_vs_best``), ``get_prompt`` is
``ledger.agent.prompt_document``, and so on.

Schemas
    Every parameter has a description but ``project`` and ``exp_id``, which the
    instructions name once (``tools/list`` is read at every session start: it is kept
    small, ``api.mcp_tools.compact_schema``). The trial of ``record_trial`` and the changes of
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
    process), so it asks for no token. Over HTTP every request to ``/mcp``, the first
    (``initialize`` or ``server/discover``) included, is refused with 401 (problem+json,
    ``WWW-Authenticate: Bearer``, as the JSON API's) when its token is bad, or missing
    where reads need one (``--no-anonymous-read``): a client learns at connect time, not
    at its first tool call (:meth:`McpEndpoint.refusal`). Beyond that, each tool call, the ``session_start``
    prompt and the prompt resource are checked like the JSON API's requests
    (``lineage.auth.check_access``): the ``Authorization: Bearer`` header, the role
    (reads: reader, writes: writer) and the server's anonymous-read setting. A call
    without the token it needs is an error naming the fix: a tool error for a tool, a
    JSON-RPC error (its message the same JSON text) for the prompt and the resource.
    Listings (tools, prompts, resources) are open: they show the server's shape. The
    resources list each project's prompt (``lineage://projects/SLUG/prompt``) to a caller
    who may read them, and none to another.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import inspect
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typed against mcp 2.x, the installed SDK (its fastmcp module is a stub that raises)
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError
else:
    try:  # mcp 2.x
        from mcp.server.mcpserver import Context, MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
        from mcp.shared.exceptions import MCPError
    except ImportError:  # mcp 1.x calls the same server FastMCP, and its error takes ErrorData
        from mcp.server.fastmcp import Context
        from mcp.server.fastmcp import FastMCP as MCPServer
        from mcp.server.fastmcp.exceptions import ToolError
        from mcp.shared.exceptions import McpError
        from mcp.types import ErrorData

        def MCPError(code: int, message: str, data: Any = None) -> McpError:
            return McpError(ErrorData(code=code, message=message, data=data))


from api.hosts import HostAllowList, mcp_transport_lists
from api.mcp_tools import PROMPT_RESOURCE, PROMPT_ROLE, TOOLS, compact_schema, prompt_resource, session_start
from lineage.auth import Forbidden, Role, Unauthorized, check_access
from lineage.errors import LedgerError, NotFound
from lineage.service import Ledger

INSTRUCTIONS = """\
Lineage Ledger: the research loop's memory. `project` is a project's slug, `exp_id` a trial's id.
1. list_projects; on a blank ledger create_project (slug, metric_name, lower_is_better).
2. At session start call get_prompt (project) and follow it; get_summary says where the loop stands.
3. Before proposing a trial ask find_similar: was this tried?
4. Record each finished trial with record_trial: status, core_metric (the project's metric),
   hypothesis. Leave parent_exp out to fork from the branch tip (the last keep); leave exp_id out to get the
   next number; pass an idempotency_key and reuse it on retries. Never send delta_vs_best.
5. When you learn something no single trial shows, add_note (text, cites: the exp_ids that show it).
6. With other agents on the same project: get_frontier (the best, the branch tip, who runs what), then
   claim_trial (hypothesis, owner, lease_s) before running an idea; heartbeat (exp_id, owner) while it runs;
   finish it with finish_claim (exp_id, owner, changes: core_metric; the ledger decides keep or discard).
"""


#: The installed distribution whose version the server reports (pyproject.toml's name).
DISTRIBUTION = "lineage-ledger"


def package_version() -> str:
    """The installed package's version, reported as the MCP ``serverInfo.version``;
    ``0+unknown`` when the code runs from a checkout that was never installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def _error_data(exc: LedgerError, ledger: Ledger) -> dict[str, Any]:
    """A ledger error as the JSON object the caller reads (module doc, "Errors")."""
    data = exc.as_dict()
    if isinstance(exc, NotFound) and exc.entity == "project":
        known = sorted(project.slug for project in ledger.projects.projects())
        data["known_projects"] = known
        data["detail"] = (
            f"project {exc.key!r} does not exist; known projects: {', '.join(known) or 'none'}. "
            "Create it with create_project (slug, metric_name, lower_is_better), or pass metric_name "
            "and lower_is_better to record_trial."
        )
    return data


def _tool_error(exc: LedgerError, ledger: Ledger) -> ToolError:
    """A tool's ledger error: a tool result with isError, for the model to read."""
    return ToolError(json.dumps(_error_data(exc, ledger), ensure_ascii=False, default=str))


#: JSON-RPC error codes of a prompt's or a resource's ledger error: refused access is a request
#: the server will not serve as sent, anything else a bad parameter (an unknown project, ...).
_INVALID_REQUEST = -32600
_INVALID_PARAMS = -32602


def _request_error(exc: LedgerError, ledger: Ledger) -> Exception:
    """A prompt's or a resource's ledger error: a JSON-RPC error whose message is the same
    JSON text as a tool error's (the SDK passes it through; any other exception it hides
    behind "Error rendering prompt")."""
    data = _error_data(exc, ledger)
    code = _INVALID_REQUEST if isinstance(exc, Unauthorized | Forbidden) else _INVALID_PARAMS
    return MCPError(code, json.dumps(data, ensure_ascii=False, default=str), data)


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
        self.check_headers(_headers(ctx), role)

    def allows(self, headers: Any, role: Role) -> bool:
        """Whether a request with ``headers`` (None: none, or stdio) may use ``role``."""
        try:
            self.check_headers(headers, role)
        except LedgerError:
            return False
        return True

    def check_headers(self, headers: Any, role: Role) -> None:
        if self.anonymous_read is None:  # stdio: the caller's own database
            return
        header = headers.get("authorization") if headers is not None else None
        try:
            check_access(
                self.ledger.tokens.principal(header),
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


def _bind(
    fn: Callable[..., Any],
    ledger: Ledger,
    access: _Access,
    role: Role,
    error: Callable[[LedgerError, Ledger], Exception],
) -> Callable[..., Any]:
    """``fn(ledger, **arguments)`` (``api.mcp_tools``) as the SDK registers it: the
    signature without ``ledger`` plus the request's ``ctx``, which the SDK fills in and
    leaves out of the input schema. Each call passes the access check of ``role`` first;
    a ledger error becomes ``error(exc, ledger)``."""

    def call(ctx: Context, **arguments: Any) -> Any:
        try:
            access.check(ctx, role)
            return fn(ledger, **arguments)
        except LedgerError as exc:
            raise error(exc, ledger) from None

    signature = inspect.signature(fn, eval_str=True)
    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    parameters = [*list(signature.parameters.values())[1:], context]
    call.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": signature.return_annotation}
    call.__name__ = call.__qualname__ = fn.__name__
    call.__doc__, call.__module__ = fn.__doc__, fn.__module__
    return call


class _LedgerServer(MCPServer):
    """The SDK's server whose ``resources/list`` also lists each project's prompt resource
    (a template alone shows in ``resources/templates/list``, which many clients never ask)."""

    ledger: Ledger
    access: _Access

    async def list_tools(self) -> list[Any]:
        """The tools with compact schemas (``api.mcp_tools.compact_schema``): ``tools/list``
        is read by every agent at every session start, so its size is paid in tokens."""
        listed = []
        for tool in await super().list_tools():
            names = (
                ("input_schema", "output_schema") if hasattr(tool, "input_schema") else ("inputSchema", "outputSchema")
            )
            update: dict[str, Any] = {
                name: compact_schema(getattr(tool, name)) for name in names if getattr(tool, name) is not None
            }
            if update.get(names[1]) == {"type": "object"}:  # "some object" says nothing: left out
                update[names[1]] = None
            listed.append(tool.model_copy(update=update))
        return listed

    async def _handle_list_resources(self, ctx: Any, params: Any) -> Any:  # mcp 2.x's handler
        listed = await super()._handle_list_resources(ctx, params)
        if self.access.allows(getattr(getattr(ctx, "request", None), "headers", None), PROMPT_ROLE):
            listed.resources.extend(await asyncio.to_thread(self.project_prompts))
        return listed

    def project_prompts(self) -> list[Any]:
        """One resource per project: its session-start prompt (``PROMPT_RESOURCE``)."""
        from mcp.types import Resource

        return [
            Resource(
                uri=PROMPT_RESOURCE.format(project=project.slug),
                name=f"prompt of {project.slug}",
                description=f"The session-start prompt of project {project.slug!r} (Markdown).",
                mime_type="text/markdown",
            )
            for project in self.ledger.projects.projects()
        ]


def build_server(ledger: Ledger, *, anonymous_read: bool | None = None, exposed: bool = False) -> MCPServer:
    """The MCP server over ``ledger``: the tools of :data:`api.mcp_tools.TOOLS`, the
    ``session_start`` prompt and the prompt resource. ``anonymous_read`` None: stdio, no
    access checks; True/False: HTTP, each call checked as the JSON API checks a request
    (``exposed``: the server listens on a non-loopback address, as the API's setting)."""
    # log_level: the SDK configures the root logger; the server's own logging stays as it is
    server = _LedgerServer(
        name="lineage-ledger", instructions=INSTRUCTIONS, version=package_version(), log_level="WARNING"
    )
    access = _Access(ledger, anonymous_read, exposed)
    server.ledger, server.access = ledger, access
    for tool in TOOLS:
        server.add_tool(
            _bind(tool.function, ledger, access, tool.role, _tool_error),
            name=tool.name,
            description=tool.description,
        )
    server.prompt(
        name="session_start",
        description="The session-start prompt of a project: the lineage so far and how to record this session's trial.",
    )(_bind(session_start, ledger, access, PROMPT_ROLE, _request_error))
    server.resource(
        PROMPT_RESOURCE,
        name="prompt",
        mime_type="text/markdown",
        description="A project's session-start prompt (Markdown).",
    )(_bind(prompt_resource, ledger, access, PROMPT_ROLE, _request_error))
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

    def refusal(self, headers: Any) -> Unauthorized | None:
        """Why a request with ``headers`` is refused before the SDK reads it: a bad token,
        or none where reads need one (module doc, "Access"); None: it goes on (a token too
        weak for a tool is that tool's error)."""
        try:
            _Access(self.ledger, self.anonymous_read, self.exposed).check_headers(headers, Role.READER)
        except Unauthorized as exc:
            return exc
        except LedgerError:
            return None
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.app is None:
            from starlette.responses import PlainTextResponse

            await PlainTextResponse("MCP is not running (the app's lifespan has not started)", 503)(
                scope, receive, send
            )
            return
        if scope.get("type") == "http":
            from starlette.requests import Request

            from api.problems import ledger_problem

            request = Request(scope)
            refused = await asyncio.to_thread(self.refusal, request.headers)
            if refused is not None:
                await ledger_problem(request, refused)(scope, receive, send)
                return
        await self.app(scope, receive, send)
