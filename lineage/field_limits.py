"""The trial's fields and their limits: the fieldkit columns and the ledger's extended
ones, which are numbers, durations, fractions, long or short text, how long a text may be,
and what ``extra`` may hold (:func:`check_extra`).

Pure values and one check, no I/O. :func:`lineage.domain.validate_trial` applies them to a
whole trial; ``lineage.domain`` re-exports every name here, where the rest of the code
imports them from. (:mod:`lineage.trial_fields` describes the fields to writers: meanings
and JSON Schemas built from these limits.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lineage.errors import InvalidInput

#: The 17 columns of fieldkit's results.tsv, in canonical order.
FIELDKIT_COLUMNS: tuple[str, ...] = (
    "exp_id",
    "timestamp",
    "specialist",
    "parent_exp",
    "baseline_exp",
    "domain",
    "hypothesis",
    "expected_delta",
    "status",
    "core_metric",
    "val_bpb",
    "delta_vs_best",
    "train_s",
    "total_s",
    "job_name",
    "snapshot_path",
    "notes",
)

#: Statistics of the adaptive clip scale (A²TGPO), the ledger's extended columns.
CLIP_SCALE_COLUMNS: tuple[str, ...] = (
    "ig_clip_scale_mean",
    "ig_clip_scale_std",
    "ig_clip_scale_min",
    "ig_clip_scale_max",
    "ig_clip_scale_frac_low",
    "ig_clip_scale_frac_high",
)

FLOAT_COLUMNS: frozenset[str] = frozenset(
    {"core_metric", "val_bpb", "delta_vs_best", "train_s", "total_s", *CLIP_SCALE_COLUMNS}
)
DURATION_COLUMNS: frozenset[str] = frozenset({"train_s", "total_s"})
FRACTION_COLUMNS: frozenset[str] = frozenset({"ig_clip_scale_frac_low", "ig_clip_scale_frac_high"})
#: Longest duration a trial may report, in seconds (about 31,700 years): the per-status
#: totals sum them in double precision, and PostgreSQL refuses a sum that overflows.
MAX_DURATION_S = 1e12

#: Longest text a long field (hypothesis, notes, expected_delta) may hold, in characters.
MAX_LONG_TEXT = 65_536
#: Longest text a short field (ids, names, paths) may hold.
MAX_SHORT_TEXT = 512
#: ``extra``'s limits: its own keys (each may become a table column), how deep objects
#: and arrays nest in it (the top object is level 1), and the bytes of its JSON text
#: (UTF-8, compact). A results file's other columns and the ledger's own keys (``_git``,
#: at most 64 KiB of patch) stay far inside them.
MAX_EXTRA_KEYS = 1_000
MAX_EXTRA_DEPTH = 32
MAX_EXTRA_BYTES = 1_048_576
LONG_TEXT_COLUMNS: frozenset[str] = frozenset({"hypothesis", "notes", "expected_delta"})
SHORT_TEXT_COLUMNS: frozenset[str] = frozenset(
    {"exp_id", "timestamp", "specialist", "parent_exp", "baseline_exp", "domain", "job_name", "snapshot_path"}
)


def check_extra(extra: Any, *, field: str = "extra") -> None:
    """Raise :class:`InvalidInput` on ``field`` unless ``extra`` is a JSON object within
    :data:`MAX_EXTRA_KEYS`, :data:`MAX_EXTRA_DEPTH` and :data:`MAX_EXTRA_BYTES`. Walks
    without recursion and stops at the first level too deep, so any input is cheap to refuse."""
    if not isinstance(extra, Mapping):
        raise InvalidInput(field, "must be a JSON object")
    if len(extra) > MAX_EXTRA_KEYS:
        raise InvalidInput(field, f"has {len(extra):,} keys; the limit is {MAX_EXTRA_KEYS:,} keys")
    if _flat_and_small(extra):  # an import's row: no walk, no encoding
        return
    level: list[Any] = [extra]
    for depth in range(1, MAX_EXTRA_DEPTH + 2):
        inner = [
            value
            for container in level
            for value in (container.values() if isinstance(container, Mapping) else container)
            if isinstance(value, (Mapping, list, tuple))
        ]
        if not inner:
            break
        if depth == MAX_EXTRA_DEPTH:
            raise InvalidInput(field, f"nests objects and arrays deeper than the limit of {MAX_EXTRA_DEPTH} levels")
        level = inner
    try:
        size = len(json.dumps(extra, ensure_ascii=False, separators=(",", ":")).encode())
    except (TypeError, ValueError) as bad:  # not JSON: a set, bytes, a circular reference
        raise InvalidInput(field, f"must hold JSON values only ({bad})") from None
    if size > MAX_EXTRA_BYTES:
        raise InvalidInput(field, f"is {size:,} bytes as JSON; the limit is {MAX_EXTRA_BYTES:,} bytes")


def _flat_and_small(extra: Mapping[Any, Any]) -> bool:
    """Whether ``extra`` holds only text keys and plain scalars whose JSON cannot reach
    :data:`MAX_EXTRA_BYTES` (a character takes at most 6 bytes, as an escape)."""
    bound = 2
    for key, value in extra.items():
        if type(key) is not str:
            return False
        if type(value) is str:
            bound += 6 * len(value) + 2
        elif value is None or type(value) in (bool, float) or (type(value) is int and -(2**63) <= value < 2**64):
            bound += 24
        else:
            return False
        bound += 6 * len(key) + 4
    return bound <= MAX_EXTRA_BYTES
