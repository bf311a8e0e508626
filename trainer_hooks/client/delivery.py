"""Sending a spool to the ledger: each op in order, idempotently, with a verdict per reply.

One function (:func:`deliver`) replays a spool; the client's background sender and
``lineage spool flush`` both call it, so there is one replay rule:

* a connection error, a timeout, a 5xx, 408 or 429 is :class:`Unavailable`: the op stays
  in the spool and is retried after a backoff;
* any other 4xx (a rejected or revoked token, a missing project, a conflict) is
  :class:`LedgerRejected`: nothing more is sent, the ops stay in the spool, and the
  reason is written into the spool's ``rejected`` meta so a later ``lineage spool
  flush`` (with a new token, say) can try again;
* a 2xx marks the op sent.

Telemetry batches are pipelined: up to ``Transport.in_flight`` (2 by default) consecutive
batches are in flight at once, each under its own ``batch_id``, and the next batch is
keyed and its request body built while they are (so the client's work overlaps the
ledger's, and the ledger has the next body in hand when it finishes one). A body is the
spooled column blocks joined as they are, never decoded; a live client's blocks come
from memory (:mod:`trainer_hooks.client.spool`, "Bodies from memory"), others from the
file. Each batch's ops are marked sent on its own 2xx, in whatever order the answers
come; a batch that fails stays in the spool under its key and is re-sent as it was. Any
other op (an alert, the summary, the finish) waits until every batch before it is
acknowledged: a trial is finished only after the ledger has all of its telemetry.
Nothing is left in flight when :func:`deliver` returns or raises.

Ops (see :mod:`trainer_hooks.client.spool`): ``project`` (create if missing: ``GET`` the
project, ``POST /projects`` only on a 404, so an existing project costs no ``409
Conflict``; a 409 from a run that created it in between is fine; an existing project whose
direction goes against what the run declared is left as it is, with a warning), ``plan`` (``POST
/claims``, or ``/trials`` unclaimed: :mod:`trainer_hooks.client.claims`; ``Idempotency-Key:
<run_id>-plan``; the stored ``exp_id`` goes into the spool's meta), ``columns`` and ``points`` (``POST .../telemetry`` with ``batch_id``;
consecutive ``columns`` ops sent as one batch, an array of their column blocks), ``alert`` (``POST
.../alerts`` with ``Idempotency-Key: <run_id>-alert-<seq>``; an alert the ledger finds
malformed, a 422, is logged and skipped rather than stopping the run's telemetry),
``summarize`` (a 422 "no clip-scale telemetry" is skipped), ``finish`` (a claim's finish, else ``PATCH`` the
trial; a core metric taken from the run's summary is picked once, by the project's
``metric_name``, and status ``auto`` is decided once by the outcome rule against the
project's current best; both decisions are spooled before the PATCH so a replay cannot
decide differently; the ledger's answer, with whether the trial is the best now, goes
into the spool's ``outcome`` meta as a :class:`~trainer_hooks.client.outcome.TrialOutcome`).
"""

from __future__ import annotations

import gzip
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, wait
from typing import Any
from urllib.parse import quote

import httpx

from trainer_hooks.client.claims import ClaimAnswer, claim_request
from trainer_hooks.client.outcome import TrialOutcome, contradiction, metric_of_summary
from trainer_hooks.client.spool import TELEMETRY_KINDS, Op, Spool

__all__ = [
    "API",
    "HEARTBEAT_INTERVAL_S",
    "Backoff",
    "LedgerRejected",
    "NotPlanned",
    "Transport",
    "Unavailable",
    "deliver",
    "deliver_within",
    "send_heartbeat",
]

log = logging.getLogger("trainer_hooks.client")

API = "/api/v1"
#: 4xx that mean "try again later", not "never"
_RETRY_STATUSES = frozenset({408, 425, 429})
#: longest wait of :func:`deliver` on its ``wake`` event before it looks at the spool again
IDLE_WAIT_S = 0.5
#: seconds between a running trial's heartbeats (the ledger's lease is 600 s by default)
HEARTBEAT_INTERVAL_S = 60.0


class Unavailable(Exception):
    """The ledger could not take the write now (network, timeout, 5xx): retry later."""


class NotPlanned(Unavailable):
    """Points wait for a trial that is not planned yet (the run may still plan it)."""


class LedgerRejected(Exception):
    """The ledger refused a write (4xx): not retried; the data stays in the spool."""

    def __init__(self, status: int, detail: str, *, kind: str, spool: str = "") -> None:
        self.status, self.detail, self.kind, self.spool = status, detail, kind, spool
        hint = " (the token is missing, wrong or revoked)" if status in (401, 403) else ""
        where = f"; the data is kept in {spool}, replay it with `lineage spool flush`" if spool else ""
        what = (
            f"ledger refused the {kind} write with HTTP {status}{hint}" if status else f"cannot send the {kind} write"
        )
        super().__init__(f"{what}: {detail}{where}")


class Backoff:
    """Exponential backoff with jitter: ``first`` seconds doubling up to ``cap``."""

    def __init__(self, first: float = 0.05, cap: float = 5.0) -> None:
        self.first, self.cap = first, cap
        self.delay = first

    def reset(self) -> None:
        self.delay = self.first

    def next(self) -> float:
        """The next wait (``delay`` times a jitter in [0.5, 1.5)); doubles ``delay``."""
        wait = self.delay * (0.5 + random.random())
        self.delay = min(self.cap, self.delay * 2)
        return wait


class Transport:
    """An ``httpx.Client`` bound to one ledger, token and project."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        project: str,
        *,
        timeout: float = 10.0,
        gzip_level: int | None | str = "auto",
        http: httpx.Client | None = None,
        in_flight: int = 2,
    ) -> None:
        if in_flight < 1:
            raise ValueError(f"in_flight must be >= 1, got {in_flight!r}")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = http or httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)
        self.project = project
        self.prefix = f"{API}/projects/{quote(project, safe='')}"
        #: gzip level of telemetry bodies; "auto": none on loopback (compressing costs more
        #: CPU than the bytes it saves there), level 1 (about 20x smaller) over a network
        self.gzip_level = (None if _is_loopback(self.http.base_url.host) else 1) if gzip_level == "auto" else gzip_level
        #: telemetry batches in flight at once (1: one request at a time)
        self.in_flight = in_flight

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn`` on a thread of its own; its outcome in the future. A thread per request
        rather than a ``ThreadPoolExecutor``: an executor refuses work once the interpreter
        began to exit, and the client's last deliveries run in an exit handler."""
        done: Future[Any] = Future()

        def run() -> None:
            try:
                done.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting sender
                done.set_exception(exc)

        threading.Thread(target=run, name="ledger-post", daemon=True).start()
        return done

    def close(self) -> None:
        self.http.close()

    def request(
        self, kind: str, method: str, url: str, *, ok_statuses: tuple[int, ...] = (), **kwargs: Any
    ) -> httpx.Response:
        """The response if 2xx (or in ``ok_statuses``); else :class:`Unavailable` or :class:`LedgerRejected`."""
        try:
            response = self.http.request(method, url, **kwargs)
        except httpx.TransportError as exc:  # connect, read, write, timeouts, protocol errors
            raise Unavailable(f"{kind}: {type(exc).__name__}: {exc}") from None
        status = response.status_code
        if 200 <= status < 300 or status in ok_statuses:
            return response
        if status >= 500 or status in _RETRY_STATUSES:
            raise Unavailable(f"{kind}: HTTP {status}")
        raise LedgerRejected(status, _detail(response), kind=kind)


def send_heartbeat(spool: Spool, transport: Transport) -> bool:
    """``POST .../trials/{exp_id}/heartbeat`` for the spool's planned trial, its claim's
    owner (by default the run id) as its owner (not spooled: a heartbeat is worth something only now). False when the
    ledger answers 409, the trial is no longer running there; :class:`Unavailable` or
    :class:`LedgerRejected` as for any request."""
    exp_id = str(spool.get("exp_id"))
    owner = spool.get("owner") or spool.get("run_id") or spool.path.stem
    url = f"{transport.prefix}/trials/{quote(exp_id, safe='')}/heartbeat"
    response = transport.request("heartbeat", "POST", url, json={"owner": owner}, ok_statuses=(409,))
    return response.status_code != 409


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1", "[::1]") or host.startswith("127.")


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict):
        detail = str(body.get("detail") or body.get("title") or body)
        return f"{detail} (field {body['field']})" if body.get("field") else detail
    return str(body)[:300]


def deliver(
    spool: Spool,
    transport: Transport,
    *,
    max_points: int = 200_000,
    should_stop: Callable[[], bool] = lambda: False,
    on_sent: Callable[[int], None] | None = None,
    final: Callable[[], bool] = lambda: True,
    wake: threading.Event | None = None,
) -> int:
    """Send the spool's unsent ops in order until none is left (or ``should_stop()``);
    telemetry batches pipelined (module doc).

    ``wake``: an event the spool's writer sets after each append (a live client's). With
    it, while batches are in flight and nothing more is spooled, the sender waits for
    either a batch's answer or the event (which the answers set too), so a batch spooled
    meanwhile goes out at once, filling the window; without it (nothing is appended while
    it runs: ``lineage spool flush``), for the next answer.

    Returns the number of points sent. Raises :class:`Unavailable` (retry later) or
    :class:`LedgerRejected` (recorded in the spool's ``rejected`` meta), only once no
    request is in flight. Points with no trial planned before or after them raise
    :class:`NotPlanned` while the run may still plan one (``final()`` false: the client is
    running), else :class:`LedgerRejected`."""
    # a resumed or attached run keys its writes apart from the run's other processes
    # (:mod:`trainer_hooks.client.resume`)
    run_id = spool.get("key_prefix") or spool.get("run_id") or spool.path.stem
    flight = _Flight(spool, transport, on_sent, wake)
    planned = False
    try:
        while not should_stop():
            op = spool.next_unsent(after=flight.last_seq)
            if op is None:
                if not flight.batches:
                    return flight.sent_points
                if wake is None:
                    flight.wait(first=True)
                else:  # an answer, or more spooled (the event is cleared before looking again)
                    wake.wait(IDLE_WAIT_S)
                    wake.clear()
                    flight.wait(first=True, timeout=0)
                continue
            planned = planned or bool(spool.get("exp_id"))
            if op.kind in TELEMETRY_KINDS and planned:
                if len(flight.batches) >= transport.in_flight:
                    flight.wait(first=True)
                    continue
                key, ops = spool.group(op, max_points=max_points, run_id=run_id)
                flight.send(key, ops)
                continue
            flight.wait(first=False)  # every other op goes after the telemetry before it
            if op.kind in TELEMETRY_KINDS + ("alert",) and not planned:
                op = _plan_logged_later(spool, op, final())  # logged before plan_trial: plan first
            _send_op(spool, transport, op, run_id)
            spool.mark_sent([op.seq])
            flight.succeeded()
    except LedgerRejected as exc:
        flight.drain()
        spool.set("rejected", json.dumps({"status": exc.status, "kind": exc.kind, "detail": exc.detail}))
        raise LedgerRejected(exc.status, exc.detail, kind=exc.kind, spool=str(spool.path)) from None
    except BaseException:
        flight.drain()
        raise
    flight.drain()
    return flight.sent_points


class _Flight:
    """The telemetry batches of one :func:`deliver` call that are in flight: each one's
    request runs on the transport's threads; its ops are marked sent (on this thread) when
    its 2xx comes back."""

    def __init__(
        self,
        spool: Spool,
        transport: Transport,
        on_sent: Callable[[int], None] | None,
        wake: threading.Event | None = None,
    ) -> None:
        self.spool, self.transport, self.on_sent, self.wake = spool, transport, on_sent, wake
        self.batches: dict[Future[None], list[Op]] = {}
        #: the highest seq in flight: the ops up to it are sent or in flight
        self.last_seq = 0
        self.sent_points = 0
        self.rejected_before = spool.get("rejected") is not None

    def send(self, key: str, ops: list[Op]) -> None:
        """Build the batch's body here and post it on a request thread (at once when
        ``in_flight`` is 1, on this thread)."""
        exp_id = _exp_id(self.spool, "telemetry")
        body, headers = _telemetry_body(self.transport, key, ops)
        url = f"{self.transport.prefix}/trials/{quote(exp_id, safe='')}/telemetry"
        if self.transport.in_flight == 1:
            done: Future[None] = Future()
            try:
                _post_telemetry(self.transport, url, body, headers)
                done.set_result(None)
            except Exception as exc:  # noqa: BLE001 - handed to wait() like a thread's failure
                done.set_exception(exc)
        else:
            done = self.transport.submit(_post_telemetry, self.transport, url, body, headers)
        self.batches[done] = ops
        if self.wake is not None:
            done.add_done_callback(lambda _: self.wake.set())  # type: ignore[union-attr]
        self.last_seq = max(self.last_seq, ops[-1].seq)
        if self.transport.in_flight == 1:
            self.wait(first=False)

    def wait(self, *, first: bool, timeout: float | None = None) -> None:
        """Wait for the first batch in flight to finish (``first``) or for all of them, at
        most ``timeout`` seconds (0: take what finished); mark each finished one sent. A
        failure is raised once nothing is in flight (the others are waited for and kept:
        sent, or left in the spool under their key)."""
        if not self.batches:
            return
        done, _ = wait(list(self.batches), timeout=timeout, return_when=FIRST_COMPLETED if first else ALL_COMPLETED)
        error: BaseException | None = None
        for future in sorted(done, key=lambda f: self.batches[f][0].seq):
            ops = self.batches.pop(future)
            failed = future.exception()
            if failed is not None:
                error = error or failed
                continue
            self.spool.mark_sent([o.seq for o in ops])
            count = sum(o.points for o in ops)
            self.sent_points += count
            if self.on_sent is not None:
                self.on_sent(count)
            self.succeeded()
        if error is not None:
            self.drain()
            raise error
        if not self.batches:
            self.last_seq = 0

    def drain(self) -> None:
        """Wait for everything in flight; keep what succeeded, drop the failures (they stay
        in the spool, keyed, for the next attempt)."""
        while self.batches:
            try:
                self.wait(first=False)
            except Exception:  # noqa: BLE001 - the first failure is the one raised
                pass

    def succeeded(self) -> None:
        if self.rejected_before:  # the refusal is over (a new token, say)
            self.spool.set("rejected", None)
            self.rejected_before = False


def _plan_logged_later(spool: Spool, op: Op, final: bool) -> Op:
    """For points logged before ``plan_trial``: the next unsent ``project`` or ``plan`` op
    after them (sent first); else :class:`NotPlanned` or, when ``final``, a refusal
    naming the missing call."""
    nxt = spool.next_unsent(after=op.seq, kinds=("project", "plan", "summarize", "finish"))
    if nxt is not None and nxt.kind in ("project", "plan"):
        return nxt
    if nxt is None and not final:
        raise NotPlanned("telemetry waits for plan_trial")
    raise LedgerRejected(0, "no trial to attach the telemetry to: call plan_trial (or give exp_id)", kind="telemetry")


def _exp_id(spool: Spool, kind: str) -> str:
    exp_id = spool.get("exp_id")
    if not exp_id:
        raise LedgerRejected(0, "no trial planned: call plan_trial (or give exp_id) first", kind=kind)
    return exp_id


def _telemetry_body(transport: Transport, key: str, ops: list[Op]) -> tuple[bytes, dict[str, str]]:
    """The request body of a telemetry batch and its headers."""
    # blocks joined as they were spooled, in one copy: nothing decoded (the server
    # concatenates column blocks)
    parts = [b'{"batch_id":', json.dumps(key).encode()]
    if ops[0].kind == "columns":
        parts.append(b',"columns":' if len(ops) == 1 else b',"columns":[')
    else:
        parts.append(b',"points":[')
    for n, op in enumerate(ops):
        if n:
            parts.append(b",")
        parts.append(op.body if isinstance(op.body, bytes) else op.body.encode())
    parts.append(b"}" if ops[0].kind == "columns" and len(ops) == 1 else b"]}")
    body = b"".join(parts)
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    if isinstance(transport.gzip_level, int) and len(body) > 4096:
        body = gzip.compress(body, transport.gzip_level)
        headers["Content-Encoding"] = "gzip"
    return body, headers


def _post_telemetry(transport: Transport, url: str, body: bytes, headers: dict[str, str]) -> None:
    transport.request("telemetry", "POST", url, content=body, headers=headers)


def _send_op(spool: Spool, transport: Transport, op: Op, run_id: str) -> None:
    body = json.loads(op.body)
    if op.kind == "project":
        declared = body.pop("declared", None)
        found = transport.request("project", "GET", transport.prefix, ok_statuses=(404,))
        if found.status_code == 404:
            transport.request("project", "POST", f"{API}/projects", json=body, ok_statuses=(409,))
        elif declared:
            warning = contradiction(declared, found.json())
            if warning:
                log.warning("ledger: %s", warning)
    elif op.kind == "plan":
        if body.get("claim") is not None:
            _send_claim(spool, transport, body, run_id)
        else:
            _send_plan(spool, transport, body, run_id)
    elif op.kind == "alert":
        exp_id = _exp_id(spool, "alert")
        sent = transport.request(
            "alert",
            "POST",
            f"{transport.prefix}/trials/{quote(exp_id, safe='')}/alerts",
            json=body,
            headers={"Idempotency-Key": f"{run_id}-alert-{op.seq}"},
            ok_statuses=(422,),
        )
        if sent.status_code == 422:
            log.warning("ledger refused an alert (%s); it is skipped", _detail(sent))
    elif op.kind == "summarize":
        exp_id = _exp_id(spool, "summarize")
        transport.request(
            "summarize",
            "POST",
            f"{transport.prefix}/trials/{quote(exp_id, safe='')}/telemetry/summarize",
            ok_statuses=(422,),
        )
    elif op.kind == "finish":
        exp_id = _exp_id(spool, "finish")
        fields = dict(body["fields"])
        if body.get("metric_from") is not None and fields.get("core_metric") is None:
            fields["core_metric"], used = _metric_of_summary(spool, transport, body)
            if used:
                fields["extra"] = {**(fields.get("extra") or {}), "metric_from_summary": used}
        if fields.get("status") == "auto":
            decided = spool.get("decided_status")  # a spool from a client that decided itself
            if decided:
                fields["status"] = decided
            else:  # the ledger decides, against the best when it stores the result
                fields["keep_margin"] = float(body.get("keep_margin") or 0.0)
        done = spool.get("finished")  # stored already: a retry only reads the best
        stored = json.loads(done) if done else _send_finish(spool, transport, exp_id, fields)
        spool.set("finished", json.dumps(stored))
        best = (_knowledge(transport).get("best") or {}).get("exp_id")
        noise = stored.get("noise") or {}
        outcome = TrialOutcome(
            exp_id=stored["exp_id"],
            status=stored["status"],
            core_metric=stored.get("core_metric"),
            delta_vs_best=stored.get("delta_vs_best"),
            is_new_best=best == stored["exp_id"],
            best_exp=best,
            within_noise=noise.get("within_noise"),
            noise=noise.get("text"),
        )
        spool.set("outcome", json.dumps(outcome.to_dict()))
    else:
        raise LedgerRejected(0, f"unknown spooled op {op.kind!r} (seq {op.seq})", kind=op.kind)


def _send_plan(spool: Spool, transport: Transport, body: dict[str, Any], run_id: str) -> None:
    """A plan as a plain running record (no claim: :mod:`trainer_hooks.client.claims`)."""
    made = transport.request(
        "plan", "POST", f"{transport.prefix}/trials", json=body, headers={"Idempotency-Key": f"{run_id}-plan"}
    )
    spool.set("exp_id", made.json()["trial"]["exp_id"])


def _send_claim(spool: Spool, transport: Transport, plan: dict[str, Any], run_id: str) -> None:
    """A plan as a claim; its answer into the spool's ``claim`` meta (module doc of
    :mod:`trainer_hooks.client.claims`: the fallback to a plain record, a refusal)."""
    owner = str(plan["claim"]["owner"])
    sent = transport.request(
        "claim",
        "POST",
        f"{transport.prefix}/claims",
        json=claim_request(plan),
        headers={"Idempotency-Key": f"{run_id}-plan"},
        ok_statuses=(409, 422),
    )
    problem = _problem(sent)
    if sent.status_code == 422 and problem.get("field") == "hypothesis":
        why = f"the ledger cannot compare this hypothesis as a claim ({_detail(sent)}); planned without a claim"
        log.warning("ledger: %s", why)
        _send_plan(spool, transport, {k: v for k, v in plan.items() if k != "claim"}, run_id)
        spool.set("claim", json.dumps(ClaimAnswer(spool.get("exp_id"), owner, False, warnings=(why,)).to_dict()))
        return
    if sent.status_code == 409 and problem.get("field") == "hypothesis":  # a duplicate the project refuses
        refused = ClaimAnswer(None, owner, False, refused=True, detail=_detail(sent), existing=problem.get("existing"))
        spool.set("claim", json.dumps(refused.to_dict()))
    if sent.status_code in (409, 422):
        raise LedgerRejected(sent.status_code, _detail(sent), kind="claim")
    answer = ClaimAnswer.of_claim(sent.json(), owner)
    # before wait_claim(): a close idea running now warns; ideas tried before (a sweep's) inform
    running = {f"trial {item.get('exp_id')} " for item in answer.duplicates.get("running") or ()}
    for warning in answer.warnings:
        (log.warning if any(w in warning for w in running) else log.info)(
            "ledger: claim of trial %s: %s", answer.exp_id, warning
        )
    spool.set("exp_id", str(answer.exp_id))
    spool.set("claim", json.dumps(answer.to_dict()))


def _send_finish(spool: Spool, transport: Transport, exp_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The finish of the planned trial; the ledger's answer (the trial and ``noise``). A
    claimed trial is finished by its owner; one no longer running that this owner held is
    patched as before claims (:mod:`trainer_hooks.client.claims`)."""
    url = f"{transport.prefix}/trials/{quote(exp_id, safe='')}"
    found = spool.get("claim")
    claim = ClaimAnswer.from_dict(json.loads(found)) if found else None
    if claim is None or not claim.claimed:
        return dict(transport.request("finish", "PATCH", url, json=fields).json())
    finish = f"{transport.prefix}/claims/{quote(exp_id, safe='')}/finish"
    sent = transport.request("finish", "POST", finish, json={**fields, "owner": claim.owner}, ok_statuses=(409,))
    if sent.status_code != 409:
        return dict(sent.json())
    problem = _problem(sent)
    existing = problem.get("existing") or {}
    if problem.get("field") != "status" or existing.get("owner") not in (claim.owner, ""):
        raise LedgerRejected(409, _detail(sent), kind="finish")
    if existing.get("status") == "harness_abort":
        log.warning(
            "ledger: the claim of trial %s lapsed before its finish arrived (%s); the run's result is recorded on it",
            exp_id,
            _detail(sent),
        )
    return dict(transport.request("finish", "PATCH", url, json=fields).json())


def _problem(response: httpx.Response) -> dict[str, Any]:
    """The problem+json body of a 4xx ({} for another answer)."""
    try:
        body = response.json() if response.status_code >= 400 else {}
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _metric_of_summary(spool: Spool, transport: Transport, body: dict[str, Any]) -> tuple[float | None, str | None]:
    """The core metric from the finish's summary (the project's ``metric_name`` unless the
    run named its key), and the summary entry it came from; stored in the spool before the
    PATCH that uses it."""
    stored = spool.get("decided_metric")
    if stored is not None:
        value, used = json.loads(stored)
        return value, used
    key = body.get("metric_key") or transport.request("finish", "GET", transport.prefix).json()["metric_name"]
    used, value = metric_of_summary(body["metric_from"], key)
    if value is None:
        log.warning(
            "ledger: the metric %r is not in the run's summary%s (summary keys: %s); the trial is stored with no "
            "metric (name the summary key with init(metric=...) or LINEAGE_METRIC)",
            key,
            f" as a finite number (found {used!r})" if used else "",
            ", ".join(sorted(body["metric_from"])[:20]) or "none",
        )
    spool.set("decided_metric", json.dumps([value, used]))
    return value, used


def _knowledge(transport: Transport) -> dict[str, Any]:
    """The project's best and direction (the smallest knowledge answer)."""
    return transport.request(
        "finish", "GET", f"{transport.prefix}/knowledge", params={"format": "json", "recent_n": 1, "last_m": 1}
    ).json()


def deliver_within(
    spool: Spool, transport: Transport, timeout: float, *, max_points: int = 200_000, backoff: Backoff | None = None
) -> int:
    """:func:`deliver`, retrying :class:`Unavailable` with backoff for at most ``timeout``
    seconds; returns the points sent. Raises the last :class:`Unavailable` when time runs
    out, :class:`LedgerRejected` at once."""
    backoff = backoff or Backoff()
    deadline = time.monotonic() + timeout
    sent = 0

    def count(n: int) -> None:
        nonlocal sent
        sent += n

    while True:
        try:
            deliver(spool, transport, max_points=max_points, on_sent=count)
            return sent
        except Unavailable:
            wait = backoff.next()
            if time.monotonic() + wait >= deadline:
                raise
            time.sleep(wait)
