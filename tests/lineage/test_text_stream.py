"""``check_stream`` (a spooled upload, read a chunk at a time) gives exactly
``check_text``'s answer, whatever the chunk size cuts."""

from __future__ import annotations

import io
import random

from lineage.errors import InvalidInput
from lineage.formats.text import check_stream, check_text

_PIECES = (b"a", b"\t", b"\n", b"\r\n", "é".encode(), "€".encode(), "😀".encode(), b"\x00", b"\xff", b"\xe2\x82")


def _answer(check, data: bytes) -> str | None:  # type: ignore[no-untyped-def]
    try:
        check(data)
    except InvalidInput as refused:
        return str(refused)
    return None


def test_the_stream_check_agrees_with_the_text_check() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        data = b"".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 40)))
        expected = _answer(lambda d: check_text(d, source="s"), data)
        for size in (1, 2, 3, 5, 64):
            got = _answer(lambda d, size=size: check_stream(io.BytesIO(d), source="s", chunk_size=size), data)
            assert got == expected, (data, size)
