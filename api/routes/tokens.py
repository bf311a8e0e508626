"""Token management over HTTP under ``/api/v1/tokens``, and the ledger's anonymous-writes
setting under ``/api/v1/access`` (admin only; ``lineage token`` does the same locally)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from api.deps import Admin
from api.schemas import AccessOut, AccessUpdate, Text, TokenCreate, TokenCreated, TokenOut

router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"])
access_router = APIRouter(prefix="/api/v1/access", tags=["tokens"])


@router.get("", response_model=list[TokenOut])
async def list_tokens(who: Admin) -> list[dict[str, Any]]:
    return [record.to_dict() for record in who.ledger.tokens.list_tokens()]


@router.post("", status_code=201, response_model=TokenCreated)
async def create_token(body: TokenCreate, who: Admin) -> JSONResponse:
    """Create a token; the secret is in this response only."""
    record, secret = await who.small_write(who.ledger.tokens.create_token, name=body.name, role=body.role)
    return JSONResponse({**record.to_dict(), "token": secret}, status_code=201, headers={"Cache-Control": "no-store"})


@router.delete("/{name}", status_code=204, response_class=Response)
async def revoke_token(name: Text, who: Admin) -> Response:
    """Revoke a token; the last active admin token is a 409 (``lineage token revoke
    --last-admin`` does it locally). Anonymous writes stay closed."""
    await who.small_write(who.ledger.tokens.revoke_token, name)
    return Response(status_code=204)


@access_router.get("", response_model=AccessOut)
async def get_access(who: Admin) -> dict[str, Any]:
    """Whether the ledger takes writes without a token, and who changed that last."""
    return who.ledger.tokens.access_state().to_dict()


@access_router.put("", response_model=AccessOut)
async def put_access(body: AccessUpdate, who: Admin) -> dict[str, Any]:
    """Open or close anonymous writes (stored with this token's name, and logged). Open
    takes effect on servers that listen on loopback only."""
    by = f"token {who.principal.name!r}" if who.principal is not None else "?"
    state = await who.small_write(who.ledger.tokens.set_anonymous_writes, body.anonymous_writes, by=by)
    return state.to_dict()
