"""The knobs a trial changed, read from what it carries: pure, no store, bounded.

Sources, most trusted first (:data:`SOURCES`):

``patch``
    The stored git patch (``extra._git.patch``). Within each file, a name assigned on a
    removed line and again, to another value, on an added line is a change: ``NAME =
    value`` and ``self.name = value`` (Python, TOML), ``name: value`` (YAML),
    ``"name": value`` (JSON), ``name=value`` keyword arguments, and ``--flag value`` /
    ``--flag=value`` command-line flags. Only literal values count (numbers, expressions
    of numbers, quoted strings, booleans), so ``x = f(y)`` is code, not a knob.
``config``
    ``extra.config`` (the wandb and HF fronts): each scalar that differs from the
    parent's config, or each one, as set, when there is no parent config.
``column``
    A results file's own columns kept in ``extra`` (``lr``, ``depth``): each knob column
    (``lineage.knobs.columns``) whose value differs from the parent's.
``hypothesis``
    The hypothesis text: "increase MATRIX_LR from 0.04 to 0.06", "lr 3e-4 -> 1e-3",
    "depth 8 → 12", "double the batch size" (a factor, no values), "set wd to 0.1",
    "switch to 16 layers", "lr 0.08 for the matrix params", "TOTAL_BATCH_SIZE 2**20".
``unparsed``
    What a patch changes but no rule reads: a binary file (its value the new blob's id)
    and an assignment whose value is no literal (``WINDOW_PATTERN = pick("SSSL")`` in a
    module's constants, any key of a config file), kept as text.

A knob's name is normalised (:func:`knob_name`): identifiers split and each ML term's
spellings made one (``lineage.similar.concepts``), so ``MATRIX_LR`` is "matrix lr" and
``learning_rate`` is "lr". A trial keeps one change per knob, from its most trusted source. Extraction never raises
and reads at most :data:`MAX_PATCH_CHARS` of a patch, whatever its size.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from lineage.knobs.columns import column_values
from lineage.knobs.numbers import NUMBER_PATTERN, parse_number, same_value
from lineage.similar import concepts, vocabulary_table

__all__ = [
    "MAX_PATCH_CHARS",
    "SOURCES",
    "KnobChange",
    "column_changes",
    "config_changes",
    "extract_changes",
    "hypothesis_changes",
    "knob_name",
    "parent_side",
    "patch_changes",
    "patch_digest",
]

#: the sources of a change, most trusted first
SOURCES = ("patch", "config", "column", "hypothesis", "unparsed")
#: how much of a patch is read: a patch of megabytes costs no more than this
MAX_PATCH_CHARS = 200_000
#: how much of a patch its digest reads (:func:`patch_digest`)
MAX_DIGEST_CHARS = 2_000_000
#: lines longer than this are data, not assignments
_MAX_LINE = 400
#: at most this many changes a trial (a patch rewriting a whole config file)
MAX_CHANGES = 64
_MAX_VALUE = 200
_MAX_NAME = 120


@dataclass(frozen=True, slots=True)
class KnobChange:
    """One knob a trial changed: ``old`` to ``new`` as written (``old`` None: not known),
    their numbers when they are numbers, and ``factor`` for "double the batch size"."""

    knob: str
    name: str
    old: str | None
    new: str | None
    source: str
    factor: float | None = None

    @property
    def old_number(self) -> float | None:
        return None if self.old is None else parse_number(self.old)

    @property
    def new_number(self) -> float | None:
        return None if self.new is None else parse_number(self.new)


@lru_cache(maxsize=4096)  # a loop spells its few knobs again and again
def knob_name(name: str) -> str:
    """The normalised name of a knob: ``MATRIX_LR`` -> "matrix lr", ``--learning-rate``
    -> "lr", ``model.n_layer`` -> "model nlayers"."""
    return " ".join(concepts(name))[:_MAX_NAME]


# -- patch ----------------------------------------------------------------------------------

_LITERAL = rf"(?:{NUMBER_PATTERN}|\"[^\"]{{0,{_MAX_VALUE}}}\"|'[^']{{0,{_MAX_VALUE}}}'|true|false|True|False|None|null)"
# NAME = value / self.name = value / name: int = value (Python, TOML), not ==
_ASSIGN = re.compile(
    rf"^\s*(?:self\.)?(?P<name>[A-Za-z_][\w.]*)\s*(?::\s*[\w\[\], .|]+)?=(?!=)\s*(?P<value>{_LITERAL})\s*,?\s*(?:#.*)?$"
)
# name: value (YAML) and "name": value (JSON)
_COLON = re.compile(rf"^\s*(?P<q>\"?)(?P<name>[A-Za-z_][\w.-]*)(?P=q)\s*:\s*(?P<value>{_LITERAL})\s*,?\s*(?:#.*)?$")
# name=value keyword arguments inside a call
_KWARG = re.compile(rf"[(,]\s*(?P<name>[A-Za-z_]\w*)\s*=(?!=)\s*(?P<value>{_LITERAL})\s*(?=[,)])")
# --flag value / --flag=value
_FLAG = re.compile(rf"(?<![\w-])--(?P<name>[A-Za-z][\w-]*)(?:=|\s+)(?P<value>{_LITERAL})(?![\w.-])")
_FILE = re.compile(r"^\+\+\+ (?:b/)?(?P<path>\S+)")


# NAME = anything (a module constant) / name: anything (a config file): read as text
_ASSIGN_ANY = re.compile(
    r"^(?:self\.)?(?P<name>[A-Z][A-Z0-9_]*)\s*(?::\s*[\w\[\], .|]+)?=(?!=)\s*(?P<value>[^#]+?)\s*(?:#.*)?$"
)
_CONFIG_ANY = re.compile(
    r"^\s*(?P<q>\"?)(?P<name>[A-Za-z_][\w.-]*)(?P=q)\s*[:=]\s*(?P<value>[^#{\[]+?)\s*,?\s*(?:#.*)?$"
)
_CONFIG_FILES = (".json", ".yaml", ".yml", ".toml", ".cfg", ".ini")
_INDEX = re.compile(r"^index [0-9a-f]+\.\.(?P<new>[0-9a-f]+)")
_BARE = re.compile(rf"[\w.\-/+]{{1,{_MAX_VALUE}}}")
_QUOTED_OR_WORD = re.compile(r"^(?:\"|'|true$|false$|True$|False$|None$|null$)")


def _line_assignments(line: str, path: str) -> Iterable[tuple[str, str, bool]]:
    """``(name, value, literal)`` of each assignment on a patch line; ``literal`` False:
    the value is kept as text (source ``unparsed``)."""
    if len(line) > _MAX_LINE:
        return
    matched = False
    for pattern in (_ASSIGN, _COLON):
        match = pattern.match(line)
        if match is not None:
            matched = True
            yield match["name"], match["value"], True
    config = path.endswith(_CONFIG_FILES)
    if not matched:
        loose = (_CONFIG_ANY if config else _ASSIGN_ANY).match(line)
        if loose is not None and loose["value"].strip():
            matched = True
            # a config file's bare word is a string (``activation: gelu``)
            yield loose["name"], loose["value"], config and _BARE.fullmatch(loose["value"]) is not None
    if not matched and not config:
        for match in _KWARG.finditer(line):
            yield match["name"], match["value"], True
    if "--" in line:
        for match in _FLAG.finditer(line):
            yield "--" + match["name"], match["value"], True


def _readable(value: str, literal: bool) -> bool:
    """Whether a value is read as written: a literal that is text, or a number that parses
    (``2**100000`` matches the number pattern but is no number)."""
    if not literal:
        return False
    if _QUOTED_OR_WORD.match(value) is not None or parse_number(value) is not None:
        return True
    return re.fullmatch(NUMBER_PATTERN, value) is None  # a bare word of a config file


def patch_changes(patch: str) -> list[KnobChange]:
    """The assignments a unified diff changes (module doc, ``patch`` and ``unparsed``), in
    order; at most :data:`MAX_PATCH_CHARS` of it read."""
    changes: list[KnobChange] = []
    removed: dict[str, tuple[str, bool]] = {}
    added: dict[str, tuple[str, bool]] = {}
    path = ""
    blob = ""

    def close_file() -> None:
        for name, (new, new_ok) in added.items():
            before = removed.get(name)
            if before is None or same_value(before[0], new):
                continue
            old, old_ok = before
            source = "patch" if _readable(old, old_ok) and _readable(new, new_ok) else "unparsed"
            changes.append(_change(name, old, new, source))
        removed.clear()
        added.clear()

    for line in patch[:MAX_PATCH_CHARS].splitlines():
        if line.startswith(("diff --git ", "+++ ", "index ", "Binary files ", "GIT binary patch")):
            if line.startswith("diff --git "):
                close_file()
                path = line.rsplit(" b/", 1)[-1] if " b/" in line else ""
                blob = ""
            elif line.startswith("+++ "):
                if (found := _FILE.match(line)) is not None:
                    path = found["path"]
            elif line.startswith("index "):
                blob = (found.group("new") if (found := _INDEX.match(line)) else "")[:12]
            elif path and len(changes) < MAX_CHANGES:  # a binary file: no lines to read, its new blob kept
                changes.append(_change(path, None, f"binary {blob}".strip(), "unparsed"))
            continue
        if line.startswith("---") or not line or line[0] not in "+-":
            continue
        side = added if line[0] == "+" else removed
        for name, value, literal in _line_assignments(line[1:], path):
            side[name] = (value, literal)
    close_file()
    return changes


def patch_digest(patch: str) -> str | None:
    """What a patch changes, as a 32-hex-digit digest of its added and removed lines (file
    headers, hunk positions and blob ids left out): two trials with one digest made the
    same change. None for a patch that changes no line."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    digest.update(str(len(patch)).encode())  # a patch longer than what is read differs by its length
    found = False
    for line in patch[:MAX_DIGEST_CHARS].splitlines():
        if line[:1] in "+-" and not line.startswith(("+++ ", "--- ")):
            digest.update(line.encode("utf-8", "replace"))
            digest.update(b"\n")
            found = True
        elif line.startswith("diff --git "):
            digest.update(line.encode("utf-8", "replace") + b"\n")
    return digest.hexdigest() if found else None


def _change(name: str, old: str | None, new: str | None, source: str, factor: float | None = None) -> KnobChange:
    clean = name.lstrip("-")
    return KnobChange(knob_name(clean), clean[:_MAX_NAME], _clip(old), _clip(new), source, factor)


def _clip(value: str | None) -> str | None:
    return None if value is None else value.strip()[:_MAX_VALUE]


# -- config ---------------------------------------------------------------------------------


def _scalars(config: Mapping[str, Any], prefix: str = "", depth: int = 0) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and depth < 2:
            out.update(_scalars(value, f"{name}.", depth + 1))
        elif isinstance(value, bool) or value is None:
            out[name] = str(value).lower() if value is not None else "null"
        elif isinstance(value, int | float):
            if isinstance(value, float) and not math.isfinite(value):
                continue
            out[name] = repr(value)
        elif isinstance(value, str) and len(value) <= _MAX_VALUE:
            out[name] = value
        if len(out) >= MAX_CHANGES * 4:
            break
    return out


def config_changes(config: Any, parent_config: Any = None) -> list[KnobChange]:
    """``extra.config``'s scalars that differ from ``parent_config``'s (each one, as set,
    when the parent has none); nested keys are dotted (``optimizer.lr``)."""
    if not isinstance(config, Mapping):
        return []
    mine = _scalars(config)
    if not isinstance(parent_config, Mapping):
        return [_change(name, None, value, "config") for name, value in mine.items()]
    theirs = _scalars(parent_config)
    return [
        _change(name, theirs.get(name), value, "config")
        for name, value in mine.items()
        if not same_value(theirs.get(name), value)
    ]


# -- column ---------------------------------------------------------------------------------


def parent_side(extra: Any, roles: frozenset[str] = frozenset()) -> tuple[Any, dict[str, str]]:
    """What a trial's children compare with: its ``extra.config`` and its knob columns."""
    if not isinstance(extra, Mapping):
        return None, {}
    return extra.get("config"), column_values(extra, roles)


def column_changes(columns: Mapping[str, str], parent_columns: Mapping[str, str] | None) -> list[KnobChange]:
    """The knob columns whose value differs from the parent's (each one, as set, when
    there is no parent or the parent lacks it): ``lineage.knobs.columns``."""
    theirs = parent_columns or {}
    return [
        _change(name, theirs.get(name), value, "column")
        for name, value in columns.items()
        if not same_value(theirs.get(name), value)
    ]


# -- hypothesis -----------------------------------------------------------------------------

_NUMBER = NUMBER_PATTERN
_NAME_WORDS = r"(?P<name>[A-Za-z_][\w.\-]*(?:[ \t]+[A-Za-z_][\w.\-]*){0,4}?)"
_ARROW = r"(?:->|→|=>|⟶|\bto\b)"
# OLD ->|to NEW, found first (cheap), then the NAME [from|:|=] just before it
_FROM_TO = re.compile(rf"(?<![\w.])(?P<old>{_NUMBER})[ \t]*{_ARROW}[ \t]*(?P<new>{_NUMBER})", re.IGNORECASE)
_NAME_BEFORE = re.compile(
    r"(?P<name>[A-Za-z_][\w.\-]*(?:[ \t]+[A-Za-z_][\w.\-]*){0,4})[ \t]*(?:\bfrom\b|[:=])?[ \t]*$", re.IGNORECASE
)
# set NAME to NEW / NAME = NEW
_SET_TO = re.compile(rf"\bset[ \t]+{_NAME_WORDS}[ \t]+(?:to|=)[ \t]*(?P<new>{_NUMBER})", re.IGNORECASE)
_EQUALS = re.compile(rf"(?<![\w.])(?P<name>[A-Za-z_][\w.]*)[ \t]*=[ \t]*(?P<new>{_NUMBER})", re.IGNORECASE)
# double / halve / triple / quadruple [the] NAME
_FACTORS = {"double": 2.0, "doubling": 2.0, "halve": 0.5, "halving": 0.5, "triple": 3.0, "quadruple": 4.0}
_FACTOR = re.compile(
    rf"\b(?P<verb>{'|'.join(_FACTORS)})\b[ \t]+(?:the[ \t]+)?(?P<name>[A-Za-z_][\w.\-]*(?:[ \t]+[A-Za-z_][\w.\-]*){{0,3}})",
    re.IGNORECASE,
)
# lr 0.08 / TOTAL_BATCH_SIZE 2**20 / wd of 0.1: a knob's name, then its value
_NAME_VALUE = re.compile(
    rf"(?<![\w.])(?P<pre>[A-Za-z_][\w.]*[ \t]+)?(?P<name>[A-Za-z_][\w.]*\w)\b[ \t]*(?:[:=]|\bof\b|\bat\b|\bto\b)?[ \t]*(?P<new>{_NUMBER})(?![\w.])",
    re.IGNORECASE,
)
_IDENTIFIER = re.compile(r"^(?:[A-Za-z]\w*_\w+|[A-Z][A-Z0-9]+)$")
# 16 layers: a number before a known ML term
_COUNT = re.compile(
    r"(?<![\w.])(?P<new>\d+[kK]?)[ \t]+(?P<name>[A-Za-z][\w\-]*(?:[ \t]+[A-Za-z][\w\-]*)?)", re.IGNORECASE
)
_CONCEPTS = frozenset(vocabulary_table())
#: plural nouns that count a knob ("16 layers" is n_layer 16)
_COUNTED = {"layers": "n_layer", "layer": "n_layer", "heads": "n_head", "blocks": "n_layer", "experts": "n_experts"}
# words that lead into a knob's name without being part of it
_FILLER = frozenset(
    "increase increasing decrease decreasing raise raising lower lowering higher larger smaller bigger "
    "reduce reducing bump bumping change changing set setting tune tuning try trying use using switch "
    "scale scaling move moving adjust the a an with and of for to from up down our its it this that "
    "in on at by then also just now more less instead than only".split()
)


def _trim(name: str) -> str:
    """The knob's words in a phrase: leading filler dropped ("increase the"), then the
    words up to the next filler ("batch size and the lr" -> "batch size"), at most three
    (the last three: "new matrix lr")."""
    words = name.split()
    while words and words[0].casefold() in _FILLER:
        words.pop(0)
    for at, word in enumerate(words):
        if word.casefold() in _FILLER:
            del words[at:]
            break
    return " ".join(words[-3:]).strip(" .,;:-")


def hypothesis_changes(text: str) -> list[KnobChange]:
    """The knob changes a hypothesis states (module doc, ``hypothesis``), in order."""
    text = text[:4_000]
    found: list[KnobChange] = []
    spans: list[tuple[int, int]] = []

    def add(name: str, old: str | None, new: str | None, span: tuple[int, int], factor: float | None = None) -> None:
        name = _trim(name)
        if not name or any(start < span[1] and span[0] < end for start, end in spans):
            return
        spans.append(span)
        found.append(_change(name, old, new, "hypothesis", factor))

    for match in _FROM_TO.finditer(text):
        start = match.start()
        before = _NAME_BEFORE.search(text, max(0, start - 80), start)
        if before is not None:
            add(before["name"], match["old"], match["new"], (before.start(), match.end()))
    for match in _SET_TO.finditer(text):
        add(match["name"], None, match["new"], match.span())
    for match in _EQUALS.finditer(text):
        add(match["name"], None, match["new"], match.span())
    for match in _FACTOR.finditer(text):
        add(match["name"], None, None, match.span(), _FACTORS[match["verb"].casefold()])
    for match in _COUNT.finditer(text):
        first = match["name"].split()[0]
        counted = _COUNTED.get(first.casefold())
        if counted is not None:  # "16 layers", "8 heads"; not "3 ideas"
            add(counted, None, match["new"], match.span())
        elif knob_name(match["name"]).split(" ", 1)[0] in _CONCEPTS:  # "100 warmup steps"
            add(match["name"], None, match["new"], match.span())
    for match in _NAME_VALUE.finditer(text):
        # an identifier (MATRIX_LR) or a known ML term of one or two words (lr, weight
        # decay): not "to 16", "v2 3"
        for name in ((match["pre"] or "") + match["name"], match["name"]):
            name = _trim(name)
            if name and (_IDENTIFIER.match(name) or knob_name(name).split(" ", 1)[0] in _CONCEPTS):
                add(name, None, match["new"], match.span())
                break
    return found


# -- a trial --------------------------------------------------------------------------------


def extract_changes(
    hypothesis: str,
    extra: Mapping[str, Any],
    parent_config: Any = None,
    *,
    parent_columns: Mapping[str, str] | None = None,
    roles: frozenset[str] = frozenset(),
    columns: Mapping[str, str] | None = None,
) -> list[KnobChange]:
    """A trial's knob changes: one per knob, from its most trusted source (module doc).
    ``parent_config`` and ``parent_columns``: the parent's (:func:`parent_side`), None
    without one; ``roles``: the columns of the file's layout that are no knobs;
    ``columns``: the trial's knob columns when the caller has them. Never
    raises on odd input; a bounded amount of work whatever the size of ``extra``."""
    changes: list[KnobChange] = []
    git = extra.get("_git")
    patch = git.get("patch") if isinstance(git, Mapping) else None
    readers = (
        lambda: patch_changes(patch) if isinstance(patch, str) and patch else [],
        lambda: config_changes(extra.get("config"), parent_config),
        lambda: column_changes(column_values(extra, roles) if columns is None else columns, parent_columns),
        lambda: hypothesis_changes(hypothesis) if hypothesis else [],
    )
    for read in readers:
        try:
            changes += read()
        except (ValueError, TypeError, RecursionError, MemoryError, OverflowError):  # odd input: never fail a record
            continue
    kept: dict[str, KnobChange] = {}
    for change in sorted(changes, key=lambda c: _TRUST[c.source]):  # stable: each source's order kept
        if change.source == "hypothesis" and _named_already(change.knob, kept):
            continue  # "lr 0.08" beside the patch's MATRIX_LR: the patch names the knob
        if change.knob and change.knob not in kept:
            kept[change.knob] = change
        if len(kept) >= MAX_CHANGES:
            break
    return list(kept.values())


_TRUST = {source: rank for rank, source in enumerate(SOURCES)}


def _named_already(knob: str, kept: Mapping[str, KnobChange]) -> bool:
    """Whether a more trusted change names ``knob`` more fully (its words are all in that
    knob's: "bs" in "total bs")."""
    words = set(knob.split())
    return any(words < set(other.split()) for other in kept)
