"""The schema comes from Alembic alone, and Alembic's head matches the ORM models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from lineage import migrate
from lineage.models import Base


def test_orm_models_and_migration_head_agree(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    assert diff == []


def test_database_is_at_the_head_revision(engine) -> None:  # type: ignore[no-untyped-def]
    assert migrate.current_revision(engine) == migrate.head_revision()


def test_upgrade_on_an_up_to_date_database_changes_nothing(engine) -> None:  # type: ignore[no-untyped-def]
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()
