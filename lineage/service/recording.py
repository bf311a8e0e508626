"""RecordingUses: recording and changing one trial, idempotently and in one transaction.

Owns :meth:`RecordingUses.record_trial` (next exp_id, the parent default, references
and cycle checks, ``delta_vs_best`` from the best before, idempotent replay by exp_id or
Idempotency-Key, the outbox events and guardrail trips of a new trial),
:meth:`RecordingUses.update_trial`, and :meth:`RecordingUses.record_in`, the one
creation every writer runs: decide (:meth:`~RecordingUses.decide`), then write
(:meth:`~RecordingUses.write`). Where its reads come from and its writes go (alone, in a
group, in a batch) is its :class:`~lineage.service.record_modes.RecordMode`; the rules
applied to a body before anything is read are :mod:`lineage.service.record_rules`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from lineage import similar
from lineage.domain import (
    Project,
    RecordResult,
    Trial,
    auto_verdict,
    beats_best,
    check_idempotency_key,
    metric_delta,
    next_exp_id,
)
from lineage.errors import Conflict, InvalidInput
from lineage.monitor import guardrails, hooks
from lineage.noise import NoiseFloor, judge
from lineage.service.knobs import tried as tried_before
from lineage.service.record_modes import Alone, Counters, RecordMode
from lineage.service.record_rules import (
    IDEMPOTENT_FIELDS,
    REPORTED_METRIC_KEY,
    Draft,
    PreparedRecord,
    draft_record,
    prepare_record,
    replay_result,
    request_hash,
    same_body,
    same_field,
    trial_body_hash,
)
from lineage.service.updates import Updated, update_locked
from lineage.similar import Candidate, Similar
from lineage.store import Store
from lineage.store.trials import NewTrialReads

__all__ = [
    "REPORTED_METRIC_KEY",
    "Counters",
    "Draft",
    "PreparedRecord",
    "RecordingUses",
    "Updated",
    "draft_record",
    "prepare_record",
    "rank_similar_prior",
]


@dataclass(frozen=True, slots=True)
class Decision:
    """What :meth:`RecordingUses.decide` settled for a new trial, before it is written:
    the trial (its id, parent and delta), the best before it, what it read, and what
    the writer is told."""

    trial: Trial
    best_before: Trial | None
    #: the parent the ledger chose for a parent left out (None: the writer's own)
    defaulted: Trial | None
    reads: NewTrialReads
    #: the sketch keys the stored trial gets (None: made later, with its words)
    sketch: list[int] | None
    query: tuple[str, list[str]] | None
    key: str | None
    key_hash: str
    #: the writer asked for ``similar_prior`` (its words and sketch are searched by the next trials)
    similar_prior: bool
    #: the project's noise floor before this trial (the verdict's, and the answer's)
    floor: NoiseFloor
    #: the stored trial a declared ``rerun_of`` names (None: not declared)
    rerun_target: Trial | None = None


def rank_similar_prior(
    store: Store,
    conn: Connection,
    project: Project,
    trial: Trial,
    concepts: str | None = None,
    rows: Sequence[Any] | None = None,
    query: tuple[str, list[str]] | None = None,
) -> tuple[Similar, ...]:
    """The earlier trials close to ``trial`` (``lineage.similar``, "Candidates of
    similar_prior"): ranked on a bounded shortlist, the newest trials and those
    sharing a band of its concepts' sketch. ``concepts``: the trial's
    ``stored_concepts``, when computed already (the query is their union); ``rows``:
    the shortlist, when read already (``Store.trials.new_trial_reads``); ``query``: its
    :func:`~lineage.similar.prior_query`, when computed already."""
    text, words = query if query is not None else similar.prior_query(trial.hypothesis, trial.notes, concepts)
    if not words:
        return ()
    if rows is None:
        rows = store.search.prior_rows(
            conn,
            project.stored_id,
            similar.sketch(words),
            recent=similar.PRIOR_RECENT,
            per_band=similar.PRIOR_PER_BAND,
        )
    return tuple(
        similar.rank(
            text,
            [Candidate(*row) for row in rows],
            limit=similar.PRIOR_LIMIT,
            min_score=similar.PRIOR_THRESHOLD,
            query_concepts=words,
        )
    )


class RecordingUses:
    """record_trial, update_trial, and the one creation they and the batch and group run."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def record_trial(
        self,
        project_slug: str,
        fields: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        similar_prior: bool = False,
        key_request: Mapping[str, Any] | None = None,
    ) -> RecordResult:
        """Record one trial, idempotently.

        ``exp_id`` omitted: the next free numeric id is allocated atomically. ``exp_id``
        already stored with the same fields: the stored trial comes back with
        ``created=False``. Stored with different fields: :class:`Conflict` with both.
        ``delta_vs_best`` is computed here from the best before this trial; a value the
        writer sent is ignored.

        ``idempotency_key``: the client's key for this creation, stored in the same
        transaction as the trial. A retry with the same key and the same fields gets the
        trial the first call stored (``created=False``), also when its exp_id was
        allocated; the same key with other fields is a :class:`Conflict` with both.
        ``key_request``: what the writer asked for, when ``fields`` hold more that it
        derived from the ledger's state (``lineage record``: its options, while ``fields``
        add the parent and the row number it read): the key is compared on that instead.

        ``similar_prior``: also find the earlier trials whose hypothesis and notes are
        close to the new trial's (``RecordResult.similar_prior``), in the same
        transaction, so they are exactly the trials recorded before it.
        """
        with self.store.write(pipelined=True) as conn:
            project, next_seq, next_number = self.store.projects.locked_project(conn, project_slug)
            return self.record_locked(
                conn,
                project,
                Counters(next_seq, next_number),
                fields,
                idempotency_key=idempotency_key,
                similar_prior=similar_prior,
                key_request=key_request,
            )

    def record_locked(
        self,
        conn: Connection,
        project: Project,
        counters: Counters,
        fields: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        similar_prior: bool = False,
        key_request: Mapping[str, Any] | None = None,
    ) -> RecordResult:
        """:meth:`record_trial` inside the caller's write transaction, the project locked
        (``counters``: its ``locked_project`` counters), with the counters advanced and the
        new trial's events: a use-case that decides more in the same transaction (a
        claim) records through this."""
        result = self.record_in(
            conn,
            project,
            counters,
            fields,
            mode=Alone(self.store),
            idempotency_key=idempotency_key,
            similar_prior=similar_prior,
            key_request=key_request,
        )
        if result.created:
            self.store.projects.advance_counters(conn, project, rows=1, exp_number=counters.next_number)
            self._after_record(
                conn, project, result.trial, result.best_before, result.is_new_best, trial_count=counters.next_seq
            )
        return result

    def record_in(
        self,
        conn: Connection,
        project: Project,
        counters: Counters,
        fields: Mapping[str, Any],
        *,
        mode: RecordMode,
        idempotency_key: str | None = None,
        similar_prior: bool = False,
        draft: Draft | None = None,
        key_request: Mapping[str, Any] | None = None,
    ) -> RecordResult:
        """One creation inside the caller's write transaction (the project locked):
        decide, then write. ``draft``: :func:`draft_record` of ``fields``, when the
        caller made it already. ``counters`` move on when a trial is stored; the caller
        advances the project's counters and runs the events and guardrails."""
        if draft is None:
            draft = draft_record(project, fields, sketch=bool(similar_prior and counters.next_seq))
        decided = self.decide(conn, project, counters, draft, mode, idempotency_key, similar_prior, key_request)
        if isinstance(decided, RecordResult):  # a replay: nothing to write
            return decided
        return self.write(conn, project, counters, draft, decided, mode)

    def decide(
        self,
        conn: Connection,
        project: Project,
        counters: Counters,
        draft: Draft,
        mode: RecordMode,
        idempotency_key: str | None,
        similar_prior: bool,
        key_request: Mapping[str, Any] | None = None,
    ) -> Decision | RecordResult:
        """What a creation will store, or the stored answer of a replay (by
        Idempotency-Key or exp_id): its id (the next free number when none was sent),
        its parent (a parent left out: the branch tip, ``Store.trials.tip``; none: a root),
        the references' checks, the best before it and its delta."""
        prepared, proposed = draft.prepared, draft.proposed
        body = prepared.body
        key = check_idempotency_key(idempotency_key) if idempotency_key is not None else None
        key_hash = (
            ""
            if key is None
            else request_hash(key_request)
            if key_request is not None
            else trial_body_hash(
                proposed, body.get("exp_id"), prepared.parent_omitted, prepared.keep_margin, prepared.rerun_of
            )
        )
        if key is not None:
            mode.sync(conn)  # the key's trial may be an earlier item's
            keyed = self._keyed_replay(conn, project, key, key_hash, proposed, body, prepared)
            if keyed is not None:
                return keyed
        # what the ledger decides below, applied in one copy of the proposed trial
        settled: dict[str, Any] = {}
        exp_id, parent_exp = proposed.exp_id, proposed.parent_exp
        if not body.get("exp_id"):
            # above every numeric id stored so far, so it cannot be taken
            exp_id = settled["exp_id"] = next_exp_id(counters.next_number - 1 if counters.next_number else None)
        else:
            mode.sync(conn, exp_id)
            existing = self.store.trials.find_trial(conn, project, exp_id)
            if existing is not None:
                replayed = self._replayed(project, existing, proposed, prepared)
                self._remember_key(conn, project, key, key_hash, existing.exp_id)
                return replayed
        rerun_target = self._rerun_target(conn, project, prepared.rerun_of, mode) if prepared.rerun_of else None
        best_before = mode.best(conn, project)
        floor = mode.floor(conn, project)
        if prepared.keep_margin is not None:  # in the write's transaction: no finish races another
            settled["status"] = auto_verdict(project, proposed.core_metric, best_before, prepared.keep_margin, floor)
        defaulted = None
        if prepared.parent_omitted and counters.next_seq:
            defaulted = mode.tip(conn, project)  # a git loop's HEAD: the last keep, not the best
            if defaulted is not None:
                parent_exp = settled["parent_exp"] = defaulted.exp_id
        sketch = query = None
        if similar_prior and counters.next_seq:
            query = draft.query
            sketch = list(draft.keys or ()) or None
        reads = mode.reads(conn, project, exp_id, parent_exp, sketch)
        settled["delta_vs_best"] = metric_delta(proposed.core_metric, best_before.core_metric if best_before else None)
        proposed = proposed.with_changes(**settled)
        self._check_references(
            conn,
            project,
            proposed,
            known_parent=defaulted is not None,
            new=True,
            named=reads.named,
            made=mode.held,
        )
        return Decision(
            proposed,
            best_before,
            defaulted,
            reads,
            sketch,
            query,
            key,
            key_hash,
            similar_prior,
            floor,
            rerun_target,
        )

    def _rerun_target(self, conn: Connection, project: Project, rerun_of: str, mode: RecordMode) -> Trial:
        """The trial a declared ``rerun_of`` names, stored in ``project`` (an id as shown,
        ``exp_012``, is read as the stored one); else :class:`InvalidInput` naming
        ``rerun_of``, with the projects that hold such a trial."""
        mode.sync(conn, rerun_of)
        found = self.store.trials.find_trial(conn, project, rerun_of)
        if found is None:
            resolved = self.store.trials.resolve_exp_id(conn, project, rerun_of)
            found = None if resolved is None else self.store.trials.find_trial(conn, project, resolved)
        if found is None:
            elsewhere = [slug for slug in self.store.trials.projects_holding(conn, rerun_of) if slug != project.slug]
            hint = f" (it is a trial of project {', '.join(map(repr, elsewhere))})" if elsewhere else ""
            raise InvalidInput(
                "rerun_of",
                f"trial {rerun_of!r} is not in project {project.slug!r}{hint}; a rerun repeats a trial of its own project",
            )
        return found

    def write(
        self,
        conn: Connection,
        project: Project,
        counters: Counters,
        draft: Draft,
        decided: Decision,
        mode: RecordMode,
    ) -> RecordResult:
        """Store what :meth:`decide` settled; the writer's answer."""
        stored = mode.insert(
            conn,
            project,
            decided.trial,
            seq=counters.next_seq,
            concepts=draft.concepts,
            reads=decided.reads,
            sketch=decided.sketch,  # the same concepts: the same keys
            similar_prior=decided.similar_prior,
        )
        # ranked once the writes are sent: on PostgreSQL the server stores them meanwhile
        prior = (
            rank_similar_prior(self.store, conn, project, decided.trial, rows=decided.reads.prior, query=decided.query)
            if decided.reads.prior is not None
            else ()
        )
        # the earlier trials that changed a knob this one changes, and whether it is a sweep
        # or a repeat: asked with similar_prior, with or without text (a patch can repeat one)
        tried, said = (
            tried_before(self.store, conn, project.stored_id, counters.next_seq)
            if decided.similar_prior and counters.next_seq
            else ((), [])
        )
        project_id = project.stored_id
        if decided.rerun_target is not None:
            self.store.repeats.write_rerun(conn, project_id, stored, decided.rerun_target)
            mode.regrouped()
        elif self.store.repeats.write_trial(conn, project_id, stored):
            mode.regrouped()
        exp_number = int(stored.exp_id) + 1 if stored.exp_id.isdigit() else 0
        counters.next_seq += 1
        counters.next_number = max(counters.next_number, exp_number)
        self._remember_key(conn, project, decided.key, decided.key_hash, stored.exp_id)
        best_before = decided.best_before
        is_new_best = beats_best(project, stored, best_before)
        mode.stored(
            stored,
            best=stored if is_new_best else best_before,
            concepts=draft.concepts,
            keys=draft.keys or (),
            reads=decided.reads,
        )
        return RecordResult(
            stored,
            True,
            best_before,
            is_new_best,
            prior,
            parent_defaulted=decided.defaulted is not None,
            warnings=draft.prepared.warnings,
            same_knob=tried,
            noise=judge(
                decided.floor,
                stored.delta_vs_best,
                status=stored.status.value,
                exp_id=stored.exp_id,
                best_metric=best_before.core_metric if best_before is not None else None,
            ),
            tried_before=tuple(said),
        )

    def _replayed(self, project: Project, existing: Trial, proposed: Trial, prepared: PreparedRecord) -> RecordResult:
        names = [
            name
            for name in IDEMPOTENT_FIELDS
            if not (prepared.parent_omitted and name == "parent_exp")
            and not (prepared.keep_margin is not None and name == "status")  # the ledger's verdict
        ]
        mine = {name: getattr(existing, name) for name in names}
        theirs = {name: getattr(proposed, name) for name in names}
        if same_body(mine, theirs):
            return replay_result(existing, prepared)
        differing = sorted(name for name in names if not same_field(name, mine[name], theirs[name]))
        raise Conflict(
            f"trial {existing.exp_id!r} already exists in project {project.slug!r} with different "
            f"{', '.join(differing)}",
            field=differing[0],
            existing=existing.to_dict(),
            proposed=proposed.to_dict(),
        )

    def update_trial(
        self, project_slug: str, exp_id: str, changes: Mapping[str, Any] | Callable[[Trial], Mapping[str, Any]]
    ) -> Trial:
        """Change fields of a stored trial; ``delta_vs_best`` is recomputed, never taken.
        The recording rules (:func:`prepare_record`) apply to the changes. ``status:
        "auto"``: the ledger decides keep or discard against the best of the other trials
        (:func:`lineage.domain.auto_verdict`), in this transaction; the delta is from that best.

        ``changes`` may be a function of the stored trial, called in the transaction with
        the project locked: a read-modify-write (entries merged into ``extra``) that a
        concurrent update cannot interleave with, so neither is lost. What it raises
        stores nothing."""
        return self.update_judged(project_slug, exp_id, changes, judge_noise=False).trial

    def update_judged(
        self,
        project_slug: str,
        exp_id: str,
        changes: Mapping[str, Any] | Callable[[Trial], Mapping[str, Any]],
        *,
        judge_noise: bool = True,
    ) -> Updated:
        """:meth:`update_trial`, answered with the trial's delta against the project's
        noise floor (``lineage.service.updates``), as the HTTP PATCH and MCP answer."""
        if not callable(changes) and "exp_id" in changes and changes["exp_id"] != exp_id:
            raise InvalidInput("exp_id", "cannot be changed; record a new trial instead")
        with self.store.write() as conn:
            project, _, _ = self.store.projects.locked_project(conn, project_slug)
            current = self.store.trials.trial(conn, project, exp_id)
            found = changes(current) if callable(changes) else changes
            return self.update_locked(conn, project, current, found, judge_noise=judge_noise)

    def update_locked(
        self,
        conn: Connection,
        project: Project,
        current: Trial,
        changes: Mapping[str, Any],
        *,
        judge_noise: bool = False,
    ) -> Updated:
        """:meth:`update_judged` of ``current`` in the caller's write transaction, the project
        locked (a claim's finish checks its holder in the same transaction)."""
        return update_locked(
            self.store,
            conn,
            project,
            current,
            changes,
            check_references=lambda c, p, t: self._check_references(c, p, t),
            judge_noise=judge_noise,
        )

    def _check_references(
        self,
        conn: Connection,
        project: Project,
        trial: Trial,
        *,
        known_parent: bool = False,
        new: bool = False,
        named: bool | None = None,
        made: Collection[str] = (),
    ) -> None:
        """The parent and baseline are trials of the project, and the parent makes no cycle.
        ``known_parent``: the parent was just read (the default one). ``new``: ``trial`` is
        being created, so only a stored trial naming it as parent can close a cycle (``named``:
        whether one does, when the caller read it already). ``made``: ids of trials this
        transaction stored (they need no look-up)."""
        for name in ("parent_exp", "baseline_exp"):
            ref = getattr(trial, name)
            if not ref or ref == trial.exp_id and name == "baseline_exp" or name == "parent_exp" and known_parent:
                continue
            if ref in made:
                continue
            if self.store.trials.find_trial(conn, project, ref) is None:
                elsewhere = self.store.trials.projects_holding(conn, ref)
                hint = f" (it is a trial of project {', '.join(map(repr, elsewhere))})" if elsewhere else ""
                raise InvalidInput(name, f"trial {ref!r} is not in project {project.slug!r}{hint}")
        if named is None and new and trial.parent_exp:
            named = self.store.trials.has_children(conn, project, trial.exp_id)
        if trial.parent_exp and (not new or named):
            self._check_acyclic(conn, project, trial.exp_id, trial.parent_exp)

    def _check_acyclic(self, conn: Connection, project: Project, exp_id: str, parent_exp: str) -> None:
        """:class:`InvalidInput` naming ``parent_exp`` when ``exp_id`` (stored or about to
        be) under ``parent_exp`` closes a cycle: the parent's chain reaches ``exp_id``, or
        reaches a stored trial that names ``exp_id`` as its parent (an import's orphan
        waiting for it)."""
        ancestors = self.store.trials.chain_rows(conn, project, parent_exp)
        if exp_id in ancestors or any(trial.parent_exp == exp_id for trial in ancestors.values()):
            raise InvalidInput(
                "parent_exp",
                f"{parent_exp!r} descends from {exp_id!r}; that parent would make a cycle",
            )

    # -- idempotency keys of trial creations -------------------------------------------

    def _keyed_replay(
        self,
        conn: Connection,
        project: Project,
        key: str,
        key_hash: str,
        proposed: Trial,
        body: Mapping[str, Any],
        prepared: PreparedRecord,
    ) -> RecordResult | None:
        """The stored result of an earlier creation with ``key``; None when the key is new."""
        found = self.store.tokens.find_key(conn, project, "trial", key)
        if found is None:
            return None
        exp_id, stored_hash, _ = found
        existing = self.store.trials.find_trial(conn, project, exp_id)
        if existing is None:  # trials are never deleted alone; treat the key as new
            return None
        if stored_hash == key_hash:
            return replay_result(existing, prepared)
        described = proposed.to_dict()
        described["exp_id"] = body.get("exp_id") or None
        for name in ("seq", "created_at", "updated_at", "delta_vs_best"):
            described.pop(name, None)
        raise Conflict(
            f"Idempotency-Key {key!r} was used for trial {exp_id!r} with a different body",
            field="idempotency_key",
            existing=existing.to_dict(),
            proposed=described,
        )

    def _remember_key(self, conn: Connection, project: Project, key: str | None, key_hash: str, exp_id: str) -> None:
        if key is not None:
            self.store.tokens.claim_key(conn, project, "trial", key, exp_id=exp_id, body_hash=key_hash)

    def _after_record(
        self,
        conn: Connection,
        project: Project,
        stored: Trial,
        best_before: Trial | None,
        is_new_best: bool,
        *,
        trial_count: int,
    ) -> None:
        """In a new trial's transaction: its events to the outbox and the guardrails' trips."""
        subscribed, policy = self.store.progress.hooks_and_guardrails(conn, project.stored_id)
        self._events_of(
            conn,
            project,
            RecordResult(stored, True, best_before, is_new_best),
            trial_count=trial_count,
            subscribed=subscribed,
            policy=policy,
        )

    def _events_of(
        self,
        conn: Connection,
        project: Project,
        result: RecordResult,
        *,
        trial_count: int,
        subscribed: list[Any],
        policy: guardrails.PolicyRow | guardrails.Unread,
    ) -> None:
        """A new trial's events and trips, with the webhooks and guardrail row read already
        (``policy=Unread.POLICY``: read it here)."""
        best = result.trial if result.is_new_best else result.best_before
        hooks.trial_events(
            self.store,
            conn,
            project,
            result.trial,
            best_before=result.best_before,
            is_new_best=result.is_new_best,
            subscribed=subscribed,
        )
        guardrails.after_trial(
            self.store,
            conn,
            project,
            result.trial,
            best=best,
            trial_count=trial_count,
            subscribed=subscribed,
            policy=policy,
        )
