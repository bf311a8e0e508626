"""``lineage alerts``: what a project's training code raised ("loss is diverging"), newest
first; the rules and the reads are ``lineage.alerts``' (through ``Ledger.alerts_page``)."""

from __future__ import annotations

import json

import click

from api.cli.base import ledger_of

#: characters of an alert's text a line of the text output shows
LINE_TEXT = 120


@click.command()
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option("--exp", "exp_id", default=None, help="Only this trial's alerts.")
@click.option(
    "--level",
    "levels",
    multiple=True,
    metavar="LEVEL[,LEVEL]",
    help="Only these levels: info, warn, error (repeatable or comma-separated).",
)
@click.option("--limit", default=20, show_default=True, type=int, help="Alerts to show, at most 1000.")
@click.option("--before", "before_id", default=None, type=int, help="Only alerts older than this id (the next page).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def alerts(
    ctx: click.Context,
    project: str,
    exp_id: str | None,
    levels: tuple[str, ...],
    limit: int,
    before_id: int | None,
    fmt: str,
) -> None:
    """Alerts that PROJECT's training code raised, newest first: id, trial, level, step,
    time, title and text."""
    items, next_before_id = ledger_of(ctx).alerts.alerts_page(
        project, exp_id=exp_id, levels=list(levels) or None, before_id=before_id, limit=limit
    )
    if fmt == "json":
        click.echo(
            json.dumps(
                {"project": project, "items": [a.to_dict() for a in items], "next_before_id": next_before_id},
                indent=2,
                ensure_ascii=False,
            )
        )
        return
    if not items:
        click.echo("no alerts")
        return
    for a in items:
        step = f"step {a.step}" if a.step is not None else "step —"
        text = " ".join(a.text.split())
        text = f" — {text[:LINE_TEXT]}{'…' if len(text) > LINE_TEXT else ''}" if text else ""
        click.echo(f"#{a.id}  exp_{a.exp_id}  {a.level.upper():<5}  {step}  {a.created_at or ''}  {a.title}{text}")
    if next_before_id is not None:
        click.echo(f"(older alerts: --before {next_before_id})")
