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
``hypothesis``
    The hypothesis text: "increase MATRIX_LR from 0.04 to 0.06", "lr 3e-4 -> 1e-3",
    "depth 8 → 12", "double the batch size" (a factor, no values), "set wd to 0.1",
    "switch to 16 layers".

A knob's name is normalised (:func:`knob_name`): identifiers split and each ML term's
spellings made one (``lineage.similar.concepts``), so ``MATRIX_LR`` is "matrix lr" and
``learning_rate`` is "lr". A trial keeps one change per knob, from its most trusted source.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from lineage.knobs.numbers import NUMBER_PATTERN, parse_number, same_value
from lineage.similar import SPELLINGS, concepts

__all__ = [
    "MAX_PATCH_CHARS",
    "SOURCES",
    "KnobChange",
    "config_changes",
    "extract_changes",
    "hypothesis_changes",
    "knob_name",
    "patch_changes",
]

#: the sources of a change, most trusted first
SOURCES = ("patch", "config", "hypothesis")
#: how much of a patch is read: a patch of megabytes costs no more than this
MAX_PATCH_CHARS = 200_000
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


def _line_assignments(line: str, path: str) -> Iterable[tuple[str, str]]:
    if len(line) > _MAX_LINE:
        return
    matched = False
    for pattern in (_ASSIGN, _COLON):
        match = pattern.match(line)
        if match is not None:
            matched = True
            yield match["name"], match["value"]
    if not matched and not path.endswith((".json", ".yaml", ".yml", ".toml")):
        for match in _KWARG.finditer(line):
            yield match["name"], match["value"]
    if "--" in line:
        for match in _FLAG.finditer(line):
            yield "--" + match["name"], match["value"]


def patch_changes(patch: str) -> list[KnobChange]:
    """The assignments a unified diff changes (module doc, ``patch``), in order."""
    changes: list[KnobChange] = []
    removed: dict[str, str] = {}
    added: dict[str, str] = {}
    path = ""

    def close_file() -> None:
        for name, new in added.items():
            old = removed.get(name)
            if old is not None and not same_value(old, new):
                changes.append(_change(name, old, new, "patch"))
        removed.clear()
        added.clear()

    for line in patch[:MAX_PATCH_CHARS].splitlines():
        if line.startswith(("diff --git ", "+++ ")):
            if line.startswith("diff --git "):
                close_file()
            elif (found := _FILE.match(line)) is not None:
                path = found["path"]
            continue
        if line.startswith("---") or not line or line[0] not in "+-":
            continue
        side = added if line[0] == "+" else removed
        for name, value in _line_assignments(line[1:], path):
            side[name] = value
    close_file()
    return changes


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
# 16 layers: a number before a known ML term
_COUNT = re.compile(
    r"(?<![\w.])(?P<new>\d+[kK]?)[ \t]+(?P<name>[A-Za-z][\w\-]*(?:[ \t]+[A-Za-z][\w\-]*)?)", re.IGNORECASE
)
_CONCEPTS = frozenset(SPELLINGS)
#: plural nouns that count a knob ("16 layers" is n_layer 16)
_COUNTED = {"layers": "n_layer", "layer": "n_layer", "heads": "n_head", "blocks": "n_layer", "experts": "n_experts"}
# words that lead into a knob's name without being part of it
_FILLER = frozenset(
    "increase increasing decrease decreasing raise raising lower lowering higher larger smaller bigger "
    "reduce reducing bump bumping change changing set setting tune tuning try trying use using switch "
    "scale scaling move moving adjust the a an with and of for to from up down our its it this that "
    "in on at by then also just now more less".split()
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
    return found


# -- a trial --------------------------------------------------------------------------------


def extract_changes(hypothesis: str, extra: Mapping[str, Any], parent_config: Any = None) -> list[KnobChange]:
    """A trial's knob changes: one per knob, from its most trusted source (module doc).
    Never raises on odd input; a bounded amount of work whatever the size of ``extra``."""
    changes: list[KnobChange] = []
    git = extra.get("_git")
    patch = git.get("patch") if isinstance(git, Mapping) else None
    if isinstance(patch, str) and patch:
        changes += patch_changes(patch)
    changes += config_changes(extra.get("config"), parent_config)
    if hypothesis:
        changes += hypothesis_changes(hypothesis)
    kept: dict[str, KnobChange] = {}
    for change in changes:
        if change.knob and change.knob not in kept:
            kept[change.knob] = change
        if len(kept) >= MAX_CHANGES:
            break
    return list(kept.values())
