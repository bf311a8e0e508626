"""GroupCommitUses: single-trial records that arrive together share one transaction.

Owns :meth:`GroupCommitUses.record_group`: several *independent* single records of one
project (the requests a server has in hand at once) written in one transaction, each
with the single record's answer and each succeeding or failing on its own. What a
request is told is exactly what :meth:`~lineage.service.recording.RecordingUses.record_trial`
would have told it had the requests come one after the other in this order: the same
ids, parents, deltas, ``similar_prior``, idempotent replays, webhook events and
guardrail trips, per trial.

What the group shares is the cost around the trials: one ``BEGIN`` and project lock,
one read of the best and of the webhooks, one move of the project's counters, one
commit (on PostgreSQL the commit's flush to disk is most of a lone record's time).

An item refused by the ledger's rules (:class:`~lineage.errors.LedgerError`: a bad
field, a conflict) gets its error and the items around it are stored: the group is
written without savepoints first (two statements an item fewer), and when an item is
refused, again with each item under a savepoint, rolled back to it alone when refused.
Any other error (the database's) rolls the whole transaction back, and then each item
is recorded alone, so it is told what it would have been told alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from lineage.auth import ANONYMOUS_WRITES, Role, Unauthorized, check_access, writes_open
from lineage.domain import Project, RecordResult, next_exp_id
from lineage.errors import LedgerError, NotFound
from lineage.monitor import guardrails
from lineage.service.group_reads import GroupReads
from lineage.service.record_modes import Counters, Shared
from lineage.service.record_rules import Draft, draft_record
from lineage.service.recording import RecordingUses
from lineage.store import Store
from lineage.store.best import RecordContext

#: The most records one group's transaction holds (the rest wait for the next group).
MAX_GROUP = 64


@dataclass(frozen=True, slots=True)
class RecordRequest:
    """One single-trial record as a face received it: the body, its Idempotency-Key,
    whether the answer carries ``similar_prior``, and whether it came without a token
    from a caller that may write only while the ledger takes anonymous writes
    (``anonymous``: checked in the group's transaction, see :meth:`GroupCommitUses.record_group`)."""

    fields: Mapping[str, Any]
    idempotency_key: str | None = None
    similar_prior: bool = False
    anonymous: bool = False


#: An item's outcome: its result, or the ledger's refusal of it (or, where the group fell
#: back to single records, the error its own transaction met).
Outcome = RecordResult | Exception


def _closed() -> Unauthorized:
    """What a write without a token is told while the ledger takes no anonymous writes."""
    try:
        check_access(None, Role.WRITER, anonymous_read=False, exposed=False, ledger_open=lambda: False)
    except Unauthorized as refused:
        return refused
    raise AssertionError("check_access let a closed ledger take an anonymous write")  # pragma: no cover


def _draft(project: Project, request: RecordRequest) -> Draft | None:
    """The item's :class:`Draft`, None for a body the recording rules refuse (the item is
    refused at its turn, by the same rules)."""
    try:
        return draft_record(project, request.fields, sketch=True)
    except LedgerError:
        return None


def _read_together(
    store: Store,
    conn: Connection,
    project: Project,
    next_number: int,
    context: RecordContext,
    drafts: Sequence[Draft | None],
) -> GroupReads:
    """What the group's items will read (:mod:`lineage.service.group_reads`): the ids
    they may be given (those they name, the next numbers), their parents (those they
    name, and the branch tip, which a parent left out defaults to), their
    sketches."""
    made = [draft for draft in drafts if draft is not None]
    ids = [draft.prepared.body["exp_id"] for draft in made if isinstance(draft.prepared.body.get("exp_id"), str)]
    ids += [next_exp_id(number - 1 if number else None) for number in range(next_number, next_number + len(drafts))]
    parents = [draft.proposed.parent_exp for draft in made if not draft.prepared.parent_omitted]
    parents += [trial.exp_id for trial in (context.best, context.tip) if trial is not None]
    keys = [key for draft in made for key in draft.keys or ()]
    return GroupReads.read(store, conn, project, ids=ids, parents=parents, keys=keys)


class _Refused(Exception):
    """An item of a group written without savepoints was refused (the group is redone with them)."""


class GroupCommitUses(RecordingUses):
    """record_group."""

    def record_group(self, project_slug: str, requests: Sequence[RecordRequest]) -> list[Outcome]:
        """Record each of ``requests`` (at most :data:`MAX_GROUP`) in order, in one
        transaction; the outcome of each, in order (see the module doc).

        An ``anonymous`` request is refused with :class:`~lineage.auth.Unauthorized` (what
        :func:`~lineage.auth.check_access` says to a write without a token) unless the
        ledger takes anonymous writes, read in the group's transaction with the project
        (one round trip on PostgreSQL, not one a request before it), and before it: a
        closed ledger refuses such a request for a missing project too."""
        if len(requests) > MAX_GROUP:
            raise ValueError(f"a group holds at most {MAX_GROUP} records, got {len(requests)}")
        try:
            try:
                return self._together(project_slug, requests, savepoints=False)
            except _Refused as refused:
                if len(requests) == 1:  # nothing else to keep: the refusal is the answer
                    assert isinstance(refused.__cause__, LedgerError)
                    return [refused.__cause__]
                return self._together(project_slug, requests, savepoints=True)  # each under a savepoint
        except LedgerError as error:  # the project itself (gone, say): every item is told
            return [error] * len(requests)
        except Exception:  # the database's: raised to a lone record, else what each would be told alone
            if len(requests) == 1:
                raise
            return [self._alone(project_slug, request) for request in requests]

    def _alone(self, project_slug: str, request: RecordRequest) -> Outcome:
        """``request`` recorded in a transaction of its own; any error is its outcome."""
        try:
            return self.record_trial(
                project_slug,
                request.fields,
                idempotency_key=request.idempotency_key,
                similar_prior=request.similar_prior,
            )
        except Exception as error:  # noqa: BLE001 - told to its request (RecordGroups raises it there)
            return error

    def _together(self, project_slug: str, requests: Sequence[RecordRequest], *, savepoints: bool) -> list[Outcome]:
        """The group in one transaction. ``savepoints``: each item under its own, so a
        refused item is rolled back alone; without (the common case, two statements an
        item fewer), a refused item raises :class:`_Refused` and rolls back the group."""
        outcomes: list[Outcome] = []
        with self.store.write(pipelined=True) as conn:
            access = (
                self.store.tokens.access_cursor(conn, ANONYMOUS_WRITES)
                if any(request.anonymous for request in requests)
                else None
            )
            locked = self.store.projects.lock_cursor(conn, project_slug)
            closed = access is not None and not writes_open(*self.store.tokens.fetch_access(access))
            try:
                project, next_seq, next_number = self.store.projects.fetch_locked(locked, project_slug)
            except NotFound as missing:
                return [_closed() if closed and request.anonymous else missing for request in requests]
            counters = Counters(next_seq, next_number)
            context = self.store.trials.record_context(conn, project, tip=bool(next_seq))
            if self.store.sqlite:  # reads are calls in process: cheaper one item at a time
                drafts: list[Draft | None] = [None] * len(requests)  # each item drafts itself
                group = None
            else:  # the items' reads at once: one round trip for the group, not one an item
                drafts = [_draft(project, request) for request in requests]
                group = _read_together(self.store, conn, project, next_number, context, drafts)
            mode = Shared(self.store, context.best, context.tip, group=group)
            subscribed, policy = context.hooks, context.policy
            created = 0
            for i, request in enumerate(requests):
                if closed and request.anonymous:
                    outcomes.append(_closed())
                    continue
                if request.similar_prior and mode.pending:  # it searches the items before it
                    self.store.trials.write_deferred(conn, mode.pending)
                    mode.pending.clear()
                before = Counters(counters.next_seq, counters.next_number), mode.checkpoint()
                savepoint = f"record_{i}"
                if savepoints:
                    self.store.savepoint(conn, savepoint)
                try:
                    result = self.record_in(
                        conn,
                        project,
                        counters,
                        request.fields,
                        mode=mode,
                        idempotency_key=request.idempotency_key,
                        similar_prior=request.similar_prior,
                        draft=drafts[i],
                    )
                    if result.created:
                        created += 1
                        # the trips a guardrail records are read back by the next item's check:
                        # the row read before the group is stale once an item may have tripped
                        # one, so it is read again; a project without guardrails has none to read
                        hooks_policy = policy if policy is None else guardrails.Unread.POLICY
                        self._events_of(
                            conn,
                            project,
                            result,
                            trial_count=counters.next_seq,
                            subscribed=subscribed,
                            policy=hooks_policy,
                        )
                except LedgerError as error:
                    if not savepoints:
                        raise _Refused from error
                    self.store.rollback_to(conn, savepoint)
                    counters = before[0]
                    mode.restore(before[1])
                    outcomes.append(error)
                    continue
                if savepoints:
                    self.store.release(conn, savepoint)
                outcomes.append(result)
            self.store.trials.write_deferred(conn, mode.pending)
            self.store.trials.write_terms(conn, mode.terms)
            if created:
                self.store.projects.advance_counters(conn, project, rows=created, exp_number=counters.next_number)
        return outcomes
