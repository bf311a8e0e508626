"""The CLI commands of the HTTP API's side: ``lineage token ...``, ``lineage mcp`` and the
bind check of ``lineage serve`` (registered on ``api.cli``'s group there)."""

from __future__ import annotations

import ipaddress
import json

import click

EXIT_REFUSED = 2


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def refuse_open_bind(ctx: click.Context, ledger, host: str) -> None:  # type: ignore[no-untyped-def]
    """Exit (one line on stderr, status 2) when ``host`` is not loopback and no token exists:
    such a server would take writes from anyone who can reach it."""

    if is_loopback(host) or ledger.tokens_exist():
        return
    click.echo(
        f"error: refusing to serve on {host} while the ledger has no tokens (anyone could write); "
        "create one first: lineage token create --role admin --name NAME",
        err=True,
    )
    ctx.exit(EXIT_REFUSED)


def _ledger(ctx: click.Context):  # type: ignore[no-untyped-def]
    from api.cli import _ledger as open_ledger

    return open_ledger(ctx)


@click.group()
def token() -> None:
    """Bearer tokens of the HTTP API (stored as hashes; shown once)."""


@token.command("create")
@click.option("--name", required=True, help="A name to list and revoke the token by.")
@click.option("--role", type=click.Choice(["reader", "writer", "admin"]), required=True)
@click.pass_context
def token_create(ctx: click.Context, name: str, role: str) -> None:
    """Create a token and print it (this once: only its hash is stored)."""

    record, secret = _ledger(ctx).create_token(name=name, role=role)
    click.echo(secret)
    click.echo(f"created {record.role.value} token {record.name!r}; it is shown only this once", err=True)


@token.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.pass_context
def token_list(ctx: click.Context, fmt: str) -> None:
    """List tokens (names, roles, last use; never the secrets)."""

    records = _ledger(ctx).list_tokens()
    if fmt == "json":
        click.echo(json.dumps([r.to_dict() for r in records], indent=2))
        return
    for r in records:
        state = "active" if r.active else f"revoked {r.revoked_at}"
        click.echo(f"{r.name}\t{r.role.value}\t{state}\tlast used {r.last_used_at or 'never'}")


@token.command("revoke")
@click.argument("name")
@click.pass_context
def token_revoke(ctx: click.Context, name: str) -> None:
    """Revoke token NAME (effective on the next request of every server)."""

    _ledger(ctx).revoke_token(name)
    click.echo(f"revoked token {name!r}", err=True)


@click.command()
@click.option("--db", "db_option", default=None, help="SQLite file or database URL (overrides the global --db).")
@click.pass_context
def mcp(ctx: click.Context, db_option: str | None) -> None:
    """Run the MCP server on stdio (tools: get_prompt, get_knowledge, list_trials,
    get_trial, record_trial, update_trial, find_similar, get_summary), over the same
    service as the HTTP API."""
    if db_option:
        ctx.find_root().obj["db"] = db_option
    try:
        from api.mcp_server import build_server
    except ImportError as exc:
        click.echo(f"error: `lineage mcp` needs the MCP SDK ({exc}): pip install 'lineage-ledger[mcp]'", err=True)
        ctx.exit(EXIT_REFUSED)
    build_server(_ledger(ctx)).run("stdio")
