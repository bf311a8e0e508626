"""The trainer's path: telemetry of a trial. Batches in (gzip welcome, idempotent by batch
id), series out (min/max-bucketed when long), and the clip-scale summary derived from
it. The rules are ``lineage.telemetry``'s (see its module doc)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from api import bodies, present
from api.deps import ExpId, IdempotencyKey, IfNoneMatch, ProjectSlug, Reader, Writer
from api.schemas import SummaryOut, TelemetryAccepted, TelemetryOut, TelemetryQuery, telemetry_batch_schema

router = APIRouter(prefix="/api/v1/projects/{project}/trials/{exp_id}/telemetry", tags=["telemetry"])


@router.post(
    "",
    status_code=201,
    response_model=TelemetryAccepted,
    responses={200: {"model": TelemetryAccepted, "description": "a replayed batch: nothing written"}},
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": telemetry_batch_schema()}}}
    },
)
async def post_telemetry(
    project: ProjectSlug, exp_id: ExpId, request: Request, who: Writer, key: IdempotencyKey = None
) -> Response:
    """Store a batch of points, all or nothing. ``batch_id`` (or ``Idempotency-Key``)
    makes a replay insert nothing; ``Content-Encoding: gzip`` is accepted."""
    body = await request.body()
    return await who.long_write(bodies.ingest_telemetry, who.ledger, project, exp_id, body, key)


@router.get("", response_model=TelemetryOut)
def get_telemetry(
    project: ProjectSlug,
    exp_id: ExpId,
    args: Annotated[TelemetryQuery, Query()],
    who: Reader,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """Series by ``(name, turn)``: whole up to ``max_points`` points, else min/max per
    bucket of equal step width (``method: minmax``)."""
    return present.telemetry_series(who.ledger, project, exp_id, args, if_none_match)


@router.post("/summarize", response_model=SummaryOut)
async def summarize(project: ProjectSlug, exp_id: ExpId, who: Writer) -> dict[str, Any]:
    """Derive the trial's ig_clip_scale_* fields from its clip_scale_* telemetry and store them."""
    trial, derived = await who.long_write(who.ledger.telemetry.summarize_telemetry, project, exp_id)
    return {"trial": trial.to_dict(), "derived": derived}
