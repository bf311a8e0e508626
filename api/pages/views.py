"""The page routes: each reads one service use-case and renders one template.

Handlers are plain ``def`` (FastAPI runs them in its thread pool, as the ledger's calls
block). Ledger errors become HTML pages (404 for an unknown project or trial, 400 for a
bad parameter) through :class:`PageRoute`, never the API's problem+json.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import io
import json
import math
import re
from typing import Any, Callable, Iterator

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from fastapi.routing import APIRoute

from api.pages import access, charts
from api.pages import telemetry as telemetry_plots
from api.pages.access import Forbidden, LoginRequired, Viewer, require_reader
from api.pages.charts import Point, status_class
from api.pages.web import Pages, finish, fmt_delta, fmt_metric, project_url, trial_url, with_query
from lineage.domain import CLIP_SCALE_COLUMNS, FIELDKIT_COLUMNS, FailureLabel, Trial
from lineage.errors import Conflict, InvalidInput, LedgerError, NotFound
from lineage.formats.autoresearch import GIT_KEY
from lineage.service import TRIAL_SORTS, Ledger

#: Trials the dashboard's metric chart shows at once.
CHART_WINDOW = 1000
#: Chains longer than this show their head and tail, the middle folded away.
CHAIN_HEAD, CHAIN_TAIL = 5, 15
#: Trials the compare page takes at most.
MAX_COMPARE = 8
#: Points one calibration panel draws at most (the most recent).
CALIBRATION_PANEL_POINTS = 400
#: Largest TSV the upload form takes, in bytes.
MAX_UPLOAD_BYTES = 256 * 1024 * 1024


class PageRoute(APIRoute):
    """Renders ledger errors, refused requests and login redirects as pages."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        handle = super().get_route_handler()

        async def handler(request: Request) -> Response:
            try:
                return await handle(request)
            except LoginRequired:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return finish(request, RedirectResponse(with_query("/login", {"next": target}), status_code=303))
            except Forbidden as exc:
                return error_page(request, 403, "Not allowed", exc.message)
            except NotFound as exc:
                return error_page(request, 404, "Not found", exc.message)
            except InvalidInput as exc:
                return error_page(request, 400, "Bad request", exc.message)
            except Conflict as exc:
                return error_page(request, 409, "Conflict", exc.message)
            except LedgerError as exc:  # pragma: no cover - every kind is above
                return error_page(request, 400, "Error", exc.message)

        return handler


router = APIRouter(route_class=PageRoute, include_in_schema=False)
Reader = Depends(require_reader)


def pages(request: Request) -> Pages:
    return request.app.state.pages


def ledger_of(request: Request) -> Ledger:
    return request.app.state.ledger


def error_page(request: Request, status: int, title: str, message: str) -> HTMLResponse:
    return pages(request).render(request, "error.html", {"status": status, "title": title, "message": message}, status=status)


# -- query parameters -------------------------------------------------------------------------


def q_str(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    if value is None:
        return None
    value = value.strip()
    return value or None


def q_int(request: Request, name: str, default: int | None, *, minimum: int = 0, maximum: int = 1_000_000_000) -> int | None:
    raw = q_str(request, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(name, f"must be a whole number, got {raw!r}") from None
    if not minimum <= value <= maximum:
        raise InvalidInput(name, f"must be from {minimum} to {maximum}, got {value}")
    return value


def q_float(request: Request, name: str) -> float | None:
    raw = q_str(request, name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInput(name, f"must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise InvalidInput(name, f"must be finite, got {raw!r}")
    return value


def encode_cursor(after: tuple[Any, ...]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(after)).encode()).decode().rstrip("=")


def decode_cursor(raw: str | None) -> tuple[Any, ...] | None:
    if raw is None:
        return None
    try:
        value = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidInput("after", "is not a page cursor of this table") from None
    if not isinstance(value, list) or not value or len(value) > 3:
        raise InvalidInput("after", "is not a page cursor of this table")
    return tuple(value)


# -- index ------------------------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
def index(request: Request, viewer: Viewer = Reader) -> HTMLResponse:
    rows = []
    for overview in ledger_of(request).overviews(bins=60):
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


# -- project dashboard ------------------------------------------------------------------------


def _point_title(exp_id: str, status: str, metric: float | None, delta: float | None, specialist: str) -> str:
    parts = [f"exp_{exp_id}", status, f"metric {fmt_metric(metric)}"]
    if delta is not None:
        parts.append(f"Δ {fmt_delta(delta)}")
    if specialist:
        parts.append(specialist)
    return " · ".join(parts)


def folded_chain(chain: tuple[Trial, ...] | list[Trial]) -> dict[str, Any]:
    """The chain as a page shows it: ``chain_head``, ``chain_tail`` and how many trials
    between them are left to the whole-chain page (``chain_hidden``)."""
    if len(chain) <= CHAIN_HEAD + CHAIN_TAIL + 5:
        return {"chain_head": list(chain), "chain_hidden": 0, "chain_tail": []}
    return {"chain_head": list(chain[:CHAIN_HEAD]), "chain_hidden": len(chain) - CHAIN_HEAD - CHAIN_TAIL,
            "chain_tail": list(chain[-CHAIN_TAIL:])}


@router.get("/projects/{slug}", response_class=HTMLResponse)
def dashboard(request: Request, slug: str, viewer: Viewer = Reader) -> HTMLResponse:
    before = q_int(request, "before", None)
    board = ledger_of(request).dashboard(slug, window=CHART_WINDOW, before_seq=before)
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
    chart = charts.metric_chart(
        points,
        board.window_running_best,
        label=f"{project.metric_name} per trial ({direction}), running best as a step line",
        metric_name=project.metric_name,
        best_x=board.best.seq if board.best is not None else None,
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
            earlier = project_url(slug, before=board.window[0].seq) + "#chart"
        if before is not None:
            target = board.window[-1].seq + 1 + CHART_WINDOW
            newer = project_url(slug, before=target if target < project.trial_count else None) + "#chart"
    order = [label.value for label in FailureLabel]
    counts = sorted(board.status_counts.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
    bars = charts.bars(
        [(status, count, status_class(status), project_url(slug, "/trials", status=status)) for status, count in counts],
        label="trials per failure label",
    )
    return pages(request).render(
        request,
        "project.html",
        {
            "project": project,
            "board": board,
            "chart": chart,
            "overview": overview,
            "earlier": earlier,
            "newer": newer,
            "bars": bars,
            "counts": counts,
            **folded_chain(board.chain),
            "direction": direction,
            "progress": ledger_of(request).summary(slug),
        },
    )


@router.get("/projects/{slug}/chain", response_class=HTMLResponse)
def chain_page(request: Request, slug: str, viewer: Viewer = Reader) -> HTMLResponse:
    """The whole chain from the root to ``to`` (default: the best), every trial linked."""
    ledger = ledger_of(request)
    target = q_str(request, "to")
    chain = ledger.chain(slug, target)
    best = ledger.best(slug)
    return pages(request).render(
        request, "chain.html",
        {"project": ledger.project(slug), "chain": chain, "best": best, "target": target,
         "to_best": target is None or (best is not None and target == best.exp_id)},
    )


@router.get("/projects/{slug}/knowledge.md")
def knowledge(request: Request, slug: str, viewer: Viewer = Reader) -> Response:
    text = ledger_of(request).render_knowledge(slug)
    return finish(request, Response(text, media_type="text/markdown; charset=utf-8"))


# -- lineage tree -----------------------------------------------------------------------------


@router.get("/projects/{slug}/tree", response_class=HTMLResponse)
def tree(request: Request, slug: str, viewer: Viewer = Reader) -> HTMLResponse:
    focus = q_str(request, "focus")
    if focus and focus.startswith("exp_") and not _exists(request, slug, focus):
        focus = focus[4:]
    window = ledger_of(request).tree_window(
        slug,
        root=q_str(request, "root"),
        focus=focus,
        depth=q_int(request, "depth", 8, minimum=1, maximum=50),  # type: ignore[arg-type]
        per_node=q_int(request, "per", 25, minimum=1, maximum=500),  # type: ignore[arg-type]
        offset=q_int(request, "offset", 0, minimum=0),  # type: ignore[arg-type]
    )
    return pages(request).render(request, "tree.html", {"project": window.project, "w": window})


def _exists(request: Request, slug: str, exp_id: str) -> bool:
    try:
        ledger_of(request).trial(slug, exp_id)
        return True
    except NotFound:
        return False


# -- trial ------------------------------------------------------------------------------------


def _chain_points(chain: tuple[Trial, ...]) -> list[Point]:
    return [
        Point(
            x=index,
            y=t.core_metric,
            cls=status_class(t.status.value),
            title=_point_title(t.exp_id, t.status.value, t.core_metric, t.delta_vs_best, t.specialist),
        )
        for index, t in enumerate(chain)
    ]


def _chain_figure(slug: str, chain: tuple[Trial, ...], metric_name: str) -> Any:
    scored = [(i, t.core_metric) for i, t in enumerate(chain) if t.core_metric is not None]
    if not scored:
        return None
    series = [charts.Series(f"{metric_name} along the chain", scored, "s0")]
    return charts.line_chart(
        series, label=f"{metric_name} from the root to this trial", x_label="generation (root = 0)",
        y_label=metric_name, markers=True, height=220, integer_x=True,
    )


@router.get("/projects/{slug}/trials/{exp_id}", response_class=HTMLResponse)
def trial_page(request: Request, slug: str, exp_id: str, viewer: Viewer = Reader) -> HTMLResponse:
    ledger = ledger_of(request)
    ctx = ledger.trial_context(slug, exp_id)
    trial = ctx.trial
    view = telemetry_plots.load(ledger, slug, exp_id)
    beta = trial.extra.get("clip_scale_beta") if isinstance(trial.extra.get("clip_scale_beta"), (int, float)) else None
    plots = telemetry_plots.trial_plots(view, beta=beta)
    clip = None
    if any(getattr(trial, name) is not None for name in CLIP_SCALE_COLUMNS):
        clip = charts.clip_scale_figure(
            mean=trial.ig_clip_scale_mean, std=trial.ig_clip_scale_std, low=trial.ig_clip_scale_min,
            high=trial.ig_clip_scale_max, frac_low=trial.ig_clip_scale_frac_low, frac_high=trial.ig_clip_scale_frac_high,
            beta=beta if beta is not None else (view.beta if view.beta is not None else telemetry_plots.DEFAULT_BETA),
            label=f"clip-scale summary of exp_{exp_id}",
        )
    fields = [(name, getattr(trial, name)) for name in FIELDKIT_COLUMNS if name not in ("hypothesis", "notes")]
    fields += [(name, getattr(trial, name)) for name in CLIP_SCALE_COLUMNS]
    fields += [("seq", trial.seq), ("created_at", trial.created_at), ("updated_at", trial.updated_at)]
    code = code_change(trial)
    extra = {k: v for k, v in trial.extra.items() if code is None or k != GIT_KEY}
    return pages(request).render(
        request,
        "trial.html",
        {
            "project": ctx.project,
            "ctx": ctx,
            "t": trial,
            "fields": fields,
            "extra_json": json.dumps(extra, indent=2, ensure_ascii=False, sort_keys=True) if extra else "",
            "code": code,
            "code_lines": patch_lines(code["patch"]) if code else [],
            "plots": plots,
            "clip": clip,
            "chain_figure": _chain_figure(slug, ctx.chain, ctx.project.metric_name),
            **folded_chain(ctx.chain),
        },
    )


def code_change(trial: Trial) -> dict[str, Any] | None:
    """The trial's git details (``extra["_git"]``, stored by ``--git-repo``), or None."""
    found = trial.extra.get(GIT_KEY)
    if isinstance(found, dict) and isinstance(found.get("patch"), str):
        return found
    return None


def patch_lines(patch: str) -> list[tuple[str, str]]:
    """``(css class, line)`` of a git patch: file headers (``diff --git`` up to the first
    ``@@``), hunk headers, added and removed lines; a removed ``-- x`` inside a hunk is a
    removed line, not a header."""
    out = []
    in_hunk = False
    for line in patch.splitlines():
        if line.startswith("diff "):
            in_hunk, kind = False, "file"
        elif line.startswith("@@"):
            in_hunk, kind = True, "hunk"
        elif not in_hunk:
            kind = "file"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = ""
        out.append((kind, line))
    return out


# -- trials table -----------------------------------------------------------------------------


def _filters(request: Request) -> dict[str, Any]:
    statuses = [s.strip() for raw in request.query_params.getlist("status") for s in raw.split(",") if s.strip()]
    for status in statuses:
        FailureLabel.parse(status)
    metric_min, metric_max = q_float(request, "min"), q_float(request, "max")
    return {
        "status": statuses or None,
        "specialist": q_str(request, "specialist"),
        "domain": q_str(request, "domain"),
        "parent": q_str(request, "parent"),
        "metric_min": metric_min,
        "metric_max": metric_max,
        "text_query": q_str(request, "q"),
    }


def _filter_params(filters: dict[str, Any]) -> dict[str, Any]:
    """The query parameters that reproduce ``filters``."""
    return {
        "status": filters["status"] or None,
        "specialist": filters["specialist"],
        "domain": filters["domain"],
        "parent": filters["parent"],
        "min": filters["metric_min"],
        "max": filters["metric_max"],
        "q": filters["text_query"],
    }


def _tsv_chunks(rows: Iterator[Trial], *, extended: bool, batch: int = 2_000) -> Iterator[str]:
    """The TSV as fieldkit writes it, a batch of rows at a time (header first)."""
    from lineage.formats.fieldkit import write_trials

    buffer = io.StringIO(newline="")
    write_trials([], buffer, extended=extended)
    header = buffer.getvalue()
    yield header
    pending: list[Trial] = []
    for trial in rows:
        pending.append(trial)
        if len(pending) >= batch:
            yield _rows_text(pending, extended, len(header))
            pending = []
    if pending:
        yield _rows_text(pending, extended, len(header))


def _rows_text(rows: list[Trial], extended: bool, header_length: int) -> str:
    from lineage.formats.fieldkit import write_trials

    buffer = io.StringIO(newline="")
    write_trials(rows, buffer, extended=extended)
    return buffer.getvalue()[header_length:]


@router.get("/projects/{slug}/trials", response_class=HTMLResponse)
def trials_table(request: Request, slug: str, viewer: Viewer = Reader) -> Response:
    ledger = ledger_of(request)
    filters = _filters(request)
    sort = q_str(request, "sort") or "seq"
    if sort not in TRIAL_SORTS:
        raise InvalidInput("sort", f"unknown sort {sort!r}; known: {', '.join(TRIAL_SORTS)}")
    order = q_str(request, "order") or ("desc" if sort == "seq" else "asc")
    if order not in ("asc", "desc"):
        raise InvalidInput("order", f"must be asc or desc, got {order!r}")
    descending = order == "desc"
    fmt = q_str(request, "format")
    if fmt is not None and fmt != "tsv":
        raise InvalidInput("format", f"must be tsv (or absent), got {fmt!r}")
    if fmt == "tsv":
        ledger.project(slug)  # an unknown project is a 404 page, not a broken download
        extended = q_str(request, "columns") == "extended"
        rows = ledger.iter_trials_page(slug, sort=sort, descending=descending, **filters)
        filename = f"{slug}-trials{'-extended' if extended else ''}.tsv"
        response = StreamingResponse(
            _tsv_chunks(rows, extended=extended),
            media_type="text/tab-separated-values; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )
        return finish(request, response)
    limit = q_int(request, "limit", 50, minimum=1, maximum=1000)
    after = decode_cursor(q_str(request, "after"))
    page = ledger.trials_page(slug, sort=sort, descending=descending, after=after, limit=limit, **filters)  # type: ignore[arg-type]
    params = _filter_params(filters)
    view = {**params, "sort": sort if sort != "seq" else None, "order": order if order != ("desc" if sort == "seq" else "asc") else None,
            "limit": limit if limit != 50 else None}
    base = project_url(slug, "/trials")
    return pages(request).render(
        request,
        "trials.html",
        {
            "project": page.project,
            "page": page,
            "filters": filters,
            "sort": sort,
            "order": order,
            "limit": limit,
            "statuses": [label.value for label in FailureLabel],
            "next_url": with_query(base, {**view, "after": encode_cursor(page.next_after)}) if page.next_after else None,
            "first_url": with_query(base, view) if after is not None else None,
            "tsv_url": with_query(base, {**view, "limit": None, "format": "tsv"}),
            "tsv_extended_url": with_query(base, {**view, "limit": None, "format": "tsv", "columns": "extended"}),
            "sort_url": lambda key, direction: with_query(base, {**params, "sort": key, "order": direction, "limit": view["limit"]}),
            "filtered": any(v not in (None, "", []) for v in filters.values()),
        },
    )


# -- compare ----------------------------------------------------------------------------------


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
    project = ledger.project(slug)
    if len(ids) < 2:
        return pages(request).render(request, "compare.html", {"project": project, "trials": [], "ids": ids, "rows": [],
                                                             "diffs": [], "plots": [], "figure": None})
    project, trials = ledger.trials_by_ids(slug, ids)
    names = [n for n in FIELDKIT_COLUMNS if n not in ("exp_id", "hypothesis", "notes")] + list(CLIP_SCALE_COLUMNS) + ["seq"]
    rows = []
    for name in names:
        values = [getattr(t, name) for t in trials]
        shown = [v.value if isinstance(v, FailureLabel) else v for v in values]
        rows.append((name, shown, len({json.dumps(v, default=str) for v in shown}) > 1))
    first = trials[0]
    diffs = [(t, word_diff(first.hypothesis, t.hypothesis)) for t in trials[1:]]
    views = {f"exp_{t.exp_id}": telemetry_plots.load(ledger, slug, t.exp_id) for t in trials}
    plots = telemetry_plots.compare_plots(views)
    figure = charts.dot_rows(
        [(f"exp_{t.exp_id}", t.core_metric, status_class(t.status.value), trial_url(slug, t.exp_id)) for t in trials],
        label=f"{project.metric_name} of the compared trials", x_label=project.metric_name,
    )
    return pages(request).render(
        request,
        "compare.html",
        {"project": project, "trials": trials, "ids": ids, "rows": rows, "diffs": diffs, "plots": plots,
         "figure": figure, "any_telemetry": any(views.values())},
    )


# -- calibration ------------------------------------------------------------------------------


def _summary(points: list[Any]) -> dict[str, Any]:
    n = len(points)
    expected = [p.expected for p in points]
    observed = [p.observed for p in points]
    mean_e, mean_o = sum(expected) / n, sum(observed) / n
    errors = [o - e for e, o in zip(expected, observed)]
    agree = sum(1 for e, o in zip(expected, observed) if (e > 0) == (o > 0) and e != 0 and o != 0)
    corr = None
    if n >= 3:
        se = math.sqrt(sum((e - mean_e) ** 2 for e in expected))
        so = math.sqrt(sum((o - mean_o) ** 2 for o in observed))
        if se > 0 and so > 0:
            corr = sum((e - mean_e) * (o - mean_o) for e, o in zip(expected, observed)) / (se * so)
    return {
        "n": n, "mean_expected": mean_e, "mean_observed": mean_o, "mean_error": sum(errors) / n,
        "mae": sum(abs(x) for x in errors) / n, "sign_agreement": agree / n, "corr": corr,
    }


@router.get("/projects/{slug}/calibration", response_class=HTMLResponse)
def calibration(request: Request, slug: str, viewer: Viewer = Reader) -> HTMLResponse:
    cal = ledger_of(request).calibration(slug)
    by_specialist: dict[str, list[Any]] = {}
    for point in cal.points:
        by_specialist.setdefault(point.specialist or "(none)", []).append(point)
    panels = []
    for specialist, points in sorted(by_specialist.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = points[-CALIBRATION_PANEL_POINTS:]
        svg = charts.scatter(
            [
                Point(x=p.expected, y=p.observed, cls=status_class(p.status),
                      title=f"exp_{p.exp_id} · {p.status} · expected {p.expected_text!s} · observed Δ {fmt_delta(p.observed)}",
                      href=trial_url(slug, p.exp_id))
                for p in shown
            ],
            label=f"expected vs observed delta of {specialist}",
            x_label="expected delta (parsed)",
            y_label="observed delta_vs_best",
        )
        panels.append({"specialist": specialist, "svg": svg, "summary": _summary(points), "shown": len(shown)})
    overall = _summary(list(cal.points)) if cal.points else None
    return pages(request).render(request, "calibration.html", {"project": cal.project, "cal": cal, "panels": panels,
                                                                "overall": overall, "panel_limit": CALIBRATION_PANEL_POINTS})


# -- upload -----------------------------------------------------------------------------------


def _upload_context(request: Request, **values: Any) -> dict[str, Any]:
    from lineage.formats import FORMATS

    context = {
        "projects": [p.slug for p in ledger_of(request).projects()],
        "formats": [(f.name, f.description) for f in FORMATS.values()],
        "form": {"project": q_str(request, "project") or "", "format": "fieldkit", "direction": "lower", "policy": "kept"},
        "error": None,
        "error_line": None,
        "done": None,
    }
    context.update(values)
    return context


@router.get("/upload", response_class=HTMLResponse)
def upload_form(request: Request, viewer: Viewer = Reader) -> HTMLResponse:
    return pages(request).render(request, "upload.html", _upload_context(request))


def _offending_line(text: str, error: InvalidInput) -> dict[str, Any] | None:
    """The line an import error names, split into cells, for the error box."""
    if error.line is None:
        return None
    lines = text.split("\n")
    if not 1 <= error.line <= len(lines):
        return None
    raw = lines[error.line - 1].rstrip("\r")
    cells = raw.split("\t")
    return {"number": error.line, "column": error.column, "cells": cells[:60], "more": max(0, len(cells) - 60)}


@router.post("/upload", response_class=HTMLResponse)
async def upload(request: Request, viewer: Viewer = Reader) -> HTMLResponse:
    form = await request.form(max_files=1, max_fields=20, max_part_size=MAX_UPLOAD_BYTES)
    access.check_csrf(request, form.get(access.CSRF_FIELD))
    if not viewer.can_write:
        raise Forbidden("uploading needs a writer token: log in with one first")
    slug = str(form.get("project") or "").strip()
    fmt = str(form.get("format") or "fieldkit")
    direction = str(form.get("direction") or "lower")
    policy = str(form.get("policy") or "kept")
    values = {"project": slug, "format": fmt, "direction": direction, "policy": policy}
    upload_file = form.get("file")
    source = "pasted text"
    data = b""
    if upload_file is not None and hasattr(upload_file, "read"):
        data = await upload_file.read(MAX_UPLOAD_BYTES + 1)  # type: ignore[union-attr]
        source = getattr(upload_file, "filename", None) or "uploaded file"
    if not data:
        data = str(form.get("text") or "").encode("utf-8")
        source = "pasted text"
    context = _upload_context(request, form=values)
    if not slug:
        context["error"] = InvalidInput("project", "name the project to import into")
        return pages(request).render(request, "upload.html", context, status=400)
    if not data.strip():
        context["error"] = InvalidInput("file", "choose a file or paste the TSV")
        return pages(request).render(request, "upload.html", context, status=400)
    if len(data) > MAX_UPLOAD_BYTES:
        context["error"] = InvalidInput("file", f"is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB; use `lineage import`")
        return pages(request).render(request, "upload.html", context, status=413)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        context["error"] = InvalidInput("file", f"is not UTF-8 text (byte {exc.start})", line=line)
        return pages(request).render(request, "upload.html", context, status=400)
    create_with = {"lower_is_better": direction != "higher", "best_policy": policy, "source_format": fmt}
    ledger = ledger_of(request)
    try:
        report = await run_in_threadpool(
            ledger.import_file, slug, io.StringIO(text, newline=""), fmt=fmt, source=source, create_with=create_with
        )
    except InvalidInput as exc:
        context["error"] = exc
        context["error_line"] = _offending_line(text, exc)
        return pages(request).render(request, "upload.html", context, status=400)
    except LedgerError as exc:
        context["error"] = exc
        return pages(request).render(request, "upload.html", context, status=409 if isinstance(exc, Conflict) else 400)
    context["done"] = report
    return pages(request).render(request, "upload.html", context)


# -- login ------------------------------------------------------------------------------------


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request) -> HTMLResponse:
    return pages(request).render(request, "login.html", {"next": access.safe_next(q_str(request, "next")), "error": None})


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await request.form(max_files=0, max_fields=5)
    access.check_csrf(request, form.get(access.CSRF_FIELD))
    token = str(form.get("token") or "").strip()
    target = access.safe_next(str(form.get("next") or "/"))
    principal = await run_in_threadpool(access.verify, ledger_of(request), token)
    if principal is None:
        return pages(request).render(
            request, "login.html", {"next": target, "error": "That token is not valid (unknown, revoked or expired)."},
            status=401,
        )
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        access.SESSION_COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/",
    )
    return finish(request, response)


@router.post("/logout")
async def logout(request: Request) -> Response:
    form = await request.form(max_files=0, max_fields=5)
    access.check_csrf(request, form.get(access.CSRF_FIELD))
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(access.SESSION_COOKIE, path="/")
    return finish(request, response)
