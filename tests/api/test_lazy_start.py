"""``lineage serve``'s entry point (api.lazy_start): alive before ready, nothing answered
differently while the app builds, the app's lifespan run and stopped, a failed build
ends the process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading

from api.lazy_start import LazyStart


class Recorder:
    """A tiny ASGI app noting its lifespan and answering every request with its path."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                kind = message["type"].split(".")[1]
                self.events.append(kind)
                await send({"type": f"lifespan.{kind}.complete"})
                if kind == "shutdown":
                    return
        body = f"app:{scope['path']}".encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})


async def _get(app, path: str) -> tuple[int, bytes]:  # type: ignore[no-untyped-def]
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app({"type": "http", "method": "GET", "path": path, "headers": []}, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_health_answers_while_the_app_builds_and_the_rest_waits_for_it() -> None:
    release = threading.Event()
    inner = Recorder()

    def build() -> Recorder:
        release.wait(10)
        return inner

    async def scenario() -> None:
        shim = LazyStart(build)
        to_shim: asyncio.Queue[dict] = asyncio.Queue()
        from_shim: asyncio.Queue[dict] = asyncio.Queue()
        lifespan = asyncio.create_task(shim({"type": "lifespan"}, to_shim.get, from_shim.put))
        await to_shim.put({"type": "lifespan.startup"})
        assert (await from_shim.get())["type"] == "lifespan.startup.complete"

        assert await _get(shim, "/health") == (200, b'{"status":"ok"}')  # the build is still waiting
        waiting = asyncio.create_task(_get(shim, "/api/v1/projects"))
        await asyncio.sleep(0.05)
        assert not waiting.done() and inner.events == []  # not refused, not answered: waiting
        release.set()
        assert await asyncio.wait_for(waiting, 10) == (200, b"app:/api/v1/projects")
        assert inner.events == ["startup"]
        assert await _get(shim, "/health") == (200, b"app:/health")  # the app answers from now on

        await to_shim.put({"type": "lifespan.shutdown"})
        assert (await from_shim.get())["type"] == "lifespan.shutdown.complete"
        await lifespan
        assert inner.events == ["startup", "shutdown"]

    asyncio.run(scenario())


def test_a_build_that_fails_ends_the_server_with_status_1() -> None:
    script = textwrap.dedent("""
        import uvicorn
        from api.lazy_start import LazyStart

        def build():
            raise RuntimeError("database unreachable")

        uvicorn.run(LazyStart(build), host="127.0.0.1", port=0, log_level="warning")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "the server could not start: database unreachable" in done.stderr
