"""The ledger as an MCP server (``lineage mcp``, stdio): the agent-facing tools.

Each tool is one call of the service layer -- the same calls the HTTP API makes -- so no
rule exists twice: ``record_trial`` is ``Ledger.record_trial`` (exp_id allocation,
idempotency, ``delta_vs_best`` computed by the ledger), ``get_prompt`` is
``Ledger.prompt_document`` (``raw``: the bytes of ``lineage prompt``), and so on.
A ledger error becomes a tool error whose text is a JSON object: ``code``, ``detail``
and, where they apply, ``field``, ``line``, ``column``, ``existing``, ``proposed``.

The server runs with the caller's own access to the database (stdio: a local
process), so it asks for no token.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Callable, Literal, TypeVar

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x calls the same server FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]

from lineage.errors import LedgerError
from lineage.service import Ledger

F = TypeVar("F", bound=Callable[..., Any])

INSTRUCTIONS = """\
Lineage Ledger: the research loop's memory. At session start call get_prompt (project,
specialist) and follow it. Record each finished trial with record_trial (omit exp_id to
get the next one; pass an idempotency_key and reuse it on retries). Never send
delta_vs_best: the ledger computes it.
"""


def _ledger_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LedgerError as exc:
            raise ToolError(json.dumps(exc.as_dict(), ensure_ascii=False, default=str)) from None

    return wrapped  # type: ignore[return-value]


def build_server(ledger: Ledger) -> MCPServer:
    server = MCPServer(name="lineage-ledger", instructions=INSTRUCTIONS)

    @server.tool()
    @_ledger_errors
    def get_prompt(
        project: str, specialist: str, top_k: int = 20, recent_n: int = 30, last_m: int = 10,
        timestamp: str = "", raw: bool = False,
    ) -> str:
        """The session-start prompt of PROJECT for SPECIALIST (Markdown). raw=true: exactly
        what `lineage prompt` prints; otherwise wrapped with the next exp_id, the metric and
        how to record a trial."""
        return ledger.prompt_document(
            project, specialist=specialist, top_k=top_k, recent_n=recent_n, last_m=last_m, timestamp=timestamp,
            wrap=not raw, base_url=None,
        )[1]

    @server.tool()
    @_ledger_errors
    def get_knowledge(
        project: str, recent_n: int = 30, last_m: int = 10, format: Literal["markdown", "json"] = "markdown"
    ) -> str:
        """The KNOWLEDGE.md block of PROJECT; format=json: the best, its chain (root first)
        and the recent trials as a JSON document."""
        if format == "json":
            found, data = ledger.knowledge_data(project, recent_n=recent_n)
            return json.dumps(data.to_dict(found), ensure_ascii=False)
        return ledger.knowledge_document(project, recent_n=recent_n, last_m=last_m)[1]

    @server.tool()
    @_ledger_errors
    def list_trials(
        project: str,
        status: list[str] | None = None,
        specialist: str | None = None,
        domain: str | None = None,
        parent: str | None = None,
        metric_min: float | None = None,
        metric_max: float | None = None,
        q: str | None = None,
        sort: Literal["seq", "metric", "exp_id"] = "seq",
        order: Literal["asc", "desc"] = "asc",
        limit: int = 50,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """A page of PROJECT's trials, filtered and sorted; pass next_cursor back as cursor."""
        query = ledger.trials_query(
            project, sort=sort, descending=order == "desc", cursor=cursor, limit=min(max(limit, 1), 1000),
            status=status, specialist=specialist, domain=domain, parent=parent, metric_min=metric_min,
            metric_max=metric_max, text_query=q,
        )
        return query.to_dict()

    @server.tool()
    @_ledger_errors
    def get_trial(project: str, exp_id: str) -> dict[str, Any]:
        """One trial of PROJECT with every field."""
        return ledger.trial(project, exp_id).to_dict()

    @server.tool()
    @_ledger_errors
    def record_trial(project: str, trial: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        """Record a trial in PROJECT. TRIAL holds fieldkit's fields (status, core_metric,
        hypothesis, parent_exp, ...); omit exp_id to get the next number. Same exp_id or
        idempotency_key with the same fields: the stored trial (created=false)."""
        result = ledger.record_trial(project, trial, idempotency_key=idempotency_key, similar_prior=True)
        return result.to_dict()

    @server.tool()
    @_ledger_errors
    def find_similar(project: str, text: str, limit: int = 5) -> dict[str, Any]:
        """Was this tried? The past trials of PROJECT whose hypothesis and notes are closest
        to TEXT, closest first: exp_id, status, core_metric, delta_vs_best (against the best
        before it) and a score in [0, 1]. Ask before proposing a trial."""
        return {"items": [similar.to_dict() for similar in ledger.find_similar(project, text, limit)]}

    @server.tool()
    @_ledger_errors
    def update_trial(project: str, exp_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Change fields of a stored trial (status, core_metric, notes, timings, clip-scale
        statistics, ...); delta_vs_best is recomputed by the ledger."""
        return ledger.update_trial(project, exp_id, changes).to_dict()

    @server.tool()
    @_ledger_errors
    def get_summary(project: str, last: int = 20) -> dict[str, Any]:
        """Where PROJECT's loop stands: trials per status, keep rate (all, last LAST), the
        best and when it was reached, trials since the last new best, crash streak, time
        spent, the trend (improving / plateauing / stuck, with its rule) and any tripped
        guardrail. Check it before starting a trial."""
        return ledger.summary(project, last_n=last).to_dict()

    @server.tool()
    @_ledger_errors
    def list_alerts(project: str, exp_id: str | None = None, level: list[str] | None = None, limit: int = 20,
                    before_id: int | None = None) -> dict[str, Any]:
        """Alerts that PROJECT's training code raised ("loss is diverging"), newest first:
        id, exp_id, level (info / warn / error), title, text, step, when. EXP_ID: one
        trial's; LEVEL: only these levels; pass next_before_id back as BEFORE_ID for older
        ones. Check it with the summary before starting a trial."""
        items, next_before_id = ledger.alerts_page(project, exp_id=exp_id, levels=level, before_id=before_id,
                                                   limit=limit)
        return {"items": [alert.to_dict() for alert in items], "next_before_id": next_before_id}

    return server
