"""Engines and connection settings: the only place that knows SQLite from PostgreSQL.

* ``resolve_url`` turns what a user types (a file path, ``sqlite:///x.db``,
  ``postgresql://...``) into a SQLAlchemy URL, defaulting to ``./lineage.db``.
* SQLite is opened in WAL mode with a busy timeout and foreign keys on. Write
  transactions start with ``BEGIN IMMEDIATE`` so two writers queue on the lock up
  front instead of failing with "database is locked" when a reader upgrades.
* PostgreSQL goes through psycopg 3. A pooled connection is pinged only when it sat
  idle for a while (:data:`PG_PING_AFTER_IDLE_S`), not on every checkout: under load
  that ping was one round trip in ten of a recorded trial.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.engine import make_url

ENV_DATABASE_URL = "LINEAGE_DATABASE_URL"
DEFAULT_SQLITE_FILE = "lineage.db"
#: How long a SQLite writer waits for the lock before giving up, in milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: Execution option that marks a connection's transactions as writes.
WRITE_OPTION = "ledger_write"
#: Key of ``Connection.info``: the psycopg pipeline of a pipelined write transaction.
PIPELINE_INFO = "ledger_pipeline"


def resolve_url(db: str | None = None) -> str:
    """The database URL from an explicit ``db``, else ``$LINEAGE_DATABASE_URL``, else ./lineage.db."""
    raw = db or os.environ.get(ENV_DATABASE_URL) or DEFAULT_SQLITE_FILE
    if "://" not in raw:
        return f"sqlite:///{Path(raw).expanduser().resolve()}"
    url = make_url(raw)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url.render_as_string(hide_password=False)


def is_sqlite(engine_or_url: Engine | str) -> bool:
    url = engine_or_url.url if isinstance(engine_or_url, Engine) else make_url(engine_or_url)
    return url.get_backend_name() == "sqlite"


#: A server's SQLite connections checkpoint the WAL themselves only past this many pages
#: (32 MiB). Its background checkpointer (:func:`checkpoint`, passive) copies the WAL
#: into the database and syncs it meanwhile, off the requests; under steady writes it
#: never quite catches up (a WAL restarts only when fully copied), so the WAL file
#: grows to this size, where a commit's own checkpoint copies the few frames left.
SERVER_WAL_AUTOCHECKPOINT = 8_192


def make_engine(db: str | None = None, *, wal_autocheckpoint: int | None = None, **kwargs: object) -> Engine:
    """An engine for ``db`` (see :func:`resolve_url`) with the ledger's connection settings.
    ``wal_autocheckpoint``: SQLite's pages before a commit checkpoints (default 1,000)."""
    url = resolve_url(db)
    if is_sqlite(url):
        return _sqlite_engine(url, wal_autocheckpoint=wal_autocheckpoint, **kwargs)
    return _postgres_engine(url, **kwargs)


#: A pooled PostgreSQL connection idle longer than this (seconds) is pinged before it is
#: handed out; one used more recently is handed out as it is.
PG_PING_AFTER_IDLE_S = 2.0


def _postgres_engine(url: str, **kwargs: object) -> Engine:
    """psycopg 3, with a ping only for connections that sat idle (``pool_pre_ping=True``
    pings on every checkout: one round trip per transaction).

    A connection the driver already knows is closed or broken is replaced without a
    round trip; one idle past :data:`PG_PING_AFTER_IDLE_S` gets SQLAlchemy's ping and is
    replaced when that fails. A server that went away within the window is met by the
    first statement; every API request starts with the access check
    (:meth:`StoreCore.peek`), which then runs once more on a new connection and replaces
    the whole pool, so the request's write gets a live connection too; only statements
    already in flight see the error.
    """
    engine = create_engine(url, **kwargs)
    dialect = engine.dialect

    @event.listens_for(engine, "after_cursor_execute")
    def _results_now(conn, _cursor, _statement, _parameters, _context, _executemany):
        # A SQLAlchemy statement inside a pipelined write (StoreCore.write) reads its
        # result's description right after executing: fetch the results now.
        pipeline = conn.info.get(PIPELINE_INFO)
        if pipeline is not None:
            pipeline.sync()

    if kwargs.get("pool_pre_ping"):
        return engine

    @event.listens_for(engine, "connect")
    def _fresh(_dbapi_connection, record):
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkin")
    def _idle(_dbapi_connection, record):
        if record is not None:
            record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _usable(dbapi_connection, record, _proxy):
        if dbapi_connection.closed or dbapi_connection.broken:
            raise exc.DisconnectionError("connection closed")
        since = record.info.get("idle_since")
        if since is not None and time.monotonic() - since <= PG_PING_AFTER_IDLE_S:
            return
        try:
            alive = dialect.do_ping(dbapi_connection)
        except Exception as error:  # noqa: BLE001 - any failure means: get another one
            raise exc.DisconnectionError(f"ping failed: {error}") from error
        if not alive:
            raise exc.DisconnectionError("ping failed")

    return engine


def checkpoint(engine: Engine) -> None:
    """A passive WAL checkpoint of a SQLite database (never waits for readers or writers;
    a no-op on PostgreSQL): what a server's background task runs."""
    if not is_sqlite(engine):
        return
    raw = engine.raw_connection()
    try:
        raw.cursor().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    finally:
        raw.close()


#: PostgreSQL: a table's planner statistics are refreshed (:func:`refresh_statistics`) once
#: this many of its rows changed since its last ANALYZE ...
STATISTICS_MIN_ROWS = 100
#: ... and that is this share of the rows it had then.
STATISTICS_SHARE = 0.2
#: The advisory lock that lets one server at a time refresh statistics.
_STATISTICS_LOCK = 0x6C696E65_73746174 & 0x7FFFFFFFFFFFFFFF


def refresh_statistics(engine: Engine) -> list[str]:
    """PostgreSQL: ``ANALYZE`` the tables that changed by :data:`STATISTICS_MIN_ROWS`
    rows and :data:`STATISTICS_SHARE` of their size since their last analysis; their
    names (a no-op on SQLite, whose plans do not read statistics here).

    Autovacuum does the same, but looks once a minute and waits for 50 rows + 10%: a
    young ledger (the first minutes of a loop, a fresh database under a benchmark) is
    planned without statistics, and the planner then walks a whole project where an
    index finds a row (``similar_prior``'s shortlist: 2 ms instead of 0.1 ms at 1,000
    trials, growing with the project). A server runs this every few seconds; with
    several servers on one database, one at a time does (an advisory lock)."""
    if is_sqlite(engine):
        return []
    raw = engine.raw_connection()
    driver = raw.driver_connection
    try:
        driver.autocommit = True  # type: ignore[union-attr]
        cursor = driver.cursor()  # type: ignore[union-attr]
        if not cursor.execute("SELECT pg_try_advisory_lock(%s)", (_STATISTICS_LOCK,)).fetchone()[0]:
            return []
        try:
            stale = [
                name
                for (name,) in cursor.execute(
                    "SELECT relname FROM pg_stat_user_tables WHERE schemaname = current_schema() "
                    "AND n_mod_since_analyze >= %s "
                    "AND n_mod_since_analyze >= %s * GREATEST(n_live_tup - n_mod_since_analyze, 0) ORDER BY relname",
                    (STATISTICS_MIN_ROWS, STATISTICS_SHARE),
                ).fetchall()
            ]
            from psycopg import sql

            for name in stale:
                cursor.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))
            return stale
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", (_STATISTICS_LOCK,))
    finally:
        if not driver.closed:  # type: ignore[union-attr]
            driver.autocommit = False  # type: ignore[union-attr]
        raw.close()


def _sqlite_engine(url: str, *, wal_autocheckpoint: int | None = None, **kwargs: object) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    connect_args = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}
    # Every transaction here ends in an explicit commit or rollback, so the pool's
    # rollback-on-return would only add a call per checkout.
    kwargs.setdefault("pool_reset_on_return", None)
    engine = create_engine(url, connect_args=connect_args, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's own implicit
        # BEGIN is DEFERRED and cannot be made IMMEDIATE).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        # NORMAL is durable across process crashes in WAL mode (only an OS crash can
        # lose the last commits), and avoids an fsync per commit.
        cursor.execute("PRAGMA synchronous=NORMAL")
        if wal_autocheckpoint is not None:
            cursor.execute(f"PRAGMA wal_autocheckpoint={int(wal_autocheckpoint)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        mode = "IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION) else "DEFERRED"
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine
