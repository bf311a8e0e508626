"""Telemetry of trials: batches of points in, series out, and the clip-scale summary.

A point is what a training job sends while a trial runs (``trainer_hooks``): a ``step``,
a ``name``, a ``value`` and, for per-turn quantities, a ``turn``. Rules:

Points
    ``step``: an integer from 0 to 2**53. ``turn``: an integer from 0 to 2**31-1, or None
    (stored as -1) for a quantity that is not per turn. ``name``: 1-200 characters without
    control characters (C0, DEL). ``value``: a finite number of magnitude at most 1e150
    (statistics sum squares in double precision). The optional ``wall_time`` (the sender's
    clock, seconds since the epoch): a finite number. A batch holds at most
    :data:`MAX_BATCH_POINTS` points. Nothing is coerced: ``step`` and ``turn`` are JSON
    integers as JSON Schema reads them (``8020`` or ``8020.0``, never ``8020.5``, ``"1"`` or
    ``true``; issue 22: the API's document says ``integer``, which admits ``8020.0``),
    ``value`` and ``wall_time`` JSON numbers (not strings or booleans). (Contract note: until 2026-11-23 the HTTP API coerced
    such values, as ``check_points`` never did; it now refuses them with a 422 naming
    ``points[i].field``. Request and response shapes are unchanged.)

    The same points may come as one array per field (:func:`check_columns`, rules and
    errors as here, the module :mod:`lineage.telemetry_columns`): the compact form for
    big batches, checked a column at a time.

Idempotent batches
    A batch may carry a key (the API's ``batch_id`` field or ``Idempotency-Key``
    header). The key is stored in the transaction that inserts the points, so a replay
    of the same key and the same points -- what a durable client does after a timeout or
    a partial failure -- inserts nothing and returns the first result; the same key with
    other points is a :class:`~lineage.errors.Conflict`. Without a key a batch is
    inserted every time it is sent.

Series (:meth:`Telemetry.telemetry_series`)
    Points are grouped into series by ``(name, turn)``, in step order. A series of at
    most ``max_points`` points comes back whole (``method: raw``). A longer one is
    downsampled by **min/max per bucket** (``method: minmax``): its step range
    ``[first, last]`` is cut into buckets of ``ceil((last - first + 1) / max_points)``
    steps (so at most ``max_points`` buckets), and each non-empty bucket gives its first
    and last step, the minimum, the maximum, the mean and the number of points, so a
    plot keeps every spike.

Summary (:meth:`Telemetry.summarize_telemetry`)
    The trial's clip-scale statistics derived from the not-per-turn series that
    ``trainer_hooks`` logs every step (:data:`SUMMARY_SOURCES`), each logged point
    weighing the same:

    * ``ig_clip_scale_mean``: the mean of ``clip_scale_mean``;
    * ``ig_clip_scale_std``: the pooled std, ``sqrt(mean(std^2) + mean(mean^2) -
      mean(mean)^2)`` over ``clip_scale_std`` and ``clip_scale_mean`` (the std of all
      steps' populations taken together, by the law of total variance);
    * ``ig_clip_scale_min``: the minimum of ``clip_scale_min``;
    * ``ig_clip_scale_max``: the maximum of ``clip_scale_max``;
    * ``ig_clip_scale_frac_low`` / ``_high``: the mean of ``clip_scale_frac_low`` /
      ``clip_scale_frac_high``.

    A field whose series are missing is left as it is; with none of them the request is
    refused (field ``telemetry``). The fields are written through
    ``Ledger.update_trial`` (validation, revision bump, ``delta_vs_best`` recomputed as on any
    update).
"""

from __future__ import annotations

import hashlib
import marshal
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from lineage.domain import check_idempotency_key
from lineage.errors import Conflict, InvalidInput
from lineage.telemetry_columns import PointColumns

if TYPE_CHECKING:  # pragma: no cover
    from lineage.domain import Trial
    from lineage.store import Store

__all__ = [
    "MAX_BATCH_POINTS",
    "MAX_STEP",
    "SUMMARY_SOURCES",
    "IngestResult",
    "PointColumns",
    "Series",
    "batch_hash",
    "check_columns",
    "check_points",
    "rows_from_valid",
    "Telemetry",
    "TrialUpdates",
]

MAX_BATCH_POINTS = 1_000_000
MAX_STEP = 2**53
MAX_TURN = 2**31 - 1
MAX_NAME = 200
#: Largest magnitude of a value: series statistics (means, means of squares) are summed in
#: the database in double precision, and must not overflow on any backend.
MAX_ABS_VALUE = 1e150
#: A name: no control characters (C0 and DEL).
NAME_PATTERN = r"^[^\x00-\x1f\x7f]+$"
_NAME = re.compile(NAME_PATTERN)
#: Points per series above which :meth:`Telemetry.telemetry_series` downsamples (the default ``max_points``).
DEFAULT_MAX_POINTS = 2_000
SCOPE = "telemetry"

#: trial field <- telemetry series it is derived from (see the module doc for the rule)
SUMMARY_SOURCES: dict[str, str] = {
    "ig_clip_scale_mean": "clip_scale_mean",
    "ig_clip_scale_std": "clip_scale_std",
    "ig_clip_scale_min": "clip_scale_min",
    "ig_clip_scale_max": "clip_scale_max",
    "ig_clip_scale_frac_low": "clip_scale_frac_low",
    "ig_clip_scale_frac_high": "clip_scale_frac_high",
}

Row = tuple[int, int, str, float, "float | None"]


@dataclass(frozen=True, slots=True)
class IngestResult:
    accepted: int
    #: True when the batch's key was seen before: nothing was written this time
    replayed: bool
    key: str | None = None


@dataclass(slots=True)
class Series:
    name: str
    #: None for a quantity that is not per turn
    turn: int | None
    #: points in the series (in the requested step range)
    count: int
    #: ``raw`` (``step``/``value``) or ``minmax`` (``step``/``step_last``/``min``/``max``/``mean``/``n``)
    method: str
    step: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    step_last: list[int] = field(default_factory=list)
    min: list[float] = field(default_factory=list)
    max: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    n: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "turn": self.turn,
            "count": self.count,
            "method": self.method,
            "downsampled": self.method != "raw",
            "step": self.step,
        }
        if self.method == "raw":
            out["value"] = self.value
        else:
            out.update(step_last=self.step_last, min=self.min, max=self.max, mean=self.mean, n=self.n)
        return out


def _whole(value: object) -> int | None:
    """``value`` as an int when it is a whole number (``8020`` or ``8020.0``: JSON Schema's
    integers), else None; never a bool or a string."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    return None


def point_field(point: object, name: str) -> object:
    return point.get(name) if isinstance(point, Mapping) else getattr(point, name)


def _bad(index: int, name: str, message: str) -> InvalidInput:
    return InvalidInput(f"points[{index}].{name}", message)


def check_points(points: Iterable[Any]) -> list[Row]:
    """Rows ``(step, turn, name, value, wall_time)`` from points (mappings or objects with
    those attributes), checked by the rules of the module doc; the first bad point raises
    :class:`InvalidInput` naming ``points[i].field``."""
    rows: list[Row] = []
    append = rows.append
    isfinite = math.isfinite
    for index, point in enumerate(points):
        if isinstance(point, Mapping):
            step, turn, name, value, wall = (
                point.get("step"),
                point.get("turn"),
                point.get("name"),
                point.get("value"),
                point.get("wall_time"),
            )
        else:
            step, turn, name, value, wall = point.step, point.turn, point.name, point.value, point.wall_time
        if type(step) is not int or not 0 <= step <= MAX_STEP:
            step = _whole(step)
            if step is None or not 0 <= step <= MAX_STEP:
                raise _bad(
                    index, "step", f"must be an integer from 0 to {MAX_STEP}, got {point_field(point, 'step')!r}"
                )
        if turn is None:
            turn = -1
        elif type(turn) is not int or not 0 <= turn <= MAX_TURN:
            turn = _whole(turn)
            if turn is None or not 0 <= turn <= MAX_TURN:
                raise _bad(
                    index,
                    "turn",
                    f"must be an integer from 0 to {MAX_TURN} or null, got {point_field(point, 'turn')!r}",
                )
        if type(name) is not str or not 0 < len(name) <= MAX_NAME or not _NAME.match(name):
            raise _bad(index, "name", f"must be 1-{MAX_NAME} characters without control characters")
        if type(value) is not float:
            if type(value) is not int:
                raise _bad(index, "value", f"must be a number, got {value!r}")
            value = float(value)
        if not isfinite(value) or abs(value) > MAX_ABS_VALUE:
            raise _bad(index, "value", f"must be finite and at most {MAX_ABS_VALUE:g} in magnitude, got {value!r}")
        if wall is not None:
            if type(wall) is not float:
                if type(wall) is not int:
                    raise _bad(index, "wall_time", f"must be a number or null, got {wall!r}")
                wall = float(wall)
            if not isfinite(wall):
                raise _bad(index, "wall_time", f"must be finite, got {wall!r}")
        append((step, turn, name, value, wall))
    if len(rows) > MAX_BATCH_POINTS:
        raise InvalidInput("points", f"holds {len(rows)} points; the limit is {MAX_BATCH_POINTS} per batch")
    return rows


def check_columns(columns: Any) -> PointColumns:
    """Points from a batch's columnar form (:mod:`lineage.telemetry_columns`), by the same
    rules as :func:`check_points`; ``.rows()`` equal its rows for the same points."""
    from lineage.telemetry_columns import check_columns as check

    return PointColumns(
        *check(
            columns,
            {
                "MAX_STEP": MAX_STEP,
                "MAX_TURN": MAX_TURN,
                "MAX_NAME": MAX_NAME,
                "NAME": _NAME,
                "MAX_ABS_VALUE": MAX_ABS_VALUE,
                "MAX_BATCH_POINTS": MAX_BATCH_POINTS,
            },
        )
    )


def rows_from_valid(points: Iterable[Mapping[str, Any]]) -> list[Row]:
    """Rows from points already held to the rules above (the API validates them with a
    schema built from this module's constants): the conversion alone, no checks."""
    return [
        (p["step"], -1 if (turn := p.get("turn")) is None else turn, p["name"], p["value"], p.get("wall_time"))
        for p in points
    ]


def batch_hash(rows: Sequence[Row] | PointColumns) -> str:
    """SHA-256 of a batch's points: equal for the same points however the JSON was written
    (``marshal`` version 2 writes values without object references, so equal values give
    equal bytes). Rows hash as the list of rows (as always), columns as the tuple of the
    five columns (no tuple per point to build); a replay in the other form is recognised
    by :func:`_other_form_hash`."""
    if isinstance(rows, PointColumns):
        columns = (list(rows.step), list(rows.turn), list(rows.name), list(rows.value), list(rows.wall_time))
        return hashlib.sha256(marshal.dumps(columns, 2)).hexdigest()
    return hashlib.sha256(marshal.dumps(list(rows), 2)).hexdigest()


def _other_form_hash(rows: Sequence[Row] | PointColumns) -> str:
    """:func:`batch_hash` of the same points in the other form (only a replay whose hash
    differs pays for it)."""
    if isinstance(rows, PointColumns):
        return batch_hash(rows.rows())
    found = list(rows)
    return batch_hash(
        PointColumns(*(list(column) for column in zip(*found))) if found else PointColumns([], [], [], [], [])
    )


def derive_summary(stats: Mapping[str, tuple[int, float, float, float, float]]) -> dict[str, float]:
    """The rule of the module doc over ``name -> (count, mean, min, max, mean of squares)``."""
    derived: dict[str, float] = {}
    mean = stats.get("clip_scale_mean")
    std = stats.get("clip_scale_std")
    if mean is not None:
        derived["ig_clip_scale_mean"] = mean[1]
        if std is not None:
            variance = std[4] + mean[4] - mean[1] ** 2
            derived["ig_clip_scale_std"] = math.sqrt(max(0.0, variance))
    if "clip_scale_min" in stats:
        derived["ig_clip_scale_min"] = stats["clip_scale_min"][2]
    if "clip_scale_max" in stats:
        derived["ig_clip_scale_max"] = stats["clip_scale_max"][3]
    for side in ("low", "high"):
        found = stats.get(f"clip_scale_frac_{side}")
        if found is not None:
            derived[f"ig_clip_scale_frac_{side}"] = min(1.0, max(0.0, found[1]))
    return derived


class TrialUpdates(Protocol):
    """What the telemetry part needs of the recording part (``ledger.recording``): a
    stored trial's fields changed under the recording rules."""

    def update_trial(self, project_slug: str, exp_id: str, changes: Mapping[str, Any]) -> Trial: ...


class Telemetry:
    """ingest_telemetry, telemetry_series, telemetry_points, metric_history, latest_points, shared_telemetry, summarize_telemetry."""

    def __init__(self, store: Store, recording: TrialUpdates) -> None:
        self.store = store
        self.recording = recording

    def ingest_telemetry(
        self, project_slug: str, exp_id: str, rows: Sequence[Row] | PointColumns, *, key: str | None = None
    ) -> IngestResult:
        """Insert checked rows (:func:`check_points`) or columns (:func:`check_columns`) into
        trial ``exp_id``, all or nothing. With ``key``, idempotently (module doc): the same
        points replayed in either form are the same batch."""
        store = self.store
        if key is not None:
            check_idempotency_key(key, field_name="batch_id")
        digest = batch_hash(rows) if key is not None else ""
        with store.write() as conn:
            project = store.projects.project(conn, project_slug)
            trial_id = store.telemetry.trial_row_id(conn, project, exp_id)
            if key is not None and not store.tokens.claim_key(
                conn, project, SCOPE, key, exp_id=exp_id, body_hash=digest, result={"accepted": len(rows)}
            ):
                found = store.tokens.find_key(conn, project, SCOPE, key)
                stored_exp, stored_hash, result = found if found is not None else ("", "", {})
                if stored_exp != exp_id or stored_hash not in (digest, _other_form_hash(rows)):
                    raise Conflict(
                        f"batch {key!r} was already sent with other points"
                        + (f" (for trial {stored_exp!r})" if stored_exp != exp_id else ""),
                        field="batch_id",
                        existing={"exp_id": stored_exp, "points": result.get("accepted"), "sha256": stored_hash},
                        proposed={"exp_id": exp_id, "points": len(rows), "sha256": digest},
                    )
                return IngestResult(accepted=int(result.get("accepted", 0)), replayed=True, key=key)
            store.telemetry.insert_points(conn, trial_id, rows)
        return IngestResult(accepted=len(rows), replayed=False, key=key)

    def telemetry_series(
        self,
        project_slug: str,
        exp_id: str,
        *,
        names: Sequence[str] | None = None,
        step_min: int | None = None,
        step_max: int | None = None,
        max_points: int = DEFAULT_MAX_POINTS,
    ) -> tuple[list[Series], tuple[int, int]]:
        """The trial's series (module doc), and ``(points, largest point id)`` of the trial
        (what an ETag of the telemetry derives from), read in one transaction."""
        if not isinstance(max_points, int) or not 2 <= max_points <= 100_000:
            raise InvalidInput("max_points", f"must be an integer from 2 to 100000, got {max_points!r}")
        # step_min > step_max is an empty range: no points (as the API's schema allows it)
        store = self.store
        out: list[Series] = []
        with store.read() as conn:
            project = store.projects.project(conn, project_slug)
            trial_id = store.telemetry.trial_row_id(conn, project, exp_id)
            version = store.telemetry.telemetry_count(conn, trial_id)
            for name, turn, count, first, last in store.telemetry.telemetry_series(
                conn, trial_id, names=names, step_min=step_min, step_max=step_max
            ):
                shown_turn = None if turn < 0 else turn
                if count <= max_points:
                    points = store.telemetry.telemetry_points(
                        conn, trial_id, name, turn, step_min=step_min, step_max=step_max
                    )
                    out.append(
                        Series(
                            name,
                            shown_turn,
                            count,
                            "raw",
                            step=[int(s) for s, _ in points],
                            value=[float(v) for _, v in points],
                        )
                    )
                    continue
                found = Series(name, shown_turn, count, "minmax")
                for lo, hi, vmin, vmax, mean, n in store.telemetry.telemetry_buckets(
                    conn, trial_id, name, turn, first=first, last=last, buckets=max_points
                ):
                    found.step.append(lo)
                    found.step_last.append(hi)
                    found.min.append(vmin)
                    found.max.append(vmax)
                    found.mean.append(mean)
                    found.n.append(n)
                out.append(found)
        return out, version

    def telemetry_points(self, project_slug: str, exp_id: str) -> list[dict[str, Any]]:
        """The trial's points as ``{step, turn, name, value}`` mappings (what the web pages
        plot). A series longer than :data:`DEFAULT_MAX_POINTS` comes as the mean of each of
        its min/max buckets, at the bucket's first step."""
        found, _ = self.telemetry_series(project_slug, exp_id)
        points: list[dict[str, Any]] = []
        for one in found:
            values = one.value if one.method == "raw" else one.mean
            points.extend({"step": s, "turn": one.turn, "name": one.name, "value": v} for s, v in zip(one.step, values))
        return points

    def metric_history(
        self, project_slug: str, exp_id: str, name: str, *, last: bool = False
    ) -> list[tuple[int, float, float | None]]:
        """Every ``(step, value, wall_time)`` of the per-step series ``name``, never
        downsampled (MLflow's metric history); ``last``: only its last point (by step)."""
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            trial_id = self.store.telemetry.trial_row_id(conn, project, exp_id)
            return self.store.telemetry.metric_history(conn, trial_id, name, last=last)

    def latest_points(self, project_slug: str, exp_id: str) -> dict[str, tuple[int, float, float | None]]:
        """The last ``(step, value, wall_time)`` of each per-step series (MLflow's latest
        metrics), read in one transaction."""
        store = self.store
        with store.read() as conn:
            project = store.projects.project(conn, project_slug)
            trial_id = store.telemetry.trial_row_id(conn, project, exp_id)
            names = [name for name, turn, *_ in store.telemetry.telemetry_series(conn, trial_id) if turn < 0]
            return {
                name: point
                for name in names
                for point in store.telemetry.metric_history(conn, trial_id, name, last=True)
            }

    def shared_telemetry(
        self, project_slug: str, exp_ids: Sequence[str], *, max_points: int = 300, min_trials: int = 2
    ) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """What the compare page overlays: ``name -> exp_id -> points`` (``{step, turn,
        value}``) of every telemetry name that at least ``min_trials`` of the trials have.
        Reads, in one transaction: the names of each trial (one index seek per name), then
        only the shared series, each at most ``max_points`` points: a longer one is sampled
        in the database (its first point in each of ``max_points`` equal step buckets, one
        index seek each, as the explorer's sampled rule), so a spike between samples is
        not drawn -- the trial page draws every series whole."""
        if not isinstance(max_points, int) or not 2 <= max_points <= 100_000:
            raise InvalidInput("max_points", f"must be an integer from 2 to 100000, got {max_points!r}")
        store = self.store
        out: dict[str, dict[str, list[dict[str, Any]]]] = {}
        with store.read() as conn:
            project = store.projects.project(conn, project_slug)
            rows = {exp_id: store.telemetry.trial_row_id(conn, project, exp_id) for exp_id in dict.fromkeys(exp_ids)}
            names = {exp_id: store.explore.telemetry_names(conn, [row]) for exp_id, row in rows.items()}
            counts: dict[str, int] = {}
            for found in names.values():
                for name in found:
                    counts[name] = counts.get(name, 0) + 1
            shared = {name for name, n in counts.items() if n >= min_trials}
            for exp_id, row in rows.items():
                mine = [name for name in names[exp_id] if name in shared]
                if not mine:
                    continue
                for name, turn, count, first, last in store.telemetry.telemetry_series(conn, row, names=mine):
                    if count <= max_points:
                        values = store.telemetry.telemetry_points(conn, row, name, turn)
                    else:  # one index seek per bucket: the cost follows max_points, not the points stored
                        width = -(-(last - first + 1) // max_points)
                        values = [
                            (first + bucket * width, value)
                            for _, _, bucket, value, _ in store.explore.explore_cells_sampled(
                                conn, [(row, turn)], name, lo=first, width=width, count=-(-(last - first + 1) // width)
                            )
                        ]
                    shown_turn = None if turn < 0 else turn
                    out.setdefault(name, {}).setdefault(exp_id, []).extend(
                        {"step": int(step), "turn": shown_turn, "name": name, "value": float(value)}
                        for step, value in values
                    )
        return out

    def summarize_telemetry(self, project_slug: str, exp_id: str) -> tuple[Trial, dict[str, float]]:
        """Derive the trial's clip-scale statistics from its telemetry (module doc) and store
        them; returns the updated trial and the fields written."""
        store = self.store
        with store.read() as conn:
            project = store.projects.project(conn, project_slug)
            trial_id = store.telemetry.trial_row_id(conn, project, exp_id)
            stats = store.telemetry.telemetry_aggregates(conn, trial_id, sorted(set(SUMMARY_SOURCES.values())))
        derived = derive_summary(stats)
        if not derived:
            raise InvalidInput(
                "telemetry",
                f"trial {exp_id!r} has none of the series {', '.join(sorted(set(SUMMARY_SOURCES.values())))} "
                "(not per turn); nothing to summarize",
            )
        return self.recording.update_trial(project_slug, exp_id, derived), derived
