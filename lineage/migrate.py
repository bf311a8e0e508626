"""Schema upgrades through Alembic, run in code (``lineage db upgrade``, ``lineage serve``).

Alembic (and Mako under it) is imported only when an upgrade runs: a server whose schema
is at head finds that out with one query and a look at the revision files
(:func:`head_revision`, :func:`current_revision`), which keeps its cold start short.
"""

from __future__ import annotations

import importlib
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import OperationalError

if TYPE_CHECKING:
    from alembic.config import Config

from lineage.db import SQLITE_BUSY_TIMEOUT_MS, WRITE_OPTION, is_sqlite


def migrations_dir() -> Path:
    # migrations/ ships as lineage.migrations: imported by its name at run time only, since
    # mypy checks it at neither name (pyproject's exclude) and would stop at the import
    package = importlib.import_module("lineage.migrations")
    assert package.__file__ is not None  # a package on disk
    return Path(package.__file__).resolve().parent


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    return config


_REVISION = re.compile(r"^(down_revision|revision)\s*=\s*['\"]([^'\"]*)['\"]", re.MULTILINE)
_HEAD: str | None = None


def head_revision() -> str:
    """The newest revision of the shipped migrations: the one no other revises (read from
    the revision files' ``revision``/``down_revision`` lines, without Alembic)."""
    global _HEAD
    if _HEAD is None:
        revisions: set[str] = set()
        revised: set[str] = set()
        for path in (migrations_dir() / "versions").glob("*.py"):
            for name, value in _REVISION.findall(path.read_text(encoding="utf-8")):
                (revisions if name == "revision" else revised).add(value)
        heads = sorted(revisions - revised)
        if len(heads) != 1:  # not one linear history: Alembic's answer (and its error)
            from alembic.script import ScriptDirectory

            return ScriptDirectory(str(migrations_dir())).get_current_head() or ""
        _HEAD = heads[0]
    return _HEAD


def current_revision(engine: Engine) -> str | None:
    """The database's revision (``alembic_version``), None for an empty database."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


#: How long an SQLite upgrade waits for another process's upgrade to let go of the lock, in
#: milliseconds: far longer than a write's busy timeout, since waiting is always right here
#: (on a slow, loaded machine an upgrade can hold the lock for long).
SQLITE_UPGRADE_BUSY_TIMEOUT_MS = 600_000
#: Attempts of an SQLite upgrade that hits SQLITE_BUSY where SQLite calls no busy handler
#: (another connection recovering or checkpointing the WAL at that instant).
SQLITE_UPGRADE_ATTEMPTS = 5
#: The key of PostgreSQL's advisory lock that upgrades of one database queue on
#: (advisory locks are scoped to the database; the number is "lineage" in ASCII).
POSTGRES_UPGRADE_LOCK = 0x6C696E65616765


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision``; a no-op (one query) when it is already there.

    Safe when several processes upgrade one database at once (two ``lineage serve`` of a
    team's first ``docker compose up``, ``lineage watch`` next to ``lineage serve``):
    each upgrade is one transaction that first takes the database's upgrade lock and then
    reads the revision again under it, so the later ones wait for the first and find the
    schema at head instead of creating ``alembic_version`` a second time.

    * PostgreSQL: the lock is a transaction-level advisory lock
      (:data:`POSTGRES_UPGRADE_LOCK`, scoped to the database), released at commit or
      rollback -- also when the process dies; the DDL is transactional, so a failed
      upgrade leaves nothing behind.
    * SQLite: the transaction is a write from its first statement (BEGIN IMMEDIATE), so
      the upgrades queue on the database lock -- waiting up to
      SQLITE_UPGRADE_BUSY_TIMEOUT_MS -- instead of one failing "database is locked" when
      both upgrade a read into a write."""
    if revision == "head" and current_revision(engine) == head_revision():
        return
    if not is_sqlite(engine):
        _upgrade_in_one_transaction(engine, revision)
        return
    for attempt in range(1, SQLITE_UPGRADE_ATTEMPTS + 1):
        try:
            _upgrade_in_one_transaction(engine, revision, busy_timeout_ms=SQLITE_UPGRADE_BUSY_TIMEOUT_MS)
            return
        except OperationalError as exc:
            if attempt == SQLITE_UPGRADE_ATTEMPTS or not _sqlite_busy(exc):
                raise
            time.sleep(0.05 * attempt)


#: The revision that adds ``trials.search_concepts`` and ``trial_sketch`` (filled on upgrade).
CONCEPTS_REVISION = "0009"
#: The revision that adds ``knob_changes`` (filled on upgrade).
KNOBS_REVISION = "0012"
#: The revision that adds ``trial_repeats`` (filled on upgrade).
REPEATS_REVISION = "0014"
#: The revision that adds ``trial_patches``: every trial's knob changes, patch digest,
#: search concepts and sketch are read again on upgrade (new sources, the concept table).
KNOB_SOURCES_REVISION = "0016"


def _upgrade_in_one_transaction(engine: Engine, revision: str, *, busy_timeout_ms: int | None = None) -> None:
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    config = alembic_config(engine)
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        if busy_timeout_ms is not None:
            raw.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")  # type: ignore[union-attr]
        try:
            with conn.execution_options(**{WRITE_OPTION: True}).begin():
                if not is_sqlite(engine):  # SQLite: BEGIN IMMEDIATE above is the lock
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({POSTGRES_UPGRADE_LOCK})")
                # under the lock: another process may have upgraded while this one waited
                before = MigrationContext.configure(conn).get_current_revision()
                if revision == "head" and before == head_revision():
                    return
                config.attributes["connection"] = conn
                command.upgrade(config, revision)
                after = MigrationContext.configure(conn).get_current_revision() or ""
                if before is not None and before < CONCEPTS_REVISION <= after:
                    # rows stored before trials.search_concepts: filled here, in the upgrade's
                    # transaction (the migration itself imports nothing from lineage)
                    from lineage.store import Store

                    Store(engine).search.backfill_concepts(conn)
                if before is not None and before < KNOB_SOURCES_REVISION <= after:
                    # every trial's knob changes again (and its concepts, under the concept table)
                    from lineage.store import Store

                    store = Store(engine)
                    store.knobs.backfill(conn, again=True)
                    store.search.refresh_concepts(conn)
                elif before is not None and before < KNOBS_REVISION <= after:
                    # the knob changes of trials stored before knob_changes, likewise
                    from lineage.store import Store

                    Store(engine).knobs.backfill(conn)
                if before is not None and before < REPEATS_REVISION <= after:
                    # the repeat keys of trials stored before trial_repeats, likewise
                    from lineage.store import Store

                    Store(engine).repeats.backfill(conn)
        finally:
            if busy_timeout_ms is not None and not conn.invalidated:  # back to the pool with the usual wait
                raw.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")  # type: ignore[union-attr]


def _sqlite_busy(exc: OperationalError) -> bool:
    message = str(exc.orig).lower()
    return "database is locked" in message or "locking protocol" in message
