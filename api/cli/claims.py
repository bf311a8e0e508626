"""``lineage claim`` and ``lineage running``: parallel agents over the command line. A
claim reserves an idea as a running trial (``ledger.claims.claim``: the rule, the
near-duplicates, the refusal); ``running`` shows the frontier (the best, the branch tip,
who is running what: ``ledger.claims.frontier``)."""

from __future__ import annotations

import json

import click

from api.cli.base import ledger_of


@click.command()
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option("--hypothesis", "-d", required=True, help="The idea to claim, in words.")
@click.option("--owner", required=True, help="Who runs it (a run id, an agent's name); heartbeats name it too.")
@click.option("--parent", "parent_exp", default=None, help="The trial it forks from (default: the branch tip).")
@click.option("--notes", default=None, help="Knob changes or a patch summary.")
@click.option("--idempotency-key", default=None, help="A retry with this key gets the same claim back.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def claim(
    ctx: click.Context,
    project: str,
    hypothesis: str,
    owner: str,
    parent_exp: str | None,
    notes: str | None,
    idempotency_key: str | None,
    fmt: str,
) -> None:
    """Claim an idea before running it: it becomes a running trial held by OWNER, and its
    near-duplicates are named (or, when the project refuses duplicate claims, the claim is
    refused). Keep it alive with heartbeats; finish it by recording its result on it."""
    got = ledger_of(ctx).claims.claim(
        project, hypothesis, owner=owner, parent_exp=parent_exp, notes=notes, idempotency_key=idempotency_key
    )
    if fmt == "json":
        click.echo(json.dumps(got.to_dict(), indent=2, ensure_ascii=False))
        return
    verb = "claimed" if got.created else "already claimed"
    click.echo(f"{verb} exp_{got.trial.exp_id} for {owner} (parent: {got.trial.parent_exp or 'none'})")
    for warning in got.warnings:
        click.echo(f"warning: {warning}", err=True)


@click.command()
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def running(ctx: click.Context, project: str, fmt: str) -> None:
    """PROJECT's frontier: the best, the branch tip and who is running what."""
    frontier = ledger_of(ctx).claims.frontier(project)
    if fmt == "json":
        click.echo(json.dumps(frontier.to_dict(), indent=2, ensure_ascii=False))
        return
    for name, trial in (("best", frontier.best), ("tip", frontier.tip)):
        click.echo(
            f"{name}: " + ("none" if trial is None else f"exp_{trial.exp_id} {trial.core_metric} {trial.hypothesis}")
        )
    if not frontier.running:
        click.echo("running: none")
    for lease in frontier.running:
        beat = lease.heartbeat_at or "no heartbeat yet"
        click.echo(
            f"running: exp_{lease.exp_id}  {lease.owner or '?'}  since {lease.since}  (last: {beat})  {lease.hypothesis}"
        )
