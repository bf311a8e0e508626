"""A knob's history as answers: each trial's try (:class:`KnobTry`) and the values tried
in order, each with its trials (:func:`values_tried`). Pure: the store reads the rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from lineage.knobs.numbers import parse_number, same_value

__all__ = ["KnobTry", "shown_value", "values_tried"]


@dataclass(frozen=True, slots=True)
class KnobTry:
    """One trial's change of one knob, with what the trial became. ``same_value``: in a
    new trial's ``same_knob``, whether this earlier try set the value the new one sets."""

    knob: str
    name: str
    old: str | None
    new: str | None
    old_number: float | None
    new_number: float | None
    factor: float | None
    source: str
    seq: int
    exp_id: str
    status: str
    core_metric: float | None
    delta_vs_best: float | None
    same_value: bool | None = None

    @classmethod
    def setting(cls, knob: str, new: str | None, new_number: float | None, factor: float | None) -> KnobTry:
        """What a new trial (or a text) sets a knob to: the side a try is compared with."""
        return cls(knob, "", None, new, None, new_number, factor, "", 0, "", "", None, None)

    @property
    def value(self) -> str:
        return shown_value(self.new, self.factor)

    def with_same_value(self, other: KnobTry) -> KnobTry:
        return replace(self, same_value=_same(self, other))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "knob": self.knob,
            "name": self.name,
            "value": self.value,
            "old": self.old,
            "new": self.new,
            "number": self.new_number,
            "factor": self.factor,
            "source": self.source,
            "exp_id": self.exp_id,
            "status": self.status,
            "core_metric": self.core_metric,
            "delta_vs_best": self.delta_vs_best,
        }
        if self.same_value is not None:
            out["same_value"] = self.same_value
        return out


def shown_value(new: str | None, factor: float | None) -> str:
    """A try's value as shown: the value set, or the factor ("x2") of "double the batch size"."""
    if new is not None:
        return new
    return f"x{factor:g}" if factor is not None else "?"


def _same(a: KnobTry, b: KnobTry) -> bool:
    if a.new_number is not None and b.new_number is not None:  # read once, when the change was stored
        return math.isclose(a.new_number, b.new_number, rel_tol=1e-12, abs_tol=0.0)
    if a.new is not None or b.new is not None:
        return same_value(a.new, b.new)
    return a.factor is not None and a.factor == b.factor


def values_tried(tries: Sequence[KnobTry]) -> list[dict[str, Any]]:
    """The values of ``tries`` (oldest first) in the order first tried, each once (``2**19``
    and ``524288`` are one value), each with its trials: exp_id, status, metric, delta."""
    groups: dict[Any, tuple[KnobTry, list[KnobTry]]] = {}  # one dict look-up a try: O(tries)
    for attempt in tries:
        key = _value_key(attempt)
        group = groups.get(key)
        if group is None:
            groups[key] = (attempt, [attempt])
        else:
            group[1].append(attempt)
    return [
        {
            "value": first.value,
            "number": first.new_number,
            "trials": [
                {
                    "exp_id": t.exp_id,
                    "status": t.status,
                    "core_metric": t.core_metric,
                    "delta_vs_best": t.delta_vs_best,
                    "old": t.old,
                    "name": t.name,
                    "source": t.source,
                }
                for t in members
            ],
        }
        for first, members in groups.values()
    ]


def _value_key(attempt: KnobTry) -> Any:
    """What makes two tries one value (as :func:`_same` decides, up to float rounding): the
    number, else the text without quotes and case, else the factor."""
    if attempt.new_number is not None:
        return ("n", attempt.new_number)
    if attempt.new is not None:
        number = parse_number(attempt.new)
        return ("n", number) if number is not None else ("t", attempt.new.strip().strip("\"'").casefold())
    return ("x", attempt.factor)
