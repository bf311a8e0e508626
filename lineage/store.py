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
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator, Sequence

from sqlalchemy import Connection, Engine, and_, func, insert, or_, select, text, update
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

projects = ProjectRow.__table__
trials = TrialRow.__table__

#: Trial columns stored verbatim from the domain object, in insert order.
TRIAL_VALUE_COLUMNS: tuple[str, ...] = FIELDKIT_COLUMNS + CLIP_SCALE_COLUMNS
_TRIAL_SELECT = [trials.c[name] for name in TRIAL_VALUE_COLUMNS] + [
    trials.c.extra,
    trials.c.seq,
    trials.c.created_at,
    trials.c.updated_at,
]
_BULK_COLUMNS: tuple[str, ...] = ("project_id", "seq", *TRIAL_VALUE_COLUMNS, "extra", "created_at", "updated_at")
#: Rows per executemany/COPY batch during imports.
BULK_BATCH = 5_000


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _iso(value: datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.isoformat()


def trial_from_row(row: Any) -> Trial:
    m = row._mapping
    return Trial(
        exp_id=m["exp_id"],
        timestamp=m["timestamp"],
        specialist=m["specialist"],
        parent_exp=m["parent_exp"],
        baseline_exp=m["baseline_exp"],
        domain=m["domain"],
        hypothesis=m["hypothesis"],
        expected_delta=m["expected_delta"],
        status=FailureLabel(m["status"]),
        core_metric=m["core_metric"],
        val_bpb=m["val_bpb"],
        delta_vs_best=m["delta_vs_best"],
        train_s=m["train_s"],
        total_s=m["total_s"],
        job_name=m["job_name"],
        snapshot_path=m["snapshot_path"],
        notes=m["notes"],
        ig_clip_scale_mean=m["ig_clip_scale_mean"],
        ig_clip_scale_std=m["ig_clip_scale_std"],
        ig_clip_scale_min=m["ig_clip_scale_min"],
        ig_clip_scale_max=m["ig_clip_scale_max"],
        ig_clip_scale_frac_low=m["ig_clip_scale_frac_low"],
        ig_clip_scale_frac_high=m["ig_clip_scale_frac_high"],
        extra=m["extra"] or {},
        seq=m["seq"],
        created_at=_iso(m["created_at"]),
        updated_at=_iso(m["updated_at"]),
    )


def _project_from_row(row: Any, trial_count: int = 0) -> Project:
    m = row._mapping
    return Project(
        id=m["id"],
        slug=m["slug"],
        title=m["title"],
        metric_name=m["metric_name"],
        lower_is_better=bool(m["lower_is_better"]),
        best_policy=BestPolicy(m["best_policy"]),
        prompt_template=m["prompt_template"],
        source_format=m["source_format"],
        settings=m["settings"] or {},
        revision=m["revision"],
        trial_count=trial_count,
        created_at=_iso(m["created_at"]),
        updated_at=_iso(m["updated_at"]),
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
        row = conn.execute(select(projects).where(projects.c.slug == slug)).first()
        if row is None:
            raise NotFound("project", slug, field="project")
        return _project_from_row(row, trial_count=row._mapping["next_seq"])

    def projects(self, conn: Connection) -> list[Project]:
        rows = conn.execute(select(projects).order_by(projects.c.slug)).all()
        return [_project_from_row(row, trial_count=row._mapping["next_seq"]) for row in rows]

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

    def lock_project(self, conn: Connection, project: Project) -> tuple[int, int]:
        """Take the project's write lock and bump its revision.

        Returns ``(next_seq, next_exp_number)``. On PostgreSQL the row lock is held until
        commit, serializing the project's writers (SQLite's BEGIN IMMEDIATE already
        serializes all writers); the counters read here stay valid until then.
        """
        row = conn.execute(
            update(projects)
            .where(projects.c.id == project.id)
            .values(revision=projects.c.revision + 1, updated_at=utcnow())
            .returning(projects.c.next_seq, projects.c.next_exp_number)
        ).one()
        return row.next_seq, row.next_exp_number

    def advance_counters(self, conn: Connection, project: Project, *, rows: int, exp_number: int) -> None:
        """After a bulk insert: move ``next_seq`` by ``rows`` and raise ``next_exp_number``."""
        conn.execute(
            update(projects)
            .where(projects.c.id == project.id)
            .values(
                next_seq=projects.c.next_seq + rows,
                next_exp_number=func.max(projects.c.next_exp_number, exp_number)
                if self.sqlite
                else func.greatest(projects.c.next_exp_number, exp_number),
            )
        )

    # -- trials: single rows --------------------------------------------------------------

    def insert_trial(self, conn: Connection, project: Project, trial: Trial, *, seq: int) -> Trial:
        now = utcnow()
        values = _trial_values(trial)
        conn.execute(insert(trials).values(project_id=project.id, seq=seq, created_at=now, updated_at=now, **values))
        return trial.with_changes(seq=seq, created_at=_iso(now), updated_at=_iso(now))

    def update_trial(self, conn: Connection, project: Project, trial: Trial) -> Trial:
        now = utcnow()
        values = _trial_values(trial)
        values.pop("exp_id")
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
        row = conn.execute(
            select(*_TRIAL_SELECT).where(trials.c.project_id == project.id, trials.c.exp_id == exp_id)
        ).first()
        return trial_from_row(row) if row is not None else None

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
        order = trials.c.core_metric.asc() if project.lower_is_better else trials.c.core_metric.desc()
        eligible = project.best_policy.eligible_statuses()
        base = [trials.c.project_id == project.id, trials.c.core_metric.is_not(None)]
        if before_seq is not None:
            base.append(trials.c.seq < before_seq)
        if project.best_policy is BestPolicy.FIELDKIT:
            excluded = [label.value for label in FailureLabel if label.value not in eligible]
            query = select(*_TRIAL_SELECT).where(*base, trials.c.status.not_in(excluded))
            row = conn.execute(query.order_by(order, trials.c.seq).limit(1)).first()
            return trial_from_row(row) if row is not None else None
        candidates = []
        for status in sorted(eligible):
            query = select(*_TRIAL_SELECT).where(*base, trials.c.status == status)
            row = conn.execute(query.order_by(order, trials.c.seq).limit(1)).first()
            if row is not None:
                candidates.append(trial_from_row(row))
        return ordered_best(candidates, lower_is_better=project.lower_is_better)

    def first_trial(self, conn: Connection, project: Project) -> Trial | None:
        row = conn.execute(
            select(*_TRIAL_SELECT).where(trials.c.project_id == project.id).order_by(trials.c.seq).limit(1)
        ).first()
        return trial_from_row(row) if row is not None else None

    def chain_rows(self, conn: Connection, project: Project, exp_id: str) -> dict[str, Trial]:
        """Every trial reachable from ``exp_id`` by parent pointers, in one recursive query.

        ``UNION`` (not ``UNION ALL``) makes the recursion stop on a cycle. The caller puts
        the rows in chain order (see ``lineage.service.walk_chain``).
        """
        cte_sql = text(
            """
            WITH RECURSIVE chain(exp_id, parent_exp) AS (
                SELECT exp_id, parent_exp FROM trials WHERE project_id = :pid AND exp_id = :start
                UNION
                SELECT t.exp_id, t.parent_exp FROM trials t JOIN chain c
                  ON t.project_id = :pid AND t.exp_id = c.parent_exp
                WHERE c.parent_exp <> ''
            )
            SELECT exp_id FROM chain
            """
        )
        ids = list(conn.scalars(cte_sql, {"pid": project.id, "start": exp_id}))
        if not ids:
            return {}
        rows = conn.execute(
            select(*_TRIAL_SELECT).where(trials.c.project_id == project.id, trials.c.exp_id.in_(ids))
        ).all()
        return {row._mapping["exp_id"]: trial_from_row(row) for row in rows}

    def top_kept(self, conn: Connection, project: Project, limit: int) -> list[Trial]:
        """Trials with status ``keep``, in fieldkit's leaderboard order, at most ``limit``.

        fieldkit sorts keeps by metric with a missing metric as +inf and, when higher is
        better, reverses the (stable) sort: missing metrics come first then. Ties keep
        insertion order either way.
        """
        if limit <= 0:
            return []
        base = select(*_TRIAL_SELECT).where(trials.c.project_id == project.id, trials.c.status == "keep")
        scored = base.where(trials.c.core_metric.is_not(None))
        unscored = base.where(trials.c.core_metric.is_(None)).order_by(trials.c.seq).limit(limit)
        if project.lower_is_better:
            first = conn.execute(scored.order_by(trials.c.core_metric.asc(), trials.c.seq).limit(limit)).all()
            rest = conn.execute(unscored).all() if len(first) < limit else []
        else:
            first = conn.execute(unscored).all()
            rest = (
                conn.execute(scored.order_by(trials.c.core_metric.desc(), trials.c.seq).limit(limit - len(first))).all()
                if len(first) < limit
                else []
            )
        return [trial_from_row(row) for row in [*first, *rest][:limit]]

    def recent(self, conn: Connection, project: Project, limit: int) -> list[Trial]:
        """The last ``limit`` trials, oldest first."""
        if limit <= 0:
            return []
        rows = conn.execute(
            select(*_TRIAL_SELECT).where(trials.c.project_id == project.id).order_by(trials.c.seq.desc()).limit(limit)
        ).all()
        return [trial_from_row(row) for row in reversed(rows)]

    def children(self, conn: Connection, project: Project, exp_id: str) -> list[Trial]:
        rows = conn.execute(
            select(*_TRIAL_SELECT)
            .where(trials.c.project_id == project.id, trials.c.parent_exp == exp_id)
            .order_by(trials.c.seq)
        ).all()
        return [trial_from_row(row) for row in rows]

    def count_trials(self, conn: Connection, project: Project) -> int:
        return conn.scalar(select(func.count()).select_from(trials).where(trials.c.project_id == project.id)) or 0

    # -- listing and streaming ------------------------------------------------------------

    def list_trials(
        self,
        conn: Connection,
        project: Project,
        *,
        status: Sequence[str] | None = None,
        specialist: str | None = None,
        domain: str | None = None,
        parent: str | None = None,
        metric_min: float | None = None,
        metric_max: float | None = None,
        text_query: str | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> list[Trial]:
        conds = [trials.c.project_id == project.id]
        if status:
            conds.append(trials.c.status.in_(list(status)))
        if specialist is not None:
            conds.append(trials.c.specialist == specialist)
        if domain is not None:
            conds.append(trials.c.domain == domain)
        if parent is not None:
            conds.append(trials.c.parent_exp == parent)
        if metric_min is not None:
            conds.append(trials.c.core_metric >= metric_min)
        if metric_max is not None:
            conds.append(trials.c.core_metric <= metric_max)
        if text_query:
            pattern = f"%{text_query.lower()}%"
            conds.append(or_(func.lower(trials.c.hypothesis).like(pattern), func.lower(trials.c.notes).like(pattern)))
        if after_seq is not None:
            conds.append(trials.c.seq < after_seq if descending else trials.c.seq > after_seq)
        order = trials.c.seq.desc() if descending else trials.c.seq.asc()
        query = select(*_TRIAL_SELECT).where(and_(*conds)).order_by(order)
        if limit is not None:
            query = query.limit(limit)
        return [trial_from_row(row) for row in conn.execute(query).all()]

    def stream_trials(self, conn: Connection, project: Project, *, batch: int = 2_000) -> Iterator[Trial]:
        """Every trial of the project in insertion order, fetched ``batch`` rows at a time."""
        result = conn.execution_options(stream_results=True, yield_per=batch).execute(
            select(*_TRIAL_SELECT).where(trials.c.project_id == project.id).order_by(trials.c.seq)
        )
        for row in result:
            yield trial_from_row(row)

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

        def tuples() -> Iterator[tuple[Any, ...]]:
            nonlocal count
            for offset, trial in enumerate(rows):
                count += 1
                extra = json.dumps(dict(trial.extra), ensure_ascii=False, separators=(",", ":"))
                yield (
                    project.id,
                    first_seq + offset,
                    *(getattr(trial, name) for name in FIELDKIT_COLUMNS[:8]),
                    trial.status.value,
                    *(getattr(trial, name) for name in FIELDKIT_COLUMNS[9:]),
                    *(getattr(trial, name) for name in CLIP_SCALE_COLUMNS),
                    extra,
                    stamp,
                    stamp,
                )

        writer(conn, tuples())
        return count

    def _sqlite_batches(self, conn: Connection, tuples: Iterator[tuple[Any, ...]]) -> None:
        sql = f"INSERT INTO trials ({', '.join(_BULK_COLUMNS)}) VALUES ({', '.join('?' * len(_BULK_COLUMNS))})"
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            batch: list[tuple[Any, ...]] = []
            for row in tuples:
                batch.append(row)
                if len(batch) >= BULK_BATCH:
                    cursor.executemany(sql, batch)
                    batch.clear()
            if batch:
                cursor.executemany(sql, batch)
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

