"""The pages' Jinja2 environment, formatting filters, URL helpers and HTML responses.

Templates live in the repository's ``templates/`` (shipped as ``lineage.templates``) and
extend ``base.html``. Autoescaping is on for every template, and ``StrictUndefined``
turns a misspelt variable into an error in the tests rather than an empty cell.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, Response

from api.pages import access
from api.pages.charts import status_class
from lineage.browse.columns import said_baseline, trial_time

# templates/ ships as lineage.templates (a package-dir mapping mypy cannot follow): imported
# by its name, as lineage.migrate does lineage.migrations
_templates = importlib.import_module("lineage.templates")
assert _templates.__file__ is not None  # a regular package, never a namespace one
TEMPLATES_DIR = Path(_templates.__file__).resolve().parent
STATIC_DIR = TEMPLATES_DIR / "static"

#: Sent with every page: nothing but this server's own scripts, styles and images.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def _static_versions() -> dict[str, str]:
    """A content hash per static file, appended to its URL so caches never serve stale CSS."""
    versions: dict[str, str] = {}
    if STATIC_DIR.is_dir():
        for path in STATIC_DIR.rglob("*"):
            if path.is_file():
                versions[path.relative_to(STATIC_DIR).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()[:10]
    return versions


# -- formatting -------------------------------------------------------------------------------


def fmt_metric(value: float | None) -> str:
    """As KNOWLEDGE.md writes a metric: 6 decimals, ``—`` when missing."""
    return "—" if value is None else f"{value:.6f}"


def fmt_delta(value: float | None) -> str:
    return "—" if value is None else f"{value:+.6f}"


def fmt_number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    return str(value)


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return "—"
    total = int(round(value))
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {seconds:02d}s"
    return f"{value:g}s"


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def fmt_ago(value: str | None, now: datetime | None = None) -> str:
    """``3 h ago``-style age of an ISO timestamp; the text itself when it is not one."""
    parsed = parse_time(value)
    if parsed is None:
        return value or "—"
    seconds = ((now or datetime.now(UTC)) - parsed).total_seconds()
    if seconds < 0:
        return parsed.strftime("%Y-%m-%d %H:%M UTC")
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


def fmt_when(value: str | None) -> str:
    """Every date on the pages in one format: ``2026-05-12 12:20 UTC`` (a time written
    without a zone keeps none: ``2026-05-12 12:20``); text that is no time as it is."""
    parsed = parse_time(value)
    if parsed is None or value is None:
        return value or "—"
    if len(value.strip()) == 10:  # a date alone
        return parsed.strftime("%Y-%m-%d")
    zoned = "Z" in (value or "") or "+" in (value or "")[10:] or "-" in (value or "")[10:]
    return parsed.strftime("%Y-%m-%d %H:%M UTC" if zoned else "%Y-%m-%d %H:%M")


def truncate(text: str, width: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


# -- URLs -------------------------------------------------------------------------------------


_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9_.~-]+")


def seg(value: str) -> str:
    """One path segment (exp_ids may hold ``?``, ``#`` or ``%``)."""
    if _PLAIN_SEGMENT.fullmatch(value):  # nearly every id: skip the quoting machinery
        return value
    return quote(value, safe="")


def project_url(slug: str, tail: str = "", **params: Any) -> str:
    url = f"/projects/{seg(slug)}{tail}"
    return with_query(url, params)


def trial_url(slug: str, exp_id: str) -> str:
    return f"/projects/{seg(slug)}/trials/{seg(exp_id)}"


def compare_url(slug: str, exp_ids: Iterable[str]) -> str:
    return with_query(f"/projects/{seg(slug)}/compare", {"exp": list(exp_ids)})


def with_query(url: str, params: Mapping[str, Any]) -> str:
    pairs: list[tuple[str, str]] = []
    for key, value in params.items():
        if value is None or value == "" or value is False:
            continue
        if isinstance(value, (list, tuple)):
            pairs.extend((key, str(v)) for v in value)
        else:
            pairs.append((key, str(value)))
    return f"{url}?{urlencode(pairs)}" if pairs else url


# -- the environment and responses ---------------------------------------------------------------


class Pages:
    """The template environment of one app, built by the first page rendered (Jinja is
    imported then, not at the server's start)."""

    def __init__(self, directory: Path = TEMPLATES_DIR) -> None:
        self.directory = directory
        self._env: Any = None

    @property
    def env(self) -> Any:
        if self._env is None:
            self._env = self._environment(self.directory)
        return self._env

    @staticmethod
    def _environment(directory: Path) -> Any:
        import jinja2

        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(directory)),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            auto_reload=False,
        )
        versions = _static_versions()
        env.globals.update(
            static=lambda name: f"/static/{name}?v={versions.get(name, '0')}",
            project_url=project_url,
            trial_url=trial_url,
            compare_url=compare_url,
            with_query=with_query,
            status_class=status_class,
            trial_time=trial_time,
            said_baseline=said_baseline,
        )
        env.filters.update(
            metric=fmt_metric,
            delta=fmt_delta,
            number=fmt_number,
            seconds=fmt_seconds,
            ago=fmt_ago,
            when=fmt_when,
            trunc=truncate,
            seg=seg,
            status_class=status_class,
        )
        return env

    def render(self, request: Request, name: str, context: Mapping[str, Any], *, status: int = 200) -> HTMLResponse:
        template = self.env.get_template(name)
        project = context.get("project")
        if project is not None and "show_calibration" not in context:  # the tab only where there is data for it
            context = {**context, "show_calibration": request.app.state.ledger.browse.states_expectations(project.slug)}
        viewer = access.viewer(request)
        csrf = access.csrf_token(request)
        html = template.render(
            request=request,
            viewer=viewer,
            csrf=csrf,
            csrf_field=access.CSRF_FIELD,
            path=request.url.path,
            **context,
        )
        response = HTMLResponse(html, status_code=status)
        finish(request, response)
        return response


def finish(request: Request, response: Response) -> Response:
    """Security headers, and the CSRF cookie when this browser has none yet."""
    response.headers.update(SECURITY_HEADERS)
    new = getattr(request.state, "new_csrf", None)
    if new:
        response.set_cookie(
            access.CSRF_COOKIE, new, httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/"
        )
    return response
