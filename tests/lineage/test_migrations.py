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
    # with "database is locked")
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    db = tmp_path / "fresh.db"
    start = time.time() + 3
    code = ("import time; from lineage import migrate; from lineage.db import make_engine; "
            f"engine = make_engine({str(db)!r}); time.sleep(max(0, {start} - time.time())); migrate.upgrade(engine)")
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=root, stderr=subprocess.PIPE) for _ in range(3)]
    errors = [proc.communicate(timeout=120)[1].decode()[-500:] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 3, errors
    assert migrate.current_revision(make_engine(str(db))) == migrate.head_revision()
