"""Domain values and rules: failure labels, the trial record, what counts as "best".

Pure Python, no database and no I/O. The store, the renderer, the TSV formats and every
face (HTTP, CLI, MCP, pages) share these definitions, so a rule is written once. The
fields' tables and limits (and the check of ``extra``) live in :mod:`lineage.field_limits`,
re-exported here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import TYPE_CHECKING, Any

from lineage.errors import InvalidInput

# the fields' tables and limits have a module of their own; re-exported here, where the
# rest of the code imports them from
from lineage.field_limits import (
    CLIP_SCALE_COLUMNS,
    DURATION_COLUMNS,
    FIELDKIT_COLUMNS,
    FLOAT_COLUMNS,
    FRACTION_COLUMNS,
    LONG_TEXT_COLUMNS,
    MAX_DURATION_S,
    MAX_EXTRA_BYTES,  # noqa: F401
    MAX_EXTRA_DEPTH,  # noqa: F401
    MAX_EXTRA_KEYS,  # noqa: F401
    MAX_LONG_TEXT,
    MAX_SHORT_TEXT,
    SHORT_TEXT_COLUMNS,
    check_extra,
)

# the running state's leases have a module of their own (lineage.lease_rules); re-exported here
from lineage.lease_rules import (  # noqa: F401
    CLAIM_LEASE_FIELD,
    DEFAULT_LEASE_S,
    LEASE_SETTING,
    MAX_CLAIM_LEASE_S,
    MAX_LEASE_S,
    MIN_CLAIM_LEASE_S,
    MIN_LEASE_S,
    Lease,
    check_claim_lease,
    check_lease,
    lapse_note,
    lease_of,
)
from lineage.patches import without_patch

if TYPE_CHECKING:
    from lineage.knobs.history import KnobTry
    from lineage.knobs.sweeps import TriedBefore
    from lineage.noise import NoiseFloor, NoiseVerdict
    from lineage.similar import Similar


class FailureLabel(str, Enum):
    """Status of a trial. Value for value the vocabulary of fieldkit's ``FailureLabel``
    (:data:`FIELDKIT_LABELS`), plus the ledger's own ``running``: a trial under way, with
    an owner and a heartbeat (``lineage.service.leases``). A running trial has no outcome
    yet: it is never the best, never a failure, never a "no result", and a fieldkit or
    autoresearch file never holds it (their writers leave it out)."""

    KEEP = "keep"
    DISCARD = "discard"
    CRASH = "crash"
    EVAL_BUDGET_OVERRUN = "eval_budget_overrun"
    TRAIN_BUDGET_OVERRUN = "train_budget_overrun"
    SIZE_BLOCKED = "size_blocked"
    PREFLIGHT_CRASH = "preflight_crash"
    HARNESS_ABORT = "harness_abort"
    DISQUALIFIED = "disqualified"
    BASELINE = "baseline"
    RUNNING = "running"

    @property
    def is_informational(self) -> bool:
        """False for ``harness_abort`` (a kill that says nothing about the hypothesis) and
        ``running`` (nothing to say yet)."""
        return self is not FailureLabel.HARNESS_ABORT and self is not FailureLabel.RUNNING

    @property
    def is_settled(self) -> bool:
        """False only for ``running``: the trial has no outcome yet."""
        return self is not FailureLabel.RUNNING

    @classmethod
    def parse(cls, raw: str, *, field_name: str = "status") -> FailureLabel:
        try:
            return cls(raw)
        except ValueError:
            known = ", ".join(label.value for label in cls)
            raise InvalidInput(field_name, f"unknown status {raw!r}; known: {known}") from None


#: The labels fieldkit knows (every one but ``running``), in fieldkit's order.
FIELDKIT_LABELS: tuple[FailureLabel, ...] = tuple(label for label in FailureLabel if label.is_settled)

#: Labels of trials that did not produce a result: a metric of 0 on one is "no result".
NO_RESULT_LABELS: frozenset[FailureLabel] = frozenset(
    {
        FailureLabel.CRASH,
        FailureLabel.PREFLIGHT_CRASH,
        FailureLabel.TRAIN_BUDGET_OVERRUN,
        FailureLabel.EVAL_BUDGET_OVERRUN,
        FailureLabel.HARNESS_ABORT,
        FailureLabel.SIZE_BLOCKED,
        FailureLabel.DISQUALIFIED,
    }
)
#: Metric values that mean "no result" on any trial (the sentinels loops write).
NO_RESULT_NUMBERS: frozenset[float] = frozenset({-999.0, -9999.0})


def is_no_result(value: float, label: FailureLabel | None) -> bool:
    """Whether a reported metric ``value`` means "no result": a sentinel
    (:data:`NO_RESULT_NUMBERS`) on any trial, or ``0`` on a trial of a label in
    :data:`NO_RESULT_LABELS` (a crash reported the autoresearch way). The one rule of
    every writer: file imports, ``lineage watch``, ``lineage record``, the HTTP API, MCP."""
    return value in NO_RESULT_NUMBERS or (value == 0.0 and label in NO_RESULT_LABELS)


class BestPolicy(str, Enum):
    """Which trials may be "the best" of a project.

    ``kept`` (default, the product's promise): the best core_metric among ``keep`` and
    ``baseline`` trials. ``fieldkit``: fieldkit 0.34.1's ``best()``, every status but
    ``harness_abort`` (and the ledger's ``running``, which fieldkit never sees), so a
    ``discard`` with a better metric can become best.
    In both, ties go to the earliest trial, and with no scored eligible trial the first
    trial that may stand in (:meth:`fallback_statuses`: eligible and not a "no result",
    so never a crash or a running trial) is the best.
    """

    KEPT = "kept"
    FIELDKIT = "fieldkit"

    def eligible_statuses(self) -> frozenset[str]:
        if self is BestPolicy.KEPT:
            return frozenset({FailureLabel.KEEP.value, FailureLabel.BASELINE.value})
        return frozenset(label.value for label in FailureLabel if label.is_informational)

    def fallback_statuses(self) -> frozenset[str]:
        """Statuses of a trial that may stand in for the best while nothing eligible is
        scored: eligible ones that are not a "no result" (a first-trial crash is never
        the best, nor the root of the kept chain)."""
        return self.eligible_statuses() - {label.value for label in NO_RESULT_LABELS}


@dataclass(slots=True)
class Trial:
    """One trial: fieldkit's 17 fields, the clip-scale statistics, and free ``extra``.

    Text fields are ``""`` when absent (as in fieldkit), numbers are ``None``.
    ``seq`` is the insertion order within the project (the file order of a TSV).

    Treat it as a value: derive changed copies with :meth:`with_changes`. It is not
    ``frozen`` because a frozen dataclass's ``__init__`` is about ten times slower, and
    the store builds one per row (100,000 on an import, thousands per prompt).
    """

    exp_id: str
    timestamp: str = ""
    specialist: str = ""
    parent_exp: str = ""
    baseline_exp: str = ""
    domain: str = ""
    hypothesis: str = ""
    expected_delta: str = ""
    status: FailureLabel = FailureLabel.DISCARD
    core_metric: float | None = None
    val_bpb: float | None = None
    delta_vs_best: float | None = None
    train_s: float | None = None
    total_s: float | None = None
    job_name: str = ""
    snapshot_path: str = ""
    notes: str = ""
    ig_clip_scale_mean: float | None = None
    ig_clip_scale_std: float | None = None
    ig_clip_scale_min: float | None = None
    ig_clip_scale_max: float | None = None
    ig_clip_scale_frac_low: float | None = None
    ig_clip_scale_frac_high: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    seq: int | None = None
    created_at: str | None = None
    updated_at: str | None = None

    @property
    def label(self) -> str:
        """The rendering of the id that fieldkit uses everywhere: ``exp_000``."""
        return f"exp_{self.exp_id}"

    def with_changes(self, **changes: Any) -> Trial:
        """A copy with ``changes`` applied (``dataclasses.replace``, minus its introspection cost)."""
        unknown = changes.keys() - _TRIAL_FIELD_SET
        if unknown:
            raise TypeError(f"Trial has no field {sorted(unknown)[0]!r}")
        return Trial(*[changes[name] if name in changes else getattr(self, name) for name in TRIAL_FIELD_NAMES])

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON values (the status as its word, ``extra`` a dict); read
        by name from :data:`TRIAL_FIELD_NAMES`, without per-call field introspection, since
        every trial a face returns goes through here."""
        out = {name: getattr(self, name) for name in TRIAL_FIELD_NAMES}
        out["status"] = self.status.value if isinstance(self.status, FailureLabel) else self.status
        out["extra"] = dict(self.extra)
        return out


TRIAL_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Trial))
_TRIAL_FIELD_SET = frozenset(TRIAL_FIELD_NAMES)
#: Fields a writer may set (the rest are the store's: seq and the timestamps).
WRITABLE_FIELDS: tuple[str, ...] = FIELDKIT_COLUMNS + CLIP_SCALE_COLUMNS + ("extra",)


def is_better(candidate: float, incumbent: float, *, lower_is_better: bool) -> bool:
    """Strictly better under the project's direction (ties are not better)."""
    return candidate < incumbent if lower_is_better else candidate > incumbent


def metric_delta(metric: float | None, best_metric: float | None) -> float | None:
    """``delta_vs_best`` as the seed defines it: metric minus the best before the trial."""
    if metric is None or best_metric is None:
        return None
    return metric - best_metric


class RunningBest:
    """The running best over a project's trials in insertion order: the one rule behind
    every ``delta_vs_best`` of a sequence (imports, watch, delta refreshes, charts, plots).

    :meth:`see` gives a trial's delta against the best *before* it (metric minus that
    best; None without either), then moves the best when the trial is eligible under the
    project's policy, has a metric and is strictly better. ``best`` is the running value.
    """

    __slots__ = ("_eligible", "_lower", "best")

    def __init__(self, policy: BestPolicy, lower_is_better: bool, best: float | None = None) -> None:
        self._eligible = policy.eligible_statuses()
        self._lower = lower_is_better
        self.best = best

    @classmethod
    def of(cls, project: Project, best: float | None = None) -> RunningBest:
        return cls(project.best_policy, project.lower_is_better, best)

    def see(self, status: FailureLabel | str, metric: float | None) -> float | None:
        """The delta of a trial with ``status`` and ``metric``; then the best moves past it."""
        delta = None if metric is None or self.best is None else metric - self.best
        self.offer(status if isinstance(status, str) else status.value, metric)
        return delta

    def offer(self, status: str, metric: float | None) -> bool:
        """Move the best to ``metric`` if a trial with ``status`` and ``metric`` beats it; say
        whether it did."""
        if metric is None or status not in self._eligible:
            return False
        if self.best is None or (metric < self.best if self._lower else metric > self.best):
            self.best = metric
            return True
        return False


def beats_best(project: Project, trial: Trial, best_before: Trial | None) -> bool:
    """Whether ``trial`` becomes the project's best over ``best_before`` (its policy's
    statuses, a metric, strictly better in the project's direction)."""
    if trial.core_metric is None or trial.status.value not in project.best_policy.eligible_statuses():
        return False
    if best_before is None or best_before.core_metric is None:
        return True
    return is_better(trial.core_metric, best_before.core_metric, lower_is_better=project.lower_is_better)


#: The status a writer sends to let the ledger decide keep or discard (:func:`auto_verdict`),
#: inside the write's transaction, against the best at that moment.
AUTO_STATUS = "auto"


def check_keep_margin(value: Any) -> float:
    """A writer's ``keep_margin``: a finite number >= 0; :class:`InvalidInput` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InvalidInput("keep_margin", f"must be a finite number >= 0, got {value!r}")
    return float(value)


def auto_verdict(
    project: Project,
    metric: float | None,
    best: Trial | None,
    margin: float = 0.0,
    noise: NoiseFloor | None = None,
) -> FailureLabel:
    """``keep`` when ``metric`` beats ``best`` (the project's best when the write commits)
    strictly, by at least ``margin``, in the project's direction, else ``discard``: a tie
    never keeps, and neither does a trial with no metric. With no scored best, ``keep``.
    An improvement equal to the margin up to float rounding (``1.0 - 0.9`` against 0.1)
    counts, as the trainer's outcome rule always said.

    ``noise``: the project's noise floor (``lineage.noise``); when the project chose
    ``auto_keep_above_noise`` and σ is known, the margin is at least k·σ, so a gain
    within noise is a discard."""
    if metric is None:
        return FailureLabel.DISCARD
    if best is None or best.core_metric is None:
        return FailureLabel.KEEP
    if noise is not None and noise.auto_above_noise and noise.threshold is not None:
        margin = max(margin, noise.threshold)
    improvement = best.core_metric - metric if project.lower_is_better else metric - best.core_metric
    enough = improvement >= margin or math.isclose(improvement, margin, rel_tol=1e-9, abs_tol=1e-12)
    return FailureLabel.KEEP if improvement > 0.0 and enough else FailureLabel.DISCARD


#: validate_trial's loops, made once (the same names, in the same order, as the sets give)
_FLOAT_NAMES = tuple(FLOAT_COLUMNS)
_TEXT_LIMITS = tuple(
    (name, MAX_LONG_TEXT if name in LONG_TEXT_COLUMNS else MAX_SHORT_TEXT)
    for name in LONG_TEXT_COLUMNS | SHORT_TEXT_COLUMNS
)
_TEXT_NAMES = tuple(SHORT_TEXT_COLUMNS | LONG_TEXT_COLUMNS)


def validate_trial(trial: Trial) -> Trial:
    """Check every field of ``trial``; raise :class:`InvalidInput` naming the first bad one."""
    if not trial.exp_id or not trial.exp_id.strip():
        raise InvalidInput("exp_id", "must not be empty")
    if trial.exp_id != trial.exp_id.strip() or any(c in trial.exp_id for c in "\t\r\n/"):
        raise InvalidInput("exp_id", "must not contain whitespace at its ends, tabs, newlines or '/'")
    if not isinstance(trial.status, FailureLabel):
        raise InvalidInput("status", f"must be a failure label, got {trial.status!r}")
    for name in _FLOAT_NAMES:
        value = getattr(trial, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidInput(name, f"must be a number, got {value!r}")
        if not math.isfinite(value):
            raise InvalidInput(name, f"must be finite, got {value!r}")
        if name in DURATION_COLUMNS and not 0 <= value <= MAX_DURATION_S:
            raise InvalidInput(name, f"must be from 0 to {MAX_DURATION_S:g} seconds, got {value!r}")
        if name in FRACTION_COLUMNS and not 0.0 <= value <= 1.0:
            raise InvalidInput(name, f"must lie in [0, 1], got {value!r}")
    for name, limit in _TEXT_LIMITS:
        value = getattr(trial, name)
        if not isinstance(value, str):
            raise InvalidInput(name, f"must be text, got {type(value).__name__}")
        if len(value) > limit:
            raise InvalidInput(name, f"is {len(value)} characters long; the limit is {limit}")
        if "\x00" in value:
            raise InvalidInput(name, "must not contain NUL characters")
    if trial.parent_exp and trial.parent_exp == trial.exp_id:
        raise InvalidInput("parent_exp", f"trial {trial.exp_id!r} cannot be its own parent")
    check_extra(trial.extra)
    return trial


def trial_from_mapping(data: Mapping[str, Any], *, exp_id: str | None = None) -> Trial:
    """Build a Trial from a plain mapping (JSON body, TSV row), rejecting unknown keys."""
    unknown = set(data) - _TRIAL_FIELD_SET
    if unknown:
        raise InvalidInput(sorted(unknown)[0], "is not a trial field")
    values = dict(data)
    if exp_id is not None:
        values["exp_id"] = exp_id
    if "status" in values and not isinstance(values["status"], FailureLabel):
        values["status"] = FailureLabel.parse(str(values["status"]))
    for name in _TEXT_NAMES:
        if name in values and values[name] is None:
            values[name] = ""
    values.setdefault("extra", {})
    if values.get("extra") is None:
        values["extra"] = {}
    return validate_trial(Trial(**values))


def ordered_best(candidates: Iterable[Trial], *, lower_is_better: bool) -> Trial | None:
    """The best of already-eligible, scored ``candidates``; ties to the lowest ``seq``."""
    best: Trial | None = None
    for trial in candidates:
        if trial.core_metric is None:
            continue
        if best is None or is_better(trial.core_metric, best.core_metric, lower_is_better=lower_is_better):  # type: ignore[arg-type]
            best = trial
        elif trial.core_metric == best.core_metric and (trial.seq or 0) < (best.seq or 0):
            best = trial
    return best


#: Project slugs: what URLs and CLI flags use to name a project.
SLUG_ALPHABET = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
MAX_SLUG = 100


@dataclass(frozen=True, slots=True)
class Project:
    """One research loop: a sweep of trials against one metric."""

    slug: str
    title: str = ""
    metric_name: str = "core_metric"
    lower_is_better: bool = True
    best_policy: BestPolicy = BestPolicy.KEPT
    prompt_template: str | None = None
    source_format: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    revision: int = 0
    trial_count: int = 0
    id: int | None = None
    created_at: str | None = None
    updated_at: str | None = None

    @property
    def stored_id(self) -> int:
        """The project's row id. A project read from the store always has one; only a
        project not yet inserted has ``id=None``, and no store call takes such a one."""
        if self.id is None:
            raise ValueError(f"project {self.slug!r} has no id: it was not read from the store")
        return self.id

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "id"}
        out["best_policy"] = self.best_policy.value
        out["settings"] = dict(self.settings)
        return out


#: Longest metric name of a project.
MAX_METRIC_NAME = 100
#: Characters a metric name may not hold: control characters (tabs and every line break
#: among them), U+2028/U+2029 and ``|``. The name is one table cell and one line of the
#: prompt; the same class is the OpenAPI pattern (ECMA 262 and Python read it alike).
METRIC_NAME_FORBIDDEN = "\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029|"
METRIC_NAME_PATTERN = f"^[^{METRIC_NAME_FORBIDDEN}]{{1,{MAX_METRIC_NAME}}}$"
_METRIC_NAME = re.compile(METRIC_NAME_PATTERN)
_METRIC_NAME_BAD = re.compile(f"[{METRIC_NAME_FORBIDDEN}]")


def check_metric_name(value: object) -> str:
    """``value`` if it is a metric name (:data:`METRIC_NAME_PATTERN`), else InvalidInput."""
    if not isinstance(value, str) or not _METRIC_NAME.fullmatch(value):
        raise InvalidInput(
            "metric_name",
            f"must be 1-{MAX_METRIC_NAME} characters without tabs, line breaks, other control characters or '|'",
        )
    return value


def clean_metric_name(name: str) -> str:
    """A metric name made from a file's column header: ``|`` becomes ``/``, tabs, line
    breaks and other control characters a space; at most MAX_METRIC_NAME characters."""
    cleaned = _METRIC_NAME_BAD.sub(lambda m: "/" if m.group() == "|" else " ", name).strip()
    return (cleaned or "metric")[:MAX_METRIC_NAME]


def validate_slug(slug: str) -> str:
    if not slug:
        raise InvalidInput("slug", "must not be empty")
    if len(slug) > MAX_SLUG:
        raise InvalidInput("slug", f"is {len(slug)} characters long; the limit is {MAX_SLUG}")
    bad = sorted(set(slug) - SLUG_ALPHABET)
    if bad:
        raise InvalidInput("slug", f"may hold only a-z, 0-9, '-', '_' and '.'; found {''.join(bad)!r}")
    return slug


def next_exp_id(max_numeric: int | None, width: int = 3) -> str:
    """The exp_id after ``max_numeric`` (the largest all-digit exp_id so far), zero-padded."""
    value = 0 if max_numeric is None else max_numeric + 1
    return str(value).zfill(width)


def check_window(name: str, value: int, *, minimum: int) -> None:
    """A page or window size from a caller: an integer from ``minimum`` to 100,000."""
    if not isinstance(value, int) or value < minimum or value > 100_000:
        raise InvalidInput(name, f"must be an integer from {minimum} to 100000, got {value!r}")


#: Longest idempotency key, in characters (printable ASCII without spaces).
MAX_IDEMPOTENCY_KEY = 255
#: Most trials in one JSON batch (``Ledger.record_trials``, ``POST ./trials:batch``, MCP ``record_trials``).
MAX_BATCH = 1000
#: The idempotency-key alphabet as a regular expression (schemas add the length bounds).
IDEMPOTENCY_KEY_PATTERN = r"^[!-~]+$"


def check_idempotency_key(key: str, *, field_name: str = "idempotency_key") -> str:
    """``key`` if it is 1-255 printable ASCII characters without spaces, else :class:`InvalidInput`."""
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY or not all("!" <= c <= "~" for c in key):
        raise InvalidInput(field_name, f"must be 1-{MAX_IDEMPOTENCY_KEY} printable ASCII characters without spaces")
    return key


@dataclass(frozen=True, slots=True)
class RecordResult:
    """What recording a trial did: the stored trial, whether it was new, and the best."""

    trial: Trial
    created: bool
    best_before: Trial | None
    is_new_best: bool
    #: earlier trials close to this one (lineage.similar.PRIOR_THRESHOLD); new trials only
    similar_prior: tuple[Similar, ...] = ()
    #: the writer left ``parent_exp`` out and the ledger made the branch tip (the last keep) the parent
    parent_defaulted: bool = False
    #: what the recording rules did to the body (lineage.service.recording.prepare_record)
    warnings: tuple[str, ...] = ()
    #: earlier trials that changed a knob this one changes (lineage.service.knobs.same_knob);
    #: asked with similar_prior, new trials only
    same_knob: tuple[KnobTry, ...] = ()
    #: its delta against the project's noise floor (lineage.noise.judge); new trials only
    noise: NoiseVerdict | None = None
    #: whether it is a sweep or a repeat of earlier trials (lineage.knobs.sweeps), with same_knob
    tried_before: tuple[TriedBefore, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON every face answers a recording with (the trial without its git patch:
        :mod:`lineage.patches`)."""
        return {
            "trial": without_patch(self.trial.to_dict()),
            "created": self.created,
            "is_new_best": self.is_new_best,
            "best_before": self.best_before.exp_id if self.best_before is not None else None,
            "parent_defaulted": self.parent_defaulted,
            "warnings": list(self.warnings),
            "similar_prior": [similar.to_dict() for similar in self.similar_prior],
            "same_knob": [attempt.to_dict() for attempt in self.same_knob],
            "noise": self.noise.to_dict() if self.noise is not None else None,
            "tried_before": [said.to_dict() for said in self.tried_before],
        }


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import stored -- or, for a preview, would store -- and what it decided:
    the format read (``auto`` resolved), the file's metric column and the project's
    metric name, the direction and how it was decided, the warnings, and the physical
    lines kept as text (not records). Every face shows it from :meth:`to_dict`."""

    project: str
    rows: int
    warnings: tuple[str, ...] = ()
    #: the format the file was read as (``fieldkit``, ``autoresearch``, ``generic``)
    format: str = ""
    #: the file's metric column (``core_metric`` for fieldkit)
    metric: str | None = None
    #: the project's metric (a long-format file's: one of the names in its name column)
    metric_name: str | None = None
    lower_is_better: bool | None = None
    #: how the direction was decided ("from the name 'val_bpb' and the kept values")
    direction: str = ""
    #: 1-based physical lines kept as text: stray output, a trailing summary (not blank lines)
    text_lines: tuple[int, ...] = ()
    #: the project was created by this import
    created: bool = False
    #: False for a preview: everything checked, nothing stored
    committed: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The JSON every face answers an import with."""
        return {
            "project": self.project,
            "rows": self.rows,
            "committed": self.committed,
            "created": self.created,
            "format": self.format,
            "metric": self.metric,
            "metric_name": self.metric_name,
            "lower_is_better": self.lower_is_better,
            "direction": self.direction,
            "warnings": list(self.warnings),
            "text_lines": list(self.text_lines),
        }
