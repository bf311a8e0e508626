"""Operations: readiness (``GET /ready``; ``/health``, liveness, is the app's own)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from api import present
from api.deps import LedgerDep
from api.schemas import ReadyOut

router = APIRouter(tags=["ops"])


@router.get(
    "/ready", response_model=ReadyOut, responses={503: {"description": "database unreachable or schema behind"}}
)
async def ready(request: Request, ledger: LedgerDep) -> Response:
    """Readiness: the database answers and its schema is at the code's head revision."""
    return present.readiness(request, ledger)
