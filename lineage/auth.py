"""Bearer tokens of the HTTP API: roles, creation, verification, revocation, access rules.

Tokens
    ``llt_`` followed by 43 URL-safe characters (256 random bits), made by
    :meth:`TokenUses.create_token` and shown once. The ledger stores only the SHA-256 of the token
    (a hash of a high-entropy secret needs no salt or slow KDF), looks it up by that
    hash and compares the hashes in constant time. Revoking (:func:`revoke_token`) takes
    effect on the next request: every request verifies against the database, so several
    server processes agree without sharing anything but the database. A revoked token
    keeps its row (and name) until a new token is created under the same name.

Roles
    ``reader`` < ``writer`` < ``admin``: a writer may also read, an admin may do all.

Last use
    :func:`verify_token` records the time a token was used, at most once per
    :data:`LAST_USED_RESOLUTION` per token, so reads stay reads; the stamp never waits
    for a lock (``Store.touch_token``).

Access (:func:`check_access`)
    * a request that presents a token must present a valid one (401 otherwise), whose
      role covers what the endpoint needs (403 otherwise);
    * reading without a token is allowed when the server allows anonymous reads
      (``LINEAGE_ANONYMOUS_READ``, default on) or when the ledger has no tokens;
    * writing without a token is allowed only while the ledger has no tokens at all:
      ``lineage serve`` refuses to listen on a non-loopback address in that state, so
      an open ledger is reachable from this machine only;
    * admin endpoints (token management, project deletion) always need an admin token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import TYPE_CHECKING, Callable

from lineage.errors import InvalidInput, LedgerError

if TYPE_CHECKING:  # pragma: no cover
    from lineage.store import Store

__all__ = [
    "LAST_USED_RESOLUTION",
    "TOKEN_PREFIX",
    "Forbidden",
    "Role",
    "TokenRecord",
    "Unauthorized",
    "TokenUses",
    "allowed",
    "check_access",
    "hash_token",
]

TOKEN_PREFIX = "llt_"
#: A token's last use is written at most this often.
LAST_USED_RESOLUTION = timedelta(seconds=60)
MAX_TOKEN_NAME = 100
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@")


class Role(str, Enum):
    READER = "reader"
    WRITER = "writer"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def covers(self, needed: "Role") -> bool:
        return self.rank >= needed.rank

    @classmethod
    def parse(cls, raw: str) -> "Role":
        try:
            return cls(raw)
        except ValueError:
            raise InvalidInput("role", f"unknown role {raw!r}; known: reader, writer, admin") from None


_RANK = {Role.READER: 0, Role.WRITER: 1, Role.ADMIN: 2}


class Unauthorized(LedgerError):
    """No valid token where one is needed (HTTP 401)."""

    code = "unauthorized"


class Forbidden(LedgerError):
    """A valid token whose role does not cover the request (HTTP 403)."""

    code = "forbidden"


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """A stored token, without its secret."""

    name: str
    role: Role
    created_at: str | None = None
    last_used_at: str | None = None
    revoked_at: str | None = None
    id: int | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @property
    def can_write(self) -> bool:
        return self.role.covers(Role.WRITER)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "role": self.role.value,
            "created_at": self.created_at,
            "last_used_at": self.last_used_at,
            "revoked_at": self.revoked_at,
            "active": self.active,
        }


def _record(row: tuple | None) -> TokenRecord | None:  # type: ignore[type-arg]
    if row is None:
        return None
    id_, name, role, _hash, created, used, revoked = row
    return TokenRecord(name=name, role=Role(role), created_at=created, last_used_at=used, revoked_at=revoked, id=id_)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _checked_name(name: str) -> str:
    if not name or len(name) > MAX_TOKEN_NAME or set(name) - _NAME_CHARS:
        raise InvalidInput("name", f"must be 1-{MAX_TOKEN_NAME} characters of a-z, A-Z, 0-9, '-', '_', '.', '@'")
    return name


def _parse(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        parsed = datetime.fromisoformat(stamp)
    except ValueError:  # not a time the store wrote: treat the last use as unknown
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def allowed(role: Role | None, needed: Role, *, anonymous_read: bool, tokens_exist: Callable[[], bool]) -> bool:
    """The access rule (module doc): may a caller with ``role`` (None: no token) do what
    needs ``needed``? ``tokens_exist`` is called only when the answer depends on it. The
    API (:func:`check_access`) and the pages both ask this."""
    if role is not None:
        return role.covers(needed)
    if needed is Role.ADMIN:
        return False
    if needed is Role.READER and anonymous_read:
        return True
    return not tokens_exist()


def check_access(
    principal: TokenRecord | None,
    needed: Role,
    *,
    anonymous_read: bool,
    tokens_exist: Callable[[], bool],
) -> None:
    """Raise :class:`Unauthorized` or :class:`Forbidden` unless the rules (module doc)
    let ``principal`` (None: no token presented) do what needs role ``needed``.
    ``tokens_exist`` is called only when the answer depends on it."""
    if allowed(principal.role if principal is not None else None, needed, anonymous_read=anonymous_read,
               tokens_exist=tokens_exist):
        return
    if principal is not None:
        raise Forbidden(f"token {principal.name!r} has role {principal.role.value!r}; this needs {needed.value!r}")
    if needed is Role.ADMIN:
        raise Unauthorized("this needs an admin token (Authorization: Bearer ...)")
    what = "reading" if needed is Role.READER else "writing"
    raise Unauthorized(f"{what} needs a token (Authorization: Bearer ...); create one with `lineage token create`")


class TokenUses:
    """create_token, list_tokens, revoke_token, tokens_exist, principal, verify_token (mixed into Ledger)."""

    store: "Store"

    def create_token(self, *, name: str, role: Role | str) -> tuple[TokenRecord, str]:
        """Create a token; returns its record and the secret (the only time it exists in clear)."""
        checked_role = role if isinstance(role, Role) else Role.parse(role)
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.store.write() as conn:
            row = self.store.insert_token(conn, name=_checked_name(name), role=checked_role.value, token_hash=hash_token(secret))
        return _record(row), secret  # type: ignore[return-value]

    def list_tokens(self) -> list[TokenRecord]:
        with self.store.read() as conn:
            return [_record(row) for row in self.store.tokens(conn)]  # type: ignore[misc]

    def revoke_token(self, name: str) -> None:
        """Revoke the token called ``name`` (NotFound if there is none; revoking twice is fine)."""
        with self.store.write() as conn:
            self.store.revoke_token(conn, name)

    def tokens_exist(self) -> bool:
        """Whether any active token exists (then writes need one)."""
        return self.store.active_token_exists()

    def principal(self, authorization: str | None) -> TokenRecord | None:
        """The token an ``Authorization`` header value presents (None without a header);
        :class:`Unauthorized` for one that is not ``Bearer <token>`` or names no active token.
        Every face that takes the header (the JSON API, MCP over HTTP) reads it here."""
        if authorization is None:
            return None
        scheme, _, credentials = authorization.strip().partition(" ")
        credentials = credentials.strip()
        if scheme.lower() != "bearer" or not credentials:
            raise Unauthorized("the Authorization header must be 'Bearer <token>'")
        record = self.verify_token(credentials)
        if record is None:
            raise Unauthorized("the bearer token is unknown or revoked")
        return record

    def verify_token(self, token: str, *, now: datetime | None = None) -> TokenRecord | None:
        """The active token ``token`` is, or None (unknown, revoked, malformed)."""
        if not token or len(token) > 256:
            return None
        wanted = hash_token(token)
        row = self.store.token_by_hash(None, wanted)
        if row is None or not hmac.compare_digest(row[3], wanted):
            return None
        record = _record(row)
        if record is None or not record.active:
            return None
        now = now or datetime.now(timezone.utc)
        last = _parse(record.last_used_at)
        if last is None or now - last >= LAST_USED_RESOLUTION:
            self.store.touch_token(record.id, not_since=now - LAST_USED_RESOLUTION)  # type: ignore[arg-type]
        return record
