"""The FastAPI application factory: one engine per app, nothing else held in memory.

``create_app(settings)`` builds the JSON API (``/api/v1``, documented at ``/docs``),
``/health`` and ``/ready``, MCP over Streamable HTTP at ``/mcp`` (``api.mcp_server``;
with the ``mcp`` extra), and the researchers' pages. Middleware, outermost first:
request ids and the access log, then the body guard (size limit, gzip) of ``/api/``.
Errors are problem+json (``api.problems``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI

from api.contract import install_contract
from api.deps import WriteLanes
from api.logs import configure_logging
from api.middleware import BodyGuard, HostGuard, RequestContext
from api.pages import install_pages
from api.problems import install_problem_handlers
from api.record_groups import RecordGroups
from api.routes import install_routes
from api.settings import Settings
from lineage import migrate
from lineage.db import SERVER_WAL_AUTOCHECKPOINT, checkpoint, refresh_statistics
from lineage.service import Ledger

if TYPE_CHECKING:  # imported by the first request (api.mcp_lazy)
    from api.mcp_lazy import LazyMcp

DESCRIPTION = """\
The experiment lineage ledger's JSON API.

* **Errors** are RFC 9457 `application/problem+json` naming the `field` (and `line`,
  `column` for files); every response carries `X-Request-ID`.
* **Auth**: `Authorization: Bearer <token>` (`lineage token create --role reader|writer|admin`).
  Reads may be anonymous (`LINEAGE_ANONYMOUS_READ`, default on). Writes need a writer
  token from the ledger's first token on, also after the last is revoked, until an admin
  re-opens anonymous writes (`PUT /access`); a server on a non-loopback address never
  takes an anonymous write. Token management, `/access`, webhooks and project deletion
  need an admin token; the last admin token cannot be revoked over HTTP.
* **Idempotency**: a trial creation with an existing `exp_id` or `Idempotency-Key` and the
  same body returns the stored trial (200), with another body 409 with both versions;
  telemetry batches are idempotent by `batch_id` / `Idempotency-Key`.
* **Batches**: `POST /projects/{p}/trials:batch` records up to 1,000 trials
  (`{"trials": [...]}`, each the body of `POST .../trials` plus an optional
  `idempotency_key`) in one transaction, in order, all or nothing; a bad item is named
  `trials[i].field`. The body may be up to `LINEAGE_MAX_BODY_BYTES` (64 MiB by default).
* **ETags** of the prompt, the knowledge block and projects derive from the project's
  revision: `If-None-Match` gets 304 after one indexed query.
* Bodies over the limit (`LINEAGE_MAX_BODY_BYTES`, counted after gzip decoding) get 413.
* **Webhooks** (`/projects/{p}/hooks`, admin) receive signed events (new best, guardrail
  tripped, trial crashed) from an outbox written with the trial; the server sends them in
  the background (`lineage.monitor.delivery`), so a slow receiver never slows a write.
"""


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    configure_logging(settings.log_format, settings.log_level)
    ledger = Ledger.open(
        settings.database_url, upgrade=settings.upgrade_on_start, wal_autocheckpoint=SERVER_WAL_AUTOCHECKPOINT
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # webhooks: the outbox is sent in the background (lineage.monitor.delivery); safe
        # with several server processes, each claims its deliveries with a lease
        from lineage.monitor.delivery import delivery_enabled, delivery_loop

        delivery = asyncio.create_task(delivery_loop(ledger)) if delivery_enabled() else None
        # MCP over Streamable HTTP, a fresh server per lifespan, started by its first request
        mcp_task = asyncio.create_task(mcp.run()) if mcp is not None else None
        maintenance = asyncio.create_task(_maintenance_loop(ledger))
        yield
        for task in (maintenance, mcp_task, delivery):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        ledger.close()

    app = FastAPI(title="Lineage Ledger", version="0.1.0", description=DESCRIPTION, docs_url="/docs", lifespan=lifespan)
    app.state.ledger = ledger
    app.state.settings = settings
    app.state.schema_head = migrate.head_revision()
    app.state.write_lanes = WriteLanes()
    app.state.record_groups = RecordGroups(app.state.write_lanes.small)

    install_problem_handlers(app)
    app.add_middleware(BodyGuard, max_bytes=settings.max_body_bytes)
    app.add_middleware(HostGuard, allowed=settings.host_allow_list)  # DNS rebinding: api.hosts
    app.add_middleware(RequestContext)  # added last: outermost

    @app.get("/health", tags=["ops"])
    async def health() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    install_routes(app)
    install_contract(app)
    mcp = _install_mcp(app, ledger, settings)
    install_pages(app)
    return app


#: Seconds between the background WAL checkpoints of a SQLite server.
CHECKPOINT_INTERVAL_S = 0.5
#: Seconds between a PostgreSQL server's looks for tables whose statistics are stale.
STATISTICS_INTERVAL_S = 2.0
#: Seconds between a server's sweeps for running trials whose lease lapsed (``lineage.leases``).
LEASE_SWEEP_INTERVAL_S = 30.0


async def _maintenance_loop(ledger: Ledger) -> None:
    """In a worker thread, so that requests never do it. SQLite: checkpoint the WAL
    every CHECKPOINT_INTERVAL_S (request connections only past SERVER_WAL_AUTOCHECKPOINT
    pages). PostgreSQL: refresh stale planner statistics every STATISTICS_INTERVAL_S
    (:func:`lineage.db.refresh_statistics`). Both: every LEASE_SWEEP_INTERVAL_S, end the
    running trials whose lease lapsed (:meth:`lineage.leases.Leases.sweep`; decided from
    the database, so servers sharing one agree)."""
    sqlite = ledger.store.sqlite
    task, interval = (checkpoint, CHECKPOINT_INTERVAL_S) if sqlite else (refresh_statistics, STATISTICS_INTERVAL_S)
    rounds_per_sweep = max(1, round(LEASE_SWEEP_INTERVAL_S / interval))
    rounds = 0
    while True:
        await asyncio.sleep(interval)
        rounds += 1
        try:
            await asyncio.to_thread(task, ledger.engine)
            if rounds % rounds_per_sweep == 0:
                await asyncio.to_thread(ledger.leases.sweep)
        except Exception:  # noqa: BLE001 - a busy, restarting or closing database: the next round retries
            pass


def _install_mcp(app: FastAPI, ledger: Ledger, settings: Settings) -> LazyMcp | None:
    """MCP at ``/mcp`` (Streamable HTTP, ``api.mcp_server.McpEndpoint``, imported and
    started by the first request: ``api.mcp_lazy``), with the JSON API's tokens and
    roles; None when the MCP SDK is not installed (the ``mcp`` extra)."""
    from api.mcp_lazy import LazyMcp, mcp_installed

    if not mcp_installed():
        return None
    endpoint = LazyMcp(
        ledger, anonymous_read=settings.anonymous_read, exposed=settings.exposed, allowed=settings.host_allow_list
    )
    # an ASGI app, not a request handler: Starlette's Route serves a non-function endpoint as one
    app.router.add_route("/mcp", endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False)  # type: ignore[arg-type]
    return endpoint


def app_from_env() -> FastAPI:
    """Entry point for ``uvicorn --factory`` (used by ``lineage serve``)."""
    return create_app(Settings())
