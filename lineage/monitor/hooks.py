"""Webhooks: who hears about a project's events, and the events themselves.

Events are written to the outbox (``hook_deliveries``, one row per event and hook) in the
transaction of the write that causes them, so an event exists exactly when its write
committed, and a write never waits for a receiver. ``lineage.monitor.delivery`` sends them
later (the server's background task, or ``lineage hook deliver``).

Event types
-----------
``new_best``           a recorded trial became the project's best
``trial_crashed``      a recorded trial's status is ``crash`` or ``preflight_crash``
``guardrail_tripped``  a guardrail went from clear to tripped (``lineage.monitor.guardrails``)
``alert``              a trial's training code raised an alert (``lineage.alerts``)

``new_best`` and ``trial_crashed`` come from recording one trial (CLI, HTTP, MCP); a bulk
import emits neither (it would flood a channel) but re-evaluates the guardrails, and a
trial update re-evaluates them too. A hook made without naming its events hears all of
them; one made before ``alert`` existed keeps the list it was made with.

Payload (``body_format = "json"``, the default), ``Content-Type: application/json``::

    {
      "version": 1,
      "id": "<uuid4: the event id, the same for every hook>",
      "type": "new_best" | "trial_crashed" | "guardrail_tripped" | "alert",
      "project": "<slug>",
      "occurred_at": "<ISO 8601, UTC>",
      "trial": {"exp_id", "status", "core_metric", "delta_vs_best", "specialist",
                "parent_exp", "seq", "hypothesis" (first 500 characters)} | {"exp_id"} | null,
      "best_before": {"exp_id", "core_metric"} | null,        # new_best only
      "guardrail": {"name", "value", "limit", "message"},     # guardrail_tripped only
      "alert": {"id", "exp_id", "level", "title", "text", "step", "wall_time", "created_at"},  # alert only
      "text": "<one line for people; Slack's incoming webhooks show it>"
    }

``body_format = "slack"`` sends ``{"text": ...}`` alone (a Slack-compatible body); an
alert's text is Slack mrkdwn: a level mark, the title in bold, the text quoted.

Headers: ``X-Lineage-Event`` (type), ``X-Lineage-Event-Id``, ``X-Lineage-Delivery`` (the
outbox row: the same on retries), ``X-Lineage-Timestamp`` (seconds since the epoch, at
sending) and ``X-Lineage-Signature: sha256=<hex>``, the HMAC-SHA256 with the hook's
secret over ``"{timestamp}.{body}"`` (the raw body bytes). A receiver recomputes it, compares in
constant time and rejects an old timestamp (replays).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import secrets
import socket
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from ipaddress import IPv4Address, IPv6Address
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Connection

from lineage.domain import Project, Trial
from lineage.errors import InvalidInput
from lineage.store import Store
from lineage.store.base import iso_stamp

EVENT_TYPES: tuple[str, ...] = ("new_best", "guardrail_tripped", "trial_crashed", "alert")
BODY_FORMATS: tuple[str, ...] = ("json", "slack")
MAX_URL = 2000
#: A class left open: no control character (C0, C1, DEL) and no white space, each written
#: out, because ``\\s`` differs between ECMA 262 and Python (U+0085 is white space to
#: Python only, U+FEFF to ECMA only).
_URL_CHAR = "[^\\x00-\\x20\\x7f-\\x9f\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_PORT = "|[0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]"
_REG_NAME = "[-A-Za-z0-9._~%!$&'()*+,;=]"  # RFC 3986's reg-name characters (an IDN host in punycode)
#: The webhook URLs :func:`check_url` takes: http(s), a host by RFC 3986's reg-name (a
#: name or IPv4 address; no user info, no IPv6 literal), an optional port up to 65535,
#: then no white space or control characters. The API's schema documents the same
#: pattern (ECMA 262 and Python read it alike).
URL_PATTERN = f"^[hH][tT][tT][pP][sS]?://{_REG_NAME}+(:({_PORT}))?([/?#]{_URL_CHAR}]*)?$"
_URL = re.compile(URL_PATTERN)
#: Characters of a hypothesis an event carries.
EVENT_TEXT_CHARS = 500

#: ``(hook id, events, body_format)`` as read once per write.
Subscription = tuple[int, list[str], str]


@dataclass(frozen=True, slots=True)
class Hook:
    id: int
    project: str
    url: str
    events: tuple[str, ...]
    body_format: str
    created_at: str | None
    pending: int = 0
    delivered: int = 0
    failed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "project": self.project,
            "url": self.url,
            "events": list(self.events),
            "format": self.body_format,
            "created_at": self.created_at,
            "deliveries": {"pending": self.pending, "delivered": self.delivered, "failed": self.failed},
        }


def check_url(url: Any, *, allow_private: bool | None = None) -> str:
    """``url`` if it is an absolute http(s) URL with a host, without user info, whose host
    is no private address (:func:`refused_target`; ``allow_private`` None: the server's
    setting, :func:`private_targets_allowed`); else :class:`InvalidInput` (``url``)."""
    if not isinstance(url, str) or not url:
        raise InvalidInput("url", "must be an http:// or https:// URL")
    if len(url) > MAX_URL or any(c.isspace() or ord(c) < 32 or 127 <= ord(c) <= 159 for c in url):
        raise InvalidInput("url", f"must be at most {MAX_URL} characters without spaces or control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise InvalidInput("url", f"is not a valid URL: {exc}") from None
    if "@" in parts.netloc:  # urllib would take user:pw@host for the host name and never deliver
        raise InvalidInput("url", "must not hold user info (user:password@); put a secret in the path instead")
    if not _URL.fullmatch(url):
        raise InvalidInput(
            "url",
            "must be an http:// or https:// URL with a host of RFC 3986's reg-name "
            "characters (a name in punycode or an IPv4 address) and a port up to 65535, if any",
        )
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidInput("url", f"must use http or https, not {parts.scheme or 'no scheme'!r}: {url[:100]!r}")
    if not parts.hostname:
        raise InvalidInput("url", f"has no host: {url[:100]!r}")
    allowed = private_targets_allowed() if allow_private is None else allow_private
    why = None if allowed else refused_target(parts.hostname)
    if why is not None:
        raise InvalidInput(
            "url",
            f"targets {why}; webhooks go to public addresses unless the server allows private "
            f"targets ({PRIVATE_TARGETS_ENV}=1, lineage serve --hook-private-targets)",
        )
    return url


#: The server setting that lets webhooks target loopback, link-local and private addresses
#: (a ledger on one machine posting to a local relay); off by default, so an admin token
#: cannot make the server probe its own network.
PRIVATE_TARGETS_ENV = "LINEAGE_HOOK_PRIVATE_TARGETS"


def private_targets_allowed() -> bool:
    return os.environ.get(PRIVATE_TARGETS_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def host_address(host: str) -> IPv4Address | IPv6Address | None:
    """The address ``host`` (a URL's host name) writes literally, in any notation a
    resolver reads (``127.0.0.1``, ``127.1``, ``0x7f000001``, ``2130706433``,
    ``0177.0.0.1``, ``::1``); None for a name."""
    host = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def refused_address(address: IPv4Address | IPv6Address) -> str | None:
    """What makes ``address`` no webhook target (``loopback``, ``private``, ...), or None
    for a public address. An IPv4-mapped IPv6 address is judged as its IPv4 address."""
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for what, flagged in (
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("non-public", not address.is_global),
    ):
        if flagged:
            return what
    return None


def refused_target(host: str) -> str | None:
    """Why ``host`` (a name or address as a URL writes it) is no webhook target, without
    resolving a name; None when it may be one."""
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return f"{host}, a loopback name"
    address = host_address(host)
    why = refused_address(address) if address is not None else None
    if why is None:
        return None
    return f"{address}, which is {why}" if str(address) == host else f"{host} = {address}, which is {why}"


def check_events(events: Iterable[str] | None) -> tuple[str, ...]:
    """The event types asked for (all when none are named), each a known one."""
    if events is None:
        return EVENT_TYPES
    chosen: list[str] = []
    for raw in events:
        for name in str(raw).split(","):
            name = name.strip()
            if not name:
                continue
            if name not in EVENT_TYPES:
                raise InvalidInput("events", f"unknown event {name!r}; known: {', '.join(EVENT_TYPES)}")
            if name not in chosen:
                chosen.append(name)
    if not chosen:
        raise InvalidInput("events", f"name at least one event of: {', '.join(EVENT_TYPES)}")
    return tuple(chosen)


def check_format(body_format: Any) -> str:
    if body_format not in BODY_FORMATS:
        raise InvalidInput("format", f"unknown body format {body_format!r}; known: {', '.join(BODY_FORMATS)}")
    return str(body_format)


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def add_hook(
    store: Store,
    conn: Connection,
    project: Project,
    *,
    url: str,
    events: Iterable[str] | None = None,
    body_format: str = "json",
) -> tuple[Hook, str]:
    """Add a hook; returns it with its signing secret (shown this once)."""
    url, chosen, body_format = check_url(url), check_events(events), check_format(body_format)
    secret = new_secret()
    hook_id = store.outbox.insert_hook(
        conn, project.stored_id, url=url, events=chosen, body_format=body_format, secret=secret
    )
    return Hook(hook_id, project.slug, url, chosen, body_format, None), secret


def list_hooks(store: Store, conn: Connection, project: Project) -> list[Hook]:
    return [
        Hook(id_, project.slug, url, tuple(events), fmt, iso_stamp(created), pending, delivered, failed)
        for id_, url, events, fmt, created, pending, delivered, failed in store.outbox.hooks(conn, project.stored_id)
    ]


def subscriptions(store: Store, conn: Connection, project: Project) -> list[Subscription]:
    return store.outbox.subscriptions(conn, project.stored_id)


def _trial_brief(trial: Trial) -> dict[str, Any]:
    return {
        "exp_id": trial.exp_id,
        "status": trial.status.value,
        "core_metric": trial.core_metric,
        "delta_vs_best": trial.delta_vs_best,
        "specialist": trial.specialist,
        "parent_exp": trial.parent_exp,
        "seq": trial.seq,
        "hypothesis": trial.hypothesis[:EVENT_TEXT_CHARS],
    }


def _text(event_type: str, project: Project, data: Mapping[str, Any]) -> str:
    trial = data.get("trial") or {}
    if event_type == "new_best":
        before = data.get("best_before")
        was = f" (was exp {before['exp_id']}: {before['core_metric']})" if before else ""
        return (
            f"[{project.slug}] new best: exp {trial.get('exp_id')} {project.metric_name} = "
            f"{trial.get('core_metric')}{was}"
        )
    if event_type == "trial_crashed":
        return f"[{project.slug}] trial exp {trial.get('exp_id')} crashed ({trial.get('status')})"
    if event_type == "alert":
        return _alert_text(project, data["alert"])
    return f"[{project.slug}] guardrail {data['guardrail']['name']} tripped: {data['guardrail']['message']}"


def event_body(event_type: str, project: Project, data: Mapping[str, Any], *, event_id: str, body_format: str) -> str:
    """The JSON text a hook receives (see the module docstring)."""
    text = _text(event_type, project, data)
    if body_format == "slack":
        return json.dumps({"text": text}, ensure_ascii=False)
    event = {
        "version": 1,
        "id": event_id,
        "type": event_type,
        "project": project.slug,
        "occurred_at": datetime.now(UTC).isoformat(),
        "trial": None,
        **data,
        "text": text,
    }
    return json.dumps(event, ensure_ascii=False, default=str)


def enqueue(
    store: Store,
    conn: Connection,
    project: Project,
    event_type: str,
    data: Mapping[str, Any],
    *,
    subscribed: Sequence[Subscription] | None = None,
) -> int:
    """Write ``event_type`` to the outbox for each hook that wants it, in the caller's
    transaction; how many rows were written. ``subscribed``: the hooks, if already read."""
    hooks = store.outbox.subscriptions(conn, project.stored_id) if subscribed is None else subscribed
    wanted = [(hook_id, fmt) for hook_id, events, fmt in hooks if event_type in events]
    if not wanted:
        return 0
    event_id = str(uuid.uuid4())
    now = datetime.now(UTC).timestamp()
    store.outbox.insert_deliveries(
        conn,
        [
            (
                hook_id,
                project.id,
                event_id,
                event_type,
                event_body(event_type, project, data, event_id=event_id, body_format=fmt),
                now,
            )
            for hook_id, fmt in wanted
        ],
    )
    return len(wanted)


def trial_events(
    store: Store,
    conn: Connection,
    project: Project,
    trial: Trial,
    *,
    best_before: Trial | None,
    is_new_best: bool,
    subscribed: Sequence[Subscription],
) -> None:
    """The events of a recorded trial: ``new_best`` and ``trial_crashed``."""
    from lineage.monitor.progress import CRASH_STATUSES

    if not subscribed:
        return
    if is_new_best:
        before = None if best_before is None else {"exp_id": best_before.exp_id, "core_metric": best_before.core_metric}
        enqueue(
            store,
            conn,
            project,
            "new_best",
            {"trial": _trial_brief(trial), "best_before": before},
            subscribed=subscribed,
        )
    if trial.status.value in CRASH_STATUSES:
        enqueue(store, conn, project, "trial_crashed", {"trial": _trial_brief(trial)}, subscribed=subscribed)


#: Slack's mark for each alert level
_ALERT_MARKS = {"info": ":information_source:", "warn": ":warning:", "error": ":rotating_light:"}
#: characters of an alert's text a chat message carries
ALERT_TEXT_CHARS = 1000


def _alert_text(project: Project, alert: Mapping[str, Any]) -> str:
    """An alert for people (Slack mrkdwn): mark, project and trial, the title in bold, the
    text quoted below; ``&``, ``<`` and ``>`` escaped as Slack asks."""

    def escape(text: str) -> str:
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    level = str(alert.get("level") or "info")
    step = f" at step {alert['step']}" if alert.get("step") is not None else ""
    head = (
        f"{_ALERT_MARKS.get(level, '')} [{project.slug}] {level.upper()} alert from exp {alert.get('exp_id')}"
        f"{step}: *{escape(str(alert.get('title') or ''))}*"
    )
    text = escape(str(alert.get("text") or ""))[:ALERT_TEXT_CHARS]
    return head + ("\n" + "\n".join(f"> {line}" for line in text.splitlines()) if text.strip() else "")


def alert_event(store: Store, conn: Connection, project: Project, trial: Trial, alert: Mapping[str, Any]) -> int:
    """The ``alert`` event of a stored alert, in its transaction; how many hooks get it."""
    return enqueue(store, conn, project, "alert", {"trial": _trial_brief(trial), "alert": dict(alert)})
