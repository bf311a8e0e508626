"""A Hugging Face ``transformers.TrainerCallback`` that records the run as a trial.

Importing this module needs transformers (the ``test`` extra, or a trainer's own
environment); nothing else in ``trainer_hooks`` imports it.

* ``on_train_begin``: plans the trial (:class:`~trainer_hooks.callbacks.TrialRecorder`);
* ``on_log``: every numeric entry of the Trainer's logs at ``state.global_step``;
* ``on_evaluate``: keeps ``metrics[metric_key]`` as the core metric (the last evaluation
  wins);
* ``on_train_end``: finishes the trial by the outcome rule.

A Trainer that raises never reaches ``on_train_end``: wrap ``trainer.train()`` in the
recorder's ``with`` block (or call :meth:`LedgerCallback.fail`) to label the failure.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from trainer_hooks.callbacks.recorder import TrialRecorder
from trainer_hooks.callbacks.verl import numeric_metrics

__all__ = ["LedgerCallback"]


class LedgerCallback(TrainerCallback):
    """Records a ``transformers.Trainer`` run (module doc). ``metric_key``: the evaluation
    metric that is the trial's core_metric (default ``eval_loss``)."""

    def __init__(self, recorder: TrialRecorder, *, metric_key: str = "eval_loss") -> None:
        self.recorder = recorder
        self.metric_key = metric_key
        self.metric: float | None = None
        self.finished = False

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.recorder.start()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if logs:
            self.recorder.log(int(state.global_step), numeric_metrics(logs))

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: dict[str, Any] | None = None,
                    **kwargs: Any) -> None:
        if metrics and self.metric_key in metrics:
            self.metric = float(metrics[self.metric_key])

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self.finished:
            self.finished = True
            self.recorder.result(self.metric)  # train_s ends here, not at a mid-run evaluation
            self.recorder.finish()

    def fail(self, exc: BaseException) -> None:
        """Label the failure ``exc`` (when ``trainer.train()`` raised)."""
        if not self.finished:
            self.finished = True
            self.recorder.finish(exc)
