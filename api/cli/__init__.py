"""The ``lineage`` command line: :data:`cli` (the root group) with every command of the
modules below added to it, and :func:`main`, the console script.

=============  ===============================================================
module         commands
=============  ===============================================================
``serve``      serve, demo, db, backup, token, mcp
``projects``   project, prompt, knowledge, best
``trials``     trials
``files``      import, export
``loops``      record, watch, plot
``memory``     similar, knobs, summary, guardrail, hook
``alerts``     alerts
``claims``     claim, heartbeat, finish, running
``notes``      note add, note list (the project notebook)
``skill``      skill (the agent skill: SKILL.md and an AGENTS.md snippet)
=============  ===============================================================

Every command opens the ledger on ``--db`` (a SQLite path or a database URL; default
``$LINEAGE_DATABASE_URL`` or ./lineage.db) and calls the service layer. A ledger error
prints one line on stderr and exits with status 2; nothing is half-written.

The imports go one way: this package imports the command modules, they import
:mod:`api.cli.base` (the group, the ledger of ``--db``, the shared options and output
helpers) and nothing else of ``api.cli``.

Other installed packages add commands through the ``lineage.commands`` entry points
(:class:`api.cli.base.LedgerGroup` finds them when asked for): the trainer's client
registers ``lineage spool flush`` there, so no module of ``api`` imports trainer code.
"""

from __future__ import annotations

from api.cli import alerts, claims, files, loops, memory, notes, projects, serve, skill, trials
from api.cli.base import cli

__all__ = ["cli", "main"]

for _command in (
    serve.serve,
    serve.demo,
    serve.db_group,
    serve.backup,
    serve.token,
    serve.mcp,
    projects.project,
    projects.prompt,
    projects.knowledge,
    projects.best,
    trials.trials,
    files.import_cmd,
    files.export_cmd,
    loops.record,
    loops.watch,
    loops.plot,
    memory.similar,
    memory.knobs,
    memory.summary,
    memory.guardrail,
    memory.hook,
    alerts.alerts,
    claims.claim,
    claims.heartbeat,
    claims.finish,
    claims.running,
    notes.note,
    skill.skill,
):
    cli.add_command(_command)


def main() -> None:
    """The ``lineage`` console script (and ``python -m api.cli``)."""
    cli(prog_name="lineage")
