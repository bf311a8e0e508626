"""Who is looking at a page, and whether they may write: sessions, tokens and CSRF.

Rules (the same as the JSON API's):

* Reading follows ``settings.anonymous_read`` (default: open). When it is off, a page
  asks for a login -- unless the ledger takes anonymous writes (a ledger that never had
  a token, on a loopback-only server), as the API does.
* Writing (the TSV upload) needs a writer token, unless the ledger takes anonymous
  writes. Both are :func:`lineage.auth.allowed`, the API's rule.
* Logging in takes a token once and keeps it in an ``HttpOnly``, ``SameSite=Strict``
  cookie; every request verifies it again, so a revoked token stops working at once and
  several server processes need no shared session secret.
* Every form carries a CSRF token (double submit: a random cookie, ``SameSite=Strict``,
  and the same value in a hidden field) and a POST whose ``Origin`` is another site is
  refused before the token is even compared.

Token verification is ``lineage.auth``'s (the API's): the same tokens open the API and
the pages.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fastapi import Request

from lineage.auth import Role, allowed

SESSION_COOKIE = "lineage_session"
CSRF_COOKIE = "lineage_csrf"
CSRF_FIELD = "csrf"


class LoginRequired(Exception):
    """Reading needs a login (anonymous_read is off)."""


class Forbidden(Exception):
    """The request is refused: a failed CSRF check or a reader where a writer is needed."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class Principal:
    """A verified token: its display name and whether it may write."""

    name: str
    role: Role

    @property
    def can_write(self) -> bool:
        return self.role.covers(Role.WRITER)


@dataclass(frozen=True, slots=True)
class Viewer:
    """The person behind a request, as far as the pages care."""

    principal: Principal | None
    tokens_exist: bool
    anonymous_read: bool
    #: the ledger takes anonymous writes (``lineage.auth.AccessState.anonymous_writes_open``)
    ledger_open: bool = False
    #: the server listens on a non-loopback address
    exposed: bool = False

    def _may(self, needed: Role) -> bool:
        role = self.principal.role if self.principal is not None else None
        return allowed(
            role, needed, anonymous_read=self.anonymous_read, exposed=self.exposed, ledger_open=lambda: self.ledger_open
        )

    @property
    def can_write(self) -> bool:
        return self._may(Role.WRITER)

    @property
    def can_read(self) -> bool:
        return self._may(Role.READER)


# -- lineage.auth ----------------------------------------------------------------------------


def tokens_exist(ledger: Any) -> bool:
    """Whether any active token exists (``lineage.auth``'s rule, the API's)."""
    return ledger.tokens.tokens_exist()


def verify(ledger: Any, token: str) -> Principal | None:
    """The principal of ``token``, or None when it is unknown, revoked or malformed.
    Verification is ``Ledger.verify_token`` (the API's); a writer or an admin
    token may write."""
    if not token:
        return None
    record = ledger.tokens.verify_token(token)
    if record is None:
        return None
    return Principal(name=record.name, role=record.role)


# -- per request ------------------------------------------------------------------------------


def viewer(request: Request) -> Viewer:
    """The request's viewer (computed once per request)."""
    cached = getattr(request.state, "viewer", None)
    if cached is not None:
        return cached
    ledger = request.app.state.ledger
    settings = request.app.state.settings
    token = request.cookies.get(SESSION_COOKIE, "")
    ledger_open, exist = ledger.tokens.anonymous_access()
    principal = verify(ledger, token) if token and exist else None
    found = Viewer(
        principal=principal,
        tokens_exist=exist,
        anonymous_read=bool(getattr(settings, "anonymous_read", True)),
        ledger_open=ledger_open,
        exposed=bool(getattr(settings, "exposed", False)),
    )
    request.state.viewer = found
    return found


def require_reader(request: Request) -> Viewer:
    found = viewer(request)
    if not found.can_read:
        raise LoginRequired()
    return found


def csrf_token(request: Request) -> str:
    """This browser's CSRF token (a new one is set as a cookie by the page renderer)."""
    token = getattr(request.state, "csrf", None)
    if token is None:
        token = request.cookies.get(CSRF_COOKIE) or ""
        if len(token) < 32:
            token = secrets.token_urlsafe(32)
            request.state.new_csrf = token
        request.state.csrf = token
    return token


def check_csrf(request: Request, submitted: Any) -> None:
    """Refuse a form POST that is cross-site or lacks this browser's CSRF token."""
    origin = request.headers.get("origin")
    if origin and origin != "null":
        host = request.headers.get("host", "")
        if urlsplit(origin).netloc != host:
            raise Forbidden("this form was sent from another site")
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not cookie or not isinstance(submitted, str) or not hmac.compare_digest(cookie, submitted):
        raise Forbidden("the form's security token is missing or stale; reload the page and send it again")


def safe_next(target: str | None) -> str:
    """A local path to go to after logging in (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
