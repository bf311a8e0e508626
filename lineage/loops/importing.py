"""Files (``ledger.files``): a loop's results file as use-cases of the ledger — import and export.

Owns the ONE entrance for importing a results file, whatever the face (CLI, HTTP, the
upload page, ``watch``, ``record``) and the format: :meth:`Files.import_file` (a
stream, every option, ``auto`` sniffing, a preview; it answers an
:class:`~lineage.domain.ImportReport` with what was decided) and
:meth:`Files.import_results` (a file's text, with the inferred layout and direction
in its answer). The file's layout (columns, header text,
trailer, number formats, words, row -> exp_id segments) lives in
``project.settings["results_file"]`` (:func:`layout_of`, :meth:`Files.save_results_layout`),
so export, watch and record write the file's own format. Import parses the whole file,
decides the direction and inserts through ``import_trials`` (one transaction: a bad
file writes nothing). The small reads the followers need (next number, branch tip,
delta refresh, plot rows) are here too, so no loop reaches into the store.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import IO, TYPE_CHECKING, Any

from lineage.domain import BestPolicy, ImportReport, Project, RunningBest, Trial, clean_metric_name
from lineage.errors import InvalidInput, NotFound
from lineage.formats import AUTO, get_format, sniff_text
from lineage.formats import autoresearch as ar
from lineage.formats.autoresearch import SETTINGS_KEY, ImportOptions, Layout, LineageBuilder
from lineage.formats.text import BOM, check_text
from lineage.loops.followed import FOLLOWED_KEY, check_followed, followed_file
from lineage.loops.git import link_git
from lineage.store import Store

if TYPE_CHECKING:  # the part it imports through (lineage.service assembles both)
    from lineage.service.tables import Tables

#: The formats whose columns are inferred per file (a project's layout is stored).
TABLE_FORMATS = (ar.NAME, ar.GENERIC)


@dataclass(frozen=True, slots=True)
class LoopImport:
    """What importing a results file did (or, for a preview, would do)."""

    project: str
    rows: int
    layout: Layout
    lower_is_better: bool
    #: how the direction was decided ("from the name 'val_bpb' and the kept values")
    direction: str
    warnings: tuple[str, ...]
    created: bool
    #: 1-based physical lines kept as text (stray output, a summary)
    text_lines: tuple[int, ...] = ()
    committed: bool = True

    def report(self) -> ImportReport:
        """The answer every face shows (:class:`~lineage.domain.ImportReport`)."""
        return ImportReport(
            project=self.project,
            rows=self.rows,
            warnings=self.warnings,
            format=self.layout.format,
            metric=self.layout.metric,
            metric_name=results_metric_name(self.layout.metric_name),
            lower_is_better=self.lower_is_better,
            direction=self.direction,
            text_lines=self.text_lines,
            created=self.created,
            committed=self.committed,
        )


class Files:
    """import_file, import_results, export_results, save_results_layout, next_exp_number,
    best_metric, refresh_deltas, plot_rows."""

    def __init__(self, store: Store, tables: Tables) -> None:
        self.store = store
        self.tables = tables

    def _project(self, project_slug: str) -> Project:
        with self.store.read() as conn:
            return self.store.projects.project(conn, project_slug)

    def import_file(
        self,
        project_slug: str,
        stream: IO[str],
        *,
        fmt: str = AUTO,
        source: str = "<stream>",
        progress: Callable[[int], None] | None = None,
        create_with: Mapping[str, Any] | None = None,
        options: ImportOptions | None = None,
        best_policy: BestPolicy | str | None = None,
        git_repo: str | os.PathLike[str] | None = None,
        preview: bool = False,
        followed: str | os.PathLike[str] | None = None,
    ) -> ImportReport:
        """Import a results file atomically -- every face's one entrance -- and answer
        what was stored and decided (:class:`~lineage.domain.ImportReport`); every error
        names its line and column. ``preview``: check and decide everything, store nothing.

        ``fmt``: ``auto`` (:func:`~lineage.formats.sniff_text`, the first non-blank line
        decides), ``fieldkit``, or a format whose columns are inferred
        (:data:`TABLE_FORMATS`), which goes through :meth:`import_results` with every
        option. ``create_with`` (``None``: the project must exist) creates a missing
        project; its ``lower_is_better`` and ``best_policy`` are the direction and policy
        flags when ``options`` and ``best_policy`` leave them open. A fieldkit file has
        fixed columns: the column options are refused, and a new project's direction is
        the flag's, else lower is better (the file does not say). ``followed``: the file's
        path on this machine, which a table import makes the file the project follows
        (:mod:`lineage.loops.followed`).
        """
        head: str | None = None  # the start the sniff read from a stream that cannot seek back
        if fmt == AUTO:
            fmt, head = _sniff_stream(stream)
        get_format(fmt)  # an unknown name: InvalidInput naming the field "format"
        create = dict(create_with or {})
        lower = create.pop("lower_is_better", None)
        create_policy = create.pop("best_policy", None)
        policy = best_policy or create_policy
        create.pop("source_format", None)
        options = options or ImportOptions()
        if options.lower_is_better is None and lower is not None:
            options = replace(options, lower_is_better=lower)
        if create_with is None:
            self._project(project_slug)  # NotFound: nothing is created
        if fmt in TABLE_FORMATS:
            done = self.import_results(
                project_slug,
                ar.read_lines(stream if head is None else _rejoined(head, stream)),
                fmt=fmt,
                source=source,
                options=options,
                best_policy=policy,
                git_repo=git_repo,
                progress=progress,
                create_with=create,
                preview=preview,
                followed=followed,
            )
            return done.report()
        flags = [
            name
            for name, given in (
                ("metric", options.metric),
                ("status", options.status),
                ("description", options.description),
                ("id", options.id_column),
                ("parent", options.parent),
                ("status_map", options.status_map),
                ("columns", options.columns),
                ("git_repo", git_repo),
            )
            if given
        ]
        if flags:
            raise InvalidInput(
                flags[0],
                f"the column options ({', '.join(flags)}) are for autoresearch and generic "
                f"files; this one is read as {fmt}, whose columns are fixed",
            )
        project = self._existing(project_slug, options.lower_is_better)
        if project is not None:
            lower_is_better, how, metric_name = project.lower_is_better, "the project's", project.metric_name
        elif options.lower_is_better is not None:
            lower_is_better, how, metric_name = options.lower_is_better, "from the flag", "core_metric"
        else:
            lower_is_better, how = True, f"{fmt}'s default: a {fmt} file does not say; pass a direction to choose"
            metric_name = "core_metric"
        lines: list[int] = []
        if head is not None:
            stream = _rejoined(head, stream)
        rows = get_format(fmt).read_trials(stream, source=source, row_lines=lines)
        create_new = {
            **create,
            "lower_is_better": lower_is_better,
            "best_policy": BestPolicy(policy or BestPolicy.KEPT).value,
            "source_format": fmt,
        }
        stored = self.tables.import_trials(
            project_slug,
            rows,
            progress=progress,
            locate=lines.__getitem__,
            create_with=create_new if create_with is not None else None,
            preview=preview,
        )
        return replace(
            stored,
            format=fmt,
            metric="core_metric",
            metric_name=metric_name,
            lower_is_better=lower_is_better,
            direction=how,
            created=project is None,
        )

    def _existing(self, project_slug: str, flag: bool | None) -> Project | None:
        """The project if it exists; a direction flag must agree with its direction."""
        try:
            project: Project = self._project(project_slug)
        except NotFound:
            return None
        if flag is not None and flag != project.lower_is_better:
            words = {True: "lower", False: "higher"}
            raise InvalidInput(
                "direction",
                f"project {project.slug!r} has {words[project.lower_is_better]} is better; the flag says {words[flag]}",
            )
        return project

    def import_results(
        self,
        project_slug: str,
        text: str | list[str],
        *,
        fmt: str = ar.NAME,
        source: str = "<stream>",
        options: ImportOptions = ImportOptions(),
        best_policy: BestPolicy | str | None = None,
        git_repo: str | os.PathLike[str] | None = None,
        progress: Callable[[int], None] | None = None,
        create_with: Mapping[str, Any] | None = None,
        preview: bool = False,
        followed: str | os.PathLike[str] | None = None,
    ) -> LoopImport:
        """Import a results file's ``text`` into ``project_slug`` atomically (created if new,
        with the file's metric name, the direction and the layout); ``preview``: all of it,
        rolled back. ``text`` may be the file's lines (:func:`~lineage.formats.autoresearch.
        read_lines`), which the parse consumes: the list ends empty. ``followed``: the
        file's path, stored as the file the project follows (refused when it follows
        another)."""
        with _gc_paused():
            return self._import_results(
                project_slug,
                text,
                fmt=fmt,
                source=source,
                options=options,
                best_policy=best_policy,
                git_repo=git_repo,
                progress=progress,
                create_with=create_with,
                preview=preview,
                followed=followed,
            )

    def _import_results(
        self,
        project_slug: str,
        text: str | list[str],
        *,
        fmt: str,
        source: str,
        options: ImportOptions,
        best_policy: BestPolicy | str | None,
        git_repo: str | os.PathLike[str] | None,
        progress: Callable[[int], None] | None,
        create_with: Mapping[str, Any] | None,
        preview: bool,
        followed: str | os.PathLike[str] | None = None,
    ) -> LoopImport:
        project = self._existing(project_slug, options.lower_is_better)
        file_settings: dict[str, Any] = {}
        if followed is not None:
            file_settings[FOLLOWED_KEY] = check_followed(project, followed, field="file")
        table = ar.parse_table(text, source=source, fmt=fmt, options=options)
        layout = table.layout
        warnings = list(table.warnings)
        seed_best: float | None = None
        if project is None:
            lower, how = ar.decide_direction(table, options.lower_is_better, warnings)
            policy = BestPolicy(best_policy or (create_with or {}).get("best_policy") or BestPolicy.KEPT)
        else:
            if layout_of(project) is not None and project.trial_count:
                raise InvalidInput(
                    "project",
                    f"project {project.slug!r} already holds a results file ({project.trial_count} trials); to add "
                    f"the rows appended since, run: lineage watch {source} --project {project.slug} --once",
                )
            lower, how, policy = project.lower_is_better, "the project's", project.best_policy
            base = self.next_exp_number(project_slug) if project.trial_count else 0
            seed_best = self.best_metric(project_slug)
            layout.segments = [[0, base]]
        builder = LineageBuilder(layout, lower_is_better=lower, best_policy=policy, source=source)
        trials, lines = table.rows, table.lines
        builder.name(trials, first_row=0, lines=lines)
        builder.check(trials, lines)
        builder.best = seed_best
        builder.deltas(trials)
        if builder.unresolved:
            warnings.append(
                f"{builder.unresolved} parent cell(s) in column {layout.parent!r} name no earlier row; "
                "those trials have no parent (the cell is kept in extra)"
            )
        if git_repo is not None:
            warnings.extend(link_git(trials, layout, git_repo))
        file_settings[SETTINGS_KEY] = layout.to_dict()
        if project is None:
            create = dict(create_with or {})
            create.update(
                metric_name=results_metric_name(layout.metric_name),
                lower_is_better=lower,
                best_policy=policy.value,
                source_format=fmt,
                settings={**dict(create.get("settings") or {}), **file_settings},
            )
            report = self.tables.import_trials(
                project_slug,
                _drained(trials),
                progress=progress,
                locate=lines.__getitem__,
                create_with=create,
                preview=preview,
            )
        else:
            changes: dict[str, Any] = {"settings": {**dict(project.settings), **file_settings}}
            if project.metric_name == "core_metric":
                changes["metric_name"] = results_metric_name(layout.metric_name)
            report = self.tables.import_trials(
                project_slug,
                _drained(trials),
                progress=progress,
                locate=lines.__getitem__,
                project_changes=changes,
                preview=preview,
            )
        return LoopImport(
            project=report.project,
            rows=report.rows,
            layout=layout,
            lower_is_better=lower,
            direction=how,
            warnings=tuple(warnings),
            created=project is None,
            text_lines=table.text_lines,
            committed=report.committed,
        )

    def export_results(self, project_slug: str, stream: IO[str], *, fmt: str = ar.NAME) -> int:
        """Write ``project_slug`` in its results-file layout (an imported file comes back byte
        for byte); a project without one is written with autoresearch's own header."""
        project = self._project(project_slug)
        layout = layout_of(project)
        if layout is None:
            layout = ar.default_layout(project.metric_name)
            if fmt == ar.GENERIC:
                layout.delimiter = ","
                layout.header_text = ",".join(layout.columns) + "\n"
        return ar.write_trials(self.tables.stream_trials(project_slug), stream, layout=layout)

    # -- the layout and the small reads of the followers ------------------------------

    def results_layout(self, project_slug: str) -> Layout | None:
        return layout_of(self._project(project_slug))

    def save_results_layout(self, project_slug: str, layout: Layout) -> Project:
        """Store ``layout`` as the project's results-file layout (one locked write)."""
        with self.store.write() as conn:
            project, _, _ = self.store.projects.locked_project(conn, project_slug)
            settings = {**dict(project.settings), SETTINGS_KEY: layout.to_dict()}
            return self.store.projects.update_project(conn, project, {"settings": settings})

    def follow(self, project_slug: str, path: str | os.PathLike[str], *, field: str) -> str:
        """Make ``path`` the results file ``project_slug`` follows, or check that it is
        (:mod:`lineage.loops.followed`); returns its stored form. Refused, naming ``field``:
        another file than the one followed; and for a project that follows no named file
        yet (imported before the ledger stored it) but holds rows of one, a file that does
        not exist (it would start a second file)."""
        project = self._project(project_slug)
        resolved = check_followed(project, path, field=field)
        if followed_file(project) == resolved:
            return resolved
        with self.store.write() as conn:
            project, _, _ = self.store.projects.locked_project(conn, project_slug)
            resolved = check_followed(project, path, field=field)
            if followed_file(project) is None:
                self._check_unnamed(conn, project, resolved, field)
                settings = {**dict(project.settings), FOLLOWED_KEY: resolved}
                self.store.projects.update_project(conn, project, {"settings": settings})
        return resolved

    def _check_unnamed(self, conn: Any, project: Project, resolved: str, field: str) -> None:
        layout = layout_of(project)
        if layout is None or layout.id_column is not None or os.path.exists(resolved) and os.path.getsize(resolved):
            return
        first = self.store.trials.find_trial(conn, project, layout.exp_id(0))
        if first is not None and ar.ROW_KEY in first.extra:
            raise InvalidInput(
                field,
                f"project {project.slug!r} holds the rows of a results file (exp_{first.exp_id} is its first row), "
                f"and {resolved} does not exist; use the file the loop writes",
            )

    def next_exp_number(self, project_slug: str) -> int:
        """One above the largest all-digit exp_id stored (0 for none)."""
        with self.store.read() as conn:
            return self.store.loops.next_exp_number(conn, self.store.projects.project(conn, project_slug))

    def best_metric(self, project_slug: str) -> float | None:
        """The best eligible metric so far (no fallback): what the next delta is against."""
        with self.store.read() as conn:
            best = self.store.trials.best_scored(conn, self.store.projects.project(conn, project_slug))
        return best.core_metric if best is not None else None

    def plot_rows(self, project_slug: str) -> list[tuple[int, str, str, float | None, str]]:
        with self.store.read() as conn:
            return self.store.loops.plot_rows(conn, self.store.projects.project(conn, project_slug))

    def refresh_deltas(self, project_slug: str, *, after_seq: int) -> int:
        """Recompute ``delta_vs_best`` (the service's rule: metric minus the best before the
        trial) for every trial from ``after_seq`` on, after an earlier row changed. Returns
        how many changed."""
        with self.store.write() as conn:
            project, _, _ = self.store.projects.locked_project(conn, project_slug)
            before = self.store.trials.best_scored(conn, project, before_seq=after_seq)
            running = RunningBest.of(project, before.core_metric if before is not None else None)
            changes: list[tuple[float | None, str]] = []
            for exp_id, _seq, status, metric, delta in self.store.loops.metric_rows_from(conn, project, after_seq):
                wanted = running.see(status, metric)
                if wanted != delta:
                    changes.append((wanted, exp_id))
            self.store.loops.set_deltas(conn, project, changes)
            return len(changes)


def layout_of(project: Project) -> Layout | None:
    """The results-file layout stored with ``project``, if it has one."""
    data = project.settings.get(SETTINGS_KEY) if project.settings else None
    return Layout.from_dict(data) if isinstance(data, Mapping) else None


def results_metric_name(name: str) -> str:
    """The project's metric name from a file's column header (``domain.clean_metric_name``)."""
    return clean_metric_name(name)


#: Characters the sniff of ``--format auto`` reads at a time looking for the first line.
SNIFF_CHUNK = 1 << 16


def _sniff_stream(stream: IO[str]) -> tuple[str, str | None]:
    """The format ``auto`` reads ``stream`` as (:func:`~lineage.formats.sniff_text` of its
    first non-blank line), read from its start without the rest: a seekable stream is
    put back where it was (None), else the text read is returned to be read again."""
    at = stream.tell() if stream.seekable() else None
    parts: list[str] = []
    while chunk := stream.read(SNIFF_CHUNK):
        parts.append(chunk)
        if "\n" in chunk and "".join(parts).rpartition("\n")[0].replace(BOM, "").strip():
            break  # a whole non-blank line is in hand
        if len(parts) * SNIFF_CHUNK > ar.MAX_LINE_CHARS:
            break  # a first line this long is refused by the format anyway
    head = "".join(parts)
    fmt = sniff_text(head)
    if at is not None:
        stream.seek(at)
        return fmt, None
    return fmt, head


def _rejoined(head: str, stream: IO[str]) -> IO[str]:
    """``head`` and then the rest of ``stream`` (one that cannot seek back) as one stream."""
    return io.StringIO(head + stream.read(), newline="")


def read_results_text(path: str | os.PathLike[str], *, source: str) -> str:
    with open(path, "rb") as fh:
        data = fh.read()
    return check_text(data, source=source)


def sniff_results_text(text: str) -> str:
    """The table format of a loop's file (:func:`~lineage.formats.sniff_text`; a
    fieldkit header reads as ``autoresearch``): what watch and record follow."""
    fmt = sniff_text(text)
    return fmt if fmt in TABLE_FORMATS else ar.NAME


def header_length(text: str) -> int:
    first = text.find("\n")
    return len(text) if first < 0 else first + 1


def with_deltas(trials: Sequence[Trial], best: float | None, project: Project) -> list[Trial]:
    """``delta_vs_best`` of each trial from ``best`` (the project's before them) on."""
    running = RunningBest.of(project, best)
    out: list[Trial] = []
    for trial in trials:
        delta = running.see(trial.status, trial.core_metric)
        out.append(trial.with_changes(delta_vs_best=delta) if delta != trial.delta_vs_best else trial)
    return out


def _drained(trials: list[Trial]) -> Iterator[Trial]:
    """The parsed rows in order, each let go of once the insert has it: a big file's
    trials leave memory as they reach the database rather than all at the end."""
    for at in range(len(trials)):
        yield trials[at]
        trials[at] = None  # type: ignore[call-overload]
    trials.clear()


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a file's rows are built and inserted: the
    rows make no cycles, and the collector's passes over 100,000 fresh objects cost a
    third of the parse."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
