"""``lineage trials``: a project's trials with the API's filters and sort, as a table
(full hypotheses, wrapped to the terminal or ``--width``), JSON or typed CSV."""

from __future__ import annotations

import itertools
import json
import shutil
import sys
import textwrap
from typing import Any

import click

from api.cli.base import fmt_number, ledger_of, project_option

_HEADERS = ("exp", "status", "metric", "Δ", "parent", "specialist", "hypothesis")


@click.command()
@project_option
@click.option(
    "--filter",
    "expression",
    default=None,
    help="A filter expression: 'status = keep and core_metric < 0.99', 'extra.memory_gb >= 45', "
    "'hypothesis ~ warmup', 'exp_id > exp_1000'; a bare word searches the text (see README).",
)
@click.option("--status", multiple=True, help="Only these statuses (repeatable).")
@click.option("--specialist", default=None, help="Only this specialist's trials.")
@click.option("--domain", default=None, help="Only trials of this domain.")
@click.option("--parent", default=None, help="Only children of this trial (exp_12 or 12; '' for roots).")
@click.option("--min", "metric_min", type=float, default=None, help="core_metric >= this.")
@click.option("--max", "metric_max", type=float, default=None, help="core_metric <= this.")
@click.option("-q", "--text", "text_query", default=None, help="Text in the hypothesis, notes or exp_id.")
@click.option(
    "--sort",
    default=None,
    help="seq (default), metric, exp_id (numeric-aware), any trial field or extra.KEY; -KEY descending.",
)
@click.option(
    "--limit",
    type=int,
    default=None,
    help="At most this many: the most recent (no --sort), else the first in sort order.",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option(
    "--width",
    type=int,
    default=None,
    help="Table width to wrap hypotheses at (default: the terminal's; 0: never wrap).",
)
@click.pass_context
def trials(
    ctx: click.Context,
    project: str,
    expression: str | None,
    status: tuple[str, ...],
    specialist: str | None,
    domain: str | None,
    parent: str | None,
    metric_min: float | None,
    metric_max: float | None,
    text_query: str | None,
    sort: str | None,
    limit: int | None,
    fmt: str,
    width: int | None,
) -> None:
    """List PROJECT's trials, filtered and sorted as the API does."""
    ledger = ledger_of(ctx)
    if limit is not None and limit < 1:
        raise click.BadParameter("must be at least 1", param_hint="--limit")
    filters: dict[str, Any] = {
        "status": [s.strip() for raw in status for s in raw.split(",") if s.strip()] or None,
        "specialist": specialist,
        "domain": domain,
        "parent": parent,
        "metric_min": metric_min,
        "metric_max": metric_max,
        "text_query": text_query,
        "expression": expression,
    }
    if filters["status"]:
        from lineage.domain import FailureLabel

        filters["status"] = [FailureLabel.parse(s).value for s in filters["status"]]
    if sort is None:  # the most recent, printed oldest first
        rows = (
            list(
                itertools.islice(ledger.tables.iter_trials_page(project, sort="seq", descending=True, **filters), limit)
            )
            if limit is not None
            else None
        )
        if rows is None:
            rows = list(ledger.tables.iter_trials_page(project, sort="seq", **filters))
        else:
            rows.reverse()
    else:
        rows = list(itertools.islice(ledger.tables.iter_trials_page(project, sort=sort, **filters), limit))
    if fmt == "json":
        click.echo(json.dumps([t.to_dict() for t in rows], indent=2, ensure_ascii=False))
        return
    if fmt == "csv":
        from lineage.formats.table_export import to_frame

        to_frame(rows).to_csv(sys.stdout, index=False)
        return
    _table(rows, width if width is not None else shutil.get_terminal_size((120, 24)).columns)


def _table(rows: list[Any], width: int) -> None:
    table: list[tuple[str, ...]] = [
        (
            t.label,
            t.status.value,
            fmt_number(t.core_metric),
            fmt_number(t.delta_vs_best, signed=True),
            f"exp_{t.parent_exp}" if t.parent_exp else "",
            t.specialist,
            " ".join(t.hypothesis.split()),
        )
        for t in rows
    ]
    headers: tuple[str, ...] = _HEADERS
    if not any(t.specialist for t in rows):  # a loop without specialists: no empty column
        headers = tuple(h for h in _HEADERS if h != "specialist")
        table = [(*r[:5], r[6]) for r in table]
    widths = [max([len(h), *(len(r[i]) for r in table)]) for i, h in enumerate(headers[:-1])]
    indent = sum(widths) + 2 * len(widths)
    room = width - indent if width > 0 else 0
    wrap = room >= 20  # too narrow a column wraps worse than a long line
    click.echo(("  ".join(h.ljust(w) for h, w in zip(headers, [*widths, 0]))).rstrip())
    for row in table:
        head = "  ".join(c.ljust(w) for c, w in zip(row[:-1], widths))
        lines = textwrap.wrap(row[-1], room) if wrap and row[-1] else [row[-1]]
        click.echo(f"{head}  {lines[0]}".rstrip())
        for line in lines[1:]:
            click.echo(" " * indent + line)
