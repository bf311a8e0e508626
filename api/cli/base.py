"""What every ``lineage`` command stands on: the root group and what the commands share.

* :data:`cli`, the root group (``--db``, ``--version``) of class :class:`LedgerGroup`,
  which turns ledger errors into one line on stderr and exit status 2, and adds the
  commands of the ``lineage.commands`` entry points when they are asked for;
* :func:`ledger_of`, the ledger of ``--db`` (a SQLite path or a database URL; default
  ``$LINEAGE_DATABASE_URL`` or ./lineage.db), opened once per command line;
* the options more than one command takes: :data:`project_option` and the
  column-mapping flags of ``import`` and ``watch`` (:func:`mapping_options`, which hands
  them to the command as one :class:`ColumnFlags`);
* the output helpers: :func:`progress_bar`, :func:`fmt_number` (the one number format of
  the CLI's tables and lines) and :func:`warn`.

The command modules (``serve``, ``projects``, ``files``, ``loops``, ``memory``, ``alerts``) import
this module and nothing else of ``api.cli``; ``api.cli`` adds their commands to :data:`cli`.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import click

from lineage.errors import LedgerError

if TYPE_CHECKING:  # imported when a command first needs it: `lineage --help` stays light
    from lineage.service import Ledger

EXIT_LEDGER_ERROR = 2

#: The entry-point group of commands other packages add to ``lineage``.
PLUGIN_GROUP = "lineage.commands"

#: Formats whose columns are read from the file (the column-mapping flags apply to them).
TABLE_FORMATS = ("autoresearch", "generic")


def one_line(message: str) -> str:
    """A ledger error's message as the one stderr line a CLI error is: the first line,
    which names the field and where (a filter's caret excerpt under it is for pages)."""
    first, _, rest = message.partition("\n")
    return first if "^" in rest else " ".join(message.split())


class LedgerGroup(click.Group):
    """Turns ledger errors into one line on stderr and a non-zero exit, and finds the
    commands other installed packages register in the entry-point group
    ``lineage.commands`` (``name = "module:click_command"``; the trainer's client adds
    ``spool`` this way, so ``api`` never imports trainer code).

    Plugins are found and imported only when a name is not a built-in command or when
    the commands are listed (``lineage --help``): ``lineage serve`` and the other
    built-in commands never read the entry points. A built-in command wins over a plugin
    of the same name; a plugin that fails to load is one ``warning:`` line on stderr and
    is left out, and the rest of the CLI works.
    """

    plugin_group = PLUGIN_GROUP

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._plugins: dict[str, Any] | None = None  # name -> EntryPoint, found on first need
        self._broken: set[str] = set()

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LedgerError as exc:
            click.echo(f"error: {one_line(exc.message)}", err=True)
            ctx.exit(EXIT_LEDGER_ERROR)
        except (OSError, UnicodeDecodeError) as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(EXIT_LEDGER_ERROR)

    def list_commands(self, ctx: click.Context) -> list[str]:
        plugins = (name for name in self.plugins() if name not in self._broken)
        return sorted({*super().list_commands(ctx), *plugins})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name in self._broken:
            return command
        entry = self.plugins().get(cmd_name)
        return None if entry is None else self._load_plugin(cmd_name, entry)

    def plugins(self) -> dict[str, Any]:
        """The entry points of :attr:`plugin_group` by name (the first of a repeated name)."""
        if self._plugins is None:
            from importlib.metadata import entry_points

            found: dict[str, Any] = {}
            for entry in entry_points(group=self.plugin_group):
                found.setdefault(entry.name, entry)
            self._plugins = found
        return self._plugins

    def _load_plugin(self, name: str, entry: Any) -> click.Command | None:
        try:
            command = entry.load()
            if not isinstance(command, click.Command):
                raise TypeError(f"{type(command).__name__} is not a click command")
        except Exception as exc:  # noqa: BLE001 - any failure of a plugin's import is reported, not raised
            self._broken.add(name)
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())
            click.echo(
                f"warning: command {name!r} from {entry.value} ({self.plugin_group}) is left out: {reason}", err=True
            )
            return None
        self.add_command(command, name)
        return command


@click.group(cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    envvar="LINEAGE_DATABASE_URL",
    default=None,
    help="SQLite file or database URL (postgresql://...). Default: ./lineage.db.",
)
@click.version_option(package_name="lineage-ledger")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """Lineage Ledger: the experiment lineage database for nightly research trials."""
    ctx.obj = {"db": db}


def ledger_of(ctx: click.Context) -> Ledger:
    """The ledger of the command line's ``--db``, opened on first use and closed with the
    root context."""
    from lineage.service import Ledger

    root = ctx.find_root()
    ledger: Ledger | None = root.obj.get("ledger")
    if ledger is None:
        ledger = root.obj["ledger"] = Ledger.open(root.obj["db"])
        root.call_on_close(ledger.close)
    return ledger


project_option = click.option("--project", "-p", required=True, help="Project slug.")


# -- column-mapping flags of import and watch ---------------------------------------------


@dataclass(frozen=True)
class ColumnFlags:
    """The column-mapping flags of import and watch, as given on the command line."""

    id_column: str | None = None
    metric_column: str | None = None
    status_column: str | None = None
    description_column: str | None = None
    parent_column: str | None = None
    status_map: tuple[str, ...] = ()
    column_names: str | None = None
    git_repo: str | None = None

    def columns_given(self) -> bool:
        """Whether any flag that reads the file's columns was given (not ``--git-repo``)."""
        return any(
            (
                self.id_column,
                self.metric_column,
                self.status_column,
                self.description_column,
                self.parent_column,
                self.status_map,
                self.column_names,
            )
        )

    def import_options(self, lower_is_better: bool | None) -> Any:
        """The flags as the core's :class:`~lineage.formats.autoresearch.ImportOptions`,
        read by the same rule as the HTTP import's and the upload page's."""
        from dataclasses import replace

        from lineage.formats.autoresearch import ImportOptions

        options = ImportOptions.from_text(
            id_column=self.id_column,
            metric=self.metric_column,
            status=self.status_column,
            description=self.description_column,
            parent=self.parent_column,
            status_map=list(self.status_map),
            columns=self.column_names,
        )
        return replace(options, lower_is_better=lower_is_better)


def mapping_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The column-mapping flags of import and watch; they apply to autoresearch/generic
    files (a fieldkit file has fixed columns). The command receives them as one
    ``columns: ColumnFlags`` argument."""
    options = [
        click.option(
            "--id",
            "id_column",
            default=None,
            metavar="COL",
            help="autoresearch/generic: column holding the exp_ids (default: row numbers 000, 001, ...).",
        ),
        click.option(
            "--metric",
            "metric_column",
            default=None,
            metavar="COL",
            help="autoresearch/generic: the metric column (default: the first numeric column after the id columns).",
        ),
        click.option(
            "--status",
            "status_column",
            default=None,
            metavar="COL",
            help="autoresearch/generic: the status column (default: found by name); '-': the file has none.",
        ),
        click.option(
            "--description",
            "description_column",
            default=None,
            metavar="COL",
            help="autoresearch/generic: the description column (default: found by name).",
        ),
        click.option(
            "--parent",
            "parent_column",
            default=None,
            metavar="COL",
            help="autoresearch/generic: a column naming each row's parent (its commit or id); default: "
            "the last keep before the row.",
        ),
        click.option(
            "--status-map",
            "status_map",
            multiple=True,
            metavar="WORD=LABEL,...",
            help="autoresearch/generic: more status words, e.g. oom=crash,flaky=discard (repeatable).",
        ),
        click.option(
            "--columns",
            "column_names",
            default=None,
            metavar="NAME,NAME,...",
            help="autoresearch/generic: the column names of a file without a header line (its first line "
            "is data); the usual inference then runs on them.",
        ),
        click.option(
            "--git-repo",
            type=click.Path(exists=True, file_okay=False),
            default=None,
            help="autoresearch/generic: store subject, author time, diffstat and patch of each trial's commit.",
        ),
    ]
    names = [field.name for field in fields(ColumnFlags)]

    @functools.wraps(command)
    def with_columns(*args: Any, **kwargs: Any) -> Any:
        columns = ColumnFlags(**{name: kwargs.pop(name) for name in names})
        return command(*args, columns=columns, **kwargs)

    for option in reversed(options):
        with_columns = option(with_columns)
    return with_columns


# -- output ----------------------------------------------------------------------------------


@contextlib.contextmanager
def progress_bar(label: str, total: int) -> Iterator[Any]:
    """A callback ``update(rows_done)`` that draws a bar on a terminal; None elsewhere."""
    if not sys.stderr.isatty() or total <= 0:
        yield None
        return
    with click.progressbar(length=total, label=label, file=sys.stderr) as bar:
        done = 0

        def update(rows: int) -> None:
            nonlocal done
            bar.update(rows - done)
            done = rows

        yield update


def fmt_number(value: float | None, *, signed: bool = False) -> str:
    """A metric or delta as the CLI prints it: six decimals (``signed``: with its sign), ``—`` for none."""
    if value is None:
        return "—"
    return f"{value:+.6f}" if signed else f"{value:.6f}"


def warn(lines: Any) -> None:
    """Each line on stderr as ``warning: ...``."""
    for line in lines:
        click.echo(f"warning: {line}", err=True)
