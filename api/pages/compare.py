"""The compare page: trials side by side, their telemetry overlaid, and a word diff of
each hypothesis against the first trial's. Its rows are the project's columns
(:mod:`lineage.browse.columns`: the file's columns by name, no fields empty across the
project), or those ``?cols=`` names."""

from __future__ import annotations

import difflib
import json
import re

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from api.pages import charts
from api.pages import telemetry as telemetry_plots
from api.pages.access import Viewer
from api.pages.charts import status_class
from api.pages.route import PageRoute, Reader, ledger_of, pages
from api.pages.web import trial_url
from lineage.errors import InvalidInput

#: Trials the compare page takes at most.
MAX_COMPARE = 8

router = APIRouter(route_class=PageRoute, include_in_schema=False)


#: Words with the spaces after them: runs of spaces alone never count as a match.
_TOKENS = re.compile(r"\S+\s*|\s+")


def word_diff(a: str, b: str) -> list[tuple[str, str]]:
    """``[(op, text)]`` turning ``a`` into ``b`` word by word: op is ``=``, ``-`` or ``+``."""
    left, right = _TOKENS.findall(a or ""), _TOKENS.findall(b or "")
    out: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, left, right, autojunk=False).get_opcodes():
        if tag == "equal":
            out.append(("=", "".join(left[i1:i2])))
            continue
        if tag in ("delete", "replace"):
            out.append(("-", "".join(left[i1:i2])))
        if tag in ("insert", "replace"):
            out.append(("+", "".join(right[j1:j2])))
    return out


@router.get("/projects/{slug}/compare", response_class=HTMLResponse)
def compare(request: Request, slug: str, viewer: Viewer = Reader) -> HTMLResponse:
    ledger = ledger_of(request)
    ids: list[str] = []
    for raw in request.query_params.getlist("exp"):
        for part in raw.split(","):
            part = part.strip()
            if part and part not in ids:
                ids.append(part)
    if len(ids) > MAX_COMPARE:
        raise InvalidInput("exp", f"compare at most {MAX_COMPARE} trials at once, got {len(ids)}")
    project = ledger.projects.project(slug)
    if len(ids) < 2:
        return pages(request).render(
            request,
            "compare.html",
            {
                "project": project,
                "trials": [],
                "ids": ids,
                "rows": [],
                "cols_value": "",
                "columns": None,
                "picked_keys": [],
                "diffs": [],
                "plots": [],
                "figure": None,
                "grid_data": "",
                "opts": telemetry_plots.Options(),
                "option_urls": {},
                "live": False,
            },
        )
    project, trials = ledger.browse.trials_by_ids(slug, ids)
    columns = ledger.browse.project_columns(slug)
    picked = columns.pick(request.query_params.getlist("cols"), default=columns.detail(trials))
    rows = []
    for column in picked:
        values = [column.value(t) for t in trials]
        rows.append((column, len({json.dumps(v, default=str) for v in values}) > 1))
    first = trials[0]
    diffs = [(t, word_diff(first.hypothesis, t.hypothesis)) for t in trials[1:]]
    shared = ledger.telemetry.shared_telemetry(slug, [t.exp_id for t in trials], max_points=telemetry_plots.MAX_POINTS)
    views = {
        f"exp_{t.exp_id}": telemetry_plots.build_view(
            point for per_trial in shared.values() for point in per_trial.get(t.exp_id, ())
        )
        for t in trials
    }
    alerts = [a for t in trials for a in ledger.alerts.alerts_page(slug, exp_id=t.exp_id, limit=20)[0]]
    opts = telemetry_plots.page_options(request.query_params, alerts, name_trial=True)
    plots = telemetry_plots.compare_plots(views, opts)
    figure = charts.dot_rows(
        [(f"exp_{t.exp_id}", t.core_metric, status_class(t.status.value), trial_url(slug, t.exp_id)) for t in trials],
        label=f"{project.metric_name} of the compared trials",
        x_label=project.metric_name,
    )
    return pages(request).render(
        request,
        "compare.html",
        {
            "project": project,
            "trials": trials,
            "ids": ids,
            "rows": rows,
            "diffs": diffs,
            "plots": plots,
            "grid_data": telemetry_plots.grid_json(plots, opts),
            "opts": opts,
            "option_urls": telemetry_plots.option_urls(request.url.path, request.query_params, opts),
            "live": any(t.status.value == "running" for t in trials),
            "cols_value": ",".join(c.key for c in picked)
            if any(a.strip() for a in request.query_params.getlist("cols"))
            else "",
            "columns": columns,
            "picked_keys": [c.key for c in picked],
            "figure": figure,
            "any_telemetry": any(views.values()),
        },
    )
