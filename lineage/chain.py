"""The lineage walk: which trial is the project's best, and the chain of parents to it.

Pure rules over rows the store reads: :func:`walk_chain` (root-first, never loops),
:func:`find_cycle` (for imports), and the reads every wing shares,
:func:`current_best` (the best with its fallback) and :func:`chain_to` (a whole chain).

The pages read only the part of a chain they show, on the stored links of
:mod:`lineage.store.chain`: :func:`chain_length`, :func:`chain_slice` (any run of a
chain, root-first), :func:`chain_ends` (:class:`ChainView`: its first and last trials and
its length) and :func:`on_chain`. Where the links are unknown (depth 0) they walk.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

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
            return path[path.index(current) :]
    return None


def current_best(store: Store, conn: Connection, project: Project) -> Trial | None:
    """The project's best (``Store.trials.best_scored`` under its policy), falling back to its
    first trial when nothing eligible is scored."""
    return store.trials.best_scored(conn, project) or store.trials.first_trial(conn, project)


def chain_of(store: Store, conn: Connection, project: Project, exp_id: str | None = None) -> list[Trial]:
    """Root-first chain to ``exp_id`` (an id as shown finds its trial; default: to the
    current best; no best: empty)."""
    if exp_id is None:
        best = current_best(store, conn, project)
        if best is None:
            return []
        exp_id = best.exp_id
    else:
        exp_id = store.trials.trial(conn, project, exp_id).exp_id
    return chain_to(store, conn, project, exp_id)


def chain_to(store: Store, conn: Connection, project: Project, exp_id: str, *, brief: bool = False) -> list[Trial]:
    """Root-first chain of stored trials ending at ``exp_id`` (see :func:`walk_chain`)."""
    return walk_chain(exp_id, store.trials.chain_rows(conn, project, exp_id, brief=brief))


@dataclass(frozen=True, slots=True)
class ChainView:
    """A chain as a page shows it: its first trials, its last ones (root-first both) and
    its length; ``hidden`` trials lie between (none when ``tail`` is empty: ``head`` is
    the whole chain)."""

    head: tuple[Trial, ...]
    tail: tuple[Trial, ...]
    length: int

    @property
    def hidden(self) -> int:
        return self.length - len(self.head) - len(self.tail)

    @property
    def shown(self) -> tuple[Trial, ...]:
        return self.head + self.tail


def _walked(store: Store, conn: Connection, project: Project, exp_id: str) -> list[Trial]:
    return walk_chain(exp_id, store.trials.chain_tail(conn, project, exp_id, project.trial_count + 1))


def chain_length(store: Store, conn: Connection, project: Project, exp_id: str) -> int:
    """How many trials the chain ending at ``exp_id`` has (its stored depth)."""
    depth = store.chain.chain_depth(conn, project, exp_id)
    return depth if depth > 0 else len(store.chain.chain_ids(conn, project, exp_id, project.trial_count + 1))


def chain_slice(
    store: Store, conn: Connection, project: Project, exp_id: str, start: int, count: int, *, length: int | None = None
) -> list[Trial]:
    """The trials at positions ``start`` to ``start + count - 1`` (0: the root) of the chain
    ending at ``exp_id``, root-first, ``extra`` without ``_git.patch``: one hop query to
    the last of them and ``count`` look-ups (``length``: the chain's, when known)."""
    length = chain_length(store, conn, project, exp_id) if length is None else length
    end = min(length, start + count)
    start = max(0, start)
    if start >= end:
        return []
    anchor = exp_id if end == length else store.chain.ancestor_at(conn, project, exp_id, end)
    if anchor is None:  # links unknown (a cycle in older data): walk it whole
        return _walked(store, conn, project, exp_id)[start:end]
    return walk_chain(anchor, store.trials.chain_tail(conn, project, anchor, end - start))


def chain_ends(
    store: Store, conn: Connection, project: Project, exp_id: str, *, head: int = 5, tail: int = 15, fold: int = 5
) -> ChainView:
    """The chain ending at ``exp_id`` as :class:`ChainView`: whole when it has at most
    ``head + tail + fold`` trials, else its first ``head`` and last ``tail``."""
    length = chain_length(store, conn, project, exp_id)
    if length <= head + tail + fold:
        return ChainView(tuple(chain_slice(store, conn, project, exp_id, 0, length, length=length)), (), length)
    return ChainView(
        tuple(chain_slice(store, conn, project, exp_id, 0, head, length=length)),
        tuple(chain_slice(store, conn, project, exp_id, length - tail, tail, length=length)),
        length,
    )


def on_chain(store: Store, conn: Connection, project: Project, trial: str, exp_id: str) -> bool:
    """Whether ``trial`` is on the chain ending at ``exp_id`` (it included)."""
    if trial == exp_id:
        return True
    depth = store.chain.chain_depth(conn, project, trial)
    if depth <= 0:
        return any(t.exp_id == trial for t in _walked(store, conn, project, exp_id))
    return store.chain.ancestor_at(conn, project, exp_id, depth) == trial
