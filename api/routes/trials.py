"""Trials of a project: record (idempotent), list (filters, cursor, TSV), get, update,
lineage, and the project's whole trial table as TSV (download and atomic upload)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from api import bodies, present
from api.deps import ExpId, IdempotencyKey, ProjectSlug, Reader, Writer
from api.schema_types import non_blank
from api.schemas import (
    BatchOut,
    ExportQuery,
    HeartbeatIn,
    ImportOut,
    ImportQuery,
    LeaseOut,
    LineageOut,
    RecordOut,
    ResumeOut,
    TrialBatchIn,
    TrialCreate,
    TrialDetailOut,
    TrialFilters,
    TrialPage,
    TrialUpdate,
    UpdatedOut,
)
from lineage.patches import without_patch
from lineage.service import RecordRequest

#: ``?include_patch=true``: a trial's git patch, which answers leave out by default
IncludePatch = Annotated[bool, Query(description="Also extra._git.patch, the commit's diff (left out by default)")]

router = APIRouter(prefix="/api/v1/projects/{project}", tags=["trials"])

_TSV_CONTENT = {"content": {"text/tab-separated-values": {"schema": {"type": "string"}}}}
#: An upload: a results file, not only white space (the ledger says which line is wrong).
_TSV_UPLOAD = {"content": {"text/tab-separated-values": {"schema": {"type": "string", "pattern": non_blank()}}}}


@router.post(
    "/trials",
    status_code=201,
    response_model=RecordOut,
    responses={200: {"model": RecordOut, "description": "already stored (a retry): the stored trial"}},
)
async def record_trial(
    project: ProjectSlug, body: TrialCreate, request: Request, who: Writer, key: IdempotencyKey = None
) -> Response:
    """Record a trial. 201 when stored now, 200 when this exp_id or Idempotency-Key already
    holds the same trial, 409 (with both versions) when it holds another."""
    result = await who.record(project, RecordRequest(body.model_dump(exclude_unset=True), key, similar_prior=True))
    return present.recorded(request, project, result)


@router.post(
    "/trials:batch",
    status_code=201,
    response_model=BatchOut,
    responses={
        200: {
            "model": BatchOut,
            "description": "nothing new: every item (or the whole batch, by its Idempotency-Key) was already stored",
        }
    },
)
async def record_trials(
    project: ProjectSlug,
    body: TrialBatchIn,
    who: Writer,
    key: IdempotencyKey = None,
    similar: Annotated[bool, Query(description="Each new item's similar_prior (earlier close trials)")] = False,
) -> Response:
    """Record up to 1,000 trials (``{"trials": [...]}``, each the body of ``POST
    .../trials`` plus an optional per-item ``idempotency_key``) in order, in one
    transaction: all or nothing. The request body may be up to 64 MiB
    (``LINEAGE_MAX_BODY_BYTES``); more than 1,000 items is a 422 naming ``trials``.

    Each item follows the single record's rules: the server allocates ids in order, a
    left-out parent is the best so far (including earlier items), ``delta_vs_best`` is
    computed against the best before the item. A bad item: 422 (or 409) naming
    ``trials[i].field``, nothing stored. An item whose exp_id or key is stored with the
    same body comes back ``created: false``. ``Idempotency-Key``: the same batch again
    gets 200 with the first answer's trials (``replayed: true``); other trials under
    the key are a 409. Webhooks and guardrails are evaluated once per batch."""
    items = [item.model_dump(exclude_unset=True) for item in body.trials]
    result = await who.long_write(
        who.ledger.recording.record_trials, project, items, idempotency_key=key, similar_prior=similar
    )
    return present.FastJSONResponse(result.to_dict(), status_code=201 if result.created else 200)


@router.get("/trials", response_model=TrialPage, responses={200: _TSV_CONTENT})
async def list_trials(
    project: ProjectSlug, args: Annotated[TrialFilters, Query()], request: Request, who: Reader
) -> Response:
    """Filtered trials in a stable order, a page at a time (``next_cursor``); as fieldkit
    TSV with ``?format=tsv`` or ``Accept: text/tab-separated-values``."""
    return present.trials(request, who.ledger, project, args)


@router.get("/trials.tsv", response_class=Response, responses={200: _TSV_CONTENT})
def download_tsv(project: ProjectSlug, args: Annotated[ExportQuery, Query()], who: Reader) -> Response:
    """Every trial of the project as a fieldkit results.tsv (``extended``: plus clip-scale and extra)."""
    return present.tsv_download(who.ledger, project, args.extended)


@router.post(
    "/trials.tsv",
    status_code=201,
    response_model=ImportOut,
    responses={200: {"model": ImportOut, "description": "a preview: checked and decided, nothing stored"}},
    openapi_extra={"requestBody": {"required": True, **_TSV_UPLOAD}},
)
async def upload_tsv(
    project: ProjectSlug, args: Annotated[ImportQuery, Query()], request: Request, who: Writer
) -> Response:
    """Import a results file atomically, with every option of ``lineage import`` (format
    ``auto`` by default): one bad row and nothing is stored; the error names its
    ``line``, ``column`` and ``field``. The answer says what was decided: the format,
    the metric, the direction and why, the warnings and the lines kept as text."""
    body = await bodies.spool_body(request)
    try:
        return await who.long_write(bodies.import_tsv, who.ledger, project, body.file, args)
    finally:
        await body.close()


@router.get("/trials/{exp_id}", response_model=TrialDetailOut)
async def get_trial(project: ProjectSlug, exp_id: ExpId, who: Reader, include_patch: IncludePatch = False) -> Any:
    """One trial; its git patch (``extra._git.patch``) only with ``include_patch=true``;
    ``rerun_of`` when it was recorded as a rerun of another trial."""
    found, rerun_of = who.ledger.trials.trial_with_rerun(project, exp_id)
    trial = found.to_dict()
    if rerun_of is not None:
        trial["rerun_of"] = rerun_of
    return present.FastJSONResponse(trial if include_patch else without_patch(trial))


@router.patch("/trials/{exp_id}", response_model=UpdatedOut)
async def update_trial(project: ProjectSlug, exp_id: ExpId, body: TrialUpdate, who: Writer) -> dict[str, Any]:
    """Change a stored trial; ``delta_vs_best`` is recomputed by the server. The answer
    is the trial and its delta against the project's noise floor (``noise``)."""
    updated = await who.small_write(
        who.ledger.recording.update_judged, project, exp_id, body.model_dump(exclude_unset=True)
    )
    return updated.to_dict()


@router.post("/trials/{exp_id}/heartbeat", response_model=LeaseOut)
async def heartbeat(
    project: ProjectSlug, exp_id: ExpId, who: Writer, body: HeartbeatIn | None = None
) -> dict[str, Any]:
    """Keep a running trial alive (it becomes ``harness_abort`` when its heartbeats stop
    for its lease); 409 naming ``status`` when the trial is not running, ``owner`` when
    another owner holds it (the problem's ``existing``: the trial, its owner, its status)."""
    owner = body.owner if body is not None else None
    lease = await who.small_write(who.ledger.leases.heartbeat, project, exp_id, owner=owner)
    return lease.to_dict()


@router.post("/trials/{exp_id}/resume", response_model=ResumeOut)
async def resume(project: ProjectSlug, exp_id: ExpId, who: Writer, body: HeartbeatIn | None = None) -> dict[str, Any]:
    """Continue a preempted run's trial under ``owner`` (a running trial, or one ended by
    ``harness_abort``, runs on); 409 naming the trial and its ``status`` when it is
    finished. The answer says where the run takes up: ``last_step`` and ``last_values``."""
    owner = body.owner if body is not None else None
    resumed = await who.small_write(who.ledger.leases.resume, project, exp_id, owner=owner)
    return resumed.to_dict()


@router.get("/trials/{exp_id}/lineage", response_model=LineageOut)
async def trial_lineage(project: ProjectSlug, exp_id: ExpId, who: Reader) -> dict[str, Any]:
    """The trial's chain of parents, root first, the trial last."""
    return {"exp_id": exp_id, "chain": [without_patch(t.to_dict()) for t in who.ledger.trials.chain(project, exp_id)]}
