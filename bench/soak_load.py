"""The actors of ``bench/soak.py``: each a thread that loads a real ``lineage serve`` the
way its kind of user does, timing every request into a shared :class:`Recorder` and
counting as an error any answer other than the one expected (a non-2xx/304, a 304 that
was not asked for, an exception).

* :func:`agent`: polls the wrapped prompt with ``If-None-Match`` (200 with a new ETag, or
  304) and records trials with an ``Idempotency-Key``, now and then retrying one (200).
* :func:`trainer`: one ``LedgerClient`` + ``TrialRecorder`` per trial, streaming
  telemetry through the client's spool; each request the client makes is timed through
  httpx event hooks, its warnings (ledger unreachable) are errors, and every trial must
  end delivered with an outcome.
* :func:`researcher`: the pages: project list, dashboard, trials table, a trial page,
  compare, the metric explorer.
* :class:`Watcher`: ``lineage watch FILE --server URL`` as a subprocess and a writer
  appending autoresearch rows; the lag from an append to the watcher's ``added`` line.
"""

from __future__ import annotations

import logging
import math
import random
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

API = "/api/v1/projects"
AGENTS, TRAINER, WATCHED = "soak-agents", "soak-trainer", "soak-watch"
IDEAS = [
    "increase matrix LR to 0.04",
    "switch MLP to GeLU",
    "add 200 warmup steps",
    "muon momentum 0.95",
    "weight decay 0.1 on embeddings",
    "rope base 50k",
    "wider MLP",
    "one more layer",
    "qk-norm",
    "value residual",
    "untie embeddings",
    "logit soft-capping",
    "shorter cooldown",
    "z-loss 1e-4",
]


@dataclass
class Recorder:
    """Every timed request (kind, seconds since the start, latency in ms), every error
    (kind, time, what), and the ids the actors share; thread-safe."""

    t0: float = field(default_factory=time.monotonic)
    samples: list[tuple[str, float, float]] = field(default_factory=list)
    errors: list[tuple[str, float, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    ids: dict[str, list[str]] = field(default_factory=lambda: {AGENTS: [], TRAINER: []})
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def time(self, kind: str, latency_s: float, at: float | None = None) -> None:
        with self.lock:
            self.samples.append((kind, self.now() if at is None else at, latency_s * 1000.0))

    def error(self, kind: str, what: str) -> None:
        with self.lock:
            self.errors.append((kind, self.now(), what[:500]))

    def count(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + n

    def add_id(self, project: str, exp_id: str) -> None:
        with self.lock:
            self.ids[project].append(exp_id)

    def pick(self, project: str, k: int) -> list[str]:
        with self.lock:
            recent = self.ids[project][-200:]
        return random.sample(recent, min(k, len(recent)))


def call(
    rec: Recorder,
    http: httpx.Client,
    kind: str,
    method: str,
    url: str,
    *,
    expect: tuple[int, ...],
    kinds: dict[int, str] | None = None,
    **kwargs: Any,
) -> httpx.Response | None:
    """One timed request, as ``kind`` (or ``kinds[status]``); an error (and None) unless
    its status is in ``expect``."""
    start = time.perf_counter()
    try:
        response = http.request(method, url, **kwargs)
        response.read()
    except Exception as exc:  # a soak counts every failure, whatever its kind
        rec.error(kind, f"{method} {url}: {type(exc).__name__}: {exc}")
        return None
    rec.time((kinds or {}).get(response.status_code, kind), time.perf_counter() - start)
    if response.status_code not in expect:
        rec.error(kind, f"{method} {url}: HTTP {response.status_code}: {_gist(response)}")
        return None
    return response


def _gist(response: httpx.Response) -> str:
    """An error answer in a line: a problem's detail, a page's title."""
    text = response.text
    if "<title>" in text:
        return text.split("<title>", 1)[1].split("</title>", 1)[0]
    return " ".join(text.split())[:300]


def agent(rec: Recorder, base: str, stop: threading.Event, *, seed: int, poll_s: float, record_s: float) -> None:
    """Poll the prompt every ``poll_s`` with the last ETag; record a trial every ``record_s``."""
    rng = random.Random(seed)
    etag: str | None = None
    next_record = time.monotonic() + rng.uniform(0, record_s)
    metric = 1.0
    with httpx.Client(base_url=base, timeout=60) as http:
        while not stop.is_set():
            headers = {"If-None-Match": etag} if etag else {}
            got = call(
                rec,
                http,
                "agent.prompt",
                "GET",
                f"{API}/{AGENTS}/prompt",
                headers=headers,
                expect=(200, 304) if etag else (200,),
                kinds={304: "agent.poll304"},
            )
            if got is not None:
                rec.count("prompt_304" if got.status_code == 304 else "prompt_200")
                etag = got.headers.get("etag") or etag
                if got.status_code == 200 and not got.headers.get("etag"):
                    rec.error("agent.prompt", "a 200 prompt without an ETag")
            if time.monotonic() >= next_record:
                next_record += record_s
                metric = metric + rng.gauss(0.001, 0.004)
                status = rng.choices(["keep", "discard", "crash"], [3, 6, 1])[0]
                body = {
                    "status": status,
                    "core_metric": None if status == "crash" else round(metric, 6),
                    "hypothesis": f"{rng.choice(IDEAS)} (agent {seed}, try {rng.getrandbits(32):08x})",
                    "expected_delta": "-0.002",
                    "extra": {"agent": seed, "lr": rng.choice([0.01, 0.02, 0.04])},
                }
                key = uuid.uuid4().hex
                got = call(
                    rec,
                    http,
                    "agent.record",
                    "POST",
                    f"{API}/{AGENTS}/trials",
                    json=body,
                    headers={"Idempotency-Key": key},
                    expect=(201,),
                )
                if got is not None:
                    first = got.json()
                    exp_id = first["trial"]["exp_id"]
                    rec.count("agent_trials")
                    if exp_id:
                        rec.add_id(AGENTS, str(exp_id))
                    if rng.random() < 0.25:  # a lost response: the same request again is a 200, no duplicate
                        again = call(
                            rec,
                            http,
                            "agent.retry",
                            "POST",
                            f"{API}/{AGENTS}/trials",
                            json=body,
                            headers={"Idempotency-Key": key},
                            expect=(200,),
                        )
                        if again is not None:
                            again_id = again.json()["trial"]["exp_id"]
                            if again_id != exp_id:
                                rec.error("agent.retry", f"retry answered exp_id {again_id!r}, first {exp_id!r}")
            stop.wait(poll_s)


class _ClientLog(logging.Handler):
    """The trainer client's warnings (ledger unreachable, held ops) are soak errors."""

    def __init__(self, rec: Recorder) -> None:
        super().__init__(logging.WARNING)
        self.rec = rec

    def emit(self, record: logging.LogRecord) -> None:
        self.rec.error("trainer.client", record.getMessage())


def _timed_hooks(rec: Recorder, http: httpx.Client) -> None:
    def started(request: httpx.Request) -> None:
        request.extensions["soak_t0"] = time.perf_counter()

    def answered(response: httpx.Response) -> None:
        start = response.request.extensions.get("soak_t0")
        path = response.request.url.path
        kind = "trainer.telemetry" if path.endswith("/telemetry") else "trainer.trial"
        if start is not None:
            rec.time(kind, time.perf_counter() - start)
        # a 5xx the client would retry silently is an error here; a 4xx stops the client and
        # shows as a trial not delivered (a 404 is how it learns the project is missing)
        if response.status_code >= 500 or response.status_code in (408, 429):
            rec.error(kind, f"{response.request.method} {path}: HTTP {response.status_code}")

    http.event_hooks = {"request": [started], "response": [answered]}


def trainer(rec: Recorder, base: str, stop: threading.Event, *, spool_dir: Path, steps: int, step_s: float) -> None:
    """Trials one after another, each ``steps`` steps of generic telemetry ``step_s`` apart
    (the last trial is cut short at the stop, and still finished)."""
    from trainer_hooks.callbacks import TrialRecorder
    from trainer_hooks.client import LedgerClient

    logging.getLogger("trainer_hooks.client").addHandler(_ClientLog(rec))
    rng = random.Random(7)
    trial = 0
    while not stop.is_set():
        trial += 1
        client = LedgerClient(base, None, TRAINER, spool_dir=spool_dir, system_metrics=5.0, close_timeout=60)
        _timed_hooks(rec, client._transport.http)
        client.ensure_project(lower_is_better=True, metric_name="val_loss")
        lr = rng.choice([3e-4, 6e-4, 1e-3])
        started = time.monotonic()
        with TrialRecorder(client, hypothesis=f"lr {lr} run {trial}", expected_delta="-0.01") as run:
            loss = 4.0
            for step in range(steps):
                if stop.is_set():
                    break
                loss = loss * (1 - lr * 2) + rng.gauss(0, 0.01)
                run.log(
                    step,
                    {
                        "train_loss": loss,
                        "lr": lr * min(1.0, (step + 1) / 50),
                        "grad_norm": abs(rng.gauss(1.0, 0.3)),
                        "tokens_per_s": rng.gauss(9e4, 3e3),
                    },
                )
                if step % 50 == 49:
                    run.log(step, {"val_loss": loss + 0.05 + rng.gauss(0, 0.005)})
                time.sleep(step_s)
            run.result(core_metric=round(loss + 0.05, 6))
        report = client.close()
        rec.time("trainer.trial_total", time.monotonic() - started)
        if not report.delivered or report.outcome is None or not report.spool_removed:
            rec.error(
                "trainer.outcome",
                f"trial {trial}: delivered={report.delivered} outcome={report.outcome} "
                f"pending={report.pending_ops} error={report.error}",
            )
            continue
        rec.count("trainer_trials")
        rec.count("trainer_points", report.points_sent)
        rec.add_id(TRAINER, report.outcome.exp_id)


PAGES = ("page.projects", "page.dashboard", "page.table", "page.trial", "page.compare", "page.explore")


def researcher(rec: Recorder, base: str, stop: threading.Event, *, every_s: float) -> None:
    """The pages in turn, ``every_s`` apart, on the trainer's and the agents' projects."""
    rng = random.Random(11)
    turn = 0
    with httpx.Client(base_url=base, timeout=60) as http:
        while not stop.is_set():
            kind = PAGES[turn % len(PAGES)]
            project = TRAINER if (turn // len(PAGES)) % 2 == 0 else AGENTS
            turn += 1
            if kind == "page.projects":
                url = "/"
            elif kind == "page.dashboard":
                url = f"/projects/{project}"
            elif kind == "page.table":
                url = f"/projects/{project}/trials" + ("?sort=metric" if rng.random() < 0.5 else "")
            elif kind == "page.trial":
                ids = rec.pick(project, 1)
                url = f"/projects/{project}/trials/{ids[0]}" if ids else ""
            elif kind == "page.compare":
                ids = rec.pick(TRAINER, 3)
                url = f"/projects/{TRAINER}/compare?exp={','.join(ids)}" if len(ids) >= 2 else ""
            else:
                url = f"/projects/{TRAINER}/explore?metric=train_loss&smooth=0.6" if rec.pick(TRAINER, 1) else ""
            if url:
                call(rec, http, kind, "GET", url, expect=(200,))
            stop.wait(every_s)


class Watcher:
    """``lineage watch FILE --project soak-watch --server URL`` following a file that a
    writer thread appends an autoresearch row to every ``every_s`` seconds."""

    HEADER = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n"

    def __init__(self, rec: Recorder, base: str, workdir: Path, *, every_s: float) -> None:
        self.rec = rec
        self.path = workdir / "results.tsv"
        self.every_s = every_s
        self.rng = random.Random(5)
        self.best = 1.0
        self.written = 0
        self.added = 0
        self.pending: list[float] = []  # append times of rows not yet reported added
        self.lock = threading.Lock()
        self.path.write_text(self.HEADER, encoding="utf-8")
        self._append()  # the baseline, there before the watcher starts
        env = {"PYTHONUNBUFFERED": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        import os

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "watch", str(self.path), "--project", WATCHED, "--server", base],
            cwd=workdir,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.readers = [
            threading.Thread(target=self._read_out, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _append(self) -> None:
        commit = f"{self.rng.getrandbits(28):07x}"
        idea = self.rng.choice(IDEAS)
        if self.written == 0:
            line = f"{commit}\t{self.best:.6f}\t44.0\tkeep\tbaseline\n"
        elif self.rng.random() < 0.1:
            line = f"{commit}\t0.000000\t0.0\tcrash\t{idea} (OOM)\n"
        else:
            val = self.best + self.rng.gauss(0.002, 0.004)
            status = "keep" if val < self.best else "discard"
            self.best = min(self.best, val) if status == "keep" else self.best
            line = f"{commit}\t{val:.6f}\t{44 + self.rng.random() * 3:.1f}\t{status}\t{idea}\n"
        with self.lock:
            with self.path.open("a", encoding="utf-8", newline="") as fh:  # one write per row, as a loop does
                fh.write(line)
            self.written += 1
            self.pending.append(self.rec.now())

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = self.rec.now()
            words = line.split()
            if len(words) >= 2 and words[0] == "added" and words[1].rstrip(":").isdigit():
                n = int(words[1].rstrip(":"))
                with self.lock:
                    done, self.pending = self.pending[:n], self.pending[n:]
                    self.added += n
                    if len(done) < n:
                        self.rec.error("watch", f"the watcher added {n} rows, {len(done)} were waiting: {line.strip()}")
                for appended in done:
                    self.rec.time("watch.lag", now - appended, at=now)
            elif line.strip():
                self.rec.error("watch", f"unexpected watcher output: {line.strip()}")

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if line.strip() and not line.startswith("watching "):
                self.rec.error("watch", f"watcher stderr: {line.strip()}")

    def write(self, stop: threading.Event) -> None:
        """The writer thread: a row every ``every_s`` until ``stop``."""
        while not stop.wait(self.every_s):
            if self.proc.poll() is not None:
                self.rec.error("watch", f"the watcher exited with {self.proc.returncode}")
                return
            self._append()

    def finish(self, timeout: float = 30.0) -> None:
        """Wait until every row written was reported added (else an error), then stop the watcher."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.pending and self.proc.poll() is None:
            time.sleep(0.2)
        if self.pending:
            self.rec.error("watch", f"{len(self.pending)} of {self.written} rows never reported added")
        if self.proc.poll() is not None:
            self.rec.error("watch", f"the watcher exited with {self.proc.returncode}")
        from tests.servers import stop as stop_process

        stop_process(self.proc, timeout=15)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))]
