"""How a creation reads and writes inside its transaction: alone, in a group, in a batch.

:meth:`lineage.service.recording.RecordingUses.record_in` decides and writes one trial
the same way in every case; what differs is where its reads come from and where its
writes go, and that is a :class:`RecordMode`:

* :class:`Alone` — one record in a transaction of its own: every read is a statement.
* :class:`Shared` — the items of a group (:mod:`lineage.service.group_commit`) or of a
  batch asking ``similar_prior``: the best and the branch tip are read once and moved
  by each item as the database would answer; the search words (and, without
  ``similar_prior``, the sketches) are written once at the end; a group on PostgreSQL
  also answers each item's reads from :class:`~lineage.service.group_reads.GroupReads`.
* :class:`Bulk` — a batch without ``similar_prior``: besides :class:`Shared`, its rows
  are held back and inserted in one go before anything could read them, each parent's
  chain link is read once, and adoption checks wait for the end of the batch
  (:meth:`~lineage.service.batch.BatchUses.record_trials`).

The tests holding the modes to :class:`Alone`: ``tests/lineage/test_group_commit.py``,
``tests/lineage/test_batch_equivalence.py`` and ``tests/api/test_fast_record.py``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Connection

from lineage.domain import Project, Trial
from lineage.noise import NoiseFloor
from lineage.store import Store
from lineage.store.best import TIP_STATUSES
from lineage.store.chain import next_link
from lineage.store.trials import NewTrialReads

if TYPE_CHECKING:
    from lineage.service.group_reads import GroupReads


@dataclass(slots=True)
class Counters:
    """A locked project's ``next_seq`` and next numeric exp_id, as a write moves them."""

    next_seq: int
    next_number: int


class RecordMode(Protocol):
    """Where one creation's reads come from and its writes go (module doc)."""

    #: ids of trials this transaction stored that a look-up would not find yet
    held: Collection[str]

    def best(self, conn: Connection, project: Project) -> Trial | None:
        """The project's best now (before this trial)."""

    def tip(self, conn: Connection, project: Project) -> Trial | None:
        """The branch tip now (``Store.trials.tip``): what a parent left out forks from."""

    def floor(self, conn: Connection, project: Project) -> NoiseFloor:
        """The project's noise floor now (``Store.repeats.floor``)."""

    def regrouped(self) -> None:
        """A trial's repeat keys were written: the noise floor may have moved."""

    def sync(self, conn: Connection, exp_id: str | None = None) -> None:
        """Send held-back writes before a read could miss them: the look-up of ``exp_id``
        (None: of an Idempotency-Key, whose trial may be any earlier item)."""

    def reads(
        self, conn: Connection, project: Project, exp_id: str, parent_exp: str, prior_keys: Sequence[int] | None
    ) -> NewTrialReads:
        """What a new trial reads before it is written (``Store.trials.new_trial_reads``)."""

    def insert(
        self,
        conn: Connection,
        project: Project,
        trial: Trial,
        *,
        seq: int,
        concepts: str,
        reads: NewTrialReads,
        sketch: Sequence[int] | None,
        similar_prior: bool,
    ) -> Trial:
        """Write ``trial`` (``Store.trials.insert_trial``); the stored trial."""

    def stored(
        self, trial: Trial, *, best: Trial | None, concepts: str, keys: Sequence[int], reads: NewTrialReads
    ) -> None:
        """``trial`` was stored and ``best`` is the project's best after it."""


class Alone:
    """One record in its own transaction: every read asks the database."""

    held: Collection[str] = ()

    def __init__(self, store: Store) -> None:
        self.store = store

    def best(self, conn: Connection, project: Project) -> Trial | None:
        return self.store.trials.best_scored(conn, project)

    def tip(self, conn: Connection, project: Project) -> Trial | None:
        return self.store.trials.tip(conn, project)

    def floor(self, conn: Connection, project: Project) -> NoiseFloor:
        return self.store.repeats.floor(conn, project)

    def regrouped(self) -> None:
        pass

    def sync(self, conn: Connection, exp_id: str | None = None) -> None:
        pass

    def reads(
        self, conn: Connection, project: Project, exp_id: str, parent_exp: str, prior_keys: Sequence[int] | None
    ) -> NewTrialReads:
        # asked together: whether stored trials already name it as parent (for the cycle
        # check and the links the insert rewrites), its chain link, similar_prior's shortlist
        return self.store.trials.new_trial_reads(conn, project, exp_id, parent_exp, prior_keys)

    def insert(
        self,
        conn: Connection,
        project: Project,
        trial: Trial,
        *,
        seq: int,
        concepts: str,
        reads: NewTrialReads,
        sketch: Sequence[int] | None,
        similar_prior: bool,
    ) -> Trial:
        return self.store.trials.insert_trial(
            conn, project, trial, seq=seq, concepts=concepts, named=reads.named, link=reads.link, sketch=sketch
        )

    def stored(
        self, trial: Trial, *, best: Trial | None, concepts: str, keys: Sequence[int], reads: NewTrialReads
    ) -> None:
        pass


@dataclass(slots=True)
class Shared:
    """Items sharing one transaction (module doc): the best and the branch tip as the
    items move them, and the search words and sketches written once at the end."""

    store: Store
    current_best: Trial | None
    current_tip: Trial | None
    #: ``(search_text, project_id, seq, stored concepts)`` of the items whose words and
    #: sketch wait for :meth:`Store.trials.write_deferred`
    pending: list[tuple[str, int, int, str]] = field(default_factory=list)
    #: search texts whose words the vocabulary gets at the end (items whose sketch is
    #: written at once: they are searched by the next items' ``similar_prior``)
    terms: list[str] = field(default_factory=list)
    #: a group's reads, read once for the group (PostgreSQL); None: each item reads
    group: GroupReads | None = None
    held: Collection[str] = ()
    #: the noise floor as last read; None: read it at the next item (only an item that
    #: writes repeat keys moves it, and most carry none: a read an item was most of a
    #: batch's statements)
    current_floor: NoiseFloor | None = None

    def best(self, conn: Connection, project: Project) -> Trial | None:
        return self.current_best

    def tip(self, conn: Connection, project: Project) -> Trial | None:
        return self.current_tip

    def floor(self, conn: Connection, project: Project) -> NoiseFloor:
        if self.current_floor is None:
            self.current_floor = self.store.repeats.floor(conn, project)
        return self.current_floor

    def regrouped(self) -> None:
        self.current_floor = None

    def sync(self, conn: Connection, exp_id: str | None = None) -> None:
        pass

    def reads(
        self, conn: Connection, project: Project, exp_id: str, parent_exp: str, prior_keys: Sequence[int] | None
    ) -> NewTrialReads:
        if self.group is not None:  # read with the group's other items
            return self.group.new_trial(self.store, conn, project, exp_id, parent_exp, prior_keys)
        return self.store.trials.new_trial_reads(conn, project, exp_id, parent_exp, prior_keys)

    def insert(
        self,
        conn: Connection,
        project: Project,
        trial: Trial,
        *,
        seq: int,
        concepts: str,
        reads: NewTrialReads,
        sketch: Sequence[int] | None,
        similar_prior: bool,
    ) -> Trial:
        return self.store.trials.insert_trial(
            conn,
            project,
            trial,
            seq=seq,
            concepts=concepts,
            named=reads.named,
            link=reads.link,
            # searched by the next items' similar_prior: its sketch now, its words at the end
            deferred=None if similar_prior else self.pending,
            terms=self.terms,
            buffer=self.held_rows(),
            sketch=sketch,
        )

    def held_rows(self) -> list[tuple[Any, ...]] | None:
        """Where an item's row waits to be sent (:class:`Bulk`); None: sent at once."""
        return None

    def stored(
        self, trial: Trial, *, best: Trial | None, concepts: str, keys: Sequence[int], reads: NewTrialReads
    ) -> None:
        if self.group is not None:
            self.group.written(trial, concepts, keys, reads.link, adopted=reads.named)
        self.current_best = best
        if trial.status.value in TIP_STATUSES:
            self.current_tip = trial

    def checkpoint(self) -> tuple[Any, ...]:
        """Where the items are, to go back to when one is rolled back (:meth:`restore`)."""
        group = self.group.mark() if self.group is not None else None
        return self.current_best, self.current_tip, len(self.pending), len(self.terms), group

    def restore(self, mark: tuple[Any, ...]) -> None:
        self.current_best, self.current_tip, pending, terms, group = mark
        self.current_floor = None  # read again: the rolled-back item may have moved it
        del self.pending[pending:], self.terms[terms:]
        if self.group is not None:
            self.group.undo(group)


@dataclass(slots=True)
class Bulk(Shared):
    """A batch without ``similar_prior`` (module doc): rows held back, links read once a
    parent, no adoption check per item (the batch's own, at its end)."""

    #: the rows of the items stored so far, not yet sent (:meth:`sync`)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    #: the ids of the items stored, and the chain link a child of each parent gets
    made: set[str] = field(default_factory=set)
    links: dict[str, tuple[int, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.held = self.made

    def sync(self, conn: Connection, exp_id: str | None = None) -> None:
        if self.rows and (exp_id is None or exp_id in self.made):
            self.store.trials.insert_rows(conn, self.rows)
            self.rows.clear()

    def reads(
        self, conn: Connection, project: Project, exp_id: str, parent_exp: str, prior_keys: Sequence[int] | None
    ) -> NewTrialReads:
        link = self.links.get(parent_exp)
        if link is None:
            link = self.links[parent_exp] = self.store.chain.link_after(conn, project, parent_exp)
        return NewTrialReads(False, link, None)

    def held_rows(self) -> list[tuple[Any, ...]] | None:
        return self.rows

    def stored(
        self, trial: Trial, *, best: Trial | None, concepts: str, keys: Sequence[int], reads: NewTrialReads
    ) -> None:
        Shared.stored(self, trial, best=best, concepts=concepts, keys=keys, reads=reads)
        self.links[trial.exp_id] = next_link(trial.exp_id, reads.link)  # its children's link, without a read
        self.made.add(trial.exp_id)
