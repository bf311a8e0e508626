"""The calibration page: expected against observed delta, one panel per specialist,
with each panel's summary statistics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from api.pages import charts
from api.pages.access import Viewer
from api.pages.charts import Point, status_class
from api.pages.route import PageRoute, Reader, ledger_of, pages
from api.pages.web import fmt_delta, trial_url
from lineage.browse.models import calibration_summary

#: Points one calibration panel draws at most (the most recent).
CALIBRATION_PANEL_POINTS = 400

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.get("/projects/{slug}/calibration", response_class=HTMLResponse)
def calibration(request: Request, slug: str, viewer: Viewer = Reader) -> HTMLResponse:
    cal = ledger_of(request).browse.calibration(slug)
    by_specialist: dict[str, list[Any]] = {}
    for point in cal.points:
        by_specialist.setdefault(point.specialist or "(none)", []).append(point)
    panels = []
    for specialist, points in sorted(by_specialist.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = points[-CALIBRATION_PANEL_POINTS:]
        svg = charts.scatter(
            [
                Point(
                    x=p.expected,
                    y=p.observed,
                    cls=status_class(p.status),
                    title=f"exp_{p.exp_id} · {p.status} · expected {p.expected_text!s} · observed Δ {fmt_delta(p.observed)}",
                    href=trial_url(slug, p.exp_id),
                )
                for p in shown
            ],
            label=f"expected vs observed delta of {specialist}",
            x_label="expected delta (parsed)",
            y_label="observed delta_vs_best",
        )
        panels.append(
            {"specialist": specialist, "svg": svg, "summary": calibration_summary(points), "shown": len(shown)}
        )
    overall = calibration_summary(cal.points) if cal.points else None
    return pages(request).render(
        request,
        "calibration.html",
        {
            "project": cal.project,
            "cal": cal,
            "panels": panels,
            "overall": overall,
            "panel_limit": CALIBRATION_PANEL_POINTS,
        },
    )
