"""The agent's path over HTTP: what an agent reads at session start (the prompt and the
KNOWLEDGE.md block, with ETags from the project's revision, so polling costs one
query), "was this tried?", and where its loop stands: the progress summary
(``lineage.monitor.progress``), the guardrails (``lineage.monitor.guardrails``: a writer sets them, as it
configures the project) and the webhooks (``lineage.monitor.hooks``: admin only, they send the
project's events to other hosts and hold signing secrets).

One router; each operation keeps its OpenAPI tag (``agent`` or ``progress``).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse

from api import present
from api.deps import Access, Admin, IfNoneMatch, ProjectSlug, Reader, Writer
from api.monitor_schemas import (
    GuardrailPolicyBody,
    GuardrailsOut,
    HookCreate,
    HookCreated,
    HookOut,
    ProgressOut,
    ProgressQuery,
)
from api.schemas import (
    KnowledgeOut,
    KnowledgeQuery,
    PromptQuery,
    SimilarBody,
    SimilarPage,
    SimilarQuery,
)

router = APIRouter(prefix="/api/v1/projects/{project}")

AGENT: list[str | Enum] = ["agent"]  # FastAPI takes list[str | Enum] (invariant)
PROGRESS: list[str | Enum] = ["progress"]


def _component_refs(model: type) -> dict[str, Any]:
    """``model``'s JSON schema referring to the document's components (its models are
    response models of other routes, so they are there)."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")  # type: ignore[attr-defined]
    schema.pop("$defs", None)
    return schema


_MARKDOWN = {"content": {"text/markdown": {"schema": {"type": "string"}}}, "description": "Markdown"}


# -- prompt, knowledge, similar ---------------------------------------------------------------


@router.get(
    "/prompt", tags=AGENT, response_class=Response, responses={200: _MARKDOWN, 304: {"description": "unchanged"}}
)
async def get_prompt(
    project: ProjectSlug,
    args: Annotated[PromptQuery, Query()],
    request: Request,
    who: Reader,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """The session-start prompt. ``raw=true``: exactly `lineage prompt`'s bytes; else inside
    the project's prompt template with the next exp_id, the metric and how to record."""
    return present.prompt(request, who.ledger, project, args, if_none_match)


@router.get(
    "/knowledge",
    tags=AGENT,
    response_class=Response,
    responses={
        200: {
            "content": {
                "text/markdown": {"schema": {"type": "string"}},
                "application/json": {"schema": _component_refs(KnowledgeOut)},
            }
        },
        304: {"description": "unchanged"},
    },
)
async def get_knowledge(
    project: ProjectSlug,
    args: Annotated[KnowledgeQuery, Query()],
    request: Request,
    who: Reader,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """The KNOWLEDGE.md block; ``format=json``: the best, its chain and the recent trials as data."""
    return present.knowledge(request, who.ledger, project, args, if_none_match)


@router.get("/similar", tags=AGENT, response_model=SimilarPage)
async def find_similar(project: ProjectSlug, args: Annotated[SimilarQuery, Query()], who: Reader) -> dict[str, Any]:
    """Was this tried? Past trials whose hypothesis and notes are closest to ``q``,
    closest first, each with a score in [0, 1] (the rule: ``lineage.similar``).

    A ``q`` over 2,000 characters is a 422 naming ``q``; but the whole URL must stay under
    the HTTP server's request-line limit (uvicorn: about 64 KB), past which uvicorn itself
    answers ``400 Invalid HTTP request received.`` as text/plain before this API sees the
    request. Texts of unknown length (an agent's whole idea): use ``POST .../similar``."""
    return _similar_page(who, project, args.q, args.limit)


@router.post("/similar", tags=AGENT, response_model=SimilarPage)
async def find_similar_of_body(project: ProjectSlug, body: SimilarBody, who: Reader) -> dict[str, Any]:
    """The same search with ``{"q": TEXT, "limit": N}`` as the JSON body: any length of
    text gets this API's answer (over 2,000 characters: 422 naming ``q``; a body over the
    server's ``--max-body-bytes``: 413). A read: it changes nothing, so it is the reader's."""
    return _similar_page(who, project, body.q, body.limit)


def _similar_page(who: Access, project: str, text: str, limit: int) -> dict[str, Any]:
    found = who.ledger.agent.find_similar(project, text, limit, field="q")
    tried, said = who.ledger.knobs.tried_of_text(project, text)
    return {
        "project": project,
        "q": text,
        "items": [similar.to_dict() for similar in found],
        "same_knob": [attempt.to_dict() for attempt in tried],
        "tried_before": [one.to_dict() for one in said],
    }


# -- progress summary, guardrails, webhooks --------------------------------------------------


@router.get("/summary", tags=PROGRESS, response_model=ProgressOut)
async def get_summary(project: ProjectSlug, args: Annotated[ProgressQuery, Query()], who: Reader) -> dict[str, Any]:
    """Trials per status, keep rate (all and the last ``last``), baseline, best and when it
    was reached, trials since the last improvement, improvement per 10 trials, crash
    streak, time spent, the trend with its rule, and the guardrails."""
    return who.ledger.agent.summary(project, last_n=args.last).to_dict()


@router.get("/guardrails", tags=PROGRESS, response_model=GuardrailsOut)
async def get_guardrails(project: ProjectSlug, who: Reader) -> Mapping[str, Any]:
    found = who.ledger.agent.summary(project).guardrails
    return found or {"policy": who.ledger.agent.guardrail_policy(project).to_dict(), "tripped": []}


@router.put("/guardrails", tags=PROGRESS, response_model=GuardrailsOut)
async def put_guardrails(project: ProjectSlug, body: GuardrailPolicyBody, who: Writer) -> Mapping[str, Any]:
    """Replace the guardrails (a missing or null limit is off); a limit already reached trips now."""
    await who.small_write(who.ledger.agent.set_guardrails, project, body.model_dump())
    found = who.ledger.agent.summary(project).guardrails
    return found or {"policy": body.model_dump(), "tripped": []}


@router.get("/hooks", tags=PROGRESS, response_model=list[HookOut])
async def list_hooks(project: ProjectSlug, who: Admin) -> list[dict[str, Any]]:
    return [hook.to_dict() for hook in who.ledger.agent.hooks(project)]


@router.post("/hooks", tags=PROGRESS, status_code=201, response_model=HookCreated)
async def add_hook(project: ProjectSlug, body: HookCreate, who: Admin) -> JSONResponse:
    """Add a webhook; its signing secret is in this response only."""
    hook, secret = await who.small_write(
        who.ledger.agent.add_hook, project, body.url, events=body.events, body_format=body.format
    )
    return JSONResponse({**hook.to_dict(), "secret": secret}, status_code=201, headers={"Cache-Control": "no-store"})


@router.delete("/hooks/{hook_id}", tags=PROGRESS, status_code=204, response_class=Response)
async def remove_hook(project: ProjectSlug, hook_id: int, who: Admin) -> Response:
    await who.small_write(who.ledger.agent.remove_hook, project, hook_id)
    return Response(status_code=204)
