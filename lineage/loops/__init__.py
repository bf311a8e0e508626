"""RESULTS-FILE LOOP: a loop's ``results.tsv`` (karpathy/autoresearch and its variants,
generic tables) as use-cases of the ledger.

- :mod:`lineage.loops.importing` — ``Files`` (``ledger.files``): the one import
  entrance (``ledger.import_file`` / ``ledger.import_results``), export, the stored layout;
- :mod:`lineage.loops.follow`, :mod:`lineage.loops.watch`, :mod:`lineage.loops.remote` —
  ``lineage watch``, locally (:class:`ResultsSync`) and into a server (:class:`RemoteSync`);
- :mod:`lineage.loops.record` — ``lineage record`` (:func:`record_result`);
- :mod:`lineage.loops.followed` — the one results file a project follows (its stored path);
- :mod:`lineage.loops.git` — commit details of a trial; :mod:`lineage.loops.plot` — ``lineage plot``.

The file format itself (rows, quirks, status words, direction, lineage) is
:mod:`lineage.formats.autoresearch`'s. No SQL here, and no import of :mod:`api`.

The names below are loaded on first use, so importing ``lineage.loops.importing`` (which
the ledger does) does not import the followers, which themselves use the ledger.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_HOMES = {
    "LoopImport": "importing",
    "TABLE_FORMATS": "importing",
    "layout_of": "importing",
    "SyncReport": "follow",
    "ResultsSync": "watch",
    "RemoteSync": "remote",
    "RecordOutcome": "record",
    "record_result": "record",
    "git_details": "git",
    "link_git": "git",
    "plot_progress": "plot",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'lineage.loops' has no attribute {name!r}")
    return getattr(import_module(f"lineage.loops.{home}"), name)
