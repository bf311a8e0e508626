"""``lineage serve`` as a real process on a free loopback port, until a block ends,
stopping a process politely, and the CPU time a process has used: for the end-to-end tests and the bench scripts (they run
from the repository root and import this as ``tests.servers``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
#: Upper bound on a server's start: generous, as a busy 2-core machine may take long to
#: import and migrate; a server that answers sooner is used at once.
START_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(
    workdir: Path | str | None, *args: str, demo: bool = False, timeout: float = START_TIMEOUT_S
) -> Iterator[str]:
    """``lineage serve [--demo] ARGS`` in ``workdir`` (its ./lineage.db unless ARGS has
    ``--db``; None: the current directory) on a free loopback port, with no
    ``LINEAGE_DATABASE_URL`` or ``LINEAGE_ANONYMOUS_READ`` from the environment; yields its
    base URL once ``/health`` answers 200. Raises AssertionError with the server's output
    when it exits or does not answer within ``timeout`` seconds."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    env.pop("LINEAGE_DATABASE_URL", None)
    env.pop("LINEAGE_ANONYMOUS_READ", None)
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: a full pipe would stall the server
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "api.cli",
                "serve",
                *(["--demo"] if demo else []),
                "--port",
                str(port),
                "--log-level",
                "warning",
                *args,
            ],
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

        def said() -> str:
            log.seek(0)
            return log.read().decode(errors="replace")[-4000:]

        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None, f"lineage serve exited with {proc.returncode}:\n{said()}"
                assert time.monotonic() < deadline, f"lineage serve did not answer within {timeout:g} s:\n{said()}"
                time.sleep(0.1)
            yield base
        finally:
            stop(proc)


def stop(proc: subprocess.Popen, timeout: float = 30.0) -> None:  # type: ignore[type-arg]
    """SIGTERM ``proc`` and wait for it; SIGKILL when it is still there after ``timeout`` s."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds the process ``pid`` has used (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
