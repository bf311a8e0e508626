"""Projects: create, list, get (with ETag), update, delete (admin) under ``/api/v1/projects``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from api import present
from api.deps import Admin, IfNoneMatch, ProjectSlug, Reader, Writer
from api.schemas import ProjectCreate, ProjectOut, ProjectUpdate

router = APIRouter(prefix="/api/v1/projects", tags=["projects"])


@router.post("", status_code=201, response_model=ProjectOut)
async def create_project(body: ProjectCreate, who: Writer) -> Response:
    return present.project_created(await who.small_write(who.ledger.projects.create_project, **body.model_dump()))


@router.get("", response_model=list[ProjectOut])
async def list_projects(who: Reader) -> list[dict[str, Any]]:
    return [present.project_json(p) for p in who.ledger.projects.projects()]


@router.get("/{project}", response_model=ProjectOut)
async def get_project(project: ProjectSlug, who: Reader, if_none_match: IfNoneMatch = None) -> Response:
    return present.project_response(who.ledger.projects.project(project), if_none_match)


@router.patch("/{project}", response_model=ProjectOut)
async def update_project(project: ProjectSlug, body: ProjectUpdate, who: Writer) -> dict[str, Any]:
    return present.project_json(
        await who.small_write(who.ledger.projects.update_project, project, body.model_dump(exclude_unset=True))
    )


@router.delete("/{project}", status_code=204, response_class=Response)
async def delete_project(project: ProjectSlug, who: Admin) -> Response:
    await who.long_write(who.ledger.projects.delete_project, project)
    return Response(status_code=204)
