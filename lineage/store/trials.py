"""Trial rows: :class:`TrialsSql`, ``Store.trials`` of :class:`lineage.store.Store`.

Methods, by section:

* single rows: ``insert_trial`` (the hot path of ``record_trial``), ``update_trial``,
  ``trial``, ``find_trial``, ``projects_holding``, ``exp_ids``, ``parents``;
* the best, the tip and the best's fallback: ``best_scored``, ``tip``, ``first_trial``,
  ``record_context`` (inherited from :class:`lineage.store.best.BestReads`);
* lineage queries: ``chain_rows``, ``chain_tail``,
  ``trials_of``, ``top_kept``, ``recent``, ``children``, ``has_children``, ``count_trials``;
* listing and streaming: ``list_trials``, ``stream_trials``, ``trials_select``;
* bulk insert: ``bulk_insert`` (inherited from :class:`lineage.store.bulk.BulkInsert`).

Every write of a trial's text also adds its words to the search vocabulary
(``SearchSql.remember_terms``, same transaction).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, func, select, update

from lineage import similar
from lineage.domain import CLIP_SCALE_COLUMNS, Project, Trial
from lineage.errors import NotFound
from lineage.exp_ids import exp_sort_key, shown_forms
from lineage.models import projects, trials
from lineage.similar import search_text, stored_concepts
from lineage.store.base import (
    _COLUMN_LIST,
    _STATUS_AT,
    TRIAL_COLUMNS,
    TRIAL_VALUE_COLUMNS,
    StoreCore,
    _iso,
    _json_text,
    iso_stamp,
    trial_from_row,
    utcnow,
)
from lineage.store.best import BestReads
from lineage.store.bulk import BulkInsert
from lineage.store.chain import ChainSql
from lineage.store.knobs import KnobsSql, roles_of
from lineage.store.progress import ProgressSql
from lineage.store.repeats import RepeatsSql
from lineage.store.search import SearchSql, sqlite_bulk_index, vocabulary

_TRIAL_SELECT = [trials.c[name] for name in TRIAL_COLUMNS]
#: The columns a chain line of the prompt needs; the others are selected as empty values
#: so rows still map positionally onto Trial.
_BRIEF_COLUMNS = frozenset(
    {"exp_id", "specialist", "parent_exp", "hypothesis", "status", "core_metric", "delta_vs_best", "seq"}
)
_BRIEF_COLUMN_LIST = ", ".join(
    name
    if name in _BRIEF_COLUMNS
    else "'{}'"
    if name == "extra"
    else "NULL"
    if name in (*CLIP_SCALE_COLUMNS, "val_bpb", "train_s", "total_s", "created_at", "updated_at")
    else "''"
    for name in TRIAL_COLUMNS
)


def _trial_values(trial: Trial) -> dict[str, Any]:
    values = {name: getattr(trial, name) for name in TRIAL_VALUE_COLUMNS}
    values["status"] = trial.status.value
    values["extra"] = dict(trial.extra)
    return values


@dataclass(frozen=True, slots=True)
class NewTrialReads:
    """What :meth:`TrialsSql.new_trial_reads` read for a new trial."""

    #: stored trials name it as their parent (imported before it)
    named: bool
    #: its ``(chain_depth, chain_skip)``
    link: tuple[int, str]
    #: ``similar_prior``'s shortlist (``Store.search.prior_rows``' rows); None: not asked
    prior: list[Any] | None


class TrialsSql(BestReads, BulkInsert):
    """Trial rows: single rows, lineage queries, listing and streaming, bulk insert.

    A trial's write also keeps its chain link (``chain``), its search words and sketch
    (``search``) and its knob changes (``knobs``); an update and an import its repeat key
    (``repeats``; a new record's is written by ``lineage.service.recording``, which knows
    a declared rerun); a record's context reads the webhooks and guardrails (``progress``)."""

    def __init__(
        self,
        core: StoreCore,
        *,
        chain: ChainSql,
        search: SearchSql,
        progress: ProgressSql,
        knobs: KnobsSql,
        repeats: RepeatsSql,
    ) -> None:
        super().__init__(core)
        self.chain = chain
        self.search = search
        self.progress = progress
        self.knobs = knobs
        self.repeats = repeats

    # -- trials: single rows --------------------------------------------------------------

    def insert_trial(
        self,
        conn: Connection,
        project: Project,
        trial: Trial,
        *,
        seq: int,
        concepts: str | None = None,
        deferred: list[tuple[str, int, int, str]] | None = None,
        named: bool | None = None,
        link: tuple[int, str] | None = None,
        terms: list[str] | None = None,
        buffer: list[tuple[Any, ...]] | None = None,
        sketch: Sequence[int] | None = None,
    ) -> Trial:
        """Insert ``trial`` at ``seq``; ``concepts``: its ``stored_concepts`` when the
        caller computed them already. ``deferred``: its search words and sketch are added
        to that list instead of written (:meth:`write_deferred`, later in the transaction).
        ``named``: whether stored trials name it as their parent, ``link``: its chain
        ``(depth, skip)``, when the caller read them (:meth:`new_trial_reads`). ``terms``:
        its search text is added to that list, its words written by the caller
        (:meth:`write_terms`), its sketch now. ``buffer``: its row is added to that list,
        inserted by the caller (:meth:`insert_rows`), before anything reads it. ``sketch``:
        the min-hash keys of its concepts, when the caller computed them."""
        now = self.core.now()
        values = [getattr(trial, name) for name in TRIAL_VALUE_COLUMNS]
        values[_STATUS_AT] = trial.status.value
        text = search_text(trial.hypothesis, trial.notes)
        if concepts is None:
            concepts = stored_concepts(trial.hypothesis, trial.notes)
        depth, skip = link if link is not None else self.chain.link_after(conn, project, trial.parent_exp)
        row = (
            project.id,
            seq,
            *values,
            _json_text(trial.extra),
            now,
            now,
            text,
            exp_sort_key(trial.exp_id),
            concepts,
            depth,
            skip,
        )
        if buffer is not None:
            buffer.append(row)
        else:
            self.core.execute(conn, self.core.insert_sql, row)
        if named if named is not None else self.has_children(conn, project, trial.exp_id):  # stored trials named it
            self.chain.relink(conn, project, trial.exp_id)
        self.knobs.write(
            conn,
            cast(int, project.id),
            seq,
            trial.hypothesis,
            trial.extra,
            trial.parent_exp,
            roles=roles_of(project.settings),
        )
        if deferred is not None:
            deferred.append((text, cast(int, project.id), seq, concepts))
        else:
            if terms is not None:
                terms.append(text)
            else:
                self.search.remember_terms(conn, vocabulary((text,)))
            if sketch is not None:
                self.search.write_sketch_rows(conn, [(cast(int, project.id), key, seq) for key in sketch])
            else:
                self.search.write_sketches(conn, [(cast(int, project.id), seq, concepts)])
        stamp = iso_stamp(now)
        return trial.with_changes(seq=seq, created_at=stamp, updated_at=stamp)

    def new_trial_reads(
        self,
        conn: Connection,
        project: Project,
        exp_id: str,
        parent_exp: str,
        prior_keys: Sequence[int] | None,
    ) -> NewTrialReads:
        """What recording a new trial ``exp_id`` under ``parent_exp`` reads, every statement
        sent before any result is read (in a pipelined PostgreSQL write: one round trip, not
        three): whether stored trials name it as their parent, its chain link, and, with
        ``prior_keys`` (its sketch), ``similar_prior``'s shortlist."""
        named = self._children_cursor(conn, project, exp_id)
        link = self.chain.link_cursor(conn, project, parent_exp) if parent_exp else None
        prior = (
            None
            if prior_keys is None
            else self.search.prior_cursor(
                conn, cast(int, project.id), prior_keys, recent=similar.PRIOR_RECENT, per_band=similar.PRIOR_PER_BAND
            )
        )
        return NewTrialReads(
            named.fetchone() is not None,
            self.chain.fetch_link(parent_exp, link) if link is not None else (1, ""),
            None if prior is None else self.search.fetch_prior(prior),
        )

    def insert_rows(self, conn: Connection, rows: list[tuple[Any, ...]]) -> None:
        """Insert the rows :meth:`insert_trial` put in a ``buffer``, in order, as one
        prepared statement executed for each (in a pipelined PostgreSQL write, sent
        without waiting for each answer). On SQLite the search index's insert trigger
        stands aside and the rows are indexed in one statement at the end
        (:func:`~lineage.store.search.sqlite_bulk_index`, as an import does): through the
        trigger each row came in descending FTS rowid order, a segment flush per row."""
        if not rows:
            return
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            if self.sqlite:
                with sqlite_bulk_index(cursor):
                    cursor.executemany(self.core.insert_sql, rows)
            else:
                cursor.executemany(self.core.sql(self.core.insert_sql), rows)
        finally:
            cursor.close()

    def named_as_parent(
        self, conn: Connection, project: Project, exp_ids: Sequence[str], *, before_seq: int
    ) -> set[str]:
        """Which of ``exp_ids`` a trial stored before ``before_seq`` names as its parent."""
        found: set[str] = set()
        for first in range(0, len(exp_ids), 500):
            chunk = list(exp_ids[first : first + 500])
            # "+seq": keep the planner on the parent index; walking seq scanned every
            # earlier trial of the project (55 ms a batch at 10,000 trials, growing)
            rows = self.core.execute(
                conn,
                f"SELECT DISTINCT parent_exp FROM trials WHERE project_id = ? AND +seq < ? "
                f"AND parent_exp IN ({self.core.marks(chunk)})",
                (project.id, before_seq, *chunk),
            )
            found.update(row[0] for row in rows.fetchall())
        return found

    def write_terms(self, conn: Connection, texts: list[str]) -> None:
        """The vocabulary words of search texts collected by :meth:`insert_trial` (``terms``)."""
        if texts:
            self.search.remember_terms(conn, vocabulary(texts))

    def write_deferred(self, conn: Connection, deferred: list[tuple[str, int, int, str]]) -> None:
        """The search words and sketches of trials inserted with ``deferred``, at once."""
        if deferred:
            self.search.remember_terms(conn, vocabulary(text for text, _, _, _ in deferred))
            self.search.write_sketches(conn, [(pid, seq, concepts) for _, pid, seq, concepts in deferred])

    def update_trial(self, conn: Connection, project: Project, trial: Trial) -> Trial:
        now = utcnow()
        values = _trial_values(trial)
        values.pop("exp_id")
        values["search_text"] = search_text(trial.hypothesis, trial.notes)
        values["search_concepts"] = stored_concepts(trial.hypothesis, trial.notes)
        self.search.remember_terms(conn, vocabulary((values["search_text"],)))
        self.core.execute(conn, "DELETE FROM trial_sketch WHERE project_id = ? AND seq = ?", (project.id, trial.seq))
        self.search.write_sketches(conn, [(cast(int, project.id), cast(int, trial.seq), values["search_concepts"])])
        before = self.core.execute(
            conn, "SELECT parent_exp FROM trials WHERE project_id = ? AND exp_id = ?", (project.id, trial.exp_id)
        ).fetchone()
        conn.execute(
            update(trials)
            .where(trials.c.project_id == project.id, trials.c.exp_id == trial.exp_id)
            .values(**values, updated_at=now)
        )
        if before is not None and before[0] != trial.parent_exp:  # re-parented: its subtree's chains changed
            self.chain.relink(conn, project, trial.exp_id)
        self.knobs.write(
            conn,
            cast(int, project.id),
            cast(int, trial.seq),
            trial.hypothesis,
            trial.extra,
            trial.parent_exp,
            replace=True,
            roles=roles_of(project.settings),
        )
        self.repeats.write_trial(conn, cast(int, project.id), trial, replace=True)
        conn.execute(
            update(projects).where(projects.c.id == project.id).values(revision=projects.c.revision + 1, updated_at=now)
        )
        return trial.with_changes(updated_at=_iso(now))

    def trial(self, conn: Connection, project: Project, exp_id: str) -> Trial:
        """The trial ``exp_id`` names, stored or as shown (``exp_12``, see
        :meth:`resolve_exp_id`); :class:`NotFound` when none. Callers go on with the
        returned trial's ``exp_id``."""
        found = self.find_trial(conn, project, exp_id)
        if found is None:
            resolved = self.resolve_exp_id(conn, project, exp_id)
            found = None if resolved is None else self.find_trial(conn, project, resolved)
        if found is None:
            raise NotFound("trial", f"{project.slug}/{exp_id}", field="exp_id")
        return found

    def resolve_exp_id(self, conn: Connection, project: Project, shown: str) -> str | None:
        """The stored id a person's id means (:func:`lineage.exp_ids.shown_forms`): the
        first form that is a trial, else the one trial whose id is the same number
        (``1`` for ``001``: same ``exp_key``); None when none or several are."""
        forms = shown_forms(shown)
        if not forms or not forms[0]:
            return None
        rows = self.core.execute(
            conn,
            f"SELECT exp_id FROM trials WHERE project_id = ? AND exp_id IN ({self.core.marks(forms)})",
            (project.id, *forms),
        ).fetchall()
        stored = {row[0] for row in rows}
        for form in forms:
            if form in stored:
                return form
        same = self.core.execute(
            conn,
            "SELECT exp_id FROM trials WHERE project_id = ? AND exp_key = ? ORDER BY seq LIMIT 2",
            (project.id, exp_sort_key(forms[-1])),
        ).fetchall()
        return same[0][0] if len(same) == 1 else None

    def find_trial(self, conn: Connection, project: Project, exp_id: str) -> Trial | None:
        return self.core.trial_where(conn, "project_id = ? AND exp_id = ?", (project.id, exp_id))

    def projects_holding(self, conn: Connection, exp_id: str) -> list[str]:
        """Slugs of the projects that have a trial ``exp_id`` (for error messages)."""
        rows = conn.execute(
            select(projects.c.slug).join(trials, trials.c.project_id == projects.c.id).where(trials.c.exp_id == exp_id)
        ).all()
        return [r.slug for r in rows]

    def exp_ids(self, conn: Connection, project: Project) -> set[str]:
        return set(conn.scalars(select(trials.c.exp_id).where(trials.c.project_id == project.id)))

    def parents(self, conn: Connection, project: Project) -> dict[str, str]:
        rows = conn.execute(select(trials.c.exp_id, trials.c.parent_exp).where(trials.c.project_id == project.id)).all()
        return {r.exp_id: r.parent_exp for r in rows}

    # -- lineage queries ------------------------------------------------------------------

    def chain_rows(self, conn: Connection, project: Project, exp_id: str, *, brief: bool = False) -> dict[str, Trial]:
        """Every trial reachable from ``exp_id`` by parent pointers, in one recursive query.

        ``brief``: only what a chain line shows (id, parent, specialist, status, metric,
        delta, hypothesis); the other fields are left empty. Chains can be thousands of
        trials long, and the prompt renders every one of them.

        ``UNION`` (not ``UNION ALL``) makes the recursion stop on a cycle; the caller puts
        the rows in chain order (``lineage.service.walk_chain``). Each step must be one
        index look-up: SQLite's planner does that for a plain join, PostgreSQL's would
        hash the whole table per step, so there the step is a ``LATERAL ... LIMIT 1``.
        """
        if self.sqlite:
            step = """SELECT t.id, t.exp_id, t.parent_exp FROM chain c JOIN trials t
                  ON t.project_id = ? AND t.exp_id = c.parent_exp WHERE c.parent_exp <> ''"""
        else:
            step = """SELECT p.id, p.exp_id, p.parent_exp FROM chain c CROSS JOIN LATERAL (
                    SELECT t.id, t.exp_id, t.parent_exp FROM trials t
                    WHERE t.project_id = ? AND t.exp_id = c.parent_exp LIMIT 1) p
                  WHERE c.parent_exp <> ''"""
        sql = f"""WITH RECURSIVE chain(id, exp_id, parent_exp) AS (
                SELECT id, exp_id, parent_exp FROM trials WHERE project_id = ? AND exp_id = ?
                UNION
                {step})
            SELECT {_BRIEF_COLUMN_LIST if brief else _COLUMN_LIST} FROM trials WHERE id IN (SELECT id FROM chain)"""
        cursor = self.core.execute(conn, sql, (project.id, exp_id, project.id))
        return {trial.exp_id: trial for trial in map(trial_from_row, cursor.fetchall())}

    def chain_tail(self, conn: Connection, project: Project, exp_id: str, depth: int) -> dict[str, Trial]:
        """The trials of the ``depth`` newest links of the chain ending at ``exp_id`` (it
        included), by exp_id, ``extra`` without ``_git.patch``: what a loop's prompt shows
        of a chain that may be thousands of trials long, in ``depth`` index look-ups (the
        recursion stops at ``depth``, so a cycle cannot loop; ``lineage.chain.walk_chain``
        orders them). Steps as in :meth:`chain_rows`."""
        if self.sqlite:
            step = """SELECT t.id, t.exp_id, t.parent_exp, c.depth + 1 FROM chain c JOIN trials t
                  ON t.project_id = ? AND t.exp_id = c.parent_exp WHERE c.parent_exp <> '' AND c.depth < ?"""
        else:
            step = """SELECT p.id, p.exp_id, p.parent_exp, c.depth + 1 FROM chain c CROSS JOIN LATERAL (
                    SELECT t.id, t.exp_id, t.parent_exp FROM trials t
                    WHERE t.project_id = ? AND t.exp_id = c.parent_exp LIMIT 1) p
                  WHERE c.parent_exp <> '' AND c.depth < ?"""
        sql = f"""WITH RECURSIVE chain(id, exp_id, parent_exp, depth) AS (
                SELECT id, exp_id, parent_exp, 1 FROM trials WHERE project_id = ? AND exp_id = ?
                UNION
                {step})
            SELECT {self.core.lean_columns} FROM trials WHERE id IN (SELECT id FROM chain)"""
        cursor = self.core.execute(conn, sql, (project.id, exp_id, project.id, depth))
        return {trial.exp_id: trial for trial in map(trial_from_row, cursor.fetchall())}

    def has_children(self, conn: Connection, project: Project, exp_id: str) -> bool:
        """Whether a trial of the project names ``exp_id`` as its parent (one index look-up)."""
        return self._children_cursor(conn, project, exp_id).fetchone() is not None

    def _children_cursor(self, conn: Connection, project: Project, exp_id: str) -> Any:
        return self.core.execute(
            conn, "SELECT 1 FROM trials WHERE project_id = ? AND parent_exp = ? LIMIT 1", (project.id, exp_id)
        )

    def parents_cursor(self, conn: Connection, project: Project, exp_ids: Sequence[str]) -> Any:
        """Which of ``exp_ids`` stored trials name as their parent (:meth:`has_children` for
        several ids; PostgreSQL, a group's reads), sent; read by :meth:`fetch_column`."""
        return self.core.execute(
            conn,
            "SELECT DISTINCT parent_exp FROM trials WHERE project_id = ? AND parent_exp = ANY(?::text[])",
            (project.id, list(exp_ids)),
        )

    def links_cursor(self, conn: Connection, project: Project, exp_ids: Sequence[str]) -> Any:
        """The stored chain links ``(exp_id, chain_depth, chain_skip)`` of those of ``exp_ids``
        that are trials (:meth:`link_after` for several parents; PostgreSQL, a group's
        reads), sent; rows not read yet."""
        return self.core.execute(
            conn,
            "SELECT exp_id, chain_depth, chain_skip FROM trials WHERE project_id = ? AND exp_id = ANY(?::text[])",
            (project.id, list(exp_ids)),
        )

    @staticmethod
    def fetch_column(cursor: Any) -> set[Any]:
        return {row[0] for row in cursor.fetchall()}

    def trials_of(self, conn: Connection, project: Project, exp_ids: Iterable[str]) -> dict[str, Trial]:
        """The trials of ``exp_ids`` by exp_id (missing ones left out), ``extra`` without
        the patch text of ``_git`` (``lean_columns``): the chain lines of a loop's prompt."""
        wanted = sorted(set(exp_ids))
        if not wanted:
            return {}
        marks = ", ".join("?" for _ in wanted)
        found = self.core.trials_where(
            conn, f"project_id = ? AND exp_id IN ({marks})", (project.id, *wanted), lean=True
        )
        return {trial.exp_id: trial for trial in found}

    def top_kept(self, conn: Connection, project: Project, limit: int, *, lean: bool = False) -> list[Trial]:
        """Trials with status ``keep``, in fieldkit's leaderboard order, at most ``limit``.

        fieldkit sorts keeps by metric with a missing metric as +inf and, when higher is
        better, reverses the (stable) sort: missing metrics come first then. Ties keep
        insertion order either way.
        """
        if limit <= 0:
            return []
        base = "project_id = ? AND status = 'keep' AND core_metric IS"
        unscored = f"{base} NULL ORDER BY seq LIMIT ?"
        if project.lower_is_better:
            first = self.core.trials_where(
                conn, f"{base} NOT NULL ORDER BY core_metric ASC, seq LIMIT ?", (project.id, limit), lean=lean
            )
            if len(first) < limit:
                first += self.core.trials_where(conn, unscored, (project.id, limit - len(first)), lean=lean)
            return first
        first = self.core.trials_where(conn, unscored, (project.id, limit), lean=lean)
        if len(first) < limit:
            first += self.core.trials_where(
                conn,
                f"{base} NOT NULL ORDER BY core_metric DESC, seq LIMIT ?",
                (project.id, limit - len(first)),
                lean=lean,
            )
        return first

    def recent(self, conn: Connection, project: Project, limit: int, *, lean: bool = False) -> list[Trial]:
        """The last ``limit`` trials, oldest first (``lean``: ``extra`` without ``_git.patch``)."""
        if limit <= 0:
            return []
        newest_first = self.core.trials_where(
            conn, "project_id = ? ORDER BY seq DESC LIMIT ?", (project.id, limit), lean=lean
        )
        newest_first.reverse()
        return newest_first

    def children(self, conn: Connection, project: Project, exp_id: str) -> list[Trial]:
        return self.core.trials_where(conn, "project_id = ? AND parent_exp = ? ORDER BY seq", (project.id, exp_id))

    def count_trials(self, conn: Connection, project: Project) -> int:
        return conn.scalar(select(func.count()).select_from(trials).where(trials.c.project_id == project.id)) or 0

    # -- listing and streaming ------------------------------------------------------------

    def list_trials(
        self,
        conn: Connection,
        project: Project,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
        descending: bool = False,
        **filters: Any,
    ) -> list[Trial]:
        """Trials matching ``filters`` (see :meth:`_filter_sql`) in seq order, after a cursor."""
        where, params = self.core.filter_sql(project, **filters)
        if after_seq is not None:
            where += " AND seq < ?" if descending else " AND seq > ?"
            params.append(after_seq)
        where += " ORDER BY seq DESC" if descending else " ORDER BY seq"
        if limit is not None:
            where += " LIMIT ?"
            params.append(limit)
        return self.core.trials_where(conn, where, params)

    def stream_trials(self, conn: Connection, project: Project, *, batch: int = 2_000) -> Iterator[Trial]:
        """Every trial of the project in insertion order, ``batch`` rows in memory at a time."""
        sql = self.core.sql(f"SELECT {_COLUMN_LIST} FROM trials WHERE project_id = ? ORDER BY seq")
        raw = conn.connection.driver_connection
        # a named cursor is PostgreSQL's server-side cursor: rows arrive as they are read
        cursor = raw.cursor() if self.sqlite else raw.cursor(name="lineage_stream")  # type: ignore[union-attr]
        try:
            cursor.execute(sql, (project.id,))
            while rows := cursor.fetchmany(batch):
                yield from map(trial_from_row, rows)
        finally:
            cursor.close()

    def trials_select(self, project: Project):
        """The SELECT of a project's trials in order (for pandas.read_sql)."""
        return select(*_TRIAL_SELECT).where(trials.c.project_id == project.id).order_by(trials.c.seq)
