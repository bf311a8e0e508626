"""The SQL of the progress summary and of guardrail policies: :class:`ProgressSql`, ``Store.progress``
of :class:`lineage.store.Store`.

Every read is a primary-key look-up or a short index walk, so a summary of a
100,000-trial project costs about what one of a small project does:

* trials and time spent per status: the rows of ``trial_status_totals`` (one per status),
  kept in step with ``trials`` by triggers (created by migration 0004: row triggers on
  SQLite, statement triggers with transition tables on PostgreSQL, so a COPY of 100,000
  rows adds one grouped UPSERT, not 100,000);
* the last N trials' statuses: the newest N entries of ``(project_id, seq)``;
* the crash streak: ``(project_id, seq)`` walked from the newest trial back to the first
  one that did not crash (as long as the streak);
* the first baseline: one range of ``(project_id, status, ...)``.

Rules (what a streak is, what the trend is) are ``lineage.monitor.progress``'s and
``lineage.monitor.guardrails``'s; this module only reads and writes rows.

Methods: the summary's reads (``status_totals``, ``total_seconds``,
``recent_status_counts``, ``last_seq_not_in``, ``first_with_status``) and the guardrail
policies (``guardrail_policy``, ``save_guardrail_policy``, ``save_tripped``,
``delete_guardrail_policy``, ``bump_revision``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from lineage.domain import Trial
from lineage.store.base import Family
from lineage.store.outbox import events_list

_POLICY_COLUMNS = ("max_crash_streak", "max_trials_without_improvement", "budget_hours", "tripped")


def _policy_values(row: Sequence[Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    values = dict(zip(_POLICY_COLUMNS, row))
    tripped = values["tripped"]
    values["tripped"] = json.loads(tripped) if isinstance(tripped, str) else (tripped or {})
    return values


class ProgressSql(Family):
    """The progress summary's reads and the guardrail policies' rows."""

    # -- the progress summary ----------------------------------------------------------------

    def status_totals(self, conn: Connection, project_id: int) -> dict[str, tuple[int, float]]:
        """``status -> (trials, sum of total_s)`` (the totals' rows: one per status)."""
        cursor = self.core.execute(
            conn,
            "SELECT status, trials, seconds FROM trial_status_totals WHERE project_id = ? AND trials > 0",
            (project_id,),
        )
        return {status: (int(count), float(seconds)) for status, count, seconds in cursor.fetchall()}

    def total_seconds(self, conn: Connection, project_id: int) -> float:
        """The sum of ``total_s`` over the project's trials."""
        return sum(seconds for _, seconds in self.status_totals(conn, project_id).values())

    def recent_status_counts(self, conn: Connection, project_id: int, limit: int) -> dict[str, int]:
        """``status -> trials`` among the project's newest ``limit`` trials."""
        cursor = self.core.execute(
            conn,
            "SELECT status, COUNT(*) FROM (SELECT status FROM trials WHERE project_id = ? "
            "ORDER BY seq DESC LIMIT ?) AS recent GROUP BY status",
            (project_id, limit),
        )
        return {status: int(count) for status, count in cursor.fetchall()}

    def last_seq_not_in(self, conn: Connection, project_id: int, statuses: Sequence[str]) -> int | None:
        """The seq of the newest trial whose status is not one of ``statuses`` (None: none is)."""
        row = self.core.execute(
            conn,
            f"SELECT seq FROM trials WHERE project_id = ? AND status NOT IN ({self.core.marks(statuses)}) "
            "ORDER BY seq DESC LIMIT 1",
            (project_id, *statuses),
        ).fetchone()
        return None if row is None else int(row[0])

    def first_with_status(self, conn: Connection, project_id: int, status: str) -> Trial | None:
        """The earliest trial with ``status``: its seq from the status' range of the
        ``(project_id, status, ...)`` index (``+seq`` keeps SQLite off the seq index, whose
        walk read the whole project for a status no trial has: 40 ms at 100,000 trials),
        then one look-up."""
        return self.core.trial_where(
            conn,
            "project_id = ? AND seq = (SELECT MIN(+seq) FROM trials WHERE project_id = ? AND status = ?)",
            (project_id, project_id, status),
        )

    def first_within(
        self, conn: Connection, project_id: int, statuses: Sequence[str], bound: float, *, lower_is_better: bool
    ) -> int | None:
        """The seq of the earliest trial with one of ``statuses`` whose metric is at least
        as good as ``bound`` (a range of the ``(project_id, status, core_metric, seq)``
        index per status); None: none is."""
        sign = "<=" if lower_is_better else ">="
        row = self.core.execute(
            conn,
            f"SELECT MIN(seq) FROM trials WHERE project_id = ? AND status IN ({self.core.marks(statuses)}) "
            f"AND core_metric {sign} ?",
            (project_id, *statuses, bound),
        ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    # -- guardrail policies ------------------------------------------------------------------

    def guardrail_policy(self, conn: Connection, project_id: int) -> dict[str, Any] | None:
        """The project's guardrail row as a dict of :data:`_POLICY_COLUMNS`, None without one."""
        return _policy_values(self._policy_cursor(conn, project_id).fetchone())

    def hooks_and_guardrails(
        self,
        conn: Connection,
        project_id: int,
    ) -> tuple[list[tuple[int, list[str], str]], dict[str, Any] | None]:
        """What a new trial's events and guardrails need: the project's hooks (as
        ``subscriptions`` gives them) and its guardrail row (as :meth:`guardrail_policy`).
        Both statements are sent before either result is read, so in a pipelined write
        (:meth:`StoreCore.write`) they cost one round trip."""
        return self.fetch_hooks(self.hooks_cursors(conn, project_id))

    def hooks_cursors(self, conn: Connection, project_id: int) -> tuple[Any, Any]:
        """:meth:`hooks_and_guardrails`' two statements, sent; read by :meth:`fetch_hooks`."""
        return (
            self.core.execute(conn, "SELECT id, events, body_format FROM webhooks WHERE project_id = ?", (project_id,)),
            self._policy_cursor(conn, project_id),
        )

    @staticmethod
    def fetch_hooks(cursors: tuple[Any, Any]) -> tuple[list[tuple[int, list[str], str]], dict[str, Any] | None]:
        hooks_cursor, policy_cursor = cursors
        hooks = [(int(id_), events_list(events), fmt) for id_, events, fmt in hooks_cursor.fetchall()]
        return hooks, _policy_values(policy_cursor.fetchone())

    def _policy_cursor(self, conn: Connection, project_id: int) -> Any:
        return self.core.execute(
            conn, f"SELECT {', '.join(_POLICY_COLUMNS)} FROM guardrail_policies WHERE project_id = ?", (project_id,)
        )

    def save_guardrail_policy(
        self,
        conn: Connection,
        project_id: int,
        *,
        max_crash_streak: int | None,
        max_trials_without_improvement: int | None,
        budget_hours: float | None,
    ) -> None:
        """Insert or replace the project's limits (its trips are kept; the caller re-evaluates)."""
        params = (max_crash_streak, max_trials_without_improvement, budget_hours, self.core.now(), project_id)
        updated = self.core.execute(
            conn,
            "UPDATE guardrail_policies SET max_crash_streak = ?, max_trials_without_improvement = ?, "
            "budget_hours = ?, updated_at = ? WHERE project_id = ?",
            params,
        )
        if updated.rowcount == 0:
            self.core.execute(
                conn,
                "INSERT INTO guardrail_policies (max_crash_streak, max_trials_without_improvement, budget_hours, "
                f"updated_at, project_id, tripped) VALUES (?, ?, ?, ?, ?, {self.core.json_mark()})",
                (*params, "{}"),
            )

    def save_tripped(self, conn: Connection, project_id: int, tripped: dict[str, Any]) -> None:
        self.core.execute(
            conn,
            f"UPDATE guardrail_policies SET tripped = {self.core.json_mark()}, updated_at = ? WHERE project_id = ?",
            (json.dumps(tripped, sort_keys=True), self.core.now(), project_id),
        )

    def delete_guardrail_policy(self, conn: Connection, project_id: int) -> bool:
        cursor = self.core.execute(conn, "DELETE FROM guardrail_policies WHERE project_id = ?", (project_id,))
        return cursor.rowcount > 0

    def bump_revision(self, conn: Connection, project_id: int) -> None:
        """Move the project's revision (its prompt and pages show the guardrails: ETags change)."""
        self.core.execute(
            conn,
            "UPDATE projects SET revision = revision + 1, updated_at = ? WHERE id = ?",
            (self.core.now(), project_id),
        )
