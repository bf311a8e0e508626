"""LedgerCore: the ledger on one database, and the reads every wing starts from.

Owns: opening and closing (:meth:`LedgerCore.open`, schema upgrade included), the best
trial, the chain to a trial, one trial, its children, a plain filtered list. The rule of
"best" is :class:`lineage.domain.BestPolicy` with :func:`lineage.chain.current_best`'s
fallback; SQL is the store's.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from lineage import migrate
from lineage.chain import chain_to, current_best
from lineage.db import make_engine
from lineage.domain import Trial
from lineage.store import Store


class LedgerCore:
    """The ledger on one database. Stateless beyond its engine: safe to run many of."""

    engine: Engine
    store: Store

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.store = Store(engine)

    @classmethod
    def open(cls, db: str | None = None, *, upgrade: bool = True, wal_autocheckpoint: int | None = None) -> LedgerCore:
        """Open ``db`` (path or URL; default ./lineage.db) and bring its schema to head.
        ``wal_autocheckpoint``: SQLite only (``lineage.db.make_engine``)."""
        engine = make_engine(db, wal_autocheckpoint=wal_autocheckpoint)
        if upgrade:
            migrate.upgrade(engine)
        return cls(engine)

    def close(self) -> None:
        self.engine.dispose()

    def best(self, project_slug: str) -> Trial | None:
        with self.store.read() as conn:
            return current_best(self.store, conn, self.store.projects.project(conn, project_slug))

    def chain(self, project_slug: str, exp_id: str | None = None) -> list[Trial]:
        """Root-first chain to ``exp_id`` (default: to the current best)."""
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            if exp_id is None:
                best = current_best(self.store, conn, project)
                if best is None:
                    return []
                exp_id = best.exp_id
            else:
                exp_id = self.store.trials.trial(conn, project, exp_id).exp_id
            return chain_to(self.store, conn, project, exp_id)

    def trial(self, project_slug: str, exp_id: str) -> Trial:
        with self.store.read() as conn:
            return self.store.trials.trial(conn, self.store.projects.project(conn, project_slug), exp_id)

    def children(self, project_slug: str, exp_id: str) -> list[Trial]:
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            exp_id = self.store.trials.trial(conn, project, exp_id).exp_id
            return self.store.trials.children(conn, project, exp_id)

    def list_trials(self, project_slug: str, **filters: Any) -> list[Trial]:
        with self.store.read() as conn:
            return self.store.trials.list_trials(conn, self.store.projects.project(conn, project_slug), **filters)
