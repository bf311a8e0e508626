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
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["install_pages"]

#: Paths that never need the pages (the JSON API, MCP, the probes and the API's docs):
#: a request to one of them does not load the page modules.
_NOT_PAGES = ("/api/", "/mcp")
_NOT_PAGES_EXACT = frozenset({"/health", "/ready", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


class PagesGzip:
    """gzip for the pages and their static files (a 2,000-trial knob view is ~700 KB of
    SVG, ~100 KB gzipped), never for ``/api/`` or ``/mcp`` (their bodies, streams and
    ETags stay as the API documents them).

    It also installs the pages on the first request that may be one (issue 23: cold
    start and idle memory): the page modules, Jinja and the static mount are loaded
    then, not when the app is built; a server that only answers the API never loads
    them. The routes go after every other route, where ``install_pages`` put them."""

    def __init__(self, app: ASGIApp, owner: FastAPI, minimum_size: int = 1024) -> None:
        from starlette.middleware.gzip import GZipMiddleware

        self.app = app
        self.owner = owner
        self.gzip = GZipMiddleware(app, minimum_size=minimum_size, compresslevel=5)
        self.installed = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if not path.startswith(_NOT_PAGES):
                if not self.installed and path not in _NOT_PAGES_EXACT:
                    self._install()
                await self.gzip(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _install(self) -> None:
        # in the event loop's thread, between two awaits: no request sees half the routes
        self.installed = True
        if not pages_installed(self.owner):
            _install_routes(self.owner)


def _install_routes(app: FastAPI) -> None:
    from fastapi.staticfiles import StaticFiles

    from api.pages import calibration, compare, explore, knobs, project, table, trial, upload
    from api.pages.web import STATIC_DIR, Pages

    app.state.pages = Pages()
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    for module in (project, trial, table, compare, calibration, upload, explore, knobs):
        app.include_router(module.router)


def install_pages(app: FastAPI, *, lazily: bool = True) -> None:
    """The pages on ``app``, gzipped: installed by the first request that may be a page
    (``lazily``), or now."""
    app.add_middleware(PagesGzip, owner=app)
    if not lazily:
        _install_routes(app)


def pages_installed(app: FastAPI) -> bool:
    """Whether the page routes are on ``app``."""
    return hasattr(app.state, "pages")
