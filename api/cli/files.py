"""Results files in and out: ``lineage import`` (fieldkit, autoresearch or generic, sniffed
from the first line; atomic; through ``ledger.files.import_file``, the one entrance the HTTP
import and the upload page share) and ``lineage export`` (fieldkit, extended, csv, parquet,
or the project's own autoresearch/generic file).

The rules (status words, direction, lineage, exp_ids) are in :mod:`lineage.formats`;
the use-cases in :mod:`lineage.loops` and the ledger.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import click

from api.cli.base import ColumnFlags, ledger_of, mapping_options, progress_bar, project_option, warn
from lineage.loops.exporting import FORMATS as EXPORT_FORMATS


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
    type=click.Choice(list(EXPORT_FORMATS)),
    default="fieldkit",
    show_default=True,
    help="fieldkit: results.tsv as fieldkit writes it; extended: plus clip-scale stats and extra; "
    "csv/parquet: a typed table (extra.* as columns, UTC times); "
    "autoresearch/generic: the project's own results file (an imported one byte for byte); "
    "results: the project's own file, whichever it is (autoresearch's layout, else fieldkit's).",
)
@click.option(
    "--filter",
    "expression",
    default=None,
    help="Only the trials matching a filter expression (the trials table's: 'status = keep and val_bpb < 1').",
)
@click.option("--status", "statuses", multiple=True, help="Only trials of this status (repeatable).")
@click.pass_context
def export_cmd(
    ctx: click.Context, project: str, output: Path | None, fmt: str, expression: str | None, statuses: tuple[str, ...]
) -> None:
    """Export PROJECT's trials (the same bytes as the pages' download links)."""
    ledger = ledger_of(ctx)
    if output is None and fmt == "parquet":
        raise click.UsageError("--format parquet needs -o FILE")
    try:
        exported = ledger.exports.export(project, fmt, expression=expression, status=list(statuses) or None)
        chunks = iter(exported.chunks)
        first = next(chunks, b"")  # parquet's pyarrow is imported by now
    except ImportError:
        raise click.ClickException("parquet export needs pyarrow: pip install 'lineage-ledger[parquet]'") from None
    if output is None:
        stream = sys.stdout.buffer
        stream.write(first)
        for chunk in chunks:
            stream.write(chunk)
        stream.flush()
        return
    with output.open("wb") as out:
        out.write(first)
        for chunk in chunks:
            out.write(chunk)
    click.echo(f"exported {exported.count} trials to {output}", err=True)
