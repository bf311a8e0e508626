"""The writer's forms: the results-file upload (errors with line and column), and login
and logout (a session from a token, see :mod:`api.pages.access`).

The upload is ``lineage import`` in a form: the same options by the same names (format
``auto`` by default, the column options, the direction with ``infer`` by default, the
status map, the column names of a headerless file), read by the core's one rule
(``ImportOptions.from_text``), the bytes by the files' one rule (``check_text``), and
imported through the one entrance (``Ledger.import_file``). The page shows what the
import decided -- format, metric, direction and why, warnings, the lines kept as text --
after committing, or before, as a preview that stores nothing. An ambiguous file gets
the same refusal as the CLI.
"""

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
from lineage.domain import ImportReport
from lineage.errors import Conflict, InvalidInput, LedgerError
from lineage.formats.autoresearch import DIRECTIONS, ImportOptions
from lineage.formats.text import check_text

#: Largest file the upload form takes, in bytes.
MAX_UPLOAD_BYTES = 256 * 1024 * 1024
#: A previewed file up to this size comes back in the form's text box, so "Import"
#: sends it again; a larger one must be chosen again.
MAX_CARRIED_CHARS = 2 * 1024 * 1024
#: Lines kept as text that the report shows (each cut to 200 characters).
MAX_TEXT_LINES_SHOWN = 50

#: The form's text fields and their defaults (the option names of ``lineage import``).
FORM_DEFAULTS: dict[str, str] = {
    "project": "",
    "format": "auto",
    "direction": "infer",
    "policy": "kept",
    "metric": "",
    "status": "",
    "description": "",
    "id": "",
    "parent": "",
    "status_map": "",
    "columns": "",
    "source": "",
}

router = APIRouter(route_class=PageRoute, include_in_schema=False)


# -- upload -----------------------------------------------------------------------------------


def _upload_context(request: Request, **values: Any) -> dict[str, Any]:
    from lineage.formats import AUTO, FORMATS

    context = {
        "projects": [p.slug for p in ledger_of(request).projects.projects()],
        "formats": [(AUTO, "the first non-blank line decides"), *((f.name, f.description) for f in FORMATS.values())],
        "directions": list(DIRECTIONS),
        "form": {**FORM_DEFAULTS, "project": q_str(request, "project") or ""},
        "text": "",
        "error": None,
        "error_line": None,
        "done": None,
        "text_lines": [],
    }
    context.update(values)
    return context


@router.get("/upload", response_class=HTMLResponse)
def upload_form(request: Request, viewer: Viewer = Reader) -> HTMLResponse:
    return pages(request).render(request, "upload.html", _upload_context(request))


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _offending_line(text: str, error: InvalidInput) -> dict[str, Any] | None:
    """The line an import error names, split into cells, for the error box."""
    if error.line is None:
        return None
    lines = _lines(text)
    if not 1 <= error.line <= len(lines):
        return None
    raw = lines[error.line - 1].rstrip("\r")
    cells = raw.split("\t")
    return {"number": error.line, "column": error.column, "cells": cells[:60], "more": max(0, len(cells) - 60)}


def _text_lines(text: str, report: ImportReport) -> list[tuple[int, str]]:
    """The lines the import kept as text, numbered, for the report."""
    lines = _lines(text)
    return [
        (n, lines[n - 1].rstrip("\r")[:200]) for n in report.text_lines[:MAX_TEXT_LINES_SHOWN] if 1 <= n <= len(lines)
    ]


@router.post("/upload", response_class=HTMLResponse)
async def upload(request: Request, viewer: Viewer = Reader) -> HTMLResponse:
    form = await request.form(max_files=1, max_fields=40, max_part_size=MAX_UPLOAD_BYTES)
    access.check_csrf(request, form.get(access.CSRF_FIELD))
    if not viewer.can_write:
        raise Forbidden("uploading needs a writer token: log in with one first")
    values = {name: str(form.get(name) or default).strip() for name, default in FORM_DEFAULTS.items()}
    preview = str(form.get("action") or "") == "preview"
    slug = values["project"]
    upload_file = form.get("file")
    data = b""
    source = values["source"] or "pasted text"
    if upload_file is not None and hasattr(upload_file, "read"):
        data = await upload_file.read(MAX_UPLOAD_BYTES + 1)
        if data:
            source = getattr(upload_file, "filename", None) or "uploaded file"
    if not data:
        data = str(form.get("text") or "").encode("utf-8")
    context = _upload_context(request, form=values)
    if not slug:
        context["error"] = InvalidInput("project", "name the project to import into")
        return pages(request).render(request, "upload.html", context, status=400)
    if not data.strip():
        context["error"] = InvalidInput("file", "choose a file or paste the results file")
        return pages(request).render(request, "upload.html", context, status=400)
    if len(data) > MAX_UPLOAD_BYTES:
        context["error"] = InvalidInput(
            "file", f"is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB; use `lineage import`"
        )
        return pages(request).render(request, "upload.html", context, status=413)
    text = ""
    try:
        text = check_text(data, source=source, field="file")
        options = ImportOptions.from_text(
            id_column=values["id"],
            metric=values["metric"],
            status=values["status"],
            description=values["description"],
            parent=values["parent"],
            direction=values["direction"],
            status_map=values["status_map"],
            columns=values["columns"],
        )
        report = await run_in_threadpool(
            ledger_of(request).files.import_file,
            slug,
            io.StringIO(text, newline=""),
            fmt=values["format"],
            source=source,
            create_with={},
            options=options,
            best_policy=values["policy"],
            preview=preview,
        )
    except InvalidInput as exc:
        context["error"] = exc
        context["error_line"] = _offending_line(text, exc)
        context["text"] = text if len(text) <= MAX_CARRIED_CHARS else ""
        return pages(request).render(request, "upload.html", context, status=400)
    except LedgerError as exc:
        context["error"] = exc
        return pages(request).render(request, "upload.html", context, status=409 if isinstance(exc, Conflict) else 400)
    context["done"] = report
    context["text_lines"] = _text_lines(text, report)
    if preview:  # the file comes back in the text box: "Import" sends it again
        values["source"] = source
        context["text"] = text if len(text) <= MAX_CARRIED_CHARS else ""
    return pages(request).render(request, "upload.html", context)


# -- login ------------------------------------------------------------------------------------


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request) -> HTMLResponse:
    return pages(request).render(
        request, "login.html", {"next": access.safe_next(q_str(request, "next")), "error": None}
    )


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await request.form(max_files=0, max_fields=5)
    access.check_csrf(request, form.get(access.CSRF_FIELD))
    token = str(form.get("token") or "").strip()
    target = access.safe_next(str(form.get("next") or "/"))
    principal = await run_in_threadpool(access.verify, ledger_of(request), token)
    if principal is None:
        return pages(request).render(
            request,
            "login.html",
            {"next": target, "error": "That token is not valid (unknown, revoked or expired)."},
            status=401,
        )
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        access.SESSION_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return finish(request, response)


@router.post("/logout")
async def logout(request: Request) -> Response:
    form = await request.form(max_files=0, max_fields=5)
    access.check_csrf(request, form.get(access.CSRF_FIELD))
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(access.SESSION_COOKIE, path="/")
    return finish(request, response)
