"""The repairs of hand-written rows (:class:`RowRepairs`, a mixin of
:class:`~lineage.formats.autoresearch.rows.RowParser`): a line whose cell count is not the
header's is read the way its cells fit the columns best (:meth:`RowRepairs._fit`) -- a
literal ``\\t`` split on, missing cells filled empty, extra cells joined into the
description or kept as ``col<N>``, two rows glued on one line split in two -- or not at
all. The parser calls :meth:`RowRepairs._repair` only for a line that is not a plain row.
"""

from __future__ import annotations

from lineage.domain import FailureLabel, Trial
from lineage.formats.autoresearch.layout import Layout
from lineage.formats.autoresearch.vocabulary import HEX, metric_value, parse_number


class RowRepairs:
    """How :class:`~lineage.formats.autoresearch.rows.RowParser` repairs a line (which sets
    the attributes below, and reads a row with :meth:`_row`)."""

    layout: Layout
    n: int
    delimiter: str
    mi: int
    si: int
    di: int
    ci: int
    extra_specs: list[tuple[int, str, bool]]
    commit_length: int

    def _row(self, cells: list[str]) -> Trial | None:
        raise NotImplementedError  # RowParser's

    def _label(self, word: str) -> tuple[FailureLabel, bool]:
        raise NotImplementedError  # RowParser's

    def _fit(self, cells: list[str]) -> int:
        """How well cells (exactly n) fit the columns: higher is better; < 0: not a row."""
        if metric_value(cells[self.mi], None) is False:
            return -1
        score = 0
        if self.si >= 0:
            word = cells[self.si]
            if self._label(word)[1]:
                score += 3
            elif not word.strip() or parse_number(word) is not False:
                score -= 2
        for i, _, numeric in self.extra_specs:
            if numeric:
                score += 1 if parse_number(cells[i]) is not False else -1
        if self.ci >= 0:
            score += 1 if HEX.fullmatch(cells[self.ci] or "") else -1
        return score

    def _repair(self, body: str, cells: list[str]) -> list[tuple[Trial, str | None]] | None:
        n, c = self.n, len(cells)
        delim = self.delimiter
        if c != n and delim == "\t" and "\\t" in body:
            alt = body.replace("\\t", "\t").split("\t")
            if len(alt) == n:
                trial = self._row(alt)
                if trial is not None:
                    return [(trial, "literal '\\t' instead of tabs; split on it")]
            cells, c = alt, len(alt)
        if c > n and not any(cells[n:]):
            trial = self._row(cells[:n])  # trailing delimiters: nothing to repair
            if trial is not None:
                return [(trial, None)]
        if c > n:
            merged = self._merged(cells)
            if merged is not None:
                return merged
            return self._extra_cells(cells)
        if 2 <= c < n and n - c <= 2:
            best: tuple[int, list[str], list[int]] | None = None
            for positions in _insertions(c, n - c):
                candidate = list(cells)
                for p in positions:
                    candidate.insert(p, "")
                score = self._fit(candidate)
                # ties go to the latest positions (a missing trailing cell is the common case)
                if score >= 0 and (best is None or score >= best[0]):
                    best = (score, candidate, positions)
            if best is not None:
                trial = self._row(best[1])
                if trial is not None:
                    missing = ", ".join(repr(self.layout.columns[p]) for p in best[2])
                    return [(trial, f"{c} cells, the header has {n}; {missing} filled empty")]
        return None

    def _extra_cells(self, cells: list[str]) -> list[tuple[Trial, str | None]] | None:
        """A row with ``k`` cells more than the header: the extra cells are either tabs
        inside the description text (joined into it), or -- for ``k <= 2`` -- cells
        without a column (a duration inserted before the status, two unnamed cells at the
        end), kept in ``extra`` under ``col<N>`` (``N``: the cell's 1-based place on the
        line) and written back as they were. The reading whose cells fit the columns best
        wins (:meth:`_fit`); cells without a column need a known status word under the
        status column (or, in a file without one, sit at the end of the line); ties go to
        the description, then to the latest places."""
        n, c, di, si = self.n, len(cells), self.di, self.si
        k = c - n
        best: tuple[int, int, list[str], list[int]] | None = None  # (fit, preference, cells, places)
        if di >= 0:
            joined = cells[:di] + [self.delimiter.join(cells[di : di + k + 1])] + cells[di + k + 1 :]
            score = self._fit(joined)
            if score >= 0:
                best = (score, 2, joined, [])
        if k <= 2:
            for places in _insertions(n, k):
                if si < 0 and places != list(range(n, c)):
                    continue
                kept = [cell for i, cell in enumerate(cells) if i not in places]
                if si >= 0 and not self._label(kept[si])[1]:
                    continue
                score = self._fit(kept)
                if score >= 0 and (best is None or (score, 1) > best[:2] or (score, 1) == best[:2]):
                    best = (score, 1, kept, places)
        if best is None:
            return None
        _score, _preference, fitted, places = best
        trial = self._row(fitted)
        if trial is None:
            return None
        if not places:
            return [
                (
                    trial,
                    f"{c} cells, the header has {n}; joined cells {di + 1}-{di + k + 1} "
                    f"into {self.layout.description!r} (a tab inside the text?)",
                )
            ]
        names = []
        for place in places:
            key = f"col{place + 1}"
            while key in self.layout.columns or key in trial.extra:
                key += "_"
            trial.extra[key] = cells[place]  # type: ignore[index]
            names.append(key)
        which = f"cells {', '.join(str(p + 1) for p in places)} have" if k > 1 else f"cell {places[0] + 1} has"
        return [(trial, f"{c} cells, the header has {n}; {which} no column: kept as {', '.join(names)}")]

    def _merged(self, cells: list[str]) -> list[tuple[Trial, str | None]] | None:
        n, c = self.n, len(cells)
        halves: tuple[list[str], list[str]] | None = None
        if c == 2 * n:
            halves = (cells[:n], cells[n:])
        elif c == 2 * n - 1 and self.ci == 0:
            glued = cells[n - 1]
            length = self.commit_length
            tail = glued[-length:] if len(glued) > length else ""
            if tail and HEX.fullmatch(tail):
                halves = (cells[: n - 1] + [glued[:-length]], [tail] + cells[n:])
        if halves is None:
            return None
        first, second = halves
        if self._fit(first) < 0 or self._fit(second) < 0:
            return None
        if self.si >= 0 and not (self._label(first[self.si])[1] and self._label(second[self.si])[1]):
            return None
        a, b = self._row(first), self._row(second)
        if a is None or b is None:
            return None
        return [(a, f"two rows on one line ({c} cells, the header has {n}); split into two trials"), (b, None)]


def _insertions(c: int, k: int) -> list[list[int]]:
    """Positions (ascending, in the final row) where ``k`` empty cells can go among ``c``."""
    if k == 1:
        return [[p] for p in range(c + 1)]
    return [[p, q] for p in range(c + 2) for q in range(p + 1, c + 2)]
