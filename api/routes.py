"""The JSON API under ``/api/v1`` (plus ``/ready``): one router per resource.

Handlers stay a call or two long: the rules are the service's (``lineage.service``,
``lineage.auth``, ``lineage.telemetry``), responses are built by ``api.present``, and
errors become problem+json in ``api.problems``. Reads and small writes run inline in
``async def`` handlers (a thread-pool hop would cost about as much as the call); work
that grows with the input (file import, telemetry batches and series, summaries,
project deletion) runs in the thread pool, and while such a write is in flight the
small writes go there too (``api.deps.WriteLanes``: they may wait for its lock).

=======  ===============================================  ======  =========================
method   path (under ``/api/v1``)                         role    what
=======  ===============================================  ======  =========================
POST     /projects                                        writer  create a project
GET      /projects                                        reader  list projects
GET      /projects/{p}                                    reader  one project (ETag)
PATCH    /projects/{p}                                    writer  title, metric, direction,
                                                                  policy, prompt_template
DELETE   /projects/{p}                                    admin   delete with its trials
POST     /projects/{p}/trials                             writer  record (201/200/409)
GET      /projects/{p}/trials                             reader  filter, sort, cursor; TSV
GET      /projects/{p}/trials/{exp}                       reader  one trial
PATCH    /projects/{p}/trials/{exp}                       writer  status, metric, notes, ...
GET      /projects/{p}/trials/{exp}/lineage               reader  chain from the root
GET      /projects/{p}/trials.tsv                         reader  the whole table as TSV
POST     /projects/{p}/trials.tsv                         writer  atomic TSV import
POST     /projects/{p}/trials/{exp}/telemetry             writer  a batch of points
GET      /projects/{p}/trials/{exp}/telemetry             reader  series (min/max buckets)
POST     /projects/{p}/trials/{exp}/telemetry/summarize   writer  ig_clip_scale_* from it
GET      /projects/{p}/explore                            reader  curves of many trials, grouped
GET      /projects/{p}/prompt                             reader  agent prompt (ETag)
GET      /projects/{p}/knowledge                          reader  KNOWLEDGE.md / JSON (ETag)
GET      /projects/{p}/similar?q=TEXT                     reader  "was this tried?"
POST     /projects/{p}/similar                            reader  the same, q in a JSON body
GET      /projects/{p}/summary                            reader  progress, trend, guardrails
GET      /projects/{p}/guardrails                         reader  policy and trips
PUT      /projects/{p}/guardrails                         writer  set the policy
GET      /projects/{p}/hooks                              admin   webhooks
POST     /projects/{p}/hooks                              admin   add (secret shown once)
DELETE   /projects/{p}/hooks/{id}                         admin   remove
GET      /tokens                                          admin   list tokens
POST     /tokens                                          admin   create (secret shown once)
DELETE   /tokens/{name}                                   admin   revoke
=======  ===============================================  ======  =========================
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request, Response
from fastapi.responses import JSONResponse

from api import present
from api.deps import Access, Admin, ExpId, IdempotencyKey, IfNoneMatch, LedgerDep, ProjectSlug, Reader, Writer
from api.schemas import (
    ExploreArgs,
    ExploreOut,
    ExportQuery,
    GuardrailPolicyBody,
    GuardrailsOut,
    HookCreate,
    HookCreated,
    HookOut,
    ImportOut,
    ImportQuery,
    KnowledgeOut,
    KnowledgeQuery,
    LineageOut,
    ProjectCreate,
    ProjectOut,
    ProgressOut,
    ProgressQuery,
    ProjectUpdate,
    PromptQuery,
    ReadyOut,
    RecordOut,
    SimilarBody,
    SimilarPage,
    SimilarQuery,
    SummaryOut,
    TelemetryAccepted,
    TelemetryOut,
    TelemetryQuery,
    Text,
    TokenCreate,
    TokenCreated,
    TokenOut,
    TrialCreate,
    TrialFilters,
    TrialOut,
    TrialPage,
    TrialUpdate,
    telemetry_batch_schema,
)


# -- ops -------------------------------------------------------------------------------
#
# Operations: readiness (``/health``, liveness, is the app's own).

ops_router = APIRouter(tags=["ops"])


@ops_router.get("/ready", response_model=ReadyOut, responses={503: {"description": "database unreachable or schema behind"}})
async def ready(request: Request, ledger: LedgerDep) -> Response:
    """Readiness: the database answers and its schema is at the code's head revision."""
    return present.readiness(request, ledger)


# -- projects --------------------------------------------------------------------------
#
# Projects: create, list, get (with ETag), update, delete (admin).

projects_router = APIRouter(prefix="/api/v1/projects", tags=["projects"])


@projects_router.post("", status_code=201, response_model=ProjectOut)
async def create_project(body: ProjectCreate, who: Writer) -> Response:
    return present.project_created(await who.small_write(who.ledger.create_project, **body.model_dump()))


@projects_router.get("", response_model=list[ProjectOut])
async def list_projects(who: Reader) -> list[dict[str, Any]]:
    return [present.project_json(p) for p in who.ledger.projects()]


@projects_router.get("/{project}", response_model=ProjectOut)
async def get_project(project: ProjectSlug, who: Reader, if_none_match: IfNoneMatch = None) -> Response:
    return present.project_response(who.ledger.project(project), if_none_match)


@projects_router.patch("/{project}", response_model=ProjectOut)
async def update_project(project: ProjectSlug, body: ProjectUpdate, who: Writer) -> dict[str, Any]:
    return present.project_json(await who.small_write(who.ledger.update_project, project,
                                                      body.model_dump(exclude_unset=True)))


@projects_router.delete("/{project}", status_code=204, response_class=Response)
async def delete_project(project: ProjectSlug, who: Admin) -> Response:
    await who.long_write(who.ledger.delete_project, project)
    return Response(status_code=204)


# -- trials ----------------------------------------------------------------------------
#
# Trials: record (idempotent), list (filters, cursor, TSV), get, update, lineage, and
# the project's whole trial table as TSV (download and atomic upload).

trials_router = APIRouter(prefix="/api/v1/projects/{project}", tags=["trials"])

_TSV_CONTENT = {"content": {"text/tab-separated-values": {"schema": {"type": "string"}}}}


@trials_router.post("/trials", status_code=201, response_model=RecordOut,
                     responses={200: {"model": RecordOut, "description": "already stored (a retry): the stored trial"}})
async def record_trial(
    project: ProjectSlug, body: TrialCreate, request: Request, who: Writer, key: IdempotencyKey = None
) -> Response:
    """Record a trial. 201 when stored now, 200 when this exp_id or Idempotency-Key already
    holds the same trial, 409 (with both versions) when it holds another."""
    result = await who.small_write(who.ledger.record_trial, project, body.model_dump(exclude_unset=True),
                                   idempotency_key=key, similar_prior=True)
    return present.recorded(request, project, result)


@trials_router.get("/trials", response_model=TrialPage, responses={200: _TSV_CONTENT})
async def list_trials(
    project: ProjectSlug, args: Annotated[TrialFilters, Query()], request: Request, who: Reader
) -> Response:
    """Filtered trials in a stable order, a page at a time (``next_cursor``); as fieldkit
    TSV with ``?format=tsv`` or ``Accept: text/tab-separated-values``."""
    return present.trials(request, who.ledger, project, args)


@trials_router.get("/trials.tsv", response_class=Response, responses={200: _TSV_CONTENT})
def download_tsv(project: ProjectSlug, args: Annotated[ExportQuery, Query()], who: Reader) -> Response:
    """Every trial of the project as a fieldkit results.tsv (``extended``: plus clip-scale and extra)."""
    return present.tsv_download(who.ledger, project, args.extended)


@trials_router.post("/trials.tsv", status_code=201, response_model=ImportOut,
                     openapi_extra={"requestBody": {"required": True, **_TSV_CONTENT}})
async def upload_tsv(
    project: ProjectSlug, args: Annotated[ImportQuery, Query()], request: Request, who: Writer
) -> Response:
    """Import a results file atomically: one bad row and nothing is stored; the error
    names its ``line``, ``column`` and ``field``."""
    text = present.request_text(await request.body())
    return await who.long_write(present.import_tsv, who.ledger, project, text, args)


@trials_router.get("/trials/{exp_id}", response_model=TrialOut)
async def get_trial(project: ProjectSlug, exp_id: ExpId, who: Reader) -> dict[str, Any]:
    return present.trial_json(who.ledger.trial(project, exp_id))


@trials_router.patch("/trials/{exp_id}", response_model=TrialOut)
async def update_trial(project: ProjectSlug, exp_id: ExpId, body: TrialUpdate, who: Writer) -> dict[str, Any]:
    """Change a stored trial; ``delta_vs_best`` is recomputed by the server."""
    return present.trial_json(await who.small_write(who.ledger.update_trial, project, exp_id,
                                                    body.model_dump(exclude_unset=True)))


@trials_router.get("/trials/{exp_id}/lineage", response_model=LineageOut)
async def trial_lineage(project: ProjectSlug, exp_id: ExpId, who: Reader) -> dict[str, Any]:
    """The trial's chain of parents, root first, the trial last."""
    return {"exp_id": exp_id, "chain": [present.trial_json(t) for t in who.ledger.chain(project, exp_id)]}


# -- telemetry -------------------------------------------------------------------------
#
# Telemetry of a trial: batches in (gzip welcome, idempotent by batch id), series out
# (min/max-bucketed when long), and the clip-scale summary derived from it. The rules
# are ``lineage.telemetry``'s (see its module doc).

telemetry_router = APIRouter(prefix="/api/v1/projects/{project}/trials/{exp_id}/telemetry", tags=["telemetry"])


@telemetry_router.post("", status_code=201, response_model=TelemetryAccepted,
                     responses={200: {"model": TelemetryAccepted, "description": "a replayed batch: nothing written"}},
                     openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {"schema": telemetry_batch_schema()}}}})
async def post_telemetry(
    project: ProjectSlug, exp_id: ExpId, request: Request, who: Writer, key: IdempotencyKey = None
) -> Response:
    """Store a batch of points, all or nothing. ``batch_id`` (or ``Idempotency-Key``)
    makes a replay insert nothing; ``Content-Encoding: gzip`` is accepted."""
    body = await request.body()
    return await who.long_write(present.ingest_telemetry, who.ledger, project, exp_id, body, key)


@telemetry_router.get("", response_model=TelemetryOut)
def get_telemetry(
    project: ProjectSlug, exp_id: ExpId, args: Annotated[TelemetryQuery, Query()], who: Reader,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """Series by ``(name, turn)``: whole up to ``max_points`` points, else min/max per
    bucket of equal step width (``method: minmax``)."""
    return present.telemetry_series(who.ledger, project, exp_id, args, if_none_match)


@telemetry_router.post("/summarize", response_model=SummaryOut)
async def summarize(project: ProjectSlug, exp_id: ExpId, who: Writer) -> dict[str, Any]:
    """Derive the trial's ig_clip_scale_* fields from its clip_scale_* telemetry and store them."""
    trial, derived = await who.long_write(who.ledger.summarize_telemetry, project, exp_id)
    return {"trial": present.trial_json(trial), "derived": derived}


# -- metric explorer -------------------------------------------------------------------
#
# Telemetry curves of many trials, grouped and aggregated (``lineage.browse.explore``'s rules);
# the page ``/projects/{p}/explore`` draws the same answer.

explore_router = APIRouter(prefix="/api/v1/projects/{project}", tags=["explore"])


@explore_router.get("/explore", response_model=ExploreOut)
def explore(project: ProjectSlug, args: Annotated[ExploreArgs, Query()], who: Reader) -> JSONResponse:
    """Curves of the selected trials per metric on a shared step grid (downsampled by
    the rule of ``lineage.browse.explore``), each group's mean with its band."""

    return JSONResponse(who.ledger.explore(project, args.to_query()), headers={"Cache-Control": "no-cache"})


# -- agent -----------------------------------------------------------------------------
#
# What an agent reads at session start: the prompt and the KNOWLEDGE.md block, with
# ETags from the project's revision (``api.present``), so polling costs one query.

agent_router = APIRouter(prefix="/api/v1/projects/{project}", tags=["agent"])

_MARKDOWN = {"content": {"text/markdown": {"schema": {"type": "string"}}}, "description": "Markdown"}


@agent_router.get("/prompt", response_class=Response, responses={200: _MARKDOWN, 304: {"description": "unchanged"}})
async def get_prompt(
    project: ProjectSlug, args: Annotated[PromptQuery, Query()], request: Request, who: Reader,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """The session-start prompt. ``raw=true``: exactly `lineage prompt`'s bytes; else inside
    the project's prompt template with the next exp_id, the metric and how to record."""
    return present.prompt(request, who.ledger, project, args, if_none_match)


@agent_router.get("/knowledge", response_class=Response,
                        responses={200: {"content": {"text/markdown": {"schema": {"type": "string"}},
                                               "application/json": {"schema": KnowledgeOut.model_json_schema()}}},
                             304: {"description": "unchanged"}})
async def get_knowledge(
    project: ProjectSlug, args: Annotated[KnowledgeQuery, Query()], request: Request, who: Reader,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """The KNOWLEDGE.md block; ``format=json``: the best, its chain and the recent trials as data."""
    return present.knowledge(request, who.ledger, project, args, if_none_match)


@agent_router.get("/similar", response_model=SimilarPage)
async def find_similar(project: ProjectSlug, args: Annotated[SimilarQuery, Query()], who: Reader) -> dict[str, Any]:
    """Was this tried? Past trials whose hypothesis and notes are closest to ``q``,
    closest first, each with a score in [0, 1] (the rule: ``lineage.similar``).

    A ``q`` over 2,000 characters is a 422 naming ``q``; but the whole URL must stay under
    the HTTP server's request-line limit (uvicorn: about 64 KB), past which uvicorn itself
    answers ``400 Invalid HTTP request received.`` as text/plain before this API sees the
    request. Texts of unknown length (an agent's whole idea): use ``POST .../similar``."""
    return _similar_page(who, project, args.q, args.limit)


@agent_router.post("/similar", response_model=SimilarPage)
async def find_similar_of_body(project: ProjectSlug, body: SimilarBody, who: Reader) -> dict[str, Any]:
    """The same search with ``{"q": TEXT, "limit": N}`` as the JSON body: any length of
    text gets this API's answer (over 2,000 characters: 422 naming ``q``; a body over the
    server's ``--max-body-bytes``: 413). A read: it changes nothing, so it is the reader's."""
    return _similar_page(who, project, body.q, body.limit)


def _similar_page(who: Access, project: str, text: str, limit: int) -> dict[str, Any]:
    found = who.ledger.find_similar(project, text, limit, field="q")
    return {"project": project, "q": text, "items": [similar.to_dict() for similar in found]}


# -- progress --------------------------------------------------------------------------
#
# Where a research loop stands (``lineage.monitor.progress``), its guardrails (``lineage.monitor.guardrails``:
# a writer sets them, as it configures the project) and its webhooks (``lineage.monitor.hooks``:
# admin only, they send the project's events to other hosts and hold signing secrets).

progress_router = APIRouter(prefix="/api/v1/projects/{project}", tags=["progress"])


@progress_router.get("/summary", response_model=ProgressOut)
async def get_summary(project: ProjectSlug, args: Annotated[ProgressQuery, Query()], who: Reader) -> dict[str, Any]:
    """Trials per status, keep rate (all and the last ``last``), baseline, best and when it
    was reached, trials since the last improvement, improvement per 10 trials, crash
    streak, time spent, the trend with its rule, and the guardrails."""
    return who.ledger.summary(project, last_n=args.last).to_dict()


@progress_router.get("/guardrails", response_model=GuardrailsOut)
async def get_guardrails(project: ProjectSlug, who: Reader) -> dict[str, Any]:
    found = who.ledger.summary(project).guardrails
    return found or {"policy": who.ledger.guardrail_policy(project).to_dict(), "tripped": []}


@progress_router.put("/guardrails", response_model=GuardrailsOut)
async def put_guardrails(project: ProjectSlug, body: GuardrailPolicyBody, who: Writer) -> dict[str, Any]:
    """Replace the guardrails (a missing or null limit is off); a limit already reached trips now."""
    await who.small_write(who.ledger.set_guardrails, project, body.model_dump())
    found = who.ledger.summary(project).guardrails
    return found or {"policy": body.model_dump(), "tripped": []}


@progress_router.get("/hooks", response_model=list[HookOut])
async def list_hooks(project: ProjectSlug, who: Admin) -> list[dict[str, Any]]:
    return [hook.to_dict() for hook in who.ledger.hooks(project)]


@progress_router.post("/hooks", status_code=201, response_model=HookCreated)
async def add_hook(project: ProjectSlug, body: HookCreate, who: Admin) -> JSONResponse:
    """Add a webhook; its signing secret is in this response only."""
    hook, secret = await who.small_write(who.ledger.add_hook, project, body.url, events=body.events,
                                         body_format=body.format)
    return JSONResponse({**hook.to_dict(), "secret": secret}, status_code=201, headers={"Cache-Control": "no-store"})


@progress_router.delete("/hooks/{hook_id}", status_code=204, response_class=Response)
async def remove_hook(project: ProjectSlug, hook_id: int, who: Admin) -> Response:
    await who.small_write(who.ledger.remove_hook, project, hook_id)
    return Response(status_code=204)


# -- tokens ----------------------------------------------------------------------------
#
# Token management over HTTP (admin only; ``lineage token`` does the same locally).

tokens_router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"])


@tokens_router.get("", response_model=list[TokenOut])
async def list_tokens(who: Admin) -> list[dict[str, Any]]:
    return [record.to_dict() for record in who.ledger.list_tokens()]


@tokens_router.post("", status_code=201, response_model=TokenCreated)
async def create_token(body: TokenCreate, who: Admin) -> JSONResponse:
    """Create a token; the secret is in this response only."""
    record, secret = await who.small_write(who.ledger.create_token, name=body.name, role=body.role)
    return JSONResponse({**record.to_dict(), "token": secret}, status_code=201, headers={"Cache-Control": "no-store"})


@tokens_router.delete("/{name}", status_code=204, response_class=Response)
async def revoke_token(name: Text, who: Admin) -> Response:
    await who.small_write(who.ledger.revoke_token, name)
    return Response(status_code=204)


def install_routes(app: FastAPI) -> None:
    for router in (ops_router, projects_router, trials_router, telemetry_router, agent_router, progress_router,
                   tokens_router, explore_router):
        app.include_router(router)
