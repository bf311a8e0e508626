"""Results-file formats: a small registry, so importers and exporters pick one by name.

A format is four things (:class:`Format`): a ``name``, ``sniff(first_line) -> bool``
(does this header line look like mine?), ``read(stream, *, source=...)`` yielding
:class:`~lineage.domain.Trial` one at a time (a generator: the store consumes it inside
one transaction, so a bad row imports nothing) and ``write(trials, stream, **options)
-> int`` (rows written; ``None`` for an import-only format).

Registered here, in this order: ``fieldkit`` (:mod:`lineage.formats.fieldkit`), then
``autoresearch`` and ``generic`` (:mod:`lineage.formats.autoresearch`: results tables whose
columns are inferred per file; importing those needs the project, so the ledger's one
import entrance, ``lineage.loops.importing.Files.import_file``, handles them). :func:`detect_format` tries the
registered ``sniff`` functions in registration order, so the most specific come first;
:func:`sniff_text` is ``--format auto``, the one rule every face uses: the first
non-blank line decides, and a file no format claims is read as ``autoresearch`` (whose
error names the line).

Streams are text, UTF-8, opened with ``newline=""`` (see
:func:`lineage.formats.fieldkit.open_results`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from lineage.domain import Trial
from lineage.errors import InvalidInput
from lineage.formats import fieldkit as _fieldkit

__all__ = ["AUTO", "FORMATS", "Format", "detect_format", "format_names", "get_format", "register", "sniff_text"]

#: The format name that asks for :func:`sniff_text`.
AUTO = "auto"

Reader = Callable[..., Iterator[Trial]]
Writer = Callable[..., int]


@dataclass(frozen=True, slots=True)
class Format:
    """One results-file format. ``read``/``write`` take the stream; see the module doc."""

    name: str
    description: str
    sniff: Callable[[str], bool]
    read: Reader
    write: Writer | None = None
    extensions: tuple[str, ...] = ()

    def read_trials(
        self, stream: TextIO | Iterable[str], *, source: str = "<stream>", **options: Any
    ) -> Iterator[Trial]:
        return self.read(stream, source=source, **options)

    def write_trials(self, trials: Iterable[Trial], stream: TextIO, **options: Any) -> int:
        if self.write is None:
            raise InvalidInput("format", f"format {self.name!r} can be imported but not exported")
        return self.write(trials, stream, **options)


#: Every known format by name, in registration order (the order :func:`detect_format` tries).
FORMATS: dict[str, Format] = {}


def register(fmt: Format, *, replace: bool = False) -> Format:
    """Add ``fmt`` to :data:`FORMATS`; a second format of the same name needs ``replace=True``."""
    if fmt.name in FORMATS and not replace:
        raise ValueError(f"format {fmt.name!r} is already registered")
    FORMATS[fmt.name] = fmt
    return fmt


def format_names() -> tuple[str, ...]:
    return tuple(FORMATS)


def get_format(name: str) -> Format:
    """The format called ``name``; :class:`InvalidInput` (field ``format``) if there is none."""
    try:
        return FORMATS[name]
    except KeyError:
        known = ", ".join(FORMATS) or "none"
        raise InvalidInput("format", f"unknown format {name!r}; known: {known}") from None


def detect_format(first_line: str) -> Format | None:
    """The first registered format whose ``sniff`` accepts ``first_line``, else ``None``."""
    for fmt in FORMATS.values():
        if fmt.sniff(first_line):
            return fmt
    return None


register(
    Format(
        name=_fieldkit.NAME,
        description=_fieldkit.DESCRIPTION,
        sniff=_fieldkit.sniff,
        read=_fieldkit.read_trials,
        write=_fieldkit.write_trials,
        extensions=_fieldkit.EXTENSIONS,
    )
)


# -- results tables of autoresearch-style loops (tried after fieldkit) ----------------------

from lineage.formats import autoresearch as _autoresearch  # noqa: E402

register(
    Format(
        name=_autoresearch.NAME,
        description=_autoresearch.DESCRIPTION,
        sniff=_autoresearch.sniff,
        read=_autoresearch.read_trials,
        write=_autoresearch.write_trials,
        extensions=(".tsv",),
    )
)
register(
    Format(
        name=_autoresearch.GENERIC,
        description=_autoresearch.GENERIC_DESCRIPTION,
        sniff=_autoresearch.sniff_generic,
        read=_autoresearch.read_generic,
        write=_autoresearch.write_trials,
        extensions=(".tsv", ".csv"),
    )
)


def sniff_text(text: str) -> str:
    """The format ``--format auto`` reads ``text`` as: the first registered format whose
    ``sniff`` accepts the first non-blank line (a byte-order mark skipped); a file that
    no format claims -- or that has no line -- is ``autoresearch``'s, whose error names
    the line."""
    from lineage.formats.text import BOM

    start = 0
    while True:
        end = text.find("\n", start)
        line = (text[start:] if end < 0 else text[start:end]).lstrip(BOM)
        if line.strip():
            found = detect_format(line)
            return found.name if found is not None else _autoresearch.NAME
        if end < 0:
            return _autoresearch.NAME
        start = end + 1
