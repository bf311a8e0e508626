"""All SQL of the ledger, in one place, for SQLite and PostgreSQL.

The store reads and writes rows and knows how to do it fast (indexed look-ups, bulk
inserts through ``executemany`` on SQLite and ``COPY`` on PostgreSQL). It does not decide
rules: which trial is best, what a delta is and what may be written are ``lineage.domain``
and ``lineage.service``. Every method takes the connection of a transaction opened with
:meth:`Store.read` or :meth:`Store.write`, so a use-case composes several calls atomically.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from operator import attrgetter
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Mapping, Sequence

from sqlalchemy import Connection, Engine, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from lineage.db import WRITE_OPTION, is_sqlite
from lineage.domain import (
    CLIP_SCALE_COLUMNS,
    FIELDKIT_COLUMNS,
    BestPolicy,
    FailureLabel,
    Project,
    Trial,
    ordered_best,
)
from lineage.errors import Conflict, NotFound
from lineage.models import ProjectRow, TrialRow
from lineage.similar import search_text
from lineage.store_search import remember_terms, sqlite_bulk_index, trials_deleted, vocabulary

projects = ProjectRow.__table__
trials = TrialRow.__table__

#: Trial columns stored verbatim from the domain object, in insert order.
TRIAL_VALUE_COLUMNS: tuple[str, ...] = FIELDKIT_COLUMNS + CLIP_SCALE_COLUMNS
#: What a trial query selects: the Trial dataclass's field order, so rows map positionally.
TRIAL_COLUMNS: tuple[str, ...] = (*TRIAL_VALUE_COLUMNS, "extra", "seq", "created_at", "updated_at")
_TRIAL_SELECT = [trials.c[name] for name in TRIAL_COLUMNS]
_COLUMN_LIST = ", ".join(TRIAL_COLUMNS)
#: The columns a chain line of the prompt needs; the others are selected as empty values
#: so rows still map positionally onto Trial.
_BRIEF_COLUMNS = frozenset({"exp_id", "specialist", "parent_exp", "hypothesis", "status", "core_metric",
                            "delta_vs_best", "seq"})
_BRIEF_COLUMN_LIST = ", ".join(
    name if name in _BRIEF_COLUMNS
    else "'{}'" if name == "extra"
    else "NULL" if name in (*CLIP_SCALE_COLUMNS, "val_bpb", "train_s", "total_s", "created_at", "updated_at")
    else "''"
    for name in TRIAL_COLUMNS
)
_BULK_COLUMNS: tuple[str, ...] = ("project_id", "seq", *TRIAL_VALUE_COLUMNS, "extra", "created_at", "updated_at",
                                  "search_text")
#: Rows per executemany/COPY batch during imports.
BULK_BATCH = 5_000


_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
try:  # the C encoder json.dumps builds per call, built once (about 3x faster per row)
    from json.encoder import c_encode_basestring, c_make_encoder

    _C_ENCODE = c_make_encoder(
        None, _JSON_ENCODER.default, c_encode_basestring, None, ":", ",", False, False, True
    )
except (ImportError, TypeError):  # pragma: no cover - no C accelerator
    _C_ENCODE = None


def _json_text(value: Mapping[str, Any]) -> str:
    if not value:
        return "{}"
    value = value if type(value) is dict else dict(value)
    if _C_ENCODE is not None:
        return "".join(_C_ENCODE(value, 0))
    return _JSON_ENCODER.encode(value)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _iso(value: datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.isoformat()


_LABELS = {label.value: label for label in FailureLabel}
_STATUS_AT = TRIAL_VALUE_COLUMNS.index("status")
_EXTRA_AT = len(TRIAL_VALUE_COLUMNS)


def _stamp(value: datetime | str | None) -> str | None:
    """ISO 8601 from a driver value: PostgreSQL gives datetimes, SQLite the stored text."""
    if value is None:
        return None
    if isinstance(value, str):  # "YYYY-MM-DD HH:MM:SS.ffffff", always UTC
        return value.replace(" ", "T", 1) + "+00:00"
    return _iso(value)


def trial_from_row(row: Sequence[Any]) -> Trial:
    """A Trial from a row selected as ``TRIAL_COLUMNS`` (the Trial's own field order)."""
    values = list(row)
    values[_STATUS_AT] = _LABELS[values[_STATUS_AT]]
    extra = values[_EXTRA_AT]
    if isinstance(extra, str):
        values[_EXTRA_AT] = {} if extra == "{}" else json.loads(extra)
    elif not extra:
        values[_EXTRA_AT] = {}
    values[-2] = _stamp(values[-2])
    values[-1] = _stamp(values[-1])
    return Trial(*values)


_PROJECT_COLUMNS = (
    "id", "slug", "title", "metric_name", "lower_is_better", "best_policy", "prompt_template",
    "source_format", "settings", "revision", "next_seq", "created_at", "updated_at",
)
_PROJECT_SELECT = f"SELECT {', '.join(_PROJECT_COLUMNS)} FROM projects"


def _project_from_row(row: Sequence[Any]) -> Project:
    """A Project from a row selected as ``_PROJECT_COLUMNS``."""
    (id_, slug, title, metric_name, lower, policy, template, source, settings, revision, next_seq,
     created, updated) = row
    return Project(
        id=id_,
        slug=slug,
        title=title,
        metric_name=metric_name,
        lower_is_better=bool(lower),
        best_policy=BestPolicy(policy),
        prompt_template=template,
        source_format=source,
        settings=json.loads(settings) if isinstance(settings, str) else (settings or {}),
        revision=revision,
        trial_count=next_seq,
        created_at=_stamp(created),
        updated_at=_stamp(updated),
    )


def _trial_values(trial: Trial) -> dict[str, Any]:
    values = {name: getattr(trial, name) for name in TRIAL_VALUE_COLUMNS}
    values["status"] = trial.status.value
    values["extra"] = dict(trial.extra)
    return values


class Store:
    """SQL access for one database (one engine)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sqlite = is_sqlite(engine)
        self._sql_cache: dict[str, str] = {}
        placeholder = "?" if self.sqlite else "CAST(? AS jsonb)"
        columns = _BULK_COLUMNS
        marks = ["?"] * len(columns)
        marks[columns.index("extra")] = placeholder
        self._insert_sql = f"INSERT INTO trials ({', '.join(columns)}) VALUES ({', '.join(marks)})"

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: all or nothing, writers of one database queue on SQLite."""
        with self.engine.connect().execution_options(**{WRITE_OPTION: True}) as conn, conn.begin():
            yield conn

    # -- driver-level SQL for the hot paths -------------------------------------------------
    #
    # record_trial and the prompt run a handful of small indexed statements; building them
    # with SQLAlchemy's expression language costs more than running them. These go to the
    # driver's cursor inside the same transaction, written once with ``?`` placeholders.

    def _sql(self, sql: str) -> str:
        cached = self._sql_cache.get(sql)
        if cached is None:
            cached = self._sql_cache[sql] = sql if self.sqlite else sql.replace("?", "%s")
        return cached

    def _execute(self, conn: Connection, sql: str, params: Sequence[Any] = ()) -> Any:
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(self._sql(sql), params)
        return cursor

    def _trials_where(self, conn: Connection, where: str, params: Sequence[Any]) -> list[Trial]:
        cursor = self._execute(conn, f"SELECT {_COLUMN_LIST} FROM trials WHERE {where}", params)
        return [trial_from_row(row) for row in cursor.fetchall()]

    def _trial_where(self, conn: Connection, where: str, params: Sequence[Any]) -> Trial | None:
        found = self._trials_where(conn, where, params)
        return found[0] if found else None

    # -- projects -----------------------------------------------------------------------

    def insert_project(self, conn: Connection, project: Project) -> Project:
        now = utcnow()
        values = project.to_dict()
        for key in ("revision", "trial_count", "created_at", "updated_at"):
            values.pop(key, None)
        try:
            with conn.begin_nested():
                conn.execute(
                    insert(projects).values(
                        **values, next_seq=0, next_exp_number=0, revision=0, created_at=now, updated_at=now
                    )
                )
        except IntegrityError:
            raise Conflict(f"project {project.slug!r} already exists", field="slug") from None
        return self.project(conn, project.slug)

    def project(self, conn: Connection, slug: str) -> Project:
        row = self._execute(conn, f"{_PROJECT_SELECT} WHERE slug = ?", (slug,)).fetchone()
        if row is None:
            raise NotFound("project", slug, field="project")
        return _project_from_row(row)

    def projects(self, conn: Connection) -> list[Project]:
        return [_project_from_row(row) for row in self._execute(conn, f"{_PROJECT_SELECT} ORDER BY slug").fetchall()]

    def update_project(self, conn: Connection, project: Project, changes: dict[str, Any]) -> Project:
        if changes:
            values = dict(changes)
            if "best_policy" in values:
                values["best_policy"] = BestPolicy(values["best_policy"]).value
            conn.execute(
                update(projects)
                .where(projects.c.id == project.id)
                .values(**values, revision=projects.c.revision + 1, updated_at=utcnow())
            )
        return self.project(conn, project.slug)

    def locked_project(self, conn: Connection, slug: str) -> tuple[Project, int, int]:
        """The project, locked for this write transaction, with ``(next_seq, next_exp_number)``.

        PostgreSQL: ``SELECT ... FOR UPDATE`` serializes the project's writers until commit.
        SQLite: the transaction's ``BEGIN IMMEDIATE`` already serializes every writer.
        The counters read here stay valid until the transaction ends.
        """
        lock = "" if self.sqlite else " FOR UPDATE"
        row = self._execute(
            conn, f"SELECT {', '.join(_PROJECT_COLUMNS)}, next_exp_number FROM projects WHERE slug = ?{lock}", (slug,)
        ).fetchone()
        if row is None:
            raise NotFound("project", slug, field="project")
        return _project_from_row(row[:-1]), row[_PROJECT_COLUMNS.index("next_seq")], row[-1]

    def _now(self) -> Any:
        now = utcnow()
        return now.strftime("%Y-%m-%d %H:%M:%S.%f") if self.sqlite else now

    def advance_counters(self, conn: Connection, project: Project, *, rows: int, exp_number: int) -> None:
        """After a write: move ``next_seq`` by ``rows``, raise ``next_exp_number``, bump the revision."""
        larger = "MAX" if self.sqlite else "GREATEST"
        self._execute(
            conn,
            f"UPDATE projects SET next_seq = next_seq + ?, next_exp_number = {larger}(next_exp_number, ?), "
            "revision = revision + 1, updated_at = ? WHERE id = ?",
            (rows, exp_number, self._now(), project.id),
        )

    # -- trials: single rows --------------------------------------------------------------

    def insert_trial(self, conn: Connection, project: Project, trial: Trial, *, seq: int) -> Trial:
        now = self._now()
        values = [getattr(trial, name) for name in TRIAL_VALUE_COLUMNS]
        values[_STATUS_AT] = trial.status.value
        text = search_text(trial.hypothesis, trial.notes)
        self._execute(conn, self._insert_sql, (project.id, seq, *values, _json_text(trial.extra), now, now, text))
        remember_terms(self, conn, vocabulary((text,)))
        stamp = _stamp(now)
        return trial.with_changes(seq=seq, created_at=stamp, updated_at=stamp)

    def update_trial(self, conn: Connection, project: Project, trial: Trial) -> Trial:
        now = utcnow()
        values = _trial_values(trial)
        values.pop("exp_id")
        values["search_text"] = search_text(trial.hypothesis, trial.notes)
        remember_terms(self, conn, vocabulary((values["search_text"],)))
        conn.execute(
            update(trials)
            .where(trials.c.project_id == project.id, trials.c.exp_id == trial.exp_id)
            .values(**values, updated_at=now)
        )
        conn.execute(
            update(projects).where(projects.c.id == project.id).values(revision=projects.c.revision + 1, updated_at=now)
        )
        return trial.with_changes(updated_at=_iso(now))

    def trial(self, conn: Connection, project: Project, exp_id: str) -> Trial:
        found = self.find_trial(conn, project, exp_id)
        if found is None:
            raise NotFound("trial", f"{project.slug}/{exp_id}", field="exp_id")
        return found

    def find_trial(self, conn: Connection, project: Project, exp_id: str) -> Trial | None:
        return self._trial_where(conn, "project_id = ? AND exp_id = ?", (project.id, exp_id))

    def projects_holding(self, conn: Connection, exp_id: str) -> list[str]:
        """Slugs of the projects that have a trial ``exp_id`` (for error messages)."""
        rows = conn.execute(
            select(projects.c.slug).join(trials, trials.c.project_id == projects.c.id).where(trials.c.exp_id == exp_id)
        ).all()
        return [r.slug for r in rows]

    def exp_ids(self, conn: Connection, project: Project) -> set[str]:
        return set(conn.scalars(select(trials.c.exp_id).where(trials.c.project_id == project.id)))

    def parents(self, conn: Connection, project: Project) -> dict[str, str]:
        rows = conn.execute(
            select(trials.c.exp_id, trials.c.parent_exp).where(trials.c.project_id == project.id)
        ).all()
        return {r.exp_id: r.parent_exp for r in rows}

    # -- lineage queries ------------------------------------------------------------------

    def best_scored(self, conn: Connection, project: Project, *, before_seq: int | None = None) -> Trial | None:
        """The best scored trial under the project's best policy (ties to the lowest seq).

        Indexed either way, so the cost does not grow with the project: the ``kept``
        policy reads one index range per eligible status (``project_id, status,
        core_metric, seq``); the ``fieldkit`` policy, eligible for all but one status,
        walks ``project_id, core_metric, seq`` and skips the excluded status.
        """
        order = "core_metric ASC" if project.lower_is_better else "core_metric DESC"
        where = "project_id = ? AND core_metric IS NOT NULL"
        params: list[Any] = [project.id]
        if before_seq is not None:
            # "+seq": keep the planner on the metric index (walking seq would scan the project)
            where += " AND +seq < ?"
            params.append(before_seq)
        eligible = project.best_policy.eligible_statuses()
        if project.best_policy is BestPolicy.FIELDKIT:
            excluded = [label.value for label in FailureLabel if label.value not in eligible]
            marks = ", ".join("?" * len(excluded))
            return self._trial_where(
                conn, f"{where} AND status NOT IN ({marks}) ORDER BY {order}, seq LIMIT 1", (*params, *excluded)
            )
        # one round trip: each status's best from its own index range, glued together
        per_status = f"SELECT * FROM (SELECT {_COLUMN_LIST} FROM trials WHERE {where} AND status = ? ORDER BY {order}, seq LIMIT 1) AS s"
        statuses = sorted(eligible)
        sql = " UNION ALL ".join(f"{per_status}{i}" for i in range(len(statuses)))
        cursor = self._execute(conn, sql, [value for status in statuses for value in (*params, status)])
        candidates = [trial_from_row(row) for row in cursor.fetchall()]
        return ordered_best(candidates, lower_is_better=project.lower_is_better)

    def first_trial(self, conn: Connection, project: Project) -> Trial | None:
        return self._trial_where(conn, "project_id = ? ORDER BY seq LIMIT 1", (project.id,))

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
        cursor = self._execute(conn, sql, (project.id, exp_id, project.id))
        return {trial.exp_id: trial for trial in map(trial_from_row, cursor.fetchall())}

    def top_kept(self, conn: Connection, project: Project, limit: int) -> list[Trial]:
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
            first = self._trials_where(conn, f"{base} NOT NULL ORDER BY core_metric ASC, seq LIMIT ?", (project.id, limit))
            if len(first) < limit:
                first += self._trials_where(conn, unscored, (project.id, limit - len(first)))
            return first
        first = self._trials_where(conn, unscored, (project.id, limit))
        if len(first) < limit:
            first += self._trials_where(
                conn, f"{base} NOT NULL ORDER BY core_metric DESC, seq LIMIT ?", (project.id, limit - len(first))
            )
        return first

    def recent(self, conn: Connection, project: Project, limit: int) -> list[Trial]:
        """The last ``limit`` trials, oldest first."""
        if limit <= 0:
            return []
        newest_first = self._trials_where(conn, "project_id = ? ORDER BY seq DESC LIMIT ?", (project.id, limit))
        newest_first.reverse()
        return newest_first

    def children(self, conn: Connection, project: Project, exp_id: str) -> list[Trial]:
        return self._trials_where(conn, "project_id = ? AND parent_exp = ? ORDER BY seq", (project.id, exp_id))

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
        where, params = self._filter_sql(project, **filters)
        if after_seq is not None:
            where += " AND seq < ?" if descending else " AND seq > ?"
            params.append(after_seq)
        where += " ORDER BY seq DESC" if descending else " ORDER BY seq"
        if limit is not None:
            where += " LIMIT ?"
            params.append(limit)
        return self._trials_where(conn, where, params)

    def stream_trials(self, conn: Connection, project: Project, *, batch: int = 2_000) -> Iterator[Trial]:
        """Every trial of the project in insertion order, ``batch`` rows in memory at a time."""
        sql = self._sql(f"SELECT {_COLUMN_LIST} FROM trials WHERE project_id = ? ORDER BY seq")
        raw = conn.connection.driver_connection
        # a named cursor is PostgreSQL's server-side cursor: rows arrive as they are read
        cursor = raw.cursor() if self.sqlite else raw.cursor(name="lineage_stream")  # type: ignore[union-attr]
        try:
            cursor.execute(sql, (project.id,))
            while rows := cursor.fetchmany(batch):
                yield from map(trial_from_row, rows)
        finally:
            cursor.close()

    def trials_select(self, project: Project):  # type: ignore[no-untyped-def]
        """The SELECT of a project's trials in order (for pandas.read_sql)."""
        return select(*_TRIAL_SELECT).where(trials.c.project_id == project.id).order_by(trials.c.seq)

    # -- bulk insert ----------------------------------------------------------------------

    def bulk_insert(self, conn: Connection, project: Project, rows: Iterable[Trial], *, first_seq: int) -> int:
        """Insert ``rows`` (already validated) with consecutive seqs from ``first_seq``.

        Batches go through the driver directly: ``executemany`` on SQLite, ``COPY`` on
        PostgreSQL; a list of dicts through SQLAlchemy Core is several times slower.
        """
        now = utcnow()
        stamp = now.strftime("%Y-%m-%d %H:%M:%S.%f") if self.sqlite else now
        writer = self._sqlite_batches if self.sqlite else self._copy_batches
        count = 0

        values_of = attrgetter(*TRIAL_VALUE_COLUMNS)
        texts: list[str] = []  # for the search vocabulary (lineage.store_search)

        def tuples() -> Iterator[tuple[Any, ...]]:
            nonlocal count
            for offset, trial in enumerate(rows):
                count += 1
                values = list(values_of(trial))
                values[_STATUS_AT] = trial.status.value
                texts.append(text := search_text(trial.hypothesis, trial.notes))
                yield (project.id, first_seq + offset, *values, _json_text(trial.extra), stamp, stamp, text)

        writer(conn, tuples())
        remember_terms(self, conn, vocabulary(texts))
        if not self.sqlite and count >= 10_000:
            # fresh statistics, or PostgreSQL plans the next reads as if the table were empty
            conn.exec_driver_sql("ANALYZE trials")
        return count

    def _sqlite_batches(self, conn: Connection, tuples: Iterator[tuple[Any, ...]]) -> None:
        # Rows go to a per-connection TEMP staging table first, then into trials with one
        # INSERT ... SELECT per batch, so the triggers on trials (lineage.store_search)
        # run in one statement per batch instead of one per row: with the search index's
        # insert trigger standing aside (sqlite_bulk_index), a direct executemany still
        # took 3.0 s for 100,000 rows against 1.9 s staged (bench/autoresearch.py rows).
        columns = ", ".join(_BULK_COLUMNS)
        staging = "temp.lineage_bulk_trials"
        stage = f"INSERT INTO {staging} ({columns}) VALUES ({', '.join('?' * len(_BULK_COLUMNS))})"
        # ORDER BY rowid: trials.id grows with seq (lineage.store_search relies on it)
        move = f"INSERT INTO trials ({columns}) SELECT {columns} FROM {staging} ORDER BY rowid"
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            # untyped columns: values reach trials as given, and trials' affinities apply
            cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS lineage_bulk_trials ({columns})")
            cursor.execute(f"DELETE FROM {staging}")

            def flush(batch: list[tuple[Any, ...]]) -> None:
                cursor.executemany(stage, batch)
                cursor.execute(move)
                cursor.execute(f"DELETE FROM {staging}")
                batch.clear()

            batch: list[tuple[Any, ...]] = []
            with sqlite_bulk_index(cursor):  # the FTS5 index in one statement at the end
                for row in tuples:
                    batch.append(row)
                    if len(batch) >= BULK_BATCH:
                        flush(batch)
                if batch:
                    flush(batch)
        finally:
            cursor.close()

    def _copy_batches(self, conn: Connection, tuples: Iterator[tuple[Any, ...]]) -> None:
        raw = conn.connection.driver_connection
        with raw.cursor() as cursor:  # type: ignore[union-attr]
            with cursor.copy(f"COPY trials ({', '.join(_BULK_COLUMNS)}) FROM STDIN") as copy:
                for row in tuples:
                    copy.write_row(row)

    # -- maintenance ----------------------------------------------------------------------

    def backup_sqlite(self, target_path: str) -> None:
        """Online backup of a SQLite database (consistent while writers run)."""
        import sqlite3

        with self.engine.connect() as conn:
            source = conn.connection.driver_connection
            destination = sqlite3.connect(target_path)
            try:
                source.backup(destination)  # type: ignore[union-attr]
            finally:
                destination.close()


    # -- reads for the web pages ----------------------------------------------------------
    #
    # Each read is an index range, an index-only aggregate or a LIMITed walk, so a page of
    # a 100,000-trial project costs about what a page of a small one does.

    def _in(self, values: Sequence[Any]) -> str:
        return ", ".join("?" * len(values))

    def status_counts(self, conn: Connection, project: Project) -> dict[str, int]:
        """Trials per status (an index-only scan of ``project_id, status, ...``)."""
        cursor = self._execute(conn, "SELECT status, COUNT(*) FROM trials WHERE project_id = ? GROUP BY status", (project.id,))
        return {status: count for status, count in cursor.fetchall()}

    def _eligible_sql(self, project: Project) -> tuple[str, list[str]]:
        """``status IN (...)`` or ``status NOT IN (...)``, whichever lists fewer labels."""
        eligible = sorted(project.best_policy.eligible_statuses())
        excluded = sorted(label.value for label in FailureLabel if label.value not in eligible)
        if len(eligible) <= len(excluded):
            return f"status IN ({self._in(eligible)})", eligible
        return f"status NOT IN ({self._in(excluded)})", excluded

    def best_per_bin(self, conn: Connection, project: Project, *, width: int) -> list[tuple[int, float]]:
        """``(bin, metric)``: the best scored eligible metric of each bin of ``width``
        consecutive seqs, bins ascending; bins without such a trial are absent. The
        running best of the project is the running min (or max) of these."""
        best = "MIN" if project.lower_is_better else "MAX"
        where, labels = self._eligible_sql(project)
        cursor = self._execute(
            conn,
            f"SELECT seq / ?, {best}(core_metric) FROM trials WHERE project_id = ? AND core_metric IS NOT NULL "
            f"AND {where} GROUP BY 1 ORDER BY 1",
            (max(1, int(width)), project.id, *labels),
        )
        return [(int(b), float(m)) for b, m in cursor.fetchall()]

    def metric_window(
        self, conn: Connection, project: Project, *, before_seq: int | None, limit: int
    ) -> list[tuple[int, str, str, float | None, str, float | None]]:
        """The last ``limit`` trials before ``before_seq`` (of all, when None), oldest first,
        as light rows ``(seq, exp_id, status, core_metric, specialist, delta_vs_best)``."""
        where, params = "project_id = ?", [project.id]
        if before_seq is not None:
            where += " AND seq < ?"
            params.append(before_seq)
        cursor = self._execute(
            conn,
            f"SELECT seq, exp_id, status, core_metric, specialist, delta_vs_best FROM trials "
            f"WHERE {where} ORDER BY seq DESC LIMIT ?",
            (*params, limit),
        )
        rows = cursor.fetchall()
        rows.reverse()
        return [tuple(row) for row in rows]  # type: ignore[misc]

    def trials_by_ids(self, conn: Connection, project: Project, exp_ids: Iterable[str]) -> dict[str, Trial]:
        ids = list(dict.fromkeys(exp_ids))
        found: dict[str, Trial] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            for trial in self._trials_where(conn, f"project_id = ? AND exp_id IN ({self._in(chunk)})", (project.id, *chunk)):
                found[trial.exp_id] = trial
        return found

    def neighbours(self, conn: Connection, project: Project, seq: int) -> tuple[str | None, str | None]:
        """The exp_ids of the trials just before and just after ``seq`` (insertion order)."""
        before = self._execute(
            conn, "SELECT exp_id FROM trials WHERE project_id = ? AND seq < ? ORDER BY seq DESC LIMIT 1", (project.id, seq)
        ).fetchone()
        after = self._execute(
            conn, "SELECT exp_id FROM trials WHERE project_id = ? AND seq > ? ORDER BY seq LIMIT 1", (project.id, seq)
        ).fetchone()
        return (before[0] if before else None, after[0] if after else None)

    def children_window(
        self, conn: Connection, project: Project, parents: Sequence[str], *, limit: int, offset: int = 0
    ) -> dict[str, list[Trial]]:
        """The first ``limit`` children (after ``offset``) of each parent, in seq order.

        ``""`` as a parent means the top-level trials (no parent). SQLite runs one indexed
        query per parent (in-process, cheap); PostgreSQL one ``LATERAL ... LIMIT`` query.
        """
        out: dict[str, list[Trial]] = {parent: [] for parent in parents}
        if not parents or limit <= 0:
            return out
        if self.sqlite:
            # "+seq": without it SQLite's planner walks the whole (project_id, seq) index
            # for the ORDER BY instead of looking the parent up.
            sql = "project_id = ? AND parent_exp = ? ORDER BY +seq LIMIT ? OFFSET ?"
            for parent in out:
                out[parent] = self._trials_where(conn, sql, (project.id, parent, limit, offset))
            return out
        columns = ", ".join(f"t.{name}" for name in TRIAL_COLUMNS)
        cursor = self._execute(
            conn,
            f"""SELECT p.parent, {columns} FROM unnest(CAST(? AS text[])) AS p(parent)
                CROSS JOIN LATERAL (SELECT {_COLUMN_LIST} FROM trials WHERE project_id = ? AND parent_exp = p.parent
                                    ORDER BY seq LIMIT ? OFFSET ?) t""",
            (list(out), project.id, limit, offset),
        )
        for row in cursor.fetchall():
            out[row[0]].append(trial_from_row(row[1:]))
        return out

    def child_counts(self, conn: Connection, project: Project, parents: Iterable[str]) -> dict[str, int]:
        """How many children each of ``parents`` has (absent: none)."""
        ids = list(dict.fromkeys(parents))
        counts: dict[str, int] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            cursor = self._execute(
                conn,
                f"SELECT parent_exp, COUNT(*) FROM trials WHERE project_id = ? AND parent_exp IN ({self._in(chunk)}) "
                "GROUP BY parent_exp",
                (project.id, *chunk),
            )
            counts.update({parent: count for parent, count in cursor.fetchall()})
        return counts

    def orphans(self, conn: Connection, project: Project, *, limit: int) -> list[Trial]:
        """Trials whose ``parent_exp`` names no trial of the project (roots of their own
        subtrees in the lineage tree). One index look-up per trial: callers bound it."""
        return self._trials_where(
            conn,
            "project_id = ? AND parent_exp <> '' AND NOT EXISTS (SELECT 1 FROM trials p "
            "WHERE p.project_id = trials.project_id AND p.exp_id = trials.parent_exp) ORDER BY seq LIMIT ?",
            (project.id, limit),
        )

    @staticmethod
    def _filter_sql(
        project: Project,
        *,
        status: Sequence[str] | None = None,
        specialist: str | None = None,
        domain: str | None = None,
        parent: str | None = None,
        metric_min: float | None = None,
        metric_max: float | None = None,
        text_query: str | None = None,
        created_after: Any = None,
        created_before: Any = None,
        timestamp_from: str | None = None,
        timestamp_to: str | None = None,
    ) -> tuple[str, list[Any]]:
        """The WHERE clause (``?`` placeholders) of the trials table's filters.

        ``created_after``/``created_before``: bounds (inclusive, exclusive) on the time the
        ledger stored the trial, in the driver's form (:meth:`db_time`).
        ``timestamp_from``/``timestamp_to``: bounds (inclusive, exclusive) on the trial's own
        ``timestamp`` text, compared as text (ISO 8601 stamps in one format sort by time).
        """
        where, params = ["project_id = ?"], [project.id]
        for clause, bound in (("created_at >= ?", created_after), ("created_at < ?", created_before),
                              ("timestamp >= ?", timestamp_from), ("timestamp < ?", timestamp_to)):
            if bound is not None:
                where.append(clause)
                params.append(bound)
        if status:
            where.append(f"status IN ({', '.join('?' * len(status))})")
            params.extend(status)
        for column, value in (("specialist", specialist), ("domain", domain), ("parent_exp", parent)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if metric_min is not None:
            where.append("core_metric >= ?")
            params.append(metric_min)
        if metric_max is not None:
            where.append("core_metric <= ?")
            params.append(metric_max)
        if text_query:
            escaped = text_query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            pattern = f"%{escaped}%"
            where.append(
                "(LOWER(hypothesis) LIKE ? ESCAPE '\\' OR LOWER(notes) LIKE ? ESCAPE '\\' "
                "OR LOWER(exp_id) LIKE ? ESCAPE '\\')"
            )
            params.extend([pattern, pattern, pattern])
        return " AND ".join(where), params

    def page_trials(
        self,
        conn: Connection,
        project: Project,
        *,
        sort: str = "seq",
        descending: bool = False,
        after: Sequence[Any] | None = None,
        limit: int = 50,
        **filters: Any,
    ) -> list[Trial]:
        """One page of filtered trials in ``sort`` order, after the keyset ``after``.

        ``sort``: ``seq`` (keyset ``(seq,)``), ``exp_id`` (``(exp_id,)``) or ``metric``
        (``(phase, core_metric, seq)``: phase 0 walks the scored trials in metric order
        on the ``project_id, core_metric, seq`` index, phase 1 the unscored ones by seq,
        so trials without a metric come last in both directions).
        """
        where, params = self._filter_sql(project, **filters)
        direction, cmp = ("DESC", "<") if descending else ("ASC", ">")
        if sort == "seq":
            if after is not None:
                where += f" AND seq {cmp} ?"
                params.append(after[0])
            return self._trials_where(conn, f"{where} ORDER BY seq {direction} LIMIT ?", (*params, limit))
        if sort == "exp_id":
            if after is not None:
                where += f" AND exp_id {cmp} ?"
                params.append(after[0])
            return self._trials_where(conn, f"{where} ORDER BY exp_id {direction} LIMIT ?", (*params, limit))
        if sort != "metric":
            raise ValueError(f"unknown sort {sort!r}")
        phase = after[0] if after is not None else 0
        found: list[Trial] = []
        if phase == 0:
            scored, scored_params = f"{where} AND core_metric IS NOT NULL", list(params)
            if after is not None:
                scored += f" AND (core_metric {cmp} ? OR (core_metric = ? AND seq {cmp} ?))"
                scored_params += [after[1], after[1], after[2]]
            found = self._trials_where(
                conn, f"{scored} ORDER BY core_metric {direction}, seq {direction} LIMIT ?", (*scored_params, limit)
            )
        if len(found) < limit:
            unscored, unscored_params = f"{where} AND core_metric IS NULL", list(params)
            if phase == 1 and after is not None:
                unscored += f" AND seq {cmp} ?"
                unscored_params.append(after[2])
            found += self._trials_where(
                conn, f"{unscored} ORDER BY seq {direction} LIMIT ?", (*unscored_params, limit - len(found))
            )
        return found

    def count_matching(self, conn: Connection, project: Project, **filters: Any) -> int:
        where, params = self._filter_sql(project, **filters)
        return int(self._execute(conn, f"SELECT COUNT(*) FROM trials WHERE {where}", params).fetchone()[0])

    def calibration_rows(
        self, conn: Connection, project: Project, *, limit: int
    ) -> list[tuple[str, str, str, float | None, str]]:
        """The last ``limit`` trials that state an expected delta, newest first, as
        ``(exp_id, specialist, expected_delta, delta_vs_best, status)``."""
        cursor = self._execute(
            conn,
            "SELECT exp_id, specialist, expected_delta, delta_vs_best, status FROM trials "
            "WHERE project_id = ? AND expected_delta <> '' ORDER BY seq DESC LIMIT ?",
            (project.id, limit),
        )
        return [tuple(row) for row in cursor.fetchall()]  # type: ignore[misc]


    # -- results-file loops ---------------------------------------------------------------
    #
    # What lineage.loops (autoresearch-style results files: import, watch, record, plot)
    # needs beyond the reads above: the next free number, the branch tip, a pass that
    # refreshes delta_vs_best after a row was rewritten in place, and the plot's points.

    def next_exp_number(self, conn: Connection, project: Project) -> int:
        """One more than the largest all-digit exp_id (the next number ``record`` gives)."""
        row = self._execute(conn, "SELECT next_exp_number FROM projects WHERE id = ?", (project.id,)).fetchone()
        return int(row[0]) if row else 0

    def last_with_status(self, conn: Connection, project: Project, statuses: Sequence[str]) -> Trial | None:
        """The latest trial (by seq) whose status is one of ``statuses``."""
        return self._trial_where(
            conn, f"project_id = ? AND status IN ({self._in(statuses)}) ORDER BY seq DESC LIMIT 1",
            (project.id, *statuses),
        )

    def metric_rows_from(
        self, conn: Connection, project: Project, seq: int
    ) -> list[tuple[str, int, str, float | None, float | None]]:
        """``(exp_id, seq, status, core_metric, delta_vs_best)`` of the trials from ``seq`` on."""
        cursor = self._execute(
            conn,
            "SELECT exp_id, seq, status, core_metric, delta_vs_best FROM trials WHERE project_id = ? AND seq >= ? "
            "ORDER BY seq",
            (project.id, seq),
        )
        return [tuple(row) for row in cursor.fetchall()]  # type: ignore[misc]

    def set_deltas(self, conn: Connection, project: Project, deltas: Sequence[tuple[float | None, str]]) -> None:
        """Store ``(delta_vs_best, exp_id)`` pairs and bump the project's revision."""
        if not deltas:
            return
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.executemany(
                self._sql("UPDATE trials SET delta_vs_best = ? WHERE project_id = ? AND exp_id = ?"),
                [(delta, project.id, exp_id) for delta, exp_id in deltas],
            )
        finally:
            cursor.close()
        self.advance_counters(conn, project, rows=0, exp_number=0)

    def plot_rows(self, conn: Connection, project: Project) -> list[tuple[int, str, str, float | None, str]]:
        """``(seq, exp_id, status, core_metric, hypothesis)`` of every trial, in seq order."""
        cursor = self._execute(
            conn,
            "SELECT seq, exp_id, status, core_metric, hypothesis FROM trials WHERE project_id = ? ORDER BY seq",
            (project.id,),
        )
        return [tuple(row) for row in cursor.fetchall()]  # type: ignore[misc]

    # -- tokens / telemetry / idempotency -------------------------------------------------
    #
    # What the HTTP API adds: bearer tokens (lineage.auth), idempotency keys of trial
    # creations and telemetry batches, and the telemetry points of trials
    # (lineage.telemetry). Driver-level SQL like the hot paths above.

    def db_time(self, value: datetime) -> Any:
        """``value`` in the form the driver compares with stored times (UTC text on SQLite)."""
        value = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f") if self.sqlite else value

    def project_revision(self, conn: Connection, slug: str) -> int:
        """The project's revision alone (one indexed look-up: what an ETag check costs)."""
        row = self._execute(conn, "SELECT revision FROM projects WHERE slug = ?", (slug,)).fetchone()
        if row is None:
            raise NotFound("project", slug, field="project")
        return int(row[0])

    def project_counters(self, conn: Connection, project: Project) -> tuple[int, int]:
        """``(next_seq, next_exp_number)`` of the project as this transaction sees them."""
        row = self._execute(conn, "SELECT next_seq, next_exp_number FROM projects WHERE id = ?", (project.id,)).fetchone()
        if row is None:
            raise NotFound("project", project.slug, field="project")
        return int(row[0]), int(row[1])

    def delete_project(self, conn: Connection, project: Project) -> None:
        """Delete the project; its trials, their telemetry and its idempotency keys go with it
        (``ON DELETE CASCADE`` foreign keys)."""
        trial_count = self._execute(conn, "SELECT count(*) FROM trials WHERE project_id = ?", (project.id,)).fetchone()[0]
        self._execute(conn, "DELETE FROM projects WHERE id = ?", (project.id,))
        trials_deleted(self, conn, trial_count)

    # tokens

    _TOKEN_COLUMNS = "id, name, role, token_hash, created_at, last_used_at, revoked_at"

    def _token_row(self, row: Sequence[Any] | None) -> tuple[Any, ...] | None:
        if row is None:
            return None
        id_, name, role, token_hash, created, used, revoked = row
        return (id_, name, role, token_hash, _stamp(created), _stamp(used), _stamp(revoked))

    def insert_token(self, conn: Connection, *, name: str, role: str, token_hash: str) -> tuple[Any, ...]:
        """Store a token; a revoked token of the same name gives its name up, an active one
        is a :class:`Conflict`. Returns the row (see :meth:`token_by_hash`)."""
        row = self._execute(conn, "SELECT revoked_at FROM api_tokens WHERE name = ?", (name,)).fetchone()
        if row is not None:
            if row[0] is None:
                raise Conflict(f"a token named {name!r} already exists; revoke it first or choose another name",
                               field="name")
            self._execute(conn, "DELETE FROM api_tokens WHERE name = ?", (name,))
        self._execute(
            conn, "INSERT INTO api_tokens (name, role, token_hash, created_at) VALUES (?, ?, ?, ?)",
            (name, role, token_hash, self._now()),
        )
        return self.token_by_hash(conn, token_hash)  # type: ignore[return-value]

    def token_by_hash(self, conn: Connection | None, token_hash: str) -> tuple[Any, ...] | None:
        """``(id, name, role, token_hash, created_at, last_used_at, revoked_at)`` or None.
        ``conn=None``: one statement on its own (:meth:`peek`)."""
        sql = f"SELECT {self._TOKEN_COLUMNS} FROM api_tokens WHERE token_hash = ?"
        row = self.peek(sql, (token_hash,)) if conn is None else self._execute(conn, sql, (token_hash,)).fetchone()
        return self._token_row(row)

    def peek(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first row of one read statement run on its own, outside a transaction of
        ours: SQLite runs it in autocommit, PostgreSQL in its own transaction (ended when
        the pool takes the connection back). For the per-request checks of the API, where
        a BEGIN/COMMIT pair through SQLAlchemy costs more than the indexed look-up."""
        raw = self.engine.raw_connection()
        try:
            cursor = raw.cursor()
            try:
                cursor.execute(self._sql(sql), params)
                return cursor.fetchone()
            finally:
                cursor.close()
        finally:
            raw.close()

    def tokens(self, conn: Connection) -> list[tuple[Any, ...]]:
        rows = self._execute(conn, f"SELECT {self._TOKEN_COLUMNS} FROM api_tokens ORDER BY name").fetchall()
        return [self._token_row(row) for row in rows]  # type: ignore[misc]

    def revoke_token(self, conn: Connection, name: str) -> None:
        cursor = self._execute(
            conn, "UPDATE api_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL", (self._now(), name)
        )
        if cursor.rowcount == 0:
            row = self._execute(conn, "SELECT 1 FROM api_tokens WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise NotFound("token", name, field="name")

    def touch_token(self, token_id: int, *, not_since: datetime) -> bool:
        """Record a use of the token, unless one was recorded after ``not_since``.

        Best effort, and it never waits for a lock: on SQLite, while another writer holds
        the database the stamp is skipped (False; the next use records it), so a read
        with a token never queues behind an import. On PostgreSQL it is its own short
        transaction on the token's row.
        """
        sql = "UPDATE api_tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)"
        params = (self._now(), token_id, self.db_time(not_since))
        if not self.sqlite:
            with self.write() as conn:
                self._execute(conn, sql, params)
            return True
        import sqlite3

        from lineage.db import SQLITE_BUSY_TIMEOUT_MS

        raw = self.engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute("PRAGMA busy_timeout = 0")
            try:
                cursor.execute(sql, params)  # autocommit: the connection has no open transaction
                return True
            except sqlite3.OperationalError:  # "database is locked": someone else is writing
                return False
            finally:
                cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
                cursor.close()
        finally:
            raw.close()

    def active_token_exists(self, conn: Connection | None = None) -> bool:
        """Whether an unrevoked token exists (``conn=None``: :meth:`peek`)."""
        sql = "SELECT 1 FROM api_tokens WHERE revoked_at IS NULL LIMIT 1"
        return (self.peek(sql) if conn is None else self._execute(conn, sql).fetchone()) is not None

    # idempotency keys

    def find_key(self, conn: Connection, project: Project, scope: str, key: str) -> tuple[str, str, dict[str, Any]] | None:
        """``(exp_id, body_hash, result)`` stored for ``key``, or None."""
        row = self._execute(
            conn, "SELECT exp_id, body_hash, result FROM idempotency_keys WHERE project_id = ? AND scope = ? AND key = ?",
            (project.id, scope, key),
        ).fetchone()
        if row is None:
            return None
        result = row[2]
        if isinstance(result, str):
            result = json.loads(result)
        return row[0], row[1], dict(result or {})

    def claim_key(
        self, conn: Connection, project: Project, scope: str, key: str, *, exp_id: str, body_hash: str,
        result: Mapping[str, Any] | None = None,
    ) -> bool:
        """Store ``key``; False when it is already stored (then nothing changes).

        On PostgreSQL a concurrent transaction holding the same key makes this wait for
        it to end, so exactly one of two racing writers claims the key.
        """
        marks = "?, ?, ?, ?, ?, ?, ?" if self.sqlite else "?, ?, ?, ?, ?, CAST(? AS jsonb), ?"
        cursor = self._execute(
            conn,
            f"INSERT INTO idempotency_keys (project_id, scope, key, exp_id, body_hash, result, created_at) "
            f"VALUES ({marks}) ON CONFLICT (project_id, scope, key) DO NOTHING",
            (project.id, scope, key, exp_id, body_hash, _json_text(result or {}), self._now()),
        )
        return cursor.rowcount == 1

    def set_key_result(self, conn: Connection, project: Project, scope: str, key: str, result: Mapping[str, Any]) -> None:
        mark = "?" if self.sqlite else "CAST(? AS jsonb)"
        self._execute(
            conn, f"UPDATE idempotency_keys SET result = {mark} WHERE project_id = ? AND scope = ? AND key = ?",
            (_json_text(result), project.id, scope, key),
        )

    # telemetry

    def trial_row_id(self, conn: Connection, project: Project, exp_id: str) -> int:
        row = self._execute(conn, "SELECT id FROM trials WHERE project_id = ? AND exp_id = ?", (project.id, exp_id)).fetchone()
        if row is None:
            raise NotFound("trial", f"{project.slug}/{exp_id}", field="exp_id")
        return int(row[0])

    def insert_points(self, conn: Connection, trial_id: int, rows: Sequence[tuple[Any, ...]]) -> int:
        """Insert ``(step, turn, name, value, wall_time)`` rows of one trial: ``executemany``
        on SQLite, ``COPY`` on PostgreSQL."""
        raw = conn.connection.driver_connection
        if self.sqlite:
            cursor = raw.cursor()  # type: ignore[union-attr]
            try:
                # the trial's id is an integer from the database: a literal spares a tuple per row
                cursor.executemany(
                    "INSERT INTO telemetry_points (trial_id, step, turn, name, value, wall_time) "
                    f"VALUES ({int(trial_id)}, ?, ?, ?, ?, ?)",
                    rows,
                )
            finally:
                cursor.close()
        else:
            with raw.cursor() as cursor:  # type: ignore[union-attr]
                with cursor.copy("COPY telemetry_points (trial_id, step, turn, name, value, wall_time) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row((trial_id, *row))
        return len(rows)

    @staticmethod
    def _telemetry_where(
        trial_id: int, names: Sequence[str] | None, step_min: int | None, step_max: int | None
    ) -> tuple[str, list[Any]]:
        where, params = ["trial_id = ?"], [trial_id]
        if names:
            where.append(f"name IN ({', '.join('?' * len(names))})")
            params.extend(names)
        if step_min is not None:
            where.append("step >= ?")
            params.append(step_min)
        if step_max is not None:
            where.append("step <= ?")
            params.append(step_max)
        return " AND ".join(where), params

    def telemetry_series(
        self, conn: Connection, trial_id: int, *, names: Sequence[str] | None = None,
        step_min: int | None = None, step_max: int | None = None,
    ) -> list[tuple[str, int, int, int, int]]:
        """``(name, turn, count, first step, last step)`` of each series, by name and turn."""
        where, params = self._telemetry_where(trial_id, names, step_min, step_max)
        cursor = self._execute(
            conn,
            f"SELECT name, turn, COUNT(*), MIN(step), MAX(step) FROM telemetry_points WHERE {where} "
            "GROUP BY name, turn ORDER BY name, turn",
            params,
        )
        return [(name, int(turn), int(n), int(lo), int(hi)) for name, turn, n, lo, hi in cursor.fetchall()]

    def telemetry_points(
        self, conn: Connection, trial_id: int, name: str, turn: int, *, step_min: int | None = None,
        step_max: int | None = None,
    ) -> list[tuple[int, float]]:
        """``(step, value)`` of one series in step order (insertion order among equal steps)."""
        where, params = self._telemetry_where(trial_id, [name], step_min, step_max)
        cursor = self._execute(
            conn, f"SELECT step, value FROM telemetry_points WHERE {where} AND turn = ? ORDER BY step, id", (*params, turn)
        )
        return cursor.fetchall()

    def telemetry_buckets(
        self, conn: Connection, trial_id: int, name: str, turn: int, *, first: int, last: int, buckets: int,
    ) -> list[tuple[int, int, float, float, float, int]]:
        """One series cut into at most ``buckets`` equal-width step ranges from ``first`` to
        ``last`` (each ``ceil((last - first + 1) / buckets)`` steps wide): ``(first step,
        last step, min, max, mean, count)`` of each non-empty bucket, in order."""
        width = max(1, -(-(last - first + 1) // max(1, buckets)))
        where, params = self._telemetry_where(trial_id, [name], first, last)
        cursor = self._execute(
            conn,
            f"SELECT (step - ?) / ? AS bucket, MIN(step), MAX(step), MIN(value), MAX(value), AVG(value), COUNT(*) "
            f"FROM telemetry_points WHERE {where} AND turn = ? GROUP BY 1 ORDER BY 1",
            (first, width, *params, turn),
        )
        return [(int(lo), int(hi), float(vmin), float(vmax), float(mean), int(n))
                for _, lo, hi, vmin, vmax, mean, n in cursor.fetchall()]

    def telemetry_aggregates(
        self, conn: Connection, trial_id: int, names: Sequence[str], *, turn: int = -1
    ) -> dict[str, tuple[int, float, float, float, float]]:
        """``name -> (count, mean, min, max, mean of squares)`` over the series ``(name, turn)``."""
        where, params = self._telemetry_where(trial_id, names, None, None)
        cursor = self._execute(
            conn,
            f"SELECT name, COUNT(*), AVG(value), MIN(value), MAX(value), AVG(value * value) FROM telemetry_points "
            f"WHERE {where} AND turn = ? GROUP BY name",
            (*params, turn),
        )
        return {name: (int(n), float(mean), float(lo), float(hi), float(sq)) for name, n, mean, lo, hi, sq in cursor.fetchall()}

    def telemetry_count(self, conn: Connection, trial_id: int) -> tuple[int, int]:
        """``(points, largest point id)`` of the trial: what a telemetry ETag derives from."""
        row = self._execute(conn, "SELECT COUNT(*), COALESCE(MAX(id), 0) FROM telemetry_points WHERE trial_id = ?",
                            (trial_id,)).fetchone()
        return int(row[0]), int(row[1])


    # -- metric explorer (lineage.browse.explore) ------------------------------------------------
    #
    # The explorer's reads: the selected trials with their row ids, and telemetry read by
    # index seeks on (trial_id, name, turn, step) wherever it can be, so a view costs
    # about trials x buckets seeks however long the series are; only the exact rule
    # (lineage.browse.explore's doc) aggregates every point, under a budget.

    def explore_trials(
        self, conn: Connection, project: Project, *, filters: Mapping[str, Any], exp_ids: Sequence[str] | None,
        subtree_of: str | None, limit: int,
    ) -> tuple[list[tuple[int, Trial]], int]:
        """``([(row id, trial)], matched)``: the last ``limit`` trials by seq (oldest first)
        matching the trials-table ``filters``, within ``exp_ids`` when given and within the
        subtree under ``subtree_of`` (that trial and its descendants) when given."""
        where, params = self._filter_sql(project, **filters)
        prefix = ""
        if exp_ids is not None:
            if not exp_ids:
                return [], 0
            where += f" AND exp_id IN ({self._in(exp_ids)})"
            params.extend(exp_ids)
        if subtree_of is not None:
            self.trial(conn, project, subtree_of)
            prefix = ("WITH RECURSIVE sub(exp_id) AS (SELECT exp_id FROM trials WHERE project_id = ? AND exp_id = ? "
                      "UNION SELECT t.exp_id FROM trials t JOIN sub ON t.project_id = ? AND t.parent_exp = sub.exp_id) ")
            params = [project.id, subtree_of, project.id, *params]
            where += " AND exp_id IN (SELECT exp_id FROM sub)"
        matched = int(self._execute(conn, f"{prefix}SELECT COUNT(*) FROM trials WHERE {where}", params).fetchone()[0])
        cursor = self._execute(
            conn, f"{prefix}SELECT id, {_COLUMN_LIST} FROM trials WHERE {where} ORDER BY seq DESC LIMIT ?", (*params, limit)
        )
        rows = [(int(row[0]), trial_from_row(row[1:])) for row in cursor.fetchall()]
        rows.reverse()
        return rows, matched

    def _first(self, conn: Connection, sql: str, params: Sequence[Any]) -> Any:
        row = self._execute(conn, sql, params).fetchone()
        return None if row is None else row[0]

    def series_turns(self, conn: Connection, trial_id: int, name: str) -> list[int]:
        """The per-turn turns (>= 0) of series ``name`` of a trial: one seek per turn."""
        turns: list[int] = []
        sql = "SELECT MIN(turn) FROM telemetry_points WHERE trial_id = ? AND name = ? AND turn > ?"
        current = -1
        while (found := self._first(conn, sql, (trial_id, name, current))) is not None:
            turns.append(int(found))
            current = int(found)
        return turns

    def explore_series(
        self, conn: Connection, trial_ids: Sequence[int], name: str, *, turn: int | None, per_turn: bool,
        step_min: int | None, step_max: int | None,
    ) -> list[tuple[int, int, int, int, float | None]]:
        """``(trial id, turn, first step, last step, wall_time of the first point)`` of each
        series ``name`` of the trials with points in the step range: the per-turn series
        (``per_turn``) or the one of ``turn`` (None: not per turn, -1)."""
        bounds, extra = "", []
        if step_min is not None:
            bounds += " AND step >= ?"
            extra.append(step_min)
        if step_max is not None:
            bounds += " AND step <= ?"
            extra.append(step_max)
        key = "trial_id = ? AND name = ? AND turn = ?"
        out = []
        for trial_id in trial_ids:
            turns = self.series_turns(conn, trial_id, name) if per_turn else [-1 if turn is None else turn]
            for one in turns:
                params = (trial_id, name, one, *extra)
                first = self._first(conn, f"SELECT MIN(step) FROM telemetry_points WHERE {key}{bounds}", params)
                if first is None:
                    continue
                last = self._first(conn, f"SELECT MAX(step) FROM telemetry_points WHERE {key}{bounds}", params)
                wall = self._first(
                    conn, f"SELECT wall_time FROM telemetry_points WHERE {key} ORDER BY step, id LIMIT 1", params[:3]
                )
                out.append((trial_id, one, int(first), int(last), None if wall is None else float(wall)))
        return out

    def telemetry_points_at_most(
        self, conn: Connection, series: Sequence[tuple[int, int]], name: str, lo: int, hi: int, budget: int
    ) -> bool:
        """Whether the series ``(trial id, turn)`` of ``name`` hold at most ``budget`` points
        in ``[lo, hi]`` together; reads at most ``budget + 1`` index entries."""
        left = budget
        for trial_id, turn in series:
            found = self._first(
                conn,
                "SELECT COUNT(*) FROM (SELECT 1 FROM telemetry_points WHERE trial_id = ? AND name = ? AND turn = ? "
                "AND step >= ? AND step <= ? LIMIT ?) AS capped",
                (trial_id, name, turn, lo, hi, left + 1),
            )
            left -= int(found)
            if left < 0:
                return False
        return True

    def explore_cells_exact(
        self, conn: Connection, trial_ids: Sequence[int], name: str, *, turn: int | None, per_turn: bool,
        lo: int, hi: int, width: int,
    ) -> list[tuple[int, int, int, float, float | None, int]]:
        """``(trial id, turn, bucket, mean value, mean wall_time, points)`` of each non-empty
        bucket ``(step - lo) // width`` of each series, in one GROUP BY."""
        if not trial_ids:
            return []
        turn_sql, turn_params = ("turn >= 0", []) if per_turn else ("turn = ?", [-1 if turn is None else turn])
        cursor = self._execute(
            conn,
            f"SELECT trial_id, turn, (step - ?) / ? AS bucket, AVG(value), AVG(wall_time), COUNT(*) "
            f"FROM telemetry_points WHERE trial_id IN ({self._in(trial_ids)}) AND name = ? AND {turn_sql} "
            "AND step >= ? AND step <= ? GROUP BY trial_id, turn, bucket",
            (lo, width, *trial_ids, name, *turn_params, lo, hi),
        )
        return [(int(t), int(u), int(b), float(v), None if w is None else float(w), int(n))
                for t, u, b, v, w, n in cursor.fetchall()]

    def explore_cells_sampled(
        self, conn: Connection, series: Sequence[tuple[int, int]], name: str, *, lo: int, width: int, count: int
    ) -> list[tuple[int, int, int, float, float | None]]:
        """``(trial id, turn, bucket, value, wall_time)``: each series' first point (by step,
        then insertion) in each of the ``count`` buckets ``[lo + i*width, lo + (i+1)*width)``,
        one index seek per series and bucket."""
        if not series:
            return []
        keys = ", ".join("(?, ?)" for _ in series)
        sql = f"""WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i < ?),
            s(trial_id, turn) AS (VALUES {keys})
            SELECT c.trial_id, c.turn, c.i, p.value, p.wall_time FROM (
                SELECT s.trial_id, s.turn, g.i, (
                    SELECT q.id FROM telemetry_points q WHERE q.trial_id = s.trial_id AND q.name = ? AND q.turn = s.turn
                    AND q.step >= ? + g.i * ? AND q.step < ? + (g.i + 1) * ? ORDER BY q.step, q.id LIMIT 1) AS pid
                FROM s CROSS JOIN g) c
            JOIN telemetry_points p ON p.id = c.pid"""
        params = [count - 1, *(v for key in series for v in key), name, lo, width, lo, width]
        cursor = self._execute(conn, sql, params)
        return [(int(t), int(u), int(i), float(v), None if w is None else float(w)) for t, u, i, v, w in cursor.fetchall()]

    def telemetry_names(self, conn: Connection, trial_ids: Sequence[int]) -> list[str]:
        """The distinct telemetry names of the trials, sorted: one seek per trial and name."""
        names: set[str] = set()
        sql = "SELECT MIN(name) FROM telemetry_points WHERE trial_id = ? AND name > ?"
        for trial_id in trial_ids:
            current = ""
            while (found := self._first(conn, sql, (trial_id, current))) is not None:
                names.add(found)
                current = found
        return sorted(names)
