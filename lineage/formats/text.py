"""Bytes -> text of a results file: the one rule every entrance uses (the CLI's import,
watch and record read files through it; the HTTP import and the upload page are to).

A results file is UTF-8 text without NUL bytes. :func:`check_text` gives the text as
written -- a byte-order mark included (:data:`BOM`): a format that round-trips its file
keeps it in the header text, and each reader skips it itself -- or one
:class:`~lineage.errors.InvalidInput` naming the line (1-based) of the first bad byte.
"""

from __future__ import annotations

from lineage.errors import InvalidInput

__all__ = ["BOM", "check_text"]

#: The UTF-8 byte-order mark as text (some editors write it before the header).
BOM = "\ufeff"


def check_text(data: bytes, *, source: str) -> str:
    """``data`` as text, or one clear error naming the line: NUL bytes, not UTF-8."""
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise InvalidInput("file", f"NUL bytes: a binary file, not a results table (in {source})", line=line)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InvalidInput(
            "file", f"not UTF-8 text ({exc.reason} at byte {exc.start}): not a results table (in {source})", line=line
        ) from None
