"""``LedgerClient``: plan a trial, log telemetry, raise alerts, finish it — without a training
step ever waiting on the network, and without losing what was logged.

Path of a point::

    log() --(in-memory deque, bounded)--> spool thread --(encoded once; SQLite spool, fsync'd)-->
    sender thread --(httpx, batches with batch_id, two in flight)--> ledger

The two threads live in :mod:`trainer_hooks.client.pipeline` (its docstring tells how a
point travels: buffering, spooling, sending, backoff); :meth:`LedgerClient.record_trials`,
which sends at once, in :mod:`trainer_hooks.client.batch`.

:meth:`LedgerClient.close` (also run at interpreter exit, and on SIGTERM when
``handle_sigterm``) spools everything still in memory, then sends for at most
``close_timeout`` seconds. A spool the ledger acknowledged whole is then deleted (the
retention rule of :mod:`trainer_hooks.client.spool`); one with anything undelivered
stays for ``lineage spool flush``.

The client talks back on the ``trainer_hooks.client`` logger: one warning when the
ledger becomes unreachable (or answers 5xx) and one when delivery resumes, with the
count of points and writes held in the spool meanwhile; the outcome of the trial
(:attr:`LedgerClient.outcome`: the status stored, ``delta_vs_best``, new best or not)
once the ledger answered the finish.

In a distributed job only rank 0 records (:mod:`trainer_hooks.client.rank`): on any
other rank the client is idle from the start (no spool, no threads; every call does
nothing), or stands down as soon as it finds out (:meth:`LedgerClient.stand_down`).

Resuming (:mod:`trainer_hooks.client.resume`): ``LedgerClient(run_id=..., resume="allow" |
"must")`` continues the run's trial after a preemption (steps appended, each point once);
``attach=True`` logs into a run another process owns.

System metrics (:mod:`trainer_hooks.client.sysmetrics`): once a trial is planned, a
sampler thread logs GPU memory and utilisation, the process's RSS and CPU and the
machine's under ``sys/`` every ``system_metrics`` seconds (10 by default; off with
``system_metrics=False`` or ``LINEAGE_SYSTEM_METRICS=0``), at the step last logged. Its
points go through the same spool; at :meth:`LedgerClient.finish_trial` it stops, and the
run's peak GPU memory becomes the trial's ``extra["memory_gb"]`` (GB of 2**30 bytes).
"""

from __future__ import annotations

import atexit
import collections
import json
import logging
import math
import os
import re
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainer_hooks.client.batch import BATCH_TRIALS, TrialBatches
from trainer_hooks.client.claims import ClaimWaiting, check_lease
from trainer_hooks.client.closing import ClientClosing
from trainer_hooks.client.delivery import LedgerRejected, Transport
from trainer_hooks.client.outcome import TrialOutcome, declared_direction
from trainer_hooks.client.pipeline import SpoolPipeline
from trainer_hooks.client.points import Record, Row, step_record, turn_rows
from trainer_hooks.client.rank import process_rank
from trainer_hooks.client.report import ClientReport
from trainer_hooks.client.resume import RESUME_MODES, TakeUp, take_up
from trainer_hooks.client.sigterm import install_sigterm_exit
from trainer_hooks.client.spool import SPOOL_SUFFIX, Spool
from trainer_hooks.client.sysmetrics import SystemSampler, sampler_settings

__all__ = ["BATCH_TRIALS", "ClientReport", "LedgerClient", "default_spool_dir", "install_sigterm_exit"]

log = logging.getLogger("trainer_hooks.client")

#: trial fields a plan may carry (the rest are the server's or the finish's)
PLAN_FIELDS = (
    "exp_id",
    "timestamp",
    "specialist",
    "parent_exp",
    "baseline_exp",
    "domain",
    "hypothesis",
    "expected_delta",
    "job_name",
    "snapshot_path",
    "notes",
    "extra",
    # the exp_id of a trial this run repeats (the same code, another seed): the ledger's noise floor
    "rerun_of",
)
FINISH_FIELDS = ("core_metric", "val_bpb", "train_s", "total_s", "notes", "job_name", "snapshot_path", "extra")
#: the status a trial is planned with: under way (never "best", never a failure) while the
#: sender heartbeats it; if the trainer is killed and never finishes, the ledger turns it
#: into harness_abort once the heartbeats stop for the project's lease
PLANNED_STATUS = "running"
#: the ledger's alert rules (``lineage.alerts``)
ALERT_LEVELS = ("info", "warn", "error")
MAX_ALERT_TITLE = 300
MAX_ALERT_TEXT = 10_000
#: a run id names the spool file and prefixes idempotency keys (printable ASCII, no spaces)
_RUN_ID = re.compile(r"^[A-Za-z0-9._-]{1,120}$")


def default_spool_dir() -> Path:
    """``$LINEAGE_SPOOL_DIR`` or ``~/.cache/lineage/spool``."""
    return Path(os.environ.get("LINEAGE_SPOOL_DIR") or Path.home() / ".cache" / "lineage" / "spool")


class LedgerClient(ClientClosing, SpoolPipeline, TrialBatches, ClaimWaiting):
    """A run's connection to the ledger (module doc).

    Args:
        base_url: the ledger, e.g. ``http://127.0.0.1:8000``.
        token: a writer token (``None`` for an open loopback ledger).
        project: the project slug.
        spool_dir: where the run's spool file goes (:func:`default_spool_dir`).
        run_id: names the spool file and prefixes every idempotency key; a new one by default.
        timeout: seconds per HTTP request.
        max_batch_points: points per telemetry request at most (the sender coalesces what the
            spool holds up to this: fewer, bigger requests when the ledger is behind).
        max_buffer_points: points held in memory before ``log`` spools them itself.
        spool_interval: seconds between spool commits.
        close_timeout: seconds :meth:`close` may spend sending at exit.
        backoff: ``(first, cap)`` seconds between retries (doubling, with jitter).
        handle_sigterm: on SIGTERM raise ``SystemExit(143)`` in the main thread so
            ``with`` blocks and exit handlers run (and the spool is flushed).
        durable: fsync every spool commit (``synchronous=FULL``); False: survive a process
            kill but not a power cut.
        gzip_level: of telemetry bodies; ``"auto"``: none on loopback, 1 over a network.
        system_metrics: the sampler's interval in seconds, True (10 s), False (none);
            None: ``LINEAGE_SYSTEM_METRICS`` (module doc).
        keep_spool: keep the spool file at :meth:`close` even when everything was delivered.
        in_flight: telemetry requests in flight at once (the next batch is encoded while
            they are; 1: one request at a time); see :mod:`trainer_hooks.client.delivery`.
        rank: this process's rank in a distributed job; only rank 0 records. None: found
            by :func:`~trainer_hooks.client.rank.process_rank` (``torch.distributed``,
            ``RANK``).
        resume: ``"allow"`` / ``"must"``: take up the trial of ``run_id`` (a preempted run
            restarting): :attr:`resumed`, :attr:`resumed_step`; ``"must"`` refuses when the
            run has none, ``"allow"`` then plans a new one. Needs the ledger at once.
        attach: log into the trial of ``run_id`` that another process owns (no plan, no
            finish, no heartbeat).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None,
        project: str,
        *,
        spool_dir: str | Path | None = None,
        run_id: str | None = None,
        timeout: float = 10.0,
        max_batch_points: int = 200_000,
        max_buffer_points: int = 200_000,
        spool_interval: float = 0.2,
        close_timeout: float = 10.0,
        backoff: tuple[float, float] = (0.05, 5.0),
        handle_sigterm: bool = False,
        durable: bool = True,
        gzip_level: int | None | str = "auto",
        system_metrics: bool | float | None = None,
        keep_spool: bool = False,
        in_flight: int = 2,
        rank: int | None = None,
        resume: str | None = None,
        attach: bool = False,
    ) -> None:
        if resume is not None and resume not in RESUME_MODES:
            raise ValueError(f"resume must be one of {', '.join(RESUME_MODES)} or None, got {resume!r}")
        if (resume or attach) and not run_id:
            raise ValueError("resume= and attach= take up a run by its run_id: give run_id")
        #: how this client was made (every argument but the run id), for :meth:`next_client`
        self._settings: dict[str, Any] = {k: v for k, v in locals().items() if k not in ("self", "run_id")}
        self._generation = 1  # the how-many-th trial of the run (next_client)
        self._project_op: dict[str, Any] | None = None
        self.project = project
        self.run_id = run_id or f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}"
        if not _RUN_ID.match(self.run_id):
            raise ValueError(f"run_id must be 1-120 characters of A-Z, a-z, 0-9, '.', '_', '-', got {self.run_id!r}")
        self._first_run_id = self.run_id
        self._rank_given = rank is not None
        self.rank = process_rank(rank)
        #: False on a rank other than 0: every call does nothing (module doc)
        self.active = self.rank == 0
        self.base_url = base_url
        self.points_sent = 0
        self.nonfinite_dropped = 0
        self.system_points = 0
        self.error: LedgerRejected | None = None
        self.sampler: SystemSampler | None = None
        self._appended = 0
        #: the run took up an earlier process's trial (``resume``) / logs into another's (``attach``)
        self.resumed = False
        self.attached = attach
        #: the highest step the ledger held when the run took up (points at or below it are dropped)
        self.resumed_step: int | None = None
        #: each series' last value when the run took up (a summary to continue from)
        self.resumed_values: dict[str, float] = {}
        self._warned_below = False
        if not self.active:
            return
        directory = Path(spool_dir) if spool_dir is not None else default_spool_dir()
        self._transport = Transport(
            base_url, token, project, timeout=timeout, gzip_level=gzip_level, in_flight=in_flight
        )
        took = (
            take_up(self._transport, directory, self.run_id, "attach" if attach else str(resume), timeout=close_timeout)
            if resume or attach
            else None
        )
        self.spool = Spool(directory / f"{took.key_prefix if took else self.run_id}{SPOOL_SUFFIX}", durable=durable)
        self.spool.set("run_id", self.run_id)
        self.spool.set("base_url", base_url)
        self.spool.set("project", project)
        self.spool.hold()
        self.max_batch_points = max_batch_points
        self.max_buffer_points = max_buffer_points
        #: points buffered at which log() wakes the spool thread (module doc)
        self._wake_at = min(max(1, max_batch_points // 10), max_buffer_points // 2)
        self.spool_interval = spool_interval
        self.close_timeout = close_timeout
        self.backoff = backoff
        self.keep_spool = keep_spool
        self._logged_clip_scale = False
        self._plan_extra: dict[str, Any] = {"run_id": self.run_id}
        #: one call's record or rows each, in the order logged (records untracked by the
        #: garbage collector, :mod:`trainer_hooks.client.points`: no wrapper tuple around them)
        self._buffer: collections.deque[Record | list[Row]] = collections.deque()
        #: rows of other threads (the system metrics sampler), spooled with the buffer
        self._side: collections.deque[list[Row]] = collections.deque()
        self._last_step = 0
        self._system_interval = sampler_settings(system_metrics)
        self._take_up(took)
        # written by one side each (the logging thread / the spool lock holder): no lock on log()
        self._drained = 0
        self._spool_lock = threading.RLock()
        self._spool_wake = threading.Event()
        self._send_wake = threading.Event()
        self._closing = threading.Event()
        self._stop_sending = threading.Event()
        self._closed = False
        self._exp_id: str | None = None
        self._outcome: TrialOutcome | None = None
        self._report: ClientReport | None = None  # once the spool is removed
        self._unreachable_since: float | None = None  # the sender's view of the ledger
        self._beating = not attach  # the sender heartbeats the planned trial (:meth:`_heartbeat`)
        self._last_beat = float("-inf")
        self._spooler = threading.Thread(target=self._spool_loop, name=f"ledger-spool-{self.run_id}", daemon=True)
        self._sender = threading.Thread(target=self._send_loop, name=f"ledger-send-{self.run_id}", daemon=True)
        self._spooler.start()
        self._sender.start()
        atexit.register(self.close)
        if handle_sigterm:
            install_sigterm_exit()

    # -- the trial ------------------------------------------------------------------------

    def _take_up(self, took: TakeUp | None) -> None:
        """A resumed or attached run starts from its trial (:mod:`trainer_hooks.client.resume`)."""
        if took is None:
            return
        self.spool.set("key_prefix", took.key_prefix)
        if took.exp_id is None:  # resume="allow" and no trial yet: planned as a fresh run
            return
        self.spool.set("exp_id", took.exp_id)
        self.resumed = not self.attached
        self.resumed_step, self.resumed_values = took.last_step, dict(took.last_values)
        self._last_step = took.last_step or 0
        self._plan_extra = {**{k: v for k, v in took.extra.items() if k != "state"}, "run_id": self.run_id}

    def ensure_project(
        self,
        *,
        lower_is_better: bool | None = None,
        title: str = "",
        metric_name: str = "core_metric",
        declared: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Create the project if it does not exist; an existing one is left as it is.

        Its direction: ``lower_is_better``, else the first of ``declared`` (``{"name",
        "lower_is_better", "by"}``: what the run said of a metric, ``by`` in words) about
        ``metric_name``, else lower is better. When an existing project's direction goes
        against ``lower_is_better`` or a declaration, the ledger's answer is a warning
        naming both (:func:`~trainer_hooks.client.outcome.contradiction`)."""
        if not self._rank_zero():
            return
        said = [dict(item) for item in declared]
        if lower_is_better is not None:
            said.insert(
                0, {"name": None, "lower_is_better": lower_is_better, "by": f"lower_is_better={lower_is_better}"}
            )
        found = declared_direction(said, metric_name)
        self._project_op = {
            "slug": self.project,
            "title": title,
            "metric_name": metric_name,
            "lower_is_better": bool(found["lower_is_better"]) if found is not None else True,
        }
        self._append_op("project", {**self._project_op, "declared": said} if said else self._project_op)

    def next_client(self) -> LedgerClient:
        """A client for the next trial of the same run (a second ``trainer.train()``, the
        next run of a hyperparameter search): the same ledger, project and settings, and a
        run id of its own (``<run_id>-<n>``), so its own spool and idempotency keys (one
        client records one trial). The project is ensured again first when this client
        ensured it, so the next trial never waits on a project this spool still holds."""
        generation = self._generation + 1
        settings = {
            **self._settings,
            "rank": self._settings["rank"] if self.active else self.rank,
            "resume": None,  # the next trial is a new one
            "attach": False,
        }
        following = LedgerClient(**settings, run_id=f"{self._first_run_id[:110]}-{generation}")
        following._generation, following._first_run_id = generation, self._first_run_id
        if self._project_op is not None:
            following._project_op = dict(self._project_op)
            following._append_op("project", following._project_op)
        return following

    def plan_trial(
        self,
        *,
        hypothesis: str = "",
        expected_delta: str = "",
        parent_exp: str | None = None,
        baseline_exp: str = "",
        specialist: str = "",
        domain: str = "",
        exp_id: str | None = None,
        owner: str | None = None,
        lease_s: float | None = None,
        claim: bool = True,
        **fields: Any,
    ) -> None:
        """Claim the trial this run is (status ``running``, held by ``owner``, heartbeated by
        the sender, until :meth:`finish_trial`): spooled, sent when the ledger answers
        (:mod:`trainer_hooks.client.claims`: its near-duplicates, or a refusal, in
        :attr:`claim`; :meth:`wait_claim` waits for them).
        ``owner``: who holds the claim (default: the run id); ``lease_s``: how long it lives
        without a heartbeat (10 s to 24 h; default: the project's lease); ``claim=False``,
        or no hypothesis: a plain running record, with no duplicate check.
        ``exp_id`` None: the server allocates it (:attr:`exp_id` once it answered).
        ``parent_exp`` None: left out, so the ledger makes the branch tip (the last keep) the parent;
        ``""``: a root. ``rerun_of=EXP_ID`` (a field): this run repeats that trial's code, and
        the ledger estimates its noise floor from such reruns. A resumed or attached client
        has its trial: nothing is planned."""
        if not self._rank_zero():
            return
        if self.resumed or self.attached:
            log.debug("ledger: run %s took up trial %s; plan_trial plans nothing", self.run_id, self.exp_id)
            return
        lease_s = check_lease(lease_s)
        body: dict[str, Any] = {
            "hypothesis": hypothesis,
            "expected_delta": expected_delta,
            "baseline_exp": baseline_exp,
            "specialist": specialist,
            "domain": domain,
            "status": PLANNED_STATUS,
            **fields,
        }
        if parent_exp is not None:
            body["parent_exp"] = parent_exp
        unknown = set(fields) - set(PLAN_FIELDS)
        if unknown:
            raise ValueError(f"plan_trial: unknown field {sorted(unknown)[0]!r}; known: {', '.join(PLAN_FIELDS)}")
        if exp_id is not None:
            body["exp_id"] = exp_id
            self.spool.set("exp_id", exp_id)
        body.setdefault("timestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"))
        body["extra"] = {"run_id": self.run_id, **dict(body.get("extra") or {})}
        self._plan_extra = body["extra"]
        self.spool.set("owner", owner or self.run_id)
        self._claiming = bool(claim and hypothesis.strip())
        if self._claiming:
            body["claim"] = {"owner": owner or self.run_id, "lease_s": lease_s}
        elif claim:
            log.warning("ledger: plan_trial without a hypothesis is planned without a claim (no duplicate check)")
        self._append_op("plan", body)
        if self._system_interval is not None and self.sampler is None:
            self.sampler = SystemSampler(self._log_system, interval=self._system_interval)
            self.sampler.start()

    def finish_trial(
        self,
        *,
        status: str = "auto",
        core_metric: float | None = None,
        keep_margin: float = 0.0,
        summarize: bool | None = None,
        metric_from: Mapping[str, float] | None = None,
        metric_key: str | None = None,
        **fields: Any,
    ) -> None:
        """Finish the trial: the telemetry logged so far is sent first, then (when clip-scale
        telemetry was logged, or ``summarize``) the server derives the ``ig_clip_scale_*``
        summary from it, then the trial gets its status, metric and fields.

        ``status="auto"``: the outcome rule (``keep`` when ``core_metric`` beats the current
        best by at least ``keep_margin`` in the project's direction, else ``discard``),
        decided by the ledger when it stores the result. Any other value is a failure label.

        ``metric_from`` (a run's summary, ``name -> value``) with no ``core_metric``: the
        core metric is the summary's entry for ``metric_key`` (default: the project's
        ``metric_name``, read when the ledger is reachable), by
        :func:`~trainer_hooks.client.outcome.metric_of_summary`."""
        if not self.active:
            return
        if self.attached:  # the owner finishes the trial; this process only logged into it
            self._spool_buffer()
            return
        unknown = set(fields) - set(FINISH_FIELDS)
        if unknown:
            raise ValueError(f"finish_trial: unknown field {sorted(unknown)[0]!r}; known: {', '.join(FINISH_FIELDS)}")
        if keep_margin < 0:
            raise ValueError(f"keep_margin must be >= 0, got {keep_margin!r}")
        memory = self._stop_sampler()
        self._spool_buffer()
        if summarize if summarize is not None else self._logged_clip_scale:
            self._append_op("summarize", {})
        # a PATCH replaces ``extra`` whole: the plan's entries are carried over
        extra = {
            **self._plan_extra,
            "state": "finished",
            "telemetry_points": self.points_logged,
            "nonfinite_dropped": self.nonfinite_dropped,
            **memory,
            **dict(fields.pop("extra", None) or {}),
        }
        body: dict[str, Any] = {
            "fields": {"status": status, "core_metric": core_metric, "extra": extra, **fields},
            "keep_margin": keep_margin,
        }
        if metric_from is not None and core_metric is None:
            body["metric_from"] = {str(k): float(v) for k, v in metric_from.items() if math.isfinite(float(v))}
            body["metric_key"] = metric_key
        self._append_op("finish", body)

    @property
    def exp_id(self) -> str | None:
        """The trial's exp_id: given to :meth:`plan_trial`, or allocated once the ledger answered."""
        if not self.active:
            return None
        if self._exp_id is None and self._report is None:
            self._exp_id = self.spool.get("exp_id")
        return self._exp_id

    @property
    def outcome(self) -> TrialOutcome | None:
        """What the ledger stored when it took :meth:`finish_trial` (status, ``delta_vs_best``,
        new best or not); None until then."""
        if not self.active:
            return None
        if self._outcome is None and self._report is None:
            found = self.spool.get("outcome")
            self._outcome = TrialOutcome.from_dict(json.loads(found)) if found else None
        return self._outcome

    # -- alerts ---------------------------------------------------------------------------

    def alert(self, title: str, text: str = "", *, level: str = "info", step: int | None = None) -> None:
        """Raise an alert of the trial ("loss is diverging"): spooled at once (it survives a
        crash right after), sent in order with the telemetry, stored once however often it
        is retried. ``level``: ``info``, ``warn`` or ``error``; ``step`` defaults to the step
        last logged. A title is one line of at most 300 characters and a text at most 10,000
        (longer ones are cut, line breaks in a title become spaces)."""
        if not self.active:
            return
        if level not in ALERT_LEVELS:
            raise ValueError(f"alert level must be one of {', '.join(ALERT_LEVELS)}, got {level!r}")
        title = " ".join(str(title).split())[:MAX_ALERT_TITLE]
        if not title:
            raise ValueError("an alert needs a title")
        self._append_op(
            "alert",
            {
                "title": title,
                "text": str(text)[:MAX_ALERT_TEXT],
                "level": level,
                "step": self._last_step if step is None else int(step),
                "wall_time": time.time(),
            },
        )

    # -- telemetry ------------------------------------------------------------------------

    def log(self, step: int, metrics: Mapping[str, Any], *, turn: int | None = None) -> None:
        """Log ``name -> value`` (numbers or 0-dim tensors) at ``step`` (for ``turn``)."""
        if not self.active or (self.resumed_step is not None and self._below_take_up(step)):
            return
        record, dropped = step_record(step, metrics, turn, time.time())
        self._push(0 if record is None else len(record[3]), record, dropped)
        self._last_step = step
        if turn is None and "clip_scale_mean" in metrics:
            self._logged_clip_scale = True

    def log_turns(self, step: int, per_turn: Mapping[str, Any]) -> None:
        """Log per-turn series: ``name -> [T]`` values (list or 1-D tensor), turn ``t`` each."""
        if not self.active or (self.resumed_step is not None and self._below_take_up(step)):
            return
        rows, dropped = turn_rows(step, per_turn, time.time())
        self._push(len(rows), rows, dropped)
        self._last_step = step

    def _below_take_up(self, step: int) -> bool:
        """A resumed run's step at or below the ledger's highest: dropped, one warning."""
        assert self.resumed_step is not None
        if step > self.resumed_step:
            return False
        if not self._warned_below:
            self._warned_below = True
            log.warning(
                "ledger: run %s took up trial %s at step %d: points at steps up to it are already stored and are "
                "dropped (step %d)",
                self.run_id,
                self.exp_id,
                self.resumed_step,
                step,
            )
        return True

    @property
    def points_logged(self) -> int:
        """Points logged so far (in memory, spooled or sent)."""
        return self._appended

    def _stop_sampler(self) -> dict[str, float]:
        """Stop the sampler; ``{"memory_gb": peak}`` when the run used a GPU, else ``{}``."""
        sampler, self.sampler = self.sampler, None
        if sampler is None:
            return {}
        sampler.stop()
        try:
            sampler.sample()  # the peak up to now
        except Exception:  # never take the trainer down for a figure
            log.debug("ledger: final system sample failed", exc_info=True)
        peak = sampler.peak_gpu_gb
        return {} if peak is None else {"memory_gb": round(peak, 3)}

    def _rank_zero(self) -> bool:
        """Still the job's rank 0? A rank that was not given is looked up again: a process
        group made after the client tells the truth now (module doc of
        :mod:`trainer_hooks.client.rank`); a client that learns it is not rank 0 stands down."""
        if self.active and not self._rank_given:
            rank = process_rank()
            if rank != 0:
                self.stand_down(rank)
        return self.active

    def __enter__(self) -> LedgerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
