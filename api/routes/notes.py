"""The project notebook over HTTP: insights not tied to one trial, each citing the trials
that support it. The rules are ``lineage.notebook``'s: a note citing trials the project
does not have is a 422 naming ``cites`` and every unknown id; nothing is stored then.

=======  ===============================================  ======  =========================
method   path (under ``/api/v1``)                         role    what
=======  ===============================================  ======  =========================
POST     /projects/{p}/notes                              writer  add a note (201)
GET      /projects/{p}/notes                              reader  the notes, newest first,
                                                                  each flagged when a later
                                                                  kept trial contradicts it
=======  ===============================================  ======  =========================
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api.deps import ProjectSlug, Reader, Writer
from api.schemas import Strict, Text
from lineage.notebook import MAX_LIMIT
from lineage.notebook.rules import MAX_AUTHOR, MAX_CITES, MAX_NOTE_TEXT

router = APIRouter(prefix="/api/v1/projects/{project}", tags=["notes"])


class NoteCreate(Strict):
    text: Annotated[Text, Field(min_length=1, max_length=MAX_NOTE_TEXT)] = Field(
        description="The insight, e.g. 'LR above 0.06 diverges at depth 12'"
    )
    cites: list[Annotated[Text, Field(min_length=1, max_length=512)]] = Field(
        min_length=1, max_length=MAX_CITES, description="exp_ids of the trials that support it (exp_012 or 012)"
    )
    author: Annotated[Text, Field(max_length=MAX_AUTHOR)] | None = Field(None, description="Who wrote it")


class CitedOut(BaseModel):
    exp_id: str
    status: str | None = Field(description="The cited trial's status now; null when it was deleted")


class ContradictionOut(BaseModel):
    exp_id: str = Field(description="The later kept trial")
    knob: str
    value: str | None
    why: str


class NoteOut(BaseModel):
    id: int
    text: str
    cites: list[CitedOut]
    author: str
    created_at: str | None
    contradicted: ContradictionOut | None = Field(
        description="A trial kept after the note that changed what it speaks against; null when none"
    )


class NotePage(BaseModel):
    items: list[NoteOut]
    next_before_id: int | None = Field(description="Pass as ?before_id= for older notes; null when none are left")


class NoteQuery(Strict):
    limit: int = Field(20, ge=1, le=MAX_LIMIT)
    before_id: int | None = Field(None, ge=1, description="Notes older than this id (the next page)")


@router.post("/notes", status_code=201, response_model=NoteOut)
async def add_note(project: ProjectSlug, body: NoteCreate, who: Writer) -> JSONResponse:
    """Add a note to the project's notebook; 422 naming ``cites`` when it cites unknown trials."""
    note = await who.small_write(who.ledger.notes.add_note, project, body.model_dump(exclude_none=True))
    return JSONResponse(note.to_dict(), status_code=201)


@router.get("/notes", response_model=NotePage)
async def list_notes(project: ProjectSlug, args: Annotated[NoteQuery, Query()], who: Reader) -> dict[str, Any]:
    """The project's notes, newest first, each with its cited trials' status and whether a
    later kept trial contradicts it."""
    items, next_before_id = who.ledger.notes.notes(project, before_id=args.before_id, limit=args.limit)
    return {"items": [note.to_dict() for note in items], "next_before_id": next_before_id}
