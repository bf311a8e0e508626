"""The calibration page: expected against observed delta, one panel per specialist,
with each panel's summary statistics."""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from api.pages import charts
from api.pages.access import Viewer
from api.pages.charts import Point, status_class
from api.pages.route import PageRoute, Reader, ledger_of, pages
from api.pages.web import fmt_delta, trial_url

#: Points one calibration panel draws at most (the most recent).
CALIBRATION_PANEL_POINTS = 400

router = APIRouter(route_class=PageRoute, include_in_schema=False)


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
