"""Which knob moved the metric: any column of a project's trials against the metric.

An axis is a column of :mod:`lineage.browse.columns` (a file column ``extra.KEY``, a
trial field such as ``train_s`` or ``specialist``), a knob's changes ``knob.NAME`` (the
values trials set it to, read from their patches, configs, columns and hypotheses:
``lineage.knobs``; a trial that did not change it has none) or a telemetry summary
``telemetry.NAME.SUMMARY`` (``last``, ``first``, ``min``, ``max``, ``mean`` of the
series ``NAME``), each computed in SQL (:meth:`Store.columns.knob_rows`). A view reads the
newest ``limit`` trials that have the first axis, plus the last ``CHAIN_POINTS`` trials
of the chain to the best (flagged, so the view is lineage-aware; ``KnobView.chain`` is the
chain's part from the shallowest trial of the window to the best, read as ids: every window
trial on the chain is in it). Numbers are numeric axes; text (and
numbers of a text column) are category axes, the most common ``MAX_CATEGORIES``
named and the rest ``(other)``.

Owns: :class:`Axis`, :class:`KnobPoint`, :class:`KnobView`, :func:`knobs`
(``knobs``, mixed into ``Ledger``), :func:`parse_axis`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lineage.browse.columns import ProjectColumns, columns_of
from lineage.chain import chain_length, current_best
from lineage.domain import Project, check_window
from lineage.errors import InvalidInput

if TYPE_CHECKING:
    from lineage.store import Store

TELEMETRY = "telemetry."
#: an axis of the knob changes read from patches, configs, columns and hypotheses:
#: ``knob.NAME`` (``lineage.knobs``; a trial that changed the knob has its new value)
KNOB = "knob."
#: knob-change axes offered at most (the most changed)
KNOB_CHOICES = 30
SUMMARIES = ("last", "first", "min", "max", "mean")
#: Category axes name this many values; the rest are ``OTHER``.
MAX_CATEGORIES = 30
OTHER = "(other)"
#: Axes a parallel-coordinates view takes at most (the metric comes on top).
MAX_AXES = 8
#: The chain trials a view adds beyond its window: the last this many before the best.
CHAIN_POINTS = 300
#: How many trials with telemetry the names offered are looked for in.
TELEMETRY_SCAN = 200
#: Columns never offered as knobs: ids, texts and the metric itself.
_NOT_KNOBS = frozenset({"exp", "status", "metric", "delta", "link", "long", "when"})


def knob_columns(columns: ProjectColumns) -> list[Any]:
    """The project's columns that are knobs, as the view offers them."""
    return [c for c in columns.all if c.kind not in _NOT_KNOBS and c.key != "timestamp"]


def default_knobs(columns: ProjectColumns) -> list[str]:
    """The knobs in the order a view picks them unasked: numeric file columns, numeric
    fields, then text file columns and fields (``seq`` last of all)."""
    knobs = knob_columns(columns)
    order = sorted(knobs, key=lambda c: (c.key == "seq", not c.numeric, c.source != "extra"))
    return [c.key for c in order] or ["seq"]


@dataclass(frozen=True, slots=True)
class Axis:
    key: str
    label: str
    #: ``number`` or ``category``
    kind: str
    #: ``field``, ``extra`` or ``telemetry``
    source: str
    name: str
    summary: str | None = None
    #: the category names in axis order (category axes)
    categories: tuple[str, ...] = ()
    #: every value is > 0 (a log scale is possible)
    positive: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "kind": self.kind,
            "source": self.source,
            "name": self.name,
            "summary": self.summary,
            "categories": list(self.categories),
            "positive": self.positive,
        }


@dataclass(frozen=True, slots=True)
class KnobPoint:
    exp_id: str
    seq: int
    status: str
    metric: float | None
    #: one value per axis (a float, a category name, or None)
    values: tuple[Any, ...]
    on_chain: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "exp_id": self.exp_id,
            "seq": self.seq,
            "status": self.status,
            "metric": self.metric,
            "values": list(self.values),
            "on_chain": self.on_chain,
        }


@dataclass(frozen=True, slots=True)
class KnobView:
    project: Project
    axes: tuple[Axis, ...]
    #: newest first
    points: tuple[KnobPoint, ...]
    #: root-first exp ids of the chain to the best
    chain: tuple[str, ...]
    best_exp: str | None
    #: the knobs a view may choose from (the axes' keys and labels)
    choices: tuple[tuple[str, str], ...]
    limit: int
    #: whether more trials have the first axis than ``limit``
    truncated: bool
    #: numeric knobs for a parallel-coordinates view nobody chose axes for
    suggested: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "project": self.project.slug,
            "metric_name": self.project.metric_name,
            "lower_is_better": self.project.lower_is_better,
            "axes": [a.as_dict() for a in self.axes],
            "points": [p.as_dict() for p in self.points],
            "chain": list(self.chain),
            "best_exp": self.best_exp,
            "choices": [{"key": k, "label": label} for k, label in self.choices],
            "limit": self.limit,
            "truncated": self.truncated,
            "suggested": list(self.suggested),
        }


def parse_axis(key: str, columns: ProjectColumns, field: str = "x") -> Axis:
    """The axis ``key`` names (a column key or ``telemetry.NAME.SUMMARY``); unknown or
    unusable: an :class:`InvalidInput` naming ``field``."""
    key = key.strip()
    if key.startswith(KNOB) and key[len(KNOB) :].strip():
        name = key[len(KNOB) :].strip()
        return Axis(key, f"{name} (knob changes)", "number", "knob", name)
    if key.startswith(TELEMETRY):
        name, _, summary = key[len(TELEMETRY) :].rpartition(".")
        if not name or summary not in SUMMARIES:
            raise InvalidInput(
                field,
                f"a telemetry axis is telemetry.NAME.SUMMARY with SUMMARY one of {', '.join(SUMMARIES)}, got {key!r}",
            )
        return Axis(key, f"{name} ({summary})", "number", "telemetry", name, summary)
    try:
        column = columns.column(key)
    except InvalidInput as exc:
        raise InvalidInput(field, exc.message.split(": ", 1)[-1]) from None
    if column.kind in ("exp", "status", "long", "when"):
        raise InvalidInput(field, f"{key!r} is not a knob (ids, statuses, texts and times are not plotted)")
    return Axis(column.key, column.label, "number" if column.numeric else "category", column.source, column.name)


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _settle(axis: Axis, raw: list[Any]) -> tuple[Axis, list[Any]]:
    """The axis' values as numbers or category names, and the axis with its categories:
    a numeric column whose values are not all numbers becomes a category axis."""
    present = [v for v in raw if v is not None]
    numbers = [_number(v) for v in present]
    if axis.kind == "number" and all(n is not None for n in numbers):
        values = [_number(v) for v in raw]
        positive = bool(present) and all(n > 0 for n in numbers)  # type: ignore[operator]
        return Axis(axis.key, axis.label, "number", axis.source, axis.name, axis.summary, (), positive), values
    texts = [
        None
        if v is None
        else (("true" if v else "false") if isinstance(v, bool) else (f"{v:g}" if isinstance(v, float) else str(v)))
        for v in raw
    ]
    counts = Counter(t for t in texts if t is not None)
    named = {t for t, _ in counts.most_common(MAX_CATEGORIES)}
    categories = [None if t is None else (t if t in named else OTHER) for t in texts]
    order = sorted(named, key=_natural)
    if len(counts) > len(named):
        order.append(OTHER)
    return Axis(axis.key, axis.label, "category", axis.source, axis.name, axis.summary, tuple(order)), categories


def _natural(text: str) -> tuple[Any, ...]:
    number = _number(text)
    return (0, number, text) if number is not None else (1, 0.0, text.lower())


def knobs(store: Store, project_slug: str, axes: Sequence[str] | None = None, *, limit: int = 2000) -> KnobView:
    """The trials (the newest ``limit`` with the first axis, and the chain to the best)
    with each axis' value and their metric. ``axes``: column keys or telemetry
    summaries (default: the project's first numeric knob)."""
    check_window("limit", limit, minimum=1)
    with store.read() as conn:
        project = store.projects.project(conn, project_slug)
        columns = columns_of(store, conn, project)
        ids = store.columns.telemetry_trial_ids(conn, project, limit=TELEMETRY_SCAN)
        names = store.explore.telemetry_names(conn, ids) if ids else []
        choices = [(c.key, c.label) for c in knob_columns(columns)]
        choices += [(f"{TELEMETRY}{name}.{s}", f"{name} ({s})") for name in names for s in ("last", "min")]
        changed = [knob for knob, _ in store.knobs.knobs(conn, project.stored_id)[:KNOB_CHOICES]]
        choices += [(f"{KNOB}{knob}", f"{knob} (knob changes)") for knob in changed]
        keys = [k for raw in (axes or ()) for k in str(raw).split(",") if k.strip()]
        if not keys:
            keys = default_knobs(columns)[:1]
        if len(keys) > MAX_AXES:
            raise InvalidInput("axes", f"at most {MAX_AXES} axes, got {len(keys)}")
        parsed = [parse_axis(k, columns, "x" if i == 0 else "axes") for i, k in enumerate(keys)]
        spec = [(a.source, a.name, a.summary) for a in parsed]
        rows = store.columns.knob_rows(conn, project, spec, limit=limit + 1)
        truncated = len(rows) > limit
        rows = rows[:limit]
        best = current_best(store, conn, project)
        chain: list[str] = []
        if best:
            # the chain's part the window can hold: from the shallowest window trial down
            # to the best (ids only), and at least its last CHAIN_POINTS steps
            length = chain_length(store, conn, project, best.exp_id)
            depths = [int(row[-1]) for row in rows]
            shallowest = min(depths) if rows else length
            steps = max(CHAIN_POINTS, length - shallowest + 1 if shallowest else project.trial_count + 1)
            chain = store.chain.chain_ids(conn, project, best.exp_id, steps)
        have = {row[0] for row in rows}
        # the chain's last steps come even when older than the window (a 20,000-step
        # chain of a 100,000-trial loop would be most of the page otherwise)
        missing = [e for e in chain[-CHAIN_POINTS:] if e not in have]
        if missing:
            rows += store.columns.knob_rows(conn, project, spec, limit=len(missing), exp_ids=missing)
    on_chain = set(chain)
    settled = [_settle(axis, [row[4 + i] for row in rows]) for i, axis in enumerate(parsed)]
    points = tuple(
        KnobPoint(row[0], int(row[1]), row[2], row[3], tuple(values[j] for _, values in settled), row[0] in on_chain)
        for j, row in enumerate(rows)
    )
    return KnobView(
        project=project,
        axes=tuple(a for a, _ in settled),
        points=points,
        chain=tuple(chain),
        best_exp=best.exp_id if best else None,
        choices=tuple(choices),
        limit=limit,
        truncated=truncated,
        suggested=tuple(k for k in default_knobs(columns) if k != "seq" and columns.column(k).numeric)[:4],
    )
