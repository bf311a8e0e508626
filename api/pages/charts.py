"""Server-side SVG charts for the pages: pure functions from numbers to inline ``<svg>``.

Why SVG from Python rather than a JavaScript plotting library: the pages must work
offline and without JavaScript, render in a few milliseconds, and be testable with plain
string assertions; an inline SVG is all three, scales to any screen width through its
``viewBox``, and takes its colours from the page's CSS (classes, not colours, are written
here), so dark mode needs no second rendering. Hover text is SVG's ``<title>``; a point
that names a trial is an ``<a>`` to its page.

Every text that reaches the SVG goes through :func:`markupsafe.escape`; numbers are
formatted here. Each chart returns :class:`markupsafe.Markup`, so templates insert it
with no ``|safe`` of their own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from api.pages.chart_frame import (  # noqa: F401 - status_class, nice_ticks, fmt_tick are part of this module's API
    STATUS_CLASSES,
    _domain,
    _empty,
    _Frame,
    _line_path,
    _n,
    _Scale,
    _step_path,
    fmt_tick,
    nice_ticks,
    status_class,
)
from api.pages.chart_scale import robust_range
from api.pages.lines import SPARSE_POINTS, Band, HLine, Series, VLine, line_chart
from api.pages.lines import clip_text as _clip

__all__ = [
    "Band",
    "HLine",
    "Point",
    "SPARSE_POINTS",
    "Series",
    "VLine",
    "bars",
    "clip_scale_figure",
    "dot_rows",
    "fmt_tick",
    "line_chart",
    "metric_chart",
    "metric_domain",
    "off_axis",
    "nice_ticks",
    "scatter",
    "sparkline",
    "status_class",
    "step_chart",
]

# -- charts -----------------------------------------------------------------------------------


def sparkline(
    series: Sequence[tuple[float, float]], *, x_max: float, label: str, width: int = 160, height: int = 36
) -> Markup:
    """The running best as a tiny step line (the projects index)."""
    if not series:
        return _empty(label, "no scored trials", width, height)
    xs = (0.0, max(float(x_max), series[-1][0] + 1))
    fx = _Scale(xs[0], xs[1], 2, width - 4)
    yd = _domain([v for _, v in series], pad=0.1)
    fy = _Scale(yd[0], yd[1], height - 3, 3)
    path = _step_path(series, fx, fy, xs[1])
    lx, ly = fx(series[-1][0]), fy(series[-1][1])
    return Markup(
        f'<svg class="spark" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
        f'<title>{escape(label)}</title><path class="runbest" d="{path}"/>'
        f'<circle class="pt-best" cx="{_n(lx)}" cy="{_n(ly)}" r="2.5"/></svg>'
    )


@dataclass(frozen=True, slots=True)
class Point:
    """One marker: where, what it is, and where it links to."""

    x: float
    y: float | None
    cls: str = "kept"
    title: str = ""
    href: str | None = None


def _marker(point: Point, px: float, py: float, radius: float) -> str:
    if point.cls == "failed":
        r = radius
        shape = (
            f'<path class="pt pt-failed" d="M{_n(px - r)},{_n(py - r)}L{_n(px + r)},{_n(py + r)}'
            f'M{_n(px - r)},{_n(py + r)}L{_n(px + r)},{_n(py - r)}"/>'
        )
    else:
        shape = f'<circle class="pt pt-{point.cls}" cx="{_n(px)}" cy="{_n(py)}" r="{radius}"/>'
    title = f"<title>{escape(point.title)}</title>" if point.title else ""
    if point.href:
        return f'<a href="{escape(point.href)}">{shape}{title}</a>'
    return f"<g>{shape}{title}</g>" if title else shape


def metric_chart(
    points: Sequence[Point],
    running_best: Sequence[tuple[float, float]],
    *,
    label: str,
    metric_name: str,
    best_x: float | None = None,
    width: int = 960,
    height: int = 340,
    y_strip: bool = False,
    y_domain: tuple[float, float] | None = None,
) -> Markup:
    """The metric of each trial in time order: kept (filled dots), discarded (open dots)
    and failed (crosses) trials, unscored ones as ticks in a band under the plot, and the
    running best as a step line. ``points``' ``y`` is None for an unscored trial.
    ``y_strip``: the y axis again after the chart (:meth:`_Frame.y_strip`), for a page
    where the chart scrolls sideways on a small screen. ``y_domain``: the value range
    (default :func:`metric_domain`'s robust range)."""
    scored = [p for p in points if p.y is not None]
    if not points:
        return _empty(label, "no trials yet")
    frame = _Frame(width, height, left=72, right=16, top=12, bottom=58)
    xs = [p.x for p in points]
    xd = (min(xs) - 0.5, max(xs) + 0.5)
    yd = y_domain or metric_domain(scored, running_best)
    frame.set_domains(xd, yd)
    frame.axes(
        x_label="trial (insertion order)",
        y_label=metric_name,
        x_format=lambda v, s: f"{v:,.0f}" if float(v).is_integer() else "",
    )
    parts = frame.parts
    # the band of unscored trials, under the x axis labels' baseline
    band_y = height - 34
    unscored = [p for p in points if p.y is None]
    if unscored:
        parts.append(f'<text class="tick" x="{frame.left - 6}" y="{band_y + 4}" text-anchor="end">no metric</text>')
        for p in unscored:
            px = frame.x(p.x)
            tick = f'<line class="rug rug-{p.cls}" x1="{_n(px)}" x2="{_n(px)}" y1="{band_y - 5}" y2="{band_y + 5}"/>'
            title = f"<title>{escape(p.title)}</title>" if p.title else ""
            parts.append(f'<a href="{escape(p.href)}">{tick}{title}</a>' if p.href else tick)
    radius = 3.5 if len(points) <= 300 else 2.5 if len(points) <= 1500 else 1.8
    inside = [p for p in scored if yd[0] <= p.y <= yd[1]]  # type: ignore[operator]
    # draw order: discarded, running, failed, kept on top
    for cls in STATUS_CLASSES:
        for p in inside:
            if p.cls == cls:
                parts.append(_marker(p, frame.x(p.x), frame.y(p.y), radius))  # type: ignore[arg-type]
    for up in (True, False):  # off the axis: one triangle per few pixels of x, pointing the way
        beyond = [p for p in scored if (p.y > yd[1] if up else p.y < yd[0])]  # type: ignore[operator]
        parts.extend(_edge_markers(beyond, frame, up=up, size=max(3.5, radius + 1.5)))
    if running_best:
        parts.append(f'<path class="runbest" d="{_step_path(running_best, frame.x, frame.y, xd[1])}"/>')
    if best_x is not None:
        best = next((p for p in scored if p.x == best_x), None)
        if best is not None and yd[0] <= best.y <= yd[1]:  # type: ignore[operator]
            parts.append(
                f'<circle class="pt-best-ring" cx="{_n(frame.x(best.x))}" cy="{_n(frame.y(best.y))}" r="{radius + 4}"/>'  # type: ignore[arg-type]
            )
    return frame.svg(label) + frame.y_strip() if y_strip else frame.svg(label)


#: How far beyond the kept trials' range (in spans of it) other trials still set the
#: axis of the kept range.
OUTLIER_REACH = 0.5
#: How far beyond the robust range (in spans of it) a trial still sets the axis.
ROBUST_REACH = 0.0


def metric_domain(
    scored: Sequence[Point], running_best: Sequence[tuple[float, float]], *, kept_range: bool = False
) -> tuple[float, float]:
    """The y range of the metric chart. By default every scored trial's range, robustly:
    at least the 2nd–98th percentile of the scored trials, the kept trials and the
    running best, and the trials within :data:`ROBUST_REACH` of that span beyond it.
    ``kept_range``: the kept trials and the running best, widened to take in the other
    trials that lie within :data:`OUTLIER_REACH` of that range's span beyond it. A trial
    further out (a blown-up run) is drawn as an edge marker. With no kept trial and no
    running best, the kept range is every scored trial's."""
    core = [p.y for p in scored if p.cls == "kept" and p.y is not None] + [v for _, v in running_best]
    core = [v for v in core if math.isfinite(v)]
    values = [p.y for p in scored if p.y is not None and math.isfinite(p.y)]
    reach = OUTLIER_REACH
    if not kept_range:
        bulk = robust_range(values)
        core += list(bulk) if bulk else []
        reach = ROBUST_REACH
    if not core:
        return _domain(values)
    lo, hi = min(core), max(core)
    span = (hi - lo) or (abs(hi) * 0.05 or 1.0)
    reach_lo, reach_hi = lo - span * reach, hi + span * reach
    near = [v for v in values if reach_lo <= v <= reach_hi]
    return _domain([*core, *near])


def off_axis(scored: Sequence[Point], domain: tuple[float, float]) -> tuple[int, int]:
    """How many scored trials lie above and below ``domain``."""
    above = sum(1 for p in scored if p.y is not None and p.y > domain[1])
    below = sum(1 for p in scored if p.y is not None and p.y < domain[0])
    return above, below


#: Off-axis trials closer than this many pixels of x share one edge marker.
EDGE_BIN_PX = 14.0


def _edge_markers(points: Sequence[Point], frame: _Frame, *, up: bool, size: float) -> list[str]:
    """The trials beyond one edge of the axis: one triangle per :data:`EDGE_BIN_PX` of x
    (a plateau's thousands of discards would pile into a solid strip), titled with how
    many it stands for and their values, linked to the first of them."""
    edge_y = frame.top if up else frame.height - frame.bottom
    bins: dict[int, list[Point]] = {}
    for p in points:
        bins.setdefault(int(frame.x(p.x) // EDGE_BIN_PX), []).append(p)
    out = []
    for members in bins.values():
        first = members[0]
        px = sum(frame.x(p.x) for p in members) / len(members)
        if len(members) == 1:
            title = f"{first.title} · off the axis ({'above' if up else 'below'})" if first.title else "off the axis"
        else:
            values = [p.y for p in members if p.y is not None]
            title = (
                f"{len(members)} trials {'above' if up else 'below'} the axis, "
                f"{min(values):.6g} to {max(values):.6g}; the first: {first.title}"
            )
        out.append(_edge_marker(first, px, edge_y, up=up, size=size, title=title))
    return out


def _edge_marker(point: Point, px: float, edge_y: float, *, up: bool, size: float, title: str) -> str:
    """A point whose value is off the axis: a triangle on the plot's edge pointing towards
    the value, titled with the real value."""
    tip = edge_y - size if up else edge_y + size
    base = edge_y + size * 0.6 if up else edge_y - size * 0.6
    shape = (
        f'<path class="pt pt-edge pt-{point.cls}" d="M{_n(px)},{_n(tip)}L{_n(px + size)},{_n(base)}'
        f'L{_n(px - size)},{_n(base)}Z"/>'
    )
    body = f"{shape}<title>{escape(title)}</title>"
    return f'<a href="{escape(point.href)}">{body}</a>' if point.href else f"<g>{body}</g>"


def step_chart(
    series: Sequence[tuple[float, float]],
    *,
    x_max: float,
    label: str,
    metric_name: str,
    width: int = 960,
    height: int = 150,
    window: tuple[float, float] | None = None,
) -> Markup:
    """The running best over a project's whole history (``window``: the span the metric
    chart shows, shaded)."""
    if not series:
        return _empty(label, "no scored trials yet", width, height)
    frame = _Frame(width, height, left=72, right=16, top=10, bottom=34)
    xd = (0.0, max(float(x_max), series[-1][0] + 1))
    frame.set_domains(xd, _domain([v for _, v in series], pad=0.1))
    if window is not None:
        x0, x1 = frame.x(window[0]), frame.x(window[1])
        frame.parts.append(
            f'<rect class="window" x="{_n(x0)}" y="{frame.top}" width="{_n(max(1.0, x1 - x0))}" '
            f'height="{height - frame.top - frame.bottom}"/>'
        )
    frame.axes(y_ticks=3, x_format=lambda v, s: f"{v:,.0f}")
    frame.parts.append(f'<path class="runbest" d="{_step_path(series, frame.x, frame.y, xd[1])}"/>')
    return frame.svg(label)


def scatter(
    points: Sequence[Point],
    *,
    label: str,
    x_label: str,
    y_label: str,
    diagonal: bool = True,
    width: int = 420,
    height: int = 360,
) -> Markup:
    """``(x, y)`` markers with the zero lines and, with ``diagonal``, y = x (calibration)."""
    shown = [p for p in points if p.y is not None]
    if not shown:
        return _empty(label, "no points", width, 120)
    if diagonal:  # a square plot area, so y = x runs at 45 degrees
        height = width - 62 - 12 + 12 + 40
    frame = _Frame(width, height, left=62, right=12, top=12, bottom=40)
    xs = [p.x for p in shown]
    ys = [p.y for p in shown if p.y is not None]  # shown already holds only these
    # pad 10%: a marker at the extreme stays clear of the axes
    if diagonal:  # one square domain, so the diagonal is at 45 degrees
        d = _domain([*xs, *ys], pad=0.1, include=[0.0])
        frame.set_domains(d, d)
    else:
        frame.set_domains(_domain(xs, pad=0.1, include=[0.0]), _domain(ys, pad=0.1, include=[0.0]))
    frame.axes(x_label=x_label, y_label=y_label, x_ticks=5, y_ticks=5)
    parts = frame.parts
    x0, x1 = frame.x.lo, frame.x.hi
    if frame.y.lo <= 0 <= frame.y.hi:
        parts.append(
            f'<line class="zero" x1="{_n(frame.x(x0))}" x2="{_n(frame.x(x1))}" y1="{_n(frame.y(0))}" y2="{_n(frame.y(0))}"/>'
        )
    if frame.x.lo <= 0 <= frame.x.hi:
        parts.append(
            f'<line class="zero" x1="{_n(frame.x(0))}" x2="{_n(frame.x(0))}" y1="{_n(frame.y(frame.y.lo))}" y2="{_n(frame.y(frame.y.hi))}"/>'
        )
    if diagonal:
        lo, hi = max(x0, frame.y.lo), min(x1, frame.y.hi)
        parts.append(
            f'<line class="diag" x1="{_n(frame.x(lo))}" y1="{_n(frame.y(lo))}" x2="{_n(frame.x(hi))}" y2="{_n(frame.y(hi))}">'
            "<title>observed = expected</title></line>"
        )
    radius = 4.0 if len(shown) <= 200 else 2.5
    for cls in STATUS_CLASSES:
        for p in shown:
            if p.cls == cls:
                parts.append(_marker(p, frame.x(p.x), frame.y(p.y), radius))  # type: ignore[arg-type]
    return frame.svg(label)


def bars(items: Sequence[tuple[str, int, str, str | None]], *, label: str, width: int = 420, row: int = 22) -> Markup:
    """Horizontal bars ``(name, count, css, href)`` (trials per failure label)."""
    if not items:
        return _empty(label, "no trials", width, 60)
    height = row * len(items) + 8
    name_w = 150
    most = max(count for _, count, _, _ in items) or 1
    span = width - name_w - 70
    parts = []
    for index, (name, count, css, href) in enumerate(items):
        y = 4 + index * row
        w = max(1.0, span * count / most)
        text = f'<text class="tick" x="{name_w - 6}" y="{y + row / 2 + 4:.0f}" text-anchor="end">{escape(name)}</text>'
        bar = f'<rect class="bar bar-{css}" x="{name_w}" y="{y + 3}" width="{_n(w)}" height="{row - 8}"/>'
        value = f'<text class="tick" x="{_n(name_w + w + 6)}" y="{y + row / 2 + 4:.0f}">{count:,}</text>'
        group = f"{text}{bar}{value}<title>{escape(name)}: {count:,}</title>"
        parts.append(f'<a href="{escape(href)}">{group}</a>' if href else f"<g>{group}</g>")
    return Markup(
        f'<svg class="chart bars" viewBox="0 0 {width} {height}" role="group" aria-label="{escape(label)}">'
        f"<title>{escape(label)}</title>{''.join(parts)}</svg>"
    )


def clip_scale_figure(
    *,
    mean: float | None,
    std: float | None,
    low: float | None,
    high: float | None,
    frac_low: float | None,
    frac_high: float | None,
    beta: float = 0.3,
    label: str = "clip-scale summary",
    width: int = 520,
    height: int = 110,
) -> Markup:
    """The adaptive clip scale of a trial on its own axis: the bounds ``1 ± beta``
    (dashed), min-max whisker, mean ± std box, the mean, and the fraction of turns at
    each bound written at that bound."""
    if mean is None and low is None and high is None:
        return _empty(label, "no clip-scale statistics recorded", width, 60)
    values = [v for v in (mean, low, high) if v is not None]
    if mean is not None and std is not None:
        values += [mean - std, mean + std]
    lo = min([1 - beta, *values])
    hi = max([1 + beta, *values])
    pad = (hi - lo) * 0.08 or 0.05
    fx = _Scale(lo - pad, hi + pad, 24, width - 24)
    mid = 48
    parts: list[str] = []
    ticks = nice_ticks(lo - pad, hi + pad, 7)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else None
    axis_y = 82
    parts.append(f'<line class="axis" x1="24" x2="{width - 24}" y1="{axis_y}" y2="{axis_y}"/>')
    for tick in ticks:
        px = fx(tick)
        parts.append(f'<line class="tickmark" x1="{_n(px)}" x2="{_n(px)}" y1="{axis_y}" y2="{axis_y + 4}"/>')
        parts.append(
            f'<text class="tick" x="{_n(px)}" y="{axis_y + 16}" text-anchor="middle">{escape(fmt_tick(tick, step))}</text>'
        )
    for bound, frac, side in ((1 - beta, frac_low, "low"), (1 + beta, frac_high, "high")):
        px = fx(bound)
        parts.append(
            f'<line class="hl bound" x1="{_n(px)}" x2="{_n(px)}" y1="14" y2="{axis_y}"><title>bound 1 {"-" if side == "low" else "+"} β = {bound:g}</title></line>'
        )
        anchor = "start" if side == "low" else "end"
        shift = 4 if side == "low" else -4
        note = f"1{'−' if side == 'low' else '+'}β = {bound:g}"
        if frac is not None:
            note += f" · {frac:.1%} at bound"
        parts.append(f'<text class="tick" x="{_n(px + shift)}" y="12" text-anchor="{anchor}">{escape(note)}</text>')
    parts.append(f'<line class="zero" x1="{_n(fx(1.0))}" x2="{_n(fx(1.0))}" y1="24" y2="{axis_y}"/>')
    if low is not None and high is not None:
        parts.append(
            f'<line class="whisker" x1="{_n(fx(low))}" x2="{_n(fx(high))}" y1="{mid}" y2="{mid}"><title>min {low:g} – max {high:g}</title></line>'
        )
        for v in (low, high):
            parts.append(f'<line class="whisker" x1="{_n(fx(v))}" x2="{_n(fx(v))}" y1="{mid - 8}" y2="{mid + 8}"/>')
    if mean is not None and std is not None:
        x0, x1 = fx(mean - std), fx(mean + std)
        parts.append(
            f'<rect class="box" x="{_n(x0)}" y="{mid - 12}" width="{_n(max(1.0, x1 - x0))}" height="24"><title>mean ± std: {mean:g} ± {std:g}</title></rect>'
        )
    if mean is not None:
        parts.append(
            f'<line class="meanline" x1="{_n(fx(mean))}" x2="{_n(fx(mean))}" y1="{mid - 14}" y2="{mid + 14}"><title>mean {mean:g}</title></line>'
        )
    return Markup(
        f'<svg class="chart clipfig" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
        f"<title>{escape(label)}</title>{''.join(parts)}</svg>"
    )


def dot_rows(
    items: Sequence[tuple[str, float | None, str, str | None]],
    *,
    label: str,
    x_label: str,
    width: int = 520,
    row: int = 26,
) -> Markup:
    """One row per item ``(name, value, css, href)``, its value a dot on a shared axis
    (the compared trials' metrics: close values stay apart, unlike bars from zero)."""
    scored = [value for _, value, _, _ in items if value is not None]
    if not scored:
        return _empty(label, "no values", width, 60)
    height = row * len(items) + 44
    frame = _Frame(width, height, left=96, right=16, top=8, bottom=36)
    frame.set_domains(_domain(scored, pad=0.15), (0.0, float(len(items))))
    ticks = nice_ticks(frame.x.lo, frame.x.hi, 5)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else None
    y0 = height - frame.bottom
    parts = frame.parts
    for tick in ticks:
        px = frame.x(tick)
        parts.append(f'<line class="grid" x1="{_n(px)}" x2="{_n(px)}" y1="{frame.top}" y2="{y0}"/>')
        parts.append(
            f'<text class="tick" x="{_n(px)}" y="{y0 + 16}" text-anchor="middle">{escape(fmt_tick(tick, step))}</text>'
        )
    parts.append(f'<line class="axis" x1="{frame.left}" x2="{width - frame.right}" y1="{y0}" y2="{y0}"/>')
    parts.append(
        f'<text class="label" x="{(frame.left + width - frame.right) / 2:.0f}" y="{height - 4}" text-anchor="middle">{escape(x_label)}</text>'
    )
    for index, (name, value, css, href) in enumerate(items):
        cy = frame.top + row * index + row / 2
        text = f'<text class="tick" x="{frame.left - 8}" y="{_n(cy + 4)}" text-anchor="end">{escape(_clip(name, 14))}</text>'
        mark = ""
        if value is not None:
            cx = frame.x(value)
            mark = f'<line class="grid" x1="{frame.left}" x2="{_n(cx)}" y1="{_n(cy)}" y2="{_n(cy)}"/>' + _marker(
                Point(value, value, css, f"{name}: {value:.6f}"), cx, cy, 5.0
            )
        else:
            mark = f'<text class="tick" x="{frame.left + 6}" y="{_n(cy + 4)}">no metric</text>'
        group = text + mark
        parts.append(f'<a href="{escape(href)}">{group}</a>' if href else f"<g>{group}</g>")
    return frame.svg(label)
