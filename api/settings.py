"""Service settings, from the environment (``LINEAGE_*``) or the CLI."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LINEAGE_", extra="ignore")

    #: SQLite path or database URL; see ``lineage.db.resolve_url``.
    database_url: str | None = None
    #: Upgrade the schema when the app starts.
    upgrade_on_start: bool = True
