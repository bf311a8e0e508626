"""The API's dependencies, as ``Annotated`` types the handlers declare.

All are ``async def``: FastAPI runs a plain ``def`` dependency in its thread pool, and
that hop costs more than what these do (a dictionary look-up, at most one indexed
query to verify a token).

``Reader``, ``Writer``, ``Admin``
    An :class:`Access` (the ledger and the request's token, or None) after
    :func:`lineage.auth.check_access` let the request through for that role; the rules
    are ``lineage.auth``'s. A request with an ``Authorization`` header must carry a valid
    ``Bearer`` token, whatever the endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Path, Request

from api.schemas import Text
from lineage.auth import Role, TokenRecord, Unauthorized, check_access, tokens_exist, verify_token
from lineage.service import Ledger


async def _ledger(request: Request) -> Ledger:
    return request.app.state.ledger


@dataclass(frozen=True, slots=True)
class Access:
    """What an authorized handler works with: the ledger and the request's token."""

    ledger: Ledger
    principal: TokenRecord | None


def principal_of(request: Request) -> TokenRecord | None:
    """The verified token of the request, None without an ``Authorization`` header."""
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, credentials = header.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() != "bearer" or not credentials:
        raise Unauthorized("the Authorization header must be 'Bearer <token>'")
    record = verify_token(request.app.state.ledger, credentials)
    if record is None:
        raise Unauthorized("the bearer token is unknown or revoked")
    request.state.principal = record.name
    return record


def _require(role: Role):  # type: ignore[no-untyped-def]
    async def dependency(request: Request) -> Access:
        principal = principal_of(request)
        ledger = request.app.state.ledger
        check_access(
            principal,
            role,
            anonymous_read=request.app.state.settings.anonymous_read,
            tokens_exist=lambda: tokens_exist(ledger),
        )
        return Access(ledger, principal)

    dependency.__name__ = f"require_{role.value}"
    return dependency


LedgerDep = Annotated[Ledger, Depends(_ledger)]
#: The ledger and token of a request allowed to read / write / administer (one
#: dependency each, so a handler pays for one).
Reader = Annotated[Access, Depends(_require(Role.READER))]
Writer = Annotated[Access, Depends(_require(Role.WRITER))]
Admin = Annotated[Access, Depends(_require(Role.ADMIN))]

ProjectSlug = Annotated[Text, Path(description="Project slug")]
ExpId = Annotated[Text, Path(description="Trial exp_id")]
IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", max_length=255, pattern=r"^[!-~]+$",
           description="Client's key for this write: a retry with the same key never writes twice"),
]
IfNoneMatch = Annotated[str | None, Header(alias="If-None-Match")]
