"""Claims and the frontier over HTTP: an agent claims an idea before running it (one rule:
``ledger.claims.claim``), finishes it with its result (``ledger.claims.finish``: its
owner alone), and every agent sees who is running what, the best and the branch tip
(``ledger.leases.running``, ``ledger.claims.frontier``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from api.deps import ExpId, IdempotencyKey, ProjectSlug, Reader, Writer
from api.schemas import ClaimIn, ClaimOut, FinishIn, FrontierOut, RunningOut, UpdatedOut
from lineage.service.claims import PLAN_FIELDS

router = APIRouter(prefix="/api/v1/projects/{project}", tags=["claims"])


@router.post(
    "/claims",
    status_code=201,
    response_model=ClaimOut,
    responses={200: {"model": ClaimOut, "description": "already claimed (a retry by Idempotency-Key): the claim"}},
)
async def claim_trial(
    project: ProjectSlug, body: ClaimIn, response: Response, who: Writer, key: IdempotencyKey = None
) -> dict[str, Any]:
    """Claim an idea before running it: 201 with a running trial held by ``owner`` and its
    near-duplicates (trials tried, other owners' running claims). 409 naming the running
    claim and its owner when the project refuses duplicate claims (``duplicate_claims``).
    Keep it with heartbeats; finish it with a PATCH of the trial."""
    claim = await who.small_write(
        who.ledger.claims.claim,
        project,
        body.hypothesis,
        owner=body.owner,
        parent_exp=body.parent_exp,
        notes=body.notes,
        extra=body.extra,
        lease_s=body.lease_s,
        idempotency_key=key,
        plan=body.model_dump(exclude_unset=True, include=set(PLAN_FIELDS)),
    )
    if not claim.created:
        response.status_code = 200
    return claim.to_dict()


@router.post("/claims/{exp_id}/finish", response_model=UpdatedOut)
async def finish_claim(project: ProjectSlug, exp_id: ExpId, body: FinishIn, who: Writer) -> dict[str, Any]:
    """Record a claim's result, sent by its owner: the trial's changes (``status`` left
    out: ``auto``, the ledger's verdict), answered with the trial and its delta against
    the noise floor (``noise``). 409 naming the trial, its owner and its status when
    another owner holds it or it is no longer running (finished, or its lease lapsed);
    nothing changes then."""
    changes = body.model_dump(exclude_unset=True, exclude={"owner"})
    finished = await who.small_write(who.ledger.claims.finish, project, exp_id, owner=body.owner, changes=changes)
    return finished.to_dict()


@router.get("/running", response_model=RunningOut)
async def list_running(project: ProjectSlug, who: Reader) -> dict[str, Any]:
    """Who is running what: the running trials (owner, hypothesis, since, last heartbeat)."""
    return {"items": [lease.to_dict() for lease in who.ledger.leases.running(project)]}


@router.get("/frontier", response_model=FrontierOut)
async def get_frontier(project: ProjectSlug, who: Reader) -> dict[str, Any]:
    """The best, the branch tip and who is running what, read together."""
    return who.ledger.claims.frontier(project).to_dict()
