"""Alembic environment. Runs online against the connection ``lineage.migrate`` passes in,
or against ``sqlalchemy.url`` / ``$LINEAGE_DATABASE_URL`` when run by the alembic CLI."""

from __future__ import annotations

from alembic import context

from lineage.db import make_engine
from lineage.models import metadata
from lineage.store.search import include_object

config = context.config
target_metadata = metadata


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(config.get_main_option("sqlalchemy.url") or None)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) migrations are not supported; pass a database URL")
run_migrations_online()
