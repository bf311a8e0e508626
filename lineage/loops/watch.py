"""``lineage watch``: keep a project equal to a results file that a loop appends to
(:class:`ResultsSync`, the local follower; the server one is :mod:`lineage.loops.remote`)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lineage.domain import BestPolicy, Project, Trial
from lineage.errors import InvalidInput, NotFound
from lineage.formats import autoresearch as ar
from lineage.formats.autoresearch import GIT_KEY, PART_KEY, ROW_DESCRIPTION_KEY, ImportOptions, LineageBuilder
from lineage.loops.follow import (
    FileFollower,
    Known,
    SyncReport,
    commit_of,
    known_row,
    linked_words,
    other_commit,
    same_commit,
)
from lineage.loops.git import link_git
from lineage.loops.importing import (
    header_length,
    layout_of,
    results_metric_name,
    sniff_results_text,
    with_deltas,
)

if TYPE_CHECKING:
    pass

#: Changed fields a rewritten row may carry to its trial.
_ROW_FIELDS = (
    "status",
    "core_metric",
    "hypothesis",
    "parent_exp",
    "baseline_exp",
    "timestamp",
    "specialist",
    "domain",
    "job_name",
    "snapshot_path",
    "notes",
    "expected_delta",
    "val_bpb",
    "train_s",
    "total_s",
)


class ResultsSync(FileFollower):
    """Keeps a project equal to a results file that a loop appends to.

    Row identity is the row number (or the ``--id`` column): row ``i`` is exp_id
    ``layout.exp_id(i)``. :meth:`sync` reads the file and

    * inserts rows it has not seen (appends: only the new lines are parsed);
    * updates the trial of a row whose text changed (a loop that rewrites a row, e.g.
      ``running`` -> ``keep``), and the parents and deltas that depend on it;
    * when the file holds fewer rows than the ledger has from it (truncated), warns,
      deletes nothing, and gives rows from the first one that differs fresh exp_ids;
    * never overwrites a trial whose commit differs from its row's (a rewritten file, rows
      of another file under these exp_ids): that row and those after it get fresh exp_ids;
    * never adds a row twice: a restart or a replay of the same text changes nothing;
    * links a row whose exp_id is held by a trial recorded through the API (HTTP, MCP)
      that is the same trial (:func:`same_trial`: the same commit, or the same
      description and metric): that trial takes the row (its text, columns, status and
      parent; what the API stored besides stays, and so does its hypothesis, the row's
      description going to ``extra["row_description"]``), so a loop that records a trial over
      the API and also appends its row, as ``program.md`` says, gets one trial. A row
      whose exp_id is held by another trial gets a fresh exp_id, as before.
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
        self.known: dict[str, Known] | None = None
        self.done_text = ""  # the file text already synced (complete lines only)
        self.parser: ar.RowParser | None = None
        self.builder: LineageBuilder | None = None
        self.file_rows = 0  # rows of the file seen by the last sync
        self._warned_truncation = False
        self._linkable: set[str] = set()  # exp_ids of API trials that rows of the file are

    # -- state ---------------------------------------------------------------------------

    def _load(self) -> None:
        self.project = self.ledger.projects.project(self.slug)
        self.layout = layout_of(self.project)
        self.known = {
            trial.exp_id: known_row(trial, self.layout) for trial in self.ledger.tables.stream_trials(self.slug)
        }

    def _save_layout(self) -> None:
        assert self.project is not None and self.layout is not None
        self.project = self.ledger.files.save_results_layout(self.slug, self.layout)

    def _fresh_state(self) -> tuple[ar.RowParser, LineageBuilder]:
        assert self.project is not None and self.layout is not None
        start = ar.header_end(ar.split_lines(self.layout.header_text), self.layout) if self.layout.has_header else 0
        parser = ar.RowParser(self.layout, source=self.source, first_line=start + 1)
        builder = LineageBuilder(
            self.layout,
            lower_is_better=self.project.lower_is_better,
            best_policy=self.project.best_policy,
            source=self.source,
        )
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
            try:  # the file the project follows, and no other (lineage.loops.followed)
                self.ledger.files.follow(self.slug, self.path, field="file")
            except NotFound:
                self._create(text, report)
                return report
            self._load()
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
        if (
            self.parser is not None
            and self.done_text
            and self.done_text.endswith("\n")
            and text.startswith(self.done_text)
        ):
            if len(text) == len(self.done_text):
                report.rows = self.file_rows
                return report
            self._append(text, report)
        else:
            self._full(text, report)
        return report

    def _create(self, text: str, report: SyncReport) -> None:
        done = self.ledger.files.import_results(
            self.slug,
            text,
            fmt=self.fmt or sniff_results_text(text),
            source=self.source,
            options=self.options,
            best_policy=self.best_policy,
            git_repo=self.git_repo,
            followed=self.path,
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
        table = ar.parse_table(text, source=self.source, fmt=self.fmt or sniff_results_text(text), options=self.options)
        self.layout = table.layout
        if self.project.trial_count:
            self.layout.segments = [[0, self.ledger.files.next_exp_number(self.slug)]]
        self._save_layout()
        if self.project.metric_name == "core_metric":
            self.project = self.ledger.projects.update_project(
                self.slug, {"metric_name": results_metric_name(self.layout.metric_name)}
            )

    def _append(self, text: str, report: SyncReport) -> None:
        assert self.parser is not None and self.builder is not None
        before = len(self.parser.rows)
        warned = len(self.parser.warnings)
        self.parser.feed(ar.split_lines(text[len(self.done_text) :]))
        report.warnings.extend(self.parser.warnings[warned:])
        trials = self.parser.rows[before:]
        self.builder.name(trials, first_row=before, lines=self.parser.lines[before:])
        assert self.known is not None
        if any((k := self.known.get(t.exp_id)) is not None and k.line is None or self._clashes(t) for t in trials):
            self._full(text, report)  # an id held by a trial not from the file or of another commit: rebase
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
            body = (
                text[len(self.layout.header_text) :]
                if self.layout.has_header and text.startswith(self.layout.header_text)
                else (text[header_length(text) :] if self.layout.has_header else text)
            )
            parser.feed(ar.split_lines(body))
            trials = parser.rows
            builder.name(trials, first_row=0, lines=parser.lines)
            rebase = self._rebase_at(trials, parser.texts, report)
            if rebase is None:
                break
            number = self.ledger.files.next_exp_number(self.slug)
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
            if known is not None and self._clashes(trial):
                report.warnings.append(
                    f"{self.source}: row {index + 1} would be exp_{trial.exp_id}, which holds commit {known.commit} "
                    f"(not the row's {commit_of(trial, self.layout)}); it and the rows after it get the next free "
                    "exp_ids, and nothing is overwritten"
                )
                return index
            if known is not None and known.line is None:
                if trial.exp_id in self._linkable or self._links(trial):
                    self._linkable.add(trial.exp_id)
                    continue
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
        project = self.ledger.projects.project(self.slug)
        best = self.ledger.files.best_metric(self.slug)
        trials = with_deltas(trials, best, project)
        texts = [text for _, text in rows]
        try:
            self.ledger.tables.import_trials(self.slug, iter(trials))
        except InvalidInput:
            # some of these exp_ids were stored meanwhile, by ``record`` or the API
            self._load()
            if any((k := self.known.get(t.exp_id)) is not None and k.line is None or self._clashes(t) for t in trials):
                self._full(self.done_text, report)  # not from the file, or another commit: fresh exp_ids
                return
            for trial, text in zip(trials, texts):  # from the file (``record --append-tsv``): one by one
                existing = self._find(trial.exp_id)
                if existing is None:
                    self.ledger.recording.record_trial(self.slug, record_fields(trial))
                    report.inserted.append(trial.exp_id)
                elif (known_row(existing, self.layout).line, existing.parent_exp) != (text, trial.parent_exp):
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
            linking = trial.exp_id in self._linkable
            stored = self._update_one(trial)
            if stored is not None and stored.seq is not None:
                first_seq = stored.seq if first_seq is None else min(first_seq, stored.seq)
            (report.linked if linking else report.updated).append(trial.exp_id)
            self._linkable.discard(trial.exp_id)
            self._remember(trial, text)
        if first_seq is not None:
            self.ledger.files.refresh_deltas(self.slug, after_seq=first_seq)

    def _update_one(self, trial: Trial) -> Trial | None:
        current = self._find(trial.exp_id)
        if current is None:
            return None
        if trial.exp_id in self._linkable:
            return self.ledger.recording.update_trial(self.slug, trial.exp_id, self._link_changes(current, trial))
        extra = dict(trial.extra)
        if GIT_KEY not in extra and GIT_KEY in current.extra:
            commit_key = self.layout.extra_key(self.layout.commit) if self.layout and self.layout.commit else None
            if commit_key is None or current.extra.get(commit_key) == extra.get(commit_key):
                extra[GIT_KEY] = current.extra[GIT_KEY]
        changes: dict[str, Any] = {name: getattr(trial, name) for name in _ROW_FIELDS}
        changes["hypothesis"], words = linked_words(current.hypothesis, current.extra, trial.hypothesis, linking=False)
        changes["extra"] = {**extra, **words}
        if changes["parent_exp"] and self._find(changes["parent_exp"]) is None:
            changes["parent_exp"] = ""
        return self.ledger.recording.update_trial(self.slug, trial.exp_id, changes)

    def _clashes(self, row: Trial) -> bool:
        """Whether the trial from the file holding ``row``'s exp_id is another commit's."""
        assert self.known is not None
        known = self.known.get(row.exp_id)
        return known is not None and known.line is not None and other_commit(known, row, self.layout)

    def _links(self, row: Trial) -> bool:
        """Whether the trial holding ``row``'s exp_id (recorded through the API) is the row's."""
        current = self._find(row.exp_id)
        return current is not None and same_trial(current, row, self.layout)

    def _link_changes(self, current: Trial, row: Trial) -> dict[str, Any]:
        """What a linked trial takes from its row: the row's columns, status, metric and
        parent; the API's other fields and ``extra`` entries stay, and so does its
        hypothesis (:func:`~lineage.loops.follow.linked_words`)."""
        hypothesis, words = linked_words(current.hypothesis, current.extra, row.hypothesis, linking=True)
        extra = {k: v for k, v in {**current.extra, **row.extra}.items() if k != ROW_DESCRIPTION_KEY}
        changes: dict[str, Any] = {
            "status": row.status,
            "core_metric": row.core_metric,
            "hypothesis": hypothesis,
            "val_bpb": row.val_bpb if row.val_bpb is not None else current.val_bpb,
            "extra": {**extra, **words},
        }
        for name in _ROW_FIELDS:
            value = getattr(row, name)
            if name not in changes and value not in ("", None):
                changes[name] = value
        changes["parent_exp"] = row.parent_exp if row.parent_exp and self._find(row.parent_exp) else current.parent_exp
        return changes

    def _find(self, exp_id: str) -> Trial | None:
        try:
            return self.ledger.trials.trial(self.slug, exp_id)
        except NotFound:
            return None

    def _remember(self, trial: Trial, text: str) -> None:
        assert self.known is not None
        self.known[trial.exp_id] = Known(
            text, int(trial.extra.get(PART_KEY, 0) or 0), trial.parent_exp, commit_of(trial, self.layout)
        )

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


def same_trial(recorded: Trial, row: Trial, layout: Any) -> bool:
    """Whether ``recorded`` (a trial recorded through the API) is the trial of ``row`` (a
    row of the results file): the same commit (one hash a prefix of the other, 7 or more
    characters), or else the same description and the same metric (both none, or equal to
    1e-9)."""
    commits = same_commit(commit_of(recorded, layout), commit_of(row, layout))
    if commits is not None:
        return commits
    if recorded.hypothesis.strip() != row.hypothesis.strip() or not row.hypothesis.strip():
        return False
    if recorded.core_metric is None or row.core_metric is None:
        return recorded.core_metric is None and row.core_metric is None
    return math.isclose(recorded.core_metric, row.core_metric, rel_tol=1e-9, abs_tol=1e-12)


def record_fields(trial: Trial) -> dict[str, Any]:
    body = {name: getattr(trial, name) for name in _ROW_FIELDS}
    body["exp_id"] = trial.exp_id
    body["extra"] = dict(trial.extra)
    return body
