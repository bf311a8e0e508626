"""The metric explorer page: ``/projects/{p}/explore``.

It renders ``lineage.browse.explore``'s answer (the JSON of ``GET /api/v1/projects/{p}/explore``
for the same query parameters) twice over: as server-side SVG (each group's mean and
band, through :mod:`api.pages.charts`; what shows without JavaScript) and as the same
data embedded in the page for ``static/explore.js``, which redraws it interactively
(EMA smoothing, log scale, hover, click to the trial). Every choice lives in the URL:
the query parameters are the API's, plus ``smooth`` (0-0.99) and ``log`` (1), which only
the browser applies.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup
from pydantic import ValidationError

from api.pages import charts
from api.pages.access import Viewer
from api.pages.route import PageRoute, Reader, ledger_of, pages
from api.pages.table import offered_statuses
from api.pages.web import seg
from api.schemas import ExploreArgs
from lineage.browse.columns import ProjectColumns
from lineage.browse.explore import CORE_METRIC, GROUP_FIELDS
from lineage.errors import InvalidInput
from lineage.formats.autoresearch.vocabulary import direction_of_name

router = APIRouter(route_class=PageRoute, include_in_schema=False)

#: Query parameters that repeat.
_LISTS = ("metric", "status")
#: Parameters only the browser applies (the API does not know them).
_CLIENT = ("smooth", "log", "cap")


def _args(request: Request) -> ExploreArgs:
    """The view's arguments from the query string; a bad one is a 400 page naming it."""
    raw: dict[str, Any] = {}
    for key in set(request.query_params):
        if key in _CLIENT:
            continue
        values = [v for v in request.query_params.getlist(key) if v.strip()]
        if values:
            raw[key] = values if key in _LISTS else values[-1].strip()
    raw.setdefault("metric", [CORE_METRIC])
    try:
        return ExploreArgs.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"][:1]) or "query"
        raise InvalidInput(field, error["msg"]) from None


def _client_state(request: Request) -> dict[str, Any]:
    smooth = 0.0
    raw = request.query_params.get("smooth")
    if raw:
        try:
            smooth = float(raw)
        except ValueError:
            raise InvalidInput("smooth", f"must be a number from 0 to 0.99, got {raw!r}") from None
        if not 0 <= smooth <= 0.99:
            raise InvalidInput("smooth", f"must be from 0 to 0.99, got {raw!r}")
    return {
        "smooth": smooth,
        "log": request.query_params.get("log") == "1",
        "cap": request.query_params.get("cap") != "0",
    }


def _script_json(data: Any) -> Markup:
    """JSON safe inside ``<script type="application/json">`` (no ``</script>``, no ``<!--``)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


#: A series with at most this many points is drawn with a marker on each (an eval every N steps).
SPARSE_POINTS = 60


def group_css(answer: dict[str, Any]) -> list[str]:
    """The colour class of each group: the status colours of the rest of the UI when grouped
    by status (kept green, discarded grey, failed red), else the series palette."""
    if answer.get("group_by") == "status":
        return [f"st-{charts.status_class(g['key'])}" for g in answer["groups"]]
    return [f"s{g['index'] % 8}" for g in answer["groups"]]


def _fallback_figure(panel: dict[str, Any], answer: dict[str, Any], client: dict[str, Any]) -> Markup:
    """The panel as server-side SVG: each group's mean and band (what shows without JS).
    Gaps between buckets are bridged (a metric logged every N steps is a line through its
    points), and a sparse series gets a marker on each point."""
    groups = answer["groups"]
    css_of = group_css(answer)
    label = f"{panel['metric']} of {answer['selection']['shown']} trials"
    if panel["kind"] == "trial":
        series = []
        for group in groups:
            points = [
                (x, y)
                for x, y, t in zip(panel["x"], panel["y"], answer["trials"])
                if y is not None and t["group"] == group["index"]
            ]
            series.append(charts.Series(group["key"], points, css_of[group["index"]]))
        return charts.line_chart(
            series,
            label=label,
            x_label="trial seq",
            y_label=panel["metric"],
            markers=True,
            width=900,
            height=320,
            integer_x=True,
            log_y=client["log"],
            cap=client["cap"],
        )
    grid = panel["grid"]
    series, bands = [], []
    for group in panel["groups"]:
        css = css_of[group["index"]]
        series.append(
            charts.Series(f"{group['key']} mean", [(x, y) for x, y in zip(grid, group["mean"]) if y is not None], css)
        )
        if group["lo"] is not None:
            pairs = [(x, lo, hi) for x, lo, hi in zip(grid, group["lo"], group["hi"]) if lo is not None]
            bands.append(
                charts.Band(
                    f"{group['key']} {answer['band']}",
                    [(x, lo) for x, lo, _ in pairs],
                    [(x, hi) for x, _, hi in pairs],
                    css,
                )
            )
    sparse = bool(series) and max(len(s.points) for s in series) <= SPARSE_POINTS
    return charts.line_chart(
        series,
        bands=bands,
        label=label,
        x_label=answer["x"],
        y_label=panel["metric"],
        width=900,
        height=320,
        markers=sparse,
        log_y=client["log"],
        cap=client["cap"],
    )


def panel_caption(panel: dict[str, Any]) -> str:
    """What a panel's curves are, in words: every logged point when no bucket holds more
    than one (a val_loss every 25 steps), else the rule that reduced them."""
    if panel["kind"] != "series" or not panel["trials"]:
        return ""
    down = panel["downsampling"]
    cells = [sum(1 for v in t["y"] if v is not None) for t in panel["trials"]]
    most = max(cells)
    width = f" of {down['width']:,} steps" if down.get("width") and down["width"] > 1 else ""
    if down["method"] == "exact" and down["points_read"] == sum(cells):
        return (
            f"every logged point: {most:,} per trial"
            if min(cells) == most
            else f"every logged point: up to {most:,} per trial"
        )
    if down["method"] == "exact":
        return (
            f"the mean of each trial's points in each of {down['buckets']:,} buckets{width}; up to {most:,} per trial"
        )
    if down["method"] == "sampled":
        return f"sampled: each trial's first point in each of {down['buckets']:,} buckets{width}"
    return ""


def default_metric(answer: dict[str, Any], metric_name: str) -> str | None:
    """The metric a bare explorer URL shows: the project's metric when it is also a
    telemetry name (an LM loop's val_bpb), else the name the most shown trials have; among
    those a loss, then a reward or return, then a name that says which way is better
    (accuracy, score), before any other (``adv_max`` does not win by sorting first); None
    without telemetry."""
    counts: dict[str, int] = answer.get("name_trials") or {}
    if not counts:
        return None
    if metric_name in counts:
        return metric_name
    return min(counts, key=lambda name: (-counts[name], _meaning_rank(name), name))


def _meaning_rank(name: str) -> int:
    lowered = name.lower()
    if "loss" in lowered:
        return 0
    if "reward" in lowered or "return" in lowered:
        return 1
    return 2 if direction_of_name(name) is not None else 3


def group_options(columns: ProjectColumns, chosen: str | None) -> list[str]:
    """What the Group picker offers: the trial fields this project's trials fill (not
    every fieldkit column) and the file's columns, and the chosen one."""
    fields = [
        c.name
        for c in columns.fields
        if c.name in GROUP_FIELDS and c.kind not in ("exp", "metric", "delta", "when", "long") and c.key != "seq"
    ]
    out = fields + [c.key for c in columns.file]
    if chosen and chosen not in out:
        out.append(chosen)
    return out


@router.get("/projects/{slug}/explore", response_class=HTMLResponse)
def explore_page(request: Request, slug: str, viewer: Viewer = Reader) -> HTMLResponse:
    ledger = ledger_of(request)
    args = _args(request)
    client = _client_state(request)
    project = ledger.projects.project(slug)
    if "select" not in request.query_params:  # by default the trials that have telemetry, if any do
        args = args.model_copy(update={"select": "telemetry"})
    answer = ledger.browse.explore(slug, args.to_query())
    if args.select == "telemetry" and "select" not in request.query_params and not answer["selection"]["shown"]:
        args = args.model_copy(update={"select": "filter"})
        answer = ledger.browse.explore(slug, args.to_query())
    chosen = default_metric(answer, project.metric_name) if "metric" not in request.query_params else None
    if chosen is not None:
        args = args.model_copy(update={"metric": [chosen]})
        answer = ledger.browse.explore(slug, args.to_query())
    figures = [_fallback_figure(panel, answer, client) for panel in answer["panels"]]
    columns = ledger.browse.project_columns(slug)
    return pages(request).render(
        request,
        "explore.html",
        {
            "project": project,
            "active": "explore",
            "args": args,
            "answer": answer,
            "figures": figures,
            "captions": [panel_caption(panel) for panel in answer["panels"]],
            "data": _script_json({"answer": answer, "slug": slug, "css": group_css(answer)}),
            "group_css": group_css(answer),
            "json_url": f"/api/v1/projects/{seg(slug)}/explore?"
            + urlencode(
                [(k, v) for k, v in request.query_params.multi_items() if k not in (*_CLIENT, "metric") and v.strip()]
                + ([("select", args.select)] if "select" not in request.query_params else [])
                + [("metric", m) for m in args.metric]
            ),
            "client": client,
            "metrics_chosen": list(args.to_query().metrics),
            "metric_options": [CORE_METRIC, *answer["names"]],
            "group_options": group_options(columns, args.group),
            "statuses": offered_statuses(columns.statuses, args.status),
        },
    )
