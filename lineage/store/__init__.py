"""All SQL of the ledger, in one place, for SQLite and PostgreSQL.

The store reads and writes rows and knows how to do it fast (indexed look-ups, bulk
inserts through ``executemany`` on SQLite and ``COPY`` on PostgreSQL). It does not decide
rules: which trial is best, what a delta is and what may be written are ``lineage.domain``
and ``lineage.service``. Every method takes the connection of a transaction opened with
:meth:`Store.read` or :meth:`Store.write`, so a use-case composes several calls atomically.

A :class:`Store` is the shared core (:class:`~lineage.store.base.StoreCore`: engine,
transactions, driver-level SQL, row mappers, the trial filters' WHERE clause) and one object
per table family over it, each an attribute; each module's docstring lists its methods:

* ``store.projects`` (``projects.ProjectsSql``): project rows, counters, revision, delete,
  SQLite online backup;
* ``store.trials`` (``trials.TrialsSql``): trial rows, best_scored, chain_rows, top_kept,
  recent, stream, bulk insert;
* ``store.pages`` (``pages.PagesSql``): the web pages' bounded reads: counts, bins, windows,
  keyset pages;
* ``store.loops`` (``loops.LoopsSql``): results-file loops: next number, branch tip, delta
  refresh, plot rows;
* ``store.tokens`` (``tokens.TokensSql``): API tokens, settings and idempotency keys;
* ``store.telemetry`` (``telemetry.TelemetrySql``): telemetry points: insert, series,
  buckets, aggregates;
* ``store.explore`` (``explore.ExploreSql``): the metric explorer's reads;
* ``store.search`` (``search.SearchSql``): trial text search: candidates, vocabulary, index
  compaction;
* ``store.outbox`` (``outbox.OutboxSql``): webhooks and their delivery outbox;
* ``store.progress`` (``progress.ProgressSql``): the progress summary's reads and the
  guardrail policies;
* ``store.alerts`` (``alerts.AlertsSql``): alerts of trials;
* ``store.columns`` (``columns.ColumnsSql``): which columns a project has, one column per
  trial (the knob view);
* ``store.chain`` (``chain.ChainSql``): each trial's stored chain depth and skip pointer:
  kept on write, read by the pages;
* ``store.knobs`` (``knobs.KnobsSql``): the knobs each trial changed: written with the
  trial, read as a knob's history;
* ``store.repeats`` (``repeats.RepeatsSql``): which trials ran the same code: written with
  the trial, read as the project's noise floor (``lineage.noise``);
* ``store.notes`` (``notes.NotesSql``): the project's notebook, and the trials a note
  cites or that may contradict it.

The store itself keeps what the core offers its callers: ``engine``, ``sqlite``,
:meth:`read` and :meth:`write` (transactions), ``savepoint`` / ``rollback_to`` /
``release``, ``peek``, ``db_time``, ``lean_columns``; the rest of the core is ``store.core``.
Families that use another one get it in their constructor (``trials`` uses ``chain``,
``search``, ``progress`` and ``knobs``; ``pages`` and ``explore`` use ``trials``; ``loops`` uses
``projects``; ``projects`` uses ``search``).
"""

from __future__ import annotations

from sqlalchemy import Engine

from lineage.store.alerts import AlertsSql
from lineage.store.base import (
    TRIAL_COLUMNS,
    TRIAL_VALUE_COLUMNS,
    StoreCore,
    trial_from_row,
    utcnow,
)
from lineage.store.bulk import BULK_BATCH
from lineage.store.chain import ChainSql
from lineage.store.columns import ColumnsSql
from lineage.store.explore import ExploreSql
from lineage.store.knobs import KnobsSql
from lineage.store.leases import LeasesSql
from lineage.store.loops import LoopsSql
from lineage.store.notes import NotesSql
from lineage.store.outbox import OutboxSql
from lineage.store.pages import PagesSql
from lineage.store.progress import ProgressSql
from lineage.store.projects import ProjectsSql
from lineage.store.repeats import RepeatsSql
from lineage.store.search import SearchSql
from lineage.store.telemetry import TelemetrySql
from lineage.store.tokens import TokensSql
from lineage.store.trials import TrialsSql

__all__ = ["BULK_BATCH", "TRIAL_COLUMNS", "TRIAL_VALUE_COLUMNS", "Store", "StoreCore", "trial_from_row", "utcnow"]


class Store:
    """SQL access for one database (one engine): the shared core and its table families."""

    def __init__(self, engine: Engine) -> None:
        core = StoreCore(engine)
        self.core = core
        self.engine = core.engine
        self.sqlite = core.sqlite
        # the core's entry points, bound once: a call costs what it cost on the core
        self.read = core.read
        self.write = core.write
        self.savepoint = core.savepoint
        self.rollback_to = core.rollback_to
        self.release = core.release
        self.peek = core.peek
        self.db_time = core.db_time
        self.lean_columns = core.lean_columns
        # the families, those used by others first
        self.search = SearchSql(core)
        self.chain = ChainSql(core)
        self.progress = ProgressSql(core)
        self.projects = ProjectsSql(core, search=self.search)
        self.knobs = KnobsSql(core)
        self.repeats = RepeatsSql(core)
        self.trials = TrialsSql(
            core, chain=self.chain, search=self.search, progress=self.progress, knobs=self.knobs, repeats=self.repeats
        )
        self.pages = PagesSql(core, trials=self.trials)
        self.explore = ExploreSql(core, trials=self.trials)
        self.loops = LoopsSql(core, projects=self.projects)
        self.tokens = TokensSql(core)
        self.telemetry = TelemetrySql(core)
        self.outbox = OutboxSql(core)
        self.alerts = AlertsSql(core)
        self.columns = ColumnsSql(core)
        self.leases = LeasesSql(core)
        self.notes = NotesSql(core)
