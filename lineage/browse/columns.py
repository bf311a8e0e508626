"""Columns that follow the project: which columns a project's pages show, and in what order.

One rule for every page (chain, tree, trials table, compare, trial page, knob view):

* the **file's columns**: those of the results-file layout stored with an imported or
  watched project (``project.settings["results_file"]``) that land in ``extra``
  (``commit``, ``memory_gb``...), then the other ``extra`` keys of the newest trials
  (found in SQL, :meth:`Store.columns.extra_keys`); keys starting with ``_`` are the formats'
  bookkeeping, never columns;
* the **trial fields** that hold a value in at least one of the project's newest
  ``PRESENCE_SAMPLE`` trials (one SQL aggregate, :meth:`Store.columns.field_presence`), and on
  a page of given trials (trial page, compare) those that any of them fills: a loop that never wrote ``specialist`` or
  the A²TGPO statistics does not get empty columns for them; ``val_bpb`` that only
  mirrors the metric is not a column of its own.

Nothing is cached in the process: several servers share one database, and a project's
columns change as trials arrive. Column keys, as URLs write them (``?cols=``):
``exp_id``, ``status``, ``metric`` (also the project's metric name or ``core_metric``),
``delta_vs_best``, ``parent_exp``..., ``when`` (the trial's timestamp or its recording
time), ``extra.KEY``.

Owns: :class:`Column`, :class:`ProjectColumns`, :func:`columns_of`, :class:`ColumnUses`
(``project_columns``, mixed into ``Ledger``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lineage.domain import FailureLabel, Project, Trial
from lineage.errors import InvalidInput
from lineage.formats.autoresearch.layout import ROW_KEY, SETTINGS_KEY, Layout
from lineage.trial_fields import CLIENT_KEYS

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from lineage.store import Store

#: How many of the newest trials the ``extra`` keys are looked for in.
EXTRA_SAMPLE = 2000
#: How many of the newest trials decide which trial fields are columns (a field only
#: older trials fill still shows on their own pages and compare, and ``?cols=`` takes it).
PRESENCE_SAMPLE = 5000
#: File columns a page shows by default (the picker reaches the rest).
DEFAULT_FILE_COLUMNS = 6
#: Most file columns a project lists (its layout's, then the most common ``extra`` keys):
#: a trial with thousands of keys must not make every page list them all. ``?cols=`` takes
#: any ``extra.KEY`` beyond them.
MAX_FILE_COLUMNS = 100
#: Prefix of an ``extra`` column's key.
EXTRA = "extra."

#: Trial fields as columns: key -> (label, kind). Kinds tell a page how to draw a cell:
#: exp, status, metric, delta, link (a trial id), number, seconds, text, long, when.
_FIELDS: dict[str, tuple[str, str]] = {
    "exp_id": ("exp", "exp"),
    "status": ("status", "status"),
    "metric": ("metric", "metric"),
    "delta_vs_best": ("delta_vs_best", "delta"),
    "parent_exp": ("parent_exp", "link"),
    "baseline_exp": ("baseline_exp", "link"),
    "specialist": ("specialist", "text"),
    "domain": ("domain", "text"),
    "expected_delta": ("expected_delta", "text"),
    "val_bpb": ("val_bpb", "number"),
    "train_s": ("train_s", "seconds"),
    "total_s": ("total_s", "seconds"),
    "job_name": ("job_name", "text"),
    "snapshot_path": ("snapshot_path", "text"),
    "ig_clip_scale_mean": ("ig_clip_scale_mean", "number"),
    "ig_clip_scale_std": ("ig_clip_scale_std", "number"),
    "ig_clip_scale_min": ("ig_clip_scale_min", "number"),
    "ig_clip_scale_max": ("ig_clip_scale_max", "number"),
    "ig_clip_scale_frac_low": ("ig_clip_scale_frac_low", "number"),
    "ig_clip_scale_frac_high": ("ig_clip_scale_frac_high", "number"),
    "hypothesis": ("hypothesis", "long"),
    "notes": ("notes", "long"),
    "timestamp": ("timestamp", "text"),
    "when": ("when", "when"),
    "seq": ("seq", "number"),
}
_SHORT = {"delta_vs_best": "Δ", "parent_exp": "parent", "baseline_exp": "baseline"}
#: Shown whenever the project has trials (whatever they hold).
_ALWAYS = frozenset({"exp_id", "status", "metric", "when", "seq"})
#: Fields that are numbers (a knob view's numeric axis).
NUMBER_KINDS = frozenset({"metric", "delta", "number", "seconds"})
#: The trials table's default: these fields (when present), the file's columns after the
#: first four.
_TABLE_HEAD = ("exp_id", "status", "metric", "delta_vs_best", "parent_exp")
_TABLE_TAIL = ("specialist", "domain", "hypothesis", "when")
#: Fields of the trial page and compare (hypothesis and notes have their own place).
_DETAIL = (
    "status",
    "metric",
    "delta_vs_best",
    "parent_exp",
    "baseline_exp",
    "specialist",
    "domain",
    "expected_delta",
    "val_bpb",
    "train_s",
    "total_s",
    "job_name",
    "snapshot_path",
    "timestamp",
    "ig_clip_scale_mean",
    "ig_clip_scale_std",
    "ig_clip_scale_min",
    "ig_clip_scale_max",
    "ig_clip_scale_frac_low",
    "ig_clip_scale_frac_high",
    "seq",
)


@dataclass(frozen=True, slots=True)
class Column:
    """One column a page can show: ``key`` as URLs write it, ``label`` as headers do."""

    key: str
    label: str
    kind: str
    #: ``field`` (a trial field) or ``extra`` (a key of ``Trial.extra``)
    source: str
    #: the trial field or ``extra`` key the value comes from
    name: str

    @property
    def numeric(self) -> bool:
        return self.kind in NUMBER_KINDS

    @property
    def short(self) -> str:
        """The label of a narrow table header."""
        return _SHORT.get(self.key, self.label)

    def value(self, trial: Trial) -> Any:
        if self.source == "extra":
            return trial.extra.get(self.name)
        if self.key == "metric":
            return trial.core_metric
        if self.key == "when":
            return trial_time(trial)
        value = getattr(trial, self.name)
        return value.value if self.key == "status" else value

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "kind": self.kind, "source": self.source, "name": self.name}


@dataclass(frozen=True, slots=True)
class ProjectColumns:
    """The columns of one project: every one it has, in page order, and the defaults."""

    project: Project
    #: trial field -> trials holding a value in it
    presence: Mapping[str, int]
    #: the file's columns (``extra`` keys), file order first
    file: tuple[Column, ...]
    #: trial fields with a value somewhere in the project, in page order
    fields: tuple[Column, ...]
    #: whether the newest trials hold more ``extra`` keys than :data:`MAX_FILE_COLUMNS`
    more_file: bool = False
    #: the statuses the project's trials have, in the ledger's label order (a status
    #: filter offers these: an autoresearch loop's keep, discard and crash, not ten)
    statuses: tuple[str, ...] = ()

    @property
    def all(self) -> tuple[Column, ...]:
        """Every column, as the picker lists them: fields first, then the file's."""
        head = [c for c in self.fields if c.key in _TABLE_HEAD or c.kind == "metric"]
        rest = [c for c in self.fields if c not in head]
        return (*head, *self.file, *rest)

    def has(self, key: str) -> bool:
        return any(c.key == key for c in self.fields)

    def table_default(self) -> tuple[Column, ...]:
        """The trials table without ``?cols=``: id, status, metric, delta and parent, the
        file's first columns, then specialist, domain, hypothesis and time when present."""
        by_key = {"metric" if c.kind == "metric" else c.key: c for c in self.fields}
        head = [by_key[k] for k in _TABLE_HEAD if k in by_key]
        tail = [by_key[k] for k in _TABLE_TAIL if k in by_key]
        return (*head, *self.file[:DEFAULT_FILE_COLUMNS], *tail)

    def detail(self, trials: Sequence[Trial] = ()) -> tuple[Column, ...]:
        """The trial page's and compare's rows: the present fields and those ``trials``
        fill (less the id, the hypothesis and the notes, which have their own place) with
        the file's columns after the metric and the parent."""
        by_key = {"metric" if c.kind == "metric" else c.key: c for c in self.fields}
        unsaid = unsaid_fields(self.project)
        for key in _DETAIL:
            if (
                key not in by_key
                and key != "metric"
                and key not in unsaid
                and any(getattr(t, key) not in (None, "") for t in trials)
            ):
                by_key[key] = _field(key, self.project)
        shown = [by_key[k] for k in _DETAIL if k in by_key]
        cut = next(
            (
                i
                for i, c in enumerate(shown)
                if c.kind != "metric" and c.key not in ("status", "delta_vs_best", "parent_exp")
            ),
            len(shown),
        )
        return (*shown[:cut], *self.file, *shown[cut:])

    def brief(self, count: int = 3) -> tuple[Column, ...]:
        """The few file columns a one-line view (chain, tree) adds to each trial."""
        return self.file[:count]

    def shown_extra_keys(self) -> frozenset[str]:
        return frozenset(c.name for c in self.file)

    def column(self, key: str) -> Column:
        """The column ``key`` names: a known column, the metric under any of its names, or
        any ``extra.KEY`` (also one the newest trials lack). Unknown: ``InvalidInput``."""
        key = key.strip()
        if key in ("core_metric", "metric", self.project.metric_name):
            metric = next((c for c in self.fields if c.kind == "metric"), None)
            if metric is not None and (
                key != self.project.metric_name or not any(c.key == key and c.kind != "metric" for c in self.fields)
            ):
                return metric
        for column in (*self.fields, *self.file):
            if column.key == key:
                return column
        if key.startswith(EXTRA) and len(key) > len(EXTRA):
            name = key[len(EXTRA) :]
            return Column(key, name, "text", "extra", name)
        if key in _FIELDS:  # a field empty across the project, asked for by name
            return _field(key, self.project)
        known = ", ".join(c.key for c in self.all)
        raise InvalidInput("cols", f"unknown column {key!r}; known: {known} (or extra.KEY)")

    def pick(self, keys: Iterable[str] | None, default: Sequence[Column] | None = None) -> tuple[Column, ...]:
        """The columns of a ``?cols=`` list (names split on commas, each once, in order);
        ``default`` (the table's) when it names none."""
        chosen: list[Column] = []
        for raw in keys or ():
            for part in str(raw).split(","):
                if part.strip():
                    column = self.column(part)
                    if column not in chosen:
                        chosen.append(column)
        if not chosen:
            return tuple(default if default is not None else self.table_default())
        return tuple(chosen)


def trial_time(trial: Trial) -> str | None:
    """When the trial ran, as a page shows it: its own ``timestamp``, else the time the
    ledger recorded it; None for a row of a results file that has no time (the import's
    time would say every row ran at once)."""
    if trial.timestamp:
        return trial.timestamp
    return None if ROW_KEY in trial.extra else trial.created_at


def _layout(project: Project) -> Layout | None:
    data = project.settings.get(SETTINGS_KEY) if project.settings else None
    return Layout.from_dict(data) if isinstance(data, Mapping) else None


def unsaid_fields(project: Project) -> frozenset[str]:
    """Trial fields the import fills for a results file that never says them: the first
    row as every row's ``baseline_exp`` (autoresearch has no baseline beyond its first
    row). Pages show none of them, unless the file has a column for it."""
    layout = _layout(project)
    if layout is None or "baseline_exp" in layout.fields.values():
        return frozenset()
    return frozenset({"baseline_exp"})


def said_baseline(project: Project, trial: Trial) -> str:
    """The baseline the trial's writer named (empty when it is the import's filler)."""
    if ROW_KEY in trial.extra and "baseline_exp" in unsaid_fields(project):
        return ""
    return trial.baseline_exp


def _field(key: str, project: Project, presence: Mapping[str, int] | None = None) -> Column:
    label, kind = _FIELDS[key]
    name = {"metric": "core_metric", "when": "timestamp"}.get(key, key)
    if key == "metric":
        label = project.metric_name
        key = metric_key(project, presence or {})
    return Column(key, label, kind, "field", name)


def metric_key(project: Project, presence: Mapping[str, int]) -> str:
    """The metric column's key: the project's metric name (``val_bpb``) when no other
    column is called that, else ``metric``."""
    name = project.metric_name
    clash = name in _FIELDS and not (name == "val_bpb" and not presence.get("val_bpb"))
    return "metric" if clash or name.startswith(EXTRA) or "," in name or not name.strip() else name


def _file_columns(project: Project, sampled: Sequence[tuple[str, bool, int]]) -> tuple[Column, ...]:
    """The stored layout's ``extra`` columns in file order, then the sampled keys (the
    caller keeps the first :data:`MAX_FILE_COLUMNS`)."""
    columns: dict[str, Column] = {}
    numeric_sampled = {key: numeric for key, numeric, _ in sampled}
    # the cells a trial field already shows (a status word, a metric cell that is not a
    # number) are kept in ``extra`` for the round trip: not columns of their own
    shown_elsewhere: set[str] = set(CLIENT_KEYS)
    layout = _layout(project)
    if layout is not None:
        mapped = {
            layout.metric,
            layout.status,
            layout.description,
            layout.id_column,
            layout.parent,
            layout.long_names,
            *layout.fields,
        }
        shown_elsewhere.update(layout.extra_key(name) for name in mapped if name)
        for name in layout.columns:
            if name in mapped:
                continue
            key = layout.extra_key(name)
            numeric = name in layout.numeric or numeric_sampled.get(key, False)
            columns[key] = Column(EXTRA + key, name, "number" if numeric else "text", "extra", key)
    for key, numeric, _count in sampled:
        if key.startswith("_") or key in columns or key in shown_elsewhere:
            continue
        columns[key] = Column(EXTRA + key, key, "number" if numeric else "text", "extra", key)
    return tuple(columns.values())


def columns_of(store: Store, conn: Connection, project: Project) -> ProjectColumns:
    """The columns of ``project``: two SQL reads (the field aggregate, the ``extra`` keys
    of the newest trials); see the module's doc for the rule."""
    presence = store.columns.field_presence(conn, project, sample=PRESENCE_SAMPLE)
    sampled = store.columns.extra_keys(conn, project, sample=EXTRA_SAMPLE, limit=MAX_FILE_COLUMNS + 1)
    fields = []
    for key in _FIELDS:
        if key in _ALWAYS:
            present = presence.get("", 0) > 0 or key != "when"
        else:
            present = presence.get({"metric": "core_metric"}.get(key, key), 0) > 0
        if present:
            fields.append(_field(key, project, presence))
    for key in unsaid_fields(project):
        presence = {**presence, key: 0}
    fields = [c for c in fields if c.key not in unsaid_fields(project)]
    file = _file_columns(project, sampled)
    order = [label.value for label in FailureLabel]
    counts = store.pages.status_counts(conn, project)
    statuses = tuple(sorted(counts, key=lambda s: (order.index(s) if s in order else len(order), s)))
    return ProjectColumns(
        project=project,
        presence=presence,
        file=file[:MAX_FILE_COLUMNS],
        fields=tuple(fields),
        more_file=len(file) > MAX_FILE_COLUMNS,
        statuses=statuses,
    )


def project_columns(store: Store, project_slug: str) -> ProjectColumns:
    """The columns ``project_slug``'s pages show (:mod:`lineage.browse.columns`)."""
    with store.read() as conn:
        return columns_of(store, conn, store.projects.project(conn, project_slug))
