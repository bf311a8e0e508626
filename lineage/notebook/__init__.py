"""The project notebook (``ledger.notes``): insights not tied to one trial ("LR above
0.06 diverges at depth >= 12"), each citing the trials that support it.

Writing (:meth:`Notes.add_note`)
    The note is checked (:func:`lineage.notebook.rules.check_note`), its cited trials are
    resolved as a person types them (``exp_012`` is ``012``), and a note naming a trial
    the project does not have is an :class:`~lineage.errors.InvalidInput` on ``cites``
    naming every unknown one; nothing is stored then. With the note the project's
    revision moves on (the prompt shows notes, so its ETag must change).

Reading (:meth:`Notes.notes`; :func:`prompt_notes` in the prompt's transaction)
    Newest first, a page at a time (``before_id``), each note with its cited trials'
    status and, when a later kept trial contradicts it, ``contradicted`` (the rule is
    :mod:`lineage.notebook.rules`). The prompt carries at most :data:`PROMPT_NOTES`
    notes of :data:`PROMPT_NOTE_CHARS` characters each, those citing the best first,
    then those citing a kept trial, newest first within each
    (:func:`lineage.notebook.rules.rank_key`), read from the newest :data:`PROMPT_POOL`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from lineage.domain import Project
from lineage.errors import InvalidInput
from lineage.exp_ids import shown_forms
from lineage.notebook.rules import NegativeClaim, check_note, negative_claims, rank_key, subject_words
from lineage.store.base import iso_stamp
from lineage.store.notes import NoteRow

if TYPE_CHECKING:  # pragma: no cover
    from lineage.store import Store

__all__ = ["MAX_LIMIT", "PROMPT_NOTES", "PROMPT_NOTE_CHARS", "Contradiction", "Note", "Notes", "prompt_notes"]

#: notes one page answers at most
MAX_LIMIT = 200
#: notes the prompt carries at most, and the characters of each note's text it shows
PROMPT_NOTES = 8
PROMPT_NOTE_CHARS = 300
#: the newest notes the prompt ranks (a bounded read, however long the notebook)
PROMPT_POOL = 50
#: kept trials after a note read for the word rule (the first ones)
_KEEPS_READ = 200
_KEPT = ("keep", "baseline")


@dataclass(frozen=True, slots=True)
class Contradiction:
    """The later kept trial that changed what a note spoke against."""

    exp_id: str
    knob: str
    value: str | None
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"exp_id": self.exp_id, "knob": self.knob, "value": self.value, "why": self.why}


@dataclass(frozen=True, slots=True)
class Note:
    """A note: its text, the trials it cites with their status (None: since deleted),
    who wrote it, when, and whether a later trial contradicts it."""

    id: int
    text: str
    cites: tuple[tuple[str, str | None], ...]
    author: str
    created_at: str | None
    contradicted: Contradiction | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "cites": [{"exp_id": exp_id, "status": status} for exp_id, status in self.cites],
            "author": self.author,
            "created_at": self.created_at,
            "contradicted": None if self.contradicted is None else self.contradicted.to_dict(),
        }


class Notes:
    """add_note, notes."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add_note(self, project_slug: str, fields: Mapping[str, Any]) -> Note:
        """Store a note citing the trials that support it (module doc); the stored note."""
        text, cites, author = check_note(fields)
        store = self.store
        with store.write() as conn:
            project = store.projects.project(conn, project_slug)
            resolved = _resolve(store, conn, project, cites)
            missing = [cite for cite in cites if cite not in resolved]
            if missing:
                raise InvalidInput(
                    "cites", f"unknown trials in project {project.slug!r}: {', '.join(missing)}; cite stored trials"
                )
            exp_ids = list(dict.fromkeys(resolved[cite] for cite in cites))
            row = store.notes.insert_note(
                conn,
                project.stored_id,
                text=text,
                cites=exp_ids,
                author=author,
                after_seq=store.notes.last_seq(conn, project.stored_id),
            )
            store.progress.bump_revision(conn, project.stored_id)
            return _Reader(store, conn, project).notes([row])[0]

    def notes(
        self, project_slug: str, *, before_id: int | None = None, limit: int = 20
    ) -> tuple[list[Note], int | None]:
        """The project's notes, newest first (module doc), and the ``before_id`` of the
        next page (None when none is left)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput("limit", f"must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
        if before_id is not None and (isinstance(before_id, bool) or not isinstance(before_id, int) or before_id < 1):
            raise InvalidInput("before_id", f"must be a positive integer, got {before_id!r}")
        store = self.store
        with store.read() as conn:
            project = store.projects.project(conn, project_slug)
            rows = store.notes.note_rows(conn, project.stored_id, before_id=before_id, limit=limit + 1)
            found = _Reader(store, conn, project).notes(rows[:limit])
        return found, (found[-1].id if len(rows) > limit else None)


def prompt_notes(store: Store, conn: Connection, project: Project, best_exp: str | None) -> tuple[list[Note], int]:
    """The notes the prompt carries (module doc), ranked, and how many the project has."""
    rows = store.notes.note_rows(conn, project.stored_id, limit=PROMPT_POOL)
    if not rows:
        return [], 0
    total = len(rows) if len(rows) < PROMPT_POOL else store.notes.note_count(conn, project.stored_id)
    found = _Reader(store, conn, project).notes(rows)
    kept = {exp_id for note in found for exp_id, status in note.cites if status in _KEPT}
    found.sort(key=lambda note: rank_key(note.id, [exp_id for exp_id, _ in note.cites], best_exp, kept))
    return found[:PROMPT_NOTES], total


def _resolve(store: Store, conn: Connection, project: Project, cites: Sequence[str]) -> dict[str, str]:
    """``{cited as sent: stored exp_id}`` of the cited trials the project has."""
    forms = {cite: shown_forms(cite) for cite in cites}
    stored = store.notes.cited(conn, project.stored_id, [form for many in forms.values() for form in many])
    out: dict[str, str] = {}
    for cite, many in forms.items():
        found = next((form for form in many if form in stored), None)
        if found is None:  # 12 for 012: the one trial with that number
            found = store.trials.resolve_exp_id(conn, project, cite)
        if found is not None:
            out[cite] = found
    return out


class _Reader:
    """Notes of one project read in one transaction: their cited trials' status in one
    query, the project's knobs once, and each note's contradiction."""

    def __init__(self, store: Store, conn: Connection, project: Project) -> None:
        self.store, self.conn, self.project = store, conn, project
        self._knobs: list[str] | None = None

    def notes(self, rows: Sequence[NoteRow]) -> list[Note]:
        cited = self.store.notes.cited(self.conn, self.project.stored_id, [c for row in rows for c in row[2]])
        out = []
        for id_, text, cites, author, after_seq, created in rows:
            out.append(
                Note(
                    id_,
                    text,
                    tuple((c, cited[c][0] if c in cited else None) for c in cites),
                    author,
                    iso_stamp(created),
                    self.contradiction(text, -1 if after_seq is None else after_seq),
                )
            )
        return out

    def knobs(self) -> list[str]:
        if self._knobs is None:
            self._knobs = [knob for knob, _ in self.store.knobs.knobs(self.conn, self.project.stored_id)]
        return self._knobs

    def contradiction(self, text: str, after_seq: int) -> Contradiction | None:
        """The first kept trial after ``after_seq`` that changed what the note speaks
        against (:mod:`lineage.notebook.rules`), or None."""
        for claim in negative_claims(text):
            found = self._by_knob(claim, after_seq) or self._by_words(claim, after_seq)
            if found is not None:
                return found
        return None

    def _by_knob(self, claim: NegativeClaim, after_seq: int) -> Contradiction | None:
        words = set(claim.knob.split())
        knobs = [knob for knob in self.knobs() if knob == claim.knob or words <= set(knob.split())]
        if not knobs:
            return None
        for attempt in self.store.knobs.history(self.conn, self.project.stored_id, knobs):
            if attempt.seq > after_seq and attempt.status == "keep" and claim.covers(attempt.new_number):
                value = f" to {attempt.new}" if attempt.new is not None else ""
                return Contradiction(
                    attempt.exp_id,
                    attempt.knob,
                    attempt.new,
                    f"exp_{attempt.exp_id} was kept after this note, and it changed {attempt.name}{value}",
                )
        return None

    def _by_words(self, claim: NegativeClaim, after_seq: int) -> Contradiction | None:
        if claim.value is not None:  # a bounded claim needs the value a trial set
            return None
        wanted = subject_words(claim.subject)
        for _, exp_id, hypothesis in self.store.notes.keeps_after(
            self.conn, self.project.stored_id, after_seq, limit=_KEEPS_READ
        ):
            if wanted <= subject_words(hypothesis):
                return Contradiction(
                    exp_id, claim.knob, None, f"exp_{exp_id} was kept after this note, and it is about {claim.subject}"
                )
        return None
