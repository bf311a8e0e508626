"""Operations: readiness (``/health``, liveness, is the app's own)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api.deps import LedgerDep
from api.problems import problem
from api.schemas import ReadyOut
from lineage import migrate

router = APIRouter(tags=["ops"])


@router.get("/ready", response_model=ReadyOut, responses={503: {"description": "database unreachable or schema behind"}})
async def ready(request: Request, ledger: LedgerDep) -> JSONResponse:
    """Readiness: the database answers and its schema is at the code's head revision."""
    return readiness(request, ledger)


def readiness(request: Request, ledger: LedgerDep) -> JSONResponse:
    head = request.app.state.schema_head
    try:
        current = migrate.current_revision(ledger.engine) or ""
    except Exception as exc:  # any driver error means "not ready"
        return problem(request, 503, f"the database does not answer: {type(exc).__name__}", code="not-ready")
    if current != head:
        return problem(request, 503, f"the schema is at {current or 'nothing'!r}, the code needs {head!r}; "
                       "run `lineage db upgrade`", code="not-ready", schema_revision=current, head=head)
    return JSONResponse({"status": "ready", "schema_revision": current, "head": head})
