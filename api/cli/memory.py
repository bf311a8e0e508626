"""The agent's memory from the shell: ``lineage similar`` ("was this tried?"), ``summary``
(where the loop stands), ``guardrail`` (limits that trip) and ``hook`` (webhooks). Each
calls one use-case of ``lineage.service``; errors become one line on stderr through
``api.cli.base.LedgerGroup``."""

from __future__ import annotations

import json

import click

from api.cli.base import ledger_of

# -- similar ---------------------------------------------------------------------------


@click.command()
@click.argument("text")
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option("--limit", default=5, show_default=True, type=int, help="Trials to show, at most 50.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def similar(ctx: click.Context, text: str, project: str, limit: int, fmt: str) -> None:
    """Was this tried? The past trials of PROJECT whose hypothesis and notes are closest to
    TEXT, closest first, with a score in [0, 1] and the delta against the best before each."""
    ledger = ledger_of(ctx)
    found = ledger.agent.find_similar(project, text, limit)
    tried, said = ledger.knobs.tried_of_text(project, text)
    if fmt == "json":
        body = {
            "project": project,
            "q": text,
            "items": [s.to_dict() for s in found],
            "same_knob": [t.to_dict() for t in tried],
            "tried_before": [one.to_dict() for one in said],
        }
        click.echo(json.dumps(body, indent=2, ensure_ascii=False))
        return
    if not found:
        click.echo("nothing similar was tried")
    for s in found:
        click.echo(
            f"{s.score:.2f}  exp_{s.exp_id}  {s.status}  metric={_num(s.core_metric)}  Δ={_delta(s.delta_vs_best)}  {s.hypothesis}"
        )
    for t in tried:
        same = "  (same value)" if t.same_value else ""
        click.echo(f"same knob {t.name}: {t.value}  exp_{t.exp_id}  {t.status}  metric={_num(t.core_metric)}{same}")
    for one in said:
        click.echo(one.says)


@click.command()
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option(
    "--knob", "-k", default=None, help="The knob in any spelling: MATRIX_LR, 'matrix lr'. Omitted: every knob."
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def knobs(ctx: click.Context, project: str, knob: str | None, fmt: str) -> None:
    """What was each knob tried at? Per knob, each value in the order first tried, with its
    trials' status, metric and delta, read from their git patches, configs, results-file
    columns and hypotheses (the same answer as GET .../knob-history and MCP knob_history)."""
    body = ledger_of(ctx).knobs.knob_history(project, knob)
    if fmt == "json":
        click.echo(json.dumps(body, indent=2, ensure_ascii=False))
        return
    if not body["knobs"]:
        click.echo(f"{body['knob']}: never tried" if knob is not None else "no knob changes recorded")
        return
    if body["window"]:
        click.echo(f"(the newest {body['window']} tries)")
    for one in body["knobs"]:
        click.echo(f"{one['name']} ({one['knob']}): {one['tried']} tries, {len(one['values'])} values")
        for value in one["values"]:
            trials = ", ".join(
                f"exp_{t['exp_id']} {t['status']} {_num(t['core_metric'])} Δ={_delta(t['delta_vs_best'])}"
                for t in value["trials"]
            )
            click.echo(f"  {value['value']}: {trials}")


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.6g}"


def _delta(value: float | None) -> str:
    return "—" if value is None else f"{value:+.6g}"


# -- progress summary, guardrails, webhooks ---------------------------------------------------


@click.command()
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option(
    "--last",
    "last_n",
    default=20,
    show_default=True,
    type=int,
    help="The window of the recent keep rate and of the trend rule.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def summary(ctx: click.Context, project: str, last_n: int, fmt: str) -> None:
    """Where PROJECT's loop stands: trials per status, keep rate, best and when it was
    reached, crash streak, time spent, and the trend (improving / plateauing / stuck / starting)."""
    found = ledger_of(ctx).agent.summary(project, last_n=last_n)
    if fmt == "json":
        click.echo(json.dumps(found.to_dict(), indent=2, ensure_ascii=False))
        return
    counts = ", ".join(f"{status} {n}" for status, n in sorted(found.by_status.items())) or "none"
    click.echo(f"{found.project}: {found.trials} trials ({counts})")
    click.echo(found.short_text())


@click.group()
def guardrail() -> None:
    """Per-project guardrails: crash streak, trials without a new best, hours budget."""


@guardrail.command("set")
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option("--max-crash-streak", type=int, default=None, help="Trip after this many consecutive crashes.")
@click.option(
    "--max-trials-without-improvement", type=int, default=None, help="Trip after this many trials without a new best."
)
@click.option("--budget-hours", type=float, default=None, help="Trip when the trials' total_s reach this many hours.")
@click.pass_context
def guardrail_set(
    ctx: click.Context,
    project: str,
    max_crash_streak: int | None,
    max_trials_without_improvement: int | None,
    budget_hours: float | None,
) -> None:
    """Replace PROJECT's guardrails (a limit left out is off; none at all removes them)."""
    policy = ledger_of(ctx).agent.set_guardrails(
        project,
        {
            "max_crash_streak": max_crash_streak,
            "max_trials_without_improvement": max_trials_without_improvement,
            "budget_hours": budget_hours,
        },
    )
    click.echo(json.dumps(policy.to_dict()))


@guardrail.command("show")
@click.option("--project", "-p", required=True, help="Project slug.")
@click.pass_context
def guardrail_show(ctx: click.Context, project: str) -> None:
    """PROJECT's guardrails and which of them are tripped (JSON)."""
    found = ledger_of(ctx).agent.summary(project)
    click.echo(
        json.dumps(
            found.guardrails or {"policy": ledger_of(ctx).agent.guardrail_policy(project).to_dict(), "tripped": []},
            indent=2,
            ensure_ascii=False,
        )
    )


@click.group()
def hook() -> None:
    """Webhooks: signed POSTs on new best, guardrail tripped, trial crashed."""


@hook.command("add")
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option("--url", required=True, help="An http:// or https:// URL that receives the events.")
@click.option(
    "--events",
    multiple=True,
    metavar="EVENT[,EVENT]",
    help="new_best, guardrail_tripped, trial_crashed, alert (repeatable or comma-separated; default: all).",
)
@click.option(
    "--format",
    "body_format",
    type=click.Choice(["json", "slack"]),
    default="json",
    show_default=True,
    help="json: the event with a 'text' line; slack: {'text': ...} alone.",
)
@click.pass_context
def hook_add(ctx: click.Context, project: str, url: str, events: tuple[str, ...], body_format: str) -> None:
    """Add a webhook to PROJECT; prints its signing secret (shown this once) on stdout."""
    added, secret = ledger_of(ctx).agent.add_hook(project, url, events=events or None, body_format=body_format)
    click.echo(secret)
    click.echo(
        f"added webhook {added.id} -> {added.url} ({', '.join(added.events)}); "
        "the secret above signs its deliveries and is shown only this once",
        err=True,
    )


@hook.command("list")
@click.option("--project", "-p", required=True, help="Project slug.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def hook_list(ctx: click.Context, project: str, fmt: str) -> None:
    """PROJECT's webhooks with their deliveries (secrets are never shown again)."""
    found = ledger_of(ctx).agent.hooks(project)
    if fmt == "json":
        click.echo(json.dumps([h.to_dict() for h in found], indent=2))
        return
    for h in found:
        click.echo(
            f"{h.id}  {h.url}  {','.join(h.events)}  {h.body_format}  "
            f"pending={h.pending} delivered={h.delivered} failed={h.failed}"
        )


@hook.command("remove")
@click.option("--project", "-p", required=True, help="Project slug.")
@click.argument("hook_id", type=int)
@click.pass_context
def hook_remove(ctx: click.Context, project: str, hook_id: int) -> None:
    """Remove webhook HOOK_ID of PROJECT (with its undelivered events)."""
    ledger_of(ctx).agent.remove_hook(project, hook_id)
    click.echo(f"removed webhook {hook_id}", err=True)


@hook.command("deliver")
@click.pass_context
def hook_deliver(ctx: click.Context) -> None:
    """Send the due webhook deliveries once (what `lineage serve` does in the background)."""
    from lineage.monitor.delivery import deliver_due

    report = deliver_due(ledger_of(ctx))
    for error in report.errors:
        click.echo(error, err=True)
    click.echo(json.dumps(report.to_dict()))
