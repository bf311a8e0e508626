"""Service settings, from the environment (``LINEAGE_*``) or the CLI."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LINEAGE_", extra="ignore")

    #: SQLite path or database URL; see ``lineage.db.resolve_url``.
    database_url: str | None = None
    #: Upgrade the schema when the app starts.
    upgrade_on_start: bool = True
    #: Reading without a token (``LINEAGE_ANONYMOUS_READ``). Writes always need a token
    #: once any token exists; see ``lineage.auth``.
    anonymous_read: bool = True
    #: ``text`` (one line per record) or ``json`` (one JSON object per line).
    log_format: Literal["text", "json"] = "text"
    log_level: str = "info"
    #: Largest request body of the JSON API in bytes, after gzip decoding (413 above).
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
