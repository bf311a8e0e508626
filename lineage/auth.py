"""Bearer tokens of the HTTP API: roles, creation, verification, revocation, access rules.

Tokens
    ``llt_`` followed by 43 URL-safe characters (256 random bits), made by
    :meth:`Tokens.create_token` and shown once. The ledger stores only the SHA-256 of the token
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
    for a lock (``Store.tokens.touch_token``).

Access (:func:`allowed`, the one rule; :func:`check_access` raises by it)
    * a request that presents a token must present a valid one (401 otherwise), whose
      role covers what the endpoint needs (403 otherwise);
    * admin endpoints (token management, the access setting, project deletion, webhooks)
      always need an admin token;
    * without a token, a caller may write only while the ledger takes anonymous writes
      (:attr:`AccessState.anonymous_writes_open`) **and** the server listens on loopback
      only (``exposed`` False): a server bound to another address never takes an
      anonymous write, whatever happens to the tokens while it runs;
    * without a token, a caller may read when the server allows anonymous reads
      (``LINEAGE_ANONYMOUS_READ``, default on), or when it could write.

Anonymous writes (the ``anonymous_writes`` setting of the ledger, :class:`AnonymousWrites`)
    A ledger that never had a token takes anonymous writes while it has no active token
    (``until-first-token``: ``lineage serve`` refuses a non-loopback address in that
    state). Creating the first token closes them (``closed``, stored with the token),
    and they stay closed when tokens are revoked -- also the last one, so a "revoke the
    old, create the new" rotation opens no window. Only an explicit change
    (:meth:`Tokens.set_anonymous_writes`: ``lineage token anonymous-writes open`` or an
    admin's ``PUT /api/v1/access``) opens them again; the change is stored with who made
    it and logged (logger ``lineage.audit``).

Last admin
    Revoking the last active admin token is refused (:class:`~lineage.errors.Conflict`)
    unless the caller says so explicitly (``last_admin=True``; ``lineage token revoke
    --last-admin``): nobody could manage tokens over HTTP afterwards.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any

from lineage.errors import Conflict, InvalidInput, LedgerError

if TYPE_CHECKING:  # pragma: no cover
    from lineage.store import Store

__all__ = [
    "ANONYMOUS_WRITES",
    "LAST_USED_RESOLUTION",
    "TOKEN_PREFIX",
    "AccessState",
    "AnonymousWrites",
    "Forbidden",
    "Role",
    "TokenRecord",
    "Unauthorized",
    "Tokens",
    "allowed",
    "check_access",
    "hash_token",
    "is_loopback",
]

audit_log = logging.getLogger("lineage.audit")
#: The name of the ledger setting that says whether anonymous writes are open.
ANONYMOUS_WRITES = "anonymous_writes"

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

    def covers(self, needed: Role) -> bool:
        return self.rank >= needed.rank

    @classmethod
    def parse(cls, raw: str) -> Role:
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


def _record(row: tuple[Any, ...] | None) -> TokenRecord | None:
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
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class AnonymousWrites(str, Enum):
    """The ``anonymous_writes`` setting (module doc)."""

    #: not set: a ledger that never had a token; open while it has no active token
    UNTIL_FIRST_TOKEN = "until-first-token"
    CLOSED = "closed"
    OPEN = "open"


@dataclass(frozen=True, slots=True)
class AccessState:
    """What the ledger says about callers without a token."""

    anonymous_writes: AnonymousWrites
    active_tokens: bool
    changed_at: str | None = None
    changed_by: str | None = None

    @property
    def anonymous_writes_open(self) -> bool:
        """Whether the ledger takes writes without a token (on a loopback-only server)."""
        setting = self.anonymous_writes
        return writes_open(None if setting is AnonymousWrites.UNTIL_FIRST_TOKEN else setting.value, self.active_tokens)

    def to_dict(self) -> dict[str, object]:
        return {
            "anonymous_writes": self.anonymous_writes.value,
            "anonymous_writes_open": self.anonymous_writes_open,
            "active_tokens": self.active_tokens,
            "changed_at": self.changed_at,
            "changed_by": self.changed_by,
        }


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def writes_open(setting: str | None, active_tokens: bool) -> bool:
    """Whether the ledger takes anonymous writes, from its ``anonymous_writes`` setting
    (None: never set, ``until-first-token``) and whether an active token exists
    (:meth:`Store.tokens.access_state <lineage.store.tokens.TokensSql.access_state>`)."""
    if setting is None:
        return not active_tokens
    return setting == AnonymousWrites.OPEN.value


def allowed(
    role: Role | None, needed: Role, *, anonymous_read: bool, exposed: bool, ledger_open: Callable[[], bool]
) -> bool:
    """The access rule (module doc): may a caller with ``role`` (None: no token) do what
    needs ``needed``? ``exposed``: the server listens on a non-loopback address.
    ``ledger_open`` says whether the ledger takes anonymous writes
    (:attr:`AccessState.anonymous_writes_open`); it is called only when the answer depends
    on it. The API (:func:`check_access`) and the pages both ask this."""
    if role is not None:
        return role.covers(needed)
    if needed is Role.ADMIN:
        return False
    if needed is Role.READER and anonymous_read:
        return True
    return not exposed and ledger_open()


def check_access(
    principal: TokenRecord | None,
    needed: Role,
    *,
    anonymous_read: bool,
    exposed: bool,
    ledger_open: Callable[[], bool],
) -> None:
    """Raise :class:`Unauthorized` or :class:`Forbidden` unless :func:`allowed` lets
    ``principal`` (None: no token presented) do what needs role ``needed``."""
    if allowed(
        principal.role if principal is not None else None,
        needed,
        anonymous_read=anonymous_read,
        exposed=exposed,
        ledger_open=ledger_open,
    ):
        return
    if principal is not None:
        raise Forbidden(f"token {principal.name!r} has role {principal.role.value!r}; this needs {needed.value!r}")
    if needed is Role.ADMIN:
        raise Unauthorized("this needs an admin token (Authorization: Bearer ...)")
    what = "reading" if needed is Role.READER else "writing"
    raise Unauthorized(f"{what} needs a token (Authorization: Bearer ...); create one with `lineage token create`")


class Tokens:
    """create_token, list_tokens, revoke_token, tokens_exist, principal, verify_token, access_state,
    anonymous_writes_open, anonymous_access, set_anonymous_writes."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create_token(self, *, name: str, role: Role | str) -> tuple[TokenRecord, str]:
        """Create a token; returns its record and the secret (the only time it exists in clear).
        The ledger's first token closes anonymous writes (module doc), in the same transaction."""
        checked_role = role if isinstance(role, Role) else Role.parse(role)
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.store.write() as conn:
            row = self.store.tokens.insert_token(
                conn, name=_checked_name(name), role=checked_role.value, token_hash=hash_token(secret)
            )
            if self.store.tokens.set_setting(
                conn, ANONYMOUS_WRITES, AnonymousWrites.CLOSED.value, by=f"first token {name!r}", only_if_absent=True
            ):
                audit_log.warning("anonymous writes closed: the ledger's first token %r was created", name)
        return _record(row), secret  # type: ignore[return-value]

    def list_tokens(self) -> list[TokenRecord]:
        with self.store.read() as conn:
            return [_record(row) for row in self.store.tokens.tokens(conn)]  # type: ignore[misc]

    def revoke_token(self, name: str, *, last_admin: bool = False) -> None:
        """Revoke the token called ``name`` (NotFound if there is none; revoking twice is
        fine). The last active admin token only with ``last_admin=True`` (else Conflict)."""
        with self.store.write() as conn:
            found = self.store.tokens.token_role(conn, name)
            if found is not None and found == (Role.ADMIN.value, True) and not last_admin:
                if self.store.tokens.active_admins(conn) == [name]:
                    raise Conflict(
                        f"token {name!r} is the last active admin token; create another admin token "
                        "first, or revoke it explicitly (lineage token revoke --last-admin)",
                        field="name",
                    )
            self.store.tokens.revoke_token(conn, name)
        if found is not None and found[1]:
            audit_log.info("token %r (%s) revoked", name, found[0])

    def tokens_exist(self) -> bool:
        """Whether any active token exists."""
        return self.store.tokens.active_token_exists()

    def access_state(self) -> AccessState:
        """The ``anonymous_writes`` setting, whether active tokens exist, and the last change."""
        with self.store.read() as conn:
            setting = self.store.tokens.setting(conn, ANONYMOUS_WRITES)
            active = self.store.tokens.active_token_exists(conn)
        if setting is None:
            return AccessState(AnonymousWrites.UNTIL_FIRST_TOKEN, active)
        value, changed_at, changed_by = setting
        return AccessState(AnonymousWrites(value), active, changed_at, changed_by)

    def anonymous_writes_open(self) -> bool:
        """Whether the ledger takes writes without a token (one query; the per-request check)."""
        return self.anonymous_access()[0]

    def anonymous_access(self) -> tuple[bool, bool]:
        """``(anonymous_writes_open, tokens_exist)`` in one query (what a page asks)."""
        value, active = self.store.tokens.access_state(ANONYMOUS_WRITES)
        return writes_open(value, active), active

    def set_anonymous_writes(self, value: AnonymousWrites | str, *, by: str) -> AccessState:
        """Open or close anonymous writes explicitly (``open``/``closed``); stored with
        ``by`` (who asked: a token's name, ``cli``) and logged."""
        try:
            wanted = AnonymousWrites(value)
        except ValueError:
            wanted = None
        if wanted not in (AnonymousWrites.OPEN, AnonymousWrites.CLOSED):
            raise InvalidInput("anonymous_writes", f"must be 'open' or 'closed', got {value!r}")
        with self.store.write() as conn:
            self.store.tokens.set_setting(conn, ANONYMOUS_WRITES, wanted.value, by=by)
        audit_log.warning("anonymous writes set to %s by %s", wanted.value, by)
        return self.access_state()

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
        row = self.store.tokens.token_by_hash(None, wanted)
        if row is None or not hmac.compare_digest(row[3], wanted):
            return None
        record = _record(row)
        if record is None or not record.active:
            return None
        now = now or datetime.now(UTC)
        last = _parse(record.last_used_at)
        if last is None or now - last >= LAST_USED_RESOLUTION:
            self.store.tokens.touch_token(record.id, not_since=now - LAST_USED_RESOLUTION)  # type: ignore[arg-type]
        return record
