"""Line charts over a shared x axis (telemetry over steps, a metric along a chain), drawn
as server-side SVG like :mod:`api.pages.charts`: a log value axis on request, an outlier
cap (:func:`api.pages.chart_scale.outlier_cap`) that writes what it hid on the chart, and
vertical marks at the steps where the training code raised an alert."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from api.pages.chart_frame import _domain, _empty, _Frame, _line_path, _n
from api.pages.chart_scale import Cap, outlier_cap

__all__ = ["SPARSE_POINTS", "Band", "HLine", "Series", "VLine", "clip_text", "line_chart"]


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


@dataclass(frozen=True, slots=True)
class VLine:
    """A vertical mark at an x (the step of an alert), titled with what happened there."""

    x: float
    name: str
    css: str = "alert-warn"


#: A line of at most this many points gets a marker on each (an eval logged every N steps).
SPARSE_POINTS = 40


def _log_points(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(x, math.log10(y)) for x, y in points if y > 0]


def line_chart(
    series: Sequence[Series],
    *,
    label: str,
    x_label: str = "step",
    y_label: str = "",
    bands: Sequence[Band] = (),
    hlines: Sequence[HLine] = (),
    vlines: Sequence[VLine] = (),
    width: int = 520,
    height: int = 250,
    markers: bool = False,
    integer_x: bool = False,
    zoomable: bool = False,
    log_y: bool = False,
    cap: bool = False,
) -> Markup:
    """Lines over a shared x axis (telemetry over steps), with shaded bands and bounds.
    ``zoomable``: the page's script may zoom and pan its x axis (see ``_Frame.zoomable``).
    ``log_y``: the values on a log10 axis (a value at or below 0 is left out and said so;
    a band's lower edge at or below 0 is clipped to the axis floor, so it neither dives
    nor stretches the axis). ``cap``: values beyond the outlier cap are clipped off the
    plot and the chart says how many. ``vlines``: marks at alert steps.

    The legend is drawn inside the SVG, one row per series/band/bound, under the plot
    (none for a single plain line: the caption names it). ``integer_x``: only whole
    numbers get x ticks (generations, steps).
    """
    drawn = [s for s in series if s.points]
    if not drawn and not any(b.lower for b in bands):
        return _empty(label, "no data", width, 100)
    notes: list[str] = []
    if log_y:
        dropped = sum(1 for s in drawn for _, y in s.points if y <= 0)
        if dropped:
            notes.append(f"{dropped:,} value{'' if dropped == 1 else 's'} ≤ 0 not on the log scale")
        drawn = [Series(s.name, _log_points(s.points), s.css, s.dashed) for s in drawn]
        drawn = [s for s in drawn if s.points]
        hlines = [HLine(math.log10(h.y), h.name, h.css) for h in hlines if h.y > 0]
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
    limits: Cap | None = outlier_cap([[y for _, y in s.points] for s in drawn]) if cap else None
    if limits is not None:
        lo, hi = (10**limits.lo, 10**limits.hi) if log_y else (limits.lo, limits.hi)
        shown = Cap(lo, hi, limits.above, limits.below)
        notes.append(shown.note())
        yd = _domain([limits.lo, limits.hi], include=[h.y for h in hlines])
    elif log_y:  # a band's upper edge may set the axis; its lower edge is clipped to it below
        ys += [math.log10(y) for b in bands for _, y in b.upper if y > 0]
        yd = _domain(ys, include=[h.y for h in hlines])
    else:
        ys += [y for b in bands for _, y in (*b.lower, *b.upper)]
        yd = _domain(ys, include=[h.y for h in hlines])
    xd = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if xd[0] == xd[1]:
        xd = (xd[0] - 1, xd[1] + 1)
    frame.set_domains(xd, yd)
    x_format = (lambda v, s: f"{v:,.0f}" if float(v).is_integer() else "") if integer_x else None
    frame.axes(x_label=x_label, y_label=y_label + (" (log)" if log_y else ""), y_log=log_y, x_format=x_format)
    parts = frame.parts
    data_start = len(parts)
    for band in bands:
        if not band.lower:
            continue
        lower, upper = list(band.lower), list(band.upper)
        if log_y:  # in log space a bound at or below 0 sits on the floor, never below it
            lower = [(x, math.log10(y) if y > 0 else yd[0]) for x, y in lower]
            upper = [(x, math.log10(y) if y > 0 else yd[0]) for x, y in upper]
            lower = [(x, max(y, yd[0])) for x, y in lower]
        d = (
            _line_path(lower, frame.x, frame.y)
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
    for v in vlines:
        if xd[0] <= v.x <= xd[1]:
            px = frame.x(v.x)
            parts.append(
                f'<line class="vl {v.css}" x1="{_n(px)}" x2="{_n(px)}" y1="{frame.top}" y2="{height - frame.bottom}">'
                f"<title>{escape(v.name)}</title></line>"
            )
    for s in drawn:
        dash = " dashed" if s.dashed else ""
        parts.append(
            f'<path class="ln {s.css}{dash}" d="{_line_path(s.points, frame.x, frame.y)}"><title>{escape(s.name)}</title></path>'
        )
        if markers or len(s.points) == 1 or len(s.points) <= SPARSE_POINTS:
            for x, y in s.points:
                parts.append(f'<circle class="dot {s.css}" cx="{_n(frame.x(x))}" cy="{_n(frame.y(y))}" r="2.5"/>')
    if zoomable:
        zoom = frame.zoomable(data_start, integer_x)
    else:
        zoom = ""
        if limits is not None:  # what lies beyond the cap leaves the plot area
            _clip_data(frame, data_start)
    if notes:
        parts.append(
            f'<text class="cap-note" x="{width - frame.right}" y="{frame.top + 10}" text-anchor="end">'
            f"{escape(' · '.join(notes))}</text>"
        )
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
        parts.append(f'<text class="legend" x="{lx + 24}" y="{ly + 3}">{escape(clip_text(name, 20))}</text>')
    return frame.svg(label, attrs=zoom)


def _clip_data(frame: _Frame, start: int) -> None:
    body = "".join(frame.parts[start:])
    clip = "k" + hashlib.sha1(f"{frame.width}{frame.height}{body}".encode()).hexdigest()[:10]
    x0, x1, y1, y0 = frame.left, frame.width - frame.right, frame.top, frame.height - frame.bottom
    frame.parts[start:] = [
        f'<defs><clipPath id="{clip}"><rect x="{x0}" y="{y1 - 4}" width="{x1 - x0}" height="{y0 - y1 + 8}"/></clipPath></defs>'
        f'<g clip-path="url(#{clip})">{body}</g>'
    ]


def clip_text(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with an ellipsis."""
    return text if len(text) <= width else text[: width - 1] + "…"
