"""``POST /api/v1/projects/{p}/trials`` in its common case, without FastAPI's per-request
machinery: the agents' and trainers' single records are the API's hottest request, and
FastAPI's routing through nested routers, dependency solving and exit stacks cost about
0.3 ms of a ~1.2 ms record (py-spy; bench/api_workload.py).

The route stays FastAPI's (``api.routes.trials.record_trial``): it is the documented one
and the reference. This path answers only a request that route would answer with a
record: ``Content-Type: application/json``, a body that parses and validates as
:class:`~api.schemas.TrialCreate`, a valid slug and Idempotency-Key, a token (or none)
that :func:`lineage.auth.allowed` lets write. Anything else is handed to the app's
router again, with the body it read, and FastAPI's route answers it (its 4xx
problems, in its order), so no rule lives here: the checks are the route's own functions
(``principal_of``, ``allowed``, the schema), the record is ``api.record_groups``, the
answer ``api.present.recorded``, and a refusal of the ledger (404, 409, 422) is raised
to the same problem handlers. Whether the ledger takes a write without a token is read
by the record's group in its transaction (``RecordRequest.anonymous``); when it does
not, the request is handed back too, and FastAPI's route answers it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import TypeAdapter
from starlette.requests import Request
from starlette.routing import Match, Route
from starlette.types import Message, Receive, Scope, Send

from api import present
from api.deps import principal_of
from api.schema_types import Text
from api.schemas import TrialCreate
from lineage.auth import Role, Unauthorized, allowed
from lineage.domain import IDEMPOTENCY_KEY_PATTERN, MAX_IDEMPOTENCY_KEY
from lineage.service import RecordRequest

PATH = "/api/v1/projects/{project}/trials"
#: Set in a request's scope when this path handed it back to the router.
_HANDED_BACK = "lineage.fast_record.handed_back"
_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)
_SLUG = TypeAdapter(Text)
_JSON = (b"application/json", b"application/json; charset=utf-8")


class FastRecordRoute(Route):
    """The route of this path, placed before the API's routers; it stands aside for a
    request it handed back."""

    def __init__(self) -> None:
        super().__init__(PATH, endpoint=_Answer(), methods=["POST"], include_in_schema=False)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope.get(_HANDED_BACK):
            return Match.NONE, {}
        return super().matches(scope)


class _Answer:
    """The route's ASGI app (a class, so that Starlette passes it scope, receive and send)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _answer(scope, receive, send)


async def _answer(scope: Scope, receive: Receive, send: Send) -> None:
    request = Request(scope, receive)
    body = await request.body()
    found = _common_case(request, body)
    if found is None:
        await _hand_back(scope, receive, send, body)
        return
    slug, fields, key, anonymous = found
    app = request.app
    try:
        result = await app.state.record_groups.record(
            app.state.ledger,
            slug,
            RecordRequest(fields, key, similar_prior=True, anonymous=anonymous),
            _connection(scope),
        )
    except Unauthorized:
        if not anonymous:
            raise
        # the ledger took no anonymous write when the group read it: FastAPI's route
        # checks again and answers (as it would have, had it been asked first)
        await _hand_back(scope, receive, send, body)
        return
    await present.recorded(request, slug, result)(scope, receive, send)


def _common_case(request: Request, body: bytes) -> tuple[str, dict[str, Any], str | None, bool] | None:
    """``(slug, fields, Idempotency-Key, anonymous)`` of a request FastAPI's route would
    record; None for any other (it answers those). ``anonymous``: it may write only while
    the ledger takes anonymous writes, which its group reads in its transaction (one
    read for the group, not one per request here)."""
    headers = request.headers
    if headers.get("content-type", "").encode("latin-1").lower() not in _JSON:
        return None
    keys = headers.getlist("idempotency-key")
    if len(keys) > 1 or keys and (len(keys[0]) > MAX_IDEMPOTENCY_KEY or not _KEY.match(keys[0])):
        return None
    try:
        slug = _SLUG.validate_python(request.path_params["project"])
        data = json.loads(body)
        if not isinstance(data, dict):
            return None
        fields = TrialCreate.model_validate(data).model_dump(exclude_unset=True)
        principal = principal_of(request)
    except Exception:  # noqa: BLE001 - any: FastAPI's route answers it (a bad body, a bad token)
        return None
    state = request.app.state
    asked: list[bool] = []

    def ledger_open() -> bool:  # asked only when the answer depends on it: the group answers
        asked.append(True)
        return True

    if not allowed(
        principal.role if principal is not None else None,
        Role.WRITER,
        anonymous_read=state.settings.anonymous_read,
        exposed=state.settings.exposed,
        ledger_open=ledger_open,
    ):
        return None
    return slug, fields, keys[0] if keys else None, bool(asked)


def _connection(scope: Scope) -> tuple[Any, ...] | None:
    """The request's connection, as record groups know their writers: its client address
    (ASGI gives a list or a tuple, or nothing)."""
    client = scope.get("client")
    return tuple(client) if client else None


async def _hand_back(scope: Scope, receive: Receive, send: Send, body: bytes) -> None:
    """The request to the app's router again, past this route, its body replayed."""
    replayed = False

    async def receive_again() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    scope[_HANDED_BACK] = True
    await scope["app"].router(scope, receive_again, send)
