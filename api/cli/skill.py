"""``lineage skill``: the ledger as an agent skill, so coding agents learn it as they learn
other tools. Prints a ``SKILL.md`` in the Agent Skills format (YAML front matter with
``name`` and ``description``, then when to call what); ``--install DIR`` writes it to
``DIR/lineage-ledger/SKILL.md`` and prints a snippet for the project's ``AGENTS.md`` (an
edited ``SKILL.md`` is replaced only with ``--force``, and never through a symbolic link)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

SKILL_NAME = "lineage-ledger"

SKILL_MD = """\
---
name: lineage-ledger
description: Experiment memory for ML research loops (autoresearch, nightly sweeps, trainer runs). Use it at the start of a research session to read where the loop stands and the lineage of kept changes, before proposing a trial to ask whether it was already tried, and after every run to record its result (keep, discard or crash) so the next session builds on it.
---

# Lineage Ledger

The ledger holds every trial of a research loop: what was changed (hypothesis), the
outcome (status and the project's metric), its parent (the trial it builds on) and the
commit. Reach it through MCP (`lineage mcp` over stdio, or `/mcp` of `lineage serve`),
the `lineage` command line, or the HTTP API (`/api/v1`, documented at `/docs`).

## When to call what

| moment | MCP tool | command line | HTTP |
|---|---|---|---|
| find the project | `list_projects` | `lineage project list` | `GET /api/v1/projects` |
| blank ledger | `create_project` (slug, metric_name, lower_is_better) | `lineage project create` | `POST /api/v1/projects` |
| session start | `get_prompt` (project) | `lineage prompt -p P --wrap` | `GET /api/v1/projects/P/prompt` |
| where the loop stands | `get_summary` | `lineage summary -p P` | `GET /api/v1/projects/P/summary` |
| before a trial: was this tried? | `find_similar` (text) | `lineage similar "TEXT" -p P` | `GET /api/v1/projects/P/similar?q=TEXT` |
| after a run: record it | `record_trial` | `lineage record -p P --metric M --status S -d TEXT` | `POST /api/v1/projects/P/trials` |
| fix a recorded trial | `update_trial` | | `PATCH /api/v1/projects/P/trials/ID` |
| a loop that writes results.tsv | | `lineage watch results.tsv -p P` | |

## Session start

1. Read the prompt (`get_prompt`) and follow it: it names the current best and its commit,
   the chain of kept changes that led there, the latest trials, the loop's status words,
   and exactly how this project wants its trials recorded.
2. Check `get_summary`: a tripped guardrail or a long crash streak means change approach.

## Before proposing a trial

Ask `find_similar` with the idea in words. ML spellings count as one (lr and learning
rate, wd and weight decay, MATRIX_LR and matrix lr). A close earlier trial with its
outcome is evidence: do not repeat a discard without a new reason.

## Recording a trial

- Send `status` and, when there is a result, `core_metric` (the project's metric) and a
  one-sentence `hypothesis`. A failed run (crash, OOM) has no result: its 0 is read as none.
- Leave `parent_exp` out: the ledger forks from the branch tip (the last keep) and says so
  (`parent_defaulted`). Send `"parent_exp": ""` only to start a new root.
- Leave `exp_id` out to get the next number; never send `delta_vs_best` (computed).
- Pass an idempotency key (MCP `idempotency_key`, HTTP `Idempotency-Key`) and reuse it on
  retries: a retry never records twice.
- Read the answer's `warnings`: they say what the ledger read differently.
- A project fed by a results file (the prompt says so): append the row as the loop's
  program.md says, or `lineage record ... --append-tsv FILE` with the file the prompt names
  (a project follows one file and refuses another); record each trial once.
"""

AGENTS_SNIPPET = """\
## Experiment memory (Lineage Ledger)

This project records its research trials in Lineage Ledger (skill: `lineage-ledger`).
At session start read the prompt (MCP `get_prompt`, or `lineage prompt -p PROJECT --wrap`);
before proposing a trial ask `find_similar`; after every run record it (`record_trial`, or
`lineage record`), leaving `parent_exp` out so it forks from the branch tip (the last keep).
"""


@click.command()
@click.option(
    "--install",
    "install_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Write DIR/lineage-ledger/SKILL.md (e.g. .claude/skills or .agents/skills) and print a snippet for AGENTS.md.",
)
@click.option("--force", is_flag=True, help="With --install: replace a SKILL.md that differs from this one (edited).")
def skill(install_dir: Path | None, force: bool) -> None:
    """Print the ledger's agent skill (SKILL.md, the Agent Skills format), or install it
    into a skills directory and print the AGENTS.md snippet that points agents to it."""
    if install_dir is None:
        click.echo(SKILL_MD, nl=False)
        return
    target = install_dir / SKILL_NAME / "SKILL.md"
    if _install(target, force=force):
        click.echo(f"wrote {target}; add the lines below to AGENTS.md", err=True)
    else:
        click.echo(f"{target} is already this skill; add the lines below to AGENTS.md", err=True)
    click.echo(AGENTS_SNIPPET, nl=False)


def _install(target: Path, *, force: bool) -> bool:
    """Write :data:`SKILL_MD` to ``target``; False when it already holds it. Never writes
    through a symbolic link (the file or its skill directory), and replaces a file that
    differs (edited by hand) only with ``force``: the new text goes to a file of its own
    that then takes the name, so a link or a reader never sees half of it."""
    for path in (target.parent, target):
        if path.is_symlink():
            raise click.ClickException(f"{path} is a symbolic link; the skill is not written through one")
    if target.exists():
        if not target.is_file():
            raise click.ClickException(f"{target} is not a file")
        if target.read_bytes() == SKILL_MD.encode("utf-8"):
            return False
        if not force:
            raise click.ClickException(f"{target} differs from this skill (edited?); pass --force to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".SKILL.md.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(SKILL_MD.encode("utf-8"))
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True
