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

__all__ = [
    "Band",
    "HLine",
    "Point",
    "Series",
    "bars",
    "clip_scale_figure",
    "dot_rows",
    "fmt_tick",
    "line_chart",
    "metric_chart",
    "metric_domain",
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
) -> Markup:
    """The metric of each trial in time order: kept (filled dots), discarded (open dots)
    and failed (crosses) trials, unscored ones as ticks in a band under the plot, and the
    running best as a step line. ``points``' ``y`` is None for an unscored trial.
    ``y_strip``: the y axis again after the chart (:meth:`_Frame.y_strip`), for a page
    where the chart scrolls sideways on a small screen."""
    scored = [p for p in points if p.y is not None]
    if not points:
        return _empty(label, "no trials yet")
    frame = _Frame(width, height, left=72, right=16, top=12, bottom=58)
    xs = [p.x for p in points]
    xd = (min(xs) - 0.5, max(xs) + 0.5)
    yd = metric_domain(scored, running_best)
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
    outside = [p for p in scored if not yd[0] <= p.y <= yd[1]]  # type: ignore[operator]
    # draw order: discarded, running, failed, kept on top
    for cls in STATUS_CLASSES:
        for p in inside:
            if p.cls == cls:
                parts.append(_marker(p, frame.x(p.x), frame.y(p.y), radius))  # type: ignore[arg-type]
    for p in outside:  # off the axis: a triangle at the edge, pointing the way, its value in the title
        parts.append(
            _edge_marker(
                p,
                frame.x(p.x),
                frame.top if p.y > yd[1] else height - frame.bottom,  # type: ignore[operator]
                up=p.y > yd[1],  # type: ignore[operator]  # scored: y is not None
                size=radius + 1.5,
            )
        )
    if running_best:
        parts.append(f'<path class="runbest" d="{_step_path(running_best, frame.x, frame.y, xd[1])}"/>')
    if best_x is not None:
        best = next((p for p in scored if p.x == best_x), None)
        if best is not None:
            parts.append(
                f'<circle class="pt-best-ring" cx="{_n(frame.x(best.x))}" cy="{_n(frame.y(best.y))}" r="{radius + 4}"/>'  # type: ignore[arg-type]
            )
    return frame.svg(label) + frame.y_strip() if y_strip else frame.svg(label)


#: How far beyond the kept trials' range (in spans of it) other trials still set the axis.
OUTLIER_REACH = 0.5


def metric_domain(scored: Sequence[Point], running_best: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The y range of the metric chart: the kept trials and the running best, widened to
    take in the other trials that lie within :data:`OUTLIER_REACH` of that range's span
    beyond it; a trial further out (a blown-up run) is drawn as an edge marker. With no
    kept trial and no running best, every scored trial sets the range."""
    core = [p.y for p in scored if p.cls == "kept" and p.y is not None] + [v for _, v in running_best]
    core = [v for v in core if math.isfinite(v)]
    values = [p.y for p in scored if p.y is not None and math.isfinite(p.y)]
    if not core:
        return _domain(values)
    lo, hi = min(core), max(core)
    span = (hi - lo) or (abs(hi) * 0.05 or 1.0)
    reach_lo, reach_hi = lo - span * OUTLIER_REACH, hi + span * OUTLIER_REACH
    near = [v for v in values if reach_lo <= v <= reach_hi]
    return _domain([*core, *near])


def _edge_marker(point: Point, px: float, edge_y: float, *, up: bool, size: float) -> str:
    """A point whose value is off the axis: a triangle on the plot's edge pointing towards
    the value, titled with the real value."""
    tip = edge_y - size if up else edge_y + size
    base = edge_y + size * 0.6 if up else edge_y - size * 0.6
    shape = (
        f'<path class="pt pt-edge pt-{point.cls}" d="M{_n(px)},{_n(tip)}L{_n(px + size)},{_n(base)}'
        f'L{_n(px - size)},{_n(base)}Z"/>'
    )
    title = f"{point.title} · off the axis ({'above' if up else 'below'})" if point.title else "off the axis"
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


@dataclass(frozen=True, slots=True)
class Series:
    """A line: ``(x, y)`` points; ``css`` picks its colour (``s0`` ... ``s7``)."""

    name: str
    points: Sequence[tuple[float, float]]
    css: str = "s0"
    dashed: bool = False


@dataclass(frozen=True, slots=True)
class Band:
    """A shaded area between two curves over the same x values."""

    name: str
    lower: Sequence[tuple[float, float]]
    upper: Sequence[tuple[float, float]]
    css: str = "s0"


@dataclass(frozen=True, slots=True)
class HLine:
    """A horizontal reference line (a bound) with its label."""

    y: float
    name: str
    css: str = "bound"


#: A line of at most this many points gets a marker on each (an eval logged every N steps).
SPARSE_POINTS = 40


def line_chart(
    series: Sequence[Series],
    *,
    label: str,
    x_label: str = "step",
    y_label: str = "",
    bands: Sequence[Band] = (),
    hlines: Sequence[HLine] = (),
    width: int = 520,
    height: int = 250,
    markers: bool = False,
    integer_x: bool = False,
    zoomable: bool = False,
) -> Markup:
    """Lines over a shared x axis (telemetry over steps), with shaded bands and bounds.
    ``zoomable``: the page's script may zoom and pan its x axis (see ``_Frame.zoomable``).

    The legend is drawn inside the SVG, one row per series/band/bound, under the plot
    (none for a single plain line: the caption names it). ``integer_x``: only whole
    numbers get x ticks (generations, steps).
    """
    drawn = [s for s in series if s.points]
    if not drawn and not any(b.lower for b in bands):
        return _empty(label, "no data", width, 100)
    legend = [(s.name, f"ln {s.css}" + (" dashed" if s.dashed else ""), "line") for s in drawn]
    legend += [(b.name, f"band {b.css}", "band") for b in bands if b.lower]
    legend += [(h.name, f"hl {h.css}", "line") for h in hlines]
    if len(legend) == 1 and not bands and not hlines:
        legend = []
    per_row = max(1, (width - 70) // 150)
    legend_rows = -(-len(legend) // per_row)
    frame = _Frame(
        width, height + legend_rows * 18, left=64, right=14, top=10, bottom=44 + legend_rows * 18, x_label_y=height - 6
    )
    xs = [x for s in drawn for x, _ in s.points] + [x for b in bands for x, _ in b.lower]
    ys = [y for s in drawn for _, y in s.points]
    ys += [y for b in bands for _, y in (*b.lower, *b.upper)]
    xd = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if xd[0] == xd[1]:
        xd = (xd[0] - 1, xd[1] + 1)
    frame.set_domains(xd, _domain(ys, include=[h.y for h in hlines]))
    if integer_x:
        frame.axes(x_label=x_label, y_label=y_label, x_format=lambda v, s: f"{v:,.0f}" if float(v).is_integer() else "")
    else:
        frame.axes(x_label=x_label, y_label=y_label)
    parts = frame.parts
    data_start = len(parts)
    for band in bands:
        if not band.lower:
            continue
        upper = list(band.upper)
        d = (
            _line_path(band.lower, frame.x, frame.y)
            + "".join(f"L{_n(frame.x(x))},{_n(frame.y(y))}" for x, y in reversed(upper))
            + "Z"
        )
        parts.append(f'<path class="band {band.css}" d="{d}"><title>{escape(band.name)}</title></path>')
    for h in hlines:
        py = frame.y(h.y)
        parts.append(
            f'<line class="hl {h.css}" x1="{frame.left}" x2="{width - frame.right}" y1="{_n(py)}" y2="{_n(py)}">'
            f"<title>{escape(h.name)}</title></line>"
        )
    for s in drawn:
        dash = " dashed" if s.dashed else ""
        parts.append(
            f'<path class="ln {s.css}{dash}" d="{_line_path(s.points, frame.x, frame.y)}"><title>{escape(s.name)}</title></path>'
        )
        if markers or len(s.points) == 1 or len(s.points) <= SPARSE_POINTS:
            for x, y in s.points:
                parts.append(f'<circle class="dot {s.css}" cx="{_n(frame.x(x))}" cy="{_n(frame.y(y))}" r="2.5"/>')
    zoom = frame.zoomable(data_start, integer_x) if zoomable else ""
    # legend, under the x axis label
    top = height + 12
    for index, (name, css, kind) in enumerate(legend):
        row, col = divmod(index, per_row)
        lx = frame.left + col * 150
        ly = top + row * 18
        if kind == "band":
            parts.append(f'<rect class="{css}" x="{lx}" y="{ly - 6}" width="18" height="10"/>')
        else:
            parts.append(f'<line class="{css}" x1="{lx}" x2="{lx + 18}" y1="{ly - 1}" y2="{ly - 1}"/>')
        parts.append(f'<text class="legend" x="{lx + 24}" y="{ly + 3}">{escape(_clip(name, 20))}</text>')
    return frame.svg(label, attrs=zoom)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


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
