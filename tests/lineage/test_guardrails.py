"""Guardrails (lineage.monitor.guardrails): policies, trips decided by the database, one event per trip."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from sqlalchemy import text

from lineage.db import make_engine
from lineage.errors import InvalidInput
from lineage.service import Ledger

pytestmark = pytest.mark.usefixtures("private_hook_targets")  # receivers listen on loopback

NO_RECEIVER = "http://127.0.0.1:9/never-called"


def _record(ledger: Ledger, status: str, metric: float | None = None, total_s: float | None = None) -> None:
    ledger.recording.record_trial("p", {"status": status, "core_metric": metric, "total_s": total_s})


def _events(engine, kind: str = "guardrail_tripped") -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT body FROM hook_deliveries WHERE event_type = :t ORDER BY id"), {"t": kind})
        return [json.loads(body) for (body,) in rows]


def _tripped(ledger: Ledger) -> list[str]:
    state = ledger.agent.summary("p").guardrails
    return [trip["name"] for trip in state["tripped"]] if state else []


@pytest.fixture
def project(ledger: Ledger) -> Ledger:
    ledger.projects.create_project("p")
    ledger.agent.add_hook("p", NO_RECEIVER, events=["guardrail_tripped"])
    return ledger


def test_crash_streak_trips_once_and_clears_on_a_trial_that_runs(project: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    project.agent.set_guardrails("p", {"max_crash_streak": 3})
    _record(project, "baseline", 1.0)
    for _ in range(2):
        _record(project, "crash")
    assert _tripped(project) == [] and _events(engine) == []
    for _ in range(3):  # the third crash trips; the next two are the same trip
        _record(project, "crash")
    assert _tripped(project) == ["crash_streak"]
    events = _events(engine)
    assert len(events) == 1
    assert events[0]["guardrail"]["name"] == "crash_streak" and events[0]["guardrail"]["value"] == 3
    assert events[0]["trial"] == {"exp_id": "003"} and events[0]["type"] == "guardrail_tripped"
    _record(project, "discard", 2.0)
    assert _tripped(project) == []
    for _ in range(3):
        _record(project, "preflight_crash")
    assert len(_events(engine)) == 2  # a new trip after a clear emits again


def test_no_improvement_trips_and_a_new_best_clears_it(project: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    project.agent.set_guardrails("p", {"max_trials_without_improvement": 2})
    _record(project, "baseline", 1.0)
    _record(project, "discard", 2.0)
    assert _tripped(project) == []
    _record(project, "discard", 2.0)
    assert _tripped(project) == ["no_improvement"]
    _record(project, "keep", 0.5)
    assert _tripped(project) == []
    assert [e["guardrail"]["name"] for e in _events(engine)] == ["no_improvement"]


def test_budget_trips_when_total_hours_reach_it(project: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    project.agent.set_guardrails("p", {"budget_hours": 1.5})
    _record(project, "keep", 1.0, total_s=3600)
    assert _tripped(project) == []
    _record(project, "keep", 0.9, total_s=1800)
    _record(project, "keep", 0.8, total_s=1800)
    assert _tripped(project) == ["budget_hours"]
    assert len(_events(engine)) == 1
    message = project.agent.summary("p").guardrails["tripped"][0]["message"]
    assert "budget 1.5 h" in message


def test_a_limit_already_reached_trips_when_the_policy_is_set(project: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    for _ in range(4):
        _record(project, "crash")
    revision = project.projects.project("p").revision
    project.agent.set_guardrails("p", {"max_crash_streak": 4})
    assert _tripped(project) == ["crash_streak"] and len(_events(engine)) == 1
    assert project.projects.project("p").revision == revision + 1  # the prompt's ETag changes
    project.agent.set_guardrails("p", {"max_crash_streak": 4, "budget_hours": 100})
    assert len(_events(engine)) == 1  # still the same trip
    project.agent.set_guardrails("p", {"max_crash_streak": 10})
    assert _tripped(project) == []


def test_removing_every_limit_removes_the_policy(project: Ledger) -> None:
    project.agent.set_guardrails("p", {"max_crash_streak": 2})
    project.agent.set_guardrails("p", {})
    assert project.agent.summary("p").guardrails is None
    assert project.agent.guardrail_policy("p").is_empty


def test_an_updated_trial_re_evaluates_the_trips(project: Ledger) -> None:
    project.agent.set_guardrails("p", {"max_crash_streak": 2})
    _record(project, "crash")
    _record(project, "crash")
    assert _tripped(project) == ["crash_streak"]
    project.recording.update_trial("p", "001", {"status": "discard"})
    assert _tripped(project) == []


def test_prompt_wrapper_says_a_guardrail_tripped(project: Ledger) -> None:
    project.agent.set_guardrails("p", {"max_crash_streak": 1})
    _record(project, "crash")
    _, wrapped = project.agent.prompt_document("p", specialist="s")
    assert "- GUARDRAIL TRIPPED: 1 consecutive crashes (limit 1)" in wrapped
    assert "A guardrail of this project has tripped." in wrapped
    _, raw = project.agent.prompt_document("p", specialist="s", wrap=False)
    assert "GUARDRAIL" not in raw


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"max_crash_streak": 0}, "max_crash_streak"),
        ({"max_crash_streak": 2.5}, "max_crash_streak"),
        ({"max_crash_streak": True}, "max_crash_streak"),
        ({"max_trials_without_improvement": -3}, "max_trials_without_improvement"),
        ({"budget_hours": 0}, "budget_hours"),
        ({"budget_hours": float("nan")}, "budget_hours"),
        ({"budget_hours": "ten"}, "budget_hours"),
        ({"max_crashes": 3}, "max_crashes"),
    ],
)
def test_a_bad_policy_names_its_field_and_writes_nothing(project: Ledger, values: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        project.agent.set_guardrails("p", values)
    assert caught.value.field == field
    assert project.agent.guardrail_policy("p").is_empty


def test_several_ledgers_on_one_database_emit_one_event_per_trip(project: Ledger, engine, db_url: str) -> None:  # type: ignore[no-untyped-def]
    """Two ledgers with engines of their own (two servers) record crashes at the same time:
    the trip is decided under the project's write lock, so it is emitted exactly once."""
    project.agent.set_guardrails("p", {"max_crash_streak": 5})
    others = [Ledger(make_engine(db_url)) for _ in range(2)]
    start = threading.Barrier(len(others))
    failures: list[BaseException] = []

    def crash_many(other: Ledger) -> None:
        try:
            start.wait()
            for _ in range(10):
                other.recording.record_trial("p", {"status": "crash"})
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=crash_many, args=(other,)) for other in others]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for other in others:
        other.close()
    assert failures == []
    assert project.agent.summary("p").crash_streak == 20
    events = _events(engine)
    assert len(events) == 1 and events[0]["trial"] == {"exp_id": "004"}
