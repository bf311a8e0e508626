"""What the two followers of a results file share (``lineage watch`` locally and into
a server): the file and how to read it, each warning shown once, the watch loop, the
report of one pass, and what the ledger holds for each row of the file."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineage.domain import BestPolicy, Trial
from lineage.errors import LedgerError
from lineage.formats import autoresearch as ar
from lineage.formats.autoresearch import LINE_KEY, PART_KEY, ROW_DESCRIPTION_KEY, ROW_KEY, ImportOptions, Layout
from lineage.loops.importing import read_results_text


@dataclass(slots=True)
class SyncReport:
    inserted: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: rows found already recorded through the API (same commit, or same description and
    #: metric): their trials now hold the rows, no copy was added
    linked: list[str] = field(default_factory=list)
    #: rows in the file after this sync
    rows: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.inserted or self.updated or self.linked)


@dataclass(slots=True)
class Known:
    """What the ledger holds for a row: its text (None: the trial is not from the
    file), the part of a merged line, the parent, and the commit (None: none known)."""

    line: str | None
    part: int
    parent: str
    commit: str | None = None


def known_row(trial: Trial, layout: Layout | None) -> Known:
    extra = trial.extra
    line = extra.get(LINE_KEY)
    if not isinstance(line, str):
        line = ar.render_row(trial, layout) if ROW_KEY in extra and layout is not None else None
    return Known(line, int(extra.get(PART_KEY, 0) or 0), trial.parent_exp, commit_of(trial, layout))


def commit_of(trial: Trial | dict[str, Any], layout: Layout | None) -> str | None:
    """The commit a trial (or a trial's JSON) carries in the file's commit column, if any."""
    extra = trial.get("extra") if isinstance(trial, dict) else trial.extra
    if not isinstance(extra, dict):
        return None
    column = (layout.commit if layout is not None else None) or "commit"
    value = extra.get(layout.extra_key(column) if layout is not None else column, extra.get("commit"))
    return value.strip() if isinstance(value, str) and value.strip() else None


def same_commit(a: str | None, b: str | None) -> bool | None:
    """Whether two commit cells name one commit (one hash a prefix of the other, 7 or more
    characters, case aside); None when either is missing or too short to tell."""
    if a is None or b is None or min(len(a.strip()), len(b.strip())) < 7:
        return None
    x, y = a.strip().lower(), b.strip().lower()
    return x.startswith(y) or y.startswith(x)


def other_commit(known: Known | None, row: Trial, layout: Layout | None) -> bool:
    """Whether ``known`` (the trial holding ``row``'s exp_id) is another commit's than the
    row's: the one thing a sync must never overwrite (the file was rewritten, or rows of
    another file took these exp_ids)."""
    return known is not None and same_commit(known.commit, commit_of(row, layout)) is False


def linked_words(held: str, held_extra: Mapping[str, Any], row: str, *, linking: bool) -> tuple[str, dict[str, str]]:
    """The hypothesis a stored trial keeps when its row (description ``row``) is synced
    into it, and the ``extra`` entry for the row's text. A trial recorded through the API
    (``linking``), or one that kept its words before (``extra["row_description"]``), keeps
    its hypothesis (``held``, an agent's fuller words) when the row says something else;
    the row's text goes to ``extra["row_description"]``, which export writes back. Else
    the row's text is the hypothesis."""
    if (linking or ROW_DESCRIPTION_KEY in held_extra) and held.strip() and held != row:
        return held, {ROW_DESCRIPTION_KEY: row}
    return row, {}


class FileFollower:
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
            return read_results_text(self.path, source=self.source)
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
                "1",
                "true",
                "yes",
            )
            notify = RustNotify([directory], False, polling, 300, False, False)
        except (ImportError, TypeError):  # pragma: no cover - another watchfiles: its public generator
            notify = None
        if notify is None:  # pragma: no cover
            sync(first=True)
            for _ in watch_changes(
                directory,
                watch_filter=lambda _c, p: os.path.abspath(p) == target,
                debounce=debounce_ms,
                step=step_ms,
                stop_event=stop,
                recursive=False,
                force_polling=force_polling,
                raise_interrupt=False,
            ):
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
                if isinstance(raw, str):  # "timeout": no change within the step
                    if stat() != last_stat[0]:
                        sync()
                    continue
                if any(os.path.abspath(changed) == target for _change, changed in raw):
                    sync()
