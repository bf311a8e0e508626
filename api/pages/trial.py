"""The trial page: its fields, parent, children and chain, the alerts its training code
raised, its telemetry plots and clip-scale summary, and the code change a ``--git-repo``
import stored."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from api.pages import charts
from api.pages import telemetry as telemetry_plots
from api.pages.access import Viewer
from api.pages.project import folded_chain
from api.pages.route import PageRoute, Reader, ledger_of, pages
from api.pages.web import finish, trial_url
from lineage.domain import CLIP_SCALE_COLUMNS, Trial
from lineage.formats.autoresearch import GIT_KEY
from lineage.formats.autoresearch.layout import RESERVED_KEYS

router = APIRouter(route_class=PageRoute, include_in_schema=False)

#: alerts the page lists (the newest; the API has the rest)
ALERTS_SHOWN = 50


def _chain_figure(
    slug: str, chain: tuple[Trial, ...], length: int, metric_name: str, opts: telemetry_plots.Options
) -> Any:
    """The metric along the chain's last trials (``chain``, root-first, the last of a chain
    of ``length``), by generation."""
    first = length - len(chain)
    scored = [(first + i, t.core_metric) for i, t in enumerate(chain) if t.core_metric is not None]
    if not scored:
        return None
    series = [charts.Series(f"{metric_name} along the chain", scored, "s0")]
    what = "from the root" if first == 0 else f"over the last {len(chain):,} generations"
    return charts.line_chart(
        series,
        label=f"{metric_name} {what} to this trial",
        x_label="generation (root = 0)",
        y_label=metric_name,
        markers=len(scored) <= 60,
        height=220,
        integer_x=True,
        zoomable=True,
        log_y=opts.log,
        cap=opts.cap,
    )


@router.get("/projects/{slug}/trials/{exp_id}", response_class=HTMLResponse)
def trial_page(request: Request, slug: str, exp_id: str, viewer: Viewer = Reader) -> HTMLResponse:
    ledger = ledger_of(request)
    ctx = ledger.browse.trial_context(slug, exp_id)
    if ctx.trial.exp_id != exp_id:  # an id as shown (exp_12): one page per trial, at its stored id
        return finish(request, RedirectResponse(trial_url(slug, ctx.trial.exp_id), status_code=308))  # type: ignore[return-value]
    trial = ctx.trial
    view = telemetry_plots.load(ledger, slug, exp_id)
    alerts, older_alerts = ledger.alerts.alerts_page(slug, exp_id=exp_id, limit=ALERTS_SHOWN)
    opts = telemetry_plots.page_options(request.query_params, alerts)
    beta = trial.extra.get("clip_scale_beta") if isinstance(trial.extra.get("clip_scale_beta"), (int, float)) else None
    plots = telemetry_plots.trial_plots(view, beta=beta, opts=opts)
    clip = None
    if any(getattr(trial, name) is not None for name in CLIP_SCALE_COLUMNS):
        clip = charts.clip_scale_figure(
            mean=trial.ig_clip_scale_mean,
            std=trial.ig_clip_scale_std,
            low=trial.ig_clip_scale_min,
            high=trial.ig_clip_scale_max,
            frac_low=trial.ig_clip_scale_frac_low,
            frac_high=trial.ig_clip_scale_frac_high,
            beta=beta if beta is not None else (view.beta if view.beta is not None else telemetry_plots.DEFAULT_BETA),
            label=f"clip-scale summary of exp_{exp_id}",
        )
    columns = ledger.browse.project_columns(slug)
    code = code_change(trial)
    shown = columns.shown_extra_keys()
    # the format's bookkeeping (_row, _line...) is no reader's business; _git is the code change
    extra = {
        k: v
        for k, v in trial.extra.items()
        if k not in shown and (k not in RESERVED_KEYS or (k == GIT_KEY and code is None))
    }
    return pages(request).render(
        request,
        "trial.html",
        {
            "project": ctx.project,
            "ctx": ctx,
            "t": trial,
            "fields": columns.detail([trial]),
            "brief_cols_list": columns.brief(),
            "has_clip": any(columns.has(name) or getattr(trial, name) is not None for name in CLIP_SCALE_COLUMNS),
            "has_expected": columns.has("expected_delta") or bool(trial.expected_delta),
            "extra_json": json.dumps(extra, indent=2, ensure_ascii=False, sort_keys=True) if extra else "",
            "code": code,
            "code_lines": patch_lines(code["patch"]) if code else [],
            "plots": plots,
            "grid_data": telemetry_plots.grid_json(plots, opts),
            "opts": opts,
            "option_urls": telemetry_plots.option_urls(request.url.path, request.query_params, opts),
            "live": ctx.lease is not None,
            "clip": clip,
            "chain_figure": _chain_figure(slug, ctx.recent_chain, ctx.chain.length, ctx.project.metric_name, opts),
            "chain_figure_all": len(ctx.recent_chain) == ctx.chain.length,
            "alerts": alerts,
            "older_alerts": older_alerts,
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
