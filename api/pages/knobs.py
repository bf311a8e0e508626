"""The knob view: which knob moved the metric. One column (``?x=``: a file column, a
trial field or a telemetry summary, :mod:`lineage.browse.knobs`) against the metric as
a scatter, several (``?axes=a,b,c``) as parallel coordinates; ``?log=1`` puts a positive
x on a log scale; ``?limit=`` bounds the trials read (the chain to the best always
comes); ``?brush=KEY:LO:HI`` (repeatable; ``metric`` for the metric's axis) keeps the
trials inside each range lit and the rest dimmed, what dragging on an axis does with
``knobs.js``. Unasked, the axes are the knobs that vary and relate to the metric
(:mod:`lineage.browse.knob_axes`), file columns and the knob changes of
:mod:`lineage.knobs` (``knob.NAME``) alike. ``?format=json`` is the page's JSON twin. The figures are server-drawn SVG (:mod:`api.pages.knob_charts`); ``knobs.js``
submits the form on change and ties a trial's dot to its line. The same data as JSON:
``/api/v1/projects/{p}/knobs``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from api.pages import knob_charts
from api.pages.access import Viewer
from api.pages.route import PageRoute, Reader, ledger_of, pages, q_int, q_str
from api.pages.web import finish, project_url, with_query
from lineage.browse.knobs import brushed, parse_brush
from lineage.errors import InvalidInput

#: Trials a view reads unless ``?limit=`` says otherwise.
DEFAULT_LIMIT = 2000
#: Suggested knobs a parallel view shows besides the scatter's own.
PARALLEL_SUGGESTED = 3

router = APIRouter(route_class=PageRoute, include_in_schema=False)


def axes_param(request: Request) -> list[str]:
    """``?axes=a,b&axes=c`` -> ``[a, b, c]`` (each once, in order)."""
    out: list[str] = []
    for raw in request.query_params.getlist("axes"):
        for key in raw.split(","):
            if key.strip() and key.strip() not in out:
                out.append(key.strip())
    return out


@router.get("/projects/{slug}/knobs", response_class=HTMLResponse)
def knobs(request: Request, slug: str, viewer: Viewer = Reader) -> Response:
    ledger = ledger_of(request)
    x = q_str(request, "x")
    chosen = axes_param(request)
    limit = q_int(request, "limit", DEFAULT_LIMIT, minimum=1, maximum=20_000) or DEFAULT_LIMIT
    log_raw = q_str(request, "log")
    if log_raw not in (None, "0", "1", "on"):
        raise InvalidInput("log", f"must be 1 or 0, got {log_raw!r}")
    log = log_raw in ("1", "on")
    for name in ("ylog", "cap"):
        if q_str(request, name) not in (None, "0", "1", "on"):
            raise InvalidInput(name, f"must be 1 or 0, got {q_str(request, name)!r}")
    capped = q_str(request, "cap") != "0"
    fmt = q_str(request, "format")
    if fmt not in (None, "json", "html"):
        raise InvalidInput("format", f"must be json or html, got {fmt!r}")
    # the knobs that vary and relate to the metric, best first (lineage.browse.knob_axes)
    first = ledger.browse.knobs(slug, [x] if x else None, limit=limit, suggest=True)
    x = x or first.axes[0].key
    parallel_keys = chosen or [k for k in first.suggested if k != x][:PARALLEL_SUGGESTED] + (
        [x] if first.axes[0].kind == "number" else []
    )
    keys = [x] + [k for k in parallel_keys if k != x]
    view = ledger.browse.knobs(slug, keys, limit=limit)
    indices = [keys.index(k) for k in parallel_keys]
    brushes = [parse_brush(raw, parallel_keys) for raw in request.query_params.getlist("brush") if raw.strip()]
    selected = brushed(view, brushes) if brushes else None
    if fmt == "json":  # the page's JSON twin: the same view, axes and selection
        body = {
            **view.as_dict(),
            "suggested": list(first.suggested),
            "x": x,
            "parallel": parallel_keys,
            "brush": [{"axis": k, "lo": lo, "hi": hi} for k, lo, hi in brushes],
            "selected": list(selected) if selected is not None else None,
        }
        return finish(request, JSONResponse(body, headers={"Cache-Control": "no-cache"}))
    axis = view.axes[0]
    metrics = [p.metric for p in view.points if p.metric is not None]
    ylog = q_str(request, "ylog") in ("1", "on") and bool(metrics) and min(metrics) > 0
    cap = knob_charts.metric_cap(view.points) if capped else None
    scatter = knob_charts.scatter(view, log=log and axis.positive, ylog=ylog, cap=cap)
    parallel = knob_charts.parallel(view, indices, brushes=brushes, selected=selected) if indices else None
    base = project_url(slug, "/knobs")
    counts = dict.fromkeys(knob_charts.STATUS_CLASSES, 0)
    for p in view.points:
        counts[knob_charts.status_class(p.status)] += 1
    return pages(request).render(
        request,
        "knobs.html",
        {
            "project": view.project,
            "view": view,
            "axis": axis,
            "x": x,
            "chosen": chosen,
            "parallel_keys": parallel_keys,
            "log": log and axis.positive,
            "ylog": ylog,
            "ylog_possible": bool(metrics) and min(metrics) > 0,
            "capped": capped,
            "cap": cap,
            "limit": limit,
            "scatter": scatter,
            "parallel": parallel,
            "counts": counts,
            "on_chain": sum(1 for p in view.points if p.on_chain),
            "log_url": with_query(
                base,
                {
                    "x": x,
                    "axes": ",".join(chosen) or None,
                    "log": None if log else 1,
                    "limit": limit if limit != DEFAULT_LIMIT else None,
                },
            ),
            "json_url": with_query(
                base,
                {
                    "x": x,
                    "axes": ",".join(chosen) or None,
                    "limit": limit if limit != DEFAULT_LIMIT else None,
                    "brush": [f"{k}:{lo:g}:{hi:g}" for k, lo, hi in brushes] or None,
                    "format": "json",
                },
            ),
            "brushes": brushes,
            "parallel_labels": [view.axes[i].label for i in indices],
            "selected": selected,
            "clear_brush_url": with_query(
                base,
                {"x": x, "axes": ",".join(chosen) or None, "limit": limit if limit != DEFAULT_LIMIT else None},
            ),
        },
    )
