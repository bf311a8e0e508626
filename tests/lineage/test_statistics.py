"""PostgreSQL planner statistics kept fresh by the ledger (``lineage.db.refresh_statistics``):
a young ledger is planned with them, not without."""

from __future__ import annotations

import uuid

from sqlalchemy import text

from lineage import similar
from lineage.db import _STATISTICS_LOCK, STATISTICS_MIN_ROWS, make_engine, refresh_statistics
from lineage.service import Ledger


def _plan(engine, ledger: Ledger, project_id: int) -> str:  # type: ignore[no-untyped-def]
    """The plan of similar_prior's shortlist query, as EXPLAIN prints it."""
    keys = similar.sketch(similar.content_tokens("cosine warmup schedule for the optimizer"))
    captured: list[str] = []
    with ledger.store.read() as conn:
        store = ledger.store
        original = store.core.execute

        def explain(conn, sql, params=()):  # type: ignore[no-untyped-def]
            rows = original(conn, "EXPLAIN " + sql, params).fetchall()
            captured.append("\n".join(row[0] for row in rows))
            return original(conn, sql, params)

        store.core.execute = explain  # type: ignore[method-assign]
        try:
            store.search.prior_rows(
                conn, project_id, keys, recent=similar.PRIOR_RECENT, per_band=similar.PRIOR_PER_BAND
            )
        finally:
            del store.core.execute
    return captured[0]


def test_stale_tables_are_analyzed_once_and_then_planned_by_their_index(fresh_db_url: str, backend: str) -> None:
    ledger = Ledger.open(fresh_db_url)
    try:
        if backend == "sqlite":
            assert refresh_statistics(ledger.engine) == []  # SQLite: nothing to do
            return
        ledger.projects.create_project("p")
        ledger.recording.record_trials(
            "p",
            [
                {"status": "discard", "core_metric": i / 1000, "hypothesis": f"idea {i} warmup"}
                for i in range(STATISTICS_MIN_ROWS * 3)
            ],
        )
        project_id = ledger.projects.project("p").id
        with ledger.engine.connect() as conn:  # the counters reach pg_stat_user_tables at once
            conn.execute(text("SELECT pg_stat_force_next_flush()"))
        assert "parent_exp" in _plan(ledger.engine, ledger, project_id)  # planned without statistics
        refreshed = refresh_statistics(ledger.engine)
        assert {"trials", "trial_sketch"} <= set(refreshed)
        with ledger.engine.connect() as conn:
            analyzed = (
                conn.execute(
                    text(
                        "SELECT relname FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL"
                        " AND relname IN ('trials', 'trial_sketch')"
                    )
                )
                .scalars()
                .all()
            )
        assert sorted(analyzed) == ["trial_sketch", "trials"]
        assert refresh_statistics(ledger.engine) == []  # nothing changed since
        plan = _plan(ledger.engine, ledger, project_id)
        assert "uq_trials_project_id_seq" in plan and "parent_exp" not in plan, plan
    finally:
        ledger.close()


def test_a_second_server_skips_while_one_refreshes(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    other = make_engine(postgres_url)
    try:
        with other.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _STATISTICS_LOCK})
            assert refresh_statistics(engine) == []
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _STATISTICS_LOCK})
    finally:
        engine.dispose()
        other.dispose()


def test_a_pipelined_write_runs_on_generic_plans_and_leaves_the_session_as_it_was(postgres_url: str) -> None:
    """similar_prior's shortlist was re-planned on every record (custom plans: 0.9 ms of
    planning for 0.25 ms of work); a record's transaction uses the cached generic plans."""
    ledger = Ledger.open(postgres_url)
    try:
        with ledger.store.write(pipelined=True) as conn:
            inside = ledger.store.core.execute(conn, "SHOW plan_cache_mode").fetchone()[0]
        with ledger.store.read() as conn:
            after = conn.execute(text("SHOW plan_cache_mode")).scalar()
        assert (inside, after) == ("force_generic_plan", "auto")
        slug = f"plans-{uuid.uuid4().hex[:8]}"  # the session's database is shared
        ledger.projects.create_project(slug)
        for i in range(8):  # psycopg prepares a statement from its 6th execution
            ledger.recording.record_trial(
                slug, {"status": "discard", "core_metric": i / 10, "hypothesis": f"warmup idea {i}"}, similar_prior=True
            )
        with ledger.store.write(pipelined=True) as conn:
            plans = ledger.store.core.execute(
                conn,
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE starts_with(statement, 'SELECT t.seq, t.exp_id')",
            ).fetchall()
        # the pool's connections each prepared it; none planned it again per execution
        assert plans and all(custom == 0 for _, custom in plans), plans
    finally:
        ledger.close()
