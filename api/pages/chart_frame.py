"""The primitives every server-drawn chart shares (:mod:`api.pages.charts`,
:mod:`api.pages.knob_charts`): status classes, nice ticks and their labels, linear
scales with padded domains, and the frame (axes, grid, plot area) of an x/y chart."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from markupsafe import Markup, escape

from api.pages.chart_scale import log_ticks

#: Status -> the class the charts and badges draw it with.
_KEPT = frozenset({"keep", "baseline"})
_DISCARDED = frozenset({"discard", "disqualified"})
#: The classes of :func:`status_class` in the order charts draw them (kept on top).
STATUS_CLASSES = ("discarded", "running", "failed", "kept")


def status_class(status: str) -> str:
    """``kept`` (keep, baseline), ``discarded`` (discard, disqualified), ``running`` (under
    way: a neutral, live mark, never the failure colour) or ``failed`` (the rest)."""
    if status in _KEPT:
        return "kept"
    if status in _DISCARDED:
        return "discarded"
    if status == "running":
        return "running"
    return "failed"


# -- scales and ticks -------------------------------------------------------------------------


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering ``[lo, hi]`` (steps of 1, 2, 2.5 or 5 x 10^k)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks: list[float] = []
    value = first
    while value <= hi + step * 1e-9 and len(ticks) < 50:
        ticks.append(0.0 if abs(value) < step * 1e-9 else value)
        value = first + step * len(ticks)
    return ticks


def fmt_tick(value: float, step: float | None = None) -> str:
    """A tick label: as few decimals as the tick step needs, thousands separated."""
    if step is None or step <= 0 or not math.isfinite(step):
        return f"{value:.4g}"
    decimals = max(0, min(8, -math.floor(math.log10(step) + 1e-9)))
    if step * 10**decimals % 1 > 1e-6:  # steps of 2.5 x 10^k need one more decimal
        decimals += 1
    if abs(value) >= 1e6 or (value != 0 and abs(value) < 1e-4 and decimals > 6):
        return f"{value:.3g}"
    return f"{value:,.{decimals}f}"


@dataclass(frozen=True, slots=True)
class _Scale:
    lo: float
    hi: float
    px0: float
    px1: float

    def __call__(self, value: float) -> float:
        if self.hi == self.lo:
            return (self.px0 + self.px1) / 2
        return self.px0 + (value - self.lo) * (self.px1 - self.px0) / (self.hi - self.lo)


def _domain(values: Iterable[float], *, pad: float = 0.05, include: Iterable[float] = ()) -> tuple[float, float]:
    finite = [v for v in (*values, *include) if v is not None and math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    if lo == hi:
        span = abs(lo) * 0.05 or 1.0
        return lo - span, hi + span
    span = hi - lo
    return lo - span * pad, hi + span * pad


def _n(value: float) -> str:
    """A coordinate: one decimal is finer than a screen pixel at our sizes."""
    return f"{value:.1f}"


# -- the frame every x/y chart shares -----------------------------------------------------------


@dataclass
class _Frame:
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    x: _Scale = field(init=False)
    y: _Scale = field(init=False)
    parts: list[str] = field(default_factory=list)
    #: where the x axis label's baseline sits (default: the bottom edge)
    x_label_y: float | None = None

    def set_domains(self, xd: tuple[float, float], yd: tuple[float, float]) -> None:
        self.x = _Scale(xd[0], xd[1], self.left, self.width - self.right)
        self.y = _Scale(yd[0], yd[1], self.height - self.bottom, self.top)

    def axes(
        self,
        *,
        x_label: str = "",
        y_label: str = "",
        x_ticks: int = 6,
        y_ticks: int = 5,
        x_format: Callable[[float, float | None], str] | None = None,
        y_log: bool = False,
    ) -> None:
        """Grid, ticks, axis lines and labels. ``y_log``: the y domain is in log10 units and
        its ticks are labelled with the values themselves."""
        p = self.parts
        x_format = x_format or fmt_tick
        x0, x1 = self.left, self.width - self.right
        y0, y1 = self.height - self.bottom, self.top
        for at, text in self._y_ticks(y_ticks, y_log):
            py = self.y(at)
            p.append(f'<line class="grid" x1="{x0}" x2="{x1}" y1="{_n(py)}" y2="{_n(py)}"/>')
            p.append(f'<text class="tick" x="{x0 - 6}" y="{_n(py + 4)}" text-anchor="end">{escape(text)}</text>')
        xt = nice_ticks(self.x.lo, self.x.hi, x_ticks)
        xstep = xt[1] - xt[0] if len(xt) > 1 else None
        for tick in xt:
            px = self.x(tick)
            p.append(f'<line class="tickmark xt" x1="{_n(px)}" x2="{_n(px)}" y1="{y0}" y2="{y0 + 4}"/>')
            p.append(
                f'<text class="tick xt" x="{_n(px)}" y="{y0 + 16}" text-anchor="middle">{escape(x_format(tick, xstep))}</text>'
            )
        p.append(f'<line class="axis" x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}"/>')
        p.append(f'<line class="axis" x1="{x0}" x2="{x0}" y1="{y0}" y2="{y1}"/>')
        if x_label:
            ly = self.height - 4 if self.x_label_y is None else self.x_label_y
            p.append(
                f'<text class="label" x="{(x0 + x1) / 2:.0f}" y="{ly:.0f}" text-anchor="middle">{escape(x_label)}</text>'
            )
        if y_label:
            p.append(
                f'<text class="label" transform="translate(12 {(y0 + y1) / 2:.0f}) rotate(-90)" '
                f'text-anchor="middle">{escape(y_label)}</text>'
            )

    def _y_ticks(self, count: int, log: bool) -> list[tuple[float, str]]:
        """``(position in the y domain, label)`` of the y ticks."""
        if log:
            values = log_ticks(self.y.lo, self.y.hi)
            if len(values) < 3:  # within one decade: round numbers of the values themselves
                values = [v for v in nice_ticks(10**self.y.lo, 10**self.y.hi, count) if v > 0]
            return [(math.log10(v), f"{v:g}") for v in values]
        yt = nice_ticks(self.y.lo, self.y.hi, count)
        ystep = yt[1] - yt[0] if len(yt) > 1 else None
        return [(tick, fmt_tick(tick, ystep)) for tick in yt]

    def y_strip(self) -> Markup:
        """The y axis alone (its tick labels, line and label, on the card's colour) as an
        SVG as wide as the left margin, at the chart's scale: what a chart that scrolls
        sideways on a small screen keeps in view beside the plot (``.y-strip``, shown by
        the small-screen CSS only; hidden from assistive technology, the chart says it)."""
        marks = [
            part
            for part in self.parts
            if part.startswith(('<text class="tick" x="' + f"{self.left - 6}" + '"', '<text class="label" transform='))
        ]
        x0, y0, y1 = self.left, self.height - self.bottom, self.top
        return Markup(
            f'<svg class="y-strip" viewBox="0 0 {x0 + 1} {self.height}" aria-hidden="true" focusable="false">'
            f'<rect class="strip-bg" x="0" y="0" width="{x0 + 1}" height="{self.height}"/>{"".join(marks)}'
            f'<line class="axis" x1="{x0}" x2="{x0}" y1="{y0}" y2="{y1}"/></svg>'
        )

    def svg(self, label: str, css: str = "chart", attrs: str = "") -> Markup:
        return Markup(
            f'<svg class="{css}" viewBox="0 0 {self.width} {self.height}" role="group" aria-label="{escape(label)}" '
            f'preserveAspectRatio="xMidYMid meet"{attrs}><title>{escape(label)}</title>{"".join(self.parts)}</svg>'
        )

    def zoomable(self, start: int, integer_x: bool) -> str:
        """Wrap the parts drawn from ``start`` on (the data) in a plot area clipped to the
        axes (the clip on an outer group, so the script's transform of the inner one
        leaves the clip where it is), and answer the ``<svg>`` attributes ``static/app.js`` zooms the x axis by
        (the domain and its pixels): a JS-only enhancement, the SVG stays as drawn."""
        body = "".join(self.parts[start:])
        clip = "c" + hashlib.sha1(f"{self.width}{self.height}{body}".encode()).hexdigest()[:10]
        x0, x1, y1, y0 = self.left, self.width - self.right, self.top, self.height - self.bottom
        self.parts[start:] = [
            f'<defs><clipPath id="{clip}"><rect x="{x0}" y="{y1 - 4}" width="{x1 - x0}" height="{y0 - y1 + 8}"/></clipPath></defs>'
            f'<g clip-path="url(#{clip})"><g class="plotarea">{body}</g></g>'
        ]
        return (
            f' data-zoom="x" data-x0="{self.x.lo!r}" data-x1="{self.x.hi!r}" data-px0="{x0}" data-px1="{x1}"'
            f' data-axis-y="{y0}"{" data-integer-x" if integer_x else ""}'
        )


def _empty(label: str, message: str, width: int = 640, height: int = 120) -> Markup:
    return Markup(
        f'<svg class="chart empty" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
        f'<title>{escape(label)}</title><text class="label" x="{width / 2:.0f}" y="{height / 2:.0f}" '
        f'text-anchor="middle">{escape(message)}</text></svg>'
    )


def _step_path(points: Sequence[tuple[float, float]], fx: _Scale, fy: _Scale, x_end: float | None = None) -> str:
    """An SVG path that holds each value until the next point (a running best)."""
    if not points:
        return ""
    out = [f"M{_n(fx(points[0][0]))},{_n(fy(points[0][1]))}"]
    for x, y in points[1:]:
        out.append(f"H{_n(fx(x))}V{_n(fy(y))}")
    if x_end is not None:
        out.append(f"H{_n(fx(x_end))}")
    return "".join(out)


def _line_path(points: Sequence[tuple[float, float]], fx: _Scale, fy: _Scale) -> str:
    return "".join(f"{'M' if i == 0 else 'L'}{_n(fx(x))},{_n(fy(y))}" for i, (x, y) in enumerate(points))
