"""Bytes -> text of a results file: the one rule every entrance uses (the CLI's import,
watch and record, the HTTP import and the upload page all read bytes through it).

A results file is UTF-8 text without NUL bytes. :func:`check_text` gives the text as
written, or one :class:`~lineage.errors.InvalidInput` naming the caller's field (``file``
for a file, ``body`` for an HTTP request body), the line and the column (1-based; the
column counts characters) of the first bad byte. :func:`check_stream` is the same rule over a
binary file, read a chunk at a time (an upload spooled to disk is never held whole).

A byte-order mark (:data:`BOM`) stays in the text, for every face alike: a format that
round-trips its file (``autoresearch``, ``generic``) keeps it in the header text, so the
export writes it back and the file comes back byte for byte; fieldkit's reader skips
it, like every sniffer (fieldkit's export is fieldkit's own bytes, which have none).
"""

from __future__ import annotations

import codecs
from typing import BinaryIO

from lineage.errors import InvalidInput

__all__ = ["BOM", "check_stream", "check_text"]

#: The UTF-8 byte-order mark as text (some editors write it before the header).
BOM = "\ufeff"


def check_text(data: bytes, *, source: str, field: str = "file") -> str:
    """``data`` as text, or one clear error naming ``field``, the line and the column:
    NUL bytes, not UTF-8."""
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InvalidInput(
            field,
            f"NUL bytes: a binary file, not a results table (in {source})",
            line=data.count(b"\n", 0, nul) + 1,
            column=_column(data, nul),
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            field,
            f"not UTF-8 text ({exc.reason} at byte {exc.start}): not a results table (in {source})",
            line=data.count(b"\n", 0, exc.start) + 1,
            column=_column(data, exc.start),
        ) from None


def _column(data: bytes, at: int) -> int:
    """The 1-based column, in characters, of byte ``at`` on its line."""
    start = data.rfind(b"\n", 0, at) + 1
    return len(data[start:at].decode("utf-8", "replace")) + 1


def check_stream(raw: BinaryIO, *, source: str, field: str = "file", chunk_size: int = 1 << 20) -> None:
    """:func:`check_text`'s rule over the seekable ``raw`` from where it stands, a chunk at a
    time, with the same error (a NUL byte anywhere first, then bad UTF-8), else None."""
    start = raw.tell()
    _find_nul(raw, source=source, field=field, chunk_size=chunk_size)
    raw.seek(start)
    line, column, offset = 1, 0, 0  # column: characters already on the current line
    pending = b""  # the start of a character a chunk cut
    while True:
        chunk = raw.read(chunk_size)
        data = pending + chunk
        try:
            text, pending = data.decode("utf-8"), b""
        except UnicodeDecodeError as exc:
            text = data[: exc.start].decode("utf-8")
            if exc.reason != "unexpected end of data" or not chunk:
                line, column = _advance(line, column, text)
                raise InvalidInput(
                    field,
                    f"not UTF-8 text ({exc.reason} at byte {offset + exc.start}): not a results table (in {source})",
                    line=line,
                    column=column + 1,
                ) from None
            pending = data[exc.start :]
        line, column = _advance(line, column, text)
        offset += len(data) - len(pending)
        if not chunk:
            return


def _find_nul(raw: BinaryIO, *, source: str, field: str, chunk_size: int) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    line, column = 1, 0
    while chunk := raw.read(chunk_size):
        nul = chunk.find(b"\x00")
        line, column = _advance(line, column, decoder.decode(chunk if nul < 0 else chunk[:nul], final=nul >= 0))
        if nul >= 0:
            raise InvalidInput(
                field, f"NUL bytes: a binary file, not a results table (in {source})", line=line, column=column + 1
            )


def _advance(line: int, column: int, text: str) -> tuple[int, int]:
    breaks = text.count("\n")
    if breaks:
        return line + breaks, len(text) - text.rfind("\n") - 1
    return line, column + len(text)
