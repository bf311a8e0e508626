"""A trial's telemetry as the pages plot it: series by name, per-turn series by turn.

Telemetry points are what a training job sends during a trial (see ``trainer_hooks``):
a step, a name and a value, and for per-turn quantities a turn index. This module turns
them into the plots of the trial and compare pages:

* information gain per turn (one line per turn; else ``ig_mean`` with ``± ig_std``),
* the clip-scale distribution (min-max and mean ± std bands, the mean, the bounds
  ``1 ± beta``) and the fraction of turns at each bound,
* advantage statistics (mean with ± std and min-max bands),
* KL,
* any other series, one small plot each.

Reading is ``lineage.telemetry``'s (the API's).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from api.pages.lines import Band, HLine, Series, VLine
from api.pages.lines import line_chart as _line_chart
from api.pages.web import with_query
from lineage.errors import InvalidInput

#: Default amplitude of the adaptive clip scale (A²TGPO's beta).
DEFAULT_BETA = 0.3
#: At most this many points per plotted series (evenly thinned beyond).
MAX_POINTS = 600

_TURN = re.compile(r"^(?P<base>.+?)(?:[_./]turn[_]?|\[)(?P<turn>\d+)\]?$")
_PREFIXES = ("telemetry/", "train/", "actor/")


@dataclass
class TelemetryView:
    """One trial's telemetry: ``scalars[name] = [(step, value)]`` sorted by step and
    ``per_turn[base][turn] = [(step, value)]``."""

    scalars: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    per_turn: dict[str, dict[int, list[tuple[float, float]]]] = field(default_factory=dict)
    beta: float | None = None

    def __bool__(self) -> bool:
        return bool(self.scalars or self.per_turn)

    def get(self, *names: str) -> list[tuple[float, float]]:
        for name in names:
            if self.scalars.get(name):
                return self.scalars[name]
        return []


@dataclass(frozen=True, slots=True)
class Options:
    """How the page draws every plot: ``log`` (a log value axis), ``cap`` (the outlier
    cap, on unless ``?cap=0``) and ``alerts`` (marks at the steps of the trial's alerts)."""

    log: bool = False
    cap: bool = True
    alerts: tuple[VLine, ...] = ()


@dataclass(frozen=True, slots=True)
class Plot:
    """One figure of the grid: its server-drawn SVG and, for ``static/grid.js``, the same
    lines as data (``data``: series, bands and bounds)."""

    key: str
    title: str
    svg: Markup
    caption: str = ""
    data: dict[str, Any] = field(default_factory=dict)


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def _xy(points: Sequence[tuple[float, float]]) -> list[list[float]]:
    return [[_round(x) for x, _ in points], [_round(y) for _, y in points]]


def _plot(
    key: str,
    title: str,
    series: Sequence[Series],
    opts: Options,
    *,
    label: str,
    caption: str = "",
    bands: Sequence[Band] = (),
    hlines: Sequence[HLine] = (),
    y_label: str = "",
    markers: bool = False,
) -> Plot:
    """A telemetry plot: a line chart whose x axis (steps) the page's script can zoom,
    drawn with the page's options, and its data for the grid's script."""
    svg = _line_chart(
        series,
        bands=bands,
        hlines=hlines,
        vlines=opts.alerts,
        label=label,
        y_label=y_label,
        markers=markers,
        zoomable=True,
        log_y=opts.log,
        cap=opts.cap,
    )
    data = {
        "key": key,
        "title": title,
        "label": label,
        "series": [{"name": s.name, "css": s.css, "xy": _xy(s.points)} for s in series if s.points],
        "bands": [{"name": b.name, "css": b.css, "lo": _xy(b.lower), "hi": _xy(b.upper)} for b in bands if b.lower],
        "hlines": [{"name": h.name, "y": h.y} for h in hlines],
    }
    return Plot(key, title, svg, caption, data)


def split_name(name: str) -> tuple[str, int | None]:
    """``ig_turn_3`` / ``ig/turn3`` / ``ig[3]`` -> (``ig``, 3); other names -> (name, None)."""
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    match = _TURN.match(name)
    if match:
        return match.group("base"), int(match.group("turn"))
    return name, None


def build_view(points: Iterable[Any]) -> TelemetryView:
    """Group raw points (objects or mappings with ``step``, ``name``/``key``, ``value``
    and optionally ``turn``) into a :class:`TelemetryView`."""
    view = TelemetryView()
    for point in points:
        get = point.get if isinstance(point, Mapping) else (lambda k, d=None, p=point: getattr(p, k, d))
        name = get("name") or get("key") or get("metric")
        step, value = get("step"), get("value")
        if name is None or step is None or value is None:
            continue
        try:
            step, value = float(step), float(value)
        except (TypeError, ValueError):
            continue
        if not (math.isfinite(step) and math.isfinite(value)):
            continue
        turn = get("turn")
        base = str(name)
        if turn is None:
            base, turn = split_name(base)
        else:
            base = split_name(base)[0]
        if base in ("clip_scale_beta", "beta", "ig_clip_scale_beta"):
            view.beta = value
            continue
        if turn is None:
            view.scalars.setdefault(base, []).append((step, value))
        else:
            view.per_turn.setdefault(base, {}).setdefault(int(turn), []).append((step, value))
    for series in view.scalars.values():
        series.sort()
    for turns in view.per_turn.values():
        for series in turns.values():
            series.sort()
    return view


def load(ledger: Any, project_slug: str, exp_id: str) -> TelemetryView:
    """The telemetry of one trial, read by ``Ledger.telemetry_points`` (the API's
    reader: long series come min/max-bucketed); empty when none was recorded."""
    return build_view(ledger.telemetry.telemetry_points(project_slug, exp_id))


def thin(points: Sequence[tuple[float, float]], limit: int = MAX_POINTS) -> list[tuple[float, float]]:
    """At most ``limit`` points, evenly spaced, keeping the first and the last."""
    if len(points) <= limit:
        return list(points)
    stride = (len(points) - 1) / (limit - 1)
    return [points[round(i * stride)] for i in range(limit)]


def _plus(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]], sign: float) -> list[tuple[float, float]]:
    other = dict(b)
    return [(x, y + sign * other[x]) for x, y in a if x in other]


def _stats(view: TelemetryView, prefixes: Sequence[str]) -> dict[str, list[tuple[float, float]]]:
    for prefix in prefixes:
        found = {s: view.get(f"{prefix}_{s}") for s in ("mean", "std", "min", "max")}
        if found["mean"] or found["min"]:
            return found
    return {}


_CLIP = ("clip_scale", "ig_clip_scale")
_ADV = ("adv", "advantage", "advantages")
_IG = ("ig", "info_gain", "information_gain")
_KL = ("kl", "kl_mean", "approx_kl", "kl_to_ref", "ref_kl", "kl_div")


def _ig_plot(view: TelemetryView, opts: Options) -> Plot | None:
    for base in _IG:
        turns = view.per_turn.get(base)
        if turns:
            series = [Series(f"turn {t}", thin(turns[t]), f"s{i % 8}") for i, t in enumerate(sorted(turns)[:8])]
            caption = "" if len(turns) <= 8 else f"the first 8 of {len(turns)} turns"
            return _plot(
                "ig",
                "Information gain per turn",
                series,
                opts,
                label="information gain per turn",
                y_label="IG",
                caption=caption,
            )
    stats = _stats(view, _IG)
    if stats:
        mean, std = thin(stats["mean"]), stats["std"]
        bands = [Band("mean ± std", _plus(mean, std, -1), _plus(mean, std, 1), "s0")] if std else []
        return _plot(
            "ig",
            "Information gain",
            [Series("IG mean", mean, "s0")],
            opts,
            bands=bands,
            label="information gain",
            y_label="IG",
            caption="per-turn IG was not recorded; the mean over turns",
        )
    return None


def _clip_plots(view: TelemetryView, beta: float, opts: Options) -> list[Plot]:
    stats = _stats(view, _CLIP)
    plots: list[Plot] = []
    if stats:
        mean = thin(stats["mean"])
        bands = []
        if stats["min"] and stats["max"]:
            bands.append(Band("min – max", thin(stats["min"]), thin(stats["max"]), "s2"))
        if stats["std"]:
            bands.append(Band("mean ± std", _plus(mean, stats["std"], -1), _plus(mean, stats["std"], 1), "s0"))
        hlines = [HLine(1 - beta, f"bound 1−β = {1 - beta:g}"), HLine(1 + beta, f"bound 1+β = {1 + beta:g}")]
        plots.append(
            _plot(
                "clip",
                "Clip-scale distribution and bounds",
                [Series("mean", mean, "s0")],
                opts,
                bands=bands,
                hlines=hlines,
                label="clip-scale distribution",
                y_label="clip scale",
            )
        )
    low = view.get(*(f"{p}_frac_low" for p in _CLIP))
    high = view.get(*(f"{p}_frac_high" for p in _CLIP))
    if low or high:
        series = [Series("at lower bound", thin(low), "s3"), Series("at upper bound", thin(high), "s1")]
        plots.append(
            _plot(
                "clip-frac",
                "Turns at the clip-scale bounds",
                series,
                opts,
                label="fraction of turns at a bound",
                y_label="fraction",
            )
        )
    return plots


def _adv_plot(view: TelemetryView, opts: Options) -> Plot | None:
    stats = _stats(view, _ADV)
    if not stats:
        return None
    mean = thin(stats["mean"])
    bands = []
    if stats["min"] and stats["max"]:
        bands.append(Band("min – max", thin(stats["min"]), thin(stats["max"]), "s2"))
    if stats["std"]:
        bands.append(Band("mean ± std", _plus(mean, stats["std"], -1), _plus(mean, stats["std"], 1), "s4"))
    return _plot(
        "adv",
        "Advantage statistics",
        [Series("mean", mean, "s4")],
        opts,
        bands=bands,
        label="advantage statistics",
        y_label="advantage",
    )


def _kl_plot(view: TelemetryView, opts: Options) -> Plot | None:
    found = [(name, view.scalars[name]) for name in _KL if view.scalars.get(name)]
    if not found:
        return None
    series = [Series(name, thin(points), f"s{(i + 5) % 8}") for i, (name, points) in enumerate(found)]
    return _plot("kl", "KL", series, opts, label="KL divergence", y_label="KL")


def _known(name: str) -> bool:
    if name in _KL:
        return True
    return any(name.startswith(f"{p}_") for p in (*_CLIP, *_ADV, *_IG))


def trial_plots(view: TelemetryView, *, beta: float | None = None, opts: Options | None = None) -> list[Plot]:
    """Every plot of one trial's telemetry, the known ones first: the grid of small
    multiples the trial page shows (``opts``: log, cap and alert marks)."""
    if not view:
        return []
    opts = opts or Options()
    beta = view.beta if view.beta is not None else (beta if beta is not None else DEFAULT_BETA)
    plots = [p for p in (_ig_plot(view, opts),) if p]
    plots += _clip_plots(view, beta, opts)
    plots += [p for p in (_adv_plot(view, opts), _kl_plot(view, opts)) if p]
    for name in sorted(n for n in view.scalars if not _known(n)):
        points = view.scalars[name]
        plots.append(
            _plot(
                f"x-{name}",
                name,
                [Series(name, thin(points), "s6")],
                opts,
                label=name,
                caption=_points_caption(len(points)),
            )
        )
    for base in sorted(b for b in view.per_turn if b not in _IG):
        turns = view.per_turn[base]
        series = [Series(f"turn {t}", thin(turns[t]), f"s{i % 8}") for i, t in enumerate(sorted(turns)[:8])]
        plots.append(_plot(f"t-{base}", f"{base} per turn", series, opts, label=f"{base} per turn"))
    return plots


def _points_caption(count: int) -> str:
    """How many points a plotted series holds, and whether all of them are drawn."""
    if count <= MAX_POINTS:
        return f"{count:,} point{'' if count == 1 else 's'}"
    return f"{MAX_POINTS:,} of {count:,} points, evenly spaced"


#: What the compare page overlays, in order: (title, candidate names).
COMPARED = (
    ("Information gain (mean over turns)", tuple(f"{p}_mean" for p in _IG)),
    ("Clip-scale mean", tuple(f"{p}_mean" for p in _CLIP)),
    ("Clip-scale std", tuple(f"{p}_std" for p in _CLIP)),
    ("Advantage mean", tuple(f"{p}_mean" for p in _ADV)),
    ("Advantage std", tuple(f"{p}_std" for p in _ADV)),
    ("KL", _KL),
)


def _ig_mean(view: TelemetryView) -> list[tuple[float, float]]:
    """IG averaged over turns per step, when only per-turn IG was recorded."""
    for base in _IG:
        turns = view.per_turn.get(base)
        if turns:
            sums: dict[float, list[float]] = {}
            for points in turns.values():
                for step, value in points:
                    sums.setdefault(step, []).append(value)
            return sorted((step, sum(v) / len(v)) for step, v in sums.items())
    return []


def compare_plots(views: Mapping[str, TelemetryView], opts: Options | None = None) -> list[Plot]:
    """One plot per quantity with one line per trial (``views``: label -> telemetry): the
    known quantities first (:data:`COMPARED`), then every other not-per-turn name that two
    or more of the trials have, in the order the trials first name them."""
    opts = opts or Options()
    plots: list[Plot] = []
    used: set[str] = set()
    for index, (title, names) in enumerate(COMPARED):
        used.update(names)
        series = []
        for i, (label, view) in enumerate(views.items()):
            points = view.get(*names)
            if not points and index == 0:
                points = _ig_mean(view)
            if points:
                series.append(Series(label, thin(points), f"s{i % 8}"))
        if series:
            plots.append(_plot(f"cmp-{index}", title, series, opts, label=title))
    others: dict[str, int] = {}
    for view in views.values():
        for name in view.scalars:
            if name not in used:
                others[name] = others.get(name, 0) + 1
    for name, count in others.items():
        if count < 2:
            continue
        series = [
            Series(label, thin(view.scalars[name]), f"s{i % 8}")
            for i, (label, view) in enumerate(views.items())
            if view.scalars.get(name)
        ]
        sparse = max(len(s.points) for s in series) <= 60
        plots.append(
            _plot(
                f"cmp-{name}",
                f"{name} over steps",
                series,
                opts,
                label=f"{name} of the compared trials",
                y_label=name,
                markers=sparse,
            )
        )
    return plots


def page_options(query: Mapping[str, str], alerts: Iterable[Any] = (), *, name_trial: bool = False) -> Options:
    """The grid's options from a page's query (``?log=1``, ``?cap=0``; anything else is a
    400 naming the parameter) and the alerts (``step``, ``level``, ``title``) to mark."""
    for name, allowed in (("log", ("0", "1")), ("cap", ("0", "1"))):
        value = query.get(name)
        if value is not None and value not in allowed:
            raise InvalidInput(name, f"must be 1 or 0, got {value!r}")
    marks = tuple(
        VLine(
            float(a.step),
            f"{f'exp_{a.exp_id} ' if name_trial else ''}{a.level} at step {a.step}: {a.title}",
            f"alert-{a.level}",
        )
        for a in alerts
        if getattr(a, "step", None) is not None
    )
    return Options(log=query.get("log") == "1", cap=query.get("cap") != "0", alerts=marks)


def grid_json(plots: Sequence[Plot], opts: Options) -> Markup:
    """The grid's data for ``static/grid.js``, safe inside ``<script type="application/json">``."""
    data = {
        "plots": [p.data for p in plots],
        "alerts": [{"x": v.x, "name": v.name, "css": v.css} for v in opts.alerts],
        "log": opts.log,
        "cap": opts.cap,
    }
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def option_urls(path: str, query: Mapping[str, str], opts: Options, anchor: str = "#telemetry") -> dict[str, str]:
    """The page's URL with each option switched (``log``, ``cap``): the links that work
    without the script."""
    base = {k: v for k, v in query.items() if k not in ("log", "cap")}
    return {
        "log": with_query(path, {**base, "log": None if opts.log else "1", "cap": None if opts.cap else "0"}) + anchor,
        "cap": with_query(path, {**base, "log": "1" if opts.log else None, "cap": "0" if opts.cap else None}) + anchor,
    }
