"""Reading and shaping projects from the shell: ``lineage project create|list``,
``prompt`` and ``knowledge`` (fieldkit-compatible text) and ``best`` (``trials``:
:mod:`api.cli.trials`)."""

from __future__ import annotations

import json

import click

from api.cli.base import fmt_number, ledger_of, project_option


@click.group()
def project() -> None:
    """Create, list and show projects."""


@project.command("create")
@click.argument("slug")
@click.option("--title", default="")
@click.option("--metric", "metric_name", default="core_metric", show_default=True, help="Name of the metric.")
@click.option("--lower-is-better/--higher-is-better", default=True, show_default=True)
@click.option("--best-policy", type=click.Choice(["kept", "fieldkit"]), default="kept", show_default=True)
@click.pass_context
def project_create(
    ctx: click.Context, slug: str, title: str, metric_name: str, lower_is_better: bool, best_policy: str
) -> None:
    """Create project SLUG."""
    created = ledger_of(ctx).projects.create_project(
        slug, title=title, metric_name=metric_name, lower_is_better=lower_is_better, best_policy=best_policy
    )
    click.echo(f"created project {created.slug!r}")


@project.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.pass_context
def project_list(ctx: click.Context, fmt: str) -> None:
    """List projects."""
    items = ledger_of(ctx).projects.projects()
    if fmt == "json":
        click.echo(json.dumps([p.to_dict() for p in items], indent=2))
        return
    for p in items:
        direction = "lower" if p.lower_is_better else "higher"
        click.echo(f"{p.slug}\t{p.trial_count} trials\t{p.metric_name} ({direction} is better)\t{p.title}")


# -- reading the ledger ----------------------------------------------------------------


@click.command()
@project_option
@click.option("--specialist", "-s", default="", help="The specialist whose session starts (optional).")
@click.option("--top-k", default=20, show_default=True, type=int)
@click.option("--recent-n", default=30, show_default=True, type=int)
@click.option("--last-m", default=10, show_default=True, type=int)
@click.option("--timestamp", default="", help="Session timestamp shown in the header.")
@click.option(
    "--format",
    "style",
    type=click.Choice(["auto", "fieldkit", "loop"]),
    default="auto",
    show_default=True,
    help="fieldkit: fieldkit's exact text; loop: the loop's own sections (commits, the file's columns, "
    "diff sizes); auto: fieldkit for a project not fed by a results file when --specialist is "
    "given, else loop.",
)
@click.option("--wrap", is_flag=True, help="Add how to record this session's trial (with `lineage record`).")
@click.pass_context
def prompt(
    ctx: click.Context,
    project: str,
    specialist: str,
    top_k: int,
    recent_n: int,
    last_m: int,
    timestamp: str,
    style: str,
    wrap: bool,
) -> None:
    """Print the session-start prompt (fieldkit's text for fieldkit projects)."""
    text = ledger_of(ctx).agent.prompt_document(
        project,
        specialist=specialist,
        top_k=top_k,
        recent_n=recent_n,
        last_m=last_m,
        timestamp=timestamp,
        wrap=wrap,
        face="cli",
        style=style,
    )[1]
    click.echo(text, nl=False)


@click.command()
@project_option
@click.option("--recent-n", default=30, show_default=True, type=int)
@click.option("--last-m", default=10, show_default=True, type=int)
@click.pass_context
def knowledge(ctx: click.Context, project: str, recent_n: int, last_m: int) -> None:
    """Print the KNOWLEDGE.md part of the prompt."""
    click.echo(ledger_of(ctx).agent.render_knowledge(project, recent_n=recent_n, last_m=last_m), nl=False)


@click.command()
@project_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_context
def best(ctx: click.Context, project: str, fmt: str) -> None:
    """Print the project's current best trial."""
    trial = ledger_of(ctx).trials.best(project)
    if fmt == "json":
        click.echo(json.dumps(trial.to_dict() if trial else None, indent=2, ensure_ascii=False))
    elif trial is None:
        click.echo("(no trials)")
    else:
        click.echo(f"{trial.label}\t{fmt_number(trial.core_metric)}\t{trial.status.value}\t{trial.hypothesis}")
