"""All SQL of the ledger, in one place, for SQLite and PostgreSQL.

The store reads and writes rows and knows how to do it fast (indexed look-ups, bulk
inserts through ``executemany`` on SQLite and ``COPY`` on PostgreSQL). It does not decide
rules: which trial is best, what a delta is and what may be written are ``lineage.domain``
and ``lineage.service``. Every method takes the connection of a transaction opened with
:meth:`Store.read` or :meth:`Store.write`, so a use-case composes several calls atomically.

:class:`Store` is one mixin per table family over :class:`~lineage.store.base.StoreBase`
(engine, transactions, driver-level SQL, row mappers, the trial filters' WHERE clause);
each module's docstring lists its methods:

* ``projects.ProjectsSql``: project rows, counters, revision, delete, SQLite online backup;
* ``trials.TrialsSql``: trial rows, best_scored, chain_rows, top_kept, recent, stream, bulk insert;
* ``pages.PagesSql``: the web pages' bounded reads: counts, bins, windows, keyset pages;
* ``loops.LoopsSql``: results-file loops: next number, branch tip, delta refresh, plot rows;
* ``tokens.TokensSql``: API tokens and idempotency keys;
* ``telemetry.TelemetrySql``: telemetry points: insert, series, buckets, aggregates;
* ``explore.ExploreSql``: the metric explorer's reads;
* ``search.SearchSql``: trial text search: candidates, vocabulary, index compaction;
* ``outbox.OutboxSql``: webhooks and their delivery outbox;
* ``progress.ProgressSql``: the progress summary's reads and the guardrail policies;
* ``alerts.AlertsSql``: alerts of trials;
* ``columns.ColumnsSql``: which columns a project has, one column per trial (the knob view);
* ``chain.ChainSql``: each trial's stored chain depth and skip pointer: kept on write, read by the pages.
"""

from __future__ import annotations

from lineage.store.alerts import AlertsSql
from lineage.store.base import (
    TRIAL_COLUMNS,
    TRIAL_VALUE_COLUMNS,
    _stamp,  # noqa: F401 - lineage.monitor.hooks imports it from here
    trial_from_row,
    utcnow,
)
from lineage.store.chain import ChainSql
from lineage.store.columns import ColumnsSql
from lineage.store.explore import ExploreSql
from lineage.store.loops import LoopsSql
from lineage.store.outbox import OutboxSql
from lineage.store.pages import PagesSql
from lineage.store.progress import ProgressSql
from lineage.store.projects import ProjectsSql
from lineage.store.search import SearchSql
from lineage.store.telemetry import TelemetrySql
from lineage.store.tokens import TokensSql
from lineage.store.trials import BULK_BATCH, TrialsSql

__all__ = ["BULK_BATCH", "TRIAL_COLUMNS", "TRIAL_VALUE_COLUMNS", "Store", "trial_from_row", "utcnow"]


class Store(
    ProjectsSql,
    TrialsSql,
    PagesSql,
    LoopsSql,
    TokensSql,
    TelemetrySql,
    ExploreSql,
    SearchSql,
    OutboxSql,
    ProgressSql,
    AlertsSql,
    ColumnsSql,
    ChainSql,
):
    """SQL access for one database (one engine): the mixins above over ``StoreBase``."""
