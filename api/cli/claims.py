"""``lineage claim``, ``heartbeat``, ``finish`` and ``running``: parallel agents over the
command line. A claim reserves an idea as a running trial (``ledger.claims.claim``: the
rule, the near-duplicates, the refusal); its owner keeps it (``ledger.leases.heartbeat``)
and records its result (``ledger.claims.finish``); ``running`` shows the frontier (the
best, the branch tip, who is running what: ``ledger.claims.frontier``)."""

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
@click.option(
    "--lease",
    "lease_s",
    type=float,
    default=None,
    help="Seconds the claim lives without a heartbeat (10 to 86400; default: the project's lease).",
)
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
    lease_s: float | None,
    idempotency_key: str | None,
    fmt: str,
) -> None:
    """Claim an idea before running it: it becomes a running trial held by OWNER, and its
    near-duplicates are named (or, when the project refuses duplicate claims, the claim is
    refused). Keep it alive with heartbeats; finish it by recording its result on it."""
    got = ledger_of(ctx).claims.claim(
        project,
        hypothesis,
        owner=owner,
        parent_exp=parent_exp,
        notes=notes,
        lease_s=lease_s,
        idempotency_key=idempotency_key,
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
@click.option("--exp", "exp_id", required=True, help="The claimed trial's exp_id.")
@click.option("--owner", required=True, help="The owner that claimed it.")
@click.pass_context
def heartbeat(ctx: click.Context, project: str, exp_id: str, owner: str) -> None:
    """Keep OWNER's claim EXP alive for another lease. Another owner's claim, or one no
    longer running (finished, or lapsed), is an error and nothing changes."""
    lease = ledger_of(ctx).leases.heartbeat(project, exp_id, owner=owner)
    click.echo(f"exp_{lease.exp_id} held by {lease.owner} until {lease.expires_at}")


@click.command()
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option("--exp", "exp_id", required=True, help="The claimed trial's exp_id.")
@click.option("--owner", required=True, help="The owner that claimed it.")
@click.option("--metric", "core_metric", type=float, default=None, help="The core metric the run reached.")
@click.option(
    "--status", default="auto", show_default=True, help="auto (the ledger decides keep or discard) or a failure label."
)
@click.option("--notes", default=None, help="What happened, in words.")
@click.pass_context
def finish(
    ctx: click.Context, project: str, exp_id: str, owner: str, core_metric: float | None, status: str, notes: str | None
) -> None:
    """Record the result of OWNER's claim EXP (the ledger's verdict rules). Another owner's
    claim, or one no longer running (finished, or lapsed), is an error and nothing changes."""
    changes: dict[str, object] = {"status": status}
    if core_metric is not None:
        changes["core_metric"] = core_metric
    if notes is not None:
        changes["notes"] = notes
    finished = ledger_of(ctx).claims.finish(project, exp_id, owner=owner, changes=changes)
    trial = finished.trial
    noise = f" ({finished.noise.text})" if finished.noise is not None and finished.noise.delta is not None else ""
    click.echo(f"finished exp_{trial.exp_id}: {trial.status.value} {trial.core_metric}{noise}")


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
