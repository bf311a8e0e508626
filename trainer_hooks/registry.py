"""One registry for advantage estimators, advantage transforms and policy losses.

Each kind is a name → callable table filled by decorators (as verl's
``@register_policy_loss``). ``get_*`` takes a registered name or a dotted import path
``package.module:function`` / ``package.module.function`` to a user's own callable.
Unknown names fail with the list of known ones.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])


class Registry:
    """A named table of callables of one kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Callable[..., object]] = {}

    def register(self, name: str) -> Callable[[F], F]:
        def decorate(fn: F) -> F:
            if name in self._entries and self._entries[name] is not fn:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = fn
            return fn

        return decorate

    def names(self) -> list[str]:
        _load_builtins()
        return sorted(self._entries)

    def get(self, name: str) -> Callable[..., object]:
        _load_builtins()
        if name in self._entries:
            return self._entries[name]
        if "." in name or ":" in name:
            return _import_callable(name, self.kind)
        known = ", ".join(sorted(self._entries)) or "(none)"
        raise KeyError(f"unknown {self.kind} {name!r}; known: {known}; or give a dotted path 'package.module:function'")


def _import_callable(path: str, kind: str) -> Callable[..., object]:
    module_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
        fn = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise KeyError(f"cannot import {kind} {path!r}: {exc}") from None
    if not callable(fn):
        raise KeyError(f"{kind} {path!r} is not callable")
    return fn


ADVANTAGE_ESTIMATORS = Registry("advantage estimator")
ADVANTAGE_TRANSFORMS = Registry("advantage transform")
POLICY_LOSSES = Registry("policy loss")

register_advantage_estimator = ADVANTAGE_ESTIMATORS.register
register_advantage_transform = ADVANTAGE_TRANSFORMS.register
register_policy_loss = POLICY_LOSSES.register

get_advantage_estimator = ADVANTAGE_ESTIMATORS.get
get_advantage_transform = ADVANTAGE_TRANSFORMS.get
get_policy_loss = POLICY_LOSSES.get

#: Modules whose import registers the built-in entries. Loaded lazily on first lookup so
#: importing the registry does not import torch.
_BUILTIN_MODULES: list[str] = [
    "trainer_hooks.advantages.a2tgpo",
    "trainer_hooks.losses.ppo",
    "trainer_hooks.losses.gspo",
    "trainer_hooks.advantages.retrain.estimators",
    "trainer_hooks.advantages.retrain.uncertainty",
    "trainer_hooks.losses.a3po",
    "trainer_hooks.losses.astar_po",
]
_loaded = False


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module_name in _BUILTIN_MODULES:
        importlib.import_module(module_name)
