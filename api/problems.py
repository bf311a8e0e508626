"""Every 4xx and 5xx of the API as RFC 9457 ``application/problem+json``.

The one place where errors become HTTP (``lineage.errors`` says where each is mapped):

==========================================  ======  ========================================
error                                       status  members besides type/title/status/detail
==========================================  ======  ========================================
``NotFound`` (project, trial, token)        404     ``field``, ``entity``, ``key``
``Conflict`` (same id or key, other body)   409     ``field``, ``existing``, ``proposed``
``InvalidInput`` (a rule, a file)           422     ``field``, ``line``, ``column``
request validation (pydantic)               422     ``field`` (first), ``errors`` (each)
``Unauthorized`` (no or bad token)          401     ``WWW-Authenticate: Bearer``
``Forbidden`` (role too low)                403
body over the limit (also after gzip)       413     ``limit``
unknown route / method                      404/405 ``Allow`` header on 405
anything else                               500     nothing of the cause (it is logged)
==========================================  ======  ========================================

Every problem carries ``instance`` (the path) and ``request_id`` (also the
``X-Request-ID`` header), so a report can be matched with the server log.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lineage.auth import Forbidden, Unauthorized
from lineage.errors import Conflict, InvalidInput, LedgerError, NotFound

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:lineage:problem:"

log = logging.getLogger("lineage.api")

_STATUS_OF: tuple[tuple[type[LedgerError], int], ...] = (
    (NotFound, 404),
    (Conflict, 409),
    (InvalidInput, 422),
    (Unauthorized, 401),
    (Forbidden, 403),
)


class ProblemResponse(JSONResponse):
    media_type = PROBLEM_JSON


def status_of(exc: LedgerError) -> int:
    for kind, status in _STATUS_OF:
        if isinstance(exc, kind):
            return status
    return 400


def problem(
    request: Request | None,
    status: int,
    detail: str,
    *,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    **members: Any,
) -> ProblemResponse:
    """A problem+json response; ``code`` names the problem type (else ``about:blank``)."""
    body: dict[str, Any] = {
        "type": f"{TYPE_PREFIX}{code}" if code else "about:blank",
        "title": _title(status),
        "status": status,
        "detail": detail,
    }
    if code:
        body["code"] = code
    request_id = None
    if request is not None:
        body["instance"] = request.url.path
        request_id = getattr(request.state, "request_id", None)
        if request_id:
            body["request_id"] = request_id
    body.update({k: v for k, v in members.items() if v is not None})
    response = ProblemResponse(body, status_code=status, headers=headers)
    if request_id:
        response.headers["X-Request-ID"] = request_id
    return response


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def ledger_problem(request: Request | None, exc: LedgerError) -> ProblemResponse:
    status = status_of(exc)
    details = exc.as_dict()
    details.pop("detail", None)
    details.pop("code", None)
    headers = {"WWW-Authenticate": 'Bearer realm="lineage"'} if status == 401 else None
    return problem(request, status, exc.message, code=exc.code, headers=headers, **details)


def field_path(loc: tuple[Any, ...] | list[Any]) -> tuple[str, str]:
    """``(location, field)`` of a pydantic error location: ``("body", "points[3].value")``."""
    parts = list(loc)
    where = str(parts.pop(0)) if parts and parts[0] in ("body", "query", "path", "header", "cookie") else "body"
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return where, text or where


def validation_problem(request: Request | None, errors: list[dict[str, Any]]) -> ProblemResponse:
    described = []
    for error in errors:
        where, name = field_path(tuple(error.get("loc", ())))
        if where == "query":  # a repeated parameter's n-th value: the parameter is the field
            name = name.split("[", 1)[0]
        described.append(
            {"location": where, "field": name, "message": str(error.get("msg", "")), "type": str(error.get("type", ""))}
        )
    first = described[0] if described else {"field": "body", "message": "invalid request", "location": "body"}
    detail = f"{first['field']}: {first['message']}"
    if len(described) > 1:
        detail += f" (and {len(described) - 1} more)"
    return problem(
        request, 422, detail, code="invalid-request", field=first["field"], location=first["location"], errors=described
    )


def _allowed_methods(request: Request) -> str:
    """Every method some route takes at this path (Starlette's Allow names one route's)."""
    from starlette.routing import Match

    allowed = []
    for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] is Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    return ", ".join(allowed)


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(LedgerError)
    async def _ledger(request: Request, exc: LedgerError) -> ProblemResponse:
        return ledger_problem(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> ProblemResponse:
        return validation_problem(request, list(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> ProblemResponse:
        detail = exc.detail if isinstance(exc.detail, str) else _title(exc.status_code)
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"nothing at {request.method} {request.url.path}"
        headers = dict(exc.headers or {})
        if exc.status_code == 405 and detail == "Method Not Allowed":
            allowed = _allowed_methods(request) or headers.get("Allow", "")
            headers["Allow"] = allowed
            detail = f"{request.method} is not allowed on {request.url.path}" + (
                f"; allowed: {allowed}" if allowed else ""
            )
        members = getattr(exc, "problem", None) or {}
        return problem(request, exc.status_code, detail, headers=headers, **members)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> ProblemResponse:
        log.error("unhandled %s on %s %s", type(exc).__name__, request.method, request.url.path, exc_info=exc)
        return problem(
            request, 500, "the server failed to handle this request; the error is in its log", code="internal-error"
        )
