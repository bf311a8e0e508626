"""BatchUses: many trials recorded in one transaction, all or nothing.

Owns :meth:`BatchUses.record_trials` (the JSON batch of HTTP, the client, MCP and
``lineage watch --server``) and :data:`MAX_BATCH`. Every item goes through the single
record's rules (:meth:`lineage.service.recording.RecordingUses.record_in`:
:func:`~lineage.service.record_rules.prepare_record`, replay by exp_id or key, the next
id, the parent default, the delta from the best before it), in order, so item 2 sees
item 1 (its parent defaults to item 1 when item 1 is a keep: the branch tip). A bad item rolls the
whole batch back; its error names ``trials[i].field``.

Per batch, not per item: the project's counters move once, the webhooks' subscriptions
are read once (one ``new_best`` when the batch moved the best; one ``trial_crashed`` per
crash, as single records send), and the guardrails are evaluated once, on the project
as the batch leaves it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lineage.domain import MAX_BATCH, RecordResult, Trial, beats_best, check_idempotency_key
from lineage.errors import Conflict, InvalidInput, LedgerError
from lineage.monitor import guardrails, hooks
from lineage.service.record_modes import Bulk, Counters, Shared
from lineage.service.recording import RecordingUses

#: The per-item key field of a batch item (the item's own Idempotency-Key).
ITEM_KEY = "idempotency_key"
#: Scope of a batch's Idempotency-Key in ``idempotency_keys`` (a trial key is "trial").
BATCH_SCOPE = "trial-batch"


@dataclass(frozen=True, slots=True)
class BatchResult:
    """What a batch did: each item's result, in order, and whether this was a replay of
    an earlier batch with the same Idempotency-Key (then nothing was written)."""

    results: tuple[RecordResult, ...]
    replayed: bool = False

    @property
    def created(self) -> int:
        return sum(1 for result in self.results if result.created)

    def to_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "replayed": self.replayed,
            "results": [result.to_dict() for result in self.results],
        }


def _named(error: LedgerError, index: int) -> LedgerError:
    """``error`` with its field named as ``trials[index].field`` (the item's place)."""
    field = getattr(error, "field", None)
    where = f"trials[{index}]" + (f".{field}" if field else "")
    named: LedgerError
    if isinstance(error, InvalidInput):
        named = InvalidInput(where, error.reason, line=error.line, column=error.column)
    elif isinstance(error, Conflict):
        named = Conflict(f"trials[{index}]: {error}", field=where, existing=error.existing, proposed=error.proposed)
    else:
        return error
    return named


def check_items(items: Any) -> list[Mapping[str, Any]]:
    """The batch's items, or :class:`InvalidInput` naming ``trials`` (not a list, empty,
    more than :data:`MAX_BATCH`) or ``trials[i]`` (not an object)."""
    if not isinstance(items, (list, tuple)):
        raise InvalidInput("trials", "must be a list of trial objects")
    if not items:
        raise InvalidInput("trials", f"is empty; send 1 to {MAX_BATCH:,} trials")
    if len(items) > MAX_BATCH:
        raise InvalidInput("trials", f"holds {len(items):,} trials; at most {MAX_BATCH:,} go in one batch")
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidInput(f"trials[{i}]", "must be a trial object")
    return list(items)


def batch_hash(items: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 of a batch's items as canonical JSON: what its Idempotency-Key stands for."""
    text = json.dumps(list(items), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class BatchUses(RecordingUses):
    """record_trials."""

    def record_trials(
        self,
        project_slug: str,
        items: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
        similar_prior: bool = False,
    ) -> BatchResult:
        """Record ``items`` (each the body of a single record, optionally with its own
        ``idempotency_key``) in order, in one transaction: all or nothing.

        Each item is idempotent on its own (its exp_id or key: a stored one comes back
        with ``created=False``). ``idempotency_key``: the batch's key; a retry of the
        same items gets the first answer's trials (``replayed=True``, nothing written),
        other items under the same key are a :class:`Conflict` naming
        ``idempotency_key``. ``similar_prior``: each new item's earlier close trials
        (including earlier items of the batch).
        """
        items = check_items(items)
        key = check_idempotency_key(idempotency_key) if idempotency_key is not None else None
        whole = batch_hash(items) if key is not None else ""
        # pipelined: an item's insert goes out with the next statement whose result is read
        # (a database error, which rolls the whole batch back anyway, surfaces there)
        with self.store.write(pipelined=True) as conn:
            project, next_seq, next_number = self.store.projects.locked_project(conn, project_slug)
            if key is not None:
                replay = self._batch_replay(conn, project, key, whole)
                if replay is not None:
                    return replay
            counters = Counters(next_seq, next_number)
            best = self.store.trials.best_scored(conn, project)
            tip = self.store.trials.tip(conn, project) if next_seq else None
            # with similar_prior each item is searched by the next: written as it comes
            mode = Shared(self.store, best, tip) if similar_prior else Bulk(self.store, best, tip)
            results: list[RecordResult] = []
            stored: list[tuple[int, Trial]] = []  # the new items, by index
            for i, item in enumerate(items):
                fields = {name: value for name, value in item.items() if name != ITEM_KEY}
                item_key = item.get(ITEM_KEY)
                try:
                    if item_key is not None:
                        check_idempotency_key(item_key, field_name=ITEM_KEY)
                    results.append(
                        self.record_in(
                            conn,
                            project,
                            counters,
                            fields,
                            mode=mode,
                            idempotency_key=item_key,
                            similar_prior=similar_prior,
                        )
                    )
                except (InvalidInput, Conflict) as error:
                    mode.sync(conn)
                    self._adoptions(conn, project, stored, before_seq=next_seq)  # an earlier item's comes first
                    raise _named(error, i) from error
                if results[-1].created:
                    stored.append((i, results[-1].trial))
            mode.sync(conn)
            self._adoptions(conn, project, stored, before_seq=next_seq)
            self.store.trials.write_deferred(conn, mode.pending)
            self.store.trials.write_terms(conn, mode.terms)
            new = [result for result in results if result.created]
            if new:
                self.store.projects.advance_counters(conn, project, rows=len(new), exp_number=counters.next_number)
                self._after_batch(conn, project, new, trial_count=counters.next_seq)
            if key is not None:
                self.store.tokens.claim_key(
                    conn,
                    project,
                    BATCH_SCOPE,
                    key,
                    exp_id=results[0].trial.exp_id,
                    body_hash=whole,
                    result={"exp_ids": [result.trial.exp_id for result in results]},
                )
            return BatchResult(tuple(results))

    def _adoptions(self, conn: Any, project: Any, stored: Sequence[tuple[int, Trial]], *, before_seq: int) -> None:
        """A batch's new trials that trials stored before it name as their parent (an
        import's orphans waiting for them), checked once for all (one query) instead of
        per item: each must not close a cycle (:class:`InvalidInput` naming
        ``trials[i].parent_exp``, the first such item), and its subtree's chain links are
        recomputed. Only batches without similar_prior defer this (:class:`~lineage.service.record_modes.Bulk`)."""
        if not stored:
            return
        waited_for = self.store.trials.named_as_parent(
            conn, project, [trial.exp_id for _, trial in stored], before_seq=before_seq
        )
        for i, trial in stored:
            if trial.exp_id in waited_for:
                if trial.parent_exp:
                    try:
                        self._check_acyclic(conn, project, trial.exp_id, trial.parent_exp)
                    except InvalidInput as error:
                        raise _named(error, i) from error
                self.store.chain.relink(conn, project, trial.exp_id)

    def _batch_replay(self, conn: Any, project: Any, key: str, whole: str) -> BatchResult | None:
        found = self.store.tokens.find_key(conn, project, BATCH_SCOPE, key)
        if found is None:
            return None
        _, stored_hash, stored = found
        if stored_hash != whole:
            raise Conflict(f"Idempotency-Key {key!r} was used for a batch with other trials", field="idempotency_key")
        results = []
        for exp_id in stored.get("exp_ids", []):
            results.append(RecordResult(self.store.trials.trial(conn, project, exp_id), False, None, False))
        return BatchResult(tuple(results), replayed=True)

    def _after_batch(self, conn: Any, project: Any, new: Sequence[RecordResult], *, trial_count: int) -> None:
        """Once per batch: the webhooks' events and the guardrails, on the batch's outcome."""
        best_before = new[0].best_before
        best = best_before
        for result in new:
            if beats_best(project, result.trial, best):
                best = result.trial
        subscribed = hooks.subscriptions(self.store, conn, project)
        moved = best is not None and (best_before is None or best.exp_id != best_before.exp_id)
        if subscribed:
            for result in new:
                is_new_best = moved and result.trial.exp_id == best.exp_id  # type: ignore[union-attr]
                hooks.trial_events(
                    self.store,
                    conn,
                    project,
                    result.trial,
                    best_before=best_before,
                    is_new_best=is_new_best,
                    subscribed=subscribed,
                )
        guardrails.after_trial(
            self.store, conn, project, new[-1].trial, best=best, trial_count=trial_count, subscribed=subscribed
        )
