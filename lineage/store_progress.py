"""The SQL of the progress summary and of guardrail policies (a sibling of ``lineage.store``).

Every read is a primary-key look-up or a short index walk, so a summary of a
100,000-trial project costs about what one of a small project does:

* trials and time spent per status: the rows of ``trial_status_totals`` (one per status),
  kept in step with ``trials`` by the triggers below;
* the last N trials' statuses: the newest N entries of ``(project_id, seq)``;
* the crash streak: ``(project_id, seq)`` walked from the newest trial back to the first
  one that did not crash (as long as the streak);
* the first baseline: one range of ``(project_id, status, ...)``.

Rules (what a streak is, what the trend is) are ``lineage.monitor.progress``'s and
``lineage.monitor.guardrails``'s; this module only reads and writes rows. Functions take the
:class:`~lineage.store.Store` and the connection of a transaction it opened.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Sequence

from sqlalchemy import Connection

from lineage.domain import Trial

if TYPE_CHECKING:  # pragma: no cover
    from lineage.store import Store

_POLICY_COLUMNS = ("max_crash_streak", "max_trials_without_improvement", "budget_hours", "tripped")

# -- the per-status totals and their triggers (created by migration 0004) ---------------------
#
# SQLite: a row trigger per insert, delete and update of ``status``/``total_s`` (an UPSERT
# of one small row). PostgreSQL: statement triggers with transition tables, so a COPY of
# 100,000 rows adds one grouped UPSERT, not 100,000.

SQLITE_TOTALS_DDL: tuple[str, ...] = (
    """CREATE TRIGGER trial_totals_insert AFTER INSERT ON trials BEGIN
        INSERT INTO trial_status_totals (project_id, status, trials, seconds)
        VALUES (new.project_id, new.status, 1, COALESCE(new.total_s, 0))
        ON CONFLICT (project_id, status) DO UPDATE SET trials = trials + 1, seconds = seconds + excluded.seconds;
    END""",
    """CREATE TRIGGER trial_totals_delete AFTER DELETE ON trials BEGIN
        UPDATE trial_status_totals SET trials = trials - 1, seconds = seconds - COALESCE(old.total_s, 0)
        WHERE project_id = old.project_id AND status = old.status;
    END""",
    """CREATE TRIGGER trial_totals_update AFTER UPDATE OF status, total_s ON trials BEGIN
        UPDATE trial_status_totals SET trials = trials - 1, seconds = seconds - COALESCE(old.total_s, 0)
        WHERE project_id = old.project_id AND status = old.status;
        INSERT INTO trial_status_totals (project_id, status, trials, seconds)
        VALUES (new.project_id, new.status, 1, COALESCE(new.total_s, 0))
        ON CONFLICT (project_id, status) DO UPDATE SET trials = trials + 1, seconds = seconds + excluded.seconds;
    END""",
)
SQLITE_TOTALS_DROP: tuple[str, ...] = tuple(
    f"DROP TRIGGER IF EXISTS trial_totals_{op}" for op in ("insert", "delete", "update")
)
POSTGRES_TOTALS_DDL: tuple[str, ...] = (
    """CREATE FUNCTION lineage_trial_totals() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE trial_status_totals t SET trials = t.trials - o.n, seconds = t.seconds - o.s
            FROM (SELECT project_id, status, COUNT(*) AS n, COALESCE(SUM(total_s), 0) AS s
                  FROM old_rows GROUP BY project_id, status) o
            WHERE t.project_id = o.project_id AND t.status = o.status;
        END IF;
        IF TG_OP IN ('UPDATE', 'INSERT') THEN
            INSERT INTO trial_status_totals (project_id, status, trials, seconds)
            SELECT project_id, status, COUNT(*), COALESCE(SUM(total_s), 0) FROM new_rows GROUP BY project_id, status
            ON CONFLICT (project_id, status) DO UPDATE
            SET trials = trial_status_totals.trials + EXCLUDED.trials,
                seconds = trial_status_totals.seconds + EXCLUDED.seconds;
        END IF;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER trial_totals_insert AFTER INSERT ON trials REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION lineage_trial_totals()",
    "CREATE TRIGGER trial_totals_update AFTER UPDATE ON trials REFERENCING OLD TABLE AS old_rows "
    "NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lineage_trial_totals()",
    "CREATE TRIGGER trial_totals_delete AFTER DELETE ON trials REFERENCING OLD TABLE AS old_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION lineage_trial_totals()",
)
POSTGRES_TOTALS_DROP: tuple[str, ...] = (
    *(f"DROP TRIGGER IF EXISTS trial_totals_{op} ON trials" for op in ("insert", "delete", "update")),
    "DROP FUNCTION IF EXISTS lineage_trial_totals()",
)
#: Fills the totals from the trials already stored (the migration, once).
TOTALS_BACKFILL = (
    "INSERT INTO trial_status_totals (project_id, status, trials, seconds) "
    "SELECT project_id, status, COUNT(*), COALESCE(SUM(total_s), 0) FROM trials GROUP BY project_id, status"
)


def status_totals(store: "Store", conn: Connection, project_id: int) -> dict[str, tuple[int, float]]:
    """``status -> (trials, sum of total_s)`` (the totals' rows: one per status)."""
    cursor = store._execute(
        conn, "SELECT status, trials, seconds FROM trial_status_totals WHERE project_id = ? AND trials > 0",
        (project_id,),
    )
    return {status: (int(count), float(seconds)) for status, count, seconds in cursor.fetchall()}


def total_seconds(store: "Store", conn: Connection, project_id: int) -> float:
    """The sum of ``total_s`` over the project's trials."""
    return sum(seconds for _, seconds in status_totals(store, conn, project_id).values())


def recent_status_counts(store: "Store", conn: Connection, project_id: int, limit: int) -> dict[str, int]:
    """``status -> trials`` among the project's newest ``limit`` trials."""
    cursor = store._execute(
        conn,
        "SELECT status, COUNT(*) FROM (SELECT status FROM trials WHERE project_id = ? "
        "ORDER BY seq DESC LIMIT ?) AS recent GROUP BY status",
        (project_id, limit),
    )
    return {status: int(count) for status, count in cursor.fetchall()}


def last_seq_not_in(store: "Store", conn: Connection, project_id: int, statuses: Sequence[str]) -> int | None:
    """The seq of the newest trial whose status is not one of ``statuses`` (None: none is)."""
    marks = ", ".join("?" * len(statuses))
    row = store._execute(
        conn,
        f"SELECT seq FROM trials WHERE project_id = ? AND status NOT IN ({marks}) ORDER BY seq DESC LIMIT 1",
        (project_id, *statuses),
    ).fetchone()
    return None if row is None else int(row[0])


def first_with_status(store: "Store", conn: Connection, project_id: int, status: str) -> Trial | None:
    """The earliest trial with ``status``."""
    return store._trial_where(conn, "project_id = ? AND status = ? ORDER BY seq LIMIT 1", (project_id, status))


# -- guardrail policies ----------------------------------------------------------------------


def guardrail_policy(store: "Store", conn: Connection, project_id: int) -> dict[str, Any] | None:
    """The project's guardrail row as a dict of :data:`_POLICY_COLUMNS`, None without one."""
    row = store._execute(
        conn, f"SELECT {', '.join(_POLICY_COLUMNS)} FROM guardrail_policies WHERE project_id = ?", (project_id,)
    ).fetchone()
    if row is None:
        return None
    values = dict(zip(_POLICY_COLUMNS, row))
    tripped = values["tripped"]
    values["tripped"] = json.loads(tripped) if isinstance(tripped, str) else (tripped or {})
    return values


def save_guardrail_policy(
    store: "Store", conn: Connection, project_id: int, *, max_crash_streak: int | None,
    max_trials_without_improvement: int | None, budget_hours: float | None,
) -> None:
    """Insert or replace the project's limits (its trips are kept; the caller re-evaluates)."""
    params = (max_crash_streak, max_trials_without_improvement, budget_hours, store._now(), project_id)
    updated = store._execute(
        conn,
        "UPDATE guardrail_policies SET max_crash_streak = ?, max_trials_without_improvement = ?, "
        "budget_hours = ?, updated_at = ? WHERE project_id = ?",
        params,
    )
    if updated.rowcount == 0:
        store._execute(
            conn,
            "INSERT INTO guardrail_policies (max_crash_streak, max_trials_without_improvement, budget_hours, "
            f"updated_at, project_id, tripped) VALUES (?, ?, ?, ?, ?, {_json_mark(store)})",
            (*params, "{}"),
        )


def save_tripped(store: "Store", conn: Connection, project_id: int, tripped: dict[str, Any]) -> None:
    store._execute(
        conn,
        f"UPDATE guardrail_policies SET tripped = {_json_mark(store)}, updated_at = ? WHERE project_id = ?",
        (json.dumps(tripped, sort_keys=True), store._now(), project_id),
    )


def delete_guardrail_policy(store: "Store", conn: Connection, project_id: int) -> bool:
    cursor = store._execute(conn, "DELETE FROM guardrail_policies WHERE project_id = ?", (project_id,))
    return cursor.rowcount > 0


def bump_revision(store: "Store", conn: Connection, project_id: int) -> None:
    """Move the project's revision (its prompt and pages show the guardrails: ETags change)."""
    store._execute(conn, "UPDATE projects SET revision = revision + 1, updated_at = ? WHERE id = ?",
                   (store._now(), project_id))


def _json_mark(store: "Store") -> str:
    return "?" if store.sqlite else "CAST(? AS jsonb)"
