"""What every page route shares: :class:`PageRoute` (ledger errors, refused requests and
login redirects rendered as pages, never the API's problem+json), :func:`error_page`,
the reader dependency, the app's ledger and page renderer, and the parsing of query
parameters (a bad one is an ``InvalidInput`` naming it: a 400 page).

Handlers are plain ``def`` (FastAPI runs them in its thread pool, as the ledger's calls
block); each page module has its own router of ``PageRoute`` routes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute

from api.pages.access import Forbidden, LoginRequired, require_reader
from api.pages.web import Pages, finish, with_query
from lineage.errors import Conflict, InvalidInput, LedgerError, NotFound
from lineage.service import Ledger


class PageRoute(APIRoute):
    """Renders ledger errors, refused requests and login redirects as pages."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        handle = super().get_route_handler()

        async def handler(request: Request) -> Response:
            try:
                return await handle(request)
            except LoginRequired:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return finish(request, RedirectResponse(with_query("/login", {"next": target}), status_code=303))
            except Forbidden as exc:
                return error_page(request, 403, "Not allowed", exc.message)
            except NotFound as exc:
                return error_page(request, 404, "Not found", exc.message)
            except InvalidInput as exc:
                return error_page(request, 400, "Bad request", exc.message)
            except Conflict as exc:
                return error_page(request, 409, "Conflict", exc.message)
            except LedgerError as exc:  # pragma: no cover - every kind is above
                return error_page(request, 400, "Error", exc.message)

        return handler


Reader = Depends(require_reader)


def pages(request: Request) -> Pages:
    return request.app.state.pages


def ledger_of(request: Request) -> Ledger:
    return request.app.state.ledger


def error_page(request: Request, status: int, title: str, message: str) -> HTMLResponse:
    return pages(request).render(
        request, "error.html", {"status": status, "title": title, "message": message}, status=status
    )


# -- query parameters -------------------------------------------------------------------------


def q_str(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    if value is None:
        return None
    value = value.strip()
    return value or None


def q_int(
    request: Request, name: str, default: int | None, *, minimum: int = 0, maximum: int = 1_000_000_000
) -> int | None:
    raw = q_str(request, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(name, f"must be a whole number, got {raw!r}") from None
    if not minimum <= value <= maximum:
        raise InvalidInput(name, f"must be from {minimum} to {maximum}, got {value}")
    return value


def q_float(request: Request, name: str) -> float | None:
    raw = q_str(request, name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInput(name, f"must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise InvalidInput(name, f"must be finite, got {raw!r}")
    return value
