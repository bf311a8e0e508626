"""Bulk insert of validated trials (imports): :class:`BulkInsert`, part of ``Store.trials``
(:class:`~lineage.store.trials.TrialsSql` inherits it, so ``store.trials.bulk_insert`` is
where callers look).

Batches go through the driver directly: ``executemany`` through a staging table on
SQLite, ``COPY`` on PostgreSQL. Each row's search words, sketch, knob changes and repeat key are
written in the same transaction, once per import rather than once per row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import attrgetter
from typing import Any, cast

from sqlalchemy import Connection

from lineage.domain import Project, Trial
from lineage.exp_ids import exp_sort_key
from lineage.knobs import KnobChange, extract_changes
from lineage.knobs.extract import parent_side
from lineage.noise import code_keys
from lineage.similar import search_text, stored_concepts
from lineage.store.base import _BULK_COLUMNS, _STATUS_AT, TRIAL_VALUE_COLUMNS, Family, _json_text, utcnow
from lineage.store.knobs import KnobsSql, digest_of, roles_of
from lineage.store.repeats import RepeatsSql
from lineage.store.search import SearchSql, sqlite_bulk_index, vocabulary

#: Rows per executemany/COPY batch during imports.
BULK_BATCH = 5_000


class BulkInsert(Family):
    """``bulk_insert`` of ``Store.trials`` (module doc); the search, knob and repeat
    families are set by the subclass."""

    search: SearchSql
    knobs: KnobsSql
    repeats: RepeatsSql

    def bulk_insert(
        self,
        conn: Connection,
        project: Project,
        rows: Iterable[Trial],
        *,
        first_seq: int,
        link_of: Callable[[Trial], tuple[int, str]],
    ) -> int:
        """Insert ``rows`` (already validated) with consecutive seqs from ``first_seq``;
        ``link_of`` gives each row's ``(chain_depth, chain_skip)`` (``lineage.store.chain``).

        Batches go through the driver directly: ``executemany`` on SQLite, ``COPY`` on
        PostgreSQL; a list of dicts through SQLAlchemy Core is several times slower.
        """
        now = utcnow()
        stamp = now.strftime("%Y-%m-%d %H:%M:%S.%f") if self.sqlite else now
        writer = self._sqlite_batches if self.sqlite else self._copy_batches
        count = 0

        values_of = attrgetter(*TRIAL_VALUE_COLUMNS)
        texts: list[str] = []  # for the search vocabulary (lineage.store.search)
        words: set[str] = set()
        sketched: list[tuple[int, int, str]] = []  # (project_id, seq, concepts): trial_sketch
        project_id = cast(int, project.id)
        knobs: list[tuple[int, int, Sequence[KnobChange]]] = []  # knob_changes, written after the rows
        repeats: list[tuple[int, str, float | None, list[str]]] = []  # trial_repeats, likewise
        digests: list[tuple[int, int, str]] = []  # trial_patches
        roles = roles_of(project.settings)
        # the config and knob columns of this batch's rows, for their children's
        sides: dict[str, tuple[Any, dict[str, str]]] = {}
        later: list[tuple[int, Trial]] = []  # rows whose parent is stored: read after the COPY

        def tuples() -> Iterator[tuple[Any, ...]]:
            nonlocal count
            for offset, trial in enumerate(rows):
                count += 1
                values = list(values_of(trial))
                values[_STATUS_AT] = trial.status.value
                texts.append(text := search_text(trial.hypothesis, trial.notes))
                if len(texts) >= BULK_BATCH:  # their words, not the texts, are kept
                    words.update(vocabulary(texts))
                    texts.clear()
                concepts = stored_concepts(trial.hypothesis, trial.notes)
                sketched.append((project_id, first_seq + offset, concepts))
                side = sides[trial.exp_id] = parent_side(trial.extra, roles)
                parent = sides.get(trial.parent_exp) if trial.parent_exp else None
                if parent is None and trial.parent_exp and (side[0] is not None or side[1]):
                    later.append((first_seq + offset, trial))
                else:
                    config, columns = parent if parent is not None else (None, None)
                    changes = extract_changes(
                        trial.hypothesis, trial.extra, config, parent_columns=columns, roles=roles
                    )
                    if changes:
                        knobs.append((project_id, first_seq + offset, changes))
                keys = code_keys(values[_STATUS_AT], trial.extra)  # not the extra: the row leaves memory
                if keys:
                    repeats.append((first_seq + offset, values[_STATUS_AT], trial.core_metric, keys))
                if (digest := digest_of(trial.extra)) is not None:
                    digests.append((project_id, first_seq + offset, digest))
                yield (
                    project.id,
                    first_seq + offset,
                    *values,
                    _json_text(trial.extra),
                    stamp,
                    stamp,
                    text,
                    exp_sort_key(trial.exp_id),
                    concepts,
                    *link_of(trial),
                )

        writer(conn, tuples())
        words.update(vocabulary(texts))
        self.search.remember_terms(conn, words)
        self.search.write_sketches(conn, sketched)
        for seq, trial in later:
            knobs.append(
                (
                    project_id,
                    seq,
                    self.knobs.changes_of(conn, project_id, trial.hypothesis, trial.extra, trial.parent_exp, roles),
                )
            )
        self.knobs.write_rows(conn, knobs)
        self.repeats.write_rows(conn, project_id, repeats)
        self.knobs.write_patches(conn, digests)
        if not self.sqlite and count >= 10_000:
            # fresh statistics, or PostgreSQL plans the next reads as if the table were empty
            conn.exec_driver_sql("ANALYZE trials")
            conn.exec_driver_sql("ANALYZE knob_changes")
            conn.exec_driver_sql("ANALYZE trial_patches")
        return count

    def _sqlite_batches(self, conn: Connection, tuples: Iterator[tuple[Any, ...]]) -> None:
        # Rows go to a per-connection TEMP staging table first, then into trials with one
        # INSERT ... SELECT per batch, so the triggers on trials (lineage.store.search)
        # run in one statement per batch instead of one per row: with the search index's
        # insert trigger standing aside (sqlite_bulk_index), a direct executemany still
        # took 3.0 s for 100,000 rows against 1.9 s staged (bench/autoresearch.py rows).
        columns = ", ".join(_BULK_COLUMNS)
        staging = "temp.lineage_bulk_trials"
        stage = f"INSERT INTO {staging} ({columns}) VALUES ({', '.join('?' * len(_BULK_COLUMNS))})"
        # ORDER BY rowid: trials.id grows with seq (lineage.store.search relies on it)
        move = f"INSERT INTO trials ({columns}) SELECT {columns} FROM {staging} ORDER BY rowid"
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            # untyped columns: values reach trials as given, and trials' affinities apply
            cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS lineage_bulk_trials ({columns})")
            cursor.execute(f"DELETE FROM {staging}")

            def flush(batch: list[tuple[Any, ...]]) -> None:
                cursor.executemany(stage, batch)
                cursor.execute(move)
                cursor.execute(f"DELETE FROM {staging}")
                batch.clear()

            batch: list[tuple[Any, ...]] = []
            with sqlite_bulk_index(cursor):  # the FTS5 index in one statement at the end
                for row in tuples:
                    batch.append(row)
                    if len(batch) >= BULK_BATCH:
                        flush(batch)
                if batch:
                    flush(batch)
        finally:
            cursor.close()

    def _copy_batches(self, conn: Connection, tuples: Iterator[tuple[Any, ...]]) -> None:
        raw = conn.connection.driver_connection
        with raw.cursor() as cursor:  # type: ignore[union-attr]
            with cursor.copy(f"COPY trials ({', '.join(_BULK_COLUMNS)}) FROM STDIN") as copy:
                for row in tuples:
                    copy.write_row(row)
