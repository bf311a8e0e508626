"""Trials (``ledger.trials``): the reads every user starts from.

Owns: the best trial, the branch tip, the chain to a trial, one trial (or None: :meth:`Trials.find_trial`),
its children, a plain filtered list. The rule of
"best" is :class:`lineage.domain.BestPolicy` with :func:`lineage.chain.current_best`'s
fallback; SQL is the store's.
"""

from __future__ import annotations

from typing import Any

from lineage.chain import chain_of, current_best
from lineage.domain import Trial
from lineage.store import Store


class Trials:
    """best, tip, first, chain, trial, trial_with_rerun, find_trial, children, list_trials."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def best(self, project_slug: str) -> Trial | None:
        with self.store.read() as conn:
            return current_best(self.store, conn, self.store.projects.project(conn, project_slug))

    def tip(self, project_slug: str) -> Trial | None:
        """The branch tip (the most recent keep or baseline): what a trial recorded
        without a parent forks from, on every face (``Store.trials.tip``)."""
        with self.store.read() as conn:
            return self.store.trials.tip(conn, self.store.projects.project(conn, project_slug))

    def first(self, project_slug: str) -> Trial | None:
        """The project's first trial that may stand in for the best (``Store.trials.first_trial``:
        never a crash, an abort or a running trial): the baseline a results file's rows name."""
        with self.store.read() as conn:
            return self.store.trials.first_trial(conn, self.store.projects.project(conn, project_slug))

    def chain(self, project_slug: str, exp_id: str | None = None) -> list[Trial]:
        """Root-first chain to ``exp_id`` (default: to the current best)."""
        with self.store.read() as conn:
            return chain_of(self.store, conn, self.store.projects.project(conn, project_slug), exp_id)

    def trial(self, project_slug: str, exp_id: str) -> Trial:
        with self.store.read() as conn:
            return self.store.trials.trial(conn, self.store.projects.project(conn, project_slug), exp_id)

    def trial_with_rerun(self, project_slug: str, exp_id: str) -> tuple[Trial, str | None]:
        """The trial and the exp_id it declared itself a rerun of when it was recorded
        (``rerun_of``, kept with its repeat keys: ``Store.repeats``; None: not declared),
        read together."""
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            trial = self.store.trials.trial(conn, project, exp_id)
            return trial, self.store.repeats.keys_of(conn, project.stored_id, int(trial.seq or 0))[1]

    def find_trial(self, project_slug: str, exp_id: str) -> Trial | None:
        """The trial ``exp_id`` names, or None where :meth:`trial` would raise NotFound."""
        with self.store.read() as conn:
            return self.store.trials.find_trial(conn, self.store.projects.project(conn, project_slug), exp_id)

    def children(self, project_slug: str, exp_id: str) -> list[Trial]:
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            exp_id = self.store.trials.trial(conn, project, exp_id).exp_id
            return self.store.trials.children(conn, project, exp_id)

    def list_trials(self, project_slug: str, **filters: Any) -> list[Trial]:
        with self.store.read() as conn:
            return self.store.trials.list_trials(conn, self.store.projects.project(conn, project_slug), **filters)
