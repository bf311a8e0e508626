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

from lineage.browse.columns import EXTRA, ProjectColumns, columns_of
from lineage.browse.knob_axes import rank_axes
from lineage.chain import chain_length, current_best
from lineage.domain import Project, check_window
from lineage.errors import InvalidInput
from lineage.knobs.extract import knob_name

if TYPE_CHECKING:
    from lineage.store import Store

TELEMETRY = "telemetry."
#: Prefix of a knob-change axis: ``knob.NAME``, the value each trial set the knob to (the
#: ``knob_changes`` extracted from its patch, config or hypothesis; :mod:`lineage.knobs`).
KNOB = "knob."
#: A column is a numeric axis when at least this share of its values are numbers: a few
#: failed-run cells ("-", "OOM") become "no value", not 30 categories.
NUMERIC_SHARE = 0.8
#: Knob-change axes the picker offers at most (the most changed knobs).
MAX_KNOB_CHOICES = 20
#: Candidates the suggestion ranks at most (file columns and fields, then changed knobs).
RANKED = 16
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
    if key.startswith(KNOB) and len(key) > len(KNOB):
        name = key[len(KNOB) :]
        return Axis(key, f"{name} (as changed)", "number", "knob", name)
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
    present = [v for v in raw if v is not None and v != ""]
    numbers = [n for n in (_number(v) for v in present) if n is not None]
    if present and len(numbers) >= NUMERIC_SHARE * len(present):
        values = [_number(v) for v in raw]  # the few other cells: no value
        positive = bool(numbers) and all(n > 0 for n in numbers)
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


def knobs(
    store: Store, project_slug: str, axes: Sequence[str] | None = None, *, limit: int = 2000, suggest: bool = False
) -> KnobView:
    """The trials (the newest ``limit`` with the first axis, and the chain to the best)
    with each axis' value and their metric. ``axes``: column keys, ``knob.NAME`` or
    telemetry summaries (default: the knob :func:`~lineage.browse.knob_axes.rank_axes`
    puts first). ``suggest``: rank the project's knobs over the newest ``limit`` trials
    (``KnobView.suggested``, one more read)."""
    check_window("limit", limit, minimum=1)
    with store.read() as conn:
        project = store.projects.project(conn, project_slug)
        columns = columns_of(store, conn, project)
        ids = store.columns.telemetry_trial_ids(conn, project, limit=TELEMETRY_SCAN)
        names = store.explore.telemetry_names(conn, ids) if ids else []
        file_columns = knob_columns(columns)
        # a knob read from a file's own column is that column: offered once, as the column
        as_columns = {knob_name(c.key[len(EXTRA) :]) for c in file_columns if c.key.startswith(EXTRA)}
        changed = [k for k, _ in store.knobs.knobs(conn, project.stored_id) if k not in as_columns]
        changed = changed[:MAX_KNOB_CHOICES]
        choices = [(c.key, c.label) for c in file_columns]
        choices += [(f"{KNOB}{k}", f"{k} (as changed)") for k in changed]
        choices += [(f"{TELEMETRY}{name}.{s}", f"{name} ({s})") for name in names for s in ("last", "min")]
        keys = [k for raw in (axes or ()) for k in str(raw).split(",") if k.strip()]
        ranked: list[str] = []
        if suggest or not keys:
            ranked = _suggest(store, conn, project, columns, changed, limit)
        if not keys:
            keys = ranked[:1] or default_knobs(columns)[:1]
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
        suggested=tuple(ranked[: MAX_AXES - 1]),
    )


def _suggest(
    store: Store, conn: Any, project: Project, columns: ProjectColumns, changed: Sequence[str], limit: int
) -> list[str]:
    """The knobs that vary, ranked by how the metric follows them over the newest
    ``limit`` trials (:func:`~lineage.browse.knob_axes.rank_axes`)."""
    keys = [k for k in default_knobs(columns) if k != "seq"][: RANKED - min(len(changed), RANKED // 2)]
    keys += [f"{KNOB}{k}" for k in changed][: RANKED - len(keys)]
    if not keys:
        return []
    parsed = [parse_axis(k, columns, "axes") for k in keys]
    spec = [(a.source, a.name, a.summary) for a in parsed]
    rows = store.columns.knob_rows(conn, project, spec, limit=limit, every=True)
    metrics = [row[3] for row in rows]
    settled = [_settle(axis, [row[4 + i] for row in rows]) for i, axis in enumerate(parsed)]
    ranked = rank_axes([(a.key, a.kind) for a, _ in settled], [values for _, values in settled], metrics)
    return [key for key, _ in ranked]


def parse_brush(raw: str, keys: Sequence[str], field: str = "brush") -> tuple[str, float, float]:
    """``KEY:LO:HI`` (a parallel axis' key, or ``metric``; a category axis counts its
    values 0, 1, 2... in axis order) as ``(key, lo, hi)``; else an ``InvalidInput``."""
    key, _, rest = raw.strip().rpartition(":")
    key, _, lo_text = key.rpartition(":")
    try:
        lo, hi = float(lo_text), float(rest)
    except ValueError:
        raise InvalidInput(field, f"must be KEY:LO:HI with two numbers, got {raw!r}") from None
    if key not in keys and key != "metric":
        raise InvalidInput(field, f"{key!r} is not an axis of this view (axes: {', '.join([*keys, 'metric'])})")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise InvalidInput(field, f"LO and HI must be finite, got {raw!r}")
    return key, min(lo, hi), max(lo, hi)


def brushed(view: KnobView, brushes: Sequence[tuple[str, float, float]]) -> tuple[str, ...]:
    """The exp ids of the trials inside every brush (each ``(axis key or metric, lo, hi)``):
    a trial without a value on a brushed axis is outside it."""
    index = {a.key: i for i, a in enumerate(view.axes)}
    out = []
    for p in view.points:
        inside = True
        for key, lo, hi in brushes:
            if key == "metric":
                value: Any = p.metric
            else:
                axis = view.axes[index[key]]
                value = p.values[index[key]]
                if axis.kind == "category" and value is not None:
                    value = axis.categories.index(value) if value in axis.categories else None
            if value is None or not lo <= float(value) <= hi:
                inside = False
                break
        if inside:
            out.append(p.exp_id)
    return tuple(out)
