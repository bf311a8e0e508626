"""A real HTTP proxy in front of a ledger that misbehaves on purpose: it answers 5xx
instead of forwarding, forwards and then answers 5xx (the ledger stored the write but
the client never heard), or answers slowly. The ``fault`` callable decides per request
from ``(number, method, path)`` (number: 0, 1, 2, ... in arrival order). ``answered``
lists ``(method, path, status)`` of every request the ledger answered."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


@dataclass(frozen=True)
class Fault:
    """What to do with one request: ``refuse`` (answer ``status`` without forwarding),
    ``drop_reply`` (forward, then answer ``status``), ``delay`` seconds before replying."""

    refuse: bool = False
    drop_reply: bool = False
    status: int = 503
    delay: float = 0.0


FaultRule = Callable[[int, str, str], Fault]


class FaultyProxy:
    def __init__(self, upstream: str, fault: FaultRule) -> None:
        self.upstream = upstream
        self.fault = fault
        self.count = 0
        self.faults = 0
        self.answered: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with proxy._lock:
                    number = proxy.count
                    proxy.count += 1
                fault = proxy.fault(number, self.command, self.path)
                if fault.refuse or fault.drop_reply:
                    proxy.faults += 1
                if fault.delay:
                    time.sleep(fault.delay)
                if fault.refuse:
                    return self._reply(fault.status, b'{"detail":"proxy fault"}', "application/json")
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")
                }
                try:
                    answer = httpx.request(
                        self.command, proxy.upstream + self.path, content=body, headers=headers, timeout=30
                    )
                except httpx.TransportError:
                    return self._reply(502, b'{"detail":"upstream down"}', "application/json")
                with proxy._lock:
                    proxy.answered.append((self.command, self.path, answer.status_code))
                if fault.drop_reply:
                    return self._reply(fault.status, b'{"detail":"proxy lost the reply"}', "application/json")
                self._reply(answer.status_code, answer.content, answer.headers.get("content-type", "application/json"))

            def _reply(self, status: int, content: bytes, content_type: str) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(content)))
                    self.end_headers()
                    self.wfile.write(content)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
