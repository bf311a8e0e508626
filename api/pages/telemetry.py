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

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from api.pages.charts import Band, HLine, Series
from api.pages.charts import line_chart as _line_chart

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
class Plot:
    key: str
    title: str
    svg: Markup
    caption: str = ""


def _chart(*args: Any, **kwargs: Any) -> Markup:
    """A telemetry plot: a line chart whose x axis (steps) the page's script can zoom."""
    return _line_chart(*args, zoomable=True, **kwargs)


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


def _ig_plot(view: TelemetryView) -> Plot | None:
    for base in _IG:
        turns = view.per_turn.get(base)
        if turns:
            series = [Series(f"turn {t}", thin(turns[t]), f"s{i % 8}") for i, t in enumerate(sorted(turns)[:8])]
            caption = "" if len(turns) <= 8 else f"the first 8 of {len(turns)} turns"
            return Plot(
                "ig",
                "Information gain per turn",
                _chart(series, label="information gain per turn", y_label="IG"),
                caption,
            )
    stats = _stats(view, _IG)
    if stats:
        mean, std = thin(stats["mean"]), stats["std"]
        bands = [Band("mean ± std", _plus(mean, std, -1), _plus(mean, std, 1), "s0")] if std else []
        svg = _chart([Series("IG mean", mean, "s0")], bands=bands, label="information gain", y_label="IG")
        return Plot("ig", "Information gain", svg, "per-turn IG was not recorded; the mean over turns")
    return None


def _clip_plots(view: TelemetryView, beta: float) -> list[Plot]:
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
        svg = _chart(
            [Series("mean", mean, "s0")],
            bands=bands,
            hlines=hlines,
            label="clip-scale distribution",
            y_label="clip scale",
        )
        plots.append(Plot("clip", "Clip-scale distribution and bounds", svg))
    low = view.get(*(f"{p}_frac_low" for p in _CLIP))
    high = view.get(*(f"{p}_frac_high" for p in _CLIP))
    if low or high:
        svg = _chart(
            [Series("at lower bound", thin(low), "s3"), Series("at upper bound", thin(high), "s1")],
            label="fraction of turns at a bound",
            y_label="fraction",
        )
        plots.append(Plot("clip-frac", "Turns at the clip-scale bounds", svg))
    return plots


def _adv_plot(view: TelemetryView) -> Plot | None:
    stats = _stats(view, _ADV)
    if not stats:
        return None
    mean = thin(stats["mean"])
    bands = []
    if stats["min"] and stats["max"]:
        bands.append(Band("min – max", thin(stats["min"]), thin(stats["max"]), "s2"))
    if stats["std"]:
        bands.append(Band("mean ± std", _plus(mean, stats["std"], -1), _plus(mean, stats["std"], 1), "s4"))
    svg = _chart([Series("mean", mean, "s4")], bands=bands, label="advantage statistics", y_label="advantage")
    return Plot("adv", "Advantage statistics", svg)


def _kl_plot(view: TelemetryView) -> Plot | None:
    found = [(name, view.scalars[name]) for name in _KL if view.scalars.get(name)]
    if not found:
        return None
    series = [Series(name, thin(points), f"s{(i + 5) % 8}") for i, (name, points) in enumerate(found)]
    return Plot("kl", "KL", _chart(series, label="KL divergence", y_label="KL"))


def _known(name: str) -> bool:
    if name in _KL:
        return True
    return any(name.startswith(f"{p}_") for p in (*_CLIP, *_ADV, *_IG))


def trial_plots(view: TelemetryView, *, beta: float | None = None) -> list[Plot]:
    """Every plot of one trial's telemetry, the known ones first."""
    if not view:
        return []
    beta = view.beta if view.beta is not None else (beta if beta is not None else DEFAULT_BETA)
    plots = [p for p in (_ig_plot(view),) if p]
    plots += _clip_plots(view, beta)
    plots += [p for p in (_adv_plot(view), _kl_plot(view)) if p]
    for name in sorted(n for n in view.scalars if not _known(n)):
        plots.append(Plot(f"x-{name}", name, _chart([Series(name, thin(view.scalars[name]), "s6")], label=name)))
    for base in sorted(b for b in view.per_turn if b not in _IG):
        turns = view.per_turn[base]
        series = [Series(f"turn {t}", thin(turns[t]), f"s{i % 8}") for i, t in enumerate(sorted(turns)[:8])]
        plots.append(Plot(f"t-{base}", f"{base} per turn", _chart(series, label=f"{base} per turn")))
    return plots


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


def compare_plots(views: Mapping[str, TelemetryView]) -> list[Plot]:
    """One plot per quantity with one line per trial (``views``: label -> telemetry): the
    known quantities first (:data:`COMPARED`), then every other not-per-turn name that two
    or more of the trials have, in the order the trials first name them."""
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
            plots.append(Plot(f"cmp-{index}", title, _chart(series, label=title)))
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
            Plot(
                f"cmp-{name}",
                f"{name} over steps",
                _chart(series, label=f"{name} of the compared trials", y_label=name, markers=sparse),
            )
        )
    return plots
