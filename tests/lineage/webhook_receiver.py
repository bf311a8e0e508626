"""A real HTTP receiver of webhooks for the tests: ``http.server`` in a thread.

``Receiver(mode)``: ``ok`` answers 204, ``fail`` answers 500, ``hang`` holds the request
until the receiver stops (the sender's timeout must end it). Every request is recorded
(path, headers, raw body). ``port`` may be fixed before the receiver listens, so a test
can send to a receiver that is down and start it later on the same address.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.api.conftest import free_port


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    mode: str = "ok"
    port: int = field(default_factory=free_port)
    requests: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                receiver.requests.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if receiver.mode == "hang":
                    receiver._stop.wait(60)
                    return
                self.send_response(204 if receiver.mode == "ok" else 500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._stop.clear()
        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        """Poll until ``count`` requests arrived (AssertionError after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.requests)} of {count} webhook requests arrived in {timeout} s")
            time.sleep(0.02)
        return self.requests

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
