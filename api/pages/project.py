"""The project pages: the index of projects, a project's dashboard, its chain to the
best, its KNOWLEDGE.md and its lineage tree (each a rendering of one service read)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from api.pages import charts
from api.pages.access import Viewer
from api.pages.charts import Point, status_class
from api.pages.route import PageRoute, Reader, ledger_of, pages, q_int, q_str
from api.pages.web import STATIC_DIR, finish, fmt_delta, fmt_metric, project_url, trial_url
from lineage.chain import ChainView
from lineage.domain import FailureLabel
from lineage.errors import InvalidInput, NotFound

#: Trials the dashboard's metric chart shows at once.
CHART_WINDOW = 1000

#: Notes the dashboard's notebook card lists (the newest).
NOTEBOOK_SHOWN = 5

#: Trials a page of the whole-chain page lists.
CHAIN_PAGE = 500

router = APIRouter(route_class=PageRoute, include_in_schema=False)


# -- index ------------------------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
def index(request: Request, viewer: Viewer = Reader) -> HTMLResponse:
    rows = []
    for overview in ledger_of(request).browse.overviews(bins=60):
        project = overview.project
        direction = "lower" if project.lower_is_better else "higher"
        rows.append(
            {
                "o": overview,
                "spark": charts.sparkline(
                    overview.running_best,
                    x_max=project.trial_count,
                    label=f"running best {project.metric_name} of {project.slug} ({direction} is better)",
                ),
            }
        )
    return pages(request).render(request, "index.html", {"rows": rows})


@router.get("/favicon.ico", include_in_schema=False)
def favicon(request: Request) -> Response:
    """The site icon where browsers and crawlers look for it first (the pages link the SVG)."""
    return finish(
        request,
        Response(
            (STATIC_DIR / "favicon.svg").read_bytes(),
            media_type="image/svg+xml",
            headers={"Cache-Control": "public, max-age=86400"},
        ),
    )


# -- project dashboard ------------------------------------------------------------------------


def _point_title(exp_id: str, status: str, metric: float | None, delta: float | None, specialist: str) -> str:
    parts = [f"exp_{exp_id}", status, f"metric {fmt_metric(metric)}"]
    if delta is not None:
        parts.append(f"Δ {fmt_delta(delta)}")
    if specialist:
        parts.append(specialist)
    return " · ".join(parts)


def folded_chain(chain: ChainView) -> dict[str, Any]:
    """The chain as a page shows it: ``chain_head``, ``chain_tail`` and how many trials
    between them are left to the whole-chain page (``chain_hidden``)."""
    return {"chain_head": list(chain.head), "chain_hidden": chain.hidden, "chain_tail": list(chain.tail)}


@router.get("/projects/{slug}", response_class=HTMLResponse)
def dashboard(request: Request, slug: str, viewer: Viewer = Reader) -> HTMLResponse:
    before = q_int(request, "before", None)
    board = ledger_of(request).browse.dashboard(slug, window=CHART_WINDOW, before_seq=before)
    project = board.project
    points = [
        Point(
            x=p.seq,
            y=p.core_metric,
            cls=status_class(p.status),
            title=_point_title(p.exp_id, p.status, p.core_metric, p.delta_vs_best, p.specialist),
            href=trial_url(slug, p.exp_id),
        )
        for p in board.window
    ]
    direction = "lower is better" if project.lower_is_better else "higher is better"
    kept_range = _range_mode(request) == "kept"
    scored = [p for p in points if p.y is not None]
    y_domain = charts.metric_domain(scored, board.window_running_best, kept_range=kept_range)
    above, below = charts.off_axis(scored, y_domain)
    chart = charts.metric_chart(
        points,
        board.window_running_best,
        label=f"{project.metric_name} per trial ({direction}), running best as a step line",
        metric_name=project.metric_name,
        best_x=board.best.seq if board.best is not None else None,
        y_strip=True,  # the chart scrolls sideways on a phone: its y axis stays in view
        y_domain=y_domain,
    )
    overview = None
    if board.window and project.trial_count > len(board.window):
        overview = charts.step_chart(
            board.running_best,
            x_max=project.trial_count,
            label=f"running best {project.metric_name} over all {project.trial_count:,} trials",
            metric_name=project.metric_name,
            window=(board.window[0].seq, board.window[-1].seq + 1),
        )
    earlier = newer = None
    if board.window:
        if board.has_earlier:
            earlier = project_url(slug, before=board.window[0].seq, range=_range_param(kept_range)) + "#chart"
        if before is not None:
            target = board.window[-1].seq + 1 + CHART_WINDOW
            newer = (
                project_url(
                    slug, before=target if target < project.trial_count else None, range=_range_param(kept_range)
                )
                + "#chart"
            )
    order = [label.value for label in FailureLabel]
    counts = sorted(board.status_counts.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
    bars = charts.bars(
        [
            (status, count, status_class(status), project_url(slug, "/trials", status=status))
            for status, count in counts
        ],
        label="trials per status",
    )
    columns = ledger_of(request).browse.project_columns(slug)
    return pages(request).render(
        request,
        "project.html",
        {
            "project": project,
            "board": board,
            "chart": chart,
            "kept_range": kept_range,
            "range_urls": {
                mode: project_url(slug, before=before, range=_range_param(mode == "kept")) + "#chart"
                for mode in ("all", "kept")
            },
            "off_axis": _off_axis_links(slug, y_domain, above, below),
            "overview": overview,
            "earlier": earlier,
            "newer": newer,
            "bars": bars,
            "counts": counts,
            **folded_chain(board.chain),
            "direction": direction,
            "progress": ledger_of(request).agent.summary(slug),
            **_notebook(request, slug),
            "brief_cols_list": columns.brief(),
            "has_specialist": columns.has("specialist") or any(t.specialist for t in board.recent),
        },
    )


def _notebook(request: Request, slug: str) -> dict[str, Any]:
    """The notebook card's notes: the newest :data:`NOTEBOOK_SHOWN`, and the ``before_id``
    of older ones (None: none left)."""
    notes, more = ledger_of(request).notes.notes(slug, limit=NOTEBOOK_SHOWN)
    return {"notes": notes, "more_notes": more}


def _range_mode(request: Request) -> str:
    """``?range=``: ``all`` (the default: every scored trial, robustly) or ``kept``."""
    mode = q_str(request, "range") or "all"
    if mode not in ("all", "kept"):
        raise InvalidInput("range", f"must be all or kept, got {mode!r}")
    return mode


def _range_param(kept: bool) -> str | None:
    return "kept" if kept else None


def _off_axis_links(slug: str, domain: tuple[float, float], above: int, below: int) -> list[tuple[str, str]]:
    """``(text, trials-table URL)`` of the trials beyond each edge of the chart's axis."""
    out = []
    for count, op, edge in ((above, ">", domain[1]), (below, "<", domain[0])):
        if count:
            word = "above" if op == ">" else "below"
            out.append(
                (
                    f"{count:,} trial{'' if count == 1 else 's'} {word} {edge:.6g}",
                    project_url(slug, "/trials", filter=f"metric {op} {edge:.6g}"),
                )
            )
    return out


@router.get("/projects/{slug}/chain", response_class=HTMLResponse)
def chain_page(request: Request, slug: str, viewer: Viewer = Reader) -> HTMLResponse:
    """The whole chain from the root to ``to`` (default: the best), every trial linked."""
    ledger = ledger_of(request)
    target = q_str(request, "to")
    page = ledger.browse.chain_page(
        slug,
        target,
        offset=q_int(request, "offset", 0, minimum=0),  # type: ignore[arg-type]
        limit=CHAIN_PAGE,
    )
    best = page.best
    to = target and page.target  # the stored id of an id as shown
    return pages(request).render(
        request,
        "chain.html",
        {
            "project": page.project,
            "page": page,
            "chain": page.trials,
            "best": best,
            "target": to,
            "brief_cols_list": ledger.browse.project_columns(slug).brief(),
            "to_best": not to or (best is not None and to == best.exp_id),
        },
    )


@router.get("/projects/{slug}/knowledge.md")
def knowledge(request: Request, slug: str, viewer: Viewer = Reader) -> Response:
    text = ledger_of(request).agent.render_knowledge(slug)
    return finish(request, Response(text, media_type="text/markdown; charset=utf-8"))


# -- lineage tree -----------------------------------------------------------------------------


@router.get("/projects/{slug}/tree", response_class=HTMLResponse)
def tree(request: Request, slug: str, viewer: Viewer = Reader) -> HTMLResponse:
    focus = q_str(request, "focus")
    if focus and focus.startswith("exp_") and not _exists(request, slug, focus):
        focus = focus[4:]
    window = ledger_of(request).browse.tree_window(
        slug,
        root=q_str(request, "root"),
        focus=focus,
        depth=q_int(request, "depth", 8, minimum=1, maximum=50),  # type: ignore[arg-type]
        per_node=q_int(request, "per", 25, minimum=1, maximum=500),  # type: ignore[arg-type]
        offset=q_int(request, "offset", 0, minimum=0),  # type: ignore[arg-type]
        nested=q_str(request, "view") == "nested",
    )
    return pages(request).render(
        request,
        "tree.html",
        {
            "project": window.project,
            "w": window,
            "nested": q_str(request, "view") == "nested",
            "brief_cols_list": ledger_of(request).browse.project_columns(slug).brief(),
        },
    )


def _exists(request: Request, slug: str, exp_id: str) -> bool:
    try:
        ledger_of(request).trials.trial(slug, exp_id)
        return True
    except NotFound:
        return False
