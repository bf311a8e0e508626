"""How a script ended, for runs finished at interpreter exit (as wandb's exit hooks do).

A run that the script never finishes is finished by an ``atexit`` handler. To label it,
:data:`HOOKS` (installed by the first ``init``) remembers the code given to
``sys.exit`` and the exception that reached ``sys.excepthook`` (an uncaught exception:
Python calls the hook before the exit handlers run). Both wrappers call what was there
before them. A process killed by a signal runs no exit handler: its trial stays
``running`` until its heartbeats have stopped for the project's lease, when the ledger
makes it ``harness_abort`` with a note; its spool keeps the telemetry for ``lineage spool
flush``.
"""

from __future__ import annotations

import sys
import threading
from types import TracebackType
from typing import Any, NoReturn

__all__ = ["HOOKS", "ExitHooks"]


class ExitHooks:
    """The exit code and the uncaught exception of this process, once installed."""

    def __init__(self) -> None:
        self.exit_code: Any = None
        self.exception: BaseException | None = None
        self._installed = False
        self._lock = threading.Lock()
        self._exit: Any = None
        self._excepthook: Any = None

    def install(self) -> None:
        """Wrap ``sys.exit`` and ``sys.excepthook`` (once per process)."""
        with self._lock:
            if self._installed:
                return
            self._installed = True
            self._exit, self._excepthook = sys.exit, sys.excepthook
            sys.exit = self._hooked_exit
            sys.excepthook = self._hooked_excepthook

    def _hooked_exit(self, code: Any = None) -> NoReturn:
        self.exit_code = code
        self._exit(code)
        raise SystemExit(code)  # pragma: no cover - the wrapped exit raised already

    def _hooked_excepthook(self, kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        self.exception = value
        self._excepthook(kind, value, tb)


HOOKS = ExitHooks()
