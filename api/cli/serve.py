"""Running the ledger: ``lineage serve`` (the HTTP API and the pages, with the bind check
that refuses an open ledger on a non-loopback address), ``demo``, ``db`` (schema),
``backup``, ``token`` (bearer tokens of the HTTP API) and ``mcp`` (the MCP server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from api.cli.base import ledger_of
from lineage.auth import is_loopback

if TYPE_CHECKING:  # the CLI imports the ledger where a command needs it
    from lineage.service import Ledger

EXIT_REFUSED = 2


# -- service ---------------------------------------------------------------------------


@click.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind. A non-loopback address needs a token first (lineage token create).",
)
@click.option("--port", default=8000, show_default=True, type=int, help="Port to bind.")
@click.option("--db", "db_option", default=None, help="SQLite file or database URL (overrides the global --db).")
@click.option("--demo/--no-demo", default=False, help="Load the A²TGPO demo project if it is missing.")
@click.option("--workers", default=1, show_default=True, type=int, help="Worker processes.")
@click.option("--log-level", default="info", show_default=True)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default=None,
    help="Log lines as text or JSON objects (default: $LINEAGE_LOG_FORMAT or text).",
)
@click.option(
    "--anonymous-read/--no-anonymous-read",
    default=None,
    help="Allow reads without a token (default: $LINEAGE_ANONYMOUS_READ or on).",
)
@click.option("--max-body-bytes", type=int, default=None, help="Largest API request body, after gzip decoding.")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A host name (or name:port) that requests may name in Host and Origin, besides the loopback "
    "names; repeat it. Needed when clients reach the server by a name (default: $LINEAGE_ALLOWED_HOSTS).",
)
@click.option(
    "--hook-private-targets/--no-hook-private-targets",
    default=None,
    help="Let webhooks target loopback, link-local and private addresses "
    "(default: $LINEAGE_HOOK_PRIVATE_TARGETS or off).",
)
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    db_option: str | None,
    demo: bool,
    workers: int,
    log_level: str,
    log_format: str | None,
    anonymous_read: bool | None,
    max_body_bytes: int | None,
    allowed_hosts: tuple[str, ...],
    hook_private_targets: bool | None,
) -> None:
    """Start the HTTP service (upgrades the schema first)."""
    import os

    import uvicorn

    from api.logs import uvicorn_log_config
    from lineage.db import ENV_DATABASE_URL, resolve_url

    if db_option:
        ctx.find_root().obj["db"] = db_option
    ledger = ledger_of(ctx)
    refuse_open_bind(ctx, ledger, host)
    if demo:
        _load_demo(ledger, quiet=True)
    os.environ[ENV_DATABASE_URL] = resolve_url(ctx.find_root().obj["db"])
    os.environ["LINEAGE_BIND_HOST"] = host  # not loopback: no anonymous write while it runs (lineage.auth)
    for name, value in (
        ("LINEAGE_LOG_FORMAT", log_format),
        ("LINEAGE_LOG_LEVEL", log_level),
        ("LINEAGE_MAX_BODY_BYTES", max_body_bytes),
        ("LINEAGE_ANONYMOUS_READ", None if anonymous_read is None else str(anonymous_read).lower()),
        ("LINEAGE_HOOK_PRIVATE_TARGETS", None if hook_private_targets is None else str(int(hook_private_targets))),
        ("LINEAGE_ALLOWED_HOSTS", ",".join(allowed_hosts) if allowed_hosts else None),
    ):
        if value is not None:
            os.environ[name] = str(value)
    click.echo(
        f"lineage: serving {ledger.engine.url.render_as_string(hide_password=True)} on http://{host}:{port}", err=True
    )
    if host.strip("[]") in ("0.0.0.0", "::") and not os.environ.get("LINEAGE_ALLOWED_HOSTS"):
        click.echo(
            "lineage: requests must name a loopback host; name the ones clients use with --allowed-host "
            "(or LINEAGE_ALLOWED_HOSTS), else they get 403",
            err=True,
        )
    # the app opens its own ledger: the command line's connections would sit idle for the server's life
    ledger.close()
    del ledger
    fmt = os.environ.get("LINEAGE_LOG_FORMAT", "text")
    uvicorn.run(
        "api.lazy_start:lazy_app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        log_config=uvicorn_log_config(fmt if fmt in ("text", "json") else "text", log_level),
        access_log=False,
    )


@click.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Load the six-trial A²TGPO sweep from the seed into project 'a2tgpo-demo'."""
    _load_demo(ledger_of(ctx), quiet=False)


def _load_demo(ledger: Ledger, *, quiet: bool) -> None:
    from lineage.demo_data import DEMO_PROJECT, DEMO_TRIALS
    from lineage.errors import Conflict, NotFound

    slug = DEMO_PROJECT["slug"]
    try:
        ledger.projects.project(slug)
        if not quiet:
            click.echo(f"project {slug!r} is already loaded", err=True)
        return
    except NotFound:
        pass
    try:
        ledger.projects.create_project(**DEMO_PROJECT)
    except Conflict:  # another `serve --demo` started at the same time loads it
        return
    ledger.tables.import_trials(slug, iter(DEMO_TRIALS))
    if not quiet:
        click.echo(f"loaded {len(DEMO_TRIALS)} trials into project {slug!r}")


# -- database --------------------------------------------------------------------------


@click.group(name="db")
def db_group() -> None:
    """Schema management (Alembic)."""


@db_group.command("upgrade")
@click.option("--revision", default="head", show_default=True)
@click.pass_context
def db_upgrade(ctx: click.Context, revision: str) -> None:
    """Bring the schema to REVISION (default: the newest)."""
    from lineage import migrate
    from lineage.db import make_engine

    engine = make_engine(ctx.find_root().obj["db"])
    migrate.upgrade(engine, revision)
    click.echo(f"schema at {migrate.current_revision(engine)}")
    engine.dispose()


@db_group.command("current")
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Print the schema revision of the database."""
    from lineage import migrate
    from lineage.db import make_engine

    engine = make_engine(ctx.find_root().obj["db"])
    click.echo(migrate.current_revision(engine) or "(empty)")
    engine.dispose()


@click.command()
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace OUT when it exists.")
@click.pass_context
def backup(ctx: click.Context, out: Path, force: bool) -> None:
    """Write a consistent copy of the SQLite database to OUT (safe while it is in use).

    An existing OUT is left alone unless --force is given. The copy is written next to
    OUT under a temporary name and put in place at the end, so OUT is never half written,
    and without --force a file that appears at OUT meanwhile is not replaced either."""
    import os
    import tempfile

    if out.exists() and not force:
        click.echo(f"error: {out} exists; pass --force to replace it", err=True)
        ctx.exit(EXIT_REFUSED)
    ledger = ledger_of(ctx)
    handle, temporary = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent or None)
    os.close(handle)
    try:
        ledger.tables.backup(temporary)
        if force:
            os.replace(temporary, out)
        else:
            try:
                os.link(temporary, out)  # atomic, and never over an existing file
            except FileExistsError:
                click.echo(f"error: {out} exists; pass --force to replace it", err=True)
                ctx.exit(EXIT_REFUSED)
            except OSError:  # a file system without hard links: replace unless it is there now
                if out.exists():
                    click.echo(f"error: {out} exists; pass --force to replace it", err=True)
                    ctx.exit(EXIT_REFUSED)
                os.replace(temporary, out)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    click.echo(f"backed up to {out}")


# -- the HTTP API's side: bind check, tokens, MCP ----------------------------------------


def refuse_open_bind(ctx: click.Context, ledger: Ledger, host: str) -> None:
    """Exit (one line on stderr, status 2) when ``host`` is not loopback and no token exists:
    nobody could use such a server but anonymously. Past the start, ``lineage.auth.allowed``
    refuses every anonymous write of a server on a non-loopback address (LINEAGE_BIND_HOST)."""

    if is_loopback(host) or ledger.tokens.tokens_exist():
        return
    click.echo(
        f"error: refusing to serve on {host} while the ledger has no tokens (anyone could write); "
        "create one first: lineage token create --role admin --name NAME",
        err=True,
    )
    ctx.exit(EXIT_REFUSED)


@click.group()
def token() -> None:
    """Bearer tokens of the HTTP API (stored as hashes; shown once)."""


@token.command("create")
@click.option("--name", required=True, help="A name to list and revoke the token by.")
@click.option("--role", type=click.Choice(["reader", "writer", "admin"]), required=True)
@click.pass_context
def token_create(ctx: click.Context, name: str, role: str) -> None:
    """Create a token and print it (this once: only its hash is stored)."""
    record, secret = ledger_of(ctx).tokens.create_token(name=name, role=role)
    click.echo(secret)
    click.echo(f"created {record.role.value} token {record.name!r}; it is shown only this once", err=True)


@token.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.pass_context
def token_list(ctx: click.Context, fmt: str) -> None:
    """List tokens (names, roles, last use; never the secrets)."""
    records = ledger_of(ctx).tokens.list_tokens()
    if fmt == "json":
        click.echo(json.dumps([r.to_dict() for r in records], indent=2))
        return
    for r in records:
        state = "active" if r.active else f"revoked {r.revoked_at}"
        click.echo(f"{r.name}\t{r.role.value}\t{state}\tlast used {r.last_used_at or 'never'}")


@token.command("revoke")
@click.argument("name")
@click.option(
    "--last-admin",
    is_flag=True,
    help="Allow revoking the last active admin token (nobody can manage tokens over HTTP after).",
)
@click.pass_context
def token_revoke(ctx: click.Context, name: str, last_admin: bool) -> None:
    """Revoke token NAME (effective on the next request of every server). Anonymous
    writes stay closed, also when it was the last token."""
    ledger_of(ctx).tokens.revoke_token(name, last_admin=last_admin)
    click.echo(f"revoked token {name!r}", err=True)


@token.command("anonymous-writes")
@click.argument("setting", required=False, type=click.Choice(["open", "closed"]))
@click.pass_context
def token_anonymous_writes(ctx: click.Context, setting: str | None) -> None:
    """Show whether the ledger takes writes without a token, or set it (open, closed).

    Closed from the first token on; only this (or an admin's PUT /api/v1/access) opens
    them again. A server on a non-loopback address never takes an anonymous write."""
    import getpass

    ledger = ledger_of(ctx)
    if setting is not None:
        try:
            who = getpass.getuser()
        except Exception:  # noqa: BLE001 - no user name in this environment
            who = "?"
        state = ledger.tokens.set_anonymous_writes(setting, by=f"cli ({who})")
        click.echo(f"anonymous writes set to {setting}", err=True)
    else:
        state = ledger.tokens.access_state()
    click.echo(json.dumps(state.to_dict()))


@click.command()
@click.option("--db", "db_option", default=None, help="SQLite file or database URL (overrides the global --db).")
@click.pass_context
def mcp(ctx: click.Context, db_option: str | None) -> None:
    """Run the MCP server on stdio (tools: list_projects, create_project, get_prompt,
    get_knowledge, list_trials, get_trial, record_trial, update_trial, find_similar,
    get_summary; the prompt session_start; the resource lineage://projects/{project}/prompt),
    over the same service as the HTTP API. `lineage serve` also serves MCP, over
    Streamable HTTP at /mcp, with the API's tokens."""
    if db_option:
        ctx.find_root().obj["db"] = db_option
    try:
        from api.mcp_server import build_server
    except ImportError as exc:
        click.echo(f"error: `lineage mcp` needs the MCP SDK ({exc}): pip install 'lineage-ledger[mcp]'", err=True)
        ctx.exit(EXIT_REFUSED)
    build_server(ledger_of(ctx)).run("stdio")
