"""SIGTERM as an exit: a run killed by its scheduler unwinds its ``with`` blocks and runs
its exit handlers, so the client's spool is flushed (``LedgerClient(handle_sigterm=True)``)."""

from __future__ import annotations

import signal
import threading

__all__ = ["install_sigterm_exit"]

_sigterm_installed = False


def install_sigterm_exit() -> None:
    """Make SIGTERM raise ``SystemExit(143)`` in the main thread (when it has the default
    handler), so ``with`` blocks unwind and exit handlers flush the spool."""
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)
    _sigterm_installed = True
