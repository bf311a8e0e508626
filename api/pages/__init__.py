"""The researchers' web pages: server-rendered Jinja2 over the ledger's service layer.

``install_pages(app)`` mounts ``/static`` and the page routes on an app whose
``app.state.ledger`` is a :class:`lineage.service.Ledger` and ``app.state.settings`` the
service settings. Pages (each a rendering of one service read):

=====================================  ==================================================
``/``                                  projects: best, trial count, last activity, sparkline
``/projects/{p}``                      dashboard: best, chain to it, metric chart, counts
``/projects/{p}/knowledge.md``         the KNOWLEDGE.md text (``Ledger.render_knowledge``)
``/projects/{p}/tree``                 the lineage tree, windowed (``root``, ``focus``)
``/projects/{p}/trials``               filter, sort, paginate; ``format=tsv`` exports the view
``/projects/{p}/trials/{exp}``         one trial: fields, parent, children, telemetry plots
``/projects/{p}/compare?exp=..``       trials side by side, overlaid telemetry, hypothesis diff
``/projects/{p}/calibration``          expected vs observed delta per specialist
``/projects/{p}/explore``              telemetry of many trials, grouped, with bands
``/projects/{p}/knobs``                which knob moved the metric: scatter, parallel axes
``/upload``                            TSV upload (writers), errors with line and column
``/login``, ``/logout``                a session from a token (see ``api.pages.access``)
=====================================  ==================================================

One module per page family: ``project`` (index, dashboard, chain, knowledge.md, tree),
``trial``, ``table`` (trials table and its TSV), ``compare``, ``calibration``, ``upload``
(upload, login, logout), ``explore``, ``knobs``; ``route`` holds what they share (``PageRoute``,
``error_page``, query parameters), ``web`` the renderer and URL helpers, ``access`` who
may read and write, ``charts``, ``knob_charts`` and ``telemetry`` the SVG figures.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from api.pages.web import STATIC_DIR, Pages

__all__ = ["install_pages"]


class PagesGzip:
    """gzip for the pages and their static files (a 2,000-trial knob view is ~700 KB of
    SVG, ~100 KB gzipped), never for ``/api/`` or ``/mcp`` (their bodies, streams and
    ETags stay as the API documents them)."""

    def __init__(self, app: ASGIApp, minimum_size: int = 1024) -> None:
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=minimum_size, compresslevel=5)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(("/api/", "/mcp")):
            await self.gzip(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def install_pages(app: FastAPI) -> None:
    """Mount the static files and the page routes on ``app``, pages gzipped."""
    from api.pages import calibration, compare, explore, knobs, project, table, trial, upload

    app.state.pages = Pages()
    app.add_middleware(PagesGzip)
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    for module in (project, trial, table, compare, calibration, upload, explore, knobs):
        app.include_router(module.router)
