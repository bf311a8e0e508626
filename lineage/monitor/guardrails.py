"""Guardrails: per-project limits that say "stop and tell the owner".

A project's policy (table ``guardrail_policies``; any limit may be off, NULL):

=================  ===============================  ===================================
guardrail          limit (policy field)             trips when
=================  ===============================  ===================================
``crash_streak``   ``max_crash_streak``             the newest N trials all crashed
                                                    (``lineage.monitor.progress.CRASH_STATUSES``)
``no_improvement`` ``max_trials_without_improvement``  M trials since the current best
                                                    (once the project has a noise floor,
                                                    since the best last moved beyond k·σ)
``budget_hours``   ``budget_hours``                 the sum of ``total_s`` reaches H hours
=================  ===============================  ===================================

Trip state lives in the database (``guardrail_policies.tripped``), written by the trial
writer in its transaction and under the project's write lock, so with several servers on
one PostgreSQL exactly one write sees a guardrail go from clear to tripped, and only that
write emits the ``guardrail_tripped`` event (``lineage.monitor.hooks``): once per trip. A trip
clears when its condition no longer holds (a trial that did not crash, a new best, a
raised limit); a later trip is a new trip and emits again.

Who may set a policy: a **writer** (HTTP ``PUT /projects/{p}/guardrails``, CLI ``lineage
guardrail set``). A policy only changes what the ledger tells the loop and its owner, not
the trials, and the loop's owner configures the project with the same role (``PATCH
/projects/{p}``). Webhooks, which send data to other hosts, need an admin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from sqlalchemy import Connection

from lineage.domain import Project, Trial
from lineage.errors import InvalidInput
from lineage.monitor import hooks
from lineage.monitor.progress import CRASH_STATUSES, Progress, crash_streak, trials_since_gain
from lineage.noise import NoiseFloor
from lineage.store import Store

#: A project's guardrail row as ``Store.progress.guardrail_policy`` reads it (None: no guardrails).
PolicyRow = dict[str, Any] | None


class Unread(Enum):
    """Passed as ``policy`` to :func:`after_trial`: the caller has not read the guardrail
    row (or holds a copy that may be stale), so it is read in the transaction."""

    POLICY = "unread"


#: Guardrail name -> the policy field holding its limit.
LIMIT_FIELDS: dict[str, str] = {
    "crash_streak": "max_crash_streak",
    "no_improvement": "max_trials_without_improvement",
    "budget_hours": "budget_hours",
}
POLICY_FIELDS = tuple(LIMIT_FIELDS.values())
#: Largest count limit and largest budget.
MAX_COUNT_LIMIT = 1_000_000
MAX_BUDGET_HOURS = 1_000_000.0


@dataclass(frozen=True, slots=True)
class GuardrailPolicy:
    max_crash_streak: int | None = None
    max_trials_without_improvement: int | None = None
    budget_hours: float | None = None

    @property
    def is_empty(self) -> bool:
        return all(getattr(self, name) is None for name in POLICY_FIELDS)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in POLICY_FIELDS}


def check_policy(values: Mapping[str, Any]) -> GuardrailPolicy:
    """A policy from ``values`` (fields of :data:`POLICY_FIELDS`; a missing one is off), or
    :class:`InvalidInput` naming the field."""
    unknown = sorted(set(values) - set(POLICY_FIELDS))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a guardrail; known: {', '.join(POLICY_FIELDS)}")
    checked: dict[str, Any] = {}
    for name in ("max_crash_streak", "max_trials_without_improvement"):
        value = values.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT_LIMIT
        ):
            raise InvalidInput(name, f"must be an integer from 1 to {MAX_COUNT_LIMIT} (or null: off), got {value!r}")
        checked[name] = value
    hours = values.get("budget_hours")
    if hours is not None:
        if (
            isinstance(hours, bool)
            or not isinstance(hours, (int, float))
            or not math.isfinite(hours)
            or not 0 < hours <= MAX_BUDGET_HOURS
        ):
            raise InvalidInput(
                "budget_hours",
                f"must be a number of hours above 0 and at most {MAX_BUDGET_HOURS:g} (or null: off), got {hours!r}",
            )
        hours = float(hours)
    checked["budget_hours"] = hours
    return GuardrailPolicy(**checked)


def _policy_of(row: Mapping[str, Any]) -> GuardrailPolicy:
    return GuardrailPolicy(**{name: row[name] for name in POLICY_FIELDS})


def message(name: str, value: float, limit: float, floor: NoiseFloor | None = None) -> str:
    """One line saying what tripped, for the summary, the prompt, the pages and events.
    ``floor``: the project's noise floor; with a σ, ``no_improvement`` says that it counts
    from the first trial within k·σ of the best (``trials_since_gain``)."""
    if name == "crash_streak":
        return f"{value:g} consecutive crashes (limit {limit:g}): stop and find out why trials crash"
    if name == "no_improvement":
        if floor is not None and floor.threshold is not None:
            return (
                f"no gain beyond noise in {value:g} trials, counted from the first trial within k·σ "
                f"{floor.threshold:.3g} of the best ({floor.describe()}, k {floor.k:g}; limit {limit:g}): "
                "change approach or stop"
            )
        return f"no new best in {value:g} trials (limit {limit:g}): change approach or stop"
    return f"{value:.2f} hours spent (budget {limit:g} h): the budget is used up; stop"


def tripped_now(
    policy: GuardrailPolicy, *, crash_streak: int, trials_since_improvement: int, hours: Callable[[], float]
) -> dict[str, tuple[float, float]]:
    """``name -> (value, limit)`` of the guardrails the figures trip. ``hours`` is called
    only when a budget is set (it reads the per-status totals of ``total_s``)."""
    found: dict[str, tuple[float, float]] = {}
    if policy.max_crash_streak is not None and crash_streak >= policy.max_crash_streak:
        found["crash_streak"] = (crash_streak, policy.max_crash_streak)
    if (
        policy.max_trials_without_improvement is not None
        and trials_since_improvement >= policy.max_trials_without_improvement
    ):
        found["no_improvement"] = (trials_since_improvement, policy.max_trials_without_improvement)
    if policy.budget_hours is not None:
        spent = hours()
        if spent >= policy.budget_hours:
            found["budget_hours"] = (round(spent, 6), policy.budget_hours)
    return found


def _record_trips(
    store: Store,
    conn: Connection,
    project: Project,
    row: Mapping[str, Any],
    now: Mapping[str, tuple[float, float]],
    *,
    exp_id: str | None,
    subscribed: list[hooks.Subscription] | None = None,
    floor: NoiseFloor | None = None,
) -> list[str]:
    """Store the trips in force and emit one event per new trip; the names newly tripped
    (``floor``: the noise floor the figures were counted with, for the messages)."""
    old = row["tripped"]
    stamp = datetime.now(UTC).isoformat()
    state = {
        name: old[name] if name in old else {"value": value, "limit": limit, "exp_id": exp_id, "at": stamp}
        for name, (value, limit) in now.items()
    }
    new = [name for name in now if name not in old]
    if state != old:
        store.progress.save_tripped(conn, project.stored_id, state)
    for name in new:
        value, limit = now[name]
        hooks.enqueue(
            store,
            conn,
            project,
            "guardrail_tripped",
            {
                "guardrail": {
                    "name": name,
                    "value": value,
                    "limit": limit,
                    "message": message(name, value, limit, floor),
                },
                "trial": {"exp_id": exp_id} if exp_id else None,
            },
            subscribed=subscribed,
        )
    return new


def after_trial(
    store: Store,
    conn: Connection,
    project: Project,
    trial: Trial,
    *,
    best: Trial | None,
    trial_count: int,
    subscribed: list[hooks.Subscription] | None = None,
    policy: PolicyRow | Unread = Unread.POLICY,
) -> list[str]:
    """After ``trial`` was recorded (in the writer's transaction): update the trips; the
    names newly tripped. One primary-key look-up when the project has no guardrails; with
    them, a short index walk for a crash streak and the per-status totals for a budget.
    ``policy``: the guardrail row already read (``Store.progress.hooks_and_guardrails``),
    None when the project has none, or ``Unread.POLICY`` (the default) to read it here."""
    row = store.progress.guardrail_policy(conn, project.stored_id) if policy is Unread.POLICY else policy
    if row is None:
        return []
    streak = crash_streak(store, conn, project.stored_id, trial_count) if trial.status.value in CRASH_STATUSES else 0
    current = _policy_of(row)
    floor = store.repeats.floor(conn, project) if current.max_trials_without_improvement is not None else None
    since = trials_since_gain(store, conn, project, best, trial_count, floor) if floor is not None else 0
    now = tripped_now(
        current,
        crash_streak=streak,
        trials_since_improvement=since,
        hours=lambda: store.progress.total_seconds(conn, project.stored_id) / 3600,
    )
    return _record_trips(store, conn, project, row, now, exp_id=trial.exp_id, subscribed=subscribed, floor=floor)


def reevaluate(store: Store, conn: Connection, project: Project, *, exp_id: str | None = None) -> list[str]:
    """Update the trips from the project's figures read afresh (after a trial update, an
    import or a policy change); the names newly tripped."""
    row = store.progress.guardrail_policy(conn, project.stored_id)
    if row is None:
        return []
    count = store.projects.project_counters(conn, project)[0]
    floor = store.repeats.floor(conn, project)
    now = tripped_now(
        _policy_of(row),
        crash_streak=crash_streak(store, conn, project.stored_id, count),
        trials_since_improvement=trials_since_gain(
            store, conn, project, store.trials.best_scored(conn, project), count, floor
        ),
        hours=lambda: store.progress.total_seconds(conn, project.stored_id) / 3600,
    )
    return _record_trips(store, conn, project, row, now, exp_id=exp_id, floor=floor)


def set_policy(store: Store, conn: Connection, project: Project, values: Mapping[str, Any]) -> GuardrailPolicy:
    """Replace the project's policy, re-evaluate it (a limit already reached trips now)
    and move the project's revision (its prompt shows the guardrails)."""
    policy = check_policy(values)
    if policy.is_empty:
        store.progress.delete_guardrail_policy(conn, project.stored_id)
    else:
        store.progress.save_guardrail_policy(conn, project.stored_id, **policy.to_dict())
        reevaluate(store, conn, project)
    store.progress.bump_revision(conn, project.stored_id)
    return policy


def policy(store: Store, conn: Connection, project: Project) -> GuardrailPolicy:
    row = store.progress.guardrail_policy(conn, project.stored_id)
    return GuardrailPolicy() if row is None else _policy_of(row)


def state(store: Store, conn: Connection, project: Project, progress: Progress) -> dict[str, Any] | None:
    """The guardrails as the summary shows them: the policy and each guardrail the
    project's figures trip now, with when the trip began (None: no guardrails)."""
    row = store.progress.guardrail_policy(conn, project.stored_id)
    if row is None:
        return None
    current = _policy_of(row)
    now = tripped_now(
        current,
        crash_streak=progress.crash_streak,
        trials_since_improvement=(
            progress.trials_since_improvement
            if progress.trials_since_improvement_above_noise is None
            else progress.trials_since_improvement_above_noise
        ),
        hours=lambda: progress.time_spent_s / 3600,
    )
    stored = row["tripped"]
    return {
        "policy": current.to_dict(),
        "tripped": [
            {
                "name": name,
                "value": value,
                "limit": limit,
                "message": message(name, value, limit, progress.noise),
                "since_exp_id": stored.get(name, {}).get("exp_id"),
                "since": stored.get(name, {}).get("at"),
            }
            for name, (value, limit) in now.items()
        ],
    }
