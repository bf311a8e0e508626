"""The ``lineage`` command line.

Every command opens the ledger on ``--db`` (a SQLite path or a database URL; default
``$LINEAGE_DATABASE_URL`` or ./lineage.db) and calls the service layer. A ledger error
prints one line on stderr and exits with status 2; nothing is half-written.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

import click

from api.cli_loops import ColumnFlags, mapping_options
from lineage.errors import LedgerError

EXIT_LEDGER_ERROR = 2


class LedgerGroup(click.Group):
    """Turns ledger errors into one line on stderr and a non-zero exit."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LedgerError as exc:
            click.echo(f"error: {exc.message}", err=True)
            ctx.exit(EXIT_LEDGER_ERROR)
        except (OSError, UnicodeDecodeError) as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_LEDGER_ERROR)


@click.group(cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    envvar="LINEAGE_DATABASE_URL",
    default=None,
    help="SQLite file or database URL (postgresql://...). Default: ./lineage.db.",
)
@click.version_option(package_name="lineage-ledger")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """Lineage Ledger: the experiment lineage database for nightly research trials."""
    ctx.obj = {"db": db}


def _ledger(ctx: click.Context):  # type: ignore[no-untyped-def]
    from lineage.service import Ledger

    root = ctx.find_root()
    if "ledger" not in root.obj:
        root.obj["ledger"] = Ledger.open(root.obj["db"])
        root.call_on_close(root.obj["ledger"].close)
    return root.obj["ledger"]


project_option = click.option("--project", "-p", required=True, help="Project slug.")


# -- service ---------------------------------------------------------------------------


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. A non-loopback address needs a token first (lineage token create).")
@click.option("--port", default=8000, show_default=True, type=int, help="Port to bind.")
@click.option("--db", "db_option", default=None, help="SQLite file or database URL (overrides the global --db).")
@click.option("--demo/--no-demo", default=False, help="Load the A²TGPO demo project if it is missing.")
@click.option("--workers", default=1, show_default=True, type=int, help="Worker processes.")
@click.option("--log-level", default="info", show_default=True)
@click.option("--log-format", type=click.Choice(["text", "json"]), default=None,
              help="Log lines as text or JSON objects (default: $LINEAGE_LOG_FORMAT or text).")
@click.option("--anonymous-read/--no-anonymous-read", default=None,
              help="Allow reads without a token (default: $LINEAGE_ANONYMOUS_READ or on).")
@click.option("--max-body-bytes", type=int, default=None, help="Largest API request body, after gzip decoding.")
@click.pass_context
def serve(
    ctx: click.Context, host: str, port: int, db_option: str | None, demo: bool, workers: int, log_level: str,
    log_format: str | None, anonymous_read: bool | None, max_body_bytes: int | None,
) -> None:
    """Start the HTTP service (upgrades the schema first)."""
    import os

    import uvicorn

    from api.cli_api import refuse_open_bind
    from api.logs import uvicorn_log_config
    from lineage.db import ENV_DATABASE_URL, resolve_url

    if db_option:
        ctx.find_root().obj["db"] = db_option
    ledger = _ledger(ctx)
    refuse_open_bind(ctx, ledger, host)
    if demo:
        _load_demo(ledger, quiet=True)
    os.environ[ENV_DATABASE_URL] = resolve_url(ctx.find_root().obj["db"])
    for name, value in (("LINEAGE_LOG_FORMAT", log_format), ("LINEAGE_LOG_LEVEL", log_level),
                        ("LINEAGE_MAX_BODY_BYTES", max_body_bytes),
                        ("LINEAGE_ANONYMOUS_READ", None if anonymous_read is None else str(anonymous_read).lower())):
        if value is not None:
            os.environ[name] = str(value)
    click.echo(f"lineage: serving {ledger.engine.url.render_as_string(hide_password=True)} on http://{host}:{port}", err=True)
    fmt = os.environ.get("LINEAGE_LOG_FORMAT", "text")
    uvicorn.run("api.app:app_from_env", factory=True, host=host, port=port, workers=workers, log_level=log_level,
                log_config=uvicorn_log_config(fmt if fmt in ("text", "json") else "text", log_level), access_log=False)


@cli.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Load the six-trial A²TGPO sweep from the seed into project 'a2tgpo-demo'."""
    _load_demo(_ledger(ctx), quiet=False)


def _load_demo(ledger, *, quiet: bool) -> None:  # type: ignore[no-untyped-def]
    from lineage.demo_data import DEMO_PROJECT, DEMO_TRIALS
    from lineage.errors import NotFound

    slug = DEMO_PROJECT["slug"]
    try:
        ledger.project(slug)
        if not quiet:
            click.echo(f"project {slug!r} is already loaded", err=True)
        return
    except NotFound:
        pass
    ledger.create_project(**DEMO_PROJECT)
    ledger.import_trials(slug, iter(DEMO_TRIALS))
    if not quiet:
        click.echo(f"loaded {len(DEMO_TRIALS)} trials into project {slug!r}")


# -- database --------------------------------------------------------------------------


@cli.group()
def db() -> None:
    """Schema management (Alembic)."""


@db.command("upgrade")
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


@db.command("current")
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Print the schema revision of the database."""
    from lineage import migrate
    from lineage.db import make_engine

    engine = make_engine(ctx.find_root().obj["db"])
    click.echo(migrate.current_revision(engine) or "(empty)")
    engine.dispose()


@cli.command()
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_context
def backup(ctx: click.Context, out: Path) -> None:
    """Write a consistent copy of the SQLite database to OUT (safe while it is in use)."""
    _ledger(ctx).backup(str(out))
    click.echo(f"backed up to {out}")


# -- projects --------------------------------------------------------------------------


@cli.group()
def project() -> None:
    """Create, list and show projects."""


@project.command("create")
@click.argument("slug")
@click.option("--title", default="")
@click.option("--metric", "metric_name", default="core_metric", show_default=True, help="Name of the metric.")
@click.option("--lower-is-better/--higher-is-better", default=True, show_default=True)
@click.option("--best-policy", type=click.Choice(["kept", "fieldkit"]), default="kept", show_default=True)
@click.pass_context
def project_create(
    ctx: click.Context, slug: str, title: str, metric_name: str, lower_is_better: bool, best_policy: str
) -> None:
    """Create project SLUG."""
    created = _ledger(ctx).create_project(
        slug, title=title, metric_name=metric_name, lower_is_better=lower_is_better, best_policy=best_policy
    )
    click.echo(f"created project {created.slug!r}")


@project.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.pass_context
def project_list(ctx: click.Context, fmt: str) -> None:
    """List projects."""
    items = _ledger(ctx).projects()
    if fmt == "json":
        click.echo(json.dumps([p.to_dict() for p in items], indent=2))
        return
    for p in items:
        direction = "lower" if p.lower_is_better else "higher"
        click.echo(f"{p.slug}\t{p.trial_count} trials\t{p.metric_name} ({direction} is better)\t{p.title}")


# -- import / export -------------------------------------------------------------------


@cli.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@project_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "fieldkit", "autoresearch", "generic"]),
    default="auto",
    show_default=True,
    help="auto: sniff the first line (fieldkit, then autoresearch, then any tab/comma table).",
)
@click.option("--lower-is-better/--higher-is-better", default=None,
              help="Direction, when the project is new (autoresearch/generic: else inferred).")
@click.option("--best-policy", type=click.Choice(["kept", "fieldkit"]), default=None)
@mapping_options
@click.pass_context
def import_cmd(
    ctx: click.Context,
    file: Path,
    project: str,
    fmt: str,
    lower_is_better: bool | None,
    best_policy: str | None,
    columns: ColumnFlags,
) -> None:
    """Import FILE (a results.tsv) into PROJECT, atomically; the project is created if new."""
    from api import cli_loops
    from lineage.formats.fieldkit import count_lines

    if fmt == "auto":
        fmt = cli_loops.sniff_file(file)
    total_rows = count_lines(file) - 1
    if fmt in cli_loops.TABLE_FORMATS:
        with _progress("importing", total_rows) as progress:
            cli_loops.import_table(ctx, file, project, fmt, options=columns.import_options(lower_is_better),
                                   best_policy=best_policy, git_repo=columns.git_repo, progress=progress)
        return
    if columns.columns_given() or columns.git_repo:
        raise click.UsageError("--id, --metric, --status, --description, --parent, --status-map and --git-repo "
                               "are for autoresearch/generic files; this one is fieldkit's")
    ledger = _ledger(ctx)
    create_with = {
        "lower_is_better": True if lower_is_better is None else lower_is_better,
        "best_policy": best_policy or "kept",
        "source_format": fmt,
    }
    with file.open("r", encoding="utf-8", newline="") as stream, _progress("importing", total_rows) as progress:
        report = ledger.import_file(
            project, stream, fmt=fmt, source=str(file), progress=progress, create_with=create_with
        )
    click.echo(f"imported {report.rows} trials into {project!r}")


@cli.command("export")
@project_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Default: stdout.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["fieldkit", "extended", "csv", "parquet", "autoresearch", "generic"]),
    default="fieldkit",
    show_default=True,
    help="fieldkit: results.tsv as fieldkit writes it; extended: plus clip-scale stats and extra; "
    "autoresearch/generic: the project's own results file (an imported one byte for byte).",
)
@click.pass_context
def export_cmd(ctx: click.Context, project: str, output: Path | None, fmt: str) -> None:
    """Export PROJECT's trials."""
    if fmt in ("autoresearch", "generic"):
        from api.cli_loops import export_table

        export_table(ctx, project, output, fmt)
        return
    ledger = _ledger(ctx)
    if fmt in ("csv", "parquet"):
        if output is None and fmt == "parquet":
            raise click.UsageError("--format parquet needs -o FILE")
        frame = ledger.dataframe(project)
        if fmt == "csv":
            frame.to_csv(output or sys.stdout, index=False)
        else:
            try:
                frame.to_parquet(output, index=False)
            except ImportError:
                raise click.ClickException("parquet export needs pyarrow: pip install 'lineage-ledger[parquet]'")
        return
    from lineage.formats.fieldkit import write_trials

    total = ledger.project(project).trial_count  # also: an unknown project fails before any output
    with _open_out(output) as stream, _progress("exporting", total if output is not None else 0) as progress:
        rows = _counted(ledger.stream_trials(project), progress)
        count = write_trials(rows, stream, extended=fmt == "extended")
    if output is not None:
        click.echo(f"exported {count} trials to {output}", err=True)


@contextlib.contextmanager
def _open_out(output: Path | None) -> Iterator[IO[str]]:
    if output is None:
        yield sys.stdout
        return
    with output.open("w", encoding="utf-8", newline="") as stream:
        yield stream


@contextlib.contextmanager
def _progress(label: str, total: int) -> Iterator[Any]:
    """A callback ``update(rows_done)`` that draws a bar on a terminal; None elsewhere."""
    if not sys.stderr.isatty() or total <= 0:
        yield None
        return
    with click.progressbar(length=total, label=label, file=sys.stderr) as bar:
        done = 0

        def update(rows: int) -> None:
            nonlocal done
            bar.update(rows - done)
            done = rows

        yield update


def _counted(rows: Iterable[Any], update: Any, every: int = 1000) -> Iterator[Any]:
    for index, row in enumerate(rows, 1):
        if update is not None and index % every == 0:
            update(index)
        yield row


# -- reading the ledger ----------------------------------------------------------------


@cli.command()
@project_option
@click.option("--specialist", "-s", required=True, help="The specialist whose session starts.")
@click.option("--top-k", default=20, show_default=True, type=int)
@click.option("--recent-n", default=30, show_default=True, type=int)
@click.option("--last-m", default=10, show_default=True, type=int)
@click.option("--timestamp", default="", help="Session timestamp shown in the header.")
@click.pass_context
def prompt(
    ctx: click.Context, project: str, specialist: str, top_k: int, recent_n: int, last_m: int, timestamp: str
) -> None:
    """Print the session-start prompt (fieldkit-compatible)."""
    text = _ledger(ctx).render_prompt(
        project, specialist=specialist, top_k=top_k, recent_n=recent_n, last_m=last_m, timestamp=timestamp
    )
    click.echo(text, nl=False)


@cli.command()
@project_option
@click.option("--recent-n", default=30, show_default=True, type=int)
@click.option("--last-m", default=10, show_default=True, type=int)
@click.pass_context
def knowledge(ctx: click.Context, project: str, recent_n: int, last_m: int) -> None:
    """Print the KNOWLEDGE.md part of the prompt."""
    click.echo(_ledger(ctx).render_knowledge(project, recent_n=recent_n, last_m=last_m), nl=False)


@cli.command()
@project_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def best(ctx: click.Context, project: str, fmt: str) -> None:
    """Print the project's current best trial."""
    trial = _ledger(ctx).best(project)
    if fmt == "json":
        click.echo(json.dumps(trial.to_dict() if trial else None, indent=2, ensure_ascii=False))
    elif trial is None:
        click.echo("(no trials)")
    else:
        click.echo(f"{trial.label}\t{_fmt(trial.core_metric)}\t{trial.status.value}\t{trial.hypothesis}")


@cli.command()
@project_option
@click.option("--status", multiple=True, help="Only these statuses (repeatable).")
@click.option("--limit", type=int, default=None, help="At most this many (the most recent).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.pass_context
def trials(ctx: click.Context, project: str, status: tuple[str, ...], limit: int | None, fmt: str) -> None:
    """List PROJECT's trials as a table (or JSON)."""
    rows = _ledger(ctx).list_trials(project, status=list(status) or None, limit=limit, descending=limit is not None)
    if limit is not None:
        rows.reverse()
    if fmt == "json":
        click.echo(json.dumps([t.to_dict() for t in rows], indent=2, ensure_ascii=False))
        return
    headers = ("exp", "status", "metric", "Δ", "parent", "specialist", "hypothesis")
    table = [
        (t.exp_id, t.status.value, _fmt(t.core_metric), _fmt(t.delta_vs_best, signed=True), t.parent_exp,
         t.specialist, t.hypothesis.replace("\n", " ")[:60])
        for t in rows
    ]
    widths = [max([len(h), *(len(r[i]) for r in table)]) for i, h in enumerate(headers)]
    click.echo("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    for row in table:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def _fmt(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.6f}" if signed else f"{value:.6f}"


from api.cli_loops import plot as _plot_cmd, record as _record_cmd, watch as _watch_cmd  # noqa: E402

cli.add_command(_record_cmd)
cli.add_command(_watch_cmd)
cli.add_command(_plot_cmd)


from api.cli_api import mcp as _mcp_cmd, token as _token_group  # noqa: E402

cli.add_command(_token_group)
cli.add_command(_mcp_cmd)


from api.cli_spool import spool as _spool_group  # noqa: E402

cli.add_command(_spool_group)


from api.cli_memory import similar as _similar_cmd  # noqa: E402

cli.add_command(_similar_cmd)

from api.cli_memory import register_memory_commands  # noqa: E402

register_memory_commands(cli)


def main() -> None:
    cli(prog_name="lineage")


if __name__ == "__main__":
    main()
