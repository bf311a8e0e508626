"""Import an upstream trainer's module for a differential test, or skip with the reason.

The upstream packages come from the ``upstream`` extra (tests/run_all.sh installs verl,
retrain and areal with ``--no-deps``); where one is absent or does not import here, its
tests skip and say why rather than fail.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import random
from collections.abc import Iterator
from types import ModuleType

import pytest
import torch

F64 = torch.float64


def upstream(module: str, package: str) -> ModuleType:
    """``import module`` or skip the calling test module naming ``package``."""
    try:
        with logging_kept():
            return importlib.import_module(module)
    except Exception as exc:  # ImportError, or an import-time error of a mismatched dependency
        pytest.skip(
            f"{package} is not importable here ({type(exc).__name__}: {exc}); install the 'upstream' extra "
            "and the upstream packages as tests/run_all.sh does",
            allow_module_level=True,
        )


@contextlib.contextmanager
def logging_kept() -> Iterator[None]:
    """Undo what an upstream import does to this process's logging: AReaL's logging module
    replaces the root logger and the logger manager and disables every existing logger
    (``dictConfig(disable_existing_loggers=True)``), which would silence the loggers the
    other tests of this worker capture."""
    root, manager = logging.root, logging.Logger.manager
    loggers = {
        name: (lg.disabled, lg.propagate, lg.level, list(lg.handlers))
        for name, lg in manager.loggerDict.items()
        if isinstance(lg, logging.Logger)
    }
    root_state = (root.level, list(root.handlers))
    try:
        yield
    finally:
        logging.root = logging.Logger.root = root
        logging.Logger.manager = manager
        root.setLevel(root_state[0])
        root.handlers[:] = root_state[1]
        for name, (disabled, propagate, level, handlers) in loggers.items():
            lg = manager.loggerDict[name]
            if isinstance(lg, logging.Logger):
                lg.disabled, lg.propagate, lg.level = disabled, propagate, level
                lg.handlers[:] = handlers


def ragged_batch(seed: int, rows: int = 7, width: int = 11, *, empty_row: bool = True):
    """``(old_log_prob, log_prob, advantages, response_mask)`` in float64: right-padded
    rows of random lengths (one fully masked when ``empty_row``), log-ratios large enough
    that both clips and the dual clip bite."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    lengths = [rng.randint(1, width) for _ in range(rows)]
    if empty_row:
        lengths[rng.randrange(rows)] = 0
    mask = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
    log_prob = -torch.rand(rows, width, generator=g, dtype=F64) * 3
    old = log_prob + 0.5 * torch.randn(rows, width, generator=g, dtype=F64)
    adv = torch.randn(rows, width, generator=g, dtype=F64)
    return old, log_prob, adv, mask
