"""``lineage record``, ``lineage watch`` and ``lineage plot``: autoresearch-style loops
from an agent's shell, and the import/export of their results tables (called by
``lineage import`` / ``lineage export`` in :mod:`api.cli`).

The rules (status words, direction, lineage, exp_ids) are in
:mod:`lineage.formats.autoresearch`; the use-cases in :mod:`lineage.loops`.
"""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable

import click

TABLE_FORMATS = ("autoresearch", "generic")


def _ledger(ctx: click.Context):  # type: ignore[no-untyped-def]
    from api.cli import _ledger as open_ledger

    return open_ledger(ctx)


def _fmt_number(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.6f}" if signed else f"{value:.6f}"


@dataclass(frozen=True)
class ColumnFlags:
    """The column-mapping flags of import and watch, as given on the command line."""

    id_column: str | None = None
    metric_column: str | None = None
    status_column: str | None = None
    description_column: str | None = None
    parent_column: str | None = None
    status_map: tuple[str, ...] = ()
    git_repo: str | None = None

    def columns_given(self) -> bool:
        """Whether any flag that reads the file's columns was given (not ``--git-repo``)."""
        return any((self.id_column, self.metric_column, self.status_column, self.description_column,
                    self.parent_column, self.status_map))

    def import_options(self, lower_is_better: bool | None) -> Any:
        from lineage.formats.autoresearch import ImportOptions, parse_status_map

        return ImportOptions(
            id_column=self.id_column,
            metric=self.metric_column,
            status=self.status_column,
            description=self.description_column,
            parent=self.parent_column,
            lower_is_better=lower_is_better,
            status_map=parse_status_map(list(self.status_map)),
        )


def mapping_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The column-mapping flags of import and watch; they apply to autoresearch/generic
    files (a fieldkit file has fixed columns). The command receives them as one
    ``columns: ColumnFlags`` argument."""
    options = [
        click.option("--id", "id_column", default=None, metavar="COL",
                     help="autoresearch/generic: column holding the exp_ids (default: row numbers 000, 001, ...)."),
        click.option("--metric", "metric_column", default=None, metavar="COL",
                     help="autoresearch/generic: the metric column (default: the first numeric column after the "
                          "id columns)."),
        click.option("--status", "status_column", default=None, metavar="COL",
                     help="autoresearch/generic: the status column (default: found by name); '-': the file has none."),
        click.option("--description", "description_column", default=None, metavar="COL",
                     help="autoresearch/generic: the description column (default: found by name)."),
        click.option("--parent", "parent_column", default=None, metavar="COL",
                     help="autoresearch/generic: a column naming each row's parent (its commit or id); default: "
                          "the last keep before the row."),
        click.option("--status-map", "status_map", multiple=True, metavar="WORD=LABEL,...",
                     help="autoresearch/generic: more status words, e.g. oom=crash,flaky=discard (repeatable)."),
        click.option("--git-repo", type=click.Path(exists=True, file_okay=False), default=None,
                     help="autoresearch/generic: store subject, author time, diffstat and patch of each trial's "
                          "commit."),
    ]
    names = [field.name for field in fields(ColumnFlags)]

    @functools.wraps(command)
    def with_columns(*args: Any, **kwargs: Any) -> Any:
        columns = ColumnFlags(**{name: kwargs.pop(name) for name in names})
        return command(*args, columns=columns, **kwargs)

    for option in reversed(options):
        with_columns = option(with_columns)
    return with_columns


def sniff_file(path: Path) -> str:
    """The format of ``path`` from its first non-blank line (fieldkit, autoresearch or
    generic); a file no format claims goes to autoresearch, whose error names the line."""
    from lineage.formats import detect_format

    with path.open("rb") as fh:
        head = fh.read(1 << 16)
    for raw in head.split(b"\n"):
        line = raw.decode("utf-8", "replace").lstrip("\ufeff")
        if line.strip():
            found = detect_format(line)
            return found.name if found is not None else "autoresearch"
    return "autoresearch"


def warn(lines: Any) -> None:
    for line in lines:
        click.echo(f"warning: {line}", err=True)


def import_table(
    ctx: click.Context,
    file: Path,
    project: str,
    fmt: str,
    *,
    options: Any,
    best_policy: str | None,
    git_repo: str | None,
    progress: Any = None,
) -> None:
    """``lineage import`` of an autoresearch or generic file."""
    from lineage import loops
    from lineage.formats.text import check_text

    ledger = _ledger(ctx)
    text = check_text(file.read_bytes(), source=str(file))
    done = ledger.import_results(
        project, text, fmt=fmt, source=str(file), options=options, best_policy=best_policy,
        git_repo=git_repo, progress=progress,
    )
    warn(done.warnings)
    direction = "lower" if done.lower_is_better else "higher"
    click.echo(
        f"imported {done.rows} trials into {project!r} ({fmt}; metric {done.layout.metric!r}, "
        f"{direction} is better: {done.direction})"
    )


def export_table(ctx: click.Context, project: str, output: Path | None, fmt: str) -> None:
    """``lineage export --format autoresearch|generic``."""
    from lineage import loops

    ledger = _ledger(ctx)
    ledger.project(project)  # an unknown project fails before any output
    if output is None:
        count = ledger.export_results(project, sys.stdout, fmt=fmt)
        return
    with output.open("w", encoding="utf-8", newline="") as stream:
        count = ledger.export_results(project, stream, fmt=fmt)
    click.echo(f"exported {count} trials to {output}", err=True)


# -- record ------------------------------------------------------------------------------


@click.command()
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option("--metric", "metric", required=True, help="The metric value ('0' on a crash, '-', '-999': no result).")
@click.option("--status", required=True, help="keep, discard, crash, or any status word of the file.")
@click.option("--description", "-d", default="", help="What the trial changed.")
@click.option("--commit", default=None, help="The git commit of the trial.")
@click.option("--memory-gb", default=None, help="Peak GPU memory (the file's memory column).")
@click.option("--set", "values", multiple=True, metavar="COL=VALUE", help="Another column of the file (repeatable).")
@click.option("--append-tsv", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also append the line to this results file, in its own format.")
@click.option("--git-repo", type=click.Path(exists=True, file_okay=False), default=None,
              help="Store the commit's subject, author time, diffstat and patch.")
@click.option("--metric-name", default=None, help="For a new project without a file: the metric's name (val_bpb).")
@click.option("--lower-is-better/--higher-is-better", default=None, help="For a new project: the direction.")
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
    fmt: str,
) -> None:
    """Record one trial of a loop: prints its exp_id, the delta against the best before
    it and whether it is the new best. The parent is the last kept trial."""
    from lineage import loops

    pairs: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.UsageError(f"--set wants COL=VALUE, got {item!r}")
        pairs[name] = value
    outcome = loops.record_result(
        _ledger(ctx), project, metric=metric, status=status, description=description, commit=commit,
        memory_gb=memory_gb, values=pairs, append_to=append_tsv, git_repo=git_repo, metric_name=metric_name,
        lower_is_better=lower_is_better,
    )
    if fmt == "json":
        click.echo(json.dumps(outcome.to_dict(), indent=2, ensure_ascii=False))
        return
    trial = outcome.trial
    parts = [f"exp_{trial.exp_id}", trial.status.value, f"{outcome.metric_name}={_fmt_number(trial.core_metric)}",
             f"Δ={_fmt_number(trial.delta_vs_best, signed=True)}"]
    if outcome.best_before is not None:
        parts.append(f"vs best exp_{outcome.best_before.exp_id} ({_fmt_number(outcome.best_before.core_metric)})")
    parts.append("NEW BEST" if outcome.is_new_best else "not a new best")
    click.echo("  ".join(parts))
    for similar in outcome.similar_prior:  # "was this tried?": the agent learns it at once
        click.echo(f"  similar to exp_{similar.exp_id} ({similar.status}, score {similar.score:.2f}): {similar.hypothesis}")


# -- watch -------------------------------------------------------------------------------


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--project", "-p", required=True, help="Project slug (created from the file if new).")
@click.option("--format", "fmt", type=click.Choice(["auto", *TABLE_FORMATS]), default="auto", show_default=True)
@click.option("--lower-is-better/--higher-is-better", default=None, help="Direction, when the project is new.")
@click.option("--best-policy", type=click.Choice(["kept", "fieldkit"]), default=None)
@mapping_options
@click.option("--server", default=None, metavar="URL",
              help="Send the rows to a lineage server (http://host:8000) instead of the local --db.")
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
        if columns.columns_given():
            raise click.UsageError(
                "--id, --metric, --status, --description, --parent and --status-map cannot go to a server "
                "(its file upload infers the columns); import the file with them into the server's database "
                "first, then watch with --server"
            )
        sync = RemoteSync(server, token, project, file, fmt=None if fmt == "auto" else fmt, options=options,
                          best_policy=best_policy, git_repo=columns.git_repo)
    else:
        sync = ResultsSync(
            _ledger(ctx), project, file, fmt=None if fmt == "auto" else fmt, options=options,
            best_policy=best_policy, git_repo=columns.git_repo,
        )

    def show(report: Any) -> None:
        warn(report.warnings)
        if report.inserted:
            click.echo(f"added {len(report.inserted)}: {_ids(report.inserted)}")
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
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="progress.png, .svg or .pdf")
@click.option("--title", default=None)
@click.pass_context
def plot(ctx: click.Context, project: str, output: Path, title: str | None) -> None:
    """Draw PROJECT's progress: every trial a dot, kept ones highlighted, crashes marked,
    the running best as a step line (needs the 'plot' extra: matplotlib)."""
    from lineage.loops import plot_progress

    count = plot_progress(_ledger(ctx), project, output, title=title)
    click.echo(f"plotted {count} trials to {output}", err=True)
