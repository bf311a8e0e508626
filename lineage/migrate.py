"""Schema upgrades through Alembic, run in code (``lineage db upgrade``, ``lineage serve``)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from lineage.db import WRITE_OPTION


def migrations_dir() -> Path:
    import lineage.migrations as package

    return Path(package.__file__).resolve().parent


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    return config


def head_revision() -> str:
    return ScriptDirectory(str(migrations_dir())).get_current_head() or ""


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision``; a no-op (one query) when it is already there."""
    if revision == "head" and current_revision(engine) == head_revision():
        return
    config = alembic_config(engine)
    # a write transaction from its first statement (SQLite: BEGIN IMMEDIATE): two processes
    # opening a fresh file at once (`lineage watch` and `lineage serve`) then queue on the
    # lock, and the second finds the schema at head, instead of one failing "database is
    # locked" when both upgrade a read into a write
    with engine.connect().execution_options(**{WRITE_OPTION: True}) as conn, conn.begin():
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
