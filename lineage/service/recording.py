"""RecordingUses: recording and changing one trial, idempotently and in one transaction.

Owns: :func:`prepare_record` (the recording rules every writer shares: a parent left
out, a failure's "no result" metric, a keep without a metric, the metric under its own
name), :meth:`RecordingUses.record_trial` (next exp_id, the parent default, references
and cycle checks, ``delta_vs_best`` from the best before, idempotent replay by exp_id or
Idempotency-Key, the outbox events and guardrail trips of a new trial),
:meth:`RecordingUses.update_trial`, and what counts as "the same body" on a replay.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from sqlalchemy import Connection

from lineage import similar
from lineage.domain import (
    FLOAT_COLUMNS,
    TRIAL_FIELD_NAMES,
    WRITABLE_FIELDS,
    FailureLabel,
    Project,
    RecordResult,
    Trial,
    beats_best,
    check_idempotency_key,
    is_no_result,
    metric_delta,
    next_exp_id,
    trial_from_mapping,
    validate_trial,
)
from lineage.errors import Conflict, InvalidInput
from lineage.monitor import guardrails, hooks
from lineage.similar import Candidate, Similar, prior_query, stored_concepts
from lineage.similar import sketch as similar_sketch
from lineage.store import Store
from lineage.store.chain import next_link
from lineage.store.trials import NewTrialReads

if TYPE_CHECKING:
    from lineage.service.group_reads import GroupReads

#: Fields compared when a create is retried with the same exp_id (server-computed ones excluded).
IDEMPOTENT_FIELDS = tuple(name for name in WRITABLE_FIELDS if name not in ("delta_vs_best",))
#: Where the metric a writer sent is kept, verbatim, when it means "no result".
REPORTED_METRIC_KEY = "_reported_metric"
_ADVANCING = (FailureLabel.KEEP, FailureLabel.BASELINE)


@dataclass(slots=True)
class Counters:
    """A locked project's ``next_seq`` and next numeric exp_id, as a write moves them."""

    next_seq: int
    next_number: int


@dataclass(slots=True)
class BatchState:
    """What a batch's items share inside its transaction, so each item reads less: the
    best and the first trial so far (read once, then moved by each item as the database
    would answer), and the search words and sketches, written once at the end."""

    best: Trial | None
    first: Trial | None
    #: ``(search_text, project_id, seq, stored concepts)`` of the items stored
    pending: list[tuple[str, int, int, str]]
    #: search texts whose words the vocabulary gets at the end (items whose sketch is
    #: written at once: they are searched by the next items' ``similar_prior``)
    terms: list[str] = field(default_factory=list)
    #: a batch without similar_prior (:attr:`bulk`): the rows of the items stored so far,
    #: not yet sent (inserted in one go, before anything could read them:
    #: :meth:`RecordingUses._flush`), and no adoption check per item (the batch's
    #: :meth:`BatchUses._adoptions` does them at the end); None: every item on its own
    rows: list[tuple[Any, ...]] | None = None
    #: in bulk: the ids of the items stored, and the chain link a child of each parent gets
    #: (read once a parent)
    made: set[str] = field(default_factory=set)
    links: dict[str, tuple[int, str]] = field(default_factory=dict)
    #: a group of single records (``lineage.service.group_commit``): what its items read,
    #: read once for the group
    group: GroupReads | None = None

    @property
    def bulk(self) -> bool:
        return self.rows is not None

    def child_link(self, store: Store, conn: Connection, project: Project, parent_exp: str) -> tuple[int, str]:
        """``(depth, skip)`` of a new trial under ``parent_exp`` (:meth:`Store.chain.link_after`), cached."""
        link = self.links.get(parent_exp)
        if link is None:
            link = self.links[parent_exp] = store.chain.link_after(conn, project, parent_exp)
        return link


@dataclass(frozen=True, slots=True)
class PreparedRecord:
    """A writer's trial body after the recording rules (:func:`prepare_record`)."""

    #: the body to store (``delta_vs_best`` dropped; ``parent_exp`` absent when omitted)
    body: dict[str, Any]
    #: the writer left ``parent_exp`` out of a creation: the ledger fills in the current best
    parent_omitted: bool
    #: what the rules did to the body, in words, for the writer's answer
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Draft:
    """What a record's body makes before anything is read: the recording rules applied
    (:func:`prepare_record`), the trial proposed (its id and parent not decided yet), its
    stored concepts, ``similar_prior``'s query and its sketch keys (those its stored sketch gets)."""

    prepared: PreparedRecord
    proposed: Trial
    concepts: str
    #: None: not made (:func:`draft_record`'s ``sketch``)
    query: tuple[str, list[str]] | None
    keys: tuple[int, ...] | None


def draft_record(project: Project, fields: Mapping[str, Any], *, sketch: bool) -> Draft:
    """The :class:`Draft` of a new trial's body (``sketch``: with the query and sketch
    keys); the recording rules' refusals raised."""
    prepared = prepare_record(project, fields)
    body = prepared.body
    proposed = trial_from_mapping(body, exp_id=body.get("exp_id") or "_")
    concepts = stored_concepts(proposed.hypothesis, proposed.notes)
    if not sketch:
        return Draft(prepared, proposed, concepts, None, None)
    query = prior_query(proposed.hypothesis, proposed.notes, concepts)
    return Draft(prepared, proposed, concepts, query, tuple(similar_sketch(query[1])))


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def prepare_record(project: Project, fields: Mapping[str, Any], *, current: Trial | None = None) -> PreparedRecord:
    """The recording rules every writer of single trials shares (HTTP, MCP, ``lineage
    record``, the trainer's client, batches), applied to a body before it is stored.

    1. **The metric under its own name.** A body that carries the project's metric under
       its name (``val_bpb``, ``score``): read as ``core_metric``, with a warning; refused
       (:class:`InvalidInput` naming that key) when it is not a number or differs from
       the ``core_metric`` sent. In a project whose metric is ``val_bpb`` (also a trial
       field), ``val_bpb`` and ``core_metric`` are one value.
    2. **No result.** A metric that means "no result" (:func:`lineage.domain.is_no_result`:
       ``0`` on a failure status, ``-999``/``-9999`` on any) is stored as none, never a
       delta and never the best; the value sent stays in ``extra["_reported_metric"]``.
    3. **A keep or baseline without a metric** is accepted, with a warning.
    4. **The parent.** ``parent_exp`` left out of a creation: ``parent_omitted`` (the
       ledger fills in the current best and says so); ``""`` or ``null``: a root.

    ``delta_vs_best`` is dropped (the ledger computes it). ``current``: the stored trial
    of an update (``fields`` are changes to it): its status and metric count where the
    changes leave them out, and no parent is defaulted.
    """
    body = {name: value for name, value in fields.items() if name != "delta_vs_best"}
    warnings: list[str] = []
    name = project.metric_name
    if name and name != "core_metric" and name in body and (name in FLOAT_COLUMNS or name not in TRIAL_FIELD_NAMES):
        own = body[name]
        if own is not None and not _number(own):
            raise InvalidInput(name, f"is this project's metric and must be a number, got {own!r}")
        if name not in FLOAT_COLUMNS:
            del body[name]
        sent = body.get("core_metric")
        if sent is None and own is not None:
            body["core_metric"] = own
            warnings.append(f"{name} is this project's metric: read as core_metric={own!r} (send it as core_metric)")
        elif own is not None and own != sent:
            raise InvalidInput(
                name,
                f"{name}={own!r} conflicts with core_metric={sent!r}; {name} is this "
                "project's metric, so send it once, as core_metric",
            )
    if name == "val_bpb" and _number(body.get("core_metric")) and body.get("val_bpb") is None:
        body["val_bpb"] = body["core_metric"]

    raw = body.get("status", current.status if current is not None else FailureLabel.DISCARD)
    label = raw if isinstance(raw, FailureLabel) else FailureLabel.parse(str(raw))
    metric = body["core_metric"] if "core_metric" in body else (current.core_metric if current else None)
    touched = current is None or "status" in body or "core_metric" in body
    if touched and _number(metric) and is_no_result(float(metric), label):
        extra = body.get("extra", current.extra if current is not None else {})
        if extra is None:
            extra = {}
        if isinstance(extra, Mapping):
            body["extra"] = {**extra, REPORTED_METRIC_KEY: metric}
            body["core_metric"] = None
            if name == "val_bpb" and body.get("val_bpb", current.val_bpb if current else None) == metric:
                body["val_bpb"] = None
            warnings.append(
                f"core_metric={metric!r} on a {label.value} means no result: stored without a metric "
                f"(the value sent is kept in extra.{REPORTED_METRIC_KEY})"
            )
            metric = None
    if touched and label in _ADVANCING and metric is None:
        warnings.append(
            f"a {label.value} without a metric can never be the best; send core_metric (this project's metric: {name})"
        )

    parent_omitted = current is None and "parent_exp" not in body
    return PreparedRecord(body, parent_omitted, tuple(warnings))


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
    """record_trial, update_trial (with the idempotency helpers they share)."""

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
            counters = Counters(next_seq, next_number)
            result = self._record_in(
                conn,
                project,
                counters,
                fields,
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

    def _record_in(
        self,
        conn: Connection,
        project: Project,
        counters: Counters,
        fields: Mapping[str, Any],
        *,
        idempotency_key: str | None,
        similar_prior: bool,
        state: BatchState | None = None,
        draft: Draft | None = None,
        key_request: Mapping[str, Any] | None = None,
    ) -> RecordResult:
        """One creation inside the caller's write transaction (the project locked): the
        recording rules, replay by key or exp_id, the next id, the parent default, the
        delta, the insert. ``draft``: :func:`draft_record` of ``fields``, when the caller
        made it already. ``counters`` move on when a trial is stored; the caller
        advances the project's counters and runs the events and guardrails."""
        next_seq, next_number = counters.next_seq, counters.next_number
        if draft is None:
            draft = draft_record(project, fields, sketch=bool(similar_prior and next_seq))
        prepared, proposed, concepts = draft.prepared, draft.proposed, draft.concepts
        body = prepared.body
        key_hash = (
            ""
            if idempotency_key is None
            else _request_hash(key_request)
            if key_request is not None
            else _trial_body_hash(proposed, body.get("exp_id"), prepared.parent_omitted)
        )
        if idempotency_key is not None:
            self._flush(conn, state)  # the key's trial may be an earlier item's
            keyed = self._keyed_replay(
                conn, project, check_idempotency_key(idempotency_key), key_hash, proposed, body, prepared
            )
            if keyed is not None:
                return keyed
        if not body.get("exp_id"):
            # above every numeric id stored so far, so it cannot be taken
            proposed = proposed.with_changes(exp_id=next_exp_id(next_number - 1 if next_number else None))
        else:
            if state is not None and proposed.exp_id in state.made:
                self._flush(conn, state)
            existing = self.store.trials.find_trial(conn, project, proposed.exp_id)
            if existing is not None:
                replayed = self._replayed(conn, project, existing, proposed, prepared)
                self._remember_key(conn, project, idempotency_key, key_hash, existing.exp_id)
                return replayed
        best_before = self.store.trials.best_scored(conn, project) if state is None else state.best
        defaulted = None
        if prepared.parent_omitted and next_seq:
            defaulted = best_before or (self.store.trials.first_trial(conn, project) if state is None else state.first)
            if defaulted is not None:
                proposed = proposed.with_changes(parent_exp=defaulted.exp_id)
        prior_keys = query = None
        if similar_prior and next_seq:
            query = draft.query
            prior_keys = list(draft.keys or ()) or None
        if state is not None and state.bulk:
            # a batch item: the batch checks its adoptions at the end; parents' links read once
            reads = NewTrialReads(False, state.child_link(self.store, conn, project, proposed.parent_exp), None)
        elif state is not None and state.group is not None:  # read with the group's other items
            reads = state.group.new_trial(self.store, conn, project, proposed.exp_id, proposed.parent_exp, prior_keys)
        else:
            # asked together: whether stored trials already name it as parent (for the cycle
            # check and the links the insert rewrites), its chain link, similar_prior's shortlist
            reads = self.store.trials.new_trial_reads(conn, project, proposed.exp_id, proposed.parent_exp, prior_keys)
        self._check_references(
            conn,
            project,
            proposed,
            known_parent=defaulted is not None,
            new=True,
            named=reads.named,
            made=state.made if state is not None else (),
        )
        delta = metric_delta(proposed.core_metric, best_before.core_metric if best_before else None)
        stored = self.store.trials.insert_trial(
            conn,
            project,
            proposed.with_changes(delta_vs_best=delta),
            seq=next_seq,
            concepts=concepts,
            named=reads.named,
            link=reads.link,
            deferred=state.pending if state is not None and not similar_prior else None,
            terms=state.terms if state is not None else None,
            buffer=state.rows if state is not None else None,
            sketch=prior_keys,
        )  # the same concepts: the same keys
        # ranked once the writes are sent: on PostgreSQL the server stores them meanwhile
        prior = (
            rank_similar_prior(self.store, conn, project, proposed, rows=reads.prior, query=query)
            if reads.prior is not None
            else ()
        )
        if state is not None and state.group is not None:
            state.group.written(stored, concepts, draft.keys or (), reads.link, adopted=reads.named)
        if state is not None and state.bulk:  # its children's link, without a read
            state.links[stored.exp_id] = next_link(stored.exp_id, reads.link)
            state.made.add(stored.exp_id)
        exp_number = int(stored.exp_id) + 1 if stored.exp_id.isdigit() else 0
        counters.next_seq = next_seq + 1
        counters.next_number = max(next_number, exp_number)
        self._remember_key(conn, project, idempotency_key, key_hash, stored.exp_id)
        is_new_best = beats_best(project, stored, best_before)
        if state is not None:
            state.best = stored if is_new_best else best_before
            state.first = state.first or stored
        warnings = prepared.warnings
        if defaulted is not None:
            warnings = (
                f"parent_exp left out: the parent is the current best, exp_{defaulted.exp_id} "
                '(send "parent_exp": "" to record a root)',
                *warnings,
            )
        return RecordResult(
            stored, True, best_before, is_new_best, prior, parent_defaulted=defaulted is not None, warnings=warnings
        )

    def _replayed(
        self,
        conn: Connection,
        project: Project,
        existing: Trial,
        proposed: Trial,
        prepared: PreparedRecord,
    ) -> RecordResult:
        names = [name for name in IDEMPOTENT_FIELDS if not (prepared.parent_omitted and name == "parent_exp")]
        mine = {name: getattr(existing, name) for name in names}
        theirs = {name: getattr(proposed, name) for name in names}
        if _same_body(mine, theirs):
            return _replay_result(existing, prepared)
        differing = sorted(name for name in names if not _same_field(name, mine[name], theirs[name]))
        raise Conflict(
            f"trial {existing.exp_id!r} already exists in project {project.slug!r} with different "
            f"{', '.join(differing)}",
            field=differing[0],
            existing=existing.to_dict(),
            proposed=proposed.to_dict(),
        )

    # -- "was this tried?" (lineage.similar: the text and ranking rules) ------------------

    def update_trial(self, project_slug: str, exp_id: str, changes: Mapping[str, Any]) -> Trial:
        """Change fields of a stored trial; ``delta_vs_best`` is recomputed, never taken.
        The recording rules (:func:`prepare_record`) apply to the changes."""
        if "exp_id" in changes and changes["exp_id"] != exp_id:
            raise InvalidInput("exp_id", "cannot be changed; record a new trial instead")
        with self.store.write() as conn:
            project, _, _ = self.store.projects.locked_project(conn, project_slug)
            current = self.store.trials.trial(conn, project, exp_id)
            prepared = prepare_record(project, changes, current=current)
            unknown = set(prepared.body) - set(WRITABLE_FIELDS)
            if unknown:
                raise InvalidInput(sorted(unknown)[0], "is not a trial field")
            values = {k: v for k, v in prepared.body.items() if k not in ("delta_vs_best", "exp_id")}
            if "status" in values and not isinstance(values["status"], FailureLabel):
                values["status"] = FailureLabel.parse(str(values["status"]))
            for name in (
                "parent_exp",
                "baseline_exp",
                "notes",
                "hypothesis",
                "expected_delta",
                "job_name",
                "snapshot_path",
            ):  # null clears a text
                if name in values and values[name] is None:
                    values[name] = ""
            updated = validate_trial(current.with_changes(**values))
            if updated.parent_exp != current.parent_exp or updated.baseline_exp != current.baseline_exp:
                self._check_references(conn, project, updated)
            best_before = self.store.trials.best_scored(conn, project, before_seq=current.seq)
            delta = metric_delta(updated.core_metric, best_before.core_metric if best_before else None)
            stored = self.store.trials.update_trial(conn, project, updated.with_changes(delta_vs_best=delta))
            guardrails.reevaluate(self.store, conn, project, exp_id=exp_id)
            return stored

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

    # -- lineage ------------------------------------------------------------------------

    # -- tokens / telemetry / idempotency, and the reads of the HTTP API and MCP ---------
    #
    # Tokens are lineage.auth's and telemetry lineage.telemetry's (both over ``self.store``);
    # here: idempotency keys of trial creations, the ETag revision, project deletion, the
    # wrapped prompt, KNOWLEDGE.md as data, and the trials listing with opaque cursors.

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
            return _replay_result(existing, prepared)
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

    def _flush(self, conn: Connection, state: BatchState | None) -> None:
        """Send the rows a batch holds back (``BatchState.rows``), before a read could miss them."""
        if state is not None and state.rows:
            self.store.trials.insert_rows(conn, state.rows)
            state.rows.clear()

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


def _replay_result(existing: Trial, prepared: PreparedRecord) -> RecordResult:
    """The answer to a retry: the stored trial, with what the rules said about the body."""
    return RecordResult(
        existing,
        False,
        None,
        False,
        parent_defaulted=prepared.parent_omitted and bool(existing.parent_exp),
        warnings=prepared.warnings,
    )


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, FailureLabel) or isinstance(b, FailureLabel):
        return str(getattr(a, "value", a)) == str(getattr(b, "value", b))
    return a == b


def _same_field(name: str, a: Any, b: Any) -> bool:
    return _same_extra(a, b) if name == "extra" else _same_value(a, b)


def _same_extra(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two ``extra`` objects are the same JSON: the same text with the keys sorted.
    Stricter than Python's ``==`` where JSON is (``true`` is not ``1``, ``1.0`` is not
    ``1``, ``-0.0`` is not ``0.0``), as the Idempotency-Key's body hash is; both backends
    give back the text they were given (``models.JSONText``), so an identical retry matches."""
    if a == {} or b == {}:
        return a == b
    return _canonical_json(a) == _canonical_json(b)


def _canonical_json(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _same_body(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(_same_field(k, a[k], b[k]) for k in a)


def _request_hash(request: Mapping[str, Any]) -> str:
    """SHA-256 of a request the writer described itself (``record_trial``'s
    ``key_request``), kept apart from every trial body's hash."""
    import hashlib

    text = _canonical_json({"request": request})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _trial_body_hash(proposed: Trial, exp_id: str | None, parent_omitted: bool = False) -> str:
    """SHA-256 of what a creation asks for: the fields compared on a replay, with every
    omitted field at its default, so two requests for the same trial hash alike (a parent
    left out hashes apart from a root: the ledger chose the first's)."""
    import hashlib
    import json

    values: list[Any] = [exp_id or ""]
    if parent_omitted:
        values.append({"parent_exp": "omitted"})
    for name in IDEMPOTENT_FIELDS:
        if name == "exp_id":
            continue
        value = getattr(proposed, name)
        values.append(value.value if isinstance(value, FailureLabel) else dict(value) if name == "extra" else value)
    text = json.dumps(values, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
