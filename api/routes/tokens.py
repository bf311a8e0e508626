"""Token management over HTTP under ``/api/v1/tokens`` (admin only; ``lineage token``
does the same locally)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from api.deps import Admin
from api.schemas import Text, TokenCreate, TokenCreated, TokenOut

router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"])


@router.get("", response_model=list[TokenOut])
async def list_tokens(who: Admin) -> list[dict[str, Any]]:
    return [record.to_dict() for record in who.ledger.list_tokens()]


@router.post("", status_code=201, response_model=TokenCreated)
async def create_token(body: TokenCreate, who: Admin) -> JSONResponse:
    """Create a token; the secret is in this response only."""
    record, secret = await who.small_write(who.ledger.create_token, name=body.name, role=body.role)
    return JSONResponse({**record.to_dict(), "token": secret}, status_code=201, headers={"Cache-Control": "no-store"})


@router.delete("/{name}", status_code=204, response_class=Response)
async def revoke_token(name: Text, who: Admin) -> Response:
    await who.small_write(who.ledger.revoke_token, name)
    return Response(status_code=204)
