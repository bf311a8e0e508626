"""The OpenAPI document as the API's contract: each operation's error responses, derived
from what the operation depends on, and the links between operations.

:func:`install_contract` runs once the routes are installed. For every JSON API route it
adds the statuses the route can answer besides its successes, each as
``application/problem+json`` with the :class:`Problem` schema (``api.problems`` serves
them). The statuses follow from the route itself, never from a hand-kept list per route:

======  ==============================================================================
status  when a route declares it
======  ==============================================================================
304     it reads ``If-None-Match`` (an ETag'd read); no body
400     it takes a request body (a corrupt gzip or deflate body)
401     it depends on ``Reader``, ``Writer`` or ``Admin`` (no token where one is needed,
        or a bad one; ``WWW-Authenticate: Bearer``)
403     it depends on ``Writer`` or ``Admin`` (a token whose role is too low)
404     its path names something (a project, trial, token or hook that does not exist)
409     its endpoint is in :data:`CONFLICTS` (a write keyed by a name or id the caller
        chooses: the same key with another body)
413     it takes a request body (over ``--max-body-bytes``, counted after decoding)
415     it takes a request body (a ``Content-Encoding`` other than gzip/deflate)
422     it takes any parameter or body (validation, or a rule of the ledger naming the field)
======  ==============================================================================

:data:`LINKS` adds OpenAPI links from what a write creates to the operations that
use it (a project to its trials, a trial to its telemetry, a token to its revocation),
so a client, or schemathesis' stateful phase, can follow them.

The document stays deterministic: statuses in numeric order, links in table order.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from api.problems import PROBLEM_JSON
from api.schema_types import JSON_VALUE_SCHEMA

__all__ = ["CONFLICTS", "LINKS", "Problem", "contract_document", "error_statuses", "install_contract"]


class ProblemError(BaseModel):
    """One failed check of a request (``errors`` of a 422 ``invalid-request``)."""

    location: str = Field(description="body, query, path or header")
    field: str = Field(description="The field, as a path: points[3].value")
    message: str
    type: str


class Problem(BaseModel):
    """An RFC 9457 problem: every 4xx and 5xx of the API (``application/problem+json``)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": True})

    type: str = Field(description="urn:lineage:problem:CODE, or about:blank")
    title: str = Field(description="The status's phrase")
    status: int = Field(ge=100, le=599)
    detail: str = Field(description="What went wrong, and where, in a sentence")
    code: str | None = Field(
        None,
        description="The problem's kind: not-found, conflict, invalid-input, "
        "invalid-request, unauthorized, forbidden, ...",
    )
    instance: str | None = Field(None, description="The request's path")
    request_id: str | None = Field(None, description="Also the X-Request-ID header; the server log names it")
    field: str | None = Field(None, description="The field at fault (the first, for invalid-request)")
    location: str | None = Field(None, description="invalid-request: where the field is (body, query, path, header)")
    errors: list[ProblemError] | None = Field(None, description="invalid-request: every failed check")
    line: int | None = Field(None, description="Files: the 1-based line at fault")
    column: int | None = Field(None, description="Files: the 1-based column at fault")
    entity: str | None = Field(None, description="404: what was looked for (project, trial, token, hook)")
    key: str | None = Field(None, description="404: its key")
    existing: Any = Field(None, description="409: what is stored")
    proposed: Any = Field(None, description="409: what this request would have stored")
    limit: int | None = Field(None, description="413: the body limit in bytes")


_DESCRIPTIONS = {
    400: "A request body that cannot be decoded (corrupt gzip or deflate)",
    401: "No token where this needs one, or an invalid one",
    403: "The token's role is too low for this",
    404: "Not found: nothing at this path, or a project, trial, token or hook it names",
    409: "Conflict",
    413: "The request body is over the server's limit (after decoding)",
    415: "A Content-Encoding other than gzip, deflate or identity",
    422: "A parameter or body field breaks a rule; the problem names the field",
}

#: Endpoints that answer 409, and when.
CONFLICTS: dict[str, str] = {
    "create_project": "A project with this slug exists",
    "record_trial": "This exp_id or Idempotency-Key holds another trial (existing and proposed in the problem)",
    "record_trials": "An item's exp_id or idempotency_key holds another trial (the field is trials[i].field), "
    "or this Idempotency-Key was used for other trials",
    "upload_tsv": "A row's exp_id holds another trial",
    "post_telemetry": "This batch_id or Idempotency-Key holds another batch",
    "raise_alert": "This Idempotency-Key holds another alert",
    "create_token": "A token of this name exists",
    "revoke_token": "The last active admin token (revoke it locally with `lineage token revoke --last-admin`)",
    "heartbeat": "The trial is not running (it finished, or its lease lapsed): the problem names status",
    "claim_trial": "Another owner runs a close idea and the project refuses duplicate claims (the problem names "
    "that claim's exp_id and owner), or this Idempotency-Key holds another claim",
    "finish_claim": "Another owner holds the claim (the problem names owner), or it is no longer running "
    "(finished, or its lease lapsed: the problem names status); nothing changes",
    "resume": "The trial is finished (the problem names its status): start a new trial",
}

#: (from endpoint, status) -> {link name: (to endpoint, {parameter: runtime expression})}.
LINKS: dict[tuple[str, int], dict[str, tuple[str, dict[str, str]]]] = {
    ("create_project", 201): {
        "GetProject": ("get_project", {"project": "$response.body#/slug"}),
        "UpdateProject": ("update_project", {"project": "$response.body#/slug"}),
        "RecordTrial": ("record_trial", {"project": "$response.body#/slug"}),
        "ListTrials": ("list_trials", {"project": "$response.body#/slug"}),
        "UploadTsv": ("upload_tsv", {"project": "$response.body#/slug"}),
        "GetPrompt": ("get_prompt", {"project": "$response.body#/slug"}),
        "GetSummary": ("get_summary", {"project": "$response.body#/slug"}),
        "PutGuardrails": ("put_guardrails", {"project": "$response.body#/slug"}),
        "AddHook": ("add_hook", {"project": "$response.body#/slug"}),
        "DeleteProject": ("delete_project", {"project": "$response.body#/slug"}),
    },
    ("record_trial", 201): {
        "GetTrial": ("get_trial", {"project": "$request.path.project", "exp_id": "$response.body#/trial/exp_id"}),
        "UpdateTrial": ("update_trial", {"project": "$request.path.project", "exp_id": "$response.body#/trial/exp_id"}),
        "TrialLineage": (
            "trial_lineage",
            {"project": "$request.path.project", "exp_id": "$response.body#/trial/exp_id"},
        ),
        "PostTelemetry": (
            "post_telemetry",
            {"project": "$request.path.project", "exp_id": "$response.body#/trial/exp_id"},
        ),
        "GetTelemetry": (
            "get_telemetry",
            {"project": "$request.path.project", "exp_id": "$response.body#/trial/exp_id"},
        ),
        "RaiseAlert": ("raise_alert", {"project": "$request.path.project", "exp_id": "$response.body#/trial/exp_id"}),
    },
    ("post_telemetry", 201): {
        "GetTelemetry": ("get_telemetry", {"project": "$request.path.project", "exp_id": "$request.path.exp_id"}),
        "Summarize": ("summarize", {"project": "$request.path.project", "exp_id": "$request.path.exp_id"}),
    },
    ("raise_alert", 201): {
        "TrialAlerts": ("trial_alerts", {"project": "$request.path.project", "exp_id": "$request.path.exp_id"}),
    },
    ("add_hook", 201): {
        "RemoveHook": ("remove_hook", {"project": "$request.path.project", "hook_id": "$response.body#/id"}),
    },
    ("create_token", 201): {
        "RevokeToken": ("revoke_token", {"name": "$response.body#/name"}),
    },
}

_ROLE_DEPENDENCIES = {"require_reader": (401,), "require_writer": (401, 403), "require_admin": (401, 403)}


def _dependency_names(dependant: Dependant) -> set[str]:
    names: set[str] = set()
    for sub in dependant.dependencies:
        call = sub.call
        names.add(getattr(call, "__name__", ""))
        names |= _dependency_names(sub)
    return names


def _takes_body(route: APIRoute) -> bool:
    extra = route.openapi_extra or {}
    return route.body_field is not None or "requestBody" in extra


def error_statuses(route: APIRoute) -> list[int]:
    """The statuses besides its successes that ``route`` can answer (the table above)."""
    statuses: set[int] = set()
    for name in _dependency_names(route.dependant):
        statuses.update(_ROLE_DEPENDENCIES.get(name, ()))
    dependant = route.dependant
    headers = {param.alias.lower() for param in _all(dependant, "header_params")}
    if "if-none-match" in headers:
        statuses.add(304)
    if _all(dependant, "path_params"):
        statuses.add(404)
    if route.name in CONFLICTS:
        statuses.add(409)
    if _takes_body(route):
        statuses.update((400, 413, 415, 422))
    if any(_all(dependant, kind) for kind in ("path_params", "query_params", "header_params", "body_params")):
        statuses.add(422)
    return sorted(statuses)


def _all(dependant: Dependant, kind: str) -> list[Any]:
    found = list(getattr(dependant, kind))
    for sub in dependant.dependencies:
        found.extend(_all(sub, kind))
    return found


def _problem_response(status: int, route: APIRoute) -> dict[str, Any]:
    if status == 304:
        return {
            "description": "Not modified: the ETag in If-None-Match is current",
            "headers": {"ETag": {"schema": {"type": "string"}}},
        }
    description = CONFLICTS[route.name] if status == 409 else _DESCRIPTIONS[status]
    response: dict[str, Any] = {
        "description": description,
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    if status == 401:
        response["headers"] = {
            "WWW-Authenticate": {
                "required": True,
                "schema": {"type": "string"},
                "description": 'Bearer realm="lineage"',
            }
        }
    return response


def _api_routes(app: FastAPI) -> list[APIRoute]:
    """The JSON API's routes in the document, in the app's order (FastAPI includes
    routers lazily: their routes are reached through the route contexts)."""
    from fastapi.routing import iter_route_contexts

    found = [context.original_route for context in iter_route_contexts(app.routes)]
    return [route for route in found if isinstance(route, APIRoute) and route.include_in_schema]


def _declare(operation: dict[str, Any], status: int, response: dict[str, Any]) -> None:
    declared = operation["responses"].setdefault(str(status), {})
    if "content" in response:  # FastAPI's own 422 says application/json: problems are problem+json
        declared["content"] = response["content"]
    if status == 422:
        declared["description"] = response["description"]
    for key, value in response.items():
        declared.setdefault(key, value)


def contract_document(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document of ``app`` with every route's error responses and the links."""
    document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    paths = document["paths"]
    operation_ids: dict[str, tuple[str, str]] = {}
    for route in _api_routes(app):
        for method in sorted((route.methods or set()) - {"HEAD"}):  # an APIRoute always has them
            operation = paths[route.path_format][method.lower()]
            operation_ids[route.name] = (operation["operationId"], route.path_format)
            for status in error_statuses(route):
                _declare(operation, status, _problem_response(status, route))
            for status, declared in operation["responses"].items():  # a route's own (503 of /ready)
                if status.isdigit() and int(status) >= 400 and "content" not in declared:
                    declared["content"] = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
            operation["responses"] = dict(sorted(operation["responses"].items()))
    for (source, status), links in LINKS.items():
        source_id, source_path = operation_ids[source]
        (operation,) = [op for op in paths[source_path].values() if op["operationId"] == source_id]
        operation["responses"][str(status)]["links"] = {
            name: {"operationId": operation_ids[target][0], "parameters": dict(parameters)}
            for name, (target, parameters) in links.items()
        }
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(problem.pop("$defs", {}))
    schemas["Problem"] = problem
    schemas["JsonValue"] = JSON_VALUE_SCHEMA  # extra's values (api.schema_types), recursive
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    document["components"]["schemas"] = dict(sorted(schemas.items()))
    return document


def install_contract(app: FastAPI) -> None:
    """Serve :func:`contract_document` as the app's OpenAPI document (built once)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = contract_document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
