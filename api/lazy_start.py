"""A server that is alive before it is ready: ``lineage serve``'s ASGI entry point.

Importing FastAPI and building the app (pydantic validators for every route, the
problem handlers, the contract) takes most of a cold start. :class:`LazyStart` lets
uvicorn bind at once and builds the real app on a worker thread meanwhile:

* ``/health`` (liveness: the process answers) is answered by this shim until the app is
  built, with the same body the app gives;
* every other request, ``/ready`` included, waits for the app and is then served by it,
  so nothing is refused or answered differently while it starts;
* the app's lifespan (webhook delivery, MCP, SQLite checkpoints) runs once it is built
  and is shut down with the server;
* a build that fails is logged and ends the process with status 1, as an app factory
  that raises does under uvicorn.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any

# Starlette's ASGI types: an app is an async function (its call is a task's coroutine)
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Coroutine[Any, Any, None]]

log = logging.getLogger("lineage.serve")

_HEALTH_BODY = b'{"status":"ok"}'


class LazyStart:
    """An ASGI app answering ``/health`` while ``build()`` runs on a thread (module doc)."""

    def __init__(self, build: Callable[[], App]) -> None:
        self._build = build
        self._app: App | None = None
        self._built: asyncio.Future[App] | None = None
        self._inner_lifespan: asyncio.Task[None] | None = None
        self._inner_queue: asyncio.Queue[Message] | None = None
        self._inner_events: asyncio.Queue[Message] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        app = self._app
        if app is None:
            if scope["type"] == "http" and scope.get("path") == "/health" and scope.get("method") in ("GET", "HEAD"):
                await _health(scope, send)
                return
            app = await self._ready()
        await app(scope, receive, send)

    async def _ready(self) -> App:
        if self._built is None:  # no lifespan (a server run with lifespan="off"): build now
            self._start()
        assert self._built is not None
        return await asyncio.shield(self._built)

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        self._built = loop.create_future()
        loop.create_task(self._build_and_start(self._built))

    async def _build_and_start(self, built: asyncio.Future[App]) -> None:
        try:
            app = await asyncio.to_thread(self._build)
            await self._start_inner_lifespan(app)
        except BaseException as exc:  # noqa: BLE001 - any failure ends the process (module doc)
            log.critical("the server could not start: %s", exc, exc_info=exc)
            logging.shutdown()
            os._exit(1)
        self._app = app
        built.set_result(app)

    async def _start_inner_lifespan(self, app: App) -> None:
        self._inner_queue, self._inner_events = asyncio.Queue(), asyncio.Queue()
        queue, events = self._inner_queue, self._inner_events
        self._inner_lifespan = asyncio.create_task(
            app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, queue.get, events.put)
        )
        await queue.put({"type": "lifespan.startup"})
        answer = await events.get()
        if answer["type"] != "lifespan.startup.complete":
            raise RuntimeError(answer.get("message") or "the app's start-up failed")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._stop_inner_lifespan()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _stop_inner_lifespan(self) -> None:
        if self._built is not None and not self._built.done():
            try:  # a server stopped while it builds: let the build finish, then stop it cleanly
                await asyncio.wait_for(asyncio.shield(self._built), timeout=30)
            except TimeoutError:
                return
        if self._inner_lifespan is None or self._inner_queue is None or self._inner_events is None:
            return
        await self._inner_queue.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(self._inner_events.get(), timeout=30)
        await self._inner_lifespan


async def _health(scope: Scope, send: Send) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(_HEALTH_BODY)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope.get("method") == "HEAD" else _HEALTH_BODY})


def lazy_app_from_env() -> LazyStart:
    """Entry point for ``uvicorn --factory`` used by ``lineage serve``: the app of
    :func:`api.app.app_from_env`, built behind :class:`LazyStart`."""

    def build() -> App:
        from api.app import app_from_env

        return app_from_env()

    return LazyStart(build)
