"""Knob history: what each knob was tried at, and how each try did (``ledger.knobs``).

The rows are the store's (``knob_changes``, written with each trial); the rules here:

* a knob is asked for by any spelling: ``MATRIX_LR``, ``matrix lr`` and ``matrix_lr``
  are one knob (``lineage.knobs.knob_name``); a name that is no stored knob matches the
  knobs holding all its words ("bs" is "total bs" and "device bs");
* a history answers each value in the order first tried, each with its trials;
* a new trial's ``same_knob`` is the earlier trials that changed a knob it changes
  (:func:`same_knob`), each saying whether it set the same value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from lineage.errors import InvalidInput
from lineage.knobs import knob_name
from lineage.knobs.extract import hypothesis_changes
from lineage.knobs.history import KnobTry, values_tried
from lineage.leases import settle
from lineage.store import Store

__all__ = ["MAX_KNOB_CHARS", "SAME_KNOB_LIMIT", "KnobHistory", "Knobs", "same_knob"]

#: the longest knob name asked for
MAX_KNOB_CHARS = 120
#: how many earlier tries a new trial's ``same_knob`` lists at most (the newest)
SAME_KNOB_LIMIT = 10


@dataclass(frozen=True, slots=True)
class KnobHistory:
    """A knob's history: the knob asked for (normalised), the stored knobs it matched,
    and their tries, oldest first."""

    knob: str
    knobs: tuple[str, ...]
    tries: tuple[KnobTry, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "knob": self.knob,
            "knobs": list(self.knobs),
            "tried": len(self.tries),
            "values": values_tried(self.tries),
        }


def same_knob(store: Store, conn: Connection, project_id: int, seq: int) -> tuple[KnobTry, ...]:
    """The earlier trials that changed a knob the trial at ``seq`` changes (newest
    :data:`SAME_KNOB_LIMIT`, oldest first), each marked ``same_value`` against it."""
    return tuple(
        attempt.with_same_value(mine)
        for attempt, mine in store.knobs.same_knob(conn, project_id, seq, limit=SAME_KNOB_LIMIT)
    )


class Knobs:
    """history, same_knob_of_text."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def history(self, project_slug: str, knob: str, *, field: str = "knob") -> KnobHistory:
        """Every value ``knob`` was tried at (module doc), with each try's trial, status,
        metric and delta. A name that is no knob is an :class:`InvalidInput` on ``field``;
        a knob never tried has no values."""
        name = _checked(knob, field)
        settle(self.store, project_slug)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            tries = self.store.knobs.history(conn, project.stored_id, [name])
            knobs = [name] if tries else self._matching(conn, project.stored_id, name)
            if knobs and not tries:
                tries = self.store.knobs.history(conn, project.stored_id, knobs)
        return KnobHistory(name, tuple(knobs), tuple(tries))

    def same_knob_of_text(self, project_slug: str, text: str) -> list[KnobTry]:
        """For an idea in words ("increase MATRIX_LR from 0.04 to 0.06"): the earlier
        trials that changed a knob it names, newest :data:`SAME_KNOB_LIMIT` of each."""
        changes = {change.knob: change for change in hypothesis_changes(text)}
        if not changes:
            return []
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            found: list[KnobTry] = []
            for knob, change in changes.items():
                tries = self.store.knobs.history(conn, project.stored_id, [knob], limit=SAME_KNOB_LIMIT)
                asked = KnobTry.setting(knob, change.new, change.new_number, change.factor)
                found.extend(attempt.with_same_value(asked) for attempt in tries)
        return found

    def _matching(self, conn: Connection, project_id: int, name: str) -> list[str]:
        words = set(name.split())
        return [knob for knob, _ in self.store.knobs.knobs(conn, project_id) if words <= set(knob.split())]


def _checked(knob: Any, field: str) -> str:
    if not isinstance(knob, str) or not knob.strip():
        raise InvalidInput(field, "must name a knob, e.g. MATRIX_LR or learning rate")
    if len(knob) > MAX_KNOB_CHARS:
        raise InvalidInput(field, f"must be at most {MAX_KNOB_CHARS} characters")
    name = knob_name(knob.strip().lstrip("-"))
    if not name:
        raise InvalidInput(field, "must hold a letter or digit, e.g. MATRIX_LR or learning rate")
    return name
