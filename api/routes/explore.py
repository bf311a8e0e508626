"""The metric explorer's JSON: telemetry curves of many trials, grouped and aggregated
(``lineage.browse.explore``'s rules); the page ``/projects/{p}/explore`` draws the same answer."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from api.deps import ProjectSlug, Reader
from api.schemas import ExploreArgs, ExploreOut, KnobHistoryOut, KnobsHistoryOut
from lineage.service.knobs import MAX_KNOB_CHARS

router = APIRouter(prefix="/api/v1/projects/{project}", tags=["explore"])


@router.get("/explore", response_model=ExploreOut)
def explore(project: ProjectSlug, args: Annotated[ExploreArgs, Query()], who: Reader) -> JSONResponse:
    """Curves of the selected trials per metric on a shared step grid (downsampled by
    the rule of ``lineage.browse.explore``), each group's mean with its band."""

    return JSONResponse(who.ledger.browse.explore(project, args.to_query()), headers={"Cache-Control": "no-cache"})


@router.get("/knobs")
def knobs(
    project: ProjectSlug,
    who: Reader,
    x: Annotated[
        str | None,
        Query(
            description="the knob: a column key (extra.KEY, a trial field), knob.NAME (the values trials set "
            "it to in patches, configs, columns, hypotheses) or telemetry.NAME.SUMMARY (last, first, min, max, mean)"
        ),
    ] = None,
    axes: Annotated[str | None, Query(description="more axes, comma-separated (parallel coordinates)")] = None,
    limit: Annotated[int, Query(ge=1, le=20_000, description="the newest trials with the knob to read")] = 2000,
) -> JSONResponse:
    """The knob view's data (the page ``/projects/{p}/knobs``): each trial's value of
    every axis with its status and metric, whether it is on the chain to the best, the
    axes (numeric or category) and the knobs to choose from."""
    keys = [k for k in [x or "", *(axes or "").split(",")] if k.strip()]
    view = who.ledger.browse.knobs(project, keys or None, limit=limit)
    return JSONResponse(view.as_dict(), headers={"Cache-Control": "no-cache"})


@router.get("/knobs/{knob}", response_model=KnobHistoryOut)
def knob_history(
    project: ProjectSlug,
    knob: Annotated[
        str,
        Path(
            min_length=1,
            max_length=MAX_KNOB_CHARS,
            pattern=r"^[\s\S]*[A-Za-z0-9][\s\S]*$",
            description="the knob in any spelling: MATRIX_LR, matrix lr, learning_rate, --lr",
        ),
    ],
    who: Reader,
) -> JSONResponse:
    """Every value the knob was tried at, in the order first tried, each with its trials
    (exp_id, status, metric, delta), read from the trials' patches, configs and
    hypotheses (the rule: ``lineage.service.knobs``). A knob never tried has no values."""
    return JSONResponse(who.ledger.knobs.history(project, knob).to_dict(), headers={"Cache-Control": "no-cache"})


@router.get("/knob-history", response_model=KnobsHistoryOut)
def knobs_history(
    project: ProjectSlug,
    who: Reader,
    knob: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_KNOB_CHARS,
            description="one knob in any spelling (MATRIX_LR, matrix lr, learning_rate); omitted: every knob",
        ),
    ] = None,
) -> JSONResponse:
    """What each knob was tried at: per knob, the values in the order first tried, each
    with its trials (exp_id, status, metric, delta), read from the trials' patches,
    configs, results-file columns and hypotheses (``lineage.service.knobs``). Without
    ``knob``: the knobs of the project's newest tries (``window``)."""
    body = who.ledger.knobs.knob_history(project, knob, field="knob")
    return JSONResponse(body, headers={"Cache-Control": "no-cache"})
