"""RecordingUses: recording and changing one trial, idempotently and in one transaction.

Owns: :meth:`RecordingUses.record_trial` (next exp_id, references and cycle checks,
``delta_vs_best`` from the best before, idempotent replay by exp_id or Idempotency-Key,
the outbox events and guardrail trips of a new trial), :meth:`RecordingUses.update_trial`,
and what counts as "the same body" on a replay.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from sqlalchemy import Connection

from lineage.domain import (
    WRITABLE_FIELDS,
    FailureLabel,
    Project,
    RecordResult,
    Trial,
    beats_best,
    check_idempotency_key,
    metric_delta,
    next_exp_id,
    trial_from_mapping,
    validate_trial,
)
from lineage.errors import Conflict, InvalidInput
from lineage.monitor import guardrails, hooks
from lineage.store import Store

#: Fields compared when a create is retried with the same exp_id (server-computed ones excluded).
IDEMPOTENT_FIELDS = tuple(name for name in WRITABLE_FIELDS if name not in ("delta_vs_best",))


class RecordingUses:
    """record_trial, update_trial (with the idempotency helpers they share)."""

    store: Store

    def record_trial(
        self, project_slug: str, fields: Mapping[str, Any], *, idempotency_key: str | None = None,
        similar_prior: bool = False,
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

        ``similar_prior``: also find the earlier trials whose hypothesis and notes are
        close to the new trial's (``RecordResult.similar_prior``), in the same
        transaction, so they are exactly the trials recorded before it.
        """
        body = {k: v for k, v in fields.items() if k != "delta_vs_best"}
        proposed = trial_from_mapping(body, exp_id=body.get("exp_id") or "_")
        key_hash = _trial_body_hash(proposed, body.get("exp_id")) if idempotency_key is not None else ""
        with self.store.write() as conn:
            project, next_seq, next_number = self.store.locked_project(conn, project_slug)
            if idempotency_key is not None:
                keyed = self._keyed_replay(conn, project, check_idempotency_key(idempotency_key), key_hash, proposed, body)
                if keyed is not None:
                    return keyed
            if not body.get("exp_id"):
                # above every numeric id stored so far, so it cannot be taken
                proposed = proposed.with_changes(exp_id=next_exp_id(next_number - 1 if next_number else None))
            else:
                existing = self.store.find_trial(conn, project, proposed.exp_id)
                if existing is not None:
                    replayed = self._replayed(conn, project, existing, proposed)
                    self._remember_key(conn, project, idempotency_key, key_hash, existing.exp_id)
                    return replayed
            self._check_references(conn, project, proposed)
            best_before = self.store.best_scored(conn, project)
            delta = metric_delta(proposed.core_metric, best_before.core_metric if best_before else None)
            prior = self._similar_prior(conn, project, proposed) if similar_prior and next_seq else ()
            stored = self.store.insert_trial(conn, project, proposed.with_changes(delta_vs_best=delta), seq=next_seq)
            exp_number = int(stored.exp_id) + 1 if stored.exp_id.isdigit() else 0
            self.store.advance_counters(conn, project, rows=1, exp_number=exp_number)
            self._remember_key(conn, project, idempotency_key, key_hash, stored.exp_id)
            is_new_best = beats_best(project, stored, best_before)
            self._after_record(conn, project, stored, best_before, is_new_best, trial_count=next_seq + 1)
            return RecordResult(stored, True, best_before, is_new_best, prior)

    def _replayed(self, conn: Connection, project: Project, existing: Trial, proposed: Trial) -> RecordResult:
        mine = {name: getattr(existing, name) for name in IDEMPOTENT_FIELDS}
        theirs = {name: getattr(proposed, name) for name in IDEMPOTENT_FIELDS}
        if _same_body(mine, theirs):
            return RecordResult(existing, False, None, False)
        differing = sorted(name for name in IDEMPOTENT_FIELDS if not _same_field(name, mine[name], theirs[name]))
        raise Conflict(
            f"trial {existing.exp_id!r} already exists in project {project.slug!r} with different "
            f"{', '.join(differing)}",
            field=differing[0],
            existing=existing.to_dict(),
            proposed=proposed.to_dict(),
        )

    # -- "was this tried?" (lineage.similar: the text and ranking rules) ------------------

    def update_trial(self, project_slug: str, exp_id: str, changes: Mapping[str, Any]) -> Trial:
        """Change fields of a stored trial; ``delta_vs_best`` is recomputed, never taken."""
        unknown = set(changes) - set(WRITABLE_FIELDS)
        if unknown:
            raise InvalidInput(sorted(unknown)[0], "is not a trial field")
        if "exp_id" in changes and changes["exp_id"] != exp_id:
            raise InvalidInput("exp_id", "cannot be changed; record a new trial instead")
        with self.store.write() as conn:
            project, _, _ = self.store.locked_project(conn, project_slug)
            current = self.store.trial(conn, project, exp_id)
            values = {k: v for k, v in changes.items() if k not in ("delta_vs_best", "exp_id")}
            if "status" in values and not isinstance(values["status"], FailureLabel):
                values["status"] = FailureLabel.parse(str(values["status"]))
            for name in ("parent_exp", "baseline_exp", "notes", "hypothesis", "expected_delta"):
                if name in values and values[name] is None:
                    values[name] = ""
            updated = validate_trial(current.with_changes(**values))
            if updated.parent_exp != current.parent_exp or updated.baseline_exp != current.baseline_exp:
                self._check_references(conn, project, updated)
            best_before = self.store.best_scored(conn, project, before_seq=current.seq)
            delta = metric_delta(updated.core_metric, best_before.core_metric if best_before else None)
            stored = self.store.update_trial(conn, project, updated.with_changes(delta_vs_best=delta))
            guardrails.reevaluate(self.store, conn, project, exp_id=exp_id)
            return stored

    def _check_references(self, conn: Connection, project: Project, trial: Trial) -> None:
        for name in ("parent_exp", "baseline_exp"):
            ref = getattr(trial, name)
            if not ref or ref == trial.exp_id and name == "baseline_exp":
                continue
            if self.store.find_trial(conn, project, ref) is None:
                elsewhere = self.store.projects_holding(conn, ref)
                hint = f" (it is a trial of project {', '.join(map(repr, elsewhere))})" if elsewhere else ""
                raise InvalidInput(name, f"trial {ref!r} is not in project {project.slug!r}{hint}")
        if trial.parent_exp:
            ancestors = self.store.chain_rows(conn, project, trial.parent_exp)
            if trial.exp_id in ancestors:
                raise InvalidInput(
                    "parent_exp",
                    f"{trial.parent_exp!r} descends from {trial.exp_id!r}; that parent would make a cycle",
                )

    # -- lineage ------------------------------------------------------------------------

    # -- tokens / telemetry / idempotency, and the reads of the HTTP API and MCP ---------
    #
    # Tokens are lineage.auth's and telemetry lineage.telemetry's (both over ``self.store``);
    # here: idempotency keys of trial creations, the ETag revision, project deletion, the
    # wrapped prompt, KNOWLEDGE.md as data, and the trials listing with opaque cursors.

    def _keyed_replay(
        self, conn: Connection, project: Project, key: str, key_hash: str, proposed: Trial, body: Mapping[str, Any]
    ) -> RecordResult | None:
        """The stored result of an earlier creation with ``key``; None when the key is new."""
        found = self.store.find_key(conn, project, "trial", key)
        if found is None:
            return None
        exp_id, stored_hash, _ = found
        existing = self.store.find_trial(conn, project, exp_id)
        if existing is None:  # trials are never deleted alone; treat the key as new
            return None
        if stored_hash == key_hash:
            return RecordResult(existing, False, None, False)
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
            self.store.claim_key(conn, project, "trial", key, exp_id=exp_id, body_hash=key_hash)

    def _after_record(
        self, conn: Connection, project: Project, stored: Trial, best_before: Trial | None, is_new_best: bool,
        *, trial_count: int,
    ) -> None:
        """In a new trial's transaction: its events to the outbox and the guardrails' trips."""
        subscribed = hooks.subscriptions(self.store, conn, project)
        hooks.trial_events(self.store, conn, project, stored, best_before=best_before, is_new_best=is_new_best,
                           subscribed=subscribed)
        guardrails.after_trial(self.store, conn, project, stored, best=stored if is_new_best else best_before,
                               trial_count=trial_count, subscribed=subscribed)


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


def _trial_body_hash(proposed: Trial, exp_id: str | None) -> str:
    """SHA-256 of what a creation asks for: the fields compared on a replay, with every
    omitted field at its default, so two requests for the same trial hash alike."""
    import hashlib
    import json

    values = [exp_id or ""]
    for name in IDEMPOTENT_FIELDS:
        if name == "exp_id":
            continue
        value = getattr(proposed, name)
        values.append(value.value if isinstance(value, FailureLabel) else dict(value) if name == "extra" else value)
    text = json.dumps(values, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
