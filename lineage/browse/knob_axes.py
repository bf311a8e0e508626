"""Which knobs a parallel-coordinates view shows unasked: those that vary across the
trials and relate to the metric, best first (:func:`rank_axes`).

A knob that holds one value (a client's ``nonfinite_dropped`` of 0 everywhere, a
``run`` constant) carries no information and is never suggested, nor is a text column
whose values are nearly all different (a commit, a run name: an id, not a knob). The others are
ranked by how strongly the metric follows them among the trials that have both: the
absolute Spearman rank correlation for a numeric knob (a monotone effect, whatever its
scale), the correlation ratio (eta: the share of the metric's spread between the
knob's values) for a category knob; a knob with too few such trials counts as 0, and
ties go to the knob with more distinct values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

#: Trials with both the knob and the metric below which a relation is not measured.
MIN_PAIRS = 4
#: A category knob with more values than this (or than half its trials) is an id.
MAX_LEVELS = 30


def _ranks(values: Sequence[float]) -> list[float]:
    """Average ranks (ties share their mean rank)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The rank correlation of two equally long samples (0 when either is constant)."""
    if len(xs) < 2:
        return 0.0
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else 0.0


def eta(groups: Sequence[Any], ys: Sequence[float]) -> float:
    """The correlation ratio of ``ys`` by ``groups``: sqrt(between-group / total spread)."""
    if len(ys) < 2:
        return 0.0
    mean = sum(ys) / len(ys)
    total = sum((y - mean) ** 2 for y in ys)
    if total <= 0:
        return 0.0
    by: dict[Any, list[float]] = {}
    for g, y in zip(groups, ys):
        by.setdefault(g, []).append(y)
    between = sum(len(v) * (sum(v) / len(v) - mean) ** 2 for v in by.values())
    return math.sqrt(between / total)


def relation(kind: str, values: Sequence[Any], metrics: Sequence[float | None]) -> float | None:
    """How strongly the metric follows one knob (0..1), or None when the knob does not
    vary (fewer than two distinct values)."""
    present = [v for v in values if v is not None]
    distinct = len(set(present))
    if distinct < 2:
        return None
    if kind != "number" and (distinct > MAX_LEVELS or distinct > len(present) / 2):
        return None  # an id (a commit, a run name): every trial its own group, no knob
    pairs = [(v, m) for v, m in zip(values, metrics) if v is not None and m is not None]
    if len(pairs) < MIN_PAIRS:
        return 0.0
    xs, ys = [p[0] for p in pairs], [float(p[1]) for p in pairs]
    return abs(spearman(xs, ys)) if kind == "number" else eta(xs, ys)


def rank_axes(
    axes: Sequence[tuple[str, str]], columns: Sequence[Sequence[Any]], metrics: Sequence[float | None]
) -> list[tuple[str, float]]:
    """``(key, score)`` of the knobs that vary, best first. ``axes``: ``(key, kind)``;
    ``columns``: each axis' values over the trials (settled: numbers or category names);
    ``metrics``: the trials' metric."""
    scored = []
    for (key, kind), values in zip(axes, columns):
        score = relation(kind, values, metrics)
        if score is None:
            continue
        distinct = len({v for v in values if v is not None})
        scored.append((key, round(score, 6), distinct))
    scored.sort(key=lambda s: (-s[1], -s[2]))
    return [(key, score) for key, score, _ in scored]
