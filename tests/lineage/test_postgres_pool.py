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
        ledger.create_project("p")
        ledger.record_trial("p", {"hypothesis": "first", "status": "baseline", "core_metric": 1.0})
        assert ledger.anonymous_access() == (True, False)
        with engine.connect() as a, engine.connect() as b:  # the pool holds two connections now
            a.execute(text("SELECT 1"))
            b.execute(text("SELECT 1"))
        database = engine.url.database
        admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            killed = conn.execute(text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                       "WHERE datname = :db AND pid <> pg_backend_pid()"), {"db": database}).scalar()
        admin.dispose()
        assert killed >= 2  # the pool held its connections, now dead (and pinged only after idling)

        assert ledger.anonymous_access() == (True, False)  # the access check, on a new connection
        result = ledger.record_trial("p", {"hypothesis": "second", "core_metric": 0.9, "status": "keep"},
                                     similar_prior=True)
        assert result.created and result.trial.exp_id == "001"
        assert [t.hypothesis for t in ledger.list_trials("p")] == ["first", "second"]
    finally:
        engine.dispose()
