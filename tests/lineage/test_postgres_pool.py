"""PostgreSQL connections that died while pooled (a restarted or cut server): the pool
pings a connection only after it sat idle (lineage.db), so the first check of a request
finds a dead one and the ledger carries on with new connections, writes included."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from lineage import migrate
from lineage.db import make_engine
from lineage.service import Ledger
from tests.conftest import POSTGRES_ADMIN_URL


@pytest.mark.parametrize("backend", ["postgres"])
def test_connections_killed_while_pooled_are_replaced(fresh_db_url: str) -> None:
    engine = make_engine(fresh_db_url)
    migrate.upgrade(engine)
    ledger = Ledger(engine)
    try:
        ledger.projects.create_project("p")
        ledger.recording.record_trial("p", {"hypothesis": "first", "status": "baseline", "core_metric": 1.0})
        assert ledger.tokens.anonymous_access() == (True, False)
        with engine.connect() as a, engine.connect() as b:  # the pool holds two connections now
            a.execute(text("SELECT 1"))
            b.execute(text("SELECT 1"))
        database = engine.url.database
        admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            killed = conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = :db AND pid <> pg_backend_pid()"
                ),
                {"db": database},
            ).scalar()
        admin.dispose()
        assert killed >= 2  # the pool held its connections, now dead (and pinged only after idling)

        assert ledger.tokens.anonymous_access() == (True, False)  # the access check, on a new connection
        result = ledger.recording.record_trial(
            "p", {"hypothesis": "second", "core_metric": 0.9, "status": "keep"}, similar_prior=True
        )
        assert result.created and result.trial.exp_id == "001"
        assert [t.hypothesis for t in ledger.trials.list_trials("p")] == ["first", "second"]
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_pipelined_write_begins_with_its_statements_and_fails_whole(fresh_db_url: str) -> None:
    """A pipelined write sends its own BEGIN with its first statements (psycopg's would be
    a round trip alone): an error that surfaces only at COMMIT (a statement whose result
    nobody read) still rolls everything back, and the pooled connection comes back as it
    was, usable by the next write and in a transaction of its own."""
    engine = make_engine(fresh_db_url)
    migrate.upgrade(engine)
    ledger = Ledger(engine)
    store = ledger.store
    insert = "INSERT INTO ledger_settings (name, value, updated_at, updated_by) VALUES ('k', 'v', now(), 't')"
    try:
        ledger.projects.create_project("p")
        for _ in range(3):
            with pytest.raises(Exception, match="duplicate key"):
                with store.write(pipelined=True) as conn:
                    store.core.execute(conn, "UPDATE projects SET title = 'changed' WHERE slug = 'p'")
                    store.core.execute(conn, insert)
                    store.core.execute(conn, insert)  # read by nobody: fails at COMMIT
            assert ledger.projects.project("p").title == "p"
            assert store.peek("SELECT count(*) FROM ledger_settings WHERE name = 'k'")[0] == 0
        with store.write(pipelined=True) as conn:
            store.core.execute(conn, "UPDATE projects SET title = 'kept' WHERE slug = 'p'")
            store.core.execute(conn, "SELECT pg_sleep(0.01)").fetchone()
            # one transaction: its start (now()) is before this statement's, not the same
            one_transaction = store.core.execute(conn, "SELECT now() < statement_timestamp()").fetchone()[0]
        assert one_transaction
        assert ledger.projects.project("p").title == "kept"
        with engine.connect() as conn:
            driver = conn.connection.driver_connection
            assert (driver.autocommit, int(driver.info.transaction_status)) == (False, 0)
    finally:
        ledger.close()
