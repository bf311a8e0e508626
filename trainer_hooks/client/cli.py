"""``lineage spool flush DIR``: send the telemetry spools a training job left behind.

A trainer's :class:`~trainer_hooks.client.LedgerClient` keeps every write in a spool file
per run until the ledger has it. When the trainer ended before the ledger could take
everything (it was down, the token was revoked, the job was killed), this command
replays the spools of ``DIR`` in order with the same idempotency keys, so nothing is
stored twice. It talks HTTP like the trainer (the ``trainer`` extra's httpx), never
imports torch, and prints one JSON line per spool (with the trial's outcome when the
ledger took its finish); a spool the ledger refuses is reported on stderr with the
reason and the command exits non-zero. A spool it delivered whole is deleted (the
retention rule of :mod:`trainer_hooks.client.spool`; ``--keep`` keeps it, and so does
a trainer still running on it); one that is not delivered stays.

The ``lineage`` command line finds this group through the entry-point group
``lineage.commands`` (``spool = "trainer_hooks.client.cli:spool"`` in pyproject.toml), so
the ledger's faces never import trainer code. Importing this module needs only click:
httpx is imported when a flush runs, and its absence is one line naming the extra.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import click

EXIT_NOT_DELIVERED = 1


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def spool() -> None:
    """Telemetry spools of training runs (see trainer_hooks.client)."""


@spool.command("flush")
@click.argument("directory", type=click.Path(exists=True, file_okay=True, dir_okay=True, path_type=Path))
@click.option("--url", default=None, help="The ledger's base URL. Default: the URL the run used.")
@click.option("--token", envvar="LINEAGE_TOKEN", default=None, help="A writer token ($LINEAGE_TOKEN).")
@click.option(
    "--timeout",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds to keep retrying an unreachable ledger, per spool.",
)
@click.option("--keep", is_flag=True, help="Keep spool files that are delivered (default: delete them).")
def flush(directory: Path, url: str | None, token: str | None, timeout: float, keep: bool) -> None:
    """Send every spool in DIRECTORY (or the one spool file given) to the ledger;
    delete each one that is delivered (unless --keep)."""
    try:
        from trainer_hooks.client.delivery import LedgerRejected, Transport, Unavailable, deliver_within
        from trainer_hooks.client.spool import Spool, spool_files
    except ImportError as exc:  # httpx missing
        raise click.ClickException(
            f"{exc}; install the 'trainer' extra (pip install 'lineage-ledger[trainer]')"
        ) from None
    files = [directory] if directory.is_file() else spool_files(directory)
    if not files:
        click.echo(f"no spool files (*.spool) in {directory}", err=True)
    failed = 0
    for path in files:
        try:
            found = Spool(path)
            meta = found.meta()
        except sqlite3.DatabaseError as exc:
            click.echo(f"error: {path}: not a spool file ({exc})", err=True)
            failed += 1
            continue
        base_url = url or meta.get("base_url")
        project = meta.get("project")
        if not base_url or not project:
            click.echo(f"error: {path}: not a spool of a run (no base_url or project)", err=True)
            failed += 1
            continue
        transport = Transport(base_url, token, project)
        try:
            sent = deliver_within(found, transport, timeout)
            exp_id, outcome = found.get("exp_id"), json.loads(found.get("outcome") or "null")
        except LedgerRejected as exc:
            click.echo(f"error: {path}: {exc}", err=True)
            failed += 1
            continue
        except Unavailable as exc:
            ops, points = found.pending()
            click.echo(
                f"error: {path}: ledger at {base_url} unreachable for {timeout:g} s ({exc}); "
                f"{ops} ops ({points} points) still spooled",
                err=True,
            )
            failed += 1
            continue
        finally:
            transport.close()
            found.close()
        removed = not keep and not found.in_use()  # a live run's spool is caught up, not finished
        if removed:
            found.remove()
        click.echo(
            json.dumps(
                {
                    "spool": str(path),
                    "project": project,
                    "exp_id": exp_id,
                    "points_sent": sent,
                    "outcome": outcome,
                    "removed": removed,
                }
            )
        )
    if failed:
        raise SystemExit(EXIT_NOT_DELIVERED)
