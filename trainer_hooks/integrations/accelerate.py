"""accelerate: :class:`LedgerTracker` records an ``Accelerator``'s run as a trial.

Importing this module registers the tracker under the name ``lineage`` with accelerate's
``register_tracker_class`` (accelerate 1.15 and later), so a training script needs one
import and one word::

    import trainer_hooks.integrations.accelerate  # noqa: F401  (registers "lineage")

    accelerator = Accelerator(log_with="lineage")
    accelerator.init_trackers("my-project", config=vars(args),
                              init_kwargs={"lineage": {"metric": "eval/acc", "lower_is_better": False}})
    ...
    accelerator.log({"train/loss": loss, "eval/acc": acc}, step=step)
    accelerator.end_training()  # the trial's verdict

With an older accelerate (no ``register_tracker_class``) the instance form works the same:
``Accelerator(log_with=[LedgerTracker("my-project", metric=...)])``; :func:`register` then
raises, naming that form.

The mapping:

* ``init_trackers(project_name)``: the project (its slug by the wandb front's rule,
  created when missing, lower-is-better unless ``lower_is_better=False`` or
  ``LINEAGE_LOWER_IS_BETTER=0``; its metric is ``metric``);
* ``config=``: the trial's ``extra.config``, as given (JSON values; others as text);
* ``log(values, step=)``: each numeric value a telemetry point at ``step`` (without one,
  the step after the last), others skipped, as accelerate's own trackers do;
* ``end_training()``: the ledger's verdict on ``metric`` (``LINEAGE_METRIC``; default the
  project's metric), its last logged value. A script that raises before it is labelled by
  the exception (``crash``, out of memory ``size_blocked``, ...) at exit, as a run of the
  wandb front is; :meth:`LedgerTracker.fail` labels it at once.

The ledger is ``url`` (``LINEAGE_URL``, default ``http://127.0.0.1:8000``) with ``token``
(``LINEAGE_TOKEN``); trial fields (``hypothesis``, ``parent_exp``, ``job_name``, ...) go to
the plan. Only the main process records (accelerate's ``main_process_only``, and the
client's own rank rule).
"""

from __future__ import annotations

import atexit
import json
import os
from collections.abc import Mapping
from typing import Any

from accelerate.tracking import GeneralTracker, on_main_process

from trainer_hooks.callbacks.recorder import exception_summary
from trainer_hooks.callbacks.verl import numeric_metrics
from trainer_hooks.client import LedgerClient
from trainer_hooks.client.outcome import TrialOutcome, failure_label
from trainer_hooks.wandb import project_slug
from trainer_hooks.wandb.exits import HOOKS

__all__ = ["LedgerTracker", "register"]

DEFAULT_URL = "http://127.0.0.1:8000"


def _direction(given: bool | None) -> bool | None:
    if given is not None:
        return given
    raw = os.environ.get("LINEAGE_LOWER_IS_BETTER", "").strip().lower()
    if not raw:
        return None
    if raw in ("1", "true", "yes"):
        return True
    if raw in ("0", "false", "no"):
        return False
    raise ValueError(f"LINEAGE_LOWER_IS_BETTER must be 1 or 0 (true or false), got {raw!r}")


def _json_value(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


class LedgerTracker(GeneralTracker):
    """An accelerate tracker that records the run as a trial of ``run_name`` (module doc).

    Args:
        run_name: the project (accelerate passes ``init_trackers``' ``project_name``).
        metric: the logged key whose last value is the trial's result.
        lower_is_better: the project's direction when this run creates it.
        keep_margin: how much the result must beat the best by to be kept.
        url, token, spool_dir, system_metrics: the :class:`LedgerClient`'s.
        client: a client of your own (then ``url`` and the rest are not used).
        plan: trial fields for :meth:`LedgerClient.plan_trial`.
    """

    name = "lineage"
    requires_logging_directory = False
    main_process_only = True

    def __init__(
        self,
        run_name: str,
        *,
        metric: str | None = None,
        lower_is_better: bool | None = None,
        keep_margin: float = 0.0,
        url: str | None = None,
        token: str | None = None,
        spool_dir: str | None = None,
        system_metrics: bool | float | None = None,
        client: LedgerClient | None = None,
        **plan: Any,
    ) -> None:
        super().__init__()
        self.project = project_slug(run_name)
        self.metric = metric or os.environ.get("LINEAGE_METRIC") or None
        self.lower_is_better = _direction(lower_is_better)
        self.keep_margin = keep_margin
        self.url, self.token, self.spool_dir, self.system_metrics = url, token, spool_dir, system_metrics
        self.client = client
        self.plan = {"job_name": run_name, **plan}
        self.config: dict[str, Any] = {}
        #: the last value of each key logged (the result is read from it)
        self.summary: dict[str, float] = {}
        self.step = -1
        self._planned = False
        self._finished = False
        self._outcome: TrialOutcome | None = None

    @on_main_process
    def start(self) -> None:
        """Make the client and declare the project; the trial is planned with its config."""
        if self.client is None:
            self.client = LedgerClient(
                self.url or os.environ.get("LINEAGE_URL") or DEFAULT_URL,
                self.token or os.environ.get("LINEAGE_TOKEN") or None,
                self.project,
                spool_dir=self.spool_dir or os.environ.get("LINEAGE_SPOOL") or None,
                system_metrics=self.system_metrics,
            )
        self.client.ensure_project(
            title=self.plan["job_name"],
            metric_name=self.metric or "core_metric",
            lower_is_better=self.lower_is_better,
        )
        HOOKS.install()
        atexit.register(self._at_exit)  # after the client's own: runs before it closes

    @property
    def tracker(self) -> LedgerClient | None:
        """The run's :class:`LedgerClient` (None before ``start`` and off the main process)."""
        return self.client

    @property
    def outcome(self) -> TrialOutcome | None:
        """The ledger's answer to the finish (status, ``delta_vs_best``, new best or not)."""
        return self._outcome if self._outcome is not None else (self.client.outcome if self.client else None)

    def _plan(self) -> None:
        if self._planned or self.client is None:
            return
        self._planned = True
        extra = {"config": self.config, "tracker": "accelerate", **dict(self.plan.pop("extra", None) or {})}
        self.client.plan_trial(**self.plan, extra=extra)

    @on_main_process
    def store_init_configuration(self, values: Mapping[str, Any]) -> None:
        """The run's hyperparameters: the trial's ``extra.config``."""
        self.config.update({str(k): _json_value(v) for k, v in values.items()})
        self._plan()

    @on_main_process
    def log(self, values: Mapping[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """The numeric ``values`` as telemetry at ``step`` (module doc)."""
        if self.client is None or self._finished:
            return
        self._plan()
        self.step = self.step + 1 if step is None else int(step)
        numbers = numeric_metrics(values)
        self.client.log(self.step, numbers)
        for key, value in numbers.items():
            self.summary[key] = float(value)

    @on_main_process
    def finish(self) -> None:
        """``end_training``: the ledger's verdict on the metric's last value; closes the client."""
        self._end("auto")

    def fail(self, error: BaseException | str = "crash") -> None:
        """Label the trial a failure now: an exception's label and summary, or a label."""
        if isinstance(error, BaseException):
            self._end(failure_label(error), notes=exception_summary(error))
        else:
            self._end(error)

    def _end(self, status: str, notes: str = "") -> None:
        if self.client is None or self._finished:
            return
        self._plan()
        self._finished = True
        fields: dict[str, Any] = {"notes": notes} if notes else {}
        self.client.finish_trial(
            status=status,
            keep_margin=self.keep_margin,
            metric_from=self.summary if status == "auto" else None,
            metric_key=self.metric,
            **fields,
        )
        self.client.close()
        self._outcome = self.client.outcome

    def _at_exit(self) -> None:
        """A run the script never ended: labelled by how the process ended (module doc)."""
        if self._finished:
            return
        if HOOKS.exception is not None:
            self.fail(HOOKS.exception)
        elif HOOKS.exit_code not in (None, 0):
            self.fail("crash")
        else:
            self.finish()


def register() -> None:
    """Register :class:`LedgerTracker` as ``"lineage"`` for ``Accelerator(log_with=...)``."""
    try:
        from accelerate.tracking import register_tracker_class
    except ImportError:
        raise RuntimeError(
            "this accelerate has no register_tracker_class (added in 1.15): pass the tracker itself, "
            'Accelerator(log_with=[LedgerTracker("my-project")])'
        ) from None
    register_tracker_class(LedgerTracker)


try:
    register()
except RuntimeError:  # an older accelerate: the instance form works (module doc)
    pass
