"""``/mcp`` started on first use: the MCP SDK (about half of the server's imports) is
imported by the first request to ``/mcp``, not at start, so ``lineage serve`` answers
``/health`` sooner and an idle server holds less memory.

:class:`LazyMcp` is the route's ASGI endpoint; :meth:`LazyMcp.run` is a task of the app's
lifespan that waits for the first request, then starts ``api.mcp_server.McpEndpoint``
and keeps it running until the lifespan ends (the SDK's session manager is entered and
left by that one task, as anyio requires).
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any


def mcp_installed() -> bool:
    """Whether the MCP SDK (the ``mcp`` extra) is importable, without importing it."""
    return importlib.util.find_spec("mcp") is not None


class LazyMcp:
    def __init__(self, ledger: Any, *, anonymous_read: bool, exposed: bool, allowed: Any = None) -> None:
        self.ledger, self.anonymous_read, self.exposed = ledger, anonymous_read, exposed
        self.allowed = allowed  # the server's hosts (api.hosts.HostAllowList); None: the loopback names
        self.endpoint: Any = None
        self.error: str | None = None
        self._wanted: asyncio.Event | None = None
        self._ready: asyncio.Event | None = None

    async def run(self) -> None:
        """The lifespan's task: start MCP when first wanted, hold it until cancelled."""
        self._wanted, self._ready = asyncio.Event(), asyncio.Event()
        try:
            await self._wanted.wait()
            try:
                from api.mcp_server import McpEndpoint

                endpoint = McpEndpoint(
                    self.ledger, anonymous_read=self.anonymous_read, exposed=self.exposed, allowed=self.allowed
                )
                async with endpoint.running():
                    self.endpoint = endpoint
                    self._ready.set()
                    await asyncio.Event().wait()  # until the lifespan cancels this task
            except ImportError as exc:
                self.error = f"MCP is not available: {exc}"
                self._ready.set()
        finally:
            self.endpoint = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._wanted is None or self._ready is None:
            from starlette.responses import PlainTextResponse

            await PlainTextResponse("MCP is not running (the app's lifespan has not started)", 503)(
                scope, receive, send
            )
            return
        self._wanted.set()
        await self._ready.wait()
        if self.endpoint is None:
            from starlette.responses import PlainTextResponse

            await PlainTextResponse(self.error or "MCP is not running", 503)(scope, receive, send)
            return
        await self.endpoint(scope, receive, send)
