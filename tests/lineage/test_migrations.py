"""The schema comes from Alembic alone, and Alembic's head matches the ORM models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from lineage import migrate
from lineage.db import make_engine
from lineage.models import Base
from lineage.store_search import include_object


def test_orm_models_and_migration_head_agree(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "include_object": include_object})
        diff = compare_metadata(context, Base.metadata)
    assert diff == []


def test_database_is_at_the_head_revision(engine) -> None:  # type: ignore[no-untyped-def]
    assert migrate.current_revision(engine) == migrate.head_revision()


def test_upgrade_on_an_up_to_date_database_changes_nothing(engine) -> None:  # type: ignore[no-untyped-def]
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()


def test_processes_opening_a_fresh_sqlite_file_at_once_all_upgrade_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # `lineage watch` and `lineage serve` started together on a new ./lineage.db; the
    # processes start upgrading at the same instant (before the fix, most runs had one fail
    # with "database is locked"). The instant is a barrier, not a clock: each process says
    # it is ready (imports done, engine made) and waits for the others, however slow the
    # machine is; each then waits for the lock as long as an upgrade needs.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    db, gate, processes = tmp_path / "fresh.db", tmp_path / "gate", 3
    gate.mkdir()
    code = ("import os, sys, time; from lineage import migrate; from lineage.db import make_engine; "
            f"engine = make_engine({str(db)!r}); gate = {str(gate)!r}; "
            "open(os.path.join(gate, str(os.getpid())), 'w').close(); deadline = time.monotonic() + 300; "
            f"[time.sleep(0.005) for _ in iter(lambda: len(os.listdir(gate)) < {processes} "
            "and time.monotonic() < deadline, False)]; migrate.upgrade(engine)")
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=root, stderr=subprocess.PIPE) for _ in range(processes)]
    errors = [proc.communicate(timeout=600)[1].decode()[-500:] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * processes, errors
    assert len(list(gate.iterdir())) == processes
    assert migrate.current_revision(make_engine(str(db))) == migrate.head_revision()


def test_an_sqlite_upgrade_waits_for_a_lock_held_longer_than_a_write_would(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Another process holds the write lock past SQLITE_BUSY_TIMEOUT_MS (scaled down here):
    the upgrade waits for it instead of failing "database is locked"."""
    import sqlite3
    import threading

    from lineage import db as db_module

    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("BEGIN IMMEDIATE")
    upgraded = threading.Event()
    failures: list[BaseException] = []
    original = db_module.SQLITE_BUSY_TIMEOUT_MS
    db_module.SQLITE_BUSY_TIMEOUT_MS = 50  # a write would give up after 50 ms
    try:
        engine = make_engine(str(path))

        def run() -> None:
            try:
                migrate.upgrade(engine)
                upgraded.set()
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                failures.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        worker.join(timeout=1.0)  # twenty write timeouts pass with the lock held
        assert failures == [] and not upgraded.is_set()
        holder.execute("COMMIT")
        worker.join(timeout=300)
        assert failures == [] and upgraded.is_set()
    finally:
        db_module.SQLITE_BUSY_TIMEOUT_MS = original
        holder.close()
    assert migrate.current_revision(make_engine(str(path))) == migrate.head_revision()
