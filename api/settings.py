"""Service settings, from the environment (``LINEAGE_*``) or the CLI."""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from api.hosts import HostAllowList


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LINEAGE_", extra="ignore")

    #: SQLite path or database URL; see ``lineage.db.resolve_url``.
    database_url: str | None = None
    #: Upgrade the schema when the app starts.
    upgrade_on_start: bool = True
    #: Reading without a token (``LINEAGE_ANONYMOUS_READ``). Writes need a token once the
    #: ledger had one; see ``lineage.auth``.
    anonymous_read: bool = True
    #: The address the server listens on (``LINEAGE_BIND_HOST``; ``lineage serve`` sets it
    #: from ``--host``). Not loopback: no anonymous write for the server's whole life.
    bind_host: str | None = None
    #: ``text`` (one line per record) or ``json`` (one JSON object per line).
    log_format: Literal["text", "json"] = "text"
    log_level: str = "info"
    #: Largest request body of the JSON API in bytes, after gzip decoding (413 above).
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    #: More hosts than the loopback names that requests may name in ``Host`` and ``Origin``
    #: (``LINEAGE_ALLOWED_HOSTS``: comma-separated, ``name`` or ``name:port``, ``*`` for any);
    #: see ``api.hosts``.
    allowed_hosts: str = ""

    @cached_property
    def host_allow_list(self) -> HostAllowList:
        """The hosts requests may name (``api.hosts``); read once."""
        return HostAllowList.build(self.allowed_hosts, bind_host=self.bind_host)

    @cached_property
    def exposed(self) -> bool:
        """Whether the server listens on a non-loopback address (``lineage.auth.allowed``);
        read once (every request asks)."""
        from lineage.auth import is_loopback

        return self.bind_host is not None and not is_loopback(self.bind_host)
