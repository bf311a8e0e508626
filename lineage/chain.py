"""The lineage walk: which trial is the project's best, and the chain of parents to it.

Pure rules over rows the store reads: :func:`walk_chain` (root-first, never loops),
:func:`find_cycle` (for imports), and the two reads every wing shares,
:func:`current_best` (the best with its fallback) and :func:`chain_to`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from lineage.domain import Project, Trial

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from lineage.store import Store

def walk_chain(start: str, by_id: Mapping[str, Trial]) -> list[Trial]:
    """Root-first chain from ``start`` by parent pointers.

    Stops at a missing parent and at the first repeated trial, so a cycle in stored data
    can never loop (fieldkit's ``chain_to`` has the same stopping rules).
    """
    chain: list[Trial] = []
    seen: set[str] = set()
    current: str | None = start
    while current and current not in seen:
        seen.add(current)
        trial = by_id.get(current)
        if trial is None:
            break
        chain.append(trial)
        current = trial.parent_exp or None
    chain.reverse()
    return chain


def find_cycle(parents: Mapping[str, str]) -> list[str] | None:
    """A cycle in ``exp_id -> parent_exp`` pointers, as the list of its ids, or None.

    Linear time: each id is walked at most once (colouring by walk number).
    """
    state: dict[str, int] = {}
    for walk, start in enumerate(parents):
        path: list[str] = []
        current: str | None = start
        while current and current in parents and current not in state:
            state[current] = walk
            path.append(current)
            current = parents[current] or None
        if current and state.get(current) == walk:
            return path[path.index(current):]
    return None


def current_best(store: "Store", conn: "Connection", project: Project) -> Trial | None:
    """The project's best (``Store.best_scored`` under its policy), falling back to its
    first trial when nothing eligible is scored."""
    return store.best_scored(conn, project) or store.first_trial(conn, project)


def chain_to(store: "Store", conn: "Connection", project: Project, exp_id: str, *, brief: bool = False) -> list[Trial]:
    """Root-first chain of stored trials ending at ``exp_id`` (see :func:`walk_chain`)."""
    return walk_chain(exp_id, store.chain_rows(conn, project, exp_id, brief=brief))
