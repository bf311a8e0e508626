"""Stand-ins for the parts of wandb that have no meaning in the ledger.

The ledger stores numbers per step, a trial's fields, and alerts. Media (``Image``,
``Video``, ``Audio``, ``Html``, ``Object3D``, ``Molecule``), ``Histogram``, ``Table``, the
``plot`` presets, artifacts and models, file saving and gradient watching store nothing
here. Each stand-in accepts the calls a script makes (any arguments, any method), does
nothing, and says so in one warning the first time it is used in the process (the
logger ``trainer_hooks.wandb``). A media object that reaches ``log`` is skipped there
like any other non-numeric value.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

__all__ = [
    "RUN_STANDINS",
    "Artifact",
    "Audio",
    "Histogram",
    "Html",
    "Image",
    "Molecule",
    "Object3D",
    "Table",
    "Video",
    "plot",
    "stand_in",
    "warn_once",
]

log = logging.getLogger("trainer_hooks.wandb")

_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(key: str, message: str) -> None:
    """Log ``message`` as a warning the first time ``key`` is seen in this process."""
    if key in _warned:
        return
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    log.warning("%s", message)


def _does_nothing(name: str) -> None:
    warn_once(
        name,
        f"wandb.{name} has no meaning in the lineage ledger (it stores numbers per step, the trial's "
        f"fields and alerts): the call does nothing",
    )


class _StandIn:
    """A value that accepts any construction and any method call, and stores nothing."""

    _wandb_name = "StandIn"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _does_nothing(self._wandb_name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _noop

    def __repr__(self) -> str:
        return f"<trainer_hooks.wandb.{self._wandb_name} stand-in: stores nothing>"


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def _stand_in_class(name: str) -> type:
    return type(name, (_StandIn,), {"_wandb_name": name, "__doc__": f"Stand-in for ``wandb.{name}`` (module doc)."})


Image = _stand_in_class("Image")
Video = _stand_in_class("Video")
Audio = _stand_in_class("Audio")
Html = _stand_in_class("Html")
Object3D = _stand_in_class("Object3D")
Molecule = _stand_in_class("Molecule")
Histogram = _stand_in_class("Histogram")
Table = _stand_in_class("Table")
Artifact = _stand_in_class("Artifact")


class _Plot:
    """``wandb.plot``: every preset (``line``, ``scatter``, ``bar``, ``histogram``,
    ``confusion_matrix``, ...) returns a stand-in that ``log`` skips."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def preset(*args: Any, **kwargs: Any) -> Any:
            _does_nothing(f"plot.{name}")
            return _PLOT_VALUE

        return preset


_PLOT_VALUE: _StandIn = object.__new__(_stand_in_class("plot"))
plot = _Plot()


def stand_in(name: str, result: Any = None) -> Any:
    """A function named ``name`` that warns once and returns ``result``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        _does_nothing(name)
        return result

    call.__name__ = call.__qualname__ = name.replace(".", "_")
    call.__doc__ = f"Stand-in for ``wandb.{name}`` (module doc): does nothing."
    return call


#: the Run methods that are stand-ins, with what each returns
RUN_STANDINS: dict[str, Any] = {
    "watch": None,
    "unwatch": None,
    "save": False,
    "restore": None,
    "log_artifact": None,
    "use_artifact": None,
    "link_artifact": None,
    "upsert_artifact": None,
    "finish_artifact": None,
    "log_model": None,
    "use_model": None,
    "link_model": None,
    "log_code": None,
    "mark_preempting": None,
    "plot_table": None,
}
