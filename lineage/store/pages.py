"""The web pages' bounded reads: :class:`PagesSql`, ``Store.pages`` of :class:`lineage.store.Store`.

Each read is an index range, an index-only aggregate or a LIMITed walk, so a page of a
100,000-trial project costs about what a page of a small one does.

Methods: ``status_counts``, ``best_per_bin`` (with ``_eligible_sql``), ``metric_window``,
``trials_by_ids``, ``neighbours``, ``children_window``, ``child_counts``, ``orphans``,
``page_trials`` (keyset pages), ``count_matching``, ``calibration_rows``. The filters
are ``StoreCore.filter_sql``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection

from lineage.domain import FailureLabel, Project, Trial
from lineage.store.base import _COLUMN_LIST, TRIAL_COLUMNS, Family, StoreCore, trial_from_row
from lineage.store.filter_sql import SORT_ALIASES, sort_phases
from lineage.store.trials import TrialsSql


class PagesSql(Family):
    """Reads for the web pages: counts, bins, windows, keyset pages, calibration rows."""

    def __init__(self, core: StoreCore, *, trials: TrialsSql) -> None:
        super().__init__(core)
        self.trials = trials  # an id as shown is resolved through ``trials``

    def status_counts(self, conn: Connection, project: Project) -> dict[str, int]:
        """Trials per status (an index-only scan of ``project_id, status, ...``)."""
        cursor = self.core.execute(
            conn, "SELECT status, COUNT(*) FROM trials WHERE project_id = ? GROUP BY status", (project.id,)
        )
        return {status: count for status, count in cursor.fetchall()}

    def _eligible_sql(self, project: Project) -> tuple[str, list[str]]:
        """``status IN (...)`` or ``status NOT IN (...)``, whichever lists fewer labels."""
        eligible = sorted(project.best_policy.eligible_statuses())
        excluded = sorted(label.value for label in FailureLabel if label.value not in eligible)
        if len(eligible) <= len(excluded):
            return f"status IN ({self.core.marks(eligible)})", eligible
        return f"status NOT IN ({self.core.marks(excluded)})", excluded

    def best_per_bin(self, conn: Connection, project: Project, *, width: int) -> list[tuple[int, float]]:
        """``(bin, metric)``: the best scored eligible metric of each bin of ``width``
        consecutive seqs, bins ascending; bins without such a trial are absent. The
        running best of the project is the running min (or max) of these."""
        best = "MIN" if project.lower_is_better else "MAX"
        where, labels = self._eligible_sql(project)
        cursor = self.core.execute(
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
        cursor = self.core.execute(
            conn,
            f"SELECT seq, exp_id, status, core_metric, specialist, delta_vs_best FROM trials "
            f"WHERE {where} ORDER BY seq DESC LIMIT ?",
            (*params, limit),
        )
        rows = cursor.fetchall()
        rows.reverse()
        return [tuple(row) for row in rows]

    def trials_by_ids(self, conn: Connection, project: Project, exp_ids: Iterable[str]) -> dict[str, Trial]:
        """The trials of ``exp_ids`` by the id as asked; an id as shown (``exp_12``) finds
        its trial too (``TrialsSql.resolve_exp_id``); missing ones are left out."""
        ids = list(dict.fromkeys(exp_ids))
        found: dict[str, Trial] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            for trial in self.core.trials_where(
                conn, f"project_id = ? AND exp_id IN ({self.core.marks(chunk)})", (project.id, *chunk)
            ):
                found[trial.exp_id] = trial
        for asked in ids:
            if asked not in found:
                resolved = self.trials.resolve_exp_id(conn, project, asked)
                named = None if resolved is None else self.trials.find_trial(conn, project, resolved)
                if named is not None:
                    found[asked] = named
        return found

    def neighbours(self, conn: Connection, project: Project, seq: int) -> tuple[str | None, str | None]:
        """The exp_ids of the trials just before and just after ``seq`` (insertion order)."""
        before = self.core.execute(
            conn,
            "SELECT exp_id FROM trials WHERE project_id = ? AND seq < ? ORDER BY seq DESC LIMIT 1",
            (project.id, seq),
        ).fetchone()
        after = self.core.execute(
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
                out[parent] = self.core.trials_where(conn, sql, (project.id, parent, limit, offset))
            return out
        columns = ", ".join(f"t.{name}" for name in TRIAL_COLUMNS)
        cursor = self.core.execute(
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
            chunk = ids[start : start + 500]
            cursor = self.core.execute(
                conn,
                f"SELECT parent_exp, COUNT(*) FROM trials WHERE project_id = ? AND parent_exp IN ({self.core.marks(chunk)}) "
                "GROUP BY parent_exp",
                (project.id, *chunk),
            )
            counts.update({parent: count for parent, count in cursor.fetchall()})
        return counts

    def orphans(self, conn: Connection, project: Project, *, limit: int) -> list[Trial]:
        """Trials whose ``parent_exp`` names no trial of the project (roots of their own
        subtrees in the lineage tree). One index look-up per trial: callers bound it."""
        return self.core.trials_where(
            conn,
            "project_id = ? AND parent_exp <> '' AND NOT EXISTS (SELECT 1 FROM trials p "
            "WHERE p.project_id = trials.project_id AND p.exp_id = trials.parent_exp) ORDER BY seq LIMIT ?",
            (project.id, limit),
        )

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

        ``sort``: ``seq`` (keyset ``(seq,)``) or any key of ``filter_sql.parse_sort``
        (``exp_id``, ``core_metric``, a trial field, ``extra.KEY``; keyset ``(phase, value,
        seq)``). A sort walks its phases (``filter_sql.sort_phases``): the trials with a
        value in value order, then those without one by seq, in both directions; ties go
        to seq, so pages never skip or repeat a trial. ``exp_id`` and ``core_metric`` walk
        an index (``project_id, exp_key, seq`` and ``project_id, core_metric, seq``).
        """
        where, params = self.core.filter_sql(project, **filters)
        direction, cmp = ("DESC", "<") if descending else ("ASC", ">")
        if sort == "seq":
            if after is not None:
                where += f" AND seq {cmp} ?"
                params.append(after[0])
            return self.core.trials_where(conn, f"{where} ORDER BY seq {direction} LIMIT ?", (*params, limit))
        phases = sort_phases(SORT_ALIASES.get(sort, sort), sqlite=self.sqlite)
        start = int(after[0]) if after is not None else 0
        found: list[Trial] = []
        for index in range(start, len(phases)):
            phase = phases[index]
            sql, values = f"{where}{phase.where}", [*params, *phase.where_params]
            if after is not None and index == start:
                if phase.expr is None:
                    sql += f" AND seq {cmp} ?"
                    values.append(after[2])
                else:
                    sql += f" AND ({phase.expr} {cmp} ? OR ({phase.expr} = ? AND seq {cmp} ?))"
                    values += [*phase.expr_params, after[1], *phase.expr_params, after[1], after[2]]
            if phase.expr is None:
                order = f"seq {direction}"
            else:
                order = f"{phase.expr} {direction}, seq {direction}"
                values = [*values, *phase.expr_params]
            found += self.core.trials_where(conn, f"{sql} ORDER BY {order} LIMIT ?", (*values, limit - len(found)))
            if len(found) >= limit:
                break
        return found

    def count_matching(self, conn: Connection, project: Project, **filters: Any) -> int:
        where, params = self.core.filter_sql(project, **filters)
        return int(self.core.execute(conn, f"SELECT COUNT(*) FROM trials WHERE {where}", params).fetchone()[0])

    def states_expectations(self, conn: Connection, project: Project, *, newest: int = 5_000) -> bool:
        """Whether one of the project's ``newest`` trials states an expected delta (what the
        calibration page plots): a bounded walk down the ``(project_id, seq)`` index, so a
        100,000-trial loop that never states one costs what a 5,000-trial one does."""
        row = self.core.execute(
            conn,
            "SELECT 1 FROM (SELECT expected_delta FROM trials WHERE project_id = ? ORDER BY seq DESC LIMIT ?) AS newest "
            "WHERE expected_delta <> '' LIMIT 1",
            (project.id, newest),
        ).fetchone()
        return row is not None

    def calibration_rows(
        self, conn: Connection, project: Project, *, limit: int
    ) -> list[tuple[str, str, str, float | None, str]]:
        """The last ``limit`` trials that state an expected delta, newest first, as
        ``(exp_id, specialist, expected_delta, delta_vs_best, status)``."""
        cursor = self.core.execute(
            conn,
            "SELECT exp_id, specialist, expected_delta, delta_vs_best, status FROM trials "
            "WHERE project_id = ? AND expected_delta <> '' ORDER BY seq DESC LIMIT ?",
            (project.id, limit),
        )
        return [tuple(row) for row in cursor.fetchall()]
