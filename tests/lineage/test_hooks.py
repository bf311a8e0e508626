"""Webhooks (lineage.monitor.hooks, lineage.monitor.delivery) against a real local HTTP receiver."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from typing import Any

import pytest
from sqlalchemy import text

from lineage.db import make_engine
from lineage.errors import InvalidInput, NotFound
from lineage.monitor.delivery import DeliveryPolicy, deliver_due
from lineage.service import Ledger
from tests.lineage.webhook_receiver import Receiver

FAST = DeliveryPolicy(timeout_s=2.0, max_attempts=3, backoff_s=0.05, max_backoff_s=0.2, poll_s=0.05)

pytestmark = pytest.mark.usefixtures("private_hook_targets")  # receivers listen on loopback


def _states(engine) -> list[tuple[str, int, str]]:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return [
            tuple(row)
            for row in conn.execute(  # type: ignore[misc]
                text("SELECT state, attempts, last_error FROM hook_deliveries ORDER BY id")
            )
        ]


def _deliver_until(ledger: Ledger, policy: DeliveryPolicy, done, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Run delivery rounds until ``done()`` (the backoff makes later rounds due)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "delivery did not finish in time"
        deliver_due(ledger, policy)
        time.sleep(0.02)


def _verify(secret: str, received) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """What a receiver does: recompute the HMAC over timestamp + body, compare in constant time."""
    timestamp = received.headers["x-lineage-timestamp"]
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + received.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(received.headers["x-lineage-signature"], f"sha256={expected}")
    assert abs(time.time() - int(timestamp)) < 300
    return json.loads(received.body)


@pytest.fixture
def project(ledger: Ledger) -> Ledger:
    ledger.projects.create_project("p", metric_name="loss")
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})
    return ledger


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/hook",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "example.com/hook",
        "http://",
        "http://exa mple.com/",
        "https://example.com/\n",
        "",
        "http://example.com:99999/",
        "x" * 3000,
    ],
)
def test_a_url_that_is_not_http_is_a_clear_error(project: Ledger, url: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        project.agent.add_hook("p", url)
    assert caught.value.field == "url"
    assert project.agent.hooks("p") == []


def test_unknown_events_and_formats_name_their_field(project: Ledger) -> None:
    with pytest.raises(InvalidInput) as caught:
        project.agent.add_hook("p", "http://127.0.0.1/x", events=["new_best", "exploded"])
    assert caught.value.field == "events" and "exploded" in caught.value.message
    with pytest.raises(InvalidInput) as caught:
        project.agent.add_hook("p", "http://127.0.0.1/x", body_format="xml")
    assert caught.value.field == "format"


def test_the_secret_is_shown_once(project: Ledger) -> None:
    hook, secret = project.agent.add_hook("p", "https://example.com/hook", events=["new_best,trial_crashed"])
    assert secret.startswith("whsec_") and len(secret) > 40
    listed = project.agent.hooks("p")
    assert [h.id for h in listed] == [hook.id] and listed[0].events == ("new_best", "trial_crashed")
    assert secret not in json.dumps([h.to_dict() for h in listed])


def test_events_are_signed_and_carry_the_documented_payload(project: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    with Receiver("ok") as receiver:
        _, secret = project.agent.add_hook("p", receiver.url)
        project.recording.record_trial(
            "p", {"status": "keep", "core_metric": 0.5, "hypothesis": "smaller lr", "parent_exp": "000"}
        )
        project.recording.record_trial("p", {"status": "crash", "hypothesis": "bigger batch"})
        assert receiver.requests == []  # recording wrote to the outbox only
        report = deliver_due(project, FAST)
        assert report.delivered == 2
        first, second = (_verify(secret, r) for r in receiver.wait_for(2))
    assert first["type"] == "new_best" and second["type"] == "trial_crashed"
    assert set(first) == {"version", "id", "type", "project", "occurred_at", "trial", "best_before", "text"}
    assert first["trial"]["exp_id"] == "001" and first["trial"]["core_metric"] == 0.5
    assert first["best_before"] == {"exp_id": "000", "core_metric": 1.0}
    assert first["project"] == "p" and first["version"] == 1 and "new best" in first["text"]
    assert second["trial"]["status"] == "crash" and second["trial"]["hypothesis"] == "bigger batch"
    headers = receiver.requests[0].headers
    assert headers["x-lineage-event"] == "new_best" and headers["x-lineage-event-id"] == first["id"]
    assert headers["content-type"] == "application/json"
    assert _states(engine) == [("delivered", 1, ""), ("delivered", 1, "")]
    assert deliver_due(project, FAST).delivered == 0  # nothing is sent twice


def test_slack_format_sends_text_only_and_events_filter(project: Ledger) -> None:
    with Receiver("ok") as receiver:
        _, secret = project.agent.add_hook("p", receiver.url, events=["trial_crashed"], body_format="slack")
        project.recording.record_trial("p", {"status": "keep", "core_metric": 0.1})
        project.recording.record_trial("p", {"status": "preflight_crash"})
        deliver_due(project, FAST)
        (received,) = receiver.wait_for(1)
        assert _verify(secret, received) == {"text": "[p] trial exp 002 crashed (preflight_crash)"}


def test_a_receiver_answering_500_gets_bounded_retries_then_the_delivery_fails(project: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    with Receiver("fail") as receiver:
        project.agent.add_hook("p", receiver.url, events=["trial_crashed"])
        project.recording.record_trial("p", {"status": "crash"})
        _deliver_until(project, FAST, lambda: _states(engine)[0][0] == "failed")
        assert len(receiver.requests) == FAST.max_attempts
        deliver_due(project, FAST)
        assert len(receiver.requests) == FAST.max_attempts  # failed is final
    assert _states(engine) == [("failed", 3, "HTTP 500")]
    assert project.agent.hooks("p")[0].failed == 1


def test_a_hanging_receiver_times_out_and_never_holds_up_a_writer(project: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    policy = DeliveryPolicy(timeout_s=0.5, max_attempts=2, backoff_s=0.05, max_backoff_s=0.05)
    with Receiver("hang") as receiver:
        project.agent.add_hook("p", receiver.url, events=["trial_crashed"])
        project.recording.record_trial("p", {"status": "crash"})
        worker = threading.Thread(
            target=_deliver_until, args=(project, policy, lambda: _states(engine)[0][0] == "failed")
        )
        worker.start()
        receiver.wait_for(1)
        # the receiver holds a delivery open: writes go on
        for _ in range(5):
            project.recording.record_trial("p", {"status": "discard", "core_metric": 3.0})
        assert worker.is_alive()
        worker.join(30)
        assert not worker.is_alive()
    state, attempts, error = _states(engine)[0]
    assert (state, attempts) == ("failed", 2) and "timed out" in error.lower()


def test_a_receiver_down_for_a_while_gets_the_event_when_it_comes_up(project: Ledger, engine, db_url: str) -> None:  # type: ignore[no-untyped-def]
    receiver = Receiver("ok")  # not listening yet
    policy = DeliveryPolicy(timeout_s=1.0, max_attempts=10, backoff_s=0.05, max_backoff_s=0.2)
    _, secret = project.agent.add_hook("p", receiver.url, events=["new_best"])
    project.recording.record_trial("p", {"status": "keep", "core_metric": 0.25})
    report = deliver_due(project, policy)
    assert (report.delivered, report.retrying) == (0, 1) and "refused" in report.errors[0].lower()
    assert _states(engine)[0][:2] == ("pending", 1)
    project.close()  # the process that wrote the event is gone: the outbox is in the database
    restarted = Ledger(make_engine(db_url))
    try:
        with receiver:
            _deliver_until(restarted, policy, lambda: _states(engine)[0][0] == "delivered")
            (received,) = receiver.requests
            assert _verify(secret, received)["trial"]["core_metric"] == 0.25
    finally:
        restarted.close()
    assert _states(engine)[0][:2] == ("delivered", 2)


def test_several_workers_deliver_each_event_exactly_once(project: Ledger, db_url: str) -> None:
    with Receiver("ok") as receiver:
        project.agent.add_hook("p", receiver.url, events=["trial_crashed"])
        for _ in range(30):
            project.recording.record_trial("p", {"status": "crash"})
        workers = [Ledger(make_engine(db_url)) for _ in range(3)]
        policy = DeliveryPolicy(timeout_s=2.0, batch=4)
        threads = [threading.Thread(target=deliver_due, args=(worker, policy)) for worker in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        for worker in workers:
            worker.close()
        ids = [r.headers["x-lineage-delivery"] for r in receiver.wait_for(30)]
    assert len(ids) == 30 and len(set(ids)) == 30


def test_a_lapsed_claim_is_taken_over(project: Ledger) -> None:
    """A worker that died mid-delivery leaves a lease; once it lapses another worker sends."""
    with Receiver("ok") as receiver:
        project.agent.add_hook("p", receiver.url, events=["trial_crashed"])
        project.recording.record_trial("p", {"status": "crash"})
        now = time.time()
        with project.store.write() as conn:
            claimed = project.store.outbox.claim_due_deliveries(
                conn, now=now, lease_until=now + 3600, token="dead", limit=10
            )
        assert len(claimed) == 1
        assert deliver_due(project, FAST).delivered == 0  # leased to the dead worker
        assert deliver_due(project, FAST, now=now + 3601).delivered == 1
        assert len(receiver.wait_for(1)) == 1


def test_removing_a_hook_drops_its_outbox(project: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    hook, _ = project.agent.add_hook("p", "http://127.0.0.1:9/x")
    project.recording.record_trial("p", {"status": "crash"})
    assert len(_states(engine)) == 1
    project.agent.remove_hook("p", hook.id)
    assert _states(engine) == [] and project.agent.hooks("p") == []
    with pytest.raises(NotFound):
        project.agent.remove_hook("p", hook.id)


def test_without_hooks_a_write_adds_nothing_to_the_outbox(project: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    project.recording.record_trial("p", {"status": "crash"})
    project.recording.record_trial("p", {"status": "keep", "core_metric": 0.1})
    assert _states(engine) == []


def test_a_stopping_worker_gives_back_what_it_did_not_try(project: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    """Shutdown: the round ends after the request in flight; the rest is due again at once."""
    policy = DeliveryPolicy(timeout_s=0.5, max_attempts=5, backoff_s=60, batch=10)
    with Receiver("hang") as receiver:
        project.agent.add_hook("p", receiver.url, events=["trial_crashed"])
        for _ in range(3):
            project.recording.record_trial("p", {"status": "crash"})
        stop = threading.Event()
        worker = threading.Thread(target=deliver_due, args=(project, policy), kwargs={"stop": stop})
        worker.start()
        receiver.wait_for(1)
        stop.set()
        worker.join(10)
        assert not worker.is_alive() and len(receiver.requests) == 1
    assert [state[:2] for state in _states(engine)] == [("pending", 1), ("pending", 0), ("pending", 0)]
    with engine.connect() as conn:
        assert (
            conn.execute(text("SELECT COUNT(*) FROM hook_deliveries WHERE claim_token IS NOT NULL")).scalar_one() == 0
        )
