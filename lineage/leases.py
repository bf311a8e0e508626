"""Running trials (``ledger.leases``): a trial under way, its owner's heartbeat, its lapse.

A trial recorded (or changed) with status ``running`` is under way: never the best,
never a failure (:class:`lineage.domain.FailureLabel`). Its start is ``created_at``; its
owner heartbeats (:meth:`Leases.heartbeat`: HTTP ``POST .../trials/{exp_id}/heartbeat``,
MCP ``heartbeat``, the trainer client's sender thread). Finishing it is an ordinary
change of its status (PATCH, MCP ``update_trial``).

The lapse rule: a running trial whose last heartbeat (none yet: its last write) is older
than its lease (a claim's own ``lease_s``, else the project's:
:func:`lineage.domain.lease_of`, default 10 minutes) becomes ``harness_abort`` with a
note saying since when it was silent.

The holder rule (:func:`check_holder`): a heartbeat or a finish names its owner, and only
the holder of a running trial may keep it or finish it. Another owner's, or a trial no
longer running (finished, or lapsed), is a :class:`Conflict` naming the trial, its owner
and its status, and nothing changes. A trial held by nobody ('') is taken by the first
owner that names itself. It is decided from the
database alone, so several servers sharing one PostgreSQL agree, and runs:

* lazily, before the reads that show running trials (the prompt, the summary, the
  pages): :func:`settle`, one index probe when nothing lapsed;
* in every heartbeat's write (a late heartbeat finds its trial ended, a 409);
* from each server's maintenance loop (:meth:`Leases.sweep`, all projects).

Each lapse is written under the project's lock (as every change of a trial is), and
only to a trial that is still running and silent then.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from lineage.domain import MAX_LONG_TEXT, MAX_SHORT_TEXT, FailureLabel, Lease, Project, Trial, lapse_note, lease_of
from lineage.errors import Conflict, InvalidInput, NotFound
from lineage.store import Store
from lineage.store.base import utcnow


def check_owner(owner: object) -> str | None:
    """A heartbeat's ``owner``: None (keep the stored one) or 1-512 characters of text."""
    if owner is None:
        return None
    if not isinstance(owner, str) or not owner.strip() or len(owner) > MAX_SHORT_TEXT or "\x00" in owner:
        raise InvalidInput("owner", f"must be 1-{MAX_SHORT_TEXT} characters of text without NUL")
    return owner


def check_holder(trial: Trial, holder: str, owner: str | None, *, action: str) -> None:
    """The holder rule (module doc) for ``action`` ("heartbeat", "finish") on ``trial``,
    held by ``holder`` ('' nobody), asked by ``owner`` (None: unnamed, as a trainer's old
    heartbeat): a :class:`Conflict` naming the trial, its owner and its status unless
    the trial is running and ``owner`` holds it (or nobody does, or it is unnamed)."""
    existing = {"exp_id": trial.exp_id, "owner": holder, "status": trial.status.value, "notes": trial.notes}
    if trial.status is not FailureLabel.RUNNING:
        ended = "its lease lapsed" if trial.status is FailureLabel.HARNESS_ABORT else "it was finished"
        raise Conflict(
            f"trial {trial.exp_id!r} (owner {holder or 'none'!r}) is {trial.status.value!r}, not running: "
            f"{ended}, so a {action} changes nothing; claim the idea again to run it",
            field="status",
            existing=existing,
        )
    if owner is not None and holder and owner != holder:
        raise Conflict(
            f"trial {trial.exp_id!r} is claimed by {holder!r}, not {owner!r}: only its owner may {action} it",
            field="owner",
            existing=existing,
        )


def lapse(store: Store, conn: Connection, project: Project, *, now: datetime | None = None) -> list[Trial]:
    """End the project's lapsed running trials, in the caller's write transaction (the
    project locked); the trials as they are now. ``now``: the clock (default: this one)."""
    ended = []
    for trial, last_sign, lease_s in store.leases.lapsed(conn, project, now or utcnow(), lease_of(project)):
        note = lapse_note(last_sign, lease_s)
        notes = f"{trial.notes}\n{note}" if trial.notes else note
        if len(notes) > MAX_LONG_TEXT:  # the note says why: it is the part that stays
            notes = notes[len(notes) - MAX_LONG_TEXT :]
        ended.append(
            store.trials.update_trial(conn, project, trial.with_changes(status=FailureLabel.HARNESS_ABORT, notes=notes))
        )
    return ended


def settle(store: Store, project_slug: str, *, now: datetime | None = None) -> list[Trial]:
    """Before a read that shows running trials: end the project's lapsed ones (a probe in
    a read transaction; a write only when one lapsed); the trials it ended."""
    now = now or utcnow()
    with store.read() as conn:
        project = store.projects.project(conn, project_slug)
        if not store.leases.any_lapsed(conn, project, now, lease_of(project)):
            return []
    with store.write() as conn:
        project, _, _ = store.projects.locked_project(conn, project_slug)
        return lapse(store, conn, project, now=now)


def settle_all(store: Store, *, now: datetime | None = None) -> list[Trial]:
    """:func:`settle` for every project that has a running trial; the trials it ended."""
    with store.read() as conn:
        slugs = store.leases.projects_running(conn)
    ended: list[Trial] = []
    for slug in slugs:
        try:
            ended += settle(store, slug, now=now)
        except NotFound:  # deleted meanwhile
            continue
    return ended


class Leases:
    """heartbeat, running, lease, settle, sweep."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def heartbeat(self, project_slug: str, exp_id: str, *, owner: str | None = None) -> Lease:
        """Mark ``exp_id`` alive now (and its ``owner``, when given); its lease, extended by
        its length. A trial that is not running (finished, or lapsed before this beat) or
        that another owner holds is a :class:`Conflict` (:func:`check_holder`), and
        nothing changes."""
        owner = check_owner(owner)
        with self.store.write() as conn:
            project, _, _ = self.store.projects.locked_project(conn, project_slug)
            lapse(self.store, conn, project)
            trial = self.store.trials.trial(conn, project, exp_id)
            check_holder(trial, self.store.leases.holder(conn, project, exp_id) or "", owner, action="heartbeat")
            self.store.leases.beat(conn, project, trial.exp_id, owner=owner, at=utcnow())
            lease = self.store.leases.lease(conn, project, trial.exp_id)
            assert lease is not None  # beaten in this transaction
            return lease

    def running(self, project_slug: str) -> list[Lease]:
        """The project's running trials (lapsed ones ended first), oldest first."""
        settle(self.store, project_slug)
        with self.store.read() as conn:
            return self.store.leases.running(conn, self.store.projects.project(conn, project_slug))

    def settle(self, project_slug: str, *, now: datetime | None = None) -> list[Trial]:
        """End the project's lapsed running trials (:func:`settle`); the trials it ended."""
        return settle(self.store, project_slug, now=now)

    def sweep(self, *, now: datetime | None = None) -> list[Trial]:
        """End the lapsed running trials of every project (a server's maintenance loop, the
        index page); the trials it ended."""
        return settle_all(self.store, now=now)
