"""The metric explorer's JSON: telemetry curves of many trials, grouped and aggregated
(``lineage.browse.explore``'s rules); the page ``/projects/{p}/explore`` draws the same answer."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from api.deps import ProjectSlug, Reader
from api.schemas import ExploreArgs, ExploreOut

router = APIRouter(prefix="/api/v1/projects/{project}", tags=["explore"])


@router.get("/explore", response_model=ExploreOut)
def explore(project: ProjectSlug, args: Annotated[ExploreArgs, Query()], who: Reader) -> JSONResponse:
    """Curves of the selected trials per metric on a shared step grid (downsampled by
    the rule of ``lineage.browse.explore``), each group's mean with its band."""

    return JSONResponse(who.ledger.explore(project, args.to_query()), headers={"Cache-Control": "no-cache"})
