"""GroupReads: what the records of a group read, read once for the group.

A new trial's record reads three things before it is written
(``Store.trials.new_trial_reads``): whether stored trials name it as their parent (an import's
orphans), its parent's chain link, and ``similar_prior``'s shortlist (the newest
:data:`~lineage.similar.PRIOR_RECENT` trials, and per band of its sketch the newest
:data:`~lineage.similar.PRIOR_PER_BAND` trials holding it). Alone, that is one round
trip a record on PostgreSQL and three statements (psycopg spends ~50 us of CPU on each).
On SQLite, where a read is a call in process, the items keep reading one by one: the
merge below cost more there than the reads it saves. On PostgreSQL, in a group
(:mod:`lineage.service.group_commit`) every item's sketch and the ids it may get are
known before the first is written, so the group reads them all at once, after its
context (:meth:`GroupReads.read`: one round trip, three statements), and each item is
answered from that and from the items written before it in the group:

* the trials a group writes are newer than every stored one, so an item's shortlist is
  the group's earlier items (newest first) ahead of the stored rows, cut at the same
  bounds, per part;
* a child's chain link is its parent's, one step on: read once per stored parent,
  known for the group's own trials;
* an id is named by stored trials or not (the group's own trials cannot name a later
  one: a new trial's parent must exist).

What is not covered (an id the group did not foresee, a parent not read) is read as
a lone record reads it, and when an item adopts stored orphans (their chain links are
rewritten) the links read so far are dropped. What each item is told is what it would
be told recorded alone, after the items before it: ``tests/lineage/test_group_commit.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import Any

from sqlalchemy import Connection

from lineage import similar
from lineage.domain import Project, Trial
from lineage.store import Store
from lineage.store.chain import next_link
from lineage.store.search import CandidateRow
from lineage.store.trials import NewTrialReads


@dataclass(slots=True)
class GroupReads:
    """The group's reads and the rows its items have written so far (module doc)."""

    #: the ids whose naming was read, and those stored trials name as their parent
    checked: frozenset[str]
    named: frozenset[str]
    #: a parent's exp_id -> the chain link ``(depth, skip)`` a new child of it gets
    links: dict[str, tuple[int, str]]
    #: the stored newest trials, and per sketch key the stored newest holding it; newest first
    recent: list[CandidateRow]
    by_band: dict[int, list[CandidateRow]]
    #: the keys whose stored trials were read (``by_band`` lacks a key none holds)
    bands: frozenset[int]
    #: the group's written trials, oldest first: ``(candidate row, sketch keys)``
    made: list[tuple[CandidateRow, frozenset[int]]] = field(default_factory=list)

    @classmethod
    def read(
        cls,
        store: Store,
        conn: Connection,
        project: Project,
        *,
        ids: Sequence[str],
        parents: Sequence[str],
        keys: Sequence[int],
    ) -> GroupReads:
        """Read, in one go (one round trip on PostgreSQL), which of ``ids`` stored trials
        name, the links of ``parents``, and the stored shortlist rows of ``keys``."""
        ids, parents, keys = sorted(set(ids)), sorted(set(parents) - {""}), sorted(set(keys))
        named = store.trials.parents_cursor(conn, project, ids) if ids else None
        links = store.trials.links_cursor(conn, project, parents) if parents else None
        bands = store.search.bands_cursor(
            conn, project.stored_id, keys, recent=similar.PRIOR_RECENT, per_band=similar.PRIOR_PER_BAND
        )
        named_ids = frozenset(store.trials.fetch_column(named)) if named is not None else frozenset()
        stored_links = {row[0]: (row[1], row[2]) for row in links.fetchall()} if links is not None else {}
        recent, by_band = store.search.fetch_bands(bands)
        return cls(
            frozenset(ids),
            named_ids,
            {parent: next_link(parent, stored_links.get(parent)) for parent in parents},
            recent,
            by_band,
            frozenset(keys),
        )

    def new_trial(
        self,
        store: Store,
        conn: Connection,
        project: Project,
        exp_id: str,
        parent_exp: str,
        prior_keys: Sequence[int] | None,
    ) -> NewTrialReads:
        """What :meth:`Store.trials.new_trial_reads` would read for the next item (module doc)."""
        named = exp_id in self.named if exp_id in self.checked else store.trials.has_children(conn, project, exp_id)
        link = self.links.get(parent_exp) if parent_exp else (1, "")
        if link is None:
            link = self.links[parent_exp] = store.chain.link_after(conn, project, parent_exp)
        if prior_keys is None:
            prior = None
        elif self.bands.issuperset(prior_keys):
            prior = self._shortlist(prior_keys)
        else:
            prior = store.search.prior_rows(
                conn, project.stored_id, prior_keys, recent=similar.PRIOR_RECENT, per_band=similar.PRIOR_PER_BAND
            )
        return NewTrialReads(named, link, prior)

    def _shortlist(self, keys: Sequence[int]) -> list[CandidateRow]:
        """``Store.search.prior_rows`` of ``keys`` now: the group's trials are newer than any stored."""
        mine = [row for row, _ in reversed(self.made)]
        rows: dict[int, CandidateRow] = {}
        for row in islice(chain(mine, self.recent), similar.PRIOR_RECENT):
            rows[row[0]] = row
        for key in keys:
            holding = (row for row, held in reversed(self.made) if key in held)
            for row in islice(chain(holding, self.by_band.get(key, ())), similar.PRIOR_PER_BAND):
                rows[row[0]] = row
        return sorted(rows.values(), key=lambda row: -row[0])

    def written(
        self, trial: Trial, concepts: str, keys: Sequence[int], link: tuple[int, str], *, adopted: bool
    ) -> None:
        """``trial`` was written with ``concepts``, sketch ``keys`` and chain ``link``;
        ``adopted``: it became the parent of stored trials (their links were rewritten)."""
        if adopted:
            self.links.clear()
        self.links[trial.exp_id] = next_link(trial.exp_id, link)
        assert trial.seq is not None, "a written trial has its seq"
        self.made.append(
            (
                (
                    trial.seq,
                    trial.exp_id,
                    trial.status.value,
                    trial.core_metric,
                    trial.delta_vs_best,
                    trial.hypothesis,
                    trial.notes,
                    concepts,
                ),
                frozenset(keys),
            )
        )

    def mark(self) -> tuple[int, dict[str, tuple[int, str]]]:
        """Where the group is, to go back to when an item is rolled back (:meth:`undo`)."""
        return len(self.made), dict(self.links)

    def undo(self, mark: tuple[int, dict[str, Any]]) -> None:
        count, links = mark
        del self.made[count:]
        self.links = links
