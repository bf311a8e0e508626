"""Cheaper reading for agents: what an agent-facing answer leaves out and how it writes numbers.

Patches (:func:`lineage.patches.without_patch`)
    A trial's git patch (``extra._git.patch``, up to 64 KB a trial) is never in a default
    answer; the diffstat and the rest of ``_git`` stay. It comes back only when asked for
    by name (``fields: ["extra._git.patch"]``, ``include_patch``).

Precision (:func:`metric_decimals`, :func:`round_metrics`)
    Metrics and their deltas are written at the precision of the project's own recorded
    metrics: the most decimals any of its newest :data:`PRECISION_SAMPLE` scored trials
    was recorded with (shortest ``repr``: ``0.9979`` has 4), but never more than gives
    :data:`MAX_SIGNIFICANT` significant digits of the smallest of them (a float-noise metric
    such as ``0.30000000000000004`` counts as 6 decimals) and never more than 12. So a
    ``val_bpb`` recorded as ``0.9979`` gets deltas such as ``-0.0047``, not
    ``-0.0047000000000000375``. The keys rounded are :data:`METRIC_KEYS`, anywhere in the
    answer except inside a trial's ``extra`` (the writer's own values, as sent).

Trials (:func:`agent_answer`)
    A trial in an agent's answer also drops A²TGPO's ``ig_clip_scale_*`` fields while they
    are null (they are for projects that log the adaptive clip scale).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from lineage.domain import CLIP_SCALE_COLUMNS
from lineage.patches import PATCH_FIELD, without_patch

__all__ = [
    "MAX_SIGNIFICANT",
    "METRIC_KEYS",
    "PATCH_FIELD",
    "PRECISION_SAMPLE",
    "agent_answer",
    "metric_decimals",
    "round_metrics",
    "without_patch",
]

#: scored trials whose metrics set a project's precision (the newest)
PRECISION_SAMPLE = 100
MAX_SIGNIFICANT = 6
_MAX_DECIMALS = 12
#: the keys whose numbers are a metric or a difference of metrics
METRIC_KEYS = frozenset(
    {
        "core_metric",
        "val_bpb",
        "delta_vs_best",
        "delta",
        "best_metric",
        "improvement_vs_baseline",
        "improvement_per_10_trials",
    }
)


def _decimals(value: float) -> int:
    """Decimals of ``value`` as written in its shortest form (``repr``)."""
    text = repr(abs(value))
    mantissa, _, exponent = text.partition("e")
    digits = mantissa.partition(".")[2].rstrip("0")
    return max(0, len(digits) - (int(exponent) if exponent else 0))


def metric_decimals(values: Iterable[float | None]) -> int | None:
    """The precision of a project's metrics (module doc); None when none is scored."""
    finite = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
    if not finite:
        return None
    seen = max(_decimals(v) for v in finite)
    nonzero = [abs(v) for v in finite if v != 0]
    cap = MAX_SIGNIFICANT - 1 - math.floor(math.log10(min(nonzero))) if nonzero else _MAX_DECIMALS
    return max(0, min(seen, cap, _MAX_DECIMALS))


def _round(value: float, decimals: int) -> float:
    rounded = round(value, decimals)
    return 0.0 if rounded == 0 else rounded  # no -0.0 for a delta inside the precision


def round_metrics(value: Any, decimals: int | None, *, key: str | None = None) -> Any:
    """``value`` (an answer as JSON) with the numbers under :data:`METRIC_KEYS` rounded to
    ``decimals`` (None: as they are); a trial's ``extra`` is left as it is."""
    if decimals is None:
        return value
    if isinstance(value, dict):
        return {k: v if k == "extra" else round_metrics(v, decimals, key=k) for k, v in value.items()}
    if isinstance(value, list):
        return [round_metrics(v, decimals, key=key) for v in value]
    if key in METRIC_KEYS and isinstance(value, float) and math.isfinite(value):
        return _round(value, decimals)
    return value


def _lean_trials(value: Any) -> Any:
    """Every trial in ``value`` without its patch and its null clip-scale fields."""
    if isinstance(value, list):
        return [_lean_trials(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "exp_id" in value and "extra" in value:
        value = without_patch(value)
    return {
        k: v if k == "extra" else _lean_trials(v)
        for k, v in value.items()
        if not (k in CLIP_SCALE_COLUMNS and v is None)
    }


def agent_answer(value: Any, decimals: int | None) -> Any:
    """An answer as an agent gets it (module doc): trials without their patch and their
    null clip-scale fields, metrics at the project's precision."""
    return round_metrics(_lean_trials(value), decimals)
