"""What the handlers return: ledger values as JSON, TSV and Markdown responses, ETags.
(What they read, the request bodies, is parsed and checked in ``api.bodies``.)

ETags (weak) of the prompt, the knowledge block and a project derive from the
project's ``revision`` -- bumped by every write to the project, in the database, so all
server instances on one database agree -- plus everything else the body depends on
(the query arguments, the base URL a wrapped prompt names, the default wrapper's text):
``W/"<revision>-<digest>"``. ``If-None-Match`` with that tag gets 304 after one indexed
query, without reading a trial.
"""

from __future__ import annotations

import hashlib
import io
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from api import schemas
from api.problems import problem
from lineage.domain import Project
from lineage.errors import InvalidInput
from lineage.formats.fieldkit import iter_tsv, write_trials
from lineage.service import Ledger, RecordResult, default_prompt_template

TSV = "text/tab-separated-values; charset=utf-8"
MARKDOWN = "text/markdown; charset=utf-8"


# -- plain conversions ------------------------------------------------------------------------


def project_json(project: Project) -> dict[str, Any]:
    out = project.to_dict()
    out.pop("id", None)
    return out


def record_json(result: RecordResult) -> dict[str, Any]:
    return result.to_dict()


def trial_url(request: Request, slug: str, exp_id: str) -> str:
    return f"/api/v1/projects/{quote(slug, safe='')}/trials/{quote(exp_id, safe='')}"


class FastJSONResponse(JSONResponse):
    """JSONResponse rendered by orjson (the same compact JSON, in about a third of the
    time); the standard library's rendering for what orjson refuses (integers beyond 64
    bits in ``extra``)."""

    def render(self, content: Any) -> bytes:
        import orjson

        try:
            return orjson.dumps(content)
        except TypeError:
            return super().render(content)


def recorded(request: Request, slug: str, result: RecordResult) -> JSONResponse:
    """201 with ``Location`` for a new trial, 200 for one that was already stored."""
    return FastJSONResponse(
        record_json(result),
        status_code=201 if result.created else 200,
        headers={"Location": trial_url(request, slug, result.trial.exp_id)},
    )


def project_created(project: Project) -> JSONResponse:
    return JSONResponse(
        project_json(project), status_code=201, headers={"Location": f"/api/v1/projects/{quote(project.slug, safe='')}"}
    )


# -- ETags ------------------------------------------------------------------------------------


def etag(revision: int, *parts: Any) -> str:
    digest = hashlib.sha256(repr(parts).encode("utf-8")).hexdigest()[:16]
    return f'W/"{revision}-{digest}"'


def matches(if_none_match: str | None, tag: str) -> bool:
    """Weak comparison (RFC 9110 8.8.3.2) of ``tag`` with an ``If-None-Match`` list."""
    if not if_none_match:
        return False
    wanted = tag.removeprefix("W/")
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == wanted:
            return True
    return False


def not_modified(tag: str) -> Response:
    return Response(status_code=304, headers={"ETag": tag, "Cache-Control": "no-cache"})


_WRAPPER_VERSION: str | None = None


def _wrapper_version() -> str:
    global _WRAPPER_VERSION
    if _WRAPPER_VERSION is None:
        _WRAPPER_VERSION = hashlib.sha256(default_prompt_template().encode("utf-8")).hexdigest()[:12]
    return _WRAPPER_VERSION


def base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


# -- prompt and knowledge ---------------------------------------------------------------------


def prompt(
    request: Request, ledger: Ledger, slug: str, args: schemas.PromptQuery, if_none_match: str | None
) -> Response:
    root = None if args.raw else base_url(request)
    # the wrapped prompt's HTTP example sends a token only when the ledger has tokens
    tokens = None if args.raw else ledger.tokens.tokens_exist()
    key = ("prompt", slug, args.model_dump_json(), root, None if args.raw else _wrapper_version(), tokens)
    if if_none_match:
        tag = etag(ledger.projects.project_revision(slug), *key)
        if matches(if_none_match, tag):
            return not_modified(tag)
    project, text = ledger.agent.prompt_document(
        slug,
        specialist=args.specialist,
        top_k=args.top_k,
        recent_n=args.recent_n,
        last_m=args.last_m,
        timestamp=args.timestamp,
        wrap=not args.raw,
        base_url=root,
        face="http",
        style=args.format,
    )
    return Response(
        text.encode("utf-8"),
        media_type=MARKDOWN,
        headers={"ETag": etag(project.revision, *key), "Cache-Control": "no-cache"},
    )


def knowledge(
    request: Request, ledger: Ledger, slug: str, args: schemas.KnowledgeQuery, if_none_match: str | None
) -> Response:
    key = ("knowledge", slug, args.model_dump_json())
    if if_none_match:
        tag = etag(ledger.projects.project_revision(slug), *key)
        if matches(if_none_match, tag):
            return not_modified(tag)
    headers = {"Cache-Control": "no-cache"}
    if args.format == "json":
        project, data = ledger.agent.knowledge_data(slug, recent_n=args.recent_n)
        headers["ETag"] = etag(project.revision, *key)
        return JSONResponse(data.to_dict(project), headers=headers)
    project, text = ledger.agent.knowledge_document(slug, recent_n=args.recent_n, last_m=args.last_m)
    headers["ETag"] = etag(project.revision, *key)
    return Response(text.encode("utf-8"), media_type=MARKDOWN, headers=headers)


def project_response(project: Project, if_none_match: str | None) -> Response:
    tag = etag(project.revision, "project", project.slug)
    if matches(if_none_match, tag):
        return not_modified(tag)
    return JSONResponse(project_json(project), headers={"ETag": tag, "Cache-Control": "no-cache"})


# -- trials listing ---------------------------------------------------------------------------


def _time(name: str, raw: str | None) -> datetime | None:
    if raw is None:
        return None
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise InvalidInput(name, f"must be an ISO 8601 time, got {raw!r}") from None


def wants_tsv(request: Request, args: schemas.TrialFilters) -> bool:
    if args.format is not None:
        return args.format == "tsv"
    accept = request.headers.get("accept", "")
    return "text/tab-separated-values" in accept and "application/json" not in accept


def trials(request: Request, ledger: Ledger, slug: str, args: schemas.TrialFilters) -> Response:
    query = ledger.tables.trials_query(
        slug,
        sort=args.sort,
        descending=args.order == "desc",
        cursor=args.cursor,
        limit=args.limit,
        count=args.count,
        status=args.status,
        specialist=args.specialist,
        domain=args.domain,
        parent=args.parent,
        metric_min=args.metric_min,
        metric_max=args.metric_max,
        text_query=args.q,
        created_after=_time("created_after", args.created_after),
        created_before=_time("created_before", args.created_before),
        timestamp_from=args.timestamp_from,
        timestamp_to=args.timestamp_to,
        expression=args.filter,
    )
    headers: dict[str, str] = {}
    if query.next_cursor:
        headers["X-Next-Cursor"] = query.next_cursor
        headers["Link"] = f'<{_next_url(request, query.next_cursor)}>; rel="next"'
    if query.page.total is not None:
        headers["X-Total-Count"] = str(query.page.total)
    if wants_tsv(request, args):
        out = io.StringIO(newline="")
        write_trials(query.page.trials, out, extended=args.extended)
        return Response(out.getvalue().encode("utf-8"), media_type=TSV, headers=headers)
    return JSONResponse(query.to_dict(patch=args.include_patch), headers=headers)


def _next_url(request: Request, cursor: str) -> str:
    params = [(k, v) for k, v in request.query_params.multi_items() if k != "cursor"] + [("cursor", cursor)]
    from urllib.parse import urlencode

    return f"{request.url.path}?{urlencode(params)}"


def tsv_download(ledger: Ledger, slug: str, extended: bool) -> StreamingResponse:
    """Every trial of the project as one TSV, streamed from one read transaction."""
    ledger.projects.project(slug)  # an unknown project is a 404 before the stream starts
    return StreamingResponse(
        (chunk.encode("utf-8") for chunk in iter_tsv(ledger.tables.stream_trials(slug), extended=extended)),
        media_type=TSV,
        headers={"Content-Disposition": f'attachment; filename="{slug}.tsv"'},
    )


# -- telemetry --------------------------------------------------------------------------------


def telemetry_accepted(result: Any) -> JSONResponse:
    """201 for a stored batch, 200 for a replay (nothing stored this time)."""
    return JSONResponse(
        {"accepted": result.accepted, "replayed": result.replayed, "batch_id": result.key},
        status_code=200 if result.replayed else 201,
    )


def telemetry_series(
    ledger: Ledger, slug: str, exp_id: str, args: schemas.TelemetryQuery, if_none_match: str | None
) -> Response:

    found, (points, last_id) = ledger.telemetry.telemetry_series(
        slug,
        exp_id,
        names=args.name,
        step_min=args.step_min,
        step_max=args.step_max,
        max_points=args.max_points,
    )
    tag = etag(points, "telemetry", slug, exp_id, last_id, args.model_dump_json())
    if matches(if_none_match, tag):
        return not_modified(tag)
    body = {"exp_id": exp_id, "points": points, "max_points": args.max_points, "series": [s.to_dict() for s in found]}
    return JSONResponse(body, headers={"ETag": tag, "Cache-Control": "no-cache"})


# -- operations -------------------------------------------------------------------------------


def readiness(request: Request, ledger: Ledger) -> Response:
    """200 when the database answers and its schema is the code's head; else 503."""
    from lineage import migrate

    head = request.app.state.schema_head
    try:
        current = migrate.current_revision(ledger.engine) or ""
    except Exception as exc:  # any driver error means "not ready"
        return problem(request, 503, f"the database does not answer: {type(exc).__name__}", code="not-ready")
    if current != head:
        return problem(
            request,
            503,
            f"the schema is at {current or 'nothing'!r}, the code needs {head!r}; run `lineage db upgrade`",
            code="not-ready",
            schema_revision=current,
            head=head,
        )
    return JSONResponse({"status": "ready", "schema_revision": current, "head": head})
