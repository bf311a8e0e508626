"""A research loop from an agent's shell: ``lineage record`` (one trial of the loop),
``lineage watch`` (follow a running loop's results file, locally or into a server) and
``lineage plot`` (the loop's progress as a figure).

The rules (status words, direction, lineage, exp_ids) are in
:mod:`lineage.formats.autoresearch`; the use-cases in :mod:`lineage.loops`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from api.cli.base import TABLE_FORMATS, ColumnFlags, fmt_number, ledger_of, mapping_options, warn

# -- record ------------------------------------------------------------------------------


@click.command()
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option("--metric", "metric", required=True, help="The metric value ('0' on a crash, '-', '-999': no result).")
@click.option("--status", required=True, help="keep, discard, crash, or any status word of the file.")
@click.option("--description", "-d", default="", help="What the trial changed.")
@click.option("--commit", default=None, help="The git commit of the trial.")
@click.option("--memory-gb", default=None, help="Peak GPU memory (the file's memory column).")
@click.option("--set", "values", multiple=True, metavar="COL=VALUE", help="Another column of the file (repeatable).")
@click.option(
    "--append-tsv",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also append the line to this results file, in its own format.",
)
@click.option(
    "--git-repo",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Store the commit's subject, author time, diffstat and patch.",
)
@click.option("--metric-name", default=None, help="For a new project without a file: the metric's name (val_bpb).")
@click.option("--lower-is-better/--higher-is-better", default=None, help="For a new project: the direction.")
@click.option(
    "--idempotency-key",
    default=None,
    metavar="KEY",
    help="Run again with the same KEY and options: the trial already stored, nothing appended "
    "(without a key, the same --commit with the same values is such a replay).",
)
@click.option(
    "--rerun-of",
    default=None,
    metavar="EXP_ID",
    help="This trial reruns that trial's code (another seed): the reruns estimate the noise floor.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def record(
    ctx: click.Context,
    project: str,
    metric: str,
    status: str,
    description: str,
    commit: str | None,
    memory_gb: str | None,
    values: tuple[str, ...],
    append_tsv: Path | None,
    git_repo: str | None,
    metric_name: str | None,
    lower_is_better: bool | None,
    idempotency_key: str | None,
    rerun_of: str | None,
    fmt: str,
) -> None:
    """Record one trial of a loop: prints its exp_id, the delta against the best before
    it and whether it is the new best. The parent is the last kept trial. Recording the
    same trial again (the same key, or the same commit and values) prints the stored one."""
    from lineage import loops

    pairs: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.UsageError(f"--set wants COL=VALUE, got {item!r}")
        pairs[name] = value
    outcome = loops.record_result(
        ledger_of(ctx),
        project,
        metric=metric,
        status=status,
        description=description,
        commit=commit,
        memory_gb=memory_gb,
        values=pairs,
        append_to=append_tsv,
        git_repo=git_repo,
        metric_name=metric_name,
        lower_is_better=lower_is_better,
        idempotency_key=idempotency_key,
        rerun_of=rerun_of,
    )
    if fmt == "json":
        click.echo(json.dumps(outcome.to_dict(), indent=2, ensure_ascii=False))
        return
    warn(outcome.warnings)
    trial = outcome.trial
    parts = [
        f"exp_{trial.exp_id}",
        trial.status.value,
        f"{outcome.metric_name}={fmt_number(trial.core_metric)}",
        f"Δ={fmt_number(trial.delta_vs_best, signed=True)}",
    ]
    if not outcome.created:
        parts.append("already recorded: nothing stored or appended")
    elif outcome.best_before is not None:
        parts.append(f"vs best exp_{outcome.best_before.exp_id} ({fmt_number(outcome.best_before.core_metric)})")
    if outcome.created:
        parts.append("NEW BEST" if outcome.is_new_best else "not a new best")
    click.echo("  ".join(parts))
    if outcome.noise is not None:
        click.echo(f"  {outcome.noise.text}")
    for similar in outcome.similar_prior:  # "was this tried?": the agent learns it at once
        click.echo(
            f"  similar to exp_{similar.exp_id} ({similar.status}, score {similar.score:.2f}): {similar.hypothesis}"
        )
    for said in outcome.tried_before:  # a sweep or a repeat, in one line each
        click.echo(f"  {said.says}")


# -- watch -------------------------------------------------------------------------------


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--project", "-p", required=True, help="Project slug (created from the file if new).")
@click.option("--format", "fmt", type=click.Choice(["auto", *TABLE_FORMATS]), default="auto", show_default=True)
@click.option("--lower-is-better/--higher-is-better", default=None, help="Direction, when the project is new.")
@click.option("--best-policy", type=click.Choice(["kept", "fieldkit"]), default=None)
@mapping_options
@click.option(
    "--server",
    default=None,
    metavar="URL",
    help="Send the rows to a lineage server (http://host:8000) instead of the local --db.",
)
@click.option("--token", envvar="LINEAGE_TOKEN", default=None, help="Bearer token for --server ($LINEAGE_TOKEN).")
@click.option("--once", is_flag=True, help="Sync once and exit.")
@click.option("--poll", is_flag=True, help="Poll the file instead of using file notifications (network drives).")
@click.pass_context
def watch(
    ctx: click.Context,
    file: Path,
    project: str,
    fmt: str,
    lower_is_better: bool | None,
    best_policy: str | None,
    columns: ColumnFlags,
    server: str | None,
    token: str | None,
    once: bool,
    poll: bool,
) -> None:
    """Follow FILE, the results table of a running loop, into PROJECT: new rows are in
    the ledger within a second, rows rewritten in place update their trial, a restart or
    a replay adds nothing twice, a truncated file warns and deletes nothing. Ctrl-C stops."""
    from lineage.loops import RemoteSync, ResultsSync

    options = columns.import_options(lower_is_better)
    sync: Any
    if server:
        sync = RemoteSync(
            server,
            token,
            project,
            file,
            fmt=None if fmt == "auto" else fmt,
            options=options,
            best_policy=best_policy,
            git_repo=columns.git_repo,
        )
    else:
        sync = ResultsSync(
            ledger_of(ctx),
            project,
            file,
            fmt=None if fmt == "auto" else fmt,
            options=options,
            best_policy=best_policy,
            git_repo=columns.git_repo,
        )

    def show(report: Any) -> None:
        warn(report.warnings)
        if report.inserted:
            click.echo(f"added {len(report.inserted)}: {_ids(report.inserted)}")
        if report.linked:
            click.echo(f"linked {len(report.linked)} (already recorded through the API): {_ids(report.linked)}")
        if report.updated:
            click.echo(f"updated {len(report.updated)}: {_ids(report.updated)}")

    if once:
        show(sync.sync())
        return
    where = f" on {server}" if server else ""
    click.echo(f"watching {file} into {project!r}{where} (Ctrl-C stops)", err=True)
    sync.watch(on_sync=show, force_polling=True if poll else None)


def _ids(ids: list[str], limit: int = 12) -> str:
    shown = ", ".join(f"exp_{i}" for i in ids[:limit])
    return shown + (f" ... ({len(ids) - limit} more)" if len(ids) > limit else "")


# -- plot --------------------------------------------------------------------------------


@click.command()
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option(
    "-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path), help="progress.png, .svg or .pdf"
)
@click.option("--title", default=None)
@click.pass_context
def plot(ctx: click.Context, project: str, output: Path, title: str | None) -> None:
    """Draw PROJECT's progress: every trial a dot, kept ones highlighted, crashes marked,
    the running best as a step line (needs the 'plot' extra: matplotlib)."""
    from lineage.loops import plot_progress

    count = plot_progress(ledger_of(ctx), project, output, title=title)
    click.echo(f"plotted {count} trials to {output}", err=True)
