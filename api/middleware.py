"""Pure ASGI middleware: request ids and the access log; body size limits and gzip.

``RequestContext`` (outermost)
    Takes the client's ``X-Request-ID`` when it is a sane token (1-128 characters of
    ``A-Z a-z 0-9 . _ : -``), else makes one; puts it in ``request.state.request_id``,
    in every log record of the request (``lineage.logs``) and in the response's
    ``X-Request-ID``. Writes one access-log line per request (``lineage.access``): method,
    path, status, milliseconds, the token's *name* -- never a header, never a token.

``BodyGuard`` (for ``/api/``)
    Refuses a body over ``max_bytes`` with 413: at once when ``Content-Length`` says so,
    else while it streams in. ``Content-Encoding: gzip`` (or ``deflate``) bodies are
    decoded on the fly and the limit applies to the *decoded* size, so a small zip bomb
    is refused after at most ``max_bytes`` of output. Other encodings get 415; a corrupt
    stream 400.

``HostGuard``
    Answers only requests whose ``Host`` (and, for the JSON API and ``/mcp``, ``Origin``)
    names one of the server's hosts (:mod:`api.hosts`, DNS rebinding); 403 otherwise.
"""

from __future__ import annotations

import itertools
import logging
import re
import time
import uuid
import zlib
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.hosts import SETTING, HostAllowList
from api.logs import REQUEST_ID, redact_query
from api.problems import PROBLEM_JSON

access_log = logging.getLogger("lineage.access")

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


#: Request ids made here: this process's random prefix and a count (unique across
#: processes and restarts with the prefix's 64 bits; a uuid4 per request was 1.5% of a
#: trial's record, the urandom call and the UUID object)
_ID_PREFIX = uuid.uuid4().hex[:16]
_ID_COUNT = itertools.count(1)


def _new_request_id() -> str:
    return f"{_ID_PREFIX}{next(_ID_COUNT):016x}"  # 32 hex digits, as a uuid4().hex


class RequestContext:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = _header(scope, b"x-request-id")
        request_id = incoming if incoming and _REQUEST_ID.fullmatch(incoming) else _new_request_id()
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        reset = REQUEST_ID.set(request_id)
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = MutableHeaders(scope=message)
                if "x-request-id" not in headers:
                    headers.append("X-Request-ID", request_id)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if access_log.isEnabledFor(logging.INFO):
                principal = state.get("principal")
                query = scope.get("query_string", b"").decode("latin-1")
                path = scope.get("path", "") + (f"?{redact_query(query)}" if query else "")
                access_log.info(
                    "%s %s %d %.1fms %s",
                    scope.get("method", "-"),
                    path,
                    status,
                    (time.perf_counter() - started) * 1000,
                    principal or "-",
                    extra={
                        "method": scope.get("method"),
                        "path": scope.get("path"),
                        "status": status,
                        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                        "principal": principal,
                    },
                )
            REQUEST_ID.reset(reset)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


class HostGuard:
    def __init__(self, app: ASGIApp, *, allowed: HostAllowList) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path == "/health":
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        if not self.allowed.allows(host):
            await _refuse(scope, send, 403, self.allowed.refusal("Host", host), field="Host", setting=SETTING)
            return
        if path.startswith(("/api/", "/mcp/")) or path == "/mcp":
            origin = _header(scope, b"origin")
            if not self.allowed.allows_origin(origin):
                await _refuse(scope, send, 403, self.allowed.refusal("Origin", origin), field="Origin", setting=SETTING)
                return
        await self.app(scope, receive, send)


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes (after decoding)")
        self.problem = {"limit": limit}


class BodyGuard:
    def __init__(self, app: ASGIApp, *, max_bytes: int, prefix: str = "/api/") -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        length = _header(scope, b"content-length")
        encoding = (_header(scope, b"content-encoding") or "identity").strip().lower()
        if encoding not in ("identity", "gzip", "x-gzip", "deflate"):
            await _refuse(
                scope,
                send,
                415,
                f"Content-Encoding {encoding!r} is not supported; send gzip or identity",
                field="Content-Encoding",
            )
            return
        if length is not None and (not length.isdigit() or (encoding == "identity" and int(length) > limit)):
            if length.isdigit():
                await _refuse(scope, send, 413, f"the request body is larger than {limit} bytes", limit=limit)
            else:
                await _refuse(scope, send, 400, "Content-Length is not a number", field="Content-Length")
            return
        if encoding == "identity":
            await self.app(scope, counting_receive(receive, limit), send)
            return
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"content-encoding", b"content-length")]
        inner = dict(scope, headers=headers)
        await self.app(inner, _inflating(receive, limit, gzip=encoding != "deflate"), send)


def counting_receive(receive: Receive, limit: int) -> Receive:
    """``receive`` that raises :class:`BodyTooLarge` once more than ``limit`` body bytes came."""
    seen = 0

    async def wrapped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(limit)
        return message

    return wrapped


def _inflating(receive: Receive, limit: int, *, gzip: bool) -> Receive:
    decoder = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)
    produced = 0

    async def wrapped() -> Message:
        nonlocal produced
        message = await receive()
        if message["type"] != "http.request":
            return message
        chunk = message.get("body", b"")
        try:
            out = decoder.decompress(chunk, limit - produced + 1) if chunk else b""
            if decoder.unconsumed_tail:
                raise BodyTooLarge(limit)
            if not message.get("more_body", False):
                out += decoder.flush()
                if not decoder.eof:
                    raise HTTPException(400, "the gzip body ends before its end marker")
        except zlib.error as exc:
            raise HTTPException(400, f"the body is not valid {'gzip' if gzip else 'deflate'} data: {exc}") from None
        produced += len(out)
        if produced > limit:
            raise BodyTooLarge(limit)
        return {**message, "body": out}

    return wrapped


async def _refuse(scope: Scope, send: Send, status: int, detail: str, **members: Any) -> None:
    """A problem+json answer sent before the app sees the request."""
    import json
    from http import HTTPStatus

    state = scope.get("state", {})
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": scope.get("path", ""),
    }
    if state.get("request_id"):
        body["request_id"] = state["request_id"]
    body.update(members)
    payload = json.dumps(body).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", PROBLEM_JSON.encode()),
                (b"content-length", str(len(payload)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
