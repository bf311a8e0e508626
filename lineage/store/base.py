"""The store's shared core: engine and transactions, driver-level SQL, rows <-> values.

:class:`StoreCore` is the one object every table family of :class:`lineage.store.Store`
is built on (each family holds it as ``self.core``, see :class:`Family`):

* ``__init__`` (engine, backend, the trial INSERT statement ``insert_sql``), :meth:`read`,
  :meth:`write`, savepoints (:meth:`savepoint`, :meth:`rollback_to`, :meth:`release`);
* driver-level SQL: :meth:`sql` (``?`` to the driver's placeholder), :meth:`execute`,
  :meth:`trials_where` / :meth:`trial_where`, :meth:`peek` (one statement outside a
  transaction), :meth:`marks` (a list of placeholders), :meth:`json_mark` (the placeholder
  of a JSON value), :attr:`lean_columns`;
* times: :meth:`now` (the driver's form of now), :meth:`db_time`;
* :meth:`filter_sql`: the WHERE clause of the trials table's filters, shared by listing,
  pages and the explorer.

Module-level: the trial column lists (:data:`TRIAL_VALUE_COLUMNS`, :data:`TRIAL_COLUMNS`),
JSON text of a mapping (``_json_text``), ISO stamps (``_iso``, :func:`iso_stamp`,
:func:`utcnow`) and the row mappers :func:`trial_from_row` and ``_project_from_row``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine

from lineage.db import PIPELINE_INFO, SQLITE_BUSY_TIMEOUT_MS, WRITE_OPTION, is_sqlite
from lineage.domain import (
    CLIP_SCALE_COLUMNS,
    FIELDKIT_COLUMNS,
    BestPolicy,
    FailureLabel,
    Project,
    Trial,
)
from lineage.exp_ids import shown_forms
from lineage.filter_language import parse as parse_filter
from lineage.filter_language import project_names
from lineage.store.filter_sql import compile_filter

#: Trial columns stored verbatim from the domain object, in insert order.
TRIAL_VALUE_COLUMNS: tuple[str, ...] = FIELDKIT_COLUMNS + CLIP_SCALE_COLUMNS
#: What a trial query selects: the Trial dataclass's field order, so rows map positionally.
TRIAL_COLUMNS: tuple[str, ...] = (*TRIAL_VALUE_COLUMNS, "extra", "seq", "created_at", "updated_at")
_COLUMN_LIST = ", ".join(TRIAL_COLUMNS)
#: The columns with ``extra`` less the patch text of ``_git`` (up to 64 KB a trial): what
#: the prompt reads, per backend (``StoreCore.lean_columns``).
_LEAN_EXTRA = {
    "sqlite": "json_remove(extra, '$._git.patch')",
    # extra is json (kept as written, migration 0006); only a row that holds a patch goes
    # through jsonb to lose it, so every other row keeps its text exactly
    "postgresql": "CASE WHEN extra::jsonb #> '{_git,patch}' IS NULL THEN extra "
    "ELSE (extra::jsonb #- '{_git,patch}')::json END AS extra",
}
_BULK_COLUMNS: tuple[str, ...] = (
    "project_id",
    "seq",
    *TRIAL_VALUE_COLUMNS,
    "extra",
    "created_at",
    "updated_at",
    "search_text",
    "exp_key",
    "search_concepts",
    "chain_depth",
    "chain_skip",
)


_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
try:  # the C encoder json.dumps builds per call, built once (about 3x faster per row)
    from _json import encode_basestring as c_encode_basestring
    from _json import make_encoder as c_make_encoder

    _C_ENCODE: Any = c_make_encoder(
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
    return datetime.now(UTC)


def _iso(value: datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat()


_LABELS = {label.value: label for label in FailureLabel}
_STATUS_AT = TRIAL_VALUE_COLUMNS.index("status")
_EXTRA_AT = len(TRIAL_VALUE_COLUMNS)


def iso_stamp(value: datetime | str | None) -> str | None:
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
    values[-2] = iso_stamp(values[-2])
    values[-1] = iso_stamp(values[-1])
    return Trial(*values)


_PROJECT_COLUMNS = (
    "id",
    "slug",
    "title",
    "metric_name",
    "lower_is_better",
    "best_policy",
    "prompt_template",
    "source_format",
    "settings",
    "revision",
    "next_seq",
    "created_at",
    "updated_at",
)
_PROJECT_SELECT = f"SELECT {', '.join(_PROJECT_COLUMNS)} FROM projects"


def _project_from_row(row: Sequence[Any]) -> Project:
    """A Project from a row selected as ``_PROJECT_COLUMNS``."""
    (id_, slug, title, metric_name, lower, policy, template, source, settings, revision, next_seq, created, updated) = (
        row
    )
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
        created_at=iso_stamp(created),
        updated_at=iso_stamp(updated),
    )


#: A pipelined write's prepared statements use their generic plan. PostgreSQL chose a
#: custom plan for similar_prior's shortlist query on every execution (its generic cost
#: estimate is higher), re-planning it each time: 0.9 ms of planning for 0.25 ms of work,
#: most of a record's time in the database. The write's statements are short indexed
#: look-ups whose plan does not depend on the values; ANALYZE (``lineage.db.
#: refresh_statistics``) invalidates cached plans, so they follow the statistics.
_GENERIC_PLANS = "SET LOCAL plan_cache_mode = force_generic_plan"
#: libpq's PQTRANS_IDLE (``psycopg.pq.TransactionStatus.IDLE``; this module imports no driver)
_IDLE = 0


def _drain(pipeline: Any) -> None:
    """Read what a failed pipeline still has queued (the statements after the failure,
    each "pipeline aborted"), so the rollback that follows starts clean. Unread, the
    driver's rollback reads them first and raises their error in place of the real one;
    whether any are left depends on timing (how much the first failed read fetched)."""
    for _ in range(2):
        try:
            pipeline.sync()
            return
        except Exception:  # the aborted statements' own error: the caller raises the real one
            continue


class StoreCore:
    """SQL access for one database (one engine): what every table family of the Store uses."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sqlite = is_sqlite(engine)
        #: SQLite: this process's writers queue here before SQLite's lock (:meth:`write`)
        self._writers = threading.RLock()
        self._sql_cache: dict[str, str] = {}
        placeholder = "?" if self.sqlite else "CAST(? AS json)"  # extra: the text as written (models.JSONText)
        columns = _BULK_COLUMNS
        marks = ["?"] * len(columns)
        marks[columns.index("extra")] = placeholder
        self.insert_sql = f"INSERT INTO trials ({', '.join(columns)}) VALUES ({', '.join(marks)})"

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def write(self, *, pipelined: bool = False) -> Iterator[Connection]:
        """A write transaction: all or nothing, writers of one database queue on SQLite.

        On SQLite the writers of this process queue on a lock of this store first (for at
        most SQLite's busy timeout, then on SQLite's lock as before), so the next one
        begins as soon as the last one committed. SQLite's own busy handler polls, sleeping
        up to 100 ms between tries: a writer behind a long one (a telemetry batch of 0.3 s)
        began about 90 ms after it committed, the database idle meanwhile. Writers of other
        processes still queue on SQLite's lock.

        ``pipelined`` (PostgreSQL; ignored on SQLite): the transaction runs in psycopg's
        pipeline mode. A statement whose result is not read (an INSERT, an UPDATE) goes
        out with the next one whose result is, and BEGIN with the first: fewer round
        trips. An error of such a statement surfaces at that next read or at COMMIT,
        still inside the transaction, so nothing is half-written; only for short writes
        of driver-level statements (no COPY) that map no error to a particular statement.
        Its statements run on generic plans (``plan_cache_mode``, see :data:`_GENERIC_PLANS`).
        """
        if not self.sqlite:
            with self._transaction(pipelined) as conn:
                yield conn
            return
        queued = self._writers.acquire(timeout=SQLITE_BUSY_TIMEOUT_MS / 1000)
        try:
            with self._transaction(False) as conn:
                yield conn
        finally:
            if queued:
                self._writers.release()

    @contextmanager
    def _transaction(self, pipelined: bool) -> Iterator[Connection]:
        with self.engine.connect().execution_options(**{WRITE_OPTION: True}) as conn:
            if pipelined and not self.sqlite:
                driver = conn.connection.driver_connection
                # psycopg begins a transaction itself at the first statement and, in a
                # pipeline, waits for that BEGIN alone: a round trip. In autocommit it begins
                # none, so BEGIN and COMMIT are written here and BEGIN goes out with the
                # first statements. A failure is rolled back by psycopg as before (its
                # rollback syncs the pipeline first, then reads the transaction's status).
                manual = driver.info.transaction_status == _IDLE  # type: ignore[union-attr]
                if manual:
                    driver.autocommit = True  # type: ignore[union-attr]
                try:
                    with driver.pipeline() as pipeline:  # type: ignore[union-attr]
                        conn.info[PIPELINE_INFO] = pipeline
                        try:
                            with conn.begin():
                                try:
                                    if manual:
                                        self.execute(conn, "BEGIN")
                                    self.execute(conn, _GENERIC_PLANS)
                                    yield conn
                                    if manual:
                                        self.execute(conn, "COMMIT")
                                        pipeline.sync()
                                except BaseException:
                                    _drain(pipeline)
                                    raise
                        finally:
                            conn.info.pop(PIPELINE_INFO, None)
                finally:
                    if manual and not driver.closed:  # type: ignore[union-attr]
                        driver.autocommit = False  # type: ignore[union-attr]
            else:
                with conn.begin():
                    yield conn

    def savepoint(self, conn: Connection, name: str) -> None:
        """A savepoint inside the write transaction (``name``: an identifier of ours)."""
        self.execute(conn, f"SAVEPOINT {name}")

    def rollback_to(self, conn: Connection, name: str) -> None:
        """Undo what the transaction did since savepoint ``name`` (and keep it open)."""
        self.execute(conn, f"ROLLBACK TO SAVEPOINT {name}")
        self.release(conn, name)

    def release(self, conn: Connection, name: str) -> None:
        self.execute(conn, f"RELEASE SAVEPOINT {name}")

    # -- driver-level SQL for the hot paths -------------------------------------------------
    #
    # record_trial and the prompt run a handful of small indexed statements; building them
    # with SQLAlchemy's expression language costs more than running them. These go to the
    # driver's cursor inside the same transaction, written once with ``?`` placeholders.

    def sql(self, sql: str) -> str:
        cached = self._sql_cache.get(sql)
        if cached is None:
            cached = self._sql_cache[sql] = sql if self.sqlite else sql.replace("?", "%s")
        return cached

    def execute(self, conn: Connection, sql: str, params: Sequence[Any] = ()) -> Any:
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(self.sql(sql), params)
        return cursor

    @property
    def lean_columns(self) -> str:
        """The trial columns with ``extra`` less ``_git.patch`` (see :data:`_LEAN_EXTRA`)."""
        extra = _LEAN_EXTRA["sqlite" if self.sqlite else "postgresql"]
        return ", ".join(extra if name == "extra" else name for name in TRIAL_COLUMNS)

    def trials_where(self, conn: Connection, where: str, params: Sequence[Any], *, lean: bool = False) -> list[Trial]:
        columns = self.lean_columns if lean else _COLUMN_LIST
        cursor = self.execute(conn, f"SELECT {columns} FROM trials WHERE {where}", params)
        return [trial_from_row(row) for row in cursor.fetchall()]

    def trial_where(self, conn: Connection, where: str, params: Sequence[Any]) -> Trial | None:
        found = self.trials_where(conn, where, params)
        return found[0] if found else None

    def now(self) -> Any:
        now = utcnow()
        return now.strftime("%Y-%m-%d %H:%M:%S.%f") if self.sqlite else now

    def db_time(self, value: datetime) -> Any:
        """``value`` in the form the driver compares with stored times (UTC text on SQLite)."""
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f") if self.sqlite else value

    def peek(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first row of one read statement run on its own, outside a transaction of
        ours, in autocommit (on PostgreSQL: one round trip, no BEGIN/ROLLBACK). For the
        per-request checks of the API, where a BEGIN/COMMIT pair through SQLAlchemy costs
        more than the indexed look-up. A PostgreSQL connection found dead is replaced
        and the statement run once more."""
        for attempt in (0, 1):
            raw = self.engine.raw_connection()
            driver = raw.driver_connection
            try:
                if not self.sqlite:  # no BEGIN/ROLLBACK around one read: one round trip
                    driver.autocommit = True  # type: ignore[union-attr]
                cursor = raw.cursor()
                try:
                    cursor.execute(self.sql(sql), params)
                    return cursor.fetchone()
                finally:
                    cursor.close()
                    if not self.sqlite and not driver.closed:  # type: ignore[union-attr]
                        driver.autocommit = False  # type: ignore[union-attr]
            except Exception:
                # PostgreSQL went away (restarted, connection cut): once more on a new one
                if attempt or self.sqlite or not (driver.closed or driver.broken):  # type: ignore[union-attr]
                    raise
                raw.invalidate()
                # the other pooled connections went with it (pinged only after idling):
                # a new pool, so the writes that follow this check get live ones too
                self.engine.dispose(close=False)
            finally:
                raw.close()
        raise AssertionError("unreachable")  # pragma: no cover

    def marks(self, values: Sequence[Any]) -> str:
        return ", ".join("?" * len(values))

    def json_mark(self) -> str:
        """The placeholder of a JSON value (``jsonb`` on PostgreSQL, text on SQLite)."""
        return "?" if self.sqlite else "CAST(? AS jsonb)"

    def filter_sql(
        self,
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
        expression: str | None = None,
    ) -> tuple[str, list[Any]]:
        """The WHERE clause (``?`` placeholders) of the trials table's filters.

        ``created_after``/``created_before``: bounds (inclusive, exclusive) on the time the
        ledger stored the trial, in the driver's form (:meth:`db_time`).
        ``timestamp_from``/``timestamp_to``: bounds (inclusive, exclusive) on the trial's own
        ``timestamp`` text, compared as text (ISO 8601 stamps in one format sort by time).
        ``parent``: an id as shown (``exp_12`` finds the children of ``12``).
        ``expression``: a filter expression (:mod:`lineage.filter_language`), compiled to
        SQL here (``lineage.store.filter_sql``).
        """
        where: list[str] = ["project_id = ?"]
        params: list[Any] = [project.id]
        for clause, bound in (
            ("created_at >= ?", created_after),
            ("created_at < ?", created_before),
            ("timestamp >= ?", timestamp_from),
            ("timestamp < ?", timestamp_to),
        ):
            if bound is not None:
                where.append(clause)
                params.append(bound)
        if status:
            where.append(f"status IN ({', '.join('?' * len(status))})")
            params.extend(status)
        for column, value in (("specialist", specialist), ("domain", domain)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if parent is not None:
            forms = shown_forms(parent) if parent.strip() else ("",)
            where.append(f"parent_exp IN ({self.marks(forms)})")
            params.extend(forms)
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
        if expression:
            tree = parse_filter(expression, project_names(project.metric_name))
            if tree is not None:
                sql, values = compile_filter(tree, sqlite=self.sqlite, db_time=self.db_time)
                where.append(sql)
                params.extend(values)
        return " AND ".join(where), params


class Family:
    """A table family of the Store: its SQL over the shared :class:`StoreCore`.

    ``core``: the engine, transactions and driver-level helpers (``self.core.execute``,
    ``self.core.sql``, ...); ``sqlite``: the core's backend flag, copied (it never changes).
    A family that uses another one takes it in its own constructor."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core
        self.sqlite = core.sqlite
