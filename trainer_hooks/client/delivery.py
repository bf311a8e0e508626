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

Ops (see :mod:`trainer_hooks.client.spool`): ``project`` (create if missing: ``GET`` the
project, ``POST /projects`` only on a 404, so an existing project costs no ``409
Conflict``; a 409 from a run that created it in between is fine), ``plan`` (``POST
/trials`` with ``Idempotency-Key: <run_id>-plan``; the stored ``exp_id`` goes into the
spool's meta), ``columns`` and ``points`` (``POST .../telemetry`` with ``batch_id``;
consecutive ``columns`` ops sent as one batch, an array of their column blocks), ``alert`` (``POST
.../alerts`` with ``Idempotency-Key: <run_id>-alert-<seq>``; an alert the ledger finds
malformed, a 422, is logged and skipped rather than stopping the run's telemetry),
``summarize`` (a 422 "no clip-scale telemetry" is skipped), ``finish`` (``PATCH`` the
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
import time
from typing import Any, Callable
from urllib.parse import quote

import httpx

from trainer_hooks.client.outcome import TrialOutcome, decide_status, metric_of_summary
from trainer_hooks.client.spool import Op, Spool

__all__ = ["API", "Backoff", "LedgerRejected", "NotPlanned", "Transport", "Unavailable", "deliver", "deliver_within"]

log = logging.getLogger("trainer_hooks.client")

API = "/api/v1"
#: spool ops that are telemetry: the columnar form, and point objects (older spools)
TELEMETRY_KINDS = ("columns", "points")
#: 4xx that mean "try again later", not "never"
_RETRY_STATUSES = frozenset({408, 425, 429})


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
        what = f"ledger refused the {kind} write with HTTP {status}{hint}" if status else f"cannot send the {kind} write"
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

    def __init__(self, base_url: str, token: str | None, project: str, *, timeout: float = 10.0,
                 gzip_level: int | None | str = "auto", http: httpx.Client | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = http or httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)
        self.project = project
        self.prefix = f"{API}/projects/{quote(project, safe='')}"
        #: gzip level of telemetry bodies; "auto": none on loopback (compressing costs more
        #: CPU than the bytes it saves there), level 1 (about 20x smaller) over a network
        self.gzip_level = (None if _is_loopback(self.http.base_url.host) else 1) if gzip_level == "auto" else gzip_level

    def close(self) -> None:
        self.http.close()

    def request(self, kind: str, method: str, url: str, *, ok_statuses: tuple[int, ...] = (),
                **kwargs: Any) -> httpx.Response:
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


def deliver(spool: Spool, transport: Transport, *, max_points: int = 200_000,
            should_stop: Callable[[], bool] = lambda: False, on_sent: Callable[[int], None] | None = None,
            final: Callable[[], bool] = lambda: True) -> int:
    """Send the spool's unsent ops in order until none is left (or ``should_stop()``).

    Returns the number of points sent. Raises :class:`Unavailable` (retry later) or
    :class:`LedgerRejected` (recorded in the spool's ``rejected`` meta). Points with no
    trial planned before or after them raise :class:`NotPlanned` while the run may still
    plan one (``final()`` false: the client is running), else :class:`LedgerRejected`."""
    run_id = spool.get("run_id") or spool.path.stem
    sent_points = 0
    rejected_before = spool.get("rejected") is not None
    while not should_stop():
        op = spool.next_unsent()
        if op is None:
            return sent_points
        try:
            if op.kind in TELEMETRY_KINDS + ("alert",) and not spool.get("exp_id"):
                op = _plan_logged_later(spool, op, final())  # logged before plan_trial: plan first
            if op.kind in TELEMETRY_KINDS:
                key, ops = spool.group(op, max_points=max_points, run_id=run_id)
                count = _send_points(spool, transport, key, ops)
                spool.mark_sent([o.seq for o in ops])
                sent_points += count
                if on_sent is not None:
                    on_sent(count)
            else:
                _send_op(spool, transport, op, run_id)
                spool.mark_sent([op.seq])
        except LedgerRejected as exc:
            spool.set("rejected", json.dumps({"status": exc.status, "kind": exc.kind, "detail": exc.detail}))
            raise LedgerRejected(exc.status, exc.detail, kind=exc.kind, spool=str(spool.path)) from None
        if rejected_before:  # the refusal is over (a new token, say)
            spool.set("rejected", None)
            rejected_before = False
    return sent_points


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


def _send_points(spool: Spool, transport: Transport, key: str, ops: list[Op]) -> int:
    exp_id = _exp_id(spool, "telemetry")
    if ops[0].kind == "columns":
        # blocks joined as they were spooled: nothing decoded, the server concatenates them
        joined = ops[0].body if len(ops) == 1 else "[" + ",".join(o.body for o in ops) + "]"
        body = ('{"batch_id":' + json.dumps(key) + ',"columns":' + joined + "}").encode()
    else:
        body = ('{"batch_id":' + json.dumps(key) + ',"points":[' + ",".join(o.body for o in ops) + "]}").encode()
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    if isinstance(transport.gzip_level, int) and len(body) > 4096:
        body = gzip.compress(body, transport.gzip_level)
        headers["Content-Encoding"] = "gzip"
    transport.request("telemetry", "POST", f"{transport.prefix}/trials/{quote(exp_id, safe='')}/telemetry",
                      content=body, headers=headers)
    return sum(o.points for o in ops)


def _send_op(spool: Spool, transport: Transport, op: Op, run_id: str) -> None:
    body = json.loads(op.body)
    if op.kind == "project":
        found = transport.request("project", "GET", transport.prefix, ok_statuses=(404,))
        if found.status_code == 404:
            transport.request("project", "POST", f"{API}/projects", json=body, ok_statuses=(409,))
    elif op.kind == "plan":
        made = transport.request("plan", "POST", f"{transport.prefix}/trials", json=body,
                                 headers={"Idempotency-Key": f"{run_id}-plan"})
        spool.set("exp_id", made.json()["trial"]["exp_id"])
    elif op.kind == "alert":
        exp_id = _exp_id(spool, "alert")
        sent = transport.request("alert", "POST", f"{transport.prefix}/trials/{quote(exp_id, safe='')}/alerts",
                                 json=body, headers={"Idempotency-Key": f"{run_id}-alert-{op.seq}"}, ok_statuses=(422,))
        if sent.status_code == 422:
            log.warning("ledger refused an alert (%s); it is skipped", _detail(sent))
    elif op.kind == "summarize":
        exp_id = _exp_id(spool, "summarize")
        transport.request("summarize", "POST", f"{transport.prefix}/trials/{quote(exp_id, safe='')}/telemetry/summarize",
                          ok_statuses=(422,))
    elif op.kind == "finish":
        exp_id = _exp_id(spool, "finish")
        fields = dict(body["fields"])
        if body.get("metric_from") is not None and fields.get("core_metric") is None:
            fields["core_metric"], used = _metric_of_summary(spool, transport, body)
            if used:
                fields["extra"] = {**(fields.get("extra") or {}), "metric_from_summary": used}
        if fields.get("status") == "auto":
            fields["status"] = spool.get("decided_status") or _decide(spool, transport, fields, body.get("keep_margin", 0.0))
        stored = transport.request("finish", "PATCH", f"{transport.prefix}/trials/{quote(exp_id, safe='')}",
                                   json=fields).json()
        best = (_knowledge(transport).get("best") or {}).get("exp_id")
        outcome = TrialOutcome(exp_id=stored["exp_id"], status=stored["status"], core_metric=stored.get("core_metric"),
                               delta_vs_best=stored.get("delta_vs_best"), is_new_best=best == stored["exp_id"],
                               best_exp=best)
        spool.set("outcome", json.dumps(outcome.to_dict()))
    else:
        raise LedgerRejected(0, f"unknown spooled op {op.kind!r} (seq {op.seq})", kind=op.kind)


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
    spool.set("decided_metric", json.dumps([value, used]))
    return value, used


def _decide(spool: Spool, transport: Transport, fields: dict[str, Any], margin: float) -> str:
    """The outcome rule against the current best (its direction from the project); the
    decision is stored in the spool before the PATCH that uses it."""
    found = _knowledge(transport)
    best = found.get("best") or {}
    mine = spool.get("exp_id")
    best_metric = best.get("core_metric") if best.get("exp_id") != mine else None
    status = decide_status(fields.get("core_metric"), best_metric, lower_is_better=bool(found["lower_is_better"]),
                           margin=float(margin or 0.0))
    spool.set("decided_status", status)
    spool.set("decided_at", str(time.time()))
    return status


def _knowledge(transport: Transport) -> dict[str, Any]:
    """The project's best and direction (the smallest knowledge answer)."""
    return transport.request("finish", "GET", f"{transport.prefix}/knowledge",
                             params={"format": "json", "recent_n": 1, "last_m": 1}).json()


def deliver_within(spool: Spool, transport: Transport, timeout: float, *, max_points: int = 200_000,
                   backoff: Backoff | None = None) -> int:
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
