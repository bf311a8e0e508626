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

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Header, Path, Request
from fastapi.concurrency import run_in_threadpool

from api.record_groups import RecordGroups
from api.schemas import Text
from lineage.auth import Role, TokenRecord, check_access
from lineage.domain import IDEMPOTENCY_KEY_PATTERN, MAX_IDEMPOTENCY_KEY, RecordResult
from lineage.service import Ledger, RecordRequest

T = TypeVar("T")


async def _ledger(request: Request) -> Ledger:
    return request.app.state.ledger


class WriteLanes:
    """Where a write runs. Small writes (a group of trial records, a project, an update)
    run inline in the event loop, on both backends, as the reads do: a thread-pool hop
    costs about as much as the write itself, and a write in a worker thread contends with
    the event loop for the GIL (on PostgreSQL, where a write's thread gives the GIL up at
    each round trip and then waits to get it back, record groups written from the pool
    made ~25% fewer trials/s at more CPU a trial than written inline). Long writes (a TSV
    import, a telemetry batch, a trial batch, a project deletion) run in the thread pool,
    and while one of this process is in flight the small writes go to the thread pool
    too: they may have to wait for its lock (SQLite's database lock, PostgreSQL's project
    row), and waiting inline would stall every request of the process.

    Only scheduling lives here (a count of this process's long writes, changed in the
    event loop's thread); nothing that a response depends on.
    """

    __slots__ = ("long_writes",)

    def __init__(self) -> None:
        self.long_writes = 0

    async def small(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.long_writes:
            return await run_in_threadpool(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    async def long(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.long_writes += 1
        try:
            return await run_in_threadpool(fn, *args, **kwargs)
        finally:
            self.long_writes -= 1


@dataclass(frozen=True, slots=True)
class Access:
    """What an authorized handler works with: the ledger, the request's token, and the
    write lanes (``await who.small_write(fn, ...)``, ``await who.long_write(fn, ...)``)."""

    ledger: Ledger
    principal: TokenRecord | None
    lanes: WriteLanes
    groups: RecordGroups

    async def record(self, project: str, request: RecordRequest) -> RecordResult:
        """A single-trial record, written with the others this process has in hand for
        the project (:mod:`api.record_groups`)."""
        return await self.groups.record(self.ledger, project, request)

    def small_write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Awaitable[T]:
        return self.lanes.small(fn, *args, **kwargs)

    def long_write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Awaitable[T]:
        return self.lanes.long(fn, *args, **kwargs)


def principal_of(request: Request) -> TokenRecord | None:
    """The verified token of the request, None without an ``Authorization`` header."""
    record = request.app.state.ledger.tokens.principal(request.headers.get("authorization"))
    if record is None:
        return None
    request.state.principal = record.name
    return record


def _require(role: Role) -> Callable[[Request], Awaitable[Access]]:
    async def dependency(request: Request) -> Access:
        principal = principal_of(request)
        ledger = request.app.state.ledger
        settings = request.app.state.settings
        check_access(
            principal,
            role,
            anonymous_read=settings.anonymous_read,
            exposed=settings.exposed,
            ledger_open=ledger.tokens.anonymous_writes_open,
        )
        return Access(ledger, principal, request.app.state.write_lanes, request.app.state.record_groups)

    dependency.__name__ = f"require_{role.value}"
    return dependency


async def authorize(request: Request, role: Role) -> Access:
    """The access check of ``Reader``/``Writer``/``Admin`` called from a handler, for
    routes that answer its errors in another shape than problem+json (MLflow's)."""
    return await _require(role)(request)


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
    Header(
        alias="Idempotency-Key",
        max_length=MAX_IDEMPOTENCY_KEY,
        pattern=IDEMPOTENCY_KEY_PATTERN,
        description="Client's key for this write: a retry with the same key never writes twice",
    ),
]
IfNoneMatch = Annotated[str | None, Header(alias="If-None-Match")]
