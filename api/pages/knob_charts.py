"""The knob view's SVG figures: one knob against the metric (a scatter) and several at
once (parallel coordinates), server-drawn like :mod:`api.pages.charts` (classes, not
colours; every text escaped; each trial a link to its page, ``data-exp`` for the
script that ties the two figures together).

Kept trials are filled dots, discarded open dots, failed crosses (the dashboard's
marks); the chain to the best is a line through its trials in lineage order, the best
ringed (the line through the chain's last steps). The metric axis spans the kept trials and the bulk (2nd to 98th percentile) of
the others: blow-ups sit on the edge as triangles, their value in the hover text.
Category axes give each value a band (trials spread across it by their seq).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from typing import Any

from markupsafe import Markup, escape

from api.pages.chart_frame import STATUS_CLASSES, _n, fmt_tick, nice_ticks, status_class
from api.pages.chart_scale import Cap, outlier_cap
from api.pages.web import fmt_metric, trial_url
from lineage.browse.knobs import Axis, KnobPoint, KnobView

#: The scatter draws the line of the chain through its last this many trials (a 400-step
#: chain drawn whole is a scribble); every chain trial is ringed.
CHAIN_LINE_STEPS = 25


def metric_cap(points: Sequence[KnobPoint]) -> Cap | None:
    """The outlier cap of the trials' metrics (:func:`api.pages.chart_scale.outlier_cap`):
    one diverged run (val_loss 7.06 among values near 1) no longer pins the rest to the floor."""
    return outlier_cap([[p.metric for p in points if p.metric is not None]])


def metric_domain(points: Sequence[KnobPoint], cap: Cap | None = None) -> tuple[float, float]:
    """The metric axis: every kept or chain trial, and the 2nd–98th percentile of the rest;
    with ``cap``, the capped range (what lies beyond sits on the edge)."""
    if cap is not None:
        span = cap.hi - cap.lo or abs(cap.lo) * 0.05 or 1.0
        return cap.lo - span * 0.05, cap.hi + span * 0.05
    kept = [p.metric for p in points if p.metric is not None and (status_class(p.status) == "kept" or p.on_chain)]
    rest = sorted(p.metric for p in points if p.metric is not None and status_class(p.status) == "discarded")
    values = list(kept)
    if rest:
        cut = int(len(rest) * 0.02)
        values += rest[cut : len(rest) - cut] if len(rest) - 2 * cut > 0 else rest
    if not values:
        values = [p.metric for p in points if p.metric is not None]
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    span = hi - lo or abs(lo) * 0.05 or 1.0
    return lo - span * 0.05, hi + span * 0.05


class _Axis:
    """Value -> pixel along one axis (numeric, log or category) and its ticks."""

    def __init__(
        self,
        axis: Axis | None,
        values: Sequence[Any],
        px0: float,
        px1: float,
        *,
        log: bool = False,
        domain: tuple[float, float] | None = None,
    ) -> None:
        self.px0, self.px1 = px0, px1
        self.categories = list(axis.categories) if axis is not None and axis.kind == "category" else None
        # the metric axis has no Axis: its caller checks that every value is above 0
        self.log = bool(log and (axis is None or axis.positive))
        if self.categories is None:
            if domain is None:
                nums = [self._t(v) for v in values if v is not None]
                lo, hi = (min(nums), max(nums)) if nums else (0.0, 1.0)
                span = hi - lo or abs(lo) * 0.05 or 1.0
                domain = (lo - span * 0.05, hi + span * 0.05)
            self.lo, self.hi = domain

    def _t(self, value: float) -> float:
        return math.log10(value) if self.log else value

    def __call__(self, value: Any, jitter: float = 0.0) -> float:
        if self.categories is not None:
            index = self.categories.index(value) if value in self.categories else 0
            band = (self.px1 - self.px0) / max(1, len(self.categories))
            return self.px0 + band * (index + 0.5 + jitter * 0.7)
        t = self._t(value)
        return self.px0 + (t - self.lo) * (self.px1 - self.px0) / ((self.hi - self.lo) or 1.0)

    def clamp(self, value: float) -> tuple[float, int]:
        """``value`` pulled into the domain, and -1/0/1 for below/inside/above."""
        if self.categories is not None:
            return value, 0
        t = self._t(value)
        if t < self.lo:
            return (10**self.lo if self.log else self.lo), -1
        if t > self.hi:
            return (10**self.hi if self.log else self.hi), 1
        return value, 0

    def ticks(self) -> list[tuple[float, str]]:
        """``(pixel, text)`` of the axis' ticks."""
        if self.categories is not None:
            return [(self(c), c if len(c) <= 12 else c[:11] + "…") for c in self.categories]
        if self.log:
            out = []
            for k in range(math.floor(self.lo), math.ceil(self.hi) + 1):
                for m in (1, 2, 5) if self.hi - self.lo < 3 else (1,):
                    t = k + math.log10(m)
                    if self.lo <= t <= self.hi:
                        out.append(
                            (
                                self.px0 + (t - self.lo) * (self.px1 - self.px0) / ((self.hi - self.lo) or 1.0),
                                fmt_tick(10**t, 10**t),
                            )
                        )
            return out
        ticks = nice_ticks(self.lo, self.hi, 5)
        step = ticks[1] - ticks[0] if len(ticks) > 1 else None
        return [
            (self.px0 + (t - self.lo) * (self.px1 - self.px0) / ((self.hi - self.lo) or 1.0), fmt_tick(t, step))
            for t in ticks
        ]


def _brush_pixels(scale: _Axis, lo: float, hi: float) -> tuple[float, float]:
    """The pixels of a brush ``lo..hi`` on ``scale`` (a category axis counts its values)."""
    if scale.categories is not None:
        band = (scale.px1 - scale.px0) / max(1, len(scale.categories))
        return scale.px0 + band * (lo + 0.5), scale.px0 + band * (hi + 0.5)
    span = (scale.hi - scale.lo) or 1.0
    clip = [min(max(v, scale.lo), scale.hi) for v in (lo, hi)]
    return tuple(scale.px0 + (v - scale.lo) * (scale.px1 - scale.px0) / span for v in clip)  # type: ignore[return-value]


def _scale_values(points: Sequence[KnobPoint], index: int) -> list[Any]:
    """The values that set a numeric axis: those of trials that did not fail (a crash's
    placeholders, such as 0.0 GB, would squash the rest), or all when every trial failed."""
    ran = [p.values[index] for p in points if status_class(p.status) != "failed" and p.values[index] is not None]
    return ran or [p.values[index] for p in points]


def _jitter(seq: int) -> float:
    """A stable spread in [-0.5, 0.5) from a trial's seq (category bands)."""
    return ((seq * 2654435761) % 1000) / 1000 - 0.5


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _title(point: KnobPoint, labels: Sequence[tuple[int, str]], metric_name: str) -> str:
    parts = [f"exp_{point.exp_id}", point.status, f"{metric_name} {fmt_metric(point.metric)}"]
    parts += [f"{label} {_fmt(point.values[i])}" for i, label in labels if point.values[i] is not None]
    if point.on_chain:
        parts.append("on the chain to the best")
    return " · ".join(parts)


def _mark(cls: str, px: float, py: float, r: float, edge: int) -> str:
    if abs(edge) == 2:  # off the x scale: a triangle on the left or right edge
        d = 1 if edge > 0 else -1
        return (
            f'<path class="pt pt-{cls} pt-edge" d="M{_n(px)},{_n(py - r)}L{_n(px)},{_n(py + r)}'
            f'L{_n(px + d * r * 1.6)},{_n(py)}Z"/>'
        )
    if edge:  # a triangle on the edge, pointing out of the plot
        d = -1 if edge > 0 else 1
        return (
            f'<path class="pt pt-{cls} pt-edge" d="M{_n(px - r)},{_n(py)}L{_n(px + r)},{_n(py)}'
            f'L{_n(px)},{_n(py - d * r * 1.6)}Z"/>'
        )
    if cls == "failed":
        return (
            f'<path class="pt pt-failed" d="M{_n(px - r)},{_n(py - r)}L{_n(px + r)},{_n(py + r)}'
            f'M{_n(px - r)},{_n(py + r)}L{_n(px + r)},{_n(py - r)}"/>'
        )
    return f'<circle class="pt pt-{cls}" cx="{_n(px)}" cy="{_n(py)}" r="{r}"/>'


def _svg(width: int, height: int, label: str, parts: list[str], css: str) -> Markup:
    return Markup(
        f'<svg class="chart {css}" viewBox="0 0 {width} {height}" role="group" aria-label="{escape(label)}" '
        f'preserveAspectRatio="xMidYMid meet"><title>{escape(label)}</title>{"".join(parts)}</svg>'
    )


def scatter(
    view: KnobView,
    *,
    log: bool = False,
    ylog: bool = False,
    cap: Cap | None = None,
    width: int = 960,
    height: int = 420,
) -> Markup:
    """The first axis of ``view`` (x) against the metric (y); ``ylog``: the metric on a
    log scale (every metric must be above 0); ``cap``: the metric's outlier cap."""
    axis = view.axes[0]
    metric_name = view.project.metric_name
    label = f"{metric_name} against {axis.label}: kept, discarded and failed trials, the chain to the best as a line"
    if not view.points:
        return _svg(
            width,
            120,
            label,
            [
                f'<text class="label" x="{width / 2:.0f}" y="60" text-anchor="middle">'
                f"no trial has {escape(axis.label)}</text>"
            ],
            "knobs empty",
        )
    left, right, top, bottom = 72, 16, 12, 74 if axis.kind == "category" else 58
    fx = _Axis(axis, _scale_values(view.points, 0), left, width - right, log=log)
    y_domain = metric_domain(view.points, cap)
    if ylog:
        y_domain = (
            math.log10(max(y_domain[0], min(p.metric for p in view.points if p.metric is not None) * 0.9)),
            math.log10(y_domain[1]),
        )
    fy = _Axis(None, [], height - bottom, top, domain=y_domain, log=ylog)
    parts: list[str] = []
    x0, x1, y0, y1 = left, width - right, height - bottom, top
    for py, text in fy.ticks():
        parts.append(f'<line class="grid" x1="{x0}" x2="{x1}" y1="{_n(py)}" y2="{_n(py)}"/>')
        parts.append(f'<text class="tick" x="{x0 - 6}" y="{_n(py + 4)}" text-anchor="end">{escape(text)}</text>')
    rotate = fx.categories is not None and len(fx.categories) > 8
    for px, text in fx.ticks():
        parts.append(f'<line class="tickmark" x1="{_n(px)}" x2="{_n(px)}" y1="{y0}" y2="{y0 + 4}"/>')
        if rotate:
            parts.append(
                f'<text class="tick" transform="translate({_n(px + 3)} {y0 + 12}) rotate(40)">{escape(text)}</text>'
            )
        else:
            parts.append(f'<text class="tick" x="{_n(px)}" y="{y0 + 16}" text-anchor="middle">{escape(text)}</text>')
    parts.append(f'<line class="axis" x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}"/>')
    parts.append(f'<line class="axis" x1="{x0}" x2="{x0}" y1="{y0}" y2="{y1}"/>')
    scale = " (log scale)" if fx.log else ""
    parts.append(
        f'<text class="label" x="{(x0 + x1) / 2:.0f}" y="{height - 4}" text-anchor="middle">'
        f"{escape(axis.label)}{scale}</text>"
    )
    parts.append(
        f'<text class="label" transform="translate(12 {(y0 + y1) / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle">{escape(metric_name)}{" (log scale)" if ylog else ""}</text>'
    )
    if cap is not None:
        note = cap.note(what="trials").replace(" hidden", " on the edge")
        parts.append(f'<text class="cap-note" x="{x0 + 8}" y="{y1 + 10}">{escape(note)}</text>')
    slug = view.project.slug
    labels = [(0, axis.label)]
    radius = 3.5 if len(view.points) <= 300 else 2.6 if len(view.points) <= 2500 else 1.8
    where: dict[str, tuple[float, float]] = {}
    band_y = y0 - 6
    for cls in STATUS_CLASSES:
        for p in view.points:
            if status_class(p.status) != cls or p.values[0] is None:
                continue
            xv, x_edge = fx.clamp(p.values[0])
            px = fx(xv, _jitter(p.seq))
            if p.metric is None:  # no metric: a tick on the bottom edge
                shape = f'<line class="rug rug-{cls}" x1="{_n(px)}" x2="{_n(px)}" y1="{band_y - 4}" y2="{band_y + 4}"/>'
            else:
                value, edge = fy.clamp(p.metric)
                py = fy(value)
                edge = edge or (2 * x_edge)
                where[p.exp_id] = (px, py)
                shape = _mark(cls, px, py, radius, edge)
            parts.append(
                f'<a href="{escape(trial_url(slug, p.exp_id))}" data-exp="{escape(p.exp_id)}">{shape}'
                f"<title>{escape(_title(p, labels, metric_name))}</title></a>"
            )
    chain = [where[e] for e in view.chain if e in where]
    for x, y in chain:  # every trial of the chain ringed; the line through its last steps
        parts.append(f'<circle class="pt-chain" cx="{_n(x)}" cy="{_n(y)}" r="{radius + 1.5}"/>')
    steps = chain[-CHAIN_LINE_STEPS:]
    if len(steps) > 1:
        d = "".join(f"{'M' if i == 0 else 'L'}{_n(x)},{_n(y)}" for i, (x, y) in enumerate(steps))
        what = "the chain to the best" if len(steps) == len(chain) else f"the last {len(steps)} steps of the chain"
        parts.append(f'<path class="chainline" d="{d}"><title>{what}, in lineage order</title></path>')
    if view.best_exp in where:
        bx, by = where[view.best_exp]
        parts.append(f'<circle class="pt-best-ring" cx="{_n(bx)}" cy="{_n(by)}" r="{radius + 4}"/>')
    return _svg(width, height, label, parts, "knobs")


def parallel(
    view: KnobView,
    indices: Sequence[int],
    *,
    brushes: Sequence[tuple[str, float, float]] = (),
    selected: Collection[str] | None = None,
    width: int = 960,
    height: int = 380,
) -> Markup:
    """Parallel coordinates: the axes ``indices`` of ``view`` and the metric last; one
    line a trial, the chain to the best on top. ``brushes`` (``(key, lo, hi)``, key
    ``metric`` for the last axis) are drawn as bands and the lines outside ``selected``
    dimmed. Each axis carries its scale (``data-lo``/``data-hi`` or ``data-n``
    categories, ``data-y0``/``data-y1`` pixels) and each line its values (``data-v``), so
    knobs.js brushes without a round trip and writes the same ``brush=`` to the URL."""
    metric_name = view.project.metric_name
    axes = [view.axes[i] for i in indices]
    label = f"parallel coordinates: {', '.join(a.label for a in axes)} and {metric_name}"
    if not view.points or not axes:
        return _svg(
            width,
            120,
            label,
            ['<text class="label" x="480" y="60" text-anchor="middle">no trials</text>'],
            "knobs empty",
        )
    left, right, top, bottom = 40, 72, 34, 56
    n = len(axes) + 1
    xs = [left + (width - left - right) * i / (n - 1) for i in range(n)]
    scales: list[_Axis] = [_Axis(a, _scale_values(view.points, i), height - bottom, top) for a, i in zip(axes, indices)]
    scales.append(_Axis(None, [], height - bottom, top, domain=metric_domain(view.points)))
    parts: list[str] = []
    names = [a.label for a in axes] + [metric_name]
    keys = [a.key for a in axes] + ["metric"]
    brush_of = {key: (lo, hi) for key, lo, hi in brushes}
    hits: list[str] = []
    for x, scale, name, key in zip(xs, scales, names, keys):
        if scale.categories is not None:
            domain = f'data-kind="category" data-n="{len(scale.categories)}"'
        else:
            domain = f'data-kind="number" data-lo="{scale.lo!r}" data-hi="{scale.hi!r}"'
        hits.append(  # on top of the lines (appended last): a drag here brushes, not a link
            f'<g class="pc-axis" data-key="{escape(key)}" {domain} data-y0="{_n(scale.px0)}" data-y1="{_n(scale.px1)}">'
            f'<rect class="pc-hit" x="{_n(x - 14)}" y="{top}" width="28" height="{height - bottom - top}"/></g>'
        )
        if key in brush_of:
            lo, hi = brush_of[key]
            ya, yb = _brush_pixels(scale, lo, hi)
            parts.append(
                f'<rect class="pc-brush" x="{_n(x - 9)}" y="{_n(min(ya, yb))}" width="18" height="{_n(abs(yb - ya))}"/>'
            )
        parts.append(f'<line class="axis" x1="{_n(x)}" x2="{_n(x)}" y1="{height - bottom}" y2="{top}"/>')
        parts.append(f'<text class="label" x="{_n(x)}" y="{top - 14}" text-anchor="middle">{escape(name)}</text>')
        ticks = scale.ticks()
        if scale.categories is None and len(ticks) > 3:
            ticks = [ticks[0], ticks[len(ticks) // 2], ticks[-1]]
        for py, text in ticks[:12]:
            parts.append(f'<text class="tick" x="{_n(x + 5)}" y="{_n(py + 4)}">{escape(text)}</text>')
    slug = view.project.slug

    def value_at(i: int) -> Callable[[KnobPoint], Any]:
        return lambda p: p.values[i]

    value_of = [value_at(i) for i in indices]
    value_of.append(lambda p: p.metric)

    def path(p: KnobPoint) -> str:
        out, pen = [], "M"
        for x, scale, get in zip(xs, scales, value_of):
            value = get(p)
            if value is None:
                pen = "M"
                continue
            value, _ = scale.clamp(value) if scale.categories is None else (value, 0)
            jitter = _jitter(p.seq) if scale.categories is not None else 0.0
            out.append(f"{pen}{_n(x)},{_n(scale(value, jitter))}")
            pen = "L"
        return "".join(out)

    def data_v(p: KnobPoint) -> str:
        out = []
        for scale, get in zip(scales, value_of):
            value = get(p)
            if value is None:
                out.append("")
            elif scale.categories is not None:
                out.append(str(scale.categories.index(value)) if value in scale.categories else "")
            else:
                out.append(f"{float(value):.6g}")
        return ";".join(out)

    ordered = sorted(view.points, key=lambda p: (p.on_chain, STATUS_CLASSES.index(status_class(p.status))))
    for p in ordered:
        d = path(p)
        if not d:
            continue
        css = f"pc pc-{status_class(p.status)}" + (" pc-chain" if p.on_chain else "")
        if p.exp_id == view.best_exp:
            css += " pc-best"
        if brushes and selected is not None and p.exp_id not in selected:
            css += " pc-dim"
        # a line, not a link: the scatter above links every trial (one tab stop each, not
        # two), and 2,000 links with titles here would double the page; knobs.js opens a
        # line's trial on click and names it on hover
        parts.append(f'<path class="{css}" d="{d}" data-exp="{escape(p.exp_id)}" data-v="{data_v(p)}"/>')
    parts.extend(hits)
    base = escape(trial_url(slug, "")[:-1])
    return Markup(
        str(_svg(width, height, label, parts, "knobs parallel")).replace("<svg ", f'<svg data-trials="{base}" ', 1)
    )
