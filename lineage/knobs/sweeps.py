"""Sweep or repeat: what a new trial (or an idea in words) is, against what was tried.

:func:`tried_before` is the one rule every face says it with (the record answer,
``similar_prior``'s companions, ``find_similar`` on HTTP, MCP and the CLI):

* **repeat** -- an earlier trial made the same change: the same patch (its digest,
  ``lineage.knobs.patch_digest``), or the same value of a knob the new one changes
  ("repeat of exp_017: MATRIX_LR 0.08, discard"). A running trial counts: it is being
  tried now.
* **sweep** -- the new one changes a knob that earlier trials set to other values: the
  values in the order first tried, each with its trials' statuses ("sweep of MATRIX_LR:
  0.04 keep, 0.05 keep, 0.06 discard").

Pure: the tries come from ``knob_changes`` (``Store.knobs.tried``), already marked
``same_value`` against the new setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lineage.knobs.history import KnobTry, values_tried

__all__ = ["MAX_SAID", "TriedBefore", "tried_before"]

#: statements at most (repeats first, then sweeps)
MAX_SAID = 6
#: values a sweep names at most (the first tried; the rest counted)
_SWEEP_VALUES = 8


@dataclass(frozen=True, slots=True)
class TriedBefore:
    """One statement: ``kind`` ``repeat`` or ``sweep``, the knob (``""`` for a repeated
    patch), the earlier trials it names, and ``says``, the sentence an agent reads."""

    kind: str
    knob: str
    name: str
    exp_ids: tuple[str, ...]
    says: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "knob": self.knob,
            "name": self.name,
            "exp_ids": list(self.exp_ids),
            "says": self.says,
        }


def tried_before(tries: Sequence[KnobTry], same_patch: Sequence[tuple[str, str]] = ()) -> list[TriedBefore]:
    """The repeats and sweeps of a new trial (module doc): ``tries`` are earlier trials'
    changes of the knobs it changes (oldest first, each with ``same_value`` set);
    ``same_patch``: the earlier trials whose patch made the same change, ``(exp_id,
    status)`` oldest first. Repeats first (the newest trial named), at most :data:`MAX_SAID`."""
    said: list[TriedBefore] = []
    if same_patch:
        exp_id, status = same_patch[-1]
        others = _also(same_patch[:-1])
        said.append(
            TriedBefore(
                "repeat",
                "",
                "",
                tuple(e for e, _ in same_patch),
                f"repeat of exp_{exp_id}: same patch, {status}{others}",
            )
        )
    by_knob: dict[str, list[KnobTry]] = {}
    for attempt in tries:
        by_knob.setdefault(attempt.knob, []).append(attempt)
    sweeps: list[TriedBefore] = []
    for knob, knob_tries in by_knob.items():
        name = knob_tries[-1].name or knob
        same = [t for t in knob_tries if t.same_value]
        if same and not same_patch:
            newest = same[-1]
            others = _also([(t.exp_id, t.status) for t in same[:-1]])
            said.append(
                TriedBefore(
                    "repeat",
                    knob,
                    name,
                    tuple(t.exp_id for t in same),
                    f"repeat of exp_{newest.exp_id}: {name} {newest.value}, {newest.status}{others}",
                )
            )
        if any(not t.same_value for t in knob_tries):
            values = values_tried(knob_tries)
            shown = [f"{v['value']} {'/'.join(t['status'] for t in v['trials'])}" for v in values[:_SWEEP_VALUES]]
            more = f", {len(values) - _SWEEP_VALUES} more" if len(values) > _SWEEP_VALUES else ""
            sweeps.append(
                TriedBefore(
                    "sweep",
                    knob,
                    name,
                    tuple(dict.fromkeys(t.exp_id for t in knob_tries)),
                    f"sweep of {name}: {', '.join(shown)}{more}",
                )
            )
    return (said + sweeps)[:MAX_SAID]


def _also(earlier: Sequence[tuple[str, str]]) -> str:
    if not earlier:
        return ""
    return " (also " + ", ".join(f"exp_{exp_id} {status}" for exp_id, status in earlier[-3:]) + ")"
