"""Sending the outbox: signed POSTs, retried with exponential backoff, then marked failed.

:func:`deliver_due` sends the deliveries that are due once (``lineage hook deliver``);
:func:`delivery_loop` repeats it in the background of ``lineage serve`` (started by the
app's lifespan). Both are safe to run in several processes on one database: each
delivery is claimed with a lease first (``lineage.store.outbox``), and the HTTP request
runs outside any transaction, so a receiver that hangs holds no lock and slows no write.

Retries: attempt ``n`` (1-based) that fails (connection refused, timeout, a status other
than 2xx) is retried after ``min(backoff_s * 2 ** (n - 1), max_backoff_s)`` seconds;
after ``max_attempts`` attempts the delivery is ``failed`` with its last error. Redirects
are not followed (a 3xx is a failure). The outbox survives restarts: what was due and
not sent is sent by the next worker.

Settings from the environment (all optional): ``LINEAGE_HOOK_TIMEOUT_S`` (5),
``LINEAGE_HOOK_MAX_ATTEMPTS`` (8), ``LINEAGE_HOOK_BACKOFF_S`` (2),
``LINEAGE_HOOK_MAX_BACKOFF_S`` (600), ``LINEAGE_HOOK_POLL_S`` (2; the loop's pause) and
``LINEAGE_HOOK_DELIVERY`` (``off``: the server starts no loop),
``LINEAGE_HOOK_PRIVATE_TARGETS`` (``1``: loopback, link-local and private targets are
allowed; otherwise a target that is or resolves to one fails its attempt, see
:func:`refused_delivery`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import logging
import os
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from lineage.monitor import hooks

if TYPE_CHECKING:
    from lineage.service import Ledger

log = logging.getLogger("lineage.hooks")

SIGNATURE_HEADER = "X-Lineage-Signature"
TIMESTAMP_HEADER = "X-Lineage-Timestamp"
USER_AGENT = "lineage-ledger-webhook/1"


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    timeout_s: float = 5.0
    max_attempts: int = 8
    backoff_s: float = 2.0
    max_backoff_s: float = 600.0
    #: deliveries claimed per round
    batch: int = 20
    #: the loop's pause between rounds
    poll_s: float = 2.0

    @property
    def lease_s(self) -> float:
        """How long a claim lasts: the round's requests at their timeout, and a margin."""
        return self.batch * (self.timeout_s + 1.0) + 30.0

    def backoff(self, attempt: int) -> float:
        return min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)

    @classmethod
    def from_env(cls) -> DeliveryPolicy:
        def number(name: str, default: float) -> float:
            raw = os.environ.get(name)
            return float(raw) if raw else default

        default = cls()
        return cls(
            timeout_s=number("LINEAGE_HOOK_TIMEOUT_S", default.timeout_s),
            max_attempts=int(number("LINEAGE_HOOK_MAX_ATTEMPTS", default.max_attempts)),
            backoff_s=number("LINEAGE_HOOK_BACKOFF_S", default.backoff_s),
            max_backoff_s=number("LINEAGE_HOOK_MAX_BACKOFF_S", default.max_backoff_s),
            poll_s=number("LINEAGE_HOOK_POLL_S", default.poll_s),
        )


@dataclass(slots=True)
class DeliveryReport:
    delivered: int = 0
    retrying: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"delivered": self.delivered, "retrying": self.retrying, "failed": self.failed}


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 with ``secret`` over ``b"{timestamp}." + body``."""
    digest = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 3xx becomes an HTTPError: a failed attempt


_OPENER = urllib.request.build_opener(_NoRedirect)


def refused_delivery(url: str) -> str | None:
    """Why ``url`` may not be posted to now, or None: unless the server allows private
    targets (:func:`lineage.monitor.hooks.private_targets_allowed`), its host must not be,
    or resolve to, a loopback, link-local, private or unspecified address. Checked at each
    delivery too, since a name can change its address after the hook was made (a resolver
    could still answer differently a moment later: this narrows DNS rebinding, it does not
    close it)."""
    if hooks.private_targets_allowed():
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    why = hooks.refused_target(host)
    if why is not None:
        return f"refused: targets {why}"
    if hooks.host_address(host) is not None:
        return None
    try:
        found = socket.getaddrinfo(
            host, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except (OSError, UnicodeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    for *_, address in found:
        resolved = ipaddress.ip_address(str(address[0]).split("%")[0])
        why = hooks.refused_address(resolved)
        if why is not None:
            return f"refused: {host} resolves to {resolved}, which is {why}"
    return None


def post(url: str, body: bytes, *, secret: str, headers: dict[str, str], timeout: float) -> str | None:
    """POST one signed delivery; None when the receiver answered 2xx, else the error."""
    refused = refused_delivery(url)
    if refused is not None:
        return refused
    timestamp = str(int(time.time()))
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(secret, timestamp, body),
            **headers,
        },
    )
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            response.read(65_536)
            return None if 200 <= response.status < 300 else f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{type(reason).__name__}: {reason}"


def deliver_due(
    ledger: Ledger,
    policy: DeliveryPolicy | None = None,
    *,
    now: float | None = None,
    stop: threading.Event | None = None,
) -> DeliveryReport:
    """Claim the due deliveries (a batch at a time) and send each once; what happened.

    ``stop`` set: return after the request in flight, giving back the claims not tried,
    so a server stops within one ``timeout_s``."""
    policy = policy or DeliveryPolicy.from_env()
    store = ledger.store
    report = DeliveryReport()
    token = str(uuid.uuid4())
    while True:
        started = time.time() if now is None else now
        with store.read() as conn:
            if not store.outbox.any_delivery_due(conn, now=started):
                return report
        with store.write() as conn:
            claimed = store.outbox.claim_due_deliveries(
                conn, now=started, lease_until=started + policy.lease_s, token=token, limit=policy.batch
            )
        if not claimed:
            return report
        for delivery_id, _hook_id, event_id, event_type, body, attempts, url, secret in claimed:
            if stop is not None and stop.is_set():
                with store.write() as conn:
                    store.outbox.release_deliveries(conn, token)
                return report
            error = post(
                url,
                body.encode("utf-8"),
                secret=secret,
                timeout=policy.timeout_s,
                headers={
                    "X-Lineage-Event": event_type,
                    "X-Lineage-Event-Id": event_id,
                    "X-Lineage-Delivery": str(delivery_id),
                },
            )
            attempt = attempts + 1
            if error is None:
                state, next_at = "delivered", time.time()
                report.delivered += 1
            elif attempt >= policy.max_attempts:
                state, next_at = "failed", time.time()
                report.failed += 1
            else:
                state, next_at = "pending", time.time() + policy.backoff(attempt)
                report.retrying += 1
            if error is not None:
                report.errors.append(f"delivery {delivery_id} to {url}: {error}")
                log.warning("webhook delivery %s (%s) attempt %s: %s", delivery_id, event_type, attempt, error)
            with store.write() as conn:
                store.outbox.finish_delivery(
                    conn, delivery_id, token, state=state, attempts=attempt, next_attempt_at=next_at, error=error or ""
                )
        if len(claimed) < policy.batch:
            return report


async def delivery_loop(ledger: Ledger, policy: DeliveryPolicy | None = None) -> None:
    """Deliver due events every ``poll_s`` seconds until cancelled (the server's lifespan)."""
    policy = policy or DeliveryPolicy.from_env()
    stop = threading.Event()
    try:
        while True:
            try:
                await asyncio.to_thread(deliver_due, ledger, policy, stop=stop)
            except asyncio.CancelledError:
                raise
            except Exception:  # a database hiccup must not end the loop
                log.exception("webhook delivery round failed")
            await asyncio.sleep(policy.poll_s)
    finally:
        stop.set()  # the round in its thread ends after the request in flight


def delivery_enabled() -> bool:
    return os.environ.get("LINEAGE_HOOK_DELIVERY", "on").lower() not in ("off", "0", "false", "no")
