"""The notebook's rules, pure (no store): what a note may hold, what it says against a
knob, whether a later trial contradicts it, and how notes rank in the prompt.

What a note may hold (:func:`check_note`)
    ``text``: 1 to :data:`MAX_NOTE_TEXT` characters, not only white space, no control
    characters but line breaks and tabs. ``cites``: 1 to :data:`MAX_CITES` trial ids (as
    stored or as shown, ``exp_012``); unknown ones are refused by the part, naming them.
    ``author``: at most :data:`MAX_AUTHOR` characters, no control characters (optional).

What a note says against a knob (:func:`negative_claims`)
    "X never helps", "X doesn't help", "X hurts", "X makes it worse", "X diverges",
    "X crashes", "don't X", "never X", "avoid X", "no gain from X": a negative claim about
    the subject X, which is the knob the words name (``lineage.knobs.knob_name``: "weight
    decay" is "wd", ``MATRIX_LR`` is "matrix lr"). "X above 0.06 diverges" bounds the
    claim: only values above 0.06 are meant (``above``, ``over``, ``beyond``, ``>``,
    ``>=``, ``higher than``; ``below``, ``under``, ``<``, ``<=``, ``lower than``).

When a later trial contradicts it (``lineage.notebook.Notes``)
    A trial kept (status ``keep``) after the note was written that changed the claim's
    knob (its stored knob changes: ``knob_changes``), to a value inside the claim's bound
    when it has one; without a bound, also a later keep whose hypothesis holds every word
    of the subject (the same concepts, ``lineage.similar.concepts``). The first such trial
    is named in the note's ``contradicted``; the note stays, flagged, for a person or an
    agent to revise.

How notes rank in the prompt (:func:`rank_key`)
    Notes that cite the current best first, then notes citing a kept trial (keep or
    baseline), then the rest; newest first within each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lineage.errors import InvalidInput
from lineage.knobs import knob_name, parse_number
from lineage.similar import STOP_WORDS, concepts

__all__ = [
    "MAX_AUTHOR",
    "MAX_CITES",
    "MAX_NOTE_TEXT",
    "NegativeClaim",
    "check_note",
    "negative_claims",
    "rank_key",
    "subject_words",
]

MAX_NOTE_TEXT = 2_000
MAX_CITES = 20
MAX_AUTHOR = 200
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_AUTHOR_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_FIELDS = ("text", "cites", "author")

#: the words of a subject: a knob's name, its bound
_SUBJECT = r"(?P<x>[\w.\-/*≥≤<>= ]{1,80}?)"
_VERB_AFTER = (
    r"(?:never|doesn'?t|does not|didn'?t|did not|won'?t|will not|can'?t|cannot|fails? to)\s+"
    r"(?:help|helps|work|works|improve|improves|pay off|pays off|matter|matters)"
    r"|hurts?|is harmful|is useless|is pointless|makes? (?:it|things|results|the metric|val_bpb|the loss) worse"
    r"|diverges?|crash(?:es)?|always crash(?:es)?|blows? up|ooms?|goes? nan"
)
_AFTER = re.compile(rf"(?:^|[.;:!?\n(]|\band\b|\bbut\b)\s*{_SUBJECT}\s+(?:{_VERB_AFTER})\b", re.IGNORECASE)
_BEFORE = re.compile(
    r"\b(?:don'?t|do not|never|avoid|stop|no (?:gain|improvement|benefit|help) from|nothing gained from)\s+"
    r"(?:(?:use|using|try|trying|raise|raising|increase|increasing|lower|lowering|decrease|decreasing|change|"
    r"changing|touch|touching|add|adding|set|setting|enable|enabling|tune|tuning|bump|bumping)\s+)?"
    r"(?!(?:help|helps|work|works|improve|improves|matter|matters|pay)\b)(?:the\s+)?(?P<x>[\w.\-/*≥≤<>= ]{1,60}?)(?=\s*(?:[.;,:!?\n)]|\bat\b|\bwith\b|\bwhen\b|\bfor\b|\bin\b|$))",
    re.IGNORECASE,
)
_BOUND = re.compile(
    r"\s*(?P<op>above|over|beyond|past|higher than|greater than|more than|below|under|lower than|less than|"
    r">=|<=|≥|≤|>|<)\s*(?P<v>[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?(?:\s*\*\*\s*\d+)?[kKmM]?)",
    re.IGNORECASE,
)
_UPPER = {"below", "under", "lower than", "less than", "<", "<=", "≤"}
_LEADING = {
    "the",
    "a",
    "an",
    "any",
    "more",
    "less",
    "higher",
    "lower",
    "bigger",
    "smaller",
    "larger",
    "raising",
    "increasing",
    "lowering",
    "decreasing",
    "adding",
    "using",
    "a higher",
    "a lower",
}


@dataclass(frozen=True, slots=True)
class NegativeClaim:
    """A note's claim against a knob: ``subject`` as written, ``knob`` normalised, and
    the bound when the note gives one (``above``: values above ``value`` are meant)."""

    subject: str
    knob: str
    above: bool | None = None
    value: float | None = None

    def covers(self, number: float | None) -> bool:
        """Whether a value a trial set falls under the claim (no bound: any value)."""
        if self.value is None:
            return True
        if number is None:
            return False
        return number > self.value if self.above else number < self.value


def check_note(fields: Mapping[str, Any]) -> tuple[str, list[str], str]:
    """``(text, cites, author)`` of a note, by the rules of the module doc (the cited ids
    as sent: the part resolves them); :class:`InvalidInput` naming the field."""
    unknown = sorted(set(fields) - set(_FIELDS))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a field of a note; known: {', '.join(_FIELDS)}")
    text = fields.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("text", "must be a non-empty text: the insight, e.g. 'LR above 0.06 diverges at depth 12'")
    if len(text) > MAX_NOTE_TEXT:
        raise InvalidInput("text", f"must be at most {MAX_NOTE_TEXT:,} characters, got {len(text):,}")
    if _CONTROL.search(text):
        raise InvalidInput("text", "must hold no control characters (line breaks and tabs are fine)")
    cites = fields.get("cites")
    if isinstance(cites, str):
        cites = [part for part in re.split(r"[,\s]+", cites) if part]
    if not isinstance(cites, list | tuple) or not cites:
        raise InvalidInput("cites", "must name the trials that support the note (at least one exp_id)")
    if len(cites) > MAX_CITES:
        raise InvalidInput("cites", f"must name at most {MAX_CITES} trials, got {len(cites)}")
    if not all(isinstance(c, str) and c.strip() and len(c) <= 512 for c in cites):
        raise InvalidInput("cites", "must be a list of exp_ids (texts of 1-512 characters)")
    author = fields.get("author") or ""
    if not isinstance(author, str) or len(author) > MAX_AUTHOR or _AUTHOR_CONTROL.search(author):
        raise InvalidInput("author", f"must be a text of at most {MAX_AUTHOR} characters without control characters")
    return text.strip(), list(dict.fromkeys(c.strip() for c in cites)), author.strip()


def _subject(raw: str) -> NegativeClaim | None:
    """The claim of a subject phrase ("LR above 0.06", "raising weight decay")."""
    above = value = None
    bound = _BOUND.search(raw)
    name = raw
    if bound is not None:
        number = parse_number(bound["v"].replace(" ", ""))
        if number is not None:
            value, above = number, bound["op"].casefold() not in _UPPER
        name = raw[: bound.start()]
    words = [w for w in re.split(r"\s+", name.strip(" .,;:-")) if w]
    words = words[-3:]
    while words and (words[0].casefold() in _LEADING or words[0].casefold() in STOP_WORDS):
        words.pop(0)
    if not words or all(parse_number(w) is not None for w in words):
        return None
    subject = " ".join(words)
    knob = knob_name(subject)
    if not knob or not subject_words(subject):
        return None
    return NegativeClaim(subject, knob, above, value)


def negative_claims(text: str) -> list[NegativeClaim]:
    """The negative claims of a note (module doc), one per knob, in order."""
    found: dict[str, NegativeClaim] = {}
    for pattern in (_AFTER, _BEFORE):
        for match in pattern.finditer(text[:MAX_NOTE_TEXT]):
            claim = _subject(match["x"])
            if claim is not None:
                found.setdefault(claim.knob, claim)
    return list(found.values())[:4]


def subject_words(text: str) -> set[str]:
    """The concepts of a text that name things: stop-words and numbers left out."""
    return {c for c in concepts(text) if c not in STOP_WORDS and parse_number(c) is None}


def rank_key(note_id: int, cited: Sequence[str], best: str | None, kept: set[str]) -> tuple[int, int]:
    """How a note ranks in the prompt (module doc): sort ascending by this key."""
    tier = 0 if best is not None and best in cited else 1 if any(c in kept for c in cited) else 2
    return tier, -note_id
