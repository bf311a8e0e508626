"""The SQL of trial text search, for SQLite (FTS5) and PostgreSQL (GIN full-text index):
:class:`SearchSql`, ``Store.search`` of :class:`lineage.store.Store`.

The schema objects (created by migration 0003, which holds their DDL and why it has that
shape; skipped by autogenerate through :func:`is_search_object`) and the candidate query
differ per backend. The store writes ``trials.search_text``
(``lineage.similar.search_text``); the index follows by trigger (SQLite) or by index
maintenance (PostgreSQL), in the writer's transaction. The store also adds the text's
words of 3 or more characters to the vocabulary table ``trial_search_terms``
(:meth:`SearchSql.remember_terms`, same transaction; never pruned, so it is a superset of
the indexed words).

Prefix terms (``norm`` finds ``normalization``) are looked up in that vocabulary first and
searched as the OR of the words they expand to (at most :data:`MAX_EXPANSION`; more, and
the prefix form is kept). Both forms match exactly the same trials, but the databases
serve exact words lazily in index order (FTS5 stops after ``LIMIT`` rows; GIN skips
through posting trees), while a prefix term makes both read and merge every posting of
every word under it: 5-10x slower on a 100,000-trial project.

Candidates are chosen by term membership and ``seq`` order alone (see
``lineage.similar``), never by a backend's own relevance score, so SQLite and PostgreSQL
return the same set for the same data. Within a project, ``trials.id`` grows with
``seq`` (trials are only ever appended, under the project's write lock), so SQLite walks
the FTS index in rowid order (rowid ``-trials.id``) and PostgreSQL the ``(project_id, seq)`` index, and both
stop after ``limit`` rows.

Methods: ``candidate_rows`` (with ``_expansions`` and ``_tier``), ``remember_terms``,
``trials_deleted``. Functions: :func:`vocabulary`, :func:`sqlite_bulk_index`,
:func:`is_search_object`, :func:`include_object` (Alembic's hook).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from lineage.store.base import Family

#: Schema objects of the search index: not in ``lineage.models`` (see :func:`is_search_object`).
#: SQLite: the contentless FTS5 table ``trial_search`` whose rowid is ``-trials.id``, so
#: that newest first is FTS5's ascending order. PostgreSQL: the stored generated column
#: ``trials.search_vector`` and the GIN index ``ix_trials_search`` on it.
SEARCH_TABLE = "trial_search"
POSTGRES_SEARCH_INDEX = "ix_trials_search"
#: SQLite: a row here for the length of a bulk import (:func:`sqlite_bulk_index`).
BULK_FLAG_TABLE = f"{SEARCH_TABLE}_bulk"
POSTGRES_VECTOR_COLUMN = "search_vector"
#: Every word of 3 or more characters ever written to ``trials.search_text``. Binary
#: ("C") order on both backends, so a prefix's words are one key range.
TERMS_TABLE = "trial_search_terms"
#: A prefix term with more words than this under it is searched as a prefix.
MAX_EXPANSION = 16
#: Shortest word kept in the vocabulary (shorter query terms are exact terms).
MIN_PREFIX_CHARS = 3
_ABOVE_EVERY_CHAR = "\U0010ffff"  # a noncharacter: never part of a token


def is_search_object(name: str | None, type_: str) -> bool:
    """Whether a reflected schema object belongs to the search index (FTS5 table and its
    shadow tables, the GIN index): Alembic's autogenerate leaves these alone."""
    if not name:
        return False
    if type_ == "table":
        return name == SEARCH_TABLE or name.startswith(f"{SEARCH_TABLE}_")
    if type_ == "index":
        return name == POSTGRES_SEARCH_INDEX or name.startswith(f"{TERMS_TABLE}_")
    if type_ == "column":
        return name == POSTGRES_VECTOR_COLUMN
    return False


def include_object(object_: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic's ``include_object`` hook: everything but the search index's objects."""
    return not (reflected and compare_to is None and is_search_object(name, type_))


#: ``(seq, exp_id, status, core_metric, delta_vs_best, hypothesis, notes, search_concepts)``
CandidateRow = tuple[int, str, str, "float | None", "float | None", str, str, "str | None"]
_COLUMNS = "t.seq, t.exp_id, t.status, t.core_metric, t.delta_vs_best, t.hypothesis, t.notes, t.search_concepts"
SKETCH_TABLE = "trial_sketch"


@contextmanager
def sqlite_bulk_index(cursor: Any) -> Iterator[None]:
    """Around a SQLite bulk insert into ``trials`` (a driver cursor in the import's
    transaction): the rows inserted meanwhile are indexed at the end, in one statement.

    While the row in ``trial_search_bulk`` is there, the insert trigger stands aside, and
    the rows are indexed with one INSERT ... SELECT in ascending FTS rowid order. Through
    the trigger they would come in descending order, and FTS5 flushes its pending terms
    to a new segment whenever the rowid goes down (3x the whole import)."""
    last_id = cursor.execute("SELECT coalesce(max(id), 0) FROM trials").fetchone()[0]
    cursor.execute(f"INSERT INTO {BULK_FLAG_TABLE} (importing) VALUES (1)")
    yield
    cursor.execute(
        f"INSERT INTO {SEARCH_TABLE}(rowid, search_text) "
        "SELECT -id, search_text FROM trials WHERE id > ? ORDER BY id DESC",
        (last_id,),
    )
    cursor.execute(f"DELETE FROM {BULK_FLAG_TABLE}")


#: Deleting a project with at least this many trials compacts the SQLite index.
COMPACT_AFTER_DELETING = 1_000


def vocabulary(search_texts: Iterable[str]) -> set[str]:
    """The words of ``trials.search_text`` values that go to the vocabulary table."""
    return {word for text in search_texts for word in text.split() if len(word) >= MIN_PREFIX_CHARS}


@dataclass(frozen=True, slots=True)
class _Syntax:
    """How a backend's full-text query language writes a word, a prefix, a phrase, OR and AND."""

    word: str  # a format with {term}
    prefix: str
    or_: str
    and_: str
    follows: str  # between the words of a phrase (FTS5: inside one quoted string)


_FTS5 = _Syntax(word='"{term}"', prefix='"{term}"*', or_=" OR ", and_=" AND ", follows=" ")
_TSQUERY = _Syntax(word="'{term}'", prefix="'{term}':*", or_=" | ", and_=" & ", follows="' <-> '")


def _phrase(syntax: _Syntax, words: Sequence[str]) -> str:
    return syntax.word.format(term=syntax.follows.join(words))


def _match(syntax: _Syntax, terms: Sequence[Any], every: bool, expanded: dict[str, list[str]]) -> str:
    """The query text: the terms joined by AND (``every``) or OR; a term of ``expanded``
    as the OR of its words, or as a prefix when they are more than MAX_EXPANSION; a
    concept's spellings (a tuple, ``lineage.similar.query_terms``) as the OR of their
    phrases, its one-word spellings as prefix terms like any word. Terms are runs of
    letters and digits (lineage.similar.tokens): quoting is enough."""

    def word(term: str) -> str:
        words = expanded.get(term)
        if words is None:
            return syntax.word.format(term=term)
        if len(words) > MAX_EXPANSION:
            return syntax.prefix.format(term=term)
        # no word under it: the prefix matches nothing, and neither does the term
        return "(" + syntax.or_.join(syntax.word.format(term=found) for found in words or [term]) + ")"

    parts = []
    for term in terms:
        if isinstance(term, str):
            parts.append(word(term))
        else:  # a concept: its one-word spellings as prefix terms, the others as phrases
            parts.append(
                "("
                + syntax.or_.join(word(words[0]) if len(words) == 1 else _phrase(syntax, words) for words in term)
                + ")"
            )
    return (syntax.and_ if every else syntax.or_).join(parts)


class SearchSql(Family):
    """Trial text search: candidates, the vocabulary, compaction after deletes."""

    def trials_deleted(self, conn: Connection, count: int) -> None:
        """After ``count`` trials were deleted at once (a project), in the same transaction:
        on SQLite, merge the index into one segment when ``count`` is large. FTS5 keeps a
        deleted row's postings, and a delete marker for each, until segments merge, and every
        search reads through them: after deleting 100,000 trials, recording in a small project
        with ``similar_prior`` is 20x slower until then (``optimize``: 0.1-0.5 s)."""
        if self.sqlite and count >= COMPACT_AFTER_DELETING:
            self.core.execute(conn, f"INSERT INTO {SEARCH_TABLE}({SEARCH_TABLE}) VALUES ('optimize')")

    def remember_terms(self, conn: Connection, words: Iterable[str]) -> None:
        """Add ``words`` (from :func:`vocabulary`) to the vocabulary table, in the writer's
        transaction; words already there are left alone."""
        listed = sorted(words)
        if not listed:
            return
        if self.sqlite:
            self.core.execute(
                conn, f"INSERT OR IGNORE INTO {TERMS_TABLE}(term) SELECT value FROM json_each(?)", (json.dumps(listed),)
            )
        else:
            self.core.execute(
                conn, f"INSERT INTO {TERMS_TABLE}(term) SELECT unnest(?::text[]) ON CONFLICT DO NOTHING", (listed,)
            )

    def write_sketches(self, conn: Connection, rows: Sequence[tuple[int, int, str]]) -> None:
        """The ``trial_sketch`` rows of trials ``(project_id, seq, search_concepts)``, in
        the writer's transaction (``lineage.similar.sketch`` of each trial's concepts)."""
        from lineage.similar import sketch, split_concepts

        values: list[tuple[int, int, int]] = []
        for project_id, seq, concepts in rows:
            split = split_concepts(concepts)
            if split is not None:
                values.extend((project_id, key, seq) for key in sketch(split[0] + split[1]))
        self.write_sketch_rows(conn, values)

    def write_sketch_rows(self, conn: Connection, values: Sequence[tuple[int, int, int]]) -> None:
        """``trial_sketch`` rows ``(project_id, band key, seq)`` (:meth:`write_sketches`)."""
        if not values:
            return
        if not self.sqlite and len(values) > 16:  # one statement of three arrays, whatever the count
            project_ids, bands, seqs = zip(*values)
            self.core.execute(
                conn,
                f"INSERT INTO {SKETCH_TABLE} (project_id, band, seq) SELECT * FROM "
                "unnest(?::integer[], ?::bigint[], ?::bigint[]) ON CONFLICT DO NOTHING",
                (list(project_ids), list(bands), list(seqs)),
            )
            return
        if len(values) <= 16:  # one statement (its text is prepared per row count)
            sql = (
                f"INSERT INTO {SKETCH_TABLE} (project_id, band, seq) VALUES "
                + ", ".join(["(?, ?, ?)"] * len(values))
                + " ON CONFLICT DO NOTHING"
            )
            self.core.execute(conn, sql, [v for row in values for v in row])
            return
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.executemany(
                self.core.sql(
                    f"INSERT INTO {SKETCH_TABLE} (project_id, band, seq) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
                ),
                values,
            )
        finally:
            cursor.close()

    def backfill_concepts(self, conn: Connection, *, batch: int = 5_000) -> int:
        """Fill ``trials.search_concepts`` and ``trial_sketch`` of the trials stored before
        they existed (NULL concepts), in the caller's transaction; how many."""
        from lineage.similar import stored_concepts

        done = 0
        last = 0
        while True:
            rows = self.core.execute(
                conn,
                "SELECT id, project_id, seq, hypothesis, notes FROM trials "
                f"WHERE id > ? AND search_concepts IS NULL ORDER BY id LIMIT {batch}",
                (last,),
            ).fetchall()
            if not rows:
                return done
            filled = [(row[0], row[1], row[2], stored_concepts(row[3], row[4])) for row in rows]
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.executemany(
                    self.core.sql("UPDATE trials SET search_concepts = ? WHERE id = ?"),
                    [(concepts, id_) for id_, _, _, concepts in filled],
                )
            finally:
                cursor.close()
            self.write_sketches(conn, [(project_id, seq, concepts) for _, project_id, seq, concepts in filled])
            done += len(rows)
            last = rows[-1][0]

    def refresh_concepts(self, conn: Connection) -> int:
        """Every trial's ``search_concepts`` and ``trial_sketch`` again, under today's
        spelling and concept tables (a migration that changes what a concept is); how many."""
        self.core.execute(conn, "UPDATE trials SET search_concepts = NULL", ())
        self.core.execute(conn, "DELETE FROM trial_sketch", ())
        return self.backfill_concepts(conn)

    def prior_rows(
        self, conn: Connection, project_id: int, keys: Sequence[int], *, recent: int, per_band: int
    ) -> list[CandidateRow]:
        """``similar_prior``'s shortlist: the newest ``recent`` trials of the project and,
        for each sketch key in ``keys``, the newest ``per_band`` trials holding it; newest
        first, each once. Every part is a bounded walk of a primary key or unique index,
        so the cost does not grow with the project."""
        return self.fetch_prior(self.prior_cursor(conn, project_id, keys, recent=recent, per_band=per_band))

    @staticmethod
    def fetch_prior(cursor: Any) -> list[CandidateRow]:
        return [tuple(row) for row in cursor.fetchall()]

    def prior_cursor(
        self, conn: Connection, project_id: int, keys: Sequence[int], *, recent: int, per_band: int
    ) -> Any:
        """:meth:`prior_rows`' statement, sent; its rows not read yet (:meth:`fetch_prior`)."""
        if self.sqlite:
            parts = [f"SELECT seq FROM (SELECT seq FROM trials WHERE project_id = ? ORDER BY seq DESC LIMIT {recent})"]
            parts += [
                f"SELECT seq FROM (SELECT seq FROM {SKETCH_TABLE} WHERE project_id = ? AND band = ? "
                f"ORDER BY seq DESC LIMIT {per_band})"
            ] * len(keys)
            params: list[Any] = [project_id, project_id]
            for key in keys:
                params += [project_id, key]
            inner = " UNION ".join(parts)
        else:  # one statement text whatever the number of keys: psycopg prepares it
            inner = (
                f"SELECT seq FROM (SELECT seq FROM trials WHERE project_id = ? ORDER BY seq DESC LIMIT {recent}) r "
                f"UNION SELECT s.seq FROM unnest(?::bigint[]) AS k(band), LATERAL (SELECT seq FROM {SKETCH_TABLE} "
                f"WHERE project_id = ? AND band = k.band ORDER BY seq DESC LIMIT {per_band}) s"
            )
            params = [project_id, project_id, list(keys), project_id]
        sql = f"SELECT {_COLUMNS} FROM trials t WHERE t.project_id = ? AND t.seq IN ({inner}) ORDER BY t.seq DESC"
        return self.core.execute(conn, sql, params)

    def bands_cursor(
        self, conn: Connection, project_id: int, keys: Sequence[int], *, recent: int, per_band: int
    ) -> Any:
        """:meth:`prior_cursor`'s parts kept apart, for several shortlists at once (a group
        of records on PostgreSQL, ``lineage.service.group_reads``; SQLite's items read
        their own): the newest ``recent`` trials (band NULL) and, for each sketch key in
        ``keys``, the newest ``per_band`` trials holding it (band: the key), as rows
        ``(band, *candidate row)``; a trial once per part it is in. One statement text
        whatever the number of keys, so psycopg prepares it. Read by :meth:`fetch_bands`."""
        inner = (
            f"SELECT NULL::bigint AS band, seq FROM (SELECT seq FROM trials WHERE project_id = ? "
            f"ORDER BY seq DESC LIMIT {recent}) r "
            f"UNION ALL SELECT k.band, s.seq FROM unnest(?::bigint[]) AS k(band), LATERAL (SELECT seq "
            f"FROM {SKETCH_TABLE} WHERE project_id = ? AND band = k.band ORDER BY seq DESC LIMIT {per_band}) s"
        )
        sql = f"SELECT p.band, {_COLUMNS} FROM ({inner}) p JOIN trials t ON t.project_id = ? AND t.seq = p.seq"
        return self.core.execute(conn, sql, [project_id, list(keys), project_id, project_id])

    @staticmethod
    def fetch_bands(cursor: Any) -> tuple[list[CandidateRow], dict[int, list[CandidateRow]]]:
        """``(newest trials, {key: newest trials holding it})`` of :meth:`bands_cursor`, each newest first."""
        recent: list[CandidateRow] = []
        by_band: dict[int, list[CandidateRow]] = {}
        for band, *row in cursor.fetchall():
            (recent if band is None else by_band.setdefault(band, [])).append(tuple(row))
        recent.sort(key=lambda row: -row[0])
        for rows in by_band.values():
            rows.sort(key=lambda row: -row[0])
        return recent, by_band

    def _expansions(self, conn: Connection, terms: Sequence[Any]) -> dict[str, list[str]]:
        """For each prefix term, the vocabulary's words under it (at most MAX_EXPANSION + 1)."""
        singles = [term if isinstance(term, str) else None for term in terms]
        singles += [words[0] for term in terms if not isinstance(term, str) for words in term if len(words) == 1]
        prefixes = list(dict.fromkeys(t for t in singles if t is not None and len(t) >= MIN_PREFIX_CHARS))
        if not prefixes:
            return {}
        if self.sqlite:
            one = f"SELECT term FROM {TERMS_TABLE} WHERE term >= ? AND term < ? ORDER BY term LIMIT {MAX_EXPANSION + 1}"
            sql = " UNION ALL ".join(f"SELECT * FROM ({one})" for _ in prefixes)
            params: list[Any] = [value for prefix in prefixes for value in (prefix, prefix + _ABOVE_EVERY_CHAR)]
        else:  # one statement text whatever the number of terms: psycopg prepares it
            sql = (
                f"SELECT w.term FROM unnest(?::text[]) AS p(prefix), LATERAL (SELECT term FROM {TERMS_TABLE} "
                f"WHERE term >= p.prefix AND term < p.prefix || chr(1114111) ORDER BY term LIMIT {MAX_EXPANSION + 1}) w"
            )
            params = [prefixes]
        words = [row[0] for row in self.core.execute(conn, sql, params).fetchall()]
        return {prefix: [word for word in words if word.startswith(prefix)] for prefix in prefixes}

    def _tier(
        self,
        conn: Connection,
        project_id: int,
        terms: Sequence[Any],
        expanded: dict[str, list[str]],
        *,
        every: bool,
        before_seq: int | None,
        limit: int,
    ) -> list[CandidateRow]:
        if self.sqlite:
            sql = (
                f"SELECT {_COLUMNS} FROM {SEARCH_TABLE} s JOIN trials t ON t.id = -s.rowid "
                f"WHERE {SEARCH_TABLE} MATCH ? AND t.project_id = ?"
            )
            params: list[Any] = [_match(_FTS5, terms, every, expanded), project_id]
            order = "s.rowid"  # -trials.id: newest first
        else:
            sql = (
                f"SELECT {_COLUMNS} FROM trials t WHERE t.project_id = ? "
                f"AND t.{POSTGRES_VECTOR_COLUMN} @@ to_tsquery('simple'::regconfig, ?)"
            )
            params = [project_id, _match(_TSQUERY, terms, every, expanded)]
            order = "t.seq DESC"
        if before_seq is not None:
            sql += " AND t.seq < ?"
            params.append(before_seq)
        cursor = self.core.execute(conn, f"{sql} ORDER BY {order} LIMIT ?", (*params, limit))
        return [tuple(row) for row in cursor.fetchall()]

    def candidate_rows(
        self,
        conn: Connection,
        project_id: int,
        terms: Sequence[Any],
        *,
        limit: int,
        before_seq: int | None = None,
    ) -> list[CandidateRow]:
        """At most ``limit`` trials of the project holding the query ``terms`` (words, or a
        concept's spellings: ``lineage.similar.query_terms``): first those holding every
        term, newest first, then (while fewer than ``limit``) those holding any term that
        is not all digits (every term, when all are), newest first.

        ``before_seq``: only trials recorded before that seq.
        """
        if not terms:
            return []
        expanded = self._expansions(conn, terms)
        found = self._tier(conn, project_id, terms, expanded, every=True, before_seq=before_seq, limit=limit)
        if len(found) >= limit or len(terms) == 1:
            return found
        wide = [term for term in terms if not isinstance(term, str) or not term.isdigit()] or list(terms)
        seen = {row[0] for row in found}
        for row in self._tier(conn, project_id, wide, expanded, every=False, before_seq=before_seq, limit=limit):
            if row[0] not in seen and len(found) < limit:
                seen.add(row[0])
                found.append(row)
        return found
