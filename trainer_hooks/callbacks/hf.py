"""A Hugging Face ``transformers.TrainerCallback`` that records the run as a trial: for
``transformers.Trainer`` and for the trainers built on it, TRL's ``GRPOTrainer`` among them.

Importing this module needs transformers (the ``test`` extra, or a trainer's own
environment); nothing else in ``trainer_hooks`` imports it.

* ``on_train_begin``: plans the trial (:class:`~trainer_hooks.callbacks.TrialRecorder`);
* ``on_log``: every numeric entry of the Trainer's logs at ``state.global_step`` (entries
  that are not numbers, or are ``None``, are skipped);
* ``metric_key``: the core metric is the last value of that key the Trainer logged or
  evaluated (``on_log`` and ``on_evaluate``);
* ``on_train_end``: finishes the trial by the outcome rule. A ``metric_key`` that was never
  logged (no ``eval_dataset`` for ``eval_loss``, a misspelt key) is a WARNING naming the key
  and the keys that were logged, and the trial is stored with no metric.

What the trial keeps besides telemetry, as the W&B, MLflow and trackio callbacks do:

* ``extra["config"]``: the run's hyperparameters, ``args.to_dict()`` (``TrainingArguments``,
  or TRL's ``GRPOConfig`` with ``beta``, ``num_iterations``, ...) with the model's config
  (``model.config.to_dict()``) under ``"model_config"``; values JSON cannot hold become
  their text;
* ``extra["metric_key"]`` (the key that scored the trial) and ``extra["metric_step"]`` (the
  step of the value used);
* ``snapshot_path``: the best checkpoint (``state.best_model_checkpoint``, with
  ``load_best_model_at_end`` / ``metric_for_best_model``), else the last checkpoint this
  ``train()`` saved, as an absolute path (``extra["checkpoint"]`` says which: ``best`` or
  ``last``); none when nothing was saved (``save_strategy="no"``).

In a distributed run (``torchrun``, accelerate, deepspeed) only the world process zero
records, as the Trainer's own reporting callbacks do: on any other process the client is
idle from the start (``RANK``: :mod:`trainer_hooks.client.rank`), or stands down at
``on_train_begin`` when the Trainer says it is not process zero.

Each ``trainer.train()`` is a trial: a second ``train()`` with the same callback (more
steps, or ``Trainer.hyperparameter_search``, which reuses the callbacks) plans a new one
at its ``on_train_begin``. Logs that come while no trial runs (a ``trainer.evaluate()``
after ``train()``) are not recorded, with one warning: a telemetry callback never takes
training down.

TRL's ``GRPOTrainer`` logs through the same ``on_log``, once per logging step: ``reward``
and ``reward_std`` (the generation batch's mean reward and its standard deviation, and
``rewards/<function>/mean`` per reward function), ``kl`` (the mean per-token KL to the
reference model, only when ``beta != 0``), ``clip_ratio/low_mean``,
``clip_ratio/high_mean``, ``clip_ratio/region_mean`` (the fraction of tokens whose ratio
was clipped), ``entropy``, ``completions/mean_length`` and the Trainer's ``loss``,
``grad_norm`` and ``learning_rate``; each is stored under that name. For a GRPO run the
core metric is a reward (the project is higher-is-better): ``metric_key="eval_reward"``
with an ``eval_dataset``, or ``"reward"``, the mean reward of the last training batch logged.

A Trainer that raises never reaches ``on_train_end``: wrap ``trainer.train()`` in the
recorder's ``with`` block (or call :meth:`LedgerCallback.fail`) to label the failure.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
from collections.abc import Mapping
from typing import Any

from transformers import TrainerCallback

from trainer_hooks.callbacks.recorder import TrialRecorder
from trainer_hooks.callbacks.verl import numeric_metrics
from trainer_hooks.client.outcome import TrialOutcome

__all__ = ["LedgerCallback"]

log = logging.getLogger("trainer_hooks.callbacks")

#: the ledger's limit on a short text field such as ``snapshot_path``
MAX_SNAPSHOT_PATH = 512


def run_config(args: Any, model: Any = None) -> dict[str, Any]:
    """The run's hyperparameters as JSON data (module doc): ``args.to_dict()`` plus the
    model's config under ``"model_config"``; values JSON cannot hold become their text."""
    config: dict[str, Any] = {}
    to_dict = getattr(args, "to_dict", None)
    if callable(to_dict):
        config.update(to_dict())
    model_config = getattr(model, "config", None)
    model_dict = getattr(model_config, "to_dict", None)
    if callable(model_dict):
        config["model_config"] = model_dict()
    return dict(json.loads(json.dumps(config, default=str)))


def trainer_rank(args: Any, state: Any) -> int:
    """This process's rank as the Trainer sees it: 0 for the world process zero
    (``state.is_world_process_zero``), else ``args.process_index`` (at least 1)."""
    if getattr(state, "is_world_process_zero", True):
        return 0
    return max(1, int(getattr(args, "process_index", 1) or 1))


class LedgerCallback(TrainerCallback):
    """Records a ``transformers.Trainer`` (or TRL trainer) run (module doc). ``metric_key``:
    the logged or evaluated metric that is the trial's core_metric (default ``eval_loss``;
    ``"eval_reward"`` or ``"reward"`` for TRL's ``GRPOTrainer``)."""

    def __init__(self, recorder: TrialRecorder, *, metric_key: str = "eval_loss") -> None:
        self.recorder = recorder
        self.metric_key = metric_key
        self.metric: float | None = None
        #: the step of :attr:`metric` (the trainer's global step when it was logged)
        self.metric_step: int | None = None
        #: the checkpoint folder the last ``on_save`` of this ``train()`` wrote
        self.last_checkpoint: str | None = None
        #: the numeric keys logged or evaluated in this train(), for the warning of a missing metric_key
        self.logged_keys: set[str] = set()
        self._warned_idle = False

    @property
    def finished(self) -> bool:
        """The current trial is finished (no ``train()`` is being recorded)."""
        return self.recorder.finished

    @property
    def outcome(self) -> TrialOutcome | None:
        """The ledger's answer once the run finished (:attr:`TrialRecorder.outcome`)."""
        return self.recorder.outcome

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        rank = trainer_rank(args, state)
        if rank:
            self.recorder.client.stand_down(rank)
        self.metric = None
        self.metric_step = None
        self.last_checkpoint = None
        self.logged_keys = set()
        self.recorder.start()  # after a finished train(): a new trial
        self.recorder.annotate(config=run_config(args, kwargs.get("model")))

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if logs and self._recording():
            self.recorder.log(int(state.global_step), numeric_metrics(logs))
            self._keep_metric(logs, state)

    def on_evaluate(
        self, args: Any, state: Any, control: Any, metrics: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if metrics and self._recording():
            self._keep_metric(metrics, state)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = os.path.join(str(args.output_dir), f"checkpoint-{int(state.global_step)}")
        if os.path.isdir(folder):
            self.last_checkpoint = os.path.abspath(folder)

    def _recording(self) -> bool:
        """A trial runs; else (logs after ``on_train_end``) one warning, and nothing is recorded."""
        if not self.recorder.finished:
            return True
        if not self._warned_idle:
            self._warned_idle = True
            log.warning(
                "ledger: logs after the trial finished (trainer.evaluate() after train()?) are not recorded; "
                "the next trainer.train() records a new trial"
            )
        return False

    def _keep_metric(self, values: Mapping[str, Any], state: Any) -> None:
        self.logged_keys.update(numeric_metrics(values))
        value = values.get(self.metric_key)
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
            self.metric = float(value)
            self.metric_step = int(getattr(state, "global_step", 0) or 0)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self.recorder.finished:
            if self.metric is None and self.recorder.client.active:
                log.warning(
                    "ledger: metric_key %r was never logged (logged: %s); the trial is stored with no metric",
                    self.metric_key,
                    ", ".join(sorted(self.logged_keys)) or "nothing",
                )
            self.recorder.annotate(metric_key=self.metric_key)
            if self.metric_step is not None:
                self.recorder.annotate(metric_step=self.metric_step)
            fields: dict[str, Any] = {}
            snapshot = self._snapshot(state)
            if snapshot is not None:
                fields["snapshot_path"] = snapshot[0]
                self.recorder.annotate(checkpoint=snapshot[1])
            self.recorder.result(self.metric, **fields)  # train_s ends here, not at a mid-run evaluation
            self.recorder.finish()

    def _snapshot(self, state: Any) -> tuple[str, str] | None:
        """``(path, "best" | "last")`` of the checkpoint the trial points at (module doc)."""
        best = getattr(state, "best_model_checkpoint", None)
        found = (os.path.abspath(str(best)), "best") if best else None
        if found is None and self.last_checkpoint is not None:
            found = (self.last_checkpoint, "last")
        if found is not None and len(found[0]) > MAX_SNAPSHOT_PATH:
            log.warning(
                "ledger: checkpoint path longer than %d characters is not stored: %s", MAX_SNAPSHOT_PATH, found[0]
            )
            return None
        return found

    def fail(self, exc: BaseException) -> None:
        """Label the failure ``exc`` (when ``trainer.train()`` raised)."""
        if not self.recorder.finished:
            self.recorder.finish(exc)
