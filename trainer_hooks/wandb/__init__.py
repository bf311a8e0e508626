"""A wandb-compatible front for the ledger: change one line of a script written for wandb,
``import trainer_hooks.wandb as wandb``, and its run becomes a trial.

Everything goes through :class:`~trainer_hooks.client.LedgerClient` and its durable spool:
``log`` never waits on the network, and nothing is lost while the ledger is down (a run
that ends before the ledger is back leaves its spool for ``lineage spool flush``).

Where the run goes
    The ledger, token and spool folder come from ``init(url=, token=, spool_dir=)`` or,
    as a script written for wandb passes none, from ``LINEAGE_URL`` (default
    ``http://127.0.0.1:8000``), ``LINEAGE_TOKEN`` and ``LINEAGE_SPOOL`` (default
    ``$LINEAGE_SPOOL_DIR`` or ``~/.cache/lineage/spool``). ``finish`` waits at most
    ``LINEAGE_CLOSE_TIMEOUT`` seconds (10) for the ledger; what it could not send stays in
    the spool. ``mode="disabled"`` (or ``WANDB_MODE=disabled``) gives a run that records
    nothing. System metrics (GPU memory and utilisation, the process's RSS and CPU) are
    sampled under ``sys/`` as wandb does, every 10 s (``init(system_metrics=)`` or
    ``LINEAGE_SYSTEM_METRICS``: seconds, or ``0`` for none); the run's peak GPU memory is
    the trial's ``extra["memory_gb"]``.

Supported calls and what each becomes
    ==================================  ============================================================
    wandb                               ledger
    ==================================  ============================================================
    ``init(project=)``                  the project (``LINEAGE_PROJECT``, ``WANDB_PROJECT``, else
                                        ``uncategorized``), lower-cased with characters other than
                                        ``a-z 0-9 - _ .`` turned into ``-``; created when missing
                                        (metric ``core_metric`` or ``init(metric=)``; its direction
                                        below) at the run's first ``log``, ``alert`` or ``finish``,
                                        so the ``define_metric`` calls made before count
    ``init(name=, notes=)``             a planned trial: hypothesis = ``notes`` or else ``name``;
                                        ``job_name`` = ``name``; status ``running`` until it
                                        finishes; parent by the ledger's default rule
    ``init(config=, tags=, group=,      ``extra["config"]``, ``extra["tags"]``, ``extra["group"]``,
    job_type=, id=)``                   ``extra["job_type"]``, ``extra["wandb_id"]``
    ``init(config_exclude_keys=,        filter the config, as wandb does
    config_include_keys=)``
    ``init(reinit=)``                   a second ``init`` while a run is active finishes it first
                                        (``True``, ``"finish_previous"``, the default in scripts);
                                        ``"return_previous"`` returns it; ``"create_new"`` starts
                                        another and leaves both running
    ``init(trial={...})`` (ours)        trial fields: ``parent_exp``, ``baseline_exp``,
                                        ``specialist``, ``domain``, ``hypothesis``,
                                        ``expected_delta``, ``exp_id``, ``keep_margin``; also from
                                        ``LINEAGE_TRIAL`` (a JSON object), so an agent can steer an
                                        unchanged script
    ``init(metric=)`` (ours)            the summary key that is the result (``LINEAGE_METRIC``);
                                        default: the project's ``metric_name``
    ``init(lower_is_better=)`` (ours)   the direction of a project the run creates
                                        (``LINEAGE_LOWER_IS_BETTER``: ``1``/``0``); else what
                                        ``define_metric`` says of the metric; else lower is better
    ``run.config``, ``wandb.config``    attribute and item access, ``update`` (mapping,
                                        ``argparse.Namespace``, absl flags), ``setdefaults``;
                                        the final config is ``extra["config"]`` at finish
    ``log(d, step=, commit=)``          telemetry points at the run's step (wandb's step rule:
                                        :mod:`trainer_hooks.wandb.run`); nested keys joined with
                                        ``/``; numbers, numpy scalars and 0-dim tensors kept;
                                        anything else skipped with one warning per key
    ``run.summary[k] = v``,             each key's last logged value unless set by hand;
    ``summary.update``                  ``extra["summary"]`` at finish (finite numbers, at most 200)
    ``define_metric(name, summary=,     how the summary keeps ``name``: last, min, max, mean,
    goal=, step_metric=)``              first, none, best with a goal; ``step_metric`` below;
                                        for the metric, ``goal="maximize"`` or ``summary="max"``
                                        (``minimize``, ``min``) is its direction: a project the
                                        run creates gets it; an existing project that goes the
                                        other way is left as it is, with a warning
    ``finish(exit_code=)``,             the trial's result: ``core_metric`` = the summary's entry
    ``with init() as run:``,            for the metric (exact key, else the one key ending in
    the end of the script               ``/<metric>``), status by the outcome rule (keep when it
                                        beats the best, else discard); a non-zero exit code
                                        (``finish(exit_code=)``, ``sys.exit``) is ``crash`` (130 and
                                        143: ``harness_abort``); an exception leaving the ``with``
                                        block or the script is labelled by its kind (out of memory:
                                        ``size_blocked``, ...) with its summary in ``notes``
    ``alert(title, text, level=,        an alert of the trial (``AlertLevel.INFO``/``WARN``/
    wait_duration=)``                   ``ERROR`` or their names); the same title within
                                        ``wait_duration`` (60 s) is dropped
    ``run.id``, ``run.name``,           the spool's run id; the rest as given; ``run.url`` is the
    ``run.project``, ``run.url``,       trial's page once the ledger allocated its exp_id
    ``run.step``, ``run.dir``           (``run.exp_id``); ``run.dir`` the spool folder
    ``wandb.run``, ``wandb.config``,    the current run, its config and summary; before ``init``
    ``wandb.summary``                   ``run`` is None and the others raise :class:`Error`
    ``login``, ``setup``, ``require``,  accepted, nothing to do (the token is ``LINEAGE_TOKEN``);
    ``teardown``, ``Settings``          ``teardown`` finishes the active runs
    ``watch``, ``unwatch``, ``save``,   stand-ins that do nothing and say so once
    ``restore``, artifacts, models,     (:mod:`trainer_hooks.wandb.standins`); media logged
    ``log_code``, ``Image``, ``Table``, with ``log`` is skipped like any non-number
    ``Histogram``, ``Video``, ``Audio``,
    ``Html``, ``plot.*``, ...
    ==================================  ============================================================

Resuming and attaching (:mod:`trainer_hooks.client.resume`)
    ``init(id=X)`` makes ``X`` the run id (the trial's ``extra["run_id"]``, also
    ``WANDB_RUN_ID``). ``resume="allow"`` (``"auto"``, True; or ``WANDB_RESUME``) or
    ``"must"`` continues the trial of run ``X`` after a preemption: what the earlier
    process left in its spool is delivered first, ``run.step`` continues after the highest
    step stored (a lower ``step=`` is dropped, as in wandb), the summary starts from each
    series' last value, ``run.resumed`` is True; ``"must"`` raises :class:`Error` when the
    run has no trial, and a finished trial is refused naming it. ``Settings(mode="shared",
    x_primary=False)`` with ``id=X`` attaches a second process (wandb's ``eval.py``): it
    logs into run ``X``'s trial and its ``finish`` leaves the trial to its owner.
    ``define_metric(name, step_metric=S)``: the trial keeps ``extra["step_metrics"]``
    (``name -> S``), the x axis of ``name``'s points.

Not supported: sweeps, ``fork_from``/``resume_from``, and ``wandb.Api`` (use
:class:`trainer_hooks.api.Api`), offline sync (``mode="offline"`` behaves as online; the
spool already holds everything).
"""

from __future__ import annotations

import enum
import json
import logging
import os
import re
from collections.abc import Mapping
from typing import Any

from trainer_hooks.wandb.exits import HOOKS
from trainer_hooks.wandb.run import Config, Run, Summary
from trainer_hooks.wandb.standins import (
    Artifact,
    Audio,
    Histogram,
    Html,
    Image,
    Molecule,
    Object3D,
    Table,
    Video,
    plot,
    stand_in,
    warn_once,
)
from trainer_hooks.wandb.values import config_items

__all__ = [
    "AlertLevel",
    "Artifact",
    "Audio",
    "Config",
    "Error",
    "Histogram",
    "Html",
    "Image",
    "Molecule",
    "Object3D",
    "Run",
    "Settings",
    "Summary",
    "Table",
    "Video",
    "alert",
    "config",
    "define_metric",
    "finish",
    "init",
    "log",
    "log_artifact",
    "log_code",
    "log_model",
    "login",
    "plot",
    "require",
    "restore",
    "run",
    "save",
    "setup",
    "summary",
    "teardown",
    "termerror",
    "termlog",
    "termwarn",
    "unwatch",
    "use_artifact",
    "use_model",
    "watch",
]

log_ = logging.getLogger("trainer_hooks.wandb")

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_PROJECT = "uncategorized"
MAX_SLUG = 100
#: trial fields ``init(trial=...)`` and ``LINEAGE_TRIAL`` may set
TRIAL_FIELDS = (
    "parent_exp",
    "baseline_exp",
    "specialist",
    "domain",
    "hypothesis",
    "expected_delta",
    "exp_id",
    "keep_margin",
)


class Error(Exception):
    """A call made out of order (``log`` before ``init``), as ``wandb.Error``."""


class AlertLevel(str, enum.Enum):
    INFO = "INFO"
    WARN = "WARN"
    ERROR = "ERROR"


class Settings:
    """``wandb.Settings(...)``: keeps what it is given; ``mode`` and ``reinit`` are read."""

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


class _PreInit:
    """What ``wandb.config`` and ``wandb.summary`` are before ``init``: any use raises."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _refuse(self, what: str) -> Error:
        return Error(f"You must call wandb.init() before wandb.{self._name}{what}")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise self._refuse(f".{name}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise self._refuse(f".{name}")

    def __getitem__(self, key: Any) -> Any:
        raise self._refuse(f"[{key!r}]")

    def __setitem__(self, key: Any, value: Any) -> None:
        raise self._refuse(f"[{key!r}]")


run: Run | None = None
config: Any = _PreInit("config")
summary: Any = _PreInit("summary")
_active: list[Run] = []


def _set_current(found: Run | None) -> None:
    global run, config, summary
    run = found
    config = found.config if found is not None else _PreInit("config")
    summary = found.summary if found is not None else _PreInit("summary")


def _forget(finished: Run) -> None:
    """A run finished: it is no longer active; the current run is the last one still active."""
    if finished in _active:
        _active.remove(finished)
    if run is finished:
        _set_current(_active[-1] if _active else None)


def project_slug(name: str | None) -> str:
    """The ledger's slug for a wandb project name (module doc)."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", (name or "").strip().lower()).strip("-")[:MAX_SLUG]
    return slug or DEFAULT_PROJECT


def _trial_fields(given: Mapping[str, Any] | None) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    raw = os.environ.get("LINEAGE_TRIAL")
    if raw:
        try:
            found = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"LINEAGE_TRIAL must be a JSON object: {exc}") from None
        if not isinstance(found, dict):
            raise ValueError("LINEAGE_TRIAL must be a JSON object")
        fields.update(found)
    fields.update(given or {})
    unknown = sorted(set(fields) - set(TRIAL_FIELDS))
    if unknown:
        raise ValueError(f"init(trial=...): unknown field {unknown[0]!r}; known: {', '.join(TRIAL_FIELDS)}")
    return fields


def _lower_is_better(given: bool | None) -> bool | None:
    """``init(lower_is_better=)``, else ``LINEAGE_LOWER_IS_BETTER``, else None (undeclared)."""
    if given is not None:
        return bool(given)
    raw = os.environ.get("LINEAGE_LOWER_IS_BETTER", "").strip().lower()
    if not raw:
        return None
    if raw in ("1", "true", "yes"):
        return True
    if raw in ("0", "false", "no"):
        return False
    raise ValueError(f"LINEAGE_LOWER_IS_BETTER must be 1 or 0 (true or false), got {raw!r}")


def _resume_mode(resume: Any) -> str | None:
    """The client's ``resume`` for wandb's ``resume=`` (or ``WANDB_RESUME``): ``"must"``;
    ``"allow"`` for ``"allow"``, ``"auto"`` and True; None for ``"never"``, False, None."""
    if resume is None or resume is False:
        return None
    word = str(resume).strip().lower()
    if word in ("must",):
        return "must"
    if word in ("allow", "auto", "true", "1"):
        return "allow"
    if word in ("never", "false", "0", ""):
        return None
    raise ValueError(f"wandb.init(resume=...) must be 'allow', 'must', 'never', 'auto' or a bool, got {resume!r}")


def _attaches(settings: Any) -> bool:
    """``Settings(mode="shared", x_primary=False)``: a second process logs into a run."""
    if settings is None:
        return False
    return getattr(settings, "mode", None) == "shared" and getattr(settings, "x_primary", None) is False


def _run_id(given: str | None) -> str | None:
    """wandb's ``id=`` as the client's run id (the trial's ``extra.run_id``), when it is one."""
    if given is None:
        return None
    if re.fullmatch(r"[A-Za-z0-9._-]{1,120}", str(given)):
        return str(given)
    warn_once("init.id", f"wandb.init(id={given!r}) is not a valid run id (A-Z a-z 0-9 . _ -): a new one is used")
    return None


def init(
    *,
    project: str | None = None,
    name: str | None = None,
    notes: str | None = None,
    config: Any = None,
    tags: Any = None,
    reinit: Any = None,
    entity: str | None = None,
    group: str | None = None,
    job_type: str | None = None,
    dir: Any = None,
    id: str | None = None,
    mode: str | None = None,
    resume: Any = None,
    settings: Any = None,
    config_exclude_keys: Any = None,
    config_include_keys: Any = None,
    allow_val_change: bool | None = None,
    url: str | None = None,
    token: str | None = None,
    spool_dir: Any = None,
    metric: str | None = None,
    lower_is_better: bool | None = None,
    trial: Mapping[str, Any] | None = None,
    system_metrics: bool | float | None = None,
    **ignored: Any,
) -> Run:
    """Start a run: plan its trial (module doc for each argument). Returns the :class:`Run`,
    also ``wandb.run``."""
    for key in sorted(ignored):
        warn_once(f"init.{key}", f"wandb.init({key}=...) has no meaning in the lineage ledger and is ignored")
    id = id or os.environ.get("WANDB_RUN_ID") or None
    resume_mode = _resume_mode(resume if resume is not None else os.environ.get("WANDB_RESUME"))
    attach = _attaches(settings)
    if (resume_mode or attach) and not id:
        warn_once("init.resume", "wandb.init(resume=...) needs the run's id= (or WANDB_RUN_ID): a new trial is planned")
        resume_mode, attach = None, False
    settings_mode = getattr(settings, "mode", None) if settings is not None else None
    reinit = reinit if reinit is not None else (getattr(settings, "reinit", None) if settings is not None else None)
    if run is not None:
        if reinit == "return_previous":
            return run
        if reinit != "create_new":
            run.finish()
    mode = (mode or settings_mode or os.environ.get("WANDB_MODE") or "online").lower()
    items = config_items(config)
    if config_include_keys:
        items = {k: v for k, v in items.items() if k in set(config_include_keys)}
    if config_exclude_keys:
        items = {k: v for k, v in items.items() if k not in set(config_exclude_keys)}
    run_config = Config(items)
    tag_list = tuple(str(t) for t in (tags or ()))
    slug = project_slug(project or os.environ.get("LINEAGE_PROJECT") or os.environ.get("WANDB_PROJECT"))
    if project and slug != project:
        log_.info("wandb project %r is the ledger's project %r", project, slug)
    fields = _trial_fields(trial)
    keep_margin = float(fields.pop("keep_margin", 0.0))
    metric_key = metric or os.environ.get("LINEAGE_METRIC") or None
    direction = _lower_is_better(lower_is_better)
    extra = {
        k: v for k, v in (("name", name), ("group", group), ("job_type", job_type), ("wandb_id", id)) if v is not None
    }
    client = None
    base_url = url or os.environ.get("LINEAGE_URL")
    if mode != "disabled":
        from trainer_hooks.client import LedgerClient

        if not base_url:
            warn_once("init.url", f"LINEAGE_URL is not set: the run goes to {DEFAULT_URL}")
            base_url = DEFAULT_URL
        try:
            client = LedgerClient(
                base_url,
                token or os.environ.get("LINEAGE_TOKEN") or None,
                slug,
                spool_dir=spool_dir or os.environ.get("LINEAGE_SPOOL") or None,
                close_timeout=float(os.environ.get("LINEAGE_CLOSE_TIMEOUT") or 10.0),
                system_metrics=system_metrics,
                run_id=_run_id(id),
                resume=resume_mode,
                attach=attach,
            )
        except Exception as exc:  # LedgerRejected, Unavailable: the run cannot take up
            if not (resume_mode or attach):
                raise
            raise Error(f"wandb.init(id={id!r}): {exc}") from exc
        HOOKS.install()
    plan = {"hypothesis": fields.pop("hypothesis", None) or notes or name or "", "job_name": name or "", **fields}
    started = Run(
        client,
        project=slug,
        name=name,
        notes=notes,
        tags=tag_list,
        config=run_config,
        group=group,
        job_type=job_type,
        metric_key=metric_key,
        base_url=base_url,
        extra=extra,
        keep_margin=keep_margin,
        on_finish=_forget,
        plan=plan,
        new_project={"title": project or slug, "metric_name": metric_key or "core_metric"},
        lower_is_better=direction,
    )
    _active.append(started)
    _set_current(started)
    return started


def _current(call: str) -> Run:
    if run is None:
        raise Error(f"You must call wandb.init() before wandb.{call}()")
    return run


def log(data: Mapping[str, Any], step: int | None = None, commit: bool | None = None, sync: bool | None = None) -> None:
    """``wandb.log``: :meth:`Run.log` of the current run."""
    if run is None:
        raise Error("You must call wandb.init() before wandb.log()")
    run.log(data, step=step, commit=commit)


def finish(exit_code: int | None = None, quiet: bool | None = None) -> None:
    """``wandb.finish``: finish the current run (nothing when there is none)."""
    if run is not None:
        run.finish(exit_code=exit_code)


def alert(title: str, text: str, level: Any = None, wait_duration: Any = None) -> None:
    """``wandb.alert``: :meth:`Run.alert` of the current run."""
    _current("alert").alert(title, text, level=level, wait_duration=wait_duration)


def define_metric(name: str, *args: Any, **kwargs: Any) -> None:
    """``wandb.define_metric``: :meth:`Run.define_metric` of the current run."""
    _current("define_metric").define_metric(name, *args, **kwargs)


def login(*args: Any, **kwargs: Any) -> bool:
    """Nothing to log in to: the token is ``LINEAGE_TOKEN`` (or ``init(token=)``)."""
    return True


def setup(*args: Any, **kwargs: Any) -> None:
    """Accepted; nothing to set up."""


def require(*args: Any, **kwargs: Any) -> None:
    """Accepted; nothing to require."""


def teardown(exit_code: int | None = None) -> None:
    """Finish every active run."""
    for active in list(reversed(_active)):
        active.finish(exit_code=exit_code)


def termlog(message: str = "", *args: Any, **kwargs: Any) -> None:
    log_.info("%s", message)


def termwarn(message: str = "", *args: Any, **kwargs: Any) -> None:
    log_.warning("%s", message)


def termerror(message: str = "", *args: Any, **kwargs: Any) -> None:
    log_.error("%s", message)


watch = stand_in("watch")
unwatch = stand_in("unwatch")
save = stand_in("save", False)
restore = stand_in("restore")
log_artifact = stand_in("log_artifact")
use_artifact = stand_in("use_artifact")
log_model = stand_in("log_model")
use_model = stand_in("use_model")
link_model = stand_in("link_model")
log_code = stand_in("log_code")
mark_preempting = stand_in("mark_preempting")
