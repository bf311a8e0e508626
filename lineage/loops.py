"""Autoresearch-style loops in the ledger: a results file that an agent appends to.

The use-cases behind ``lineage import/export --format autoresearch|generic``,
``lineage watch``, ``lineage record`` and ``lineage plot``. The file format itself (rows,
quirks, status words, direction, lineage) is :mod:`lineage.formats.autoresearch`; this
module ties it to a project:

* the file's **layout** (columns, header text, trailer, number formats, words, the
  row -> exp_id segments) lives in ``project.settings["results_file"]``, so export,
  watch and record write the file's own format;
* **import** parses the whole file, decides the direction, and inserts through
  :meth:`Ledger.import_trials` (bulk path, one transaction: a bad file writes nothing);
* **watch** (:class:`ResultsSync`) keeps the ledger equal to the file: appended rows are
  inserted, rows rewritten in place update their trial, a truncated file warns and
  deletes nothing (rows after the cut get fresh exp_ids), and syncing twice adds nothing;
* **record** adds one trial from an agent's shell and can append its line to the file;
* **git**: commit subject, author time, diffstat and a bounded patch in ``extra["_git"]``.

No SQL here (:mod:`lineage.store`), and no import of :mod:`api`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Mapping, Sequence

from lineage.domain import BestPolicy, FailureLabel, Project, Trial, is_better, metric_delta
from lineage.errors import Conflict, InvalidInput, LedgerError, NotFound
from lineage.formats import autoresearch as ar
from lineage.formats.autoresearch import (
    GIT_KEY,
    LINE_KEY,
    PART_KEY,
    ROW_KEY,
    SETTINGS_KEY,
    ImportOptions,
    Layout,
    LineageBuilder,
)

__all__ = [
    "LoopImport",
    "RecordOutcome",
    "ResultsSync",
    "SyncReport",
    "export_results",
    "git_details",
    "import_results",
    "import_stream",
    "layout_of",
    "plot_progress",
    "record_result",
]

#: Longest patch kept per trial in ``extra["_git"]["patch"]``.
MAX_PATCH_BYTES = 64 * 1024
#: Changed fields a rewritten row may carry to its trial.
_ROW_FIELDS = ("status", "core_metric", "hypothesis", "parent_exp", "baseline_exp", "timestamp", "specialist",
               "domain", "job_name", "snapshot_path", "notes", "expected_delta", "val_bpb", "train_s", "total_s")


def layout_of(project: Project) -> Layout | None:
    """The results-file layout stored with ``project``, if it has one."""
    data = project.settings.get(SETTINGS_KEY) if project.settings else None
    return Layout.from_dict(data) if isinstance(data, Mapping) else None


def _metric_name(name: str) -> str:
    cleaned = "".join(" " if ch in "\t\r\n" else "/" if ch == "|" else ch for ch in name).strip()
    return (cleaned or "metric")[:100]


def _read_text(path: str | os.PathLike[str], *, source: str) -> str:
    with open(path, "rb") as fh:
        data = fh.read()
    return ar.check_text(data, source=source)


def _best_metric(ledger: Any, conn: Any, project: Project) -> float | None:
    best = ledger.store.best_scored(conn, project)
    return best.core_metric if best is not None else None


# --------------------------------------------------------------------------- import


@dataclass(frozen=True, slots=True)
class LoopImport:
    """What importing a results file did."""

    project: str
    rows: int
    layout: Layout
    lower_is_better: bool
    #: how the direction was decided ("from the name 'val_bpb' and the kept values")
    direction: str
    warnings: tuple[str, ...]
    created: bool


def import_results(
    ledger: Any,
    project_slug: str,
    text: str,
    *,
    fmt: str = ar.NAME,
    source: str = "<stream>",
    options: ImportOptions = ImportOptions(),
    best_policy: BestPolicy | str | None = None,
    git_repo: str | os.PathLike[str] | None = None,
    progress: Callable[[int], None] | None = None,
    create_with: Mapping[str, Any] | None = None,
) -> LoopImport:
    """Import a results file's ``text`` into ``project_slug`` atomically (created if new,
    with the file's metric name, the direction and the layout)."""
    with _gc_paused():
        return _import_results(
            ledger, project_slug, text, fmt=fmt, source=source, options=options, best_policy=best_policy,
            git_repo=git_repo, progress=progress, create_with=create_with,
        )


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


def _import_results(
    ledger: Any,
    project_slug: str,
    text: str,
    *,
    fmt: str,
    source: str,
    options: ImportOptions,
    best_policy: BestPolicy | str | None,
    git_repo: str | os.PathLike[str] | None,
    progress: Callable[[int], None] | None,
    create_with: Mapping[str, Any] | None,
) -> LoopImport:
    try:
        project: Project | None = ledger.project(project_slug)
    except NotFound:
        project = None
    table = ar.parse_table(text, source=source, fmt=fmt, options=options)
    layout = table.layout
    warnings = list(table.warnings)
    seed_best: float | None = None
    if project is None:
        lower, how = ar.decide_direction(table, options.lower_is_better, warnings)
        policy = BestPolicy(best_policy or (create_with or {}).get("best_policy") or BestPolicy.KEPT)
    else:
        if options.lower_is_better is not None and options.lower_is_better != project.lower_is_better:
            words = {True: "lower", False: "higher"}
            raise InvalidInput(
                "direction",
                f"project {project.slug!r} has {words[project.lower_is_better]} is better; the flag says "
                f"{words[options.lower_is_better]}",
            )
        if layout_of(project) is not None and project.trial_count:
            raise InvalidInput(
                "project",
                f"project {project.slug!r} already holds a results file ({project.trial_count} trials); to add "
                f"the rows appended since, run: lineage watch {source} --project {project.slug} --once",
            )
        lower, how, policy = project.lower_is_better, "the project's", project.best_policy
        with ledger.store.read() as conn:
            base = ledger.store.next_exp_number(conn, project) if project.trial_count else 0
            seed_best = _best_metric(ledger, conn, project)
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
    settings_value = layout.to_dict()
    if project is None:
        create = dict(create_with or {})
        create.update(
            metric_name=_metric_name(layout.metric_name),
            lower_is_better=lower,
            best_policy=policy.value,
            source_format=fmt,
            settings={**dict(create.get("settings") or {}), SETTINGS_KEY: settings_value},
        )
        report = ledger.import_trials(project_slug, iter(trials), progress=progress, locate=lines.__getitem__,
                                      create_with=create)
    else:
        changes: dict[str, Any] = {"settings": {**dict(project.settings), SETTINGS_KEY: settings_value}}
        if project.metric_name == "core_metric":
            changes["metric_name"] = _metric_name(layout.metric_name)
        report = ledger.import_trials(project_slug, iter(trials), progress=progress, locate=lines.__getitem__,
                                      project_changes=changes)
    return LoopImport(
        project=report.project, rows=report.rows, layout=layout, lower_is_better=lower, direction=how,
        warnings=tuple(warnings), created=project is None,
    )


def import_stream(
    ledger: Any,
    project_slug: str,
    stream: IO[str],
    *,
    fmt: str = ar.NAME,
    source: str = "<stream>",
    progress: Callable[[int], None] | None = None,
    create_with: Mapping[str, Any] | None = None,
) -> Any:
    """``Ledger.import_file`` for the inferring formats (the registry's hook): the
    direction comes from ``create_with["lower_is_better"]`` when given."""
    from lineage.service import ImportReport

    create = dict(create_with or {})
    lower = create.pop("lower_is_better", None)
    policy = create.pop("best_policy", None)
    create.pop("source_format", None)
    done = import_results(
        ledger, project_slug, stream.read(), fmt=fmt, source=source,
        options=ImportOptions(lower_is_better=lower), best_policy=policy, progress=progress, create_with=create,
    )
    return ImportReport(project=done.project, rows=done.rows, warnings=done.warnings)


# --------------------------------------------------------------------------- export


def export_results(ledger: Any, project_slug: str, stream: IO[str], *, fmt: str = ar.NAME) -> int:
    """Write ``project_slug`` in its results-file layout (an imported file comes back byte
    for byte); a project without one is written with autoresearch's own header."""
    project = ledger.project(project_slug)
    layout = layout_of(project)
    if layout is None:
        layout = ar.default_layout(project.metric_name)
        if fmt == ar.GENERIC:
            layout.delimiter = ","
            layout.header_text = ",".join(layout.columns) + "\n"
    return ar.write_trials(ledger.stream_trials(project_slug), stream, layout=layout)


# --------------------------------------------------------------------------- watch


@dataclass(slots=True)
class SyncReport:
    inserted: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: rows in the file after this sync
    rows: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.inserted or self.updated)


@dataclass(slots=True)
class _Known:
    """What the ledger holds for a row: its text (None: the trial is not from the
    file), the part of a merged line, and the parent."""

    line: str | None
    part: int
    parent: str


def _known(trial: Trial, layout: Layout | None) -> _Known:
    extra = trial.extra
    line = extra.get(LINE_KEY)
    if not isinstance(line, str):
        line = ar.render_row(trial, layout) if ROW_KEY in extra and layout is not None else None
    return _Known(line, int(extra.get(PART_KEY, 0) or 0), trial.parent_exp)


class _FileFollower:
    """What the local and the remote follower of a results file share: the file and how
    to read it, each warning shown once, and :meth:`watch`. A subclass implements
    :meth:`_sync` (one pass over the file)."""

    def __init__(
        self,
        project_slug: str,
        path: str | os.PathLike[str],
        *,
        fmt: str | None,
        options: ImportOptions,
        best_policy: BestPolicy | str | None,
        git_repo: str | os.PathLike[str] | None,
    ) -> None:
        self.slug = project_slug
        self.path = Path(path)
        self.source = str(path)
        self.fmt = fmt
        self.options = options
        self.best_policy = best_policy
        self.git_repo = git_repo
        self.layout: Layout | None = None
        self._shown: set[str] = set()

    def _read(self) -> str | None:
        """The file's text; None while it does not exist."""
        try:
            return _read_text(self.path, source=self.source)
        except FileNotFoundError:
            return None

    def _sync(self) -> SyncReport:
        raise NotImplementedError

    def sync(self) -> SyncReport:
        """Bring the project up to date with the file (see the class doc). A warning
        is reported once, at the first sync that finds it."""
        report = self._sync()
        fresh = [w for w in report.warnings if w not in self._shown]
        self._shown.update(fresh)
        report.warnings = fresh
        return report

    def watch(
        self,
        *,
        on_sync: Callable[[SyncReport], None] | None = None,
        stop: Any = None,
        debounce_ms: int = 300,
        step_ms: int = 50,
        check_every_ms: int = 2_000,
        force_polling: bool | None = None,
    ) -> None:
        """Sync now, then again whenever the file changes, until ``stop`` (a
        ``threading.Event``) is set or Ctrl-C.

        Changes come from the operating system's file notifications (inotify, FSEvents,
        ReadDirectoryChangesW) through ``watchfiles``, watching the file's directory, so
        a file replaced by a rename is followed too; the watcher is started before the
        first sync, so no append can slip between the two. As a safety net (network file
        systems drop notifications), the file's size and mtime are compared every
        ``check_every_ms``: one ``stat`` call, not a read. A sync that fails (a broken
        write) is reported as a warning and the watch goes on; the first sync's error
        (not a results table at all) stops it.
        """
        from watchfiles import watch as watch_changes

        target = os.path.abspath(self.path)
        directory = os.path.dirname(target) or "."
        last_stat: list[tuple[int, int] | None] = [None]

        def stat() -> tuple[int, int] | None:
            try:
                info = os.stat(target)
            except OSError:
                return None
            return info.st_size, info.st_mtime_ns

        def sync(first: bool = False) -> None:
            last_stat[0] = stat()
            try:
                report = self.sync()
            except LedgerError as exc:
                if first:
                    raise
                report = SyncReport(warnings=[f"error: {exc.message}"])
            if on_sync is not None:
                on_sync(report)

        try:
            from watchfiles._rust_notify import RustNotify  # what watchfiles.watch runs on

            polling = bool(force_polling) or os.environ.get("WATCHFILES_FORCE_POLLING", "").lower() in (
                "1", "true", "yes")
            notify = RustNotify([directory], False, polling, 300, False, False)
        except (ImportError, TypeError):  # pragma: no cover - another watchfiles: its public generator
            notify = None
        if notify is None:  # pragma: no cover
            sync(first=True)
            for _ in watch_changes(directory, watch_filter=lambda _c, p: os.path.abspath(p) == target,
                                   debounce=debounce_ms, step=step_ms, stop_event=stop, recursive=False,
                                   force_polling=force_polling, raise_interrupt=False):
                sync()
            return
        with notify as watcher:
            sync(first=True)
            while True:
                try:
                    raw = watcher.watch(debounce_ms, step_ms, check_every_ms, stop)
                except KeyboardInterrupt:  # pragma: no cover - interactive
                    return
                if raw in ("stop", "signal"):
                    return
                if raw == "timeout":
                    if stat() != last_stat[0]:
                        sync()
                    continue
                if any(os.path.abspath(changed) == target for _change, changed in raw):
                    sync()


class ResultsSync(_FileFollower):
    """Keeps a project equal to a results file that a loop appends to.

    Row identity is the row number (or the ``--id`` column): row ``i`` is exp_id
    ``layout.exp_id(i)``. :meth:`sync` reads the file and

    * inserts rows it has not seen (appends: only the new lines are parsed);
    * updates the trial of a row whose text changed (a loop that rewrites a row, e.g.
      ``running`` -> ``keep``), and the parents and deltas that depend on it;
    * when the file holds fewer rows than the ledger has from it (truncated), warns,
      deletes nothing, and gives rows from the first one that differs fresh exp_ids;
    * never adds a row twice: a restart or a replay of the same text changes nothing.
    """

    def __init__(
        self,
        ledger: Any,
        project_slug: str,
        path: str | os.PathLike[str],
        *,
        fmt: str | None = None,
        options: ImportOptions = ImportOptions(),
        best_policy: BestPolicy | str | None = None,
        git_repo: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(project_slug, path, fmt=fmt, options=options, best_policy=best_policy, git_repo=git_repo)
        self.ledger = ledger
        self.project: Project | None = None
        self.known: dict[str, _Known] | None = None
        self.done_text = ""  # the file text already synced (complete lines only)
        self.parser: ar.RowParser | None = None
        self.builder: LineageBuilder | None = None
        self.file_rows = 0  # rows of the file seen by the last sync
        self._warned_truncation = False

    # -- state ---------------------------------------------------------------------------

    def _load(self) -> None:
        self.project = self.ledger.project(self.slug)
        self.layout = layout_of(self.project)
        self.known = {trial.exp_id: _known(trial, self.layout) for trial in self.ledger.stream_trials(self.slug)}

    def _save_layout(self) -> None:
        assert self.project is not None and self.layout is not None
        with self.ledger.store.write() as conn:
            project, _, _ = self.ledger.store.locked_project(conn, self.slug)
            settings = {**dict(project.settings), SETTINGS_KEY: self.layout.to_dict()}
            self.project = self.ledger.store.update_project(conn, project, {"settings": settings})

    def _fresh_state(self) -> tuple[ar.RowParser, LineageBuilder]:
        assert self.project is not None and self.layout is not None
        start = ar.header_end(ar.split_lines(self.layout.header_text), self.layout) if self.layout.has_header else 0
        parser = ar.RowParser(self.layout, source=self.source, first_line=start + 1)
        builder = LineageBuilder(self.layout, lower_is_better=self.project.lower_is_better,
                                 best_policy=self.project.best_policy, source=self.source)
        return parser, builder

    # -- reading the file ----------------------------------------------------------------

    def _syncable(self, text: str) -> str:
        """The part of ``text`` to sync: complete lines, plus a last line without its line
        end only when it is a whole row already (a loop that writes without ``\\n``)."""
        cut = text.rfind("\n") + 1
        if cut == len(text) or self.layout is None:
            return text
        tail = text[cut:]
        probe = ar.RowParser(self.layout)
        try:
            probe.feed([tail])
        except InvalidInput:
            return text[:cut]
        return text if probe.rows and not probe.warnings else text[:cut]

    # -- syncing -------------------------------------------------------------------------

    def _sync(self) -> SyncReport:
        report = SyncReport()
        text = self._read()
        if text is None or not text.strip():
            return report
        if self.known is None:
            try:
                self._load()
            except NotFound:
                self._create(text, report)
                return report
        assert self.project is not None
        if self.layout is None:
            self._adopt(text, report)
        text = self._syncable(text)
        assert self.layout is not None
        if self.layout.has_header and not text.startswith(self.layout.header_text) and "\n" in text:
            report.warnings.append(
                f"{self.source}: the header line differs from the project's; rows are read with its columns "
                f"({', '.join(self.layout.columns)})"
            )
        if self.parser is not None and self.done_text and self.done_text.endswith("\n") and text.startswith(self.done_text):
            if len(text) == len(self.done_text):
                report.rows = self.file_rows
                return report
            self._append(text, report)
        else:
            self._full(text, report)
        return report

    def _create(self, text: str, report: SyncReport) -> None:
        done = import_results(
            self.ledger, self.slug, text, fmt=self.fmt or _sniff_text(text), source=self.source,
            options=self.options, best_policy=self.best_policy, git_repo=self.git_repo,
        )
        report.warnings.extend(done.warnings)
        self._load()
        report.inserted.extend(e for e, k in self.known.items())  # type: ignore[union-attr]
        # set the incremental state from the text just imported
        self._full(self._syncable(text), SyncReport())
        report.rows = self.file_rows

    def _adopt(self, text: str, report: SyncReport) -> None:
        """A project without a layout (made by ``project create``): take the file's."""
        assert self.project is not None
        table = ar.parse_table(text, source=self.source, fmt=self.fmt or _sniff_text(text), options=self.options)
        self.layout = table.layout
        if self.project.trial_count:
            with self.ledger.store.read() as conn:
                self.layout.segments = [[0, self.ledger.store.next_exp_number(conn, self.project)]]
        self._save_layout()
        if self.project.metric_name == "core_metric":
            self.project = self.ledger.update_project(self.slug, {"metric_name": _metric_name(self.layout.metric)})

    def _append(self, text: str, report: SyncReport) -> None:
        assert self.parser is not None and self.builder is not None
        before = len(self.parser.rows)
        warned = len(self.parser.warnings)
        self.parser.feed(ar.split_lines(text[len(self.done_text):]))
        report.warnings.extend(self.parser.warnings[warned:])
        trials = self.parser.rows[before:]
        self.builder.name(trials, first_row=before, lines=self.parser.lines[before:])
        assert self.known is not None
        if any((k := self.known.get(t.exp_id)) is not None and k.line is None for t in trials):
            self._full(text, report)  # an id held by a trial not from the file: rebase there
            return
        self.done_text = text
        self.file_rows = len(self.parser.rows)
        report.rows = self.file_rows
        self._apply(trials, report, rows_start=before)
        self._maybe_save_trailer()

    def _full(self, text: str, report: SyncReport) -> None:
        assert self.layout is not None and self.known is not None
        for _attempt in range(8):
            parser, builder = self._fresh_state()
            body = text[len(self.layout.header_text):] if self.layout.has_header and text.startswith(self.layout.header_text) else (
                text[_header_length(text):] if self.layout.has_header else text
            )
            parser.feed(ar.split_lines(body))
            trials = parser.rows
            builder.name(trials, first_row=0, lines=parser.lines)
            rebase = self._rebase_at(trials, parser.texts, report)
            if rebase is None:
                break
            with self.ledger.store.read() as conn:
                number = self.ledger.store.next_exp_number(conn, self.project)
            number = max([number, *(int(e) + 1 for e in self.known if e.isdigit())])
            self.layout.segments.append([rebase, number])
            self._save_layout()
        self.parser, self.builder = parser, builder
        report.warnings.extend(parser.warnings)
        self.done_text = text
        self.file_rows = len(parser.rows)
        report.rows = self.file_rows
        self._apply(trials, report, rows_start=0)
        self._maybe_save_trailer()

    def _rebase_at(self, trials: Sequence[Trial], texts: Sequence[str], report: SyncReport) -> int | None:
        """The first row that needs fresh exp_ids, or None: a row whose exp_id is held by a
        trial not from the file (recorded without it), or -- when the file is truncated
        (the ledger holds the row after its last one) -- the first row that differs from
        the ledger's, so that no trial is overwritten."""
        assert self.known is not None and self.layout is not None
        if self.layout.id_column is not None:
            return None
        for index, trial in enumerate(trials):
            known = self.known.get(trial.exp_id)
            if known is not None and known.line is None:
                report.warnings.append(
                    f"{self.source}: row {index + 1} would be exp_{trial.exp_id}, which was recorded without this "
                    "file; it and the rows after it get the next free exp_ids"
                )
                return index
        following = self.known.get(self.layout.exp_id(len(trials)))
        if following is None or following.line is None:
            self._warned_truncation = False
            return None
        first = next(
            (i for i, t in enumerate(trials) if (k := self.known.get(t.exp_id)) is not None and k.line != texts[i]),
            len(trials),
        )
        if not self._warned_truncation:
            report.warnings.append(
                f"{self.source} was truncated: it holds {len(trials)} rows, fewer than the ledger has from it; "
                f"nothing is deleted, and rows from {first + 1} on get fresh exp_ids"
            )
            self._warned_truncation = True
        return first

    def _apply(self, trials: Sequence[Trial], report: SyncReport, *, rows_start: int) -> None:
        assert self.known is not None and self.parser is not None
        texts = self.parser.texts
        new: list[tuple[Trial, str]] = []
        changed: list[tuple[Trial, str]] = []
        for offset, trial in enumerate(trials):
            text = texts[rows_start + offset]
            known = self.known.get(trial.exp_id)
            if known is None:
                new.append((trial, text))
            elif (known.line, known.part, known.parent) != (text, trial.extra.get(PART_KEY, 0), trial.parent_exp):
                changed.append((trial, text))
        if changed:
            self._update(changed, report)
        if new:
            self._insert(new, report)

    def _insert(self, rows: list[tuple[Trial, str]], report: SyncReport) -> None:
        assert self.project is not None and self.known is not None
        trials = [trial for trial, _ in rows]
        if self.git_repo is not None:
            report.warnings.extend(link_git(trials, self.layout, self.git_repo, known_commits=self._commits()))  # type: ignore[arg-type]
        with self.ledger.store.read() as conn:
            project = self.ledger.store.project(conn, self.slug)
            best = _best_metric(self.ledger, conn, project)
        trials = _with_deltas(trials, best, project)
        texts = [text for _, text in rows]
        try:
            self.ledger.import_trials(self.slug, iter(trials))
        except InvalidInput:
            # some of these exp_ids were stored meanwhile, by ``record`` or the API
            self._load()
            if any((k := self.known.get(t.exp_id)) is not None and k.line is None for t in trials):  # type: ignore[union-attr]
                self._full(self.done_text, report)  # not from the file: these rows get fresh exp_ids
                return
            for trial, text in zip(trials, texts):  # from the file (``record --append-tsv``): one by one
                existing = self._find(trial.exp_id)
                if existing is None:
                    self.ledger.record_trial(self.slug, _record_fields(trial))
                    report.inserted.append(trial.exp_id)
                elif (_known(existing, self.layout).line, existing.parent_exp) != (text, trial.parent_exp):
                    self._update_one(trial)
                    report.updated.append(trial.exp_id)
                self._remember(trial, text)
            return
        for trial, text in zip(trials, texts):
            report.inserted.append(trial.exp_id)
            self._remember(trial, text)

    def _update(self, rows: list[tuple[Trial, str]], report: SyncReport) -> None:
        trials = [trial for trial, _ in rows]
        if self.git_repo is not None:
            report.warnings.extend(link_git(trials, self.layout, self.git_repo, known_commits=self._commits()))  # type: ignore[arg-type]
        first_seq: int | None = None
        for trial, (_, text) in zip(trials, rows):
            stored = self._update_one(trial)
            if stored is not None and stored.seq is not None:
                first_seq = stored.seq if first_seq is None else min(first_seq, stored.seq)
            report.updated.append(trial.exp_id)
            self._remember(trial, text)
        if first_seq is not None:
            refresh_deltas(self.ledger, self.slug, after_seq=first_seq)

    def _update_one(self, trial: Trial) -> Trial | None:
        current = self._find(trial.exp_id)
        if current is None:
            return None
        extra = dict(trial.extra)
        if GIT_KEY not in extra and GIT_KEY in current.extra:
            commit_key = self.layout.extra_key(self.layout.commit) if self.layout and self.layout.commit else None
            if commit_key is None or current.extra.get(commit_key) == extra.get(commit_key):
                extra[GIT_KEY] = current.extra[GIT_KEY]
        changes: dict[str, Any] = {name: getattr(trial, name) for name in _ROW_FIELDS}
        changes["extra"] = extra
        if changes["parent_exp"] and self._find(changes["parent_exp"]) is None:
            changes["parent_exp"] = ""
        return self.ledger.update_trial(self.slug, trial.exp_id, changes)

    def _find(self, exp_id: str) -> Trial | None:
        try:
            return self.ledger.trial(self.slug, exp_id)
        except NotFound:
            return None

    def _remember(self, trial: Trial, text: str) -> None:
        assert self.known is not None
        self.known[trial.exp_id] = _Known(text, int(trial.extra.get(PART_KEY, 0) or 0), trial.parent_exp)

    def _commits(self) -> dict[str, str]:
        """``exp_id -> commit`` of the rows seen so far."""
        if self.parser is None or self.layout is None or not self.layout.commit:
            return {}
        key = self.layout.extra_key(self.layout.commit)
        return {t.exp_id: c for t in self.parser.rows if isinstance(c := t.extra.get(key), str)}

    def _maybe_save_trailer(self) -> None:
        if self.parser is None or self.layout is None:
            return
        trailer, _ = self.parser.trailer()
        if trailer != self.layout.trailer:
            self.layout.trailer = trailer
            self._save_layout()

    # -- following the file ----------------------------------------------------------------

class RemoteSync(_FileFollower):
    """``lineage watch --server URL --token T``: follows a results file into a ledger
    served over HTTP (the ``/api/v1`` routes), with :class:`ResultsSync`'s rules where
    the API allows them.

    * a project that does not exist is created by uploading the file
      (``POST .../trials.tsv?format=...&create=true``, the direction inferred here), so
      the server stores the layout as a local import would;
    * each row is sent as ``POST .../trials`` with its exp_id: the server stores a new
      one (201), recognises a replay (200: a restart adds nothing twice), or answers 409
      for a row rewritten in place, which is then ``PATCH``ed (status, metric,
      description, parent, extra: what the row gives);
    * a truncated file warns and deletes nothing; rows are identified by their number,
      and the exp_id rebasing of a local watch is not available over HTTP.
    """

    def __init__(
        self,
        server: str,
        token: str | None,
        project_slug: str,
        path: str | os.PathLike[str],
        *,
        fmt: str | None = None,
        options: ImportOptions = ImportOptions(),
        best_policy: BestPolicy | str | None = None,
        git_repo: str | os.PathLike[str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(project_slug, path, fmt=fmt, options=options, best_policy=best_policy, git_repo=git_repo)
        self.base = server.rstrip("/") + "/api/v1"
        self.token = token
        self.timeout = timeout
        self.lower_is_better = True
        self.sent: dict[str, tuple[str, str]] = {}
        self.rows_seen = 0

    def _call(self, method: str, path: str, *, body: Any = None, data: str | None = None,
              query: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        import json
        import urllib.error
        import urllib.parse
        import urllib.request

        url = self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {"Accept": "application/json"}
        payload: bytes | None = None
        if body is not None:
            payload = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif data is not None:
            payload = data.encode("utf-8")
            headers["Content-Type"] = "text/tab-separated-values; charset=utf-8"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=payload, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - the user's server
                raw = response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            raw, status = exc.read(), exc.code
        except urllib.error.URLError as exc:
            raise InvalidInput("server", f"{self.base} does not answer: {exc.reason}") from None
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode("utf-8", "replace")

    def _fail(self, status: int, answer: Any, what: str) -> None:
        detail = answer.get("detail") if isinstance(answer, dict) else answer
        raise InvalidInput("server", f"{what}: HTTP {status}: {detail}")

    def _start(self, text: str, report: SyncReport) -> bool:
        slug = urllib_quote(self.slug)
        status, answer = self._call("GET", f"/projects/{slug}")
        if status == 404:
            fmt = self.fmt or _sniff_text(text)
            table = ar.parse_table(text, source=self.source, fmt=fmt, options=self.options)
            lower, _how = ar.decide_direction(table, self.options.lower_is_better, report.warnings)
            query = {"format": fmt, "create": "true", "lower_is_better": str(lower).lower(),
                     "best_policy": BestPolicy(self.best_policy or BestPolicy.KEPT).value}
            status, answer = self._call("POST", f"/projects/{slug}/trials.tsv", data=text, query=query)
            if status != 201:
                self._fail(status, answer, "importing the file")
            report.warnings.extend(table.warnings)
            report.inserted.extend(table.layout.exp_id(i) for i in range(len(table.rows)))
            status, answer = self._call("GET", f"/projects/{slug}")
        if status != 200:
            self._fail(status, answer, f"reading project {self.slug!r}")
        settings = answer.get("settings") or {}
        if not isinstance(settings.get(SETTINGS_KEY), Mapping):
            raise InvalidInput(
                "project", f"project {self.slug!r} on the server has no results-file layout; "
                "import the file into it first (lineage import, or POST .../trials.tsv?format=autoresearch)",
            )
        self.layout = Layout.from_dict(settings[SETTINGS_KEY])
        self.lower_is_better = bool(answer.get("lower_is_better", True))
        return True

    def _sync(self) -> SyncReport:
        report = SyncReport()
        text = self._read()
        if text is None or not text.strip():
            return report
        if self.layout is None:
            self._start(text, report)
        assert self.layout is not None
        start = ar.header_end(ar.split_lines(text), self.layout) if self.layout.has_header else 0
        parser = ar.RowParser(self.layout, source=self.source, first_line=start + 1)
        parser.feed(ar.split_lines(text)[start:])
        builder = LineageBuilder(self.layout, lower_is_better=self.lower_is_better, source=self.source)
        builder.name(parser.rows, first_row=0, lines=parser.lines)
        report.warnings.extend(parser.warnings)
        if len(parser.rows) < self.rows_seen:
            report.warnings.append(
                f"{self.source} was truncated: it holds {len(parser.rows)} rows, {self.rows_seen} before; "
                "nothing is deleted"
            )
        self.rows_seen = max(self.rows_seen, len(parser.rows))
        trials = list(parser.rows)
        if self.git_repo is not None:
            report.warnings.extend(link_git(trials, self.layout, self.git_repo))
        slug = urllib_quote(self.slug)
        for trial, text_of_row in zip(trials, parser.texts):
            state = (text_of_row, trial.parent_exp)
            if self.sent.get(trial.exp_id) == state:
                continue
            body = {k: v for k, v in trial.to_dict().items() if k not in ("seq", "created_at", "updated_at", "delta_vs_best")}
            status, answer = self._call("POST", f"/projects/{slug}/trials", body=body)
            if status == 201:
                report.inserted.append(trial.exp_id)
            elif status == 409:
                existing = (answer or {}).get("existing") or {}
                patch = {"status": trial.status.value, "core_metric": trial.core_metric, "val_bpb": trial.val_bpb,
                         "hypothesis": trial.hypothesis, "parent_exp": trial.parent_exp, "extra": dict(trial.extra)}
                patch = {k: v for k, v in patch.items() if existing.get(k, _MISSING) != v}
                if patch:
                    status, answer = self._call(
                        "PATCH", f"/projects/{slug}/trials/{urllib_quote(trial.exp_id)}", body=patch
                    )
                    if status != 200:
                        self._fail(status, answer, f"updating exp_{trial.exp_id}")
                    report.updated.append(trial.exp_id)
            elif status != 200:
                self._fail(status, answer, f"recording exp_{trial.exp_id}")
            self.sent[trial.exp_id] = state
        report.rows = len(parser.rows)
        return report


_MISSING = object()


def urllib_quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def _header_length(text: str) -> int:
    first = text.find("\n")
    return len(text) if first < 0 else first + 1


def _sniff_text(text: str) -> str:
    from lineage.formats import detect_format

    first = ar.first_nonblank(ar.split_lines(text))
    found = detect_format(first[1] if first else "")
    if found is None or found.name not in (ar.NAME, ar.GENERIC):
        return ar.NAME
    return found.name


def _with_deltas(trials: Sequence[Trial], best: float | None, project: Project) -> list[Trial]:
    """``delta_vs_best`` of each trial from ``best`` (the project's before them) on."""
    eligible = project.best_policy.eligible_statuses()
    out: list[Trial] = []
    for trial in trials:
        delta = metric_delta(trial.core_metric, best)
        out.append(trial.with_changes(delta_vs_best=delta) if delta != trial.delta_vs_best else trial)
        metric = trial.core_metric
        if metric is not None and trial.status.value in eligible and (
            best is None or is_better(metric, best, lower_is_better=project.lower_is_better)
        ):
            best = metric
    return out


def _record_fields(trial: Trial) -> dict[str, Any]:
    body = {name: getattr(trial, name) for name in _ROW_FIELDS}
    body["exp_id"] = trial.exp_id
    body["extra"] = dict(trial.extra)
    return body


def refresh_deltas(ledger: Any, project_slug: str, *, after_seq: int) -> int:
    """Recompute ``delta_vs_best`` (the service's rule: metric minus the best before the
    trial) for every trial from ``after_seq`` on, after an earlier row changed. Returns
    how many changed."""
    with ledger.store.write() as conn:
        project, _, _ = ledger.store.locked_project(conn, project_slug)
        before = ledger.store.best_scored(conn, project, before_seq=after_seq)
        best = before.core_metric if before is not None else None
        eligible = project.best_policy.eligible_statuses()
        changes: list[tuple[float | None, str]] = []
        for exp_id, _seq, status, metric, delta in ledger.store.metric_rows_from(conn, project, after_seq):
            wanted = metric_delta(metric, best)
            if wanted != delta:
                changes.append((wanted, exp_id))
            if metric is not None and status in eligible and (
                best is None or is_better(metric, best, lower_is_better=project.lower_is_better)
            ):
                best = metric
        ledger.store.set_deltas(conn, project, changes)
        return len(changes)


# --------------------------------------------------------------------------- record


@dataclass(frozen=True, slots=True)
class RecordOutcome:
    """What ``lineage record`` did."""

    trial: Trial
    created: bool
    best_before: Trial | None
    is_new_best: bool
    metric_name: str
    #: the status word as written (the file's word for the label)
    word: str
    #: the line appended to the results file, if any
    line: str | None
    #: earlier trials close to this one (lineage.similar; Similar objects)
    similar_prior: tuple[Any, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "exp_id": self.trial.exp_id,
            "metric_name": self.metric_name,
            "metric": self.trial.core_metric,
            "status": self.trial.status.value,
            "status_word": self.word,
            "parent_exp": self.trial.parent_exp,
            "delta_vs_best": self.trial.delta_vs_best,
            "best_before": self.best_before.exp_id if self.best_before else None,
            "best_before_metric": self.best_before.core_metric if self.best_before else None,
            "is_new_best": self.is_new_best,
            "created": self.created,
            "line": self.line,
            "similar_prior": [similar.to_dict() for similar in self.similar_prior],
        }


def _column_like(layout: Layout, *words: str) -> str | None:
    for name in layout.columns:
        if set(ar.name_tokens(name)) & set(words):
            return name
    return None


def record_result(
    ledger: Any,
    project_slug: str,
    *,
    metric: str | float | None,
    status: str,
    description: str = "",
    commit: str | None = None,
    memory_gb: str | float | None = None,
    values: Mapping[str, str] | None = None,
    append_to: str | os.PathLike[str] | None = None,
    git_repo: str | os.PathLike[str] | None = None,
    metric_name: str | None = None,
    lower_is_better: bool | None = None,
) -> RecordOutcome:
    """Record one trial of a loop: status word mapped like the file's, parent = the branch
    tip (the last kept trial), ``delta_vs_best`` from the service. With ``append_to``,
    the file is synced first and the trial's line is appended in the file's own format.

    A missing project is created: from ``append_to`` when that file exists (imported
    first), else with autoresearch's own columns, ``metric_name`` (default ``val_bpb``)
    and the direction from ``lower_is_better`` or the name.
    """
    path = Path(append_to) if append_to is not None else None
    project = _project_for_record(ledger, project_slug, path, metric_name, lower_is_better, git_repo)
    layout = layout_of(project)
    file_rows: int | None = None
    pending_text = ""  # text after the file's last row (a summary): it now precedes the new row
    if path is not None:
        if layout is not None and path.exists() and path.stat().st_size:
            sync = ResultsSync(ledger, project_slug, path, git_repo=git_repo)
            sync.sync()
            file_rows = sync.file_rows
            project = ledger.project(project_slug)
            layout = layout_of(project)
            if sync.parser is not None and layout is not None:
                pending_text = sync.parser.trailer()[0]
                if not sync.done_text.endswith("\n") and sync.done_text:
                    pending_text = ""  # the last line is completed by the line end written below
        if layout is None:
            layout = ar.default_layout(project.metric_name)
            ledger_settings = {**dict(project.settings), SETTINGS_KEY: layout.to_dict()}
            with ledger.store.write() as conn:
                locked, _, _ = ledger.store.locked_project(conn, project_slug)
                ledger.store.update_project(conn, locked, {"settings": ledger_settings})
    work = layout or ar.default_layout(project.metric_name)
    label, _known = ar.map_status(status, work.status_map)
    word = status.strip()
    if word == label.value:
        word = work.words.get(label.value, word)
    value = ar.metric_value(str(metric), label) if metric is not None else None
    if value is False:
        raise InvalidInput("metric", f"{metric!r} is not a number")
    extra: dict[str, Any] = {}
    if work.status and word != label.value:
        extra[work.extra_key(work.status)] = word
    commit_column = work.commit or "commit"
    if commit:
        extra[work.extra_key(commit_column)] = commit.strip()
    if memory_gb is not None:
        memory_column = _column_like(work, "memory", "mem", "vram") or "memory_gb"
        extra[work.extra_key(memory_column)] = _typed_value(memory_gb, memory_column, work)
    for name, raw in (values or {}).items():
        if name not in work.columns:
            raise InvalidInput("set", f"no column {name!r}; the columns are {', '.join(work.columns)}")
        extra[work.extra_key(name)] = _typed_value(raw, name, work)
    with ledger.store.read() as conn:
        tip = ledger.store.last_with_status(conn, project, [s.value for s in ar.ADVANCING])
        first = ledger.store.first_trial(conn, project)
    parent = (tip or first).exp_id if (tip or first) else ""
    fields: dict[str, Any] = {
        "status": label,
        "core_metric": value,
        "hypothesis": description,
        "parent_exp": parent,
        "baseline_exp": first.exp_id if first else "",
    }
    if work.metric == "val_bpb":
        fields["val_bpb"] = value
    if git_repo is not None and commit:
        parent_commit = None
        if parent:
            parent_trial = ledger.trial(project_slug, parent)
            parent_commit = parent_trial.extra.get(work.extra_key(commit_column))
        details = git_details(git_repo, commit, parent_commit if isinstance(parent_commit, str) else None)
        if details is not None:
            extra[GIT_KEY] = details
    line: str | None = None
    exp_id: str | None = None
    if path is not None and layout is not None:
        rows = file_rows or 0
        if layout.id_column is None:
            exp_id = layout.exp_id(rows)
            with ledger.store.read() as conn:
                taken = ledger.store.find_trial(conn, project, exp_id) is not None
                number = ledger.store.next_exp_number(conn, project)
            if taken:
                layout.segments.append([rows, number])
                exp_id = layout.exp_id(rows)
                with ledger.store.write() as conn:
                    locked, _, _ = ledger.store.locked_project(conn, project_slug)
                    ledger.store.update_project(
                        conn, locked, {"settings": {**dict(locked.settings), SETTINGS_KEY: layout.to_dict()}}
                    )
        else:
            exp_id = (values or {}).get(layout.id_column) or commit
            if not exp_id:
                raise InvalidInput("id", f"the file names trials by column {layout.id_column!r}: pass --set {layout.id_column}=ID")
        preview = Trial(exp_id, extra=extra, **{k: v for k, v in fields.items()})
        parent_value = None
        if layout.parent and parent:
            parent_commit = ledger.trial(project_slug, parent).extra.get(layout.extra_key(commit_column))
            parent_value = parent_commit if isinstance(parent_commit, str) and parent_commit else parent
        line = ar.render_row(preview, layout, parent_value=parent_value)
        if layout.parent and parent_value is not None:
            extra[layout.extra_key(layout.parent)] = parent_value
        extra[LINE_KEY] = pending_text + line
        extra[ROW_KEY] = rows
        if pending_text and layout.trailer:
            layout.trailer = ""  # written before this trial's line from now on
            with ledger.store.write() as conn:
                locked, _, _ = ledger.store.locked_project(conn, project_slug)
                ledger.store.update_project(
                    conn, locked, {"settings": {**dict(locked.settings), SETTINGS_KEY: layout.to_dict()}}
                )
    body = {**fields, "extra": extra}
    if exp_id is not None:
        body["exp_id"] = exp_id
    result = ledger.record_trial(project_slug, body, similar_prior=True)
    if path is not None and line is not None:
        _append_line(path, line, layout)  # type: ignore[arg-type]
    return RecordOutcome(
        trial=result.trial, created=result.created, best_before=result.best_before, is_new_best=result.is_new_best,
        metric_name=project.metric_name, word=word, line=line, similar_prior=result.similar_prior,
    )


def _typed_value(raw: Any, column: str, layout: Layout) -> Any:
    if not isinstance(raw, str):
        return raw
    return ar.typed_cell(raw) if column in layout.numeric or column not in layout.columns else raw


def _append_line(path: Path, line: str, layout: Layout) -> None:
    exists = path.exists() and path.stat().st_size > 0
    with open(path, "a+b") as fh:
        out = b""
        if not exists:
            out += layout.header_text.encode("utf-8")
        else:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                out += layout.newline.encode("utf-8")
        out += line.encode("utf-8")
        fh.seek(0, os.SEEK_END)
        fh.write(out)


def _project_for_record(
    ledger: Any,
    slug: str,
    path: Path | None,
    metric_name: str | None,
    lower_is_better: bool | None,
    git_repo: Any,
) -> Project:
    try:
        return ledger.project(slug)
    except NotFound:
        pass
    if path is not None and path.exists() and path.stat().st_size:
        text = _read_text(path, source=str(path))
        import_results(ledger, slug, text, fmt=_sniff_text(text), source=str(path),
                       options=ImportOptions(lower_is_better=lower_is_better), git_repo=git_repo)
        return ledger.project(slug)
    name = metric_name or "val_bpb"
    lower, _how = ar.infer_direction(name, [], lower_is_better)
    layout = ar.default_layout(name)
    try:
        return ledger.create_project(
            slug, metric_name=_metric_name(name), lower_is_better=lower, source_format=ar.NAME,
            settings={SETTINGS_KEY: layout.to_dict()},
        )
    except Conflict:
        return ledger.project(slug)


# --------------------------------------------------------------------------- git


def _git(repo: str | os.PathLike[str], *args: str) -> bytes | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, timeout=30, check=False,
            env={**os.environ, "GIT_PAGER": "cat", "LC_ALL": "C"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout


def _resolve(repo: str | os.PathLike[str], commit: str) -> str | None:
    out = _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    return out.decode().strip() if out else None


def git_details(repo: str | os.PathLike[str], commit: str, base_commit: str | None = None) -> dict[str, Any] | None:
    """Subject, author time, diffstat and patch (against ``base_commit`` -- the parent
    trial's commit -- or else the commit's own git parent) of ``commit`` in ``repo``;
    None when it does not resolve. The patch is cut at 64 KB, with a note."""
    if not commit or not commit.strip():
        return None
    sha = _resolve(repo, commit.strip())
    if sha is None:
        return None
    shown = _git(repo, "show", "-s", "--format=%s%x00%aI", sha)
    subject, _, author_time = (shown or b"").decode("utf-8", "replace").rstrip("\n").partition("\x00")
    base = _resolve(repo, base_commit.strip()) if base_commit and base_commit.strip() else None
    if base == sha:
        base = None
    if base is not None:
        stat = _git(repo, "diff", "--stat", base, sha)
        patch = _git(repo, "diff", base, sha)
    else:
        stat = _git(repo, "show", "--format=", "--stat", sha)
        patch = _git(repo, "show", "--format=", sha)
    patch = patch or b""
    cut = len(patch) > MAX_PATCH_BYTES
    kept = patch[:MAX_PATCH_BYTES]
    if cut:
        newline = kept.rfind(b"\n")
        kept = kept[: newline + 1] if newline > 0 else kept
    details: dict[str, Any] = {
        "sha": sha,
        "subject": subject,
        "author_time": author_time,
        "diffstat": (stat or b"").decode("utf-8", "replace").rstrip("\n"),
        "patch_base": base or "parent commit",
        "patch": kept.decode("utf-8", "replace"),
        "patch_bytes": len(patch),
    }
    if cut:
        details["patch_note"] = f"patch cut at {len(kept):,} of {len(patch):,} bytes (limit {MAX_PATCH_BYTES:,})"
    return details


def link_git(
    trials: list[Trial],
    layout: Layout,
    repo: str | os.PathLike[str],
    *,
    known_commits: Mapping[str, str] | None = None,
) -> list[str]:
    """Add ``extra["_git"]`` to each trial whose commit resolves in ``repo`` (replacing
    the trials of the list). ``known_commits``: ``exp_id -> commit`` of trials stored
    earlier (parents). Returns warnings: not a repository, commits that do not resolve."""
    if _git(repo, "rev-parse", "--git-dir") is None:
        return [f"--git-repo {repo}: not a git repository; no commit details stored"]
    commit_key = layout.extra_key(layout.commit) if layout.commit else "commit"
    commits = dict(known_commits or {})
    for trial in trials:
        commit = trial.extra.get(commit_key)
        if isinstance(commit, str) and commit.strip():
            commits[trial.exp_id] = commit.strip()
    unresolved = 0
    for index, trial in enumerate(trials):
        commit = trial.extra.get(commit_key)
        if not isinstance(commit, str) or not commit.strip():
            continue
        details = git_details(repo, commit.strip(), commits.get(trial.parent_exp))
        if details is None:
            unresolved += 1
            continue
        trials[index] = trial.with_changes(extra={**trial.extra, GIT_KEY: details})
    return [f"{unresolved} commit(s) do not resolve in {repo}; no git details for them"] if unresolved else []


# --------------------------------------------------------------------------- plot


def plot_progress(ledger: Any, project_slug: str, output: str | os.PathLike[str], *, title: str | None = None,
                  max_labels: int = 25) -> int:
    """Draw the project's progress to ``output`` (.png, .svg, .pdf): every trial a dot,
    kept trials highlighted, crashes marked on the axis (never at 0), the running best as
    a step line, and the descriptions of the kept trials that moved the best. Needs
    matplotlib (``pip install 'lineage-ledger[plot]'``). Returns the trials drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InvalidInput("plot", "plotting needs matplotlib: pip install 'lineage-ledger[plot]'") from None
    project = ledger.project(project_slug)
    with ledger.store.read() as conn:
        rows = ledger.store.plot_rows(conn, project)
    eligible = project.best_policy.eligible_statuses()
    kept_statuses = {FailureLabel.KEEP.value, FailureLabel.BASELINE.value}
    crash_like = {label.value for label in ar.CRASH_LIKE}
    xs_other, ys_other, xs_kept, ys_kept, xs_fail = [], [], [], [], []
    steps_x: list[float] = []
    steps_y: list[float] = []
    movers: list[tuple[int, float, str]] = []
    best: float | None = None
    for index, (_seq, _exp_id, status, metric, hypothesis) in enumerate(rows):
        if metric is None:
            if status in crash_like:
                xs_fail.append(index)
            continue
        if status in kept_statuses:
            xs_kept.append(index)
            ys_kept.append(metric)
        else:
            xs_other.append(index)
            ys_other.append(metric)
        if status in eligible and (best is None or is_better(metric, best, lower_is_better=project.lower_is_better)):
            best = metric
            steps_x.append(index)
            steps_y.append(metric)
            if status in kept_statuses:
                movers.append((index, metric, hypothesis))
    figure, axes = plt.subplots(figsize=(12, 6), dpi=110)
    axes.scatter(xs_other, ys_other, s=12, color="#b0b0b0", label="discarded / other", zorder=2)
    axes.scatter(xs_kept, ys_kept, s=34, color="#2a9d3f", edgecolor="black", linewidth=0.4, label="kept", zorder=3)
    if steps_x:
        axes.step([*steps_x, max(len(rows) - 1, steps_x[-1])], [*steps_y, steps_y[-1]], where="post",
                  color="#1f5fbf", linewidth=1.6, label="running best", zorder=4)
    if xs_fail:
        axes.scatter(xs_fail, [0.02] * len(xs_fail), transform=axes.get_xaxis_transform(), marker="x", s=26,
                     color="#d62728", label="crash (no result)", zorder=5, clip_on=False)
    step = max(1, len(movers) // max_labels) if movers else 1
    for k, (x, y, text) in enumerate(movers[::step]):
        label = text if len(text) <= 40 else text[:39] + "…"
        axes.annotate(label, (x, y), xytext=(4, 8 if k % 2 == 0 else -14), textcoords="offset points", fontsize=7,
                      rotation=18, color="#14432a")
    axes.set_xlabel("trial (file order)")
    axes.set_ylabel(f"{project.metric_name} ({'lower' if project.lower_is_better else 'higher'} is better)")
    axes.set_title(title or f"{project.title or project.slug}: {len(rows)} trials, {len(xs_kept)} kept")
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize=8)
    figure.tight_layout()
    figure.savefig(os.fspath(output))
    plt.close(figure)
    return len(rows)
