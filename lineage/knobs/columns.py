"""Knob changes read from a results file's own columns (source ``column``).

A results file (autoresearch, fieldkit's ``extra``, a followed file) keeps each column
without a trial field in ``extra`` under its own name (``lr``, ``depth``, ``memory_gb``).
A column is a knob when it is *set* by the trial, not *measured* by it or naming it:

* never a column of a role of the file's layout (metric, status, description, commit, id,
  parent; :func:`role_columns`);
* never a name that says a result (``val_loss``, ``score``, a rate: the file
  vocabulary's ``direction_of_name``), identifies or times a row (``commit``, ``seed``,
  ``created_at``: ``is_id_column``) or measures the run's cost (:data:`MEASURED_WORDS`:
  ``memory_gb``, ``train_seconds``);
* never a key the ledger or a front owns (``_git``, ``config``, ``tags``...: a ``_`` first,
  or :data:`NOT_COLUMNS`), nor a name that is no identifier (``learning rate``: free text),
  nor a value that is no scalar, a hash, or free text.

A trial's column changes are those whose value differs from its parent's (the code it
started from), each as set when the parent lacks the column or the trial has no parent;
so a column that never varies is one try at the root, and a sweep is one try per value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from lineage.formats.autoresearch.vocabulary import direction_of_name, is_id_column, name_tokens
from lineage.trial_fields import CLIENT_KEYS

__all__ = ["MAX_COLUMNS", "MEASURED_WORDS", "NOT_COLUMNS", "column_values", "is_knob_column", "role_columns"]

#: columns read per trial, at most (a wide file's first ones)
MAX_COLUMNS = 32
#: words of a column that measures what a run cost, not what it set
MEASURED_WORDS = frozenset(
    "memory mem gb mb gib mib vram seconds secs sec minutes mins hours time duration elapsed wall "
    "cost usd bytes flops mfu throughput speed tps latency peak".split()
)
#: keys of ``extra`` written by the ledger's fronts, never a file's column
NOT_COLUMNS = frozenset({"config", "tags", "mlflow", "row_description", "notes", "description", "hypothesis"})
#: the longest text value of a knob column (longer is free text)
_MAX_TEXT = 40
_HASH = re.compile(r"^[0-9a-fA-F]{7,64}$")
# a column's name as files write them (``lr``, ``n_embd``, ``model.depth``): no ``_`` first
_COLUMN_NAME = re.compile(r"^[A-Za-z][\w.\-]{0,63}$")
# cells without a column (``col3``) and columns named like a reserved key (``col:_row``)
_EXTRA_CELL = re.compile(r"^col(?:\d+$|:)")


def role_columns(settings: Mapping[str, Any] | None) -> frozenset[str]:
    """The columns of a project's stored results-file layout that have a role (metric,
    status, description, commit, id, parent, long-format names, trial fields): none of
    them is a knob. ``settings``: ``Project.settings``."""
    layout = (settings or {}).get("results_file")
    if not isinstance(layout, Mapping):
        return frozenset()
    from lineage.formats.autoresearch.layout import Layout

    try:
        return frozenset(Layout.from_dict(layout).role_columns())
    except (TypeError, ValueError):
        return frozenset()


@lru_cache(maxsize=4096)  # a file has few columns, read again with every row
def is_knob_column(name: str) -> bool:
    """Whether a column named ``name`` may be a knob (module doc: not a result, an id, a
    cost, or a key of the ledger's)."""
    if not _COLUMN_NAME.match(name) or name in NOT_COLUMNS or name in CLIENT_KEYS or _EXTRA_CELL.match(name):
        return False
    if is_id_column(name) or direction_of_name(name) is not None:
        return False
    return not set(name_tokens(name)) & MEASURED_WORDS


def _cell(value: Any) -> str | None:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > _MAX_TEXT or len(text.split()) > 3 or _HASH.match(text):
            return None
        return text
    return None


def column_values(extra: Mapping[str, Any], roles: frozenset[str] = frozenset()) -> dict[str, str]:
    """The knob columns of a trial's ``extra`` with their values as text (at most
    :data:`MAX_COLUMNS`), in ``extra``'s order."""
    out: dict[str, str] = {}
    for name, value in extra.items():
        if not isinstance(name, str) or name in roles or not is_knob_column(name):
            continue
        cell = _cell(value)
        if cell is not None:
            out[name] = cell
            if len(out) >= MAX_COLUMNS:
                break
    return out
