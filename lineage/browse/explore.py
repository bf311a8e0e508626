"""The metric explorer's query: telemetry curves of many trials, grouped and aggregated.

One request names a selection of trials, one or more metrics, a group-by field, an
aggregation and an x axis; the answer is one panel per metric, small enough to send
whole (a few hundred kB for 50 trials of 100,000 points each).

Selection (:class:`ExploreQuery`)
    ``select``: ``filter`` (the trials table's filters alone), ``chain`` (the chain from
    the root to ``to``, default the current best), ``subtree`` (trial ``root`` and every
    descendant by parent pointers) or ``telemetry`` (the trials that have telemetry). The trials-table filters (status, specialist,
    domain, parent, metric range, text) narrow every mode. At most ``limit`` trials are
    shown: the most recent (by seq) of those that match; ``matched`` says how many did.

Group-by
    Any trial column (``specialist``, ``status``, ``domain``, ...) or ``extra.KEY``; a
    missing value is the group ``(none)``. Groups are ordered by their first trial.

Metrics and x axis
    A metric is a telemetry name, or ``core_metric`` (one value per trial, plotted at the
    trial's seq). ``x=step`` and ``x=wall`` read the series ``(name, turn)``, ``turn``
    None meaning the not-per-turn series; ``wall`` is seconds since the trial's first
    point of that series (the sender's ``wall_time``). ``x=turn`` reads the per-turn
    series (turn >= 0): a trial's value at a turn is its mean over the steps read.

Downsampling (the rule)
    The steps ``[lo, hi]`` of the selection's series (``step_min``/``step_max`` narrow
    them) are cut into ``B`` buckets of ``w = ceil((hi - lo + 1) / B)`` steps, shared by
    every trial, ``B = min(buckets, CELL_BUDGET // trials)`` (at least 20). A trial's
    value in a bucket is

    * **exact** -- the mean of its points in the bucket -- when the selection's series
      hold at most ``exact_budget`` points together (counted with a capped index scan),
      the aggregation being one ``GROUP BY`` in the database;
    * **sampled** -- its first point (lowest step, then insertion order) in the bucket --
      otherwise, each found by one index seek, so the cost grows with ``trials x B`` and
      not with the points stored. A long series costs what a short one does; like
      MLflow's and Aim's step sampling, a spike between samples is not drawn.

    ``downsampling.method`` says which rule a panel used. ``x=wall`` then re-buckets each
    trial's cells by wall time (a cell sits at the mean wall time of its points, or its
    sampled point's; ``B`` equal buckets from 0 to the latest cell; mean of the cells in
    a bucket); ``x=turn`` averages a trial's cells per turn (sampled: at
    ``TURN_SAMPLES`` steps).

Aggregation (per group, per bucket, over the trials that have a value there; each trial
weighs the same)
    ``band=minmax``: mean, and the min and max of the trials' values; ``band=std``: mean
    and mean ± the population std; ``band=none``: every curve, with no band. Every
    trial's own curve is in the answer whatever the band.

Values are rounded to 1e-7 of the panel's largest magnitude (plots need no more, and
it halves the JSON). Aggregation is SQL and vectorised numpy (imported here lazily, so
the server starts without it); Python loops run over trials and groups, never points.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lineage.chain import chain_of
from lineage.domain import CLIP_SCALE_COLUMNS, FIELDKIT_COLUMNS, FailureLabel, Trial
from lineage.errors import InvalidInput

if TYPE_CHECKING:  # pragma: no cover
    from lineage.store import Store

__all__ = [
    "BANDS",
    "CELL_BUDGET",
    "EXACT_BUDGET",
    "GROUP_FIELDS",
    "SELECTIONS",
    "X_AXES",
    "ExploreQuery",
    "group_key",
]

SELECTIONS = ("filter", "chain", "subtree", "telemetry")
BANDS = ("minmax", "std", "none")
X_AXES = ("step", "turn", "wall")
CORE_METRIC = "core_metric"
#: Trial fields a view may group by (besides ``extra.KEY``).
GROUP_FIELDS: tuple[str, ...] = tuple(
    name for name in (*FIELDKIT_COLUMNS, *CLIP_SCALE_COLUMNS, "seq") if name not in ("hypothesis", "notes")
)
#: Points read exactly (one GROUP BY) at most, over the selection's series together.
EXACT_BUDGET = 250_000
#: trials x buckets of one panel at most (sampled: one index seek each).
CELL_BUDGET = 24_000
MIN_BUCKETS = 20
MAX_BUCKETS = 2_000
DEFAULT_BUCKETS = 400
MAX_TRIALS = 200
DEFAULT_TRIALS = 50
MAX_METRICS = 6
#: Steps a per-turn series is sampled at (x=turn, sampled rule).
TURN_SAMPLES = 16
NONE_GROUP = "(none)"


@dataclass(frozen=True)
class ExploreQuery:
    """What to show; every field has the meaning the module doc gives it."""

    metrics: tuple[str, ...]
    select: str = "filter"
    to: str | None = None
    root: str | None = None
    filters: Mapping[str, Any] = field(default_factory=dict)
    group_by: str | None = None
    band: str = "minmax"
    x: str = "step"
    turn: int | None = None
    step_min: int | None = None
    step_max: int | None = None
    buckets: int = DEFAULT_BUCKETS
    limit: int = DEFAULT_TRIALS
    exact_budget: int = EXACT_BUDGET

    def check(self) -> ExploreQuery:
        """Refuse a bad query naming the field."""
        if not self.metrics:
            raise InvalidInput("metric", "name at least one metric (a telemetry name or core_metric)")
        if len(self.metrics) > MAX_METRICS:
            raise InvalidInput("metric", f"at most {MAX_METRICS} metrics at once, got {len(self.metrics)}")
        for name, value, known in (
            ("select", self.select, SELECTIONS),
            ("band", self.band, BANDS),
            ("x", self.x, X_AXES),
        ):
            if value not in known:
                raise InvalidInput(name, f"must be one of {', '.join(known)}, got {value!r}")
        if self.select == "subtree" and not self.root:
            raise InvalidInput("root", "select=subtree needs the trial whose subtree to show")
        if self.group_by is not None and self.group_by not in GROUP_FIELDS:
            if not (self.group_by.startswith("extra.") and len(self.group_by) > 6):
                raise InvalidInput(
                    "group", f"must be a trial field ({', '.join(GROUP_FIELDS)}) or extra.KEY, got {self.group_by!r}"
                )
        if not MIN_BUCKETS <= self.buckets <= MAX_BUCKETS:
            raise InvalidInput("buckets", f"must be from {MIN_BUCKETS} to {MAX_BUCKETS}, got {self.buckets}")
        if not 1 <= self.limit <= MAX_TRIALS:
            raise InvalidInput("limit", f"must be from 1 to {MAX_TRIALS}, got {self.limit}")
        if self.step_min is not None and self.step_max is not None and self.step_min > self.step_max:
            raise InvalidInput("step_min", f"is larger than step_max ({self.step_min} > {self.step_max})")
        if self.turn is not None and self.turn < 0:
            raise InvalidInput("turn", f"must be 0 or more (omit it for the not-per-turn series), got {self.turn}")
        return self


def group_key(trial: Trial, group_by: str | None) -> str:
    """The group a trial falls in: the field's value as text, ``(none)`` when missing."""
    if not group_by:
        return "all"
    if group_by.startswith("extra."):
        value = trial.extra.get(group_by[6:])
    else:
        value = getattr(trial, group_by)
        if isinstance(value, FailureLabel):
            value = value.value
    if value is None or value == "":
        return NONE_GROUP
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def group_label(group_by: str | None, key: str) -> str:
    """A group as a legend names it: ``wd = 0.01`` (the field, then the value); a status
    group is its status word, the ungrouped view ``all``."""
    if not group_by or group_by == "status":
        return key
    name = group_by[6:] if group_by.startswith("extra.") else group_by
    return f"{name} = {key}"


# -- the query ---------------------------------------------------------------------------------


# -- panels ------------------------------------------------------------------------------------


def _core_panel(trials: Sequence[Trial], keys: Sequence[str], groups: Sequence[str]) -> dict[str, Any]:
    """``core_metric``: one point per trial at its seq; per group mean, min, max, std, n."""
    import numpy as np

    values = np.array([np.nan if t.core_metric is None else t.core_metric for t in trials], dtype=float)
    key_index = np.array([groups.index(k) for k in keys], dtype=int)
    stats = []
    for index, _ in enumerate(groups):
        mine = values[key_index == index]
        mine = mine[np.isfinite(mine)]
        stats.append(
            None
            if not mine.size
            else {
                "n": int(mine.size),
                "mean": float(mine.mean()),
                "min": float(mine.min()),
                "max": float(mine.max()),
                "std": float(mine.std()),
            }
        )
    return {
        "metric": CORE_METRIC,
        "kind": "trial",
        "x": [t.seq for t in trials],
        "y": _json_values(values, values),
        "group_stats": stats,
    }


def _series_panel(
    store: Any,
    conn: Any,
    ids: Sequence[int],
    trials: Sequence[Trial],
    keys: Sequence[str],
    groups: Sequence[str],
    metric: str,
    query: ExploreQuery,
) -> dict[str, Any]:
    """One telemetry metric: the trials' cells on a shared grid and each group's band."""
    import numpy as np

    per_turn = query.x == "turn"
    series = store.explore.explore_series(
        conn, ids, metric, turn=query.turn, per_turn=per_turn, step_min=query.step_min, step_max=query.step_max
    )
    empty = {
        "metric": metric,
        "kind": "series",
        "grid": [],
        "trials": [],
        "groups": [],
        "downsampling": {"method": "none", "buckets": 0, "width": 0, "points_read": 0},
    }
    if not series:
        return empty
    lo = min(s[2] for s in series)
    hi = max(s[3] for s in series)
    if query.step_min is not None:
        lo = max(lo, query.step_min)
    if query.step_max is not None:
        hi = min(hi, query.step_max)
    n_trials = len({s[0] for s in series})
    if per_turn:
        buckets = 1
    else:
        buckets = max(MIN_BUCKETS, min(query.buckets, CELL_BUDGET // max(1, n_trials)))
    width = max(1, -(-(hi - lo + 1) // buckets))
    buckets = max(1, -(-(hi - lo + 1) // width))
    exact = store.explore.telemetry_points_at_most(
        conn, [(s[0], s[1]) for s in series], metric, lo, hi, query.exact_budget
    )
    if exact:
        found = store.explore.explore_cells_exact(
            conn, ids, metric, turn=query.turn, per_turn=per_turn, lo=lo, hi=hi, width=width
        )
        cells = [c[:5] for c in found]
        points_read = sum(c[5] for c in found)
        method = "exact"
    else:
        samples = TURN_SAMPLES if per_turn else buckets
        sample_width = max(1, -(-(hi - lo + 1) // samples))
        cells = store.explore.explore_cells_sampled(
            conn,
            [(s[0], s[1]) for s in series],
            metric,
            lo=lo,
            width=sample_width,
            count=-(-(hi - lo + 1) // sample_width),
        )
        if per_turn:
            cells = [(t, turn, 0, v, w) for t, turn, _, v, w in cells]
        points_read = len(cells)
        method = "sampled"
    row_of = {row_id: i for i, row_id in enumerate(ids)}
    if cells:
        arr = np.array([(row_of[c[0]], c[1], c[2], c[3], np.nan if c[4] is None else c[4]) for c in cells], dtype=float)
    else:
        arr = np.zeros((0, 5))
    trial_at, turn_at, bucket_at, value_at, wall_at = arr.T
    trial_at = trial_at.astype(int)
    if per_turn:
        turns = np.unique(turn_at).astype(int)
        col = np.searchsorted(turns, turn_at)
        grid = turns.tolist()
    elif query.x == "wall":
        first = {s[0]: s[4] for s in series}
        start = np.array([np.nan if first.get(row_id) is None else first[row_id] for row_id in ids], dtype=float)
        offset = wall_at - start[trial_at] if len(ids) else wall_at
        keep = np.isfinite(offset)
        trial_at, value_at, offset = trial_at[keep], value_at[keep], np.maximum(offset[keep], 0.0)
        span = float(offset.max()) if offset.size else 0.0
        wall_width = span / buckets if span > 0 else 1.0
        col = np.minimum((offset / wall_width).astype(int), buckets - 1)
        grid = (np.arange(buckets) * wall_width).tolist()
    else:
        col = bucket_at.astype(int)
        grid = (lo + np.arange(buckets) * width).tolist()
    n_cols = len(grid)
    sums = np.zeros((len(ids), n_cols))
    counts = np.zeros((len(ids), n_cols))
    np.add.at(sums, (trial_at, col), value_at)
    np.add.at(counts, (trial_at, col), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        matrix = sums / counts  # [trials, columns], NaN where a trial has no value
    key_index = np.array([groups.index(k) for k in keys], dtype=int)
    group_rows = []
    for index, name in enumerate(groups):
        mine = matrix[key_index == index]
        stats = _group_stats(mine, query.band)
        group_rows.append({"key": name, "index": index, **stats})
    reference = np.concatenate([matrix.ravel()] + [np.asarray(g["_all"]).ravel() for g in group_rows])
    out_groups = []
    for g in group_rows:
        out = {"key": g["key"], "index": g["index"], "n": g["n"]}
        for part in ("mean", "lo", "hi"):
            out[part] = _json_values(g[part], reference) if g[part] is not None else None
        out_groups.append(out)
    shown = [i for i in range(len(ids)) if counts[i].any()]
    return {
        "metric": metric,
        "kind": "series",
        "grid": _json_values(np.asarray(grid, dtype=float), np.asarray(grid, dtype=float))
        if query.x == "wall"
        else grid,
        "trials": [
            {"exp_id": trials[i].exp_id, "group": int(key_index[i]), "y": _json_values(matrix[i], reference)}
            for i in shown
        ],
        "groups": out_groups,
        "downsampling": {
            "method": method,
            "buckets": n_cols,
            "width": width if query.x == "step" else None,
            "points_read": int(points_read),
        },
    }


def _group_stats(mine: Any, band: str) -> dict[str, Any]:
    """``mine: [trials of the group, columns]`` (NaN: no value) -> n, mean, lo, hi per column."""
    import numpy as np

    present = np.isfinite(mine)
    n = present.sum(axis=0)
    lo: Any
    hi: Any
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(present, mine, 0.0).sum(axis=0)
        mean = np.where(n > 0, total / np.maximum(n, 1), np.nan)
        if band == "minmax":
            lo = np.where(n > 0, np.where(present, mine, np.inf).min(axis=0), np.nan)
            hi = np.where(n > 0, np.where(present, mine, -np.inf).max(axis=0), np.nan)
        elif band == "std":
            dev = np.where(present, mine - mean, 0.0)
            std = np.sqrt((dev * dev).sum(axis=0) / np.maximum(n, 1))
            lo, hi = np.where(n > 0, mean - std, np.nan), np.where(n > 0, mean + std, np.nan)
        else:
            lo = hi = None
    parts = [mean] + ([lo, hi] if lo is not None else [])
    return {"n": n.astype(int).tolist(), "mean": mean, "lo": lo, "hi": hi, "_all": np.concatenate(parts)}


def _json_values(values: Any, reference: Any) -> list[float | None]:
    """``values`` rounded to 1e-7 of ``reference``'s largest magnitude; NaN -> None."""
    import numpy as np

    finite = np.abs(reference[np.isfinite(reference)]) if np.size(reference) else np.zeros(0)
    largest = float(finite.max()) if finite.size else 0.0
    decimals = 7 if largest == 0 else int(min(15, max(0, 6 - math.floor(math.log10(largest)))))
    rounded = np.round(np.asarray(values, dtype=float), decimals)
    out = rounded.astype(object)
    out[~np.isfinite(rounded)] = None
    return out.tolist()


def explore(store: Store, project_slug: str, query: ExploreQuery) -> dict[str, Any]:
    """The explorer's answer for ``query`` (module doc), read in one transaction."""
    query.check()
    with store.read() as conn:
        project = store.projects.project(conn, project_slug)
        chain_ids = [t.exp_id for t in chain_of(store, conn, project, query.to)] if query.select == "chain" else None
        within = chain_ids
        if query.select == "telemetry":
            within = store.explore.exp_ids_with_telemetry(conn, project)
        rows, matched = store.explore.explore_trials(
            conn,
            project,
            filters=dict(query.filters),
            exp_ids=within,
            subtree_of=query.root if query.select == "subtree" else None,
            limit=query.limit,
        )
        if query.select == "chain" and chain_ids is not None:
            order = {exp_id: i for i, exp_id in enumerate(chain_ids)}
            rows.sort(key=lambda row: order[row[1].exp_id])
        trials = [trial for _, trial in rows]
        ids = [row_id for row_id, _ in rows]
        keys = [group_key(t, query.group_by) for t in trials]
        groups = list(dict.fromkeys(keys))
        panels = []
        for metric in query.metrics:
            if metric == CORE_METRIC:
                panels.append(_core_panel(trials, keys, groups))
            else:
                panels.append(_series_panel(store, conn, ids, trials, keys, groups, metric, query))
        name_trials = store.explore.telemetry_name_counts(conn, ids)
        names = sorted(name_trials)
    return {
        "project": project.slug,
        "metric_name": project.metric_name,
        "lower_is_better": project.lower_is_better,
        "selection": {
            "select": query.select,
            "to": chain_ids[-1] if chain_ids else query.to,
            "root": query.root,
            "matched": matched,
            "shown": len(trials),
            "truncated": matched > len(trials),
        },
        "group_by": query.group_by,
        "band": query.band,
        "x": query.x,
        "turn": query.turn,
        "groups": [
            {
                "key": g,
                "label": group_label(query.group_by, g),
                "index": i,
                "trials": [t.exp_id for t, k in zip(trials, keys) if k == g],
            }
            for i, g in enumerate(groups)
        ],
        "trials": [
            {
                "exp_id": t.exp_id,
                "seq": t.seq,
                "status": t.status.value,
                "specialist": t.specialist,
                "core_metric": t.core_metric,
                "group": groups.index(k),
            }
            for t, k in zip(trials, keys)
        ],
        "names": names,
        "name_trials": name_trials,
        "panels": panels,
    }
