"""Tables (``ledger.tables``): the project's trials as a table — atomic bulk import, streams, keyset pages.

Owns: :meth:`Tables.import_trials` (the one atomic bulk insert every import ends in),
:meth:`Tables.stream_trials`, :meth:`Tables.trials_page` and its stream, the API's
:meth:`Tables.trials_query` behind the ONE cursor codec (:func:`encode_cursor`,
:func:`decode_cursor`, :func:`keyset_after`), the pandas frame, and SQLite backups.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lineage.chain import find_cycle
from lineage.domain import FailureLabel, ImportReport, Project, Trial, check_extra, check_window
from lineage.errors import InvalidInput, NotFound
from lineage.monitor import guardrails
from lineage.patches import without_patch
from lineage.service.projects import new_project
from lineage.store import Store
from lineage.store.chain import next_link
from lineage.store.filter_sql import parse_sort, sort_value

if TYPE_CHECKING:
    import pandas

ProgressCallback = Callable[[int], None]
#: The trials table's named sort orders (each walks an index); any trial field or
#: ``extra.KEY`` sorts too (``lineage.store.filter_sql.parse_sort``).
TRIAL_SORTS = ("seq", "metric", "exp_id")


class ImportLinks:
    """The stored chain links (``lineage.store.chain``) of an import's rows, computed from
    the parent pointers it holds anyway: :meth:`of` as each row streams in (its parent
    stored or earlier in the file: the final pair), :meth:`settled` after the last row for
    the rows whose parent came later in the file and the stored trials a new row adopted
    (their subtrees, once each, top-down)."""

    def __init__(self, links: dict[str, tuple[int, str]], parents: Mapping[str, str]) -> None:
        self.links = links
        self.parents = parents
        self.pending: list[str] = []

    def of(self, trial: Trial) -> tuple[int, str]:
        parent = trial.parent_exp
        if parent and parent not in self.links:  # later in the file, or not in the project
            self.pending.append(trial.exp_id)
        value = self.links[trial.exp_id] = next_link(parent, self.links.get(parent))
        return value

    def settled(self, existing: set[str], row_of: Mapping[str, int]) -> list[tuple[str, int, str]]:
        """``(exp_id, depth, skip)`` of every trial whose pair is not final yet (call it
        once the parents are known free of cycles)."""
        parents = self.parents
        starts = [e for e in self.pending if parents[e] in self.links]
        starts += [e for e in existing if parents.get(e) and parents[e] not in existing and parents[e] in row_of]
        if not starts:
            return []
        children: dict[str, list[str]] = {}
        for exp_id, parent in parents.items():
            if parent:
                children.setdefault(parent, []).append(exp_id)
        affected: set[str] = set()
        stack = list(starts)
        while stack:
            exp_id = stack.pop()
            if exp_id not in affected:
                affected.add(exp_id)
                stack.extend(children.get(exp_id, ()))
        queue = deque(e for e in affected if parents.get(e) not in affected)
        out = []
        while queue:
            exp_id = queue.popleft()
            parent = parents.get(exp_id, "")
            depth, skip = self.links[exp_id] = next_link(parent, self.links.get(parent))
            out.append((exp_id, depth, skip))
            queue.extend(children.get(exp_id, ()))
        return out


@dataclass(frozen=True, slots=True)
class TrialsPage:
    project: Project
    trials: tuple[Trial, ...]
    #: the keyset of the next page, None on the last one
    next_after: tuple[Any, ...] | None
    #: trials matching the filters, None when not counted
    total: int | None


@dataclass(frozen=True, slots=True)
class TrialsQuery:
    page: TrialsPage
    #: the opaque cursor of the next page, None on the last one
    next_cursor: str | None

    def to_dict(self, *, patch: bool = False) -> dict[str, Any]:
        """A page of the listing as JSON, as the API and MCP answer it (``patch``: with
        each trial's git patch, which is left out unless asked for: :mod:`lineage.patches`)."""
        return {
            "items": [t.to_dict() if patch else without_patch(t.to_dict()) for t in self.page.trials],
            "next_cursor": self.next_cursor,
            "total": self.page.total,
        }


class _RolledBack(Exception):
    """Leaves a preview's write transaction, which rolls it back, with its report."""

    def __init__(self, report: ImportReport) -> None:
        super().__init__("preview")
        self.report = report


class Tables:
    """import_trials, stream_trials, dataframe, backup, trials_page, iter_trials_page, trials_query."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def import_trials(
        self,
        project_slug: str,
        rows: Iterable[Trial],
        *,
        progress: ProgressCallback | None = None,
        locate: Callable[[int], int | None] | None = None,
        create_with: Mapping[str, Any] | None = None,
        project_changes: Mapping[str, Any] | None = None,
        preview: bool = False,
    ) -> ImportReport:
        """Insert parsed rows atomically: one bad row and nothing is stored.

        ``rows`` is consumed once, streaming. Rows keep the ``delta_vs_best`` their file
        had. An exp_id that is already stored, or parent pointers that form a cycle, fail
        the whole import; ``locate(row_index)`` gives the file line for the error.
        ``create_with``: create the project with these options if it does not exist, in
        the same transaction (a failed import leaves no empty project behind).
        ``project_changes``: columns of the project to set in the same transaction
        (``settings``, ``metric_name``; used by the results-file formats).
        ``preview``: do all of it, then roll the transaction back (``committed=False``).
        """
        try:
            return self._import_trials(
                project_slug,
                rows,
                progress=progress,
                locate=locate,
                create_with=create_with,
                project_changes=project_changes,
                preview=preview,
            )
        except _RolledBack as done:
            return done.report

    def _import_trials(
        self,
        project_slug: str,
        rows: Iterable[Trial],
        *,
        progress: ProgressCallback | None,
        locate: Callable[[int], int | None] | None,
        create_with: Mapping[str, Any] | None,
        project_changes: Mapping[str, Any] | None,
        preview: bool,
    ) -> ImportReport:
        with self.store.write() as conn:
            try:
                project, first_seq, _ = self.store.projects.locked_project(conn, project_slug)
            except NotFound:
                if create_with is None:
                    raise
                self.store.projects.insert_project(conn, new_project(project_slug, **create_with))
                project, first_seq, _ = self.store.projects.locked_project(conn, project_slug)
            existing = self.store.trials.exp_ids(conn, project)
            parents = self.store.trials.parents(conn, project) if existing else {}
            links = ImportLinks(self.store.chain.chain_links(conn, project) if existing else {}, parents)
            row_of: dict[str, int] = {}
            max_number = -1

            def checked() -> Iterator[Trial]:
                nonlocal max_number
                for index, trial in enumerate(rows):
                    if trial.exp_id in existing or trial.exp_id in row_of:
                        raise InvalidInput(
                            "exp_id",
                            f"{trial.exp_id!r} is already a trial of project {project.slug!r}",
                            line=locate(index) if locate else None,
                            column=1,
                        )
                    try:
                        check_extra(trial.extra)
                    except InvalidInput as bad:
                        raise InvalidInput(bad.field, bad.reason, line=locate(index) if locate else None) from None
                    row_of[trial.exp_id] = index
                    parents[trial.exp_id] = trial.parent_exp
                    if trial.exp_id.isdigit():
                        max_number = max(max_number, int(trial.exp_id))
                    if progress is not None and index % 1000 == 999:
                        progress(index + 1)
                    yield trial

            count = self.store.trials.bulk_insert(conn, project, checked(), first_seq=first_seq, link_of=links.of)
            cycle = find_cycle(parents)
            if cycle:
                first_new = min((row_of[i] for i in cycle if i in row_of), default=None)
                raise InvalidInput(
                    "parent_exp",
                    f"parent pointers form a cycle: {' -> '.join(cycle + cycle[:1])}",
                    line=locate(first_new) if locate and first_new is not None else None,
                )
            self.store.chain.set_links(conn, project, links.settled(existing, row_of))
            self.store.projects.advance_counters(conn, project, rows=count, exp_number=max_number + 1)
            guardrails.reevaluate(self.store, conn, project)
            if project_changes:
                self.store.projects.update_project(conn, project, dict(project_changes))
            if progress is not None:
                progress(count)
            if preview:
                raise _RolledBack(ImportReport(project=project.slug, rows=count, committed=False))
        return ImportReport(project=project.slug, rows=count)

    def stream_trials(self, project_slug: str) -> Iterator[Trial]:
        """Every trial of a project in insertion order, streamed from one read transaction."""
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            yield from self.store.trials.stream_trials(conn, project)

    def dataframe(self, project_slug: str) -> pandas.DataFrame:
        """The project's trials as a pandas DataFrame (one row per trial, insertion order,
        indexed by exp_id) with the typed, stable schema of
        :mod:`lineage.formats.table_export` (``extra.*`` flattened, UTC timestamps,
        deltas without float noise): what ``lineage export --format csv|parquet`` writes."""
        from lineage.formats.table_export import to_frame

        frame = to_frame(self.stream_trials(project_slug))
        return frame.set_index("exp_id", drop=False)

    def backup(self, target: str) -> None:
        if not self.store.sqlite:
            raise InvalidInput(
                "db",
                "online backup is built in for SQLite only; for PostgreSQL run "
                f"pg_dump --format=custom --file {target} '<database url>'",
            )
        self.store.projects.backup_sqlite(target)

    # -- read models for the web pages ---------------------------------------------------

    def trials_page(
        self,
        project_slug: str,
        *,
        sort: str = "seq",
        descending: bool = False,
        after: Sequence[Any] | None = None,
        limit: int = 50,
        count: bool = True,
        **filters: Any,
    ) -> TrialsPage:
        """A page of the trials table (keyset pagination, see ``Store.pages.page_trials``).
        ``sort``: see :func:`check_sort` (a leading ``-`` overrides ``descending``)."""
        sort, descending = check_sort(sort, descending)
        check_window("limit", limit, minimum=1)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            rows = self.store.pages.page_trials(
                conn, project, sort=sort, descending=descending, after=after, limit=limit + 1, **filters
            )
            more = len(rows) > limit
            rows = rows[:limit]
            next_after: tuple[Any, ...] | None = None
            if more:
                next_after = keyset_after(sort, rows[-1])
            unfiltered = not any(v not in (None, "", [], ()) for v in filters.values())
            total = (
                project.trial_count
                if unfiltered
                else self.store.pages.count_matching(conn, project, **filters)
                if count
                else None
            )
            return TrialsPage(project=project, trials=tuple(rows), next_after=next_after, total=total)

    def iter_trials_page(
        self, project_slug: str, *, sort: str = "seq", descending: bool = False, **filters: Any
    ) -> Iterator[Trial]:
        """Every trial matching ``filters`` in ``sort`` order, streamed a page at a time from
        one read transaction (the TSV export of a trials-table view)."""
        sort, descending = check_sort(sort, descending)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            after: tuple[Any, ...] | None = None
            while True:
                rows = self.store.pages.page_trials(
                    conn, project, sort=sort, descending=descending, after=after, limit=2_000, **filters
                )
                yield from rows
                if len(rows) < 2_000:
                    return
                after = keyset_after(sort, rows[-1])

    def trials_query(
        self,
        project_slug: str,
        *,
        sort: str = "seq",
        descending: bool = False,
        cursor: str | None = None,
        limit: int = 100,
        count: bool = True,
        status: Sequence[str] | None = None,
        created_after: Any = None,
        created_before: Any = None,
        **filters: Any,
    ) -> TrialsQuery:
        """A page of trials for the API and MCP: :meth:`trials_page` behind an opaque cursor.

        ``status`` values are checked labels; ``created_after``/``created_before`` are
        datetimes (naive means UTC); the other filters are ``StoreCore.filter_sql``'s.
        """
        sort, descending = check_sort(sort, descending)
        statuses = [FailureLabel.parse(s).value for s in status] if status else None
        after = decode_cursor(cursor, sort=sort, descending=descending) if cursor else None
        for name, bound in (("created_after", created_after), ("created_before", created_before)):
            if bound is not None:
                filters[name] = self.store.db_time(bound)
        page = self.trials_page(
            project_slug,
            sort=sort,
            descending=descending,
            after=after,
            limit=limit,
            count=count,
            status=statuses,
            **filters,
        )
        next_cursor = encode_cursor(sort, descending, page.next_after) if page.next_after is not None else None
        return TrialsQuery(page=page, next_cursor=next_cursor)


def check_sort(sort: str, descending: bool = False) -> tuple[str, bool]:
    """``(key, descending)`` of a sort as asked: ``seq``, ``metric``, ``exp_id`` (numeric-
    aware), any trial field (``core_metric``, ``delta_vs_best``, ``status``, ...) or
    ``extra.KEY``, a leading ``-`` meaning descending; :class:`InvalidInput` (``sort``)
    for anything else."""
    key, said = parse_sort(sort)
    return key, descending if said is None else said


def keyset_after(sort: str, last: Trial) -> tuple[Any, ...]:
    """The keyset that continues a listing in ``sort`` order (a key of :func:`check_sort`)
    after ``last``."""
    if sort == "seq":
        return (last.seq,)
    phase, value = sort_value(sort, last)
    return (phase, value, last.seq)


def encode_cursor(sort: str, descending: bool, after: Sequence[Any]) -> str:
    """An opaque cursor: the keyset of the last row and the order it belongs to."""
    import base64
    import json

    raw = json.dumps({"s": sort, "d": bool(descending), "a": list(after)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, *, sort: str, descending: bool, field: str = "cursor") -> tuple[Any, ...]:
    """The keyset in ``cursor``; :class:`InvalidInput` (named ``field``) for a cursor
    this server did not make, or one made for another sort order.

    Also reads the trials page's older cursors (the bare keyset list, before the page
    took this codec), so a bookmarked "next page" link keeps working; they carry no
    order, so they are checked against ``sort``'s keyset shape only."""
    import base64
    import binascii
    import json

    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
        if isinstance(data, list):  # the page's older form
            made_sort, made_desc, after = sort, descending, data
        else:
            made_sort, made_desc, after = data["s"], data["d"], data["a"]
    except (binascii.Error, ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise InvalidInput(field, "is not a cursor of this listing; start again without it") from None
    sort = parse_sort(sort)[0] if sort != "seq" else sort
    try:
        made_sort = parse_sort(made_sort)[0] if made_sort != "seq" else made_sort
    except (InvalidInput, AttributeError, TypeError):
        raise InvalidInput(field, "is not a cursor of this listing; start again without it") from None
    if made_sort != sort or made_desc != descending:
        order = "descending" if made_desc else "ascending"
        raise InvalidInput(field, f"was made for sort={made_sort!r} ({order}); ask with the same order")
    shape: tuple[type | tuple[type, ...], ...] = (int,) if sort == "seq" else (int, (float, int, str, type(None)), int)
    if (
        not isinstance(after, list)
        or len(after) != len(shape)
        or not all(isinstance(v, t) and not isinstance(v, bool) for v, t in zip(after, shape))
        or not all(-(2**63) <= v < 2**63 for v in after if isinstance(v, int))
        or not all(math.isfinite(v) for v in after if isinstance(v, float))
    ):
        raise InvalidInput(field, "is not a cursor of this listing; start again without it")
    if sort != "seq" and after[1] is not None and not _keyset_value_fits(sort, after[0], after[1]):
        raise InvalidInput(field, "is not a cursor of this listing; start again without it")
    return tuple(after)


def _keyset_value_fits(sort: str, phase: int, value: Any) -> bool:
    """Whether a cursor's value has the type its sort and phase compare with."""
    from lineage.filter_language import field_kind

    kind = "id" if sort == "exp_id" else field_kind(sort)
    numeric = kind == "number" or (kind == "extra" and phase == 0)
    return isinstance(value, (int, float)) if numeric else isinstance(value, str)
