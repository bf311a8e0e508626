"""Knob history: what each knob was tried at, and how each try did (``ledger.knobs``).

The rows are the store's (``knob_changes``, written with each trial); the rules here:

* a knob is asked for by any spelling: ``MATRIX_LR``, ``matrix lr`` and ``matrix_lr``
  are one knob (``lineage.knobs.knob_name``); a name that is no stored knob matches the
  knobs holding all its words ("bs" is "total bs" and "device bs");
* a history answers each value in the order first tried, each with its trials;
* a new trial's ``same_knob`` is the earlier trials that changed a knob it changes
  (:func:`tried`), each saying whether it set the same value, and ``tried_before`` says
  whether it is a sweep or a repeat (``lineage.knobs.sweeps``); an idea in words gets the
  same answers (:meth:`Knobs.tried_of_text`);
* every knob's history at once (:meth:`Knobs.knob_history`): the knobs of the newest
  :data:`ALL_KNOBS_WINDOW` tries, or the knobs one name matches, each with its values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from lineage.errors import InvalidInput
from lineage.knobs import knob_name
from lineage.knobs.extract import hypothesis_changes
from lineage.knobs.history import KnobTry, values_tried
from lineage.knobs.sweeps import TriedBefore, tried_before
from lineage.leases import settle
from lineage.similar import content_tokens
from lineage.store import Store

__all__ = ["ALL_KNOBS_WINDOW", "MAX_KNOB_CHARS", "SAME_KNOB_LIMIT", "KnobHistory", "Knobs", "tried"]

#: the longest knob name asked for
MAX_KNOB_CHARS = 120
#: how many earlier tries a new trial's ``same_knob`` lists at most (the newest)
SAME_KNOB_LIMIT = 10
#: the knob history of a whole project reads the newest this many tries (every knob's)
ALL_KNOBS_WINDOW = 1_000


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


def tried(store: Store, conn: Connection, project_id: int, seq: int) -> tuple[tuple[KnobTry, ...], list[TriedBefore]]:
    """What was tried before the trial at ``seq``: the earlier trials that changed a knob it
    changes (newest :data:`SAME_KNOB_LIMIT`, oldest first, each marked ``same_value``
    against it), and whether it is a sweep or a repeat (``lineage.knobs.sweeps``)."""
    pairs, same_patch = store.knobs.tried(conn, project_id, seq, limit=SAME_KNOB_LIMIT)
    tries = tuple(attempt.with_same_value(mine) for attempt, mine in pairs)
    return tries, tried_before(tries, same_patch)


class Knobs:
    """history, knob_history, tried_of_text, same_knob_of_text."""

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
            return self._history(conn, project.stored_id, name)

    def _history(self, conn: Connection, project_id: int, name: str) -> KnobHistory:
        tries = self.store.knobs.history(conn, project_id, [name])
        knobs = [name] if tries else self._matching(conn, project_id, name)
        if knobs and not tries:
            tries = self.store.knobs.history(conn, project_id, knobs)
        return KnobHistory(name, tuple(knobs), tuple(tries))

    def knob_history(self, project_slug: str, knob: str | None = None, *, field: str = "knob") -> dict[str, Any]:
        """What each knob was tried at: every face's answer (HTTP ``knob-history``, MCP
        ``knob_history``, ``lineage knobs``). Without ``knob``: the knobs of the project's
        newest :data:`ALL_KNOBS_WINDOW` tries, most tried first; with it: the knobs that
        name matches (:meth:`history`). Each knob with its values in the order first
        tried, each value with its trials (exp_id, status, metric, delta)."""
        name = None if knob is None else _checked(knob, field)
        settle(self.store, project_slug)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            return {"project": project_slug, **self.knobs_in(conn, project.stored_id, name)}

    def knobs_in(self, conn: Connection, project_id: int, name: str | None = None) -> dict[str, Any]:
        """:meth:`knob_history`'s answer (but the project) in the caller's transaction;
        ``name``: a knob's normalised name, None for every knob."""
        if name is not None:
            tries: list[KnobTry] = list(self._history(conn, project_id, name).tries)
            window = False
        else:
            tries = self.store.knobs.newest(conn, project_id, limit=ALL_KNOBS_WINDOW)
            window = len(tries) >= ALL_KNOBS_WINDOW
        by_knob: dict[str, list[KnobTry]] = {}
        for attempt in tries:
            by_knob.setdefault(attempt.knob, []).append(attempt)
        order = sorted(by_knob, key=lambda k: (-len(by_knob[k]), k))
        return {
            "knob": name,
            "window": ALL_KNOBS_WINDOW if window else None,
            "knobs": [
                {"knob": k, "name": by_knob[k][-1].name, "tried": len(by_knob[k]), "values": values_tried(by_knob[k])}
                for k in order
            ],
        }

    def tried_of_text(self, project_slug: str, text: str) -> tuple[list[KnobTry], list[TriedBefore]]:
        """For an idea in words ("increase MATRIX_LR from 0.04 to 0.06", "lr 0.08 for the
        matrix params"): the earlier trials that changed a knob it names (newest
        :data:`SAME_KNOB_LIMIT` of each) and whether it is a sweep or a repeat. A name that
        is no stored knob stands for the knobs holding its words, narrowed to those whose
        other words the text says ("lr ... matrix" is "matrix lr")."""
        changes = {change.knob: change for change in hypothesis_changes(text)}
        if not changes:
            return [], []
        words = set(content_tokens(text))
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            found: list[KnobTry] = []
            stored: list[str] | None = None
            for knob, change in changes.items():
                tries = self.store.knobs.history(conn, project.stored_id, [knob], limit=SAME_KNOB_LIMIT)
                if not tries:
                    if stored is None:
                        stored = [k for k, _ in self.store.knobs.knobs(conn, project.stored_id)]
                    named = _named_by(knob, stored, words)
                    tries = self.store.knobs.history(conn, project.stored_id, named, limit=SAME_KNOB_LIMIT)
                asked = KnobTry.setting(knob, change.new, change.new_number, change.factor)
                found.extend(attempt.with_same_value(asked) for attempt in tries)
        return found, tried_before(found)

    def same_knob_of_text(self, project_slug: str, text: str) -> list[KnobTry]:
        """:meth:`tried_of_text`'s tries alone."""
        return self.tried_of_text(project_slug, text)[0]

    def _matching(self, conn: Connection, project_id: int, name: str) -> list[str]:
        words = set(name.split())
        return [knob for knob, _ in self.store.knobs.knobs(conn, project_id) if words <= set(knob.split())]


def _named_by(knob: str, stored: list[str], text_words: set[str]) -> list[str]:
    """The stored knobs ``knob`` (a name from a text) stands for: those holding all its
    words; when several do, those with the most of their other words in the text."""
    words = set(knob.split())
    holding = [k for k in stored if words <= set(k.split())]
    if len(holding) <= 1:
        return holding
    said = {k: len((set(k.split()) - words) & text_words) for k in holding}
    best = max(said.values())
    return [k for k in holding if said[k] == best] if best > 0 else holding[:4]


def _checked(knob: Any, field: str) -> str:
    if not isinstance(knob, str) or not knob.strip():
        raise InvalidInput(field, "must name a knob, e.g. MATRIX_LR or learning rate")
    if len(knob) > MAX_KNOB_CHARS:
        raise InvalidInput(field, f"must be at most {MAX_KNOB_CHARS} characters")
    name = knob_name(knob.strip().lstrip("-"))
    if not name:
        raise InvalidInput(field, "must hold a letter or digit, e.g. MATRIX_LR or learning rate")
    return name
