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
``/upload``                            TSV upload (writers), errors with line and column
``/login``, ``/logout``                a session from a token (see ``api.pages.access``)
=====================================  ==================================================

One module per page family: ``project`` (index, dashboard, chain, knowledge.md, tree),
``trial``, ``table`` (trials table and its TSV), ``compare``, ``calibration``, ``upload``
(upload, login, logout), ``explore``; ``route`` holds what they share (``PageRoute``,
``error_page``, query parameters), ``web`` the renderer and URL helpers, ``access`` who
may read and write, ``charts`` and ``telemetry`` the SVG figures.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api.pages.web import STATIC_DIR, Pages

__all__ = ["install_pages"]


def install_pages(app: FastAPI) -> None:
    """Mount the static files and the page routes on ``app``."""
    from api.pages import calibration, compare, explore, project, table, trial, upload

    app.state.pages = Pages()
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    for module in (project, trial, table, compare, calibration, upload, explore):
        app.include_router(module.router)
