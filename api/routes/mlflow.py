"""MLflow's tracking REST API, the subset trainers call, under ``/api/2.0/mlflow/`` and
``/ajax-api/2.0/mlflow/``: any MLflow client logs into the ledger with
``MLFLOW_TRACKING_URI`` set to this server (``MLFLOW_TRACKING_TOKEN``: a ledger token).

The mapping rules are :mod:`lineage.mlflow_compat`'s; a handler parses MLflow's request
(JSON body, or query parameters for GETs), calls one method, and answers MLflow's JSON.
Errors are MLflow's ``{"error_code", "message"}`` (which its clients parse), not
problem+json, also for the access check, which is the JSON API's (:func:`api.deps.authorize`), and
for a path not served (``ENDPOINT_NOT_FOUND``, naming those that are). The routes stay out of
the OpenAPI document: they are MLflow's contract, not the ledger's.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api.deps import authorize
from lineage.auth import Role
from lineage.errors import LedgerError
from lineage.mlflow_compat import MlflowError, MlflowTracking, as_mlflow_error, invalid

router = APIRouter(include_in_schema=False)
PREFIXES = ("/api/2.0/mlflow", "/ajax-api/2.0/mlflow")


async def _answer(call: Callable[[], Awaitable[dict[str, Any]]]) -> JSONResponse:
    try:
        return JSONResponse(await call())
    except LedgerError as error:
        failed = as_mlflow_error(error)
    except MlflowError as error:
        failed = error
    return JSONResponse(failed.as_dict(), status_code=failed.status)


async def _body(request: Request) -> tuple[dict[str, Any], int]:
    raw = await request.body()
    if not raw:
        return {}, 0
    try:
        body = json.loads(raw)
    except ValueError:
        raise invalid("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object")
    return body, len(raw)


def _query(request: Request) -> dict[str, Any]:
    return dict(request.query_params)


async def get_experiment_by_name(request: Request) -> JSONResponse:
    async def call() -> dict[str, Any]:
        who = await authorize(request, Role.READER)
        name = _query(request).get("experiment_name")
        return await who.small_write(MlflowTracking(who.ledger).get_experiment_by_name, name)

    return await _answer(call)


async def get_experiment(request: Request) -> JSONResponse:
    async def call() -> dict[str, Any]:
        who = await authorize(request, Role.READER)
        found = _query(request).get("experiment_id")
        return await who.small_write(MlflowTracking(who.ledger).get_experiment, found)

    return await _answer(call)


async def create_experiment(request: Request) -> JSONResponse:
    async def call() -> dict[str, Any]:
        who = await authorize(request, Role.WRITER)
        body, _ = await _body(request)
        return await who.small_write(MlflowTracking(who.ledger).create_experiment, body.get("name"), body.get("tags"))

    return await _answer(call)


async def search_experiments(request: Request) -> JSONResponse:
    async def call() -> dict[str, Any]:
        who = await authorize(request, Role.READER)
        body = _query(request) if request.method == "GET" else (await _body(request))[0]
        return MlflowTracking(who.ledger).search_experiments(body)

    return await _answer(call)


async def create_run(request: Request) -> JSONResponse:
    async def call() -> dict[str, Any]:
        who = await authorize(request, Role.WRITER)
        body, _ = await _body(request)
        return await who.small_write(MlflowTracking(who.ledger).create_run, body)

    return await _answer(call)


async def update_run(request: Request) -> JSONResponse:
    async def call() -> dict[str, Any]:
        who = await authorize(request, Role.WRITER)
        body, _ = await _body(request)
        return await who.small_write(MlflowTracking(who.ledger).update_run, body)

    return await _answer(call)


async def get_run(request: Request) -> JSONResponse:
    async def call() -> dict[str, Any]:
        who = await authorize(request, Role.READER)
        query = _query(request)
        return MlflowTracking(who.ledger).get_run(query.get("run_id") or query.get("run_uuid"))

    return await _answer(call)


async def search_runs(request: Request) -> JSONResponse:
    async def call() -> dict[str, Any]:
        who = await authorize(request, Role.READER)
        body, _ = await _body(request)
        # may create the default project, as MLflow's default experiment always exists
        return await who.small_write(MlflowTracking(who.ledger).search_runs, body)

    return await _answer(call)


def _logger(shape: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[Request], Awaitable[JSONResponse]]:
    """A ``log-*`` or ``set-tag`` route: its body as a ``log-batch`` body (``shape``)."""

    async def route(request: Request) -> JSONResponse:
        async def call() -> dict[str, Any]:
            who = await authorize(request, Role.WRITER)
            body, size = await _body(request)
            run_id = body.get("run_id") or body.get("run_uuid")
            return await who.long_write(MlflowTracking(who.ledger).log_batch, run_id, shape(body), size=size)

        return await _answer(call)

    return route


log_batch = _logger(lambda body: body)
log_metric = _logger(lambda body: {"metrics": [body]})
log_parameter = _logger(lambda body: {"params": [body]})
set_tag = _logger(lambda body: {"tags": [body]})


async def get_metric_history(request: Request) -> JSONResponse:
    async def call() -> dict[str, Any]:
        who = await authorize(request, Role.READER)
        query = _query(request)
        run_id = query.get("run_id") or query.get("run_uuid")
        return MlflowTracking(who.ledger).get_metric_history(run_id, query.get("metric_key"))

    return await _answer(call)


async def server_info() -> JSONResponse:
    """What MLflow 3 clients ask before using workspaces or artifacts: none here (the keys
    of MLflow 3.17's answer)."""
    return JSONResponse(
        {
            "store_type": None,
            "workspaces_enabled": False,
            "trace_archival_enabled": False,
            "multipart_uploads_enabled": False,
            "multipart_downloads_enabled": False,
            "presigned_upload_run_id_supported": False,
            "presigned_upload_model_id_supported": False,
            "features_enabled": {"gateway": False},
        }
    )


ROUTES: tuple[tuple[str, str, Callable[..., Awaitable[JSONResponse]]], ...] = (
    ("GET", "/experiments/get-by-name", get_experiment_by_name),
    ("GET", "/experiments/get", get_experiment),
    ("POST", "/experiments/create", create_experiment),
    ("POST", "/experiments/search", search_experiments),
    ("GET", "/experiments/search", search_experiments),
    ("POST", "/runs/create", create_run),
    ("POST", "/runs/update", update_run),
    ("GET", "/runs/get", get_run),
    ("POST", "/runs/search", search_runs),
    ("POST", "/runs/log-batch", log_batch),
    ("POST", "/runs/log-metric", log_metric),
    ("POST", "/runs/log-parameter", log_parameter),
    ("POST", "/runs/set-tag", set_tag),
    ("GET", "/metrics/get-history", get_metric_history),
)

for _prefix in PREFIXES:
    for _method, _path, _route in ROUTES:
        router.add_api_route(_prefix + _path, _route, methods=[_method])
for _prefix in ("/api/3.0/mlflow", "/ajax-api/3.0/mlflow"):
    router.add_api_route(_prefix + "/server-info", server_info, methods=["GET"])


async def not_served(request: Request) -> JSONResponse:
    """Any other MLflow path: MLflow's ``ENDPOINT_NOT_FOUND``, which its clients show as
    such, naming what is served (rather than a problem+json they read as an internal error)."""
    served = ", ".join(sorted({path.lstrip("/") for _, path, _ in ROUTES}))
    message = f"{request.method} {request.url.path} is not served by the lineage ledger; served: {served}, server-info"
    return JSONResponse({"error_code": "ENDPOINT_NOT_FOUND", "message": message}, status_code=404)


for _prefix in (*PREFIXES, "/api/3.0/mlflow", "/ajax-api/3.0/mlflow"):
    router.add_api_route(_prefix + "/{rest:path}", not_served, methods=["GET", "POST", "PATCH", "DELETE", "PUT"])
