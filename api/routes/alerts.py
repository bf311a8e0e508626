"""Alerts from training code over HTTP: a trainer (or anyone with a writer token) raises
one for a trial; readers list a trial's or a project's, newest first. The rules are
``lineage.alerts``' (a bad field is a 422 problem naming it); recording an alert also
writes its ``alert`` webhook event, in the same transaction.

=======  ===============================================  ======  =========================
method   path (under ``/api/v1``)                         role    what
=======  ===============================================  ======  =========================
POST     /projects/{p}/trials/{exp}/alerts                writer  raise an alert (201; a
                                                                  retry with its
                                                                  Idempotency-Key: 200)
GET      /projects/{p}/trials/{exp}/alerts                reader  the trial's, newest first
GET      /projects/{p}/alerts                             reader  the project's, newest first
=======  ===============================================  ======  =========================
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api.deps import ExpId, IdempotencyKey, ProjectSlug, Reader, Writer
from api.schema_types import TEXT_CHECKS, WholeNumber, non_blank
from api.schemas import Number, Strict, Text
from lineage.alerts import ALERT_LEVELS, MAX_LIMIT, MAX_STEP, MAX_TEXT, MAX_TITLE

router = APIRouter(prefix="/api/v1/projects/{project}", tags=["alerts"])

AlertLevel = Literal[ALERT_LEVELS]  # type: ignore[valid-type]
#: Control characters, which a title may not hold (a character-class body).
_CONTROL = "\\x00-\\x1f\\x7f"
#: Levels, comma-separated; white space around each and empty parts are ignored.
_LEVEL = "|".join(ALERT_LEVELS)
_LEVELS = f"^\\s*({_LEVEL})?\\s*(,\\s*({_LEVEL})?\\s*)*$"
AlertTitle = Annotated[str, Field(max_length=MAX_TITLE, pattern=non_blank(_CONTROL)), *TEXT_CHECKS]
AlertText = Annotated[str, Field(max_length=MAX_TEXT), *TEXT_CHECKS]
AlertStep = Annotated[int, WholeNumber(0, MAX_STEP)]
LevelList = Annotated[str, Field(pattern=_LEVELS), *TEXT_CHECKS]


class AlertCreate(Strict):
    title: AlertTitle = Field(description=f"One line, at most {MAX_TITLE} characters, not only white space")
    text: AlertText = Field("", description="Line breaks allowed")
    level: AlertLevel = "info"
    step: AlertStep | None = Field(None, description="The training step, if known")
    wall_time: Number | None = Field(None, description="The sender's clock, seconds since the epoch")


class AlertOut(BaseModel):
    id: int
    exp_id: str
    level: AlertLevel
    title: str
    text: str
    step: int | None
    wall_time: float | None
    created_at: str | None


class AlertPage(BaseModel):
    items: list[AlertOut]
    next_before_id: int | None = Field(description="Pass as ?before_id= for older alerts; null when none are left")


class AlertQuery(Strict):
    level: list[LevelList] | None = Field(None, description="Only these levels (repeat, or comma-separate)")
    limit: int = Field(50, ge=1, le=MAX_LIMIT)
    before_id: int | None = Field(None, ge=1, description="Alerts older than this id (the next page)")


class ProjectAlertQuery(AlertQuery):
    exp_id: Text | None = Field(None, description="Only this trial's")


@router.post(
    "/trials/{exp_id}/alerts",
    status_code=201,
    response_model=AlertOut,
    responses={200: {"model": AlertOut, "description": "already stored under this Idempotency-Key"}},
)
async def raise_alert(
    project: ProjectSlug, exp_id: ExpId, body: AlertCreate, who: Writer, key: IdempotencyKey = None
) -> JSONResponse:
    """Store an alert of the trial and send its ``alert`` event to the project's webhooks."""
    alert, created = await who.small_write(
        who.ledger.alerts.record_alert, project, exp_id, body.model_dump(), idempotency_key=key
    )
    return JSONResponse(alert.to_dict(), status_code=201 if created else 200)


@router.get("/trials/{exp_id}/alerts", response_model=AlertPage)
async def trial_alerts(
    project: ProjectSlug, exp_id: ExpId, args: Annotated[AlertQuery, Query()], who: Reader
) -> dict[str, Any]:
    return _page(who, project, exp_id, args)


@router.get("/alerts", response_model=AlertPage)
async def project_alerts(
    project: ProjectSlug, args: Annotated[ProjectAlertQuery, Query()], who: Reader
) -> dict[str, Any]:
    """The project's alerts, newest first (``exp_id``: one trial's)."""
    return _page(who, project, args.exp_id, args)


def _page(who: Any, project: str, exp_id: str | None, args: AlertQuery) -> dict[str, Any]:
    items, next_before_id = who.ledger.alerts.alerts_page(
        project, exp_id=exp_id, levels=args.level, before_id=args.before_id, limit=args.limit
    )
    return {"items": [alert.to_dict() for alert in items], "next_before_id": next_before_id}
