"""``TrialRecorder``: one trial around a training loop.

On enter it plans the trial; inside, the loop logs telemetry and reports its result; on
exit it finishes the trial by the outcome rule (``keep`` when the result beats the
current best by ``keep_margin``, else ``discard``; an evaluation that took longer than
``eval_budget_s`` is ``eval_budget_overrun``), or, when an exception left the block,
labels the failure (:func:`~trainer_hooks.client.outcome.failure_label`: crash,
out-of-memory -> ``size_blocked``, timeouts, interrupts) with the exception's summary
in the notes. The exception is never swallowed. A run that ends without
:meth:`TrialRecorder.result` is a WARNING, and its trial is stored with no metric. Timings: ``train_s`` from enter to
:meth:`TrialRecorder.training_done` (or to :meth:`TrialRecorder.result`), ``total_s``
from enter to exit.

After the block the recorder holds the ledger's answer, :attr:`TrialRecorder.outcome`
(the status it stored, ``delta_vs_best``, ``exp_id``, ``is_new_best``), when the ledger
took the finish before the client closed (else None: the finish waits in the spool).

::

    with TrialRecorder(LedgerClient(url, token, "my-project"), hypothesis="...") as run:
        for step in range(steps):
            ...
            run.log(step, telemetry)
        run.result(core_metric=evaluate(model))
    print(run.outcome)  # TrialOutcome(exp_id='007', status='keep', delta_vs_best=-0.15, is_new_best=True, ...)
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Mapping
from typing import Any, Literal

from trainer_hooks.client.client import LedgerClient
from trainer_hooks.client.outcome import TrialOutcome, failure_label

__all__ = ["TrialRecorder", "exception_summary"]

MAX_NOTES = 2000

log = logging.getLogger("trainer_hooks.callbacks")


def exception_summary(exc: BaseException) -> str:
    """``Type: message (at file:line in function)`` of the innermost frame, one line."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    where = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}{where}"[:MAX_NOTES]


class TrialRecorder:
    """Plans a trial on enter, finishes it or labels its failure on exit (module doc).

    Args:
        client: the run's :class:`LedgerClient`.
        keep_margin: how much ``core_metric`` must beat the current best by to be kept.
        eval_budget_s: seconds the evaluation may take (``result(eval_s=...)``); more is
            ``eval_budget_overrun``.
        close: close the client on exit (flushing for at most its ``close_timeout``).
        plan: trial fields for :meth:`LedgerClient.plan_trial` (hypothesis, parent_exp, ...;
            without ``parent_exp`` the ledger's default parent applies).
    """

    def __init__(
        self,
        client: LedgerClient,
        *,
        keep_margin: float = 0.0,
        eval_budget_s: float | None = None,
        close: bool = True,
        **plan: Any,
    ) -> None:
        self.client = client
        self.keep_margin = keep_margin
        self.eval_budget_s = eval_budget_s
        self.close_client = close
        self.plan = plan
        self.core_metric: float | None = None
        self.fields: dict[str, Any] = {}
        self.eval_s: float | None = None
        self.notes: list[str] = []
        self.status: str | None = None
        self._started = 0.0
        self._trained: float | None = None
        self._planned = False
        self._finished = False
        self._reported = False

    def __enter__(self) -> TrialRecorder:
        self.start()
        return self

    def start(self) -> None:
        """Plan the trial (once) and start the clock. After :meth:`finish`, a new trial:
        the next run of the same loop (a second ``trainer.train()``, a hyperparameter
        search's next run) gets a client of its own (:meth:`LedgerClient.next_client`),
        which this recorder closes when it finishes."""
        if self._finished:
            self._next_trial()
        if not self._planned:
            self._started = time.monotonic()
            self.client.plan_trial(**self.plan)
            self._planned = True

    def _next_trial(self) -> None:
        self.client = self.client.next_client()
        self.close_client = True  # the recorder made this client: nobody else closes it
        self.core_metric = None
        self.fields = {}
        self.eval_s = None
        self.notes = []
        self.status = None
        self._trained = None
        self._planned = False
        self._finished = False
        self._reported = False

    @property
    def exp_id(self) -> str | None:
        return self.client.exp_id

    @property
    def outcome(self) -> TrialOutcome | None:
        """The ledger's answer to the finish (module doc); None before it answered."""
        return self.client.outcome

    def log(self, step: int, metrics: Mapping[str, Any], *, turn: int | None = None) -> None:
        self.client.log(step, metrics, turn=turn)

    def log_turns(self, step: int, per_turn: Mapping[str, Any]) -> None:
        self.client.log_turns(step, per_turn)

    def training_done(self) -> None:
        """Stop the ``train_s`` clock (evaluation comes next)."""
        if self._trained is None:
            self._trained = time.monotonic() - self._started

    def result(self, core_metric: float | None, *, eval_s: float | None = None, note: str = "", **fields: Any) -> None:
        """The evaluation's result: ``core_metric`` (and ``val_bpb``, ``notes``, ... fields;
        an ``extra`` is merged into what :meth:`annotate` gathered)."""
        self.training_done()
        self._reported = True
        self.core_metric = core_metric
        self.eval_s = eval_s
        extra = fields.pop("extra", None)
        if extra:
            self.annotate(**extra)
        self.fields.update(fields)
        if note:
            self.notes.append(note)

    def annotate(self, **extra: Any) -> None:
        """Entries of the trial's ``extra`` sent with the finish (the run's config, the key
        that scored it, ...); later calls add keys and replace those given again. Also on
        a failed run: whatever was annotated before the failure is stored with it."""
        self.fields["extra"] = {**dict(self.fields.get("extra") or {}), **extra}

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> Literal[False]:
        self.finish(exc)
        return False

    @property
    def finished(self) -> bool:
        """The trial is finished (:meth:`finish` ran)."""
        return self._finished

    def finish(self, exc: BaseException | None = None) -> str:
        """Finish the trial (what ``__exit__`` does); returns the status sent (``auto``: the
        server-side best decides between keep and discard). Idempotent: once the trial is
        finished, a later call (the ``with`` block's exit after a callback's
        ``on_train_end``) sends nothing and returns the status sent the first time."""
        if self._finished and self.status is not None:
            return self.status
        self._finished = True
        total = time.monotonic() - self._started
        fields = {"train_s": self._trained if self._trained is not None else total, "total_s": total, **self.fields}
        notes = list(self.notes)
        if exc is not None:
            status = failure_label(exc)
            notes.append(exception_summary(exc))
        elif self.eval_budget_s is not None and self.eval_s is not None and self.eval_s > self.eval_budget_s:
            status = "eval_budget_overrun"
            notes.append(f"evaluation took {self.eval_s:.1f} s, over its budget of {self.eval_budget_s:.1f} s")
        else:
            status = "auto"
            if not self._reported and self.client.active:
                log.warning("ledger: the run finished without result(): the trial is stored with no metric")
        if notes:
            fields["notes"] = " | ".join(notes)[:MAX_NOTES]
        self.status = status
        self.client.finish_trial(status=status, core_metric=self.core_metric, keep_margin=self.keep_margin, **fields)
        if self.close_client:
            self.client.close()
        return status
