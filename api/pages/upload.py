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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any, BinaryIO

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.datastructures import FormData, UploadFile

from api.middleware import BodyTooLarge, counting_receive
from api.pages import access
from api.pages.access import Forbidden, Viewer
from api.pages.route import PageRoute, Reader, ledger_of, pages, q_str
from api.pages.web import finish
from lineage.domain import ImportReport
from lineage.errors import Conflict, InvalidInput, LedgerError
from lineage.formats.autoresearch import DIRECTIONS, ImportOptions
from lineage.formats.text import check_stream, check_text
from lineage.service import Ledger

#: Room a form's other fields and the multipart framing take beside the file, in bytes.
FORM_ROOM = 1024 * 1024
#: Longest text the form's text box takes (a larger file is chosen as a file: it is spooled
#: to disk, not held in memory).
MAX_PASTED_BYTES = 16 * 1024 * 1024
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


class _Source:
    """The uploaded bytes: a file spooled by the form parser (read as a stream, never
    whole) or the text box's text."""

    def __init__(self, name: str, *, raw: BinaryIO | None = None, text: str = "") -> None:
        self.name, self.raw, self.text = name, raw, text

    def check(self) -> None:
        """The files' one rule on the bytes (:mod:`lineage.formats.text`)."""
        if self.raw is None:
            self.text = check_text(self.text.encode("utf-8"), source=self.name, field="file")
        else:
            self.raw.seek(0)
            check_stream(self.raw, source=self.name, field="file")

    @contextmanager
    def stream(self, errors: str = "strict") -> Iterator[IO[str]]:
        if self.raw is None:
            yield io.StringIO(self.text, newline="")
            return
        self.raw.seek(0)
        wrapper = io.TextIOWrapper(self.raw, encoding="utf-8", errors=errors, newline="")
        try:
            yield wrapper
        finally:
            wrapper.detach()  # the form closes the file

    def lines(self, numbers: Iterable[int]) -> dict[int, str]:
        """The lines numbered ``numbers`` (1-based), each cut to 2,000 characters."""
        wanted = set(numbers)
        found: dict[int, str] = {}
        if not wanted:
            return found
        with self.stream(errors="replace") as text:
            for number, line in enumerate(text, start=1):
                if number in wanted:
                    found[number] = line.rstrip("\r\n")[:2000]
                if number >= max(wanted):
                    break
        return found

    def carried(self) -> str:
        """The text the form's text box gets back (empty past :data:`MAX_CARRIED_CHARS`)."""
        if self.raw is None:
            return self.text if len(self.text) <= MAX_CARRIED_CHARS else ""
        self.raw.seek(0, io.SEEK_END)
        if self.raw.tell() > MAX_CARRIED_CHARS:
            return ""
        with self.stream(errors="replace") as text:
            return text.read()


def _offending_line(source: _Source, error: InvalidInput) -> dict[str, Any] | None:
    """The line an import error names, split into cells, for the error box."""
    if error.line is None:
        return None
    raw = source.lines([error.line]).get(error.line)
    if raw is None:
        return None
    cells = raw.split("\t")
    return {"number": error.line, "column": error.column, "cells": cells[:60], "more": max(0, len(cells) - 60)}


def _text_lines(source: _Source, report: ImportReport) -> list[tuple[int, str]]:
    """The lines the import kept as text, numbered, for the report."""
    numbers = report.text_lines[:MAX_TEXT_LINES_SHOWN]
    found = source.lines(numbers)
    return [(n, found[n][:200]) for n in numbers if n in found]


def _too_large(request: Request, context: dict[str, Any], limit: int) -> HTMLResponse:
    context["error"] = InvalidInput(
        "file", f"is larger than {limit:,} bytes (the server's LINEAGE_MAX_BODY_BYTES); use `lineage import`"
    )
    return pages(request).render(request, "upload.html", context, status=413)


@router.post("/upload", response_class=HTMLResponse)
async def upload(request: Request, viewer: Viewer = Reader) -> HTMLResponse:
    limit = request.app.state.settings.max_body_bytes  # the API's cap: one limit on the body
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit + FORM_ROOM:
        return _too_large(request, _upload_context(request), limit)
    bounded = Request(request.scope, counting_receive(request.receive, limit + FORM_ROOM))
    try:
        form = await bounded.form(max_files=1, max_fields=40, max_part_size=MAX_PASTED_BYTES)
    except BodyTooLarge:
        return _too_large(request, _upload_context(request), limit)
    try:
        return await _upload(request, viewer, form, limit)
    finally:
        await form.close()  # the spooled file


async def _upload(request: Request, viewer: Viewer, form: FormData, limit: int) -> HTMLResponse:
    access.check_csrf(request, form.get(access.CSRF_FIELD))
    if not viewer.can_write:
        raise Forbidden("uploading needs a writer token: log in with one first")
    values = {name: str(form.get(name) or default).strip() for name, default in FORM_DEFAULTS.items()}
    preview = str(form.get("action") or "") == "preview"
    slug = values["project"]
    upload_file = form.get("file")
    context = _upload_context(request, form=values)
    if isinstance(upload_file, UploadFile) and upload_file.size:
        if upload_file.size > limit:
            return _too_large(request, context, limit)
        source = _Source(upload_file.filename or "uploaded file", raw=upload_file.file)
    else:
        source = _Source(values["source"] or "pasted text", text=str(form.get("text") or ""))
    if not slug:
        context["error"] = InvalidInput("project", "name the project to import into")
        return pages(request).render(request, "upload.html", context, status=400)
    if source.raw is None and not source.text.strip():
        context["error"] = InvalidInput("file", "choose a file or paste the results file")
        return pages(request).render(request, "upload.html", context, status=400)
    try:
        await run_in_threadpool(source.check)
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
        report = await run_in_threadpool(_import, ledger_of(request), slug, source, values, options, preview)
    except InvalidInput as exc:
        context["error"] = exc
        context["error_line"] = await run_in_threadpool(_offending_line, source, exc)
        context["text"] = await run_in_threadpool(source.carried)
        return pages(request).render(request, "upload.html", context, status=400)
    except LedgerError as exc:
        context["error"] = exc
        return pages(request).render(request, "upload.html", context, status=409 if isinstance(exc, Conflict) else 400)
    context["done"] = report
    context["text_lines"] = await run_in_threadpool(_text_lines, source, report)
    if preview:  # the file comes back in the text box: "Import" sends it again
        values["source"] = source.name
        context["text"] = await run_in_threadpool(source.carried)
    return pages(request).render(request, "upload.html", context)


def _import(
    ledger: Ledger, slug: str, source: _Source, values: dict[str, str], options: ImportOptions, preview: bool
) -> ImportReport:
    with source.stream() as stream:
        return ledger.files.import_file(
            slug,
            stream,
            fmt=values["format"],
            source=source.name,
            create_with={},
            options=options,
            best_policy=values["policy"],
            preview=preview,
        )


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
