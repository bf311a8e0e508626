"""The writer's forms: the results-file upload (errors with line and column), and login
and logout (a session from a token, see :mod:`api.pages.access`)."""

from __future__ import annotations

import io
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api.pages import access
from api.pages.access import Forbidden, Viewer
from api.pages.route import PageRoute, Reader, ledger_of, pages, q_str
from api.pages.web import finish
from lineage.errors import Conflict, InvalidInput, LedgerError

#: Largest TSV the upload form takes, in bytes.
MAX_UPLOAD_BYTES = 256 * 1024 * 1024

router = APIRouter(route_class=PageRoute, include_in_schema=False)


# -- upload -----------------------------------------------------------------------------------


def _upload_context(request: Request, **values: Any) -> dict[str, Any]:
    from lineage.formats import FORMATS

    context = {
        "projects": [p.slug for p in ledger_of(request).projects()],
        "formats": [(f.name, f.description) for f in FORMATS.values()],
        "form": {"project": q_str(request, "project") or "", "format": "fieldkit", "direction": "lower", "policy": "kept"},
        "error": None,
        "error_line": None,
        "done": None,
    }
    context.update(values)
    return context


@router.get("/upload", response_class=HTMLResponse)
def upload_form(request: Request, viewer: Viewer = Reader) -> HTMLResponse:
    return pages(request).render(request, "upload.html", _upload_context(request))


def _offending_line(text: str, error: InvalidInput) -> dict[str, Any] | None:
    """The line an import error names, split into cells, for the error box."""
    if error.line is None:
        return None
    lines = text.split("\n")
    if not 1 <= error.line <= len(lines):
        return None
    raw = lines[error.line - 1].rstrip("\r")
    cells = raw.split("\t")
    return {"number": error.line, "column": error.column, "cells": cells[:60], "more": max(0, len(cells) - 60)}


@router.post("/upload", response_class=HTMLResponse)
async def upload(request: Request, viewer: Viewer = Reader) -> HTMLResponse:
    form = await request.form(max_files=1, max_fields=20, max_part_size=MAX_UPLOAD_BYTES)
    access.check_csrf(request, form.get(access.CSRF_FIELD))
    if not viewer.can_write:
        raise Forbidden("uploading needs a writer token: log in with one first")
    slug = str(form.get("project") or "").strip()
    fmt = str(form.get("format") or "fieldkit")
    direction = str(form.get("direction") or "lower")
    policy = str(form.get("policy") or "kept")
    values = {"project": slug, "format": fmt, "direction": direction, "policy": policy}
    upload_file = form.get("file")
    source = "pasted text"
    data = b""
    if upload_file is not None and hasattr(upload_file, "read"):
        data = await upload_file.read(MAX_UPLOAD_BYTES + 1)  # type: ignore[union-attr]
        source = getattr(upload_file, "filename", None) or "uploaded file"
    if not data:
        data = str(form.get("text") or "").encode("utf-8")
        source = "pasted text"
    context = _upload_context(request, form=values)
    if not slug:
        context["error"] = InvalidInput("project", "name the project to import into")
        return pages(request).render(request, "upload.html", context, status=400)
    if not data.strip():
        context["error"] = InvalidInput("file", "choose a file or paste the TSV")
        return pages(request).render(request, "upload.html", context, status=400)
    if len(data) > MAX_UPLOAD_BYTES:
        context["error"] = InvalidInput("file", f"is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB; use `lineage import`")
        return pages(request).render(request, "upload.html", context, status=413)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        context["error"] = InvalidInput("file", f"is not UTF-8 text (byte {exc.start})", line=line)
        return pages(request).render(request, "upload.html", context, status=400)
    create_with = {"lower_is_better": direction != "higher", "best_policy": policy, "source_format": fmt}
    ledger = ledger_of(request)
    try:
        report = await run_in_threadpool(
            ledger.import_file, slug, io.StringIO(text, newline=""), fmt=fmt, source=source, create_with=create_with
        )
    except InvalidInput as exc:
        context["error"] = exc
        context["error_line"] = _offending_line(text, exc)
        return pages(request).render(request, "upload.html", context, status=400)
    except LedgerError as exc:
        context["error"] = exc
        return pages(request).render(request, "upload.html", context, status=409 if isinstance(exc, Conflict) else 400)
    context["done"] = report
    return pages(request).render(request, "upload.html", context)


# -- login ------------------------------------------------------------------------------------


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request) -> HTMLResponse:
    return pages(request).render(request, "login.html", {"next": access.safe_next(q_str(request, "next")), "error": None})


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await request.form(max_files=0, max_fields=5)
    access.check_csrf(request, form.get(access.CSRF_FIELD))
    token = str(form.get("token") or "").strip()
    target = access.safe_next(str(form.get("next") or "/"))
    principal = await run_in_threadpool(access.verify, ledger_of(request), token)
    if principal is None:
        return pages(request).render(
            request, "login.html", {"next": target, "error": "That token is not valid (unknown, revoked or expired)."},
            status=401,
        )
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        access.SESSION_COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/",
    )
    return finish(request, response)


@router.post("/logout")
async def logout(request: Request) -> Response:
    form = await request.form(max_files=0, max_fields=5)
    access.check_csrf(request, form.get(access.CSRF_FIELD))
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(access.SESSION_COOKIE, path="/")
    return finish(request, response)
