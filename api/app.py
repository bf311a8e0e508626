"""The FastAPI application factory: one engine per app, nothing else held in memory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.pages import install_pages
from api.settings import Settings
from lineage.service import Ledger


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    ledger = Ledger.open(settings.database_url, upgrade=settings.upgrade_on_start)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        ledger.close()

    app = FastAPI(title="Lineage Ledger", version="0.1.0", docs_url="/docs", lifespan=lifespan)
    app.state.ledger = ledger
    app.state.settings = settings

    @app.get("/health", tags=["ops"])
    async def health() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    install_pages(app)
    return app


def app_from_env() -> FastAPI:
    """Entry point for ``uvicorn --factory`` (used by ``lineage serve``)."""
    return create_app(Settings())
