"""What an agent reads at session start: the prompt and the KNOWLEDGE.md block, with
ETags from the project's revision (``api.present``), so polling costs one query."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from api import present
from api.deps import IfNoneMatch, ProjectSlug, Reader
from api.schemas import KnowledgeOut, KnowledgeQuery, PromptQuery

router = APIRouter(prefix="/api/v1/projects/{project}", tags=["agent"])

_MARKDOWN = {"content": {"text/markdown": {"schema": {"type": "string"}}}, "description": "Markdown"}


@router.get("/prompt", response_class=Response, responses={200: _MARKDOWN, 304: {"description": "unchanged"}})
async def get_prompt(
    project: ProjectSlug, args: Annotated[PromptQuery, Query()], request: Request, who: Reader,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """The session-start prompt. ``raw=true``: exactly `lineage prompt`'s bytes; else inside
    the project's prompt template with the next exp_id, the metric and how to record."""
    return present.prompt(request, who.ledger, project, args, if_none_match)


@router.get("/knowledge", response_class=Response,
            responses={200: {"content": {"text/markdown": {"schema": {"type": "string"}},
                                         "application/json": {"schema": KnowledgeOut.model_json_schema()}}},
                       304: {"description": "unchanged"}})
async def get_knowledge(
    project: ProjectSlug, args: Annotated[KnowledgeQuery, Query()], request: Request, who: Reader,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """The KNOWLEDGE.md block; ``format=json``: the best, its chain and the recent trials as data."""
    return present.knowledge(request, who.ledger, project, args, if_none_match)
