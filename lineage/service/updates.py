"""Changing a stored trial: the rule of ``ledger.recording.update_trial`` (and of a claim's
finish), and its answer with the noise verdict.

:func:`update_locked` runs in the caller's write transaction, the project locked: the
recording rules (:func:`lineage.service.record_rules.prepare_record`) apply to the
changes, ``delta_vs_best`` is recomputed (never taken), ``status: "auto"`` is decided
against the best of the other trials (:func:`lineage.domain.auto_verdict`, with the
project's noise floor), and the guardrails are evaluated again. Asked for
(``judge_noise``), the answer carries the trial's delta against the noise floor
(:func:`lineage.noise.judge`), as a record's answer does: read in the same transaction,
so it is the floor the verdict used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from lineage.domain import WRITABLE_FIELDS, FailureLabel, Project, Trial, auto_verdict, metric_delta, validate_trial
from lineage.errors import InvalidInput
from lineage.monitor import guardrails
from lineage.noise import NoiseVerdict, judge
from lineage.patches import without_patch
from lineage.service.record_rules import prepare_record
from lineage.store import Store

__all__ = ["Updated", "update_locked"]

#: texts that a null clears
_CLEARED_BY_NULL = ("parent_exp", "baseline_exp", "notes", "hypothesis", "expected_delta", "job_name", "snapshot_path")


@dataclass(frozen=True, slots=True)
class Updated:
    """A changed trial and, when asked for, its delta against the project's noise floor."""

    trial: Trial
    noise: NoiseVerdict | None = None

    def to_dict(self) -> dict[str, Any]:
        """The trial's fields (without its git patch) and ``noise`` (null: not judged)."""
        return {**without_patch(self.trial.to_dict()), "noise": None if self.noise is None else self.noise.to_dict()}


def update_locked(
    store: Store,
    conn: Connection,
    project: Project,
    current: Trial,
    changes: Mapping[str, Any],
    *,
    check_references: Callable[[Connection, Project, Trial], None],
    judge_noise: bool = False,
) -> Updated:
    """Change ``current`` by ``changes`` (module doc). ``check_references``: the parent and
    baseline rule (``RecordingUses._check_references``), run when either moves."""
    exp_id = current.exp_id
    if "exp_id" in changes and changes["exp_id"] != exp_id:
        raise InvalidInput("exp_id", "cannot be changed; record a new trial instead")
    prepared = prepare_record(project, changes, current=current)
    unknown = set(prepared.body) - set(WRITABLE_FIELDS)
    if unknown:
        raise InvalidInput(sorted(unknown)[0], "is not a trial field")
    values = {k: v for k, v in prepared.body.items() if k not in ("delta_vs_best", "exp_id")}
    if "status" in values and not isinstance(values["status"], FailureLabel):
        values["status"] = FailureLabel.parse(str(values["status"]))
    for name in _CLEARED_BY_NULL:
        if name in values and values[name] is None:
            values[name] = ""
    updated = validate_trial(current.with_changes(**values))
    if updated.parent_exp != current.parent_exp or updated.baseline_exp != current.baseline_exp:
        check_references(conn, project, updated)
    floor = store.repeats.floor(conn, project) if prepared.keep_margin is not None or judge_noise else None
    if prepared.keep_margin is not None:
        assert floor is not None
        # judged against the best of the others now (the project is locked): a run
        # planned before trials that finished first is measured against them too
        best_before = store.trials.best_scored(conn, project, excluding=exp_id)
        verdict = auto_verdict(project, updated.core_metric, best_before, prepared.keep_margin, floor)
        updated = updated.with_changes(status=verdict)
    else:
        best_before = store.trials.best_scored(conn, project, before_seq=current.seq)
    best_metric = best_before.core_metric if best_before else None
    stored = store.trials.update_trial(
        conn, project, updated.with_changes(delta_vs_best=metric_delta(updated.core_metric, best_metric))
    )
    guardrails.reevaluate(store, conn, project, exp_id=exp_id)
    if floor is None or not judge_noise:
        return Updated(stored)
    noise = judge(floor, stored.delta_vs_best, status=stored.status.value, exp_id=exp_id, best_metric=best_metric)
    return Updated(stored, noise)
