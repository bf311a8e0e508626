"""Results files in and out: ``lineage import`` (fieldkit, autoresearch or generic, sniffed
from the first line; atomic; through ``ledger.files.import_file``, the one entrance the HTTP
import and the upload page share) and ``lineage export`` (fieldkit, extended, csv, parquet,
or the project's own autoresearch/generic file).

The rules (status words, direction, lineage, exp_ids) are in :mod:`lineage.formats`;
the use-cases in :mod:`lineage.loops` and the ledger.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import click

from api.cli.base import ColumnFlags, ledger_of, mapping_options, progress_bar, project_option, warn


@click.command("import")
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
@click.option(
    "--lower-is-better/--higher-is-better",
    default=None,
    help="Direction, when the project is new (autoresearch/generic: else inferred; fieldkit: else lower).",
)
@click.option("--best-policy", type=click.Choice(["kept", "fieldkit"]), default=None)
@mapping_options
@click.option("--preview", is_flag=True, help="Check the file and show what would be imported; store nothing.")
@click.pass_context
def import_cmd(
    ctx: click.Context,
    file: Path,
    project: str,
    fmt: str,
    lower_is_better: bool | None,
    best_policy: str | None,
    columns: ColumnFlags,
    preview: bool,
) -> None:
    """Import FILE (a results.tsv) into PROJECT, atomically; the project is created if new."""
    from lineage.formats.text import check_text

    ledger = ledger_of(ctx)
    text = check_text(file.read_bytes(), source=str(file))
    with progress_bar("importing", text.count("\n") - 1) as progress:
        report = ledger.files.import_file(
            project,
            io.StringIO(text, newline=""),
            fmt=fmt,
            source=str(file),
            progress=progress,
            create_with={},
            options=columns.import_options(lower_is_better),
            best_policy=best_policy,
            git_repo=columns.git_repo,
            preview=preview,
            followed=file,
        )
    warn(report.warnings)
    click.echo(import_summary(report))


def import_summary(report: Any) -> str:
    """One line: what an import stored (or would) and decided."""
    direction = "lower" if report.lower_is_better else "higher"
    done = "imported" if report.committed else "would import (preview; nothing stored)"
    text = f"; {len(report.text_lines)} lines kept as text" if report.text_lines else ""
    return (
        f"{done} {report.rows} trials into {report.project!r} ({report.format}; metric {report.metric!r}, "
        f"{direction} is better: {report.direction}{text})"
    )


@click.command("export")
@project_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Default: stdout.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["fieldkit", "extended", "csv", "parquet", "autoresearch", "generic"]),
    default="fieldkit",
    show_default=True,
    help="fieldkit: results.tsv as fieldkit writes it; extended: plus clip-scale stats and extra; "
    "csv/parquet: a typed table (extra.* as columns, UTC times); "
    "autoresearch/generic: the project's own results file (an imported one byte for byte).",
)
@click.pass_context
def export_cmd(ctx: click.Context, project: str, output: Path | None, fmt: str) -> None:
    """Export PROJECT's trials."""
    if fmt in ("autoresearch", "generic"):
        export_table(ctx, project, output, fmt)
        return
    ledger = ledger_of(ctx)
    if fmt in ("csv", "parquet"):
        if output is None and fmt == "parquet":
            raise click.UsageError("--format parquet needs -o FILE")
        frame = ledger.tables.dataframe(project)  # typed: lineage.formats.table_export
        if fmt == "csv":
            frame.to_csv(output or sys.stdout, index=False)
        else:
            from lineage.formats.table_export import write_parquet

            try:
                write_parquet(frame, output)
            except ImportError:
                raise click.ClickException(
                    "parquet export needs pyarrow: pip install 'lineage-ledger[parquet]'"
                ) from None
        return
    from lineage.formats.fieldkit import write_trials

    total = ledger.projects.project(project).trial_count  # also: an unknown project fails before any output
    with _open_out(output) as stream, progress_bar("exporting", total if output is not None else 0) as progress:
        rows = _counted(ledger.tables.stream_trials(project), progress)
        count = write_trials(rows, stream, extended=fmt == "extended")
    if output is not None:
        click.echo(f"exported {count} trials to {output}", err=True)


@contextlib.contextmanager
def _open_out(output: Path | None) -> Iterator[TextIO]:
    if output is None:
        yield sys.stdout
        return
    with output.open("w", encoding="utf-8", newline="") as stream:
        yield stream


def _counted(rows: Iterable[Any], update: Any, every: int = 1000) -> Iterator[Any]:
    for index, row in enumerate(rows, 1):
        if update is not None and index % every == 0:
            update(index)
        yield row


# -- autoresearch / generic tables -----------------------------------------------------------


def export_table(ctx: click.Context, project: str, output: Path | None, fmt: str) -> None:
    """``lineage export --format autoresearch|generic``."""

    ledger = ledger_of(ctx)
    ledger.projects.project(project)  # an unknown project fails before any output
    if output is None:
        count = ledger.files.export_results(project, sys.stdout, fmt=fmt)
        return
    with output.open("w", encoding="utf-8", newline="") as stream:
        count = ledger.files.export_results(project, stream, fmt=fmt)
    click.echo(f"exported {count} trials to {output}", err=True)
