"""How a chart chooses its value axis when a few values are far from the rest: the robust
range of a per-trial metric, the outlier cap of curves, and log ticks.

The rules live here once, for the server-drawn SVG of every page; ``static/grid.js`` and
``static/explore.js`` apply the same numbers in the browser (:data:`FENCE`,
:data:`CAP_GAIN`), so a chart says the same thing with and without JavaScript.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: Tukey's "far out" fence: a value more than this many interquartile ranges beyond the
#: quartiles is an outlier.
FENCE = 3.0
#: The cap applies only when the outliers stretch the axis at least this many times.
CAP_GAIN = 3.0
#: The dashboard's robust range spans at least these percentiles of the scored trials.
ROBUST_PERCENTILES = (2.0, 98.0)


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of sorted ``ordered``, linearly interpolated."""
    if not ordered:
        raise ValueError("no values")
    at = (len(ordered) - 1) * q / 100
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def _weighted_quantile(pairs: Sequence[tuple[float, float]], q: float) -> float:
    """``pairs`` sorted ``(value, weight)``: the value where the weight passes ``q`` (0-1)."""
    total = sum(w for _, w in pairs)
    running = 0.0
    for value, weight in pairs:
        running += weight
        if running >= q * total - 1e-12:
            return value
    return pairs[-1][0]


@dataclass(frozen=True, slots=True)
class Cap:
    """The value range a capped chart shows, and what lies outside it."""

    lo: float
    hi: float
    above: int
    below: int

    def note(self, fmt: str = "{:.3g}", what: str = "points") -> str:
        """What the cap hid, in words: ``3 points above 7.06 hidden``."""
        parts = []
        if self.above:
            parts.append(f"{self.above:,} {_one(what, self.above)} above {fmt.format(self.hi)}")
        if self.below:
            parts.append(f"{self.below:,} {_one(what, self.below)} below {fmt.format(self.lo)}")
        return " and ".join(parts) + " hidden" if parts else ""


def _one(what: str, count: int) -> str:
    return what[:-1] if count == 1 and what.endswith("s") else what


def outlier_cap(curves: Sequence[Sequence[float]]) -> Cap | None:
    """The cap of ``curves`` (each a list of values; every curve weighs the same, so one
    long diverged run cannot move the quartiles alone): the values within :data:`FENCE`
    interquartile ranges of the pooled quartiles, when the values beyond stretch the axis
    at least :data:`CAP_GAIN` times; None when nothing needs hiding."""
    pairs: list[tuple[float, float]] = []
    for curve in curves:
        finite = [v for v in curve if math.isfinite(v)]
        pairs.extend((v, 1.0 / len(finite)) for v in finite)
    if len(pairs) < 4:
        return None
    pairs.sort()
    q1, q3 = _weighted_quantile(pairs, 0.25), _weighted_quantile(pairs, 0.75)
    iqr = q3 - q1
    if iqr <= 0:
        iqr = abs(q3) * 0.05 or 1.0
    fence_lo, fence_hi = q1 - FENCE * iqr, q3 + FENCE * iqr
    inside = [v for v, _ in pairs if fence_lo <= v <= fence_hi]
    lo_all, hi_all = pairs[0][0], pairs[-1][0]
    if not inside or len(inside) == len(pairs):
        return None
    lo, hi = min(inside), max(inside)
    if (hi_all - lo_all) < CAP_GAIN * ((hi - lo) or abs(hi) * 0.05 or 1.0):
        return None
    return Cap(lo, hi, sum(1 for v, _ in pairs if v > hi), sum(1 for v, _ in pairs if v < lo))


def robust_range(values: Sequence[float]) -> tuple[float, float] | None:
    """The 2nd–98th percentile of ``values`` (:data:`ROBUST_PERCENTILES`); None when empty."""
    finite = sorted(v for v in values if math.isfinite(v))
    if not finite:
        return None
    return percentile(finite, ROBUST_PERCENTILES[0]), percentile(finite, ROBUST_PERCENTILES[1])


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values of a log10 axis spanning ``[lo, hi]`` (log10 values): 1-2-5 × 10^k, only
    the powers of ten over more than three decades; round numbers inside one decade."""
    out = []
    for k in range(math.floor(lo), math.ceil(hi) + 1):
        for m in (1, 2, 5) if hi - lo <= 3 else (1,):
            at = k + math.log10(m)
            if lo - 1e-9 <= at <= hi + 1e-9:
                out.append(float(f"{m * 10.0**k:.6g}"))
    return out
