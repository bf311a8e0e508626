"""How close two words are, for ranking "was this tried?" (``lineage.similar``).

:func:`closeness` is the rule (``docs/similarity.md`` gives it in words):
equal words 1, numbers only when equal, a prefix of 3 or more characters 0.9, else
rapidfuzz's ratio from 0.8 for words of 4 or more characters. A ranking meets ~50
words, mostly the ones the ranking before met, so it does not ask pair by pair:
:class:`Neighbours` keeps, for the process, each word met and the words close to it
(computed once a word), and :class:`QueryCloseness` scores a field against one query
from that table with set operations (its F2).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from math import fsum


def closeness(q: str, d: str) -> float:
    """The closeness of tokens ``q`` and ``d``, in [0, 1] (module doc)."""
    if q == d:
        return 1.0
    if q.isdigit() or d.isdigit():  # 300 is not 3000
        return 0.0
    short, long_ = (q, d) if len(q) <= len(d) else (d, q)
    if len(short) >= 3 and long_.startswith(short):
        return 0.9
    if len(short) >= 4:
        from rapidfuzz import fuzz  # imported by the first fuzzy comparison, not at start

        ratio = fuzz.ratio(q, d, score_cutoff=80.0)
        return ratio / 100.0
    return 0.0


class Neighbours:
    """The words met by rankings and, for each, the others close to it (:func:`closeness`
    above 0, itself left out): computed once per word for the process, not once per
    ranking (a ranking meets ~50 words, mostly met before; comparing each with the query
    was half its time).

    A word joins by being compared with every word already in (prefixes through an index
    of first 3 characters, fuzzy ratios in one rapidfuzz call over the words of 4 or more
    characters), under a lock, its own entry written last: a word found in :attr:`close`
    has every pair with the words before it, and later words add theirs to it. Entries
    are tuples, replaced, never changed in place, so readers need no lock. A full table
    is replaced by an empty one (:func:`neighbours`); a ranking keeps the table it began
    with, which stays whole."""

    #: words held before a new table is begun (a word's joining costs one comparison per word)
    LIMIT = 20_000

    def __init__(self) -> None:
        #: word -> ((close word, closeness), ...)
        self.close: dict[str, tuple[tuple[str, float], ...]] = {}
        #: words close to no other word (most of them): set aside by rankings in one difference
        self.lonely: set[str] = set()
        self._by_head: dict[str, list[str]] = {}
        self._fuzzy: list[str] = []
        self._lock = threading.Lock()

    def of(self, word: str) -> tuple[tuple[str, float], ...]:
        found = self.close.get(word)
        if found is None:
            found = self._join(word)
        return found

    def _join(self, word: str) -> tuple[tuple[str, float], ...]:
        with self._lock:
            found = self.close.get(word)
            if found is not None:  # joined by another thread meanwhile
                return found
            close: dict[str, float] = {}
            if len(word) >= 3 and not word.isdigit():  # numbers and short words match only themselves
                head = self._by_head.setdefault(word[:3], [])
                for other in head:
                    if other.startswith(word) or word.startswith(other):
                        close[other] = 0.9
                head.append(word)
                if len(word) >= 4:
                    if self._fuzzy:
                        from rapidfuzz import fuzz, process  # the first ranking imports it, not the start

                        for other, score, _ in process.extract(
                            word, self._fuzzy, scorer=fuzz.ratio, processor=None, score_cutoff=80.0, limit=None
                        ):
                            close.setdefault(other, score / 100.0)
                    self._fuzzy.append(word)
            for other, value in close.items():
                self.close[other] = (*self.close[other], (word, value))
                self.lonely.discard(other)
            if not close:
                self.lonely.add(word)
            found = self.close[word] = tuple(close.items())
            return found


_TABLE = Neighbours()


def neighbours() -> Neighbours:
    """The process's table of close words (:class:`Neighbours`), a new one once full."""
    global _TABLE
    table = _TABLE
    if len(table.close) >= Neighbours.LIMIT:
        table = _TABLE = Neighbours()
    return table


class QueryCloseness:
    """The query's side of a ranking call: which query tokens each word met is close to
    (from the process's :class:`Neighbours`), kept per call by query index, sparse
    (most words are close to one query token or none).

    A field is scored with set operations: its words equal to a query token are one
    intersection, and the words close to no query token (met before in this call, or
    close to no word at all) are set aside by one difference, so only the words close to
    a query token without being one, and the words not met before, are looked at one by
    one."""

    def __init__(self, query: Sequence[str]) -> None:
        self.query = list(dict.fromkeys(query))
        self.words = frozenset(self.query)
        #: words met, not query tokens, close to no query token
        self.far: set[str] = set()
        #: words met, not query tokens, close to some: (best closeness, ((query index, closeness), ...))
        self.near: dict[str, tuple[float, tuple[tuple[int, float], ...]]] = {}
        self.index = {word: i for i, word in enumerate(self.query)}
        #: the process's table of close words: the query's tokens join it first, so every
        #: word met after has its pairs with them
        table = self.neighbours = neighbours()
        for word in self.words.difference(table.close):
            table.of(word)
        #: query tokens close to other query tokens: those ((query index, closeness), ...)
        self.linked = {
            word: tuple(close.items()) for word in self.words.difference(table.lonely) if (close := self._others(word))
        }

    def _others(self, word: str) -> dict[int, float]:
        """:func:`closeness` of ``word`` to each query token other than itself, the
        non-zero ones (query index -> closeness)."""
        index = self.index
        return {index[other]: value for other, value in self.neighbours.of(word) if other in index}

    def f2(self, field: AbstractSet[str]) -> float:
        """F2 of the soft recall of the query in ``field`` (its distinct tokens) and the
        soft precision; closeness of two tokens: the module doc. Sums are exact-rounded
        (``math.fsum``), so the score does not depend on the order sets are walked in."""
        if not self.query or not field:
            return 0.0
        same = self.words.intersection(field)  # closeness 1: each counts 1 in both sums
        tops: list[float] = []  # the best closeness of each other word close to a query token
        best: dict[int, float] = {}  # query index -> best closeness below 1 of a word not equal to it
        near, far = self.near, self.far
        # one difference at a time: each walks the (smaller) left side, where several at
        # once would walk every set given, the process's lonely words included
        rest = field - self.words
        if rest and far:
            rest -= far
        if rest:
            rest -= self.neighbours.lonely
        for word in rest:
            found = near.get(word)
            if found is None:
                close = self._others(word)
                if not close:
                    far.add(word)
                    continue
                found = near[word] = (max(close.values()), tuple(close.items()))
            tops.append(found[0])
            for i, c in found[1]:
                if c > best.get(i, 0.0):
                    best[i] = c
        if not same and not tops:
            return 0.0
        if self.linked:
            for word in same.intersection(self.linked):
                for i, c in self.linked[word]:
                    if c > best.get(i, 0.0):
                        best[i] = c
        query = self.query
        recall = (len(same) + fsum([c for i, c in best.items() if query[i] not in same])) / len(query)
        precision = (len(same) + fsum(tops)) / len(field)
        return 5 * recall * precision / (4 * precision + recall)
