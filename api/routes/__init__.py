"""The JSON API under ``/api/v1`` (plus ``/ready``), one router per resource.

Handlers stay a call or two long: the rules are the service's (``lineage.service``,
``lineage.auth``, ``lineage.telemetry``), responses are built by ``api.present``, and
errors become problem+json in ``api.problems``. Small, fast calls run inline in
``async def`` handlers (a thread-pool hop would cost more than the call); handlers whose
work grows with the input (file import, telemetry batches and series, project deletion)
are plain ``def`` and run in the thread pool.
"""

from __future__ import annotations

from fastapi import FastAPI


def install_routes(app: FastAPI) -> None:
    from api.routes import agent, ops, projects, telemetry, tokens, trials

    for module in (ops, projects, trials, telemetry, agent, tokens):
        app.include_router(module.router)
