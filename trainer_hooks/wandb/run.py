"""A wandb-style run over a :class:`~trainer_hooks.client.LedgerClient`: ``Run``, its
``Config`` and its ``Summary``. The mapping of each call is in :mod:`trainer_hooks.wandb`'s
docstring; the value rules in :mod:`trainer_hooks.wandb.values`.

Steps follow wandb's rule: a run has a current step (0 at the start). ``log(d)`` adds
``d`` to the current step and commits it (the step advances by one); ``commit=False``
adds without committing; ``log(d, step=s)`` with ``s`` above the current step commits
what is pending and moves to ``s`` without committing (``commit=True`` commits at once);
``s`` below the current step is refused with a warning (wandb does the same). A key
logged twice in one uncommitted step keeps its last value. Committed values go to the
client as telemetry points at their step, and the summary takes each key's last value
(or its min, max, mean or first, when :meth:`Run.define_metric` asks for one).

The trial is planned (and its project created when missing) at the run's first ``log``,
``alert`` or ``finish``, not at ``init``: a script's ``define_metric`` calls come right
after ``init``, and what they say of the metric's direction (``goal="maximize"``,
``summary="max"``) is the direction of a project the run creates. Declared later, or
against an existing project, the direction is checked instead: a project that goes the
other way is left as it is, with a warning
(:func:`~trainer_hooks.client.outcome.contradiction`).
"""

from __future__ import annotations

import atexit
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Literal

from trainer_hooks.callbacks.recorder import exception_summary
from trainer_hooks.client.outcome import failure_label
from trainer_hooks.client.points import metric_values
from trainer_hooks.wandb.standins import RUN_STANDINS, stand_in, warn_once
from trainer_hooks.wandb.values import NOT_A_NUMBER, config_items, flatten_into, json_value, scalar

if TYPE_CHECKING:
    from trainer_hooks.client import ClientReport, LedgerClient

__all__ = ["Config", "Run", "Summary", "exit_status"]

log = logging.getLogger("trainer_hooks.wandb")

#: summary entries a finished trial keeps in ``extra["summary"]``
MAX_SUMMARY_KEYS = 200
_SUMMARY_MODES = ("last", "min", "max", "mean", "first", "none")
_NOTES_CHARS = 2000


class Config(MutableMapping[str, Any]):
    """``run.config``: a mapping with attribute access (``config.lr``), ``update`` from a
    mapping, an ``argparse.Namespace`` or absl flags, and ``setdefaults``. Values are kept
    as JSON data (:func:`~trainer_hooks.wandb.values.json_value`); changing a key is
    allowed (``allow_val_change`` is accepted and not needed)."""

    def __init__(self, items: Any = None) -> None:
        object.__setattr__(self, "_items", {})
        self.update(items)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._items[name]
        except KeyError:
            raise AttributeError(f"config has no key {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._items[str(key)] = json_value(value)

    def __delitem__(self, key: str) -> None:
        del self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def update(self, d: Any = None, allow_val_change: bool | None = None, **kwargs: Any) -> None:  # type: ignore[override]
        for key, value in {**config_items(d), **kwargs}.items():
            self[key] = value

    def setdefaults(self, d: Any) -> None:
        """Set the keys of ``d`` that are not set yet."""
        for key, value in config_items(d).items():
            if key not in self._items:
                self[key] = value

    def as_dict(self) -> dict[str, Any]:
        return dict(self._items)

    def __repr__(self) -> str:
        return f"Config({self._items!r})"


class Summary(MutableMapping[str, Any]):
    """``run.summary``: each logged key's last value (module doc), and what the script
    sets itself (``run.summary["best_acc"] = 0.9``, ``run.summary.update({...})``) until
    the key is logged again. At finish the summary gives the trial's result."""

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __setitem__(self, key: str, value: Any) -> None:
        found = scalar(value)
        if found is not NOT_A_NUMBER and not isinstance(found, float):
            found = float(found)  # a 0-dim tensor set by hand: read it now
        self._items[str(key)] = found if found is not NOT_A_NUMBER else json_value(value)

    def __delitem__(self, key: str) -> None:
        del self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def numbers(self) -> dict[str, float]:
        """The finite numeric entries."""
        return {k: float(v) for k, v in self._items.items() if type(v) is float and math.isfinite(v) or type(v) is int}

    def __repr__(self) -> str:
        return f"Summary({self._items!r})"


def exit_status(exit_code: Any) -> str | None:
    """The failure label of a process exit code (``sys.exit``'s argument): None for
    success (None, 0), ``harness_abort`` for an interrupt or a termination (130, 143),
    ``crash`` otherwise (a message string exits with 1)."""
    if exit_code is None or exit_code == 0 or exit_code is False:
        return None
    if exit_code in (130, 143):
        return "harness_abort"
    return "crash"


class Run:
    """A run (module doc). Made by :func:`trainer_hooks.wandb.init`; ``client`` None is a
    disabled run (``mode="disabled"``): every call works and nothing is recorded."""

    def __init__(
        self,
        client: LedgerClient | None,
        *,
        project: str,
        name: str | None,
        notes: str | None,
        tags: tuple[str, ...],
        config: Config,
        group: str | None,
        job_type: str | None,
        metric_key: str | None,
        base_url: str | None,
        extra: Mapping[str, Any],
        keep_margin: float = 0.0,
        on_finish: Callable[[Run], None] | None = None,
        plan: Mapping[str, Any] | None = None,
        new_project: Mapping[str, Any] | None = None,
        lower_is_better: bool | None = None,
    ) -> None:
        self._client = client
        #: plan_trial's fields and ensure_project's, sent at the first log, alert or finish
        self._plan = dict(plan or {})
        self._new_project = dict(new_project or {})
        self._lower_is_better = lower_is_better
        #: what define_metric said of directions: name (key or pattern) -> declaration
        self._declared: dict[str, dict[str, Any]] = {}
        self._begun = False
        self.project = project
        self.name = name
        self.notes = notes
        self.tags = tags
        self.group = group
        self.job_type = job_type
        self.entity: str | None = None
        self.config = config
        self.summary = Summary()
        self.metric_key = metric_key
        self.keep_margin = keep_margin
        self.mode = "disabled" if client is None else "online"
        self.disabled = client is None
        self.offline = False
        self.resumed = False
        self.sweep_id: str | None = None
        self.start_time = time.time()
        self.report: ClientReport | None = None
        #: the status the run was finished with ("auto": the ledger decides keep or discard)
        self.status: str | None = None
        self._base_url = base_url
        self._extra = dict(extra)
        self._started = time.monotonic()
        self._step = 0
        self._pending: dict[str, Any] = {}
        self._names: set[str] = set()
        self._modes: dict[str, str] = {}
        self._mode_of: dict[str, str] = {}
        self._aggregates: dict[str, tuple[int, float]] = {}
        self._last_alert: dict[str, float] = {}
        self._finished = False
        self._on_finish = on_finish
        #: define_metric(step_metric=): name (key or pattern) -> the metric that is its x axis
        self._step_metrics: dict[str, str] = {}
        if client is not None and client.resumed:  # a preempted run taking up (module doc of trainer_hooks.wandb)
            self.resumed = True
            self._step = 0 if client.resumed_step is None else client.resumed_step + 1
            self.summary._items.update(client.resumed_values)
        if client is not None:
            atexit.register(self._at_exit)

    # -- what the run is ------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The run's id: names its spool file and prefixes its idempotency keys."""
        return self._client.run_id if self._client is not None else "disabled"

    @property
    def exp_id(self) -> str | None:
        """The trial's exp_id once the ledger allocated it (the ledger's, not wandb's)."""
        return self._client.exp_id if self._client is not None else None

    @property
    def url(self) -> str | None:
        """The trial's page on the ledger, once its exp_id is known."""
        exp_id = self.exp_id
        if exp_id is None or self._base_url is None:
            return None
        return f"{self._base_url.rstrip('/')}/projects/{self.project}/trials/{exp_id}"

    @property
    def dir(self) -> str | None:
        """The folder of the run's spool file (None when it keeps none: disabled, or not rank 0)."""
        client = self._client
        return str(client.spool.path.parent) if client is not None and client.active else None

    @property
    def step(self) -> int:
        return self._step

    @property
    def client(self) -> LedgerClient | None:
        return self._client

    # -- the trial -------------------------------------------------------------------------

    def _begin(self) -> None:
        """Ensure the project and plan the trial, once (module doc: at the first log, alert
        or finish)."""
        if self._begun or self._client is None:
            return
        self._begun = True
        self._client.ensure_project(
            lower_is_better=self._lower_is_better, declared=list(self._declared.values()), **self._new_project
        )
        self._client.plan_trial(
            extra={**self._extra, "config": self.config.as_dict(), "tags": list(self.tags)}, **self._plan
        )

    def _declare(self, name: str, lower_is_better: bool, by: str) -> None:
        declaration = {"name": name, "lower_is_better": lower_is_better, "by": by}
        self._declared[name] = declaration
        if self._begun and self._client is not None:  # the project exists: only checked
            self._client.ensure_project(declared=[declaration], **self._new_project)

    # -- logging ---------------------------------------------------------------------------

    def log(
        self, data: Mapping[str, Any], step: int | None = None, commit: bool | None = None, sync: bool | None = None
    ) -> None:
        """Log ``data`` at the current step (module doc for ``step`` and ``commit``)."""
        if self._finished:
            warn_once(f"finished:{id(self)}", f"run {self.id} is finished: log() calls are ignored")
            return
        if type(data) is not dict and not isinstance(data, Mapping):
            raise TypeError(f"wandb.log takes a dictionary, got {type(data).__name__}")
        if not self._begun:
            self._begin()
        if step is not None:
            step = int(step)
            if step < self._step:
                warn_once(
                    f"step:{id(self)}",
                    f"log(step={step}) is below the run's current step {self._step}: "
                    "the data is ignored (steps only increase, as in wandb)",
                )
                return
            if step > self._step:
                self._commit()
                self._step = step
        flatten_into(self._pending, data, "", self._names, self._skipped)
        if commit if commit is not None else step is None:
            self._commit()
            self._step += 1

    def _skipped(self, name: str) -> None:
        warn_once(
            f"skip:{name}",
            f"wandb.log: {name!r} is not a number (or not a valid telemetry name): "
            "it is not recorded (this warning is given once per key)",
        )

    def _commit(self) -> None:
        pending = self._pending
        if not pending:
            return
        self._pending = {}
        values = list(pending.values())
        if not all(type(v) is float or type(v) is int for v in values):
            values = metric_values(values)  # 0-dim tensors: one conversion for the step
            pending = dict(zip(pending, values))
        if self._modes:
            self._summarize(pending)
        else:
            self.summary._items.update(pending)
        if self._client is not None:
            self._client.log(self._step, pending)

    def _summarize(self, values: Mapping[str, float]) -> None:
        items = self.summary._items
        for name, value in values.items():
            mode = self._mode_of.get(name)
            if mode is None:
                mode = self._mode_of[name] = next(
                    (m for pattern, m in self._modes.items() if fnmatchcase(name, pattern)), "last"
                )
            if mode == "last":
                items[name] = value
            elif mode == "none" or not math.isfinite(value):
                continue
            elif mode == "first":
                items.setdefault(name, value)
            elif mode == "mean":
                count, total = self._aggregates.get(name, (0, 0.0))
                self._aggregates[name] = (count + 1, total + value)
                items[name] = (total + value) / (count + 1)
            else:
                current = items.get(name)
                better = min if mode == "min" else max
                items[name] = value if not isinstance(current, (int, float)) else better(current, value)

    def define_metric(
        self,
        name: str,
        step_metric: str | None = None,
        step_sync: bool | None = None,
        hidden: bool | None = None,
        summary: str | None = None,
        goal: str | None = None,
        overwrite: bool | None = None,
        **kwargs: Any,
    ) -> None:
        """How the summary keeps ``name`` (a key or a ``*`` pattern): ``summary`` is
        ``last`` (the default), ``min``, ``max``, ``mean``, ``first``, ``none``, or ``best``
        with ``goal`` ``minimize``/``maximize``; several may be given comma-separated (the
        first counts). ``step_metric`` (another key as the x axis of ``name``'s points) is
        kept in the trial's ``extra["step_metrics"]``; points stay at the run's step, where
        the step metric's own points are too. ``goal`` (or else a ``min``/``max`` summary) is the
        metric's direction (module doc)."""
        way = _goal(goal)  # "min", "max" or None
        mode = summary.split(",")[0].strip().lower() if summary else None
        if way is not None:
            self._declare(name, way == "min", f"define_metric({name!r}, goal={goal!r})")
        elif mode in ("min", "max"):
            self._declare(name, mode == "min", f"define_metric({name!r}, summary={summary!r})")
        if step_metric is not None:
            self._step_metrics[name] = str(step_metric)
            if self._client is not None and self._client.attached:
                warn_once(
                    "define_metric.attached",
                    "define_metric(step_metric=...) of an attached process is not stored: the run's owner keeps "
                    "extra['step_metrics']",
                )
        if mode is None:
            return
        if mode == "best":
            if way is None:
                raise ValueError(f"define_metric: summary='best' needs goal 'minimize' or 'maximize', got {goal!r}")
            mode = way
        if mode not in _SUMMARY_MODES:
            raise ValueError(
                f"define_metric: summary must be one of {', '.join(_SUMMARY_MODES)} or best, got {summary!r}"
            )
        self._modes[name] = mode
        self._mode_of.clear()

    # -- alerts ----------------------------------------------------------------------------

    def alert(self, title: str, text: str, level: Any = None, wait_duration: Any = None) -> None:
        """An alert from training code (module doc of :mod:`trainer_hooks.wandb`). The same
        ``title`` again within ``wait_duration`` seconds (default 60; a ``timedelta`` is
        accepted) is dropped, as wandb does."""
        level_name = _alert_level(level)
        wait = (
            60.0 if wait_duration is None else float(getattr(wait_duration, "total_seconds", lambda: wait_duration)())
        )
        now = time.monotonic()
        last = self._last_alert.get(str(title))
        if last is not None and now - last < wait:
            return
        self._last_alert[str(title)] = now
        if self._finished:
            warn_once(f"finished-alert:{id(self)}", f"run {self.id} is finished: alert() calls are ignored")
            return
        if self._client is not None:
            self._begin()
            self._client.alert(str(title), str(text or ""), level=level_name, step=self._step)

    # -- finishing -------------------------------------------------------------------------

    def finish(self, exit_code: int | None = None, quiet: bool | None = None) -> None:
        """Finish the trial (module doc of :mod:`trainer_hooks.wandb`): send what is pending,
        record the result, close the client (waiting at most its ``close_timeout``)."""
        self._finish(exit_code=exit_code)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        self._finish(exception=exc)
        return False

    def _at_exit(self) -> None:
        from trainer_hooks.wandb.exits import HOOKS

        self._finish(exit_code=HOOKS.exit_code, exception=HOOKS.exception)

    def _finish(self, *, exit_code: Any = None, exception: BaseException | None = None) -> None:
        if self._finished:
            return
        self._finished = True
        if self._on_finish is not None:
            self._on_finish(self)
        if self._client is None:
            return
        atexit.unregister(self._at_exit)
        client = self._client
        self._begin()
        try:
            self._commit()
        except Exception:  # a bad tensor at the very end must not lose the result
            log.exception("wandb: the last step's values could not be recorded")
        notes = []
        if exception is not None:
            status = failure_label(exception)
            notes.append(exception_summary(exception))
        else:
            status = exit_status(exit_code) or "auto"
            if status != "auto":
                notes.append(f"exit code {exit_code}")
        self.status = status
        numbers = self.summary.numbers()
        summary = dict(list(numbers.items())[:MAX_SUMMARY_KEYS])
        extra = {**self._extra, "tags": list(self.tags), "config": self.config.as_dict(), "summary": summary}
        if self._step_metrics:
            extra["step_metrics"] = dict(self._step_metrics)
        total = time.monotonic() - self._started
        fields: dict[str, Any] = {"notes": " | ".join(notes)[:_NOTES_CHARS]} if notes else {}
        client.finish_trial(
            status=status,
            metric_from=numbers if status == "auto" else None,
            metric_key=self.metric_key,
            keep_margin=self.keep_margin,
            train_s=total,
            total_s=total,
            extra=extra,
            **fields,
        )
        self.report = client.close()


def _goal(goal: str | None) -> str | None:
    """``min`` or ``max`` for ``define_metric``'s ``goal`` (``minimize``/``maximize``; wandb
    reads the first three letters, in any case); None for none."""
    if goal is None:
        return None
    way = str(goal)[:3].lower()
    if way not in ("min", "max"):
        raise ValueError(f"define_metric: goal must be 'minimize' or 'maximize', got {goal!r}")
    return way


def _alert_level(level: Any) -> str:
    """``info``, ``warn`` or ``error`` from a level: an ``AlertLevel``, its name or value
    in any case, ``warning``; None is ``info``."""
    if level is None:
        return "info"
    name = str(getattr(level, "value", level)).strip().lower()
    name = {"warning": "warn"}.get(name, name)
    if name not in ("info", "warn", "error"):
        raise ValueError(f"alert level must be INFO, WARN or ERROR, got {level!r}")
    return name


for _name, _result in RUN_STANDINS.items():
    setattr(Run, _name, staticmethod(stand_in(_name, _result)))
