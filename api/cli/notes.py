"""``lineage note add`` and ``lineage note list``: the project notebook over the command
line (``ledger.notes``: the rules, the cited trials, the contradiction flag). A note citing
trials the project does not have is one line on stderr naming them, and nothing is stored."""

from __future__ import annotations

import json

import click

from api.cli.base import ledger_of

#: characters of a note's text a line of the text output shows
LINE_TEXT = 160


@click.group()
def note() -> None:
    """The project notebook: insights not tied to one trial, each citing its trials."""


@note.command("add")
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option(
    "--cite",
    "cites",
    multiple=True,
    required=True,
    metavar="EXP[,EXP]",
    help="A trial that supports the note (repeatable or comma-separated; exp_012 or 012).",
)
@click.option("--author", default=None, help="Who wrote it.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.argument("text")
@click.pass_context
def add(ctx: click.Context, project: str, cites: tuple[str, ...], author: str | None, fmt: str, text: str) -> None:
    """Add TEXT to PROJECT's notebook, citing the trials that show it."""
    cited = [part.strip() for raw in cites for part in raw.split(",") if part.strip()]
    fields = {"text": text, "cites": cited, **({"author": author} if author else {})}
    added = ledger_of(ctx).notes.add_note(project, fields)
    if fmt == "json":
        click.echo(json.dumps(added.to_dict(), indent=2, ensure_ascii=False))
        return
    click.echo(f"note {added.id} added to {project}, citing {', '.join('exp_' + c for c, _ in added.cites)}")


@note.command("list")
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option("--limit", default=20, show_default=True, type=int, help="Notes to show, at most 200.")
@click.option("--before", "before_id", default=None, type=int, help="Only notes older than this id (the next page).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def list_notes(ctx: click.Context, project: str, limit: int, before_id: int | None, fmt: str) -> None:
    """PROJECT's notes, newest first, each with its cited trials and, when a later kept
    trial contradicts it, that trial."""
    items, next_before_id = ledger_of(ctx).notes.notes(project, before_id=before_id, limit=limit)
    if fmt == "json":
        click.echo(
            json.dumps(
                {"project": project, "items": [n.to_dict() for n in items], "next_before_id": next_before_id},
                indent=2,
                ensure_ascii=False,
            )
        )
        return
    if not items:
        click.echo("no notes")
        return
    for n in items:
        text = " ".join(n.text.split())
        text = f"{text[:LINE_TEXT]}{'…' if len(text) > LINE_TEXT else ''}"
        cited = ", ".join(f"exp_{exp_id} ({status or 'deleted'})" for exp_id, status in n.cites)
        flag = f"  CONTRADICTED: {n.contradicted.why}" if n.contradicted is not None else ""
        click.echo(f"#{n.id}  {n.created_at or ''}  {text}  [cites {cited}]{flag}")
