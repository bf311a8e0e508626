"""Two telemetry batches in flight at once (``Transport.in_flight``), against a real
``lineage serve`` behind a real proxy: the requests do overlap, never more than the window;
each batch is acknowledged in the spool on its own answer; a batch that fails while the
other succeeds is re-sent under its own key; the ledger dies with batches in flight; and
in every case each point is stored once and the trial is finished only after the ledger
answered every telemetry batch logged before it."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.trainer_hooks.client.conftest import (
    expected_points,
    fast_client,
    log_steps,
    offline_client,
    point_rows,
    step_value,
    stored_points,
    trial_count,
)
from tests.trainer_hooks.client.proxy import Fault
from trainer_hooks.client.delivery import Transport, Unavailable, deliver
from trainer_hooks.client.points import encode_columns, step_rows
from trainer_hooks.client.spool import Spool

pytestmark = pytest.mark.slow

#: generous upper bound for a wait on a busy 2-core machine (what happens sooner goes on)
WAIT_S = 60.0


class Watch:
    """What the proxy saw: telemetry requests in flight at each arrival, and for every other
    request how many telemetry requests were still unanswered when it arrived."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.arrived = 0
        self.answered = 0
        self.max_in_flight = 0
        self.others: list[tuple[str, str, int]] = []  # (method, path, telemetry unanswered)

    def arrive(self, method: str, path: str) -> int:
        """Count an arrival: a telemetry POST's number (1, 2, ...), 0 for any other request."""
        with self.lock:
            if method == "POST" and path.endswith("/telemetry"):
                self.arrived += 1
                self.max_in_flight = max(self.max_in_flight, self.arrived - self.answered)
                return self.arrived
            self.others.append((method, path, self.arrived - self.answered))
            return 0

    def done(self) -> None:
        with self.lock:
            self.answered += 1


def watched(watch: Watch, fault: Any = None) -> Any:
    """A proxy rule that counts telemetry requests in flight (a telemetry request counts as
    answered once its fault decided: the delay is taken before the rule returns)."""

    def rule(number: int, method: str, path: str) -> Fault:
        telemetry = watch.arrive(method, path)  # its number among telemetry POSTs, or 0
        found = fault(number, method, path, telemetry) if fault else Fault()
        if telemetry:
            if found.delay:
                time.sleep(found.delay)
            watch.done()
            return Fault(refuse=found.refuse, drop_reply=found.drop_reply, status=found.status)
        return found

    return rule


def test_two_batches_overlap_and_the_finish_waits_for_every_batch(serve, proxy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    watch = Watch()
    front = proxy(server.url, watched(watch, lambda n, m, p, t: Fault(delay=0.15) if t else Fault()))
    spool_dir = tmp_path / "spool"
    client = fast_client(front.url, spool_dir, max_batch_points=200, run_id="overlap", keep_spool=True)
    client.ensure_project()
    client.plan_trial(hypothesis="two in flight")
    log_steps(client, range(300))
    client.alert("halfway")
    log_steps(client, range(300, 600))
    client.finish_trial(core_metric=1.0)
    report = client.close()
    assert report.delivered, report
    assert watch.max_in_flight == 2  # overlapping, and never more than the window
    assert stored_points(db) == expected_points(range(600))
    assert trial_count(db) == 1
    finish = [unanswered for method, path, unanswered in watch.others if path.endswith("/finish")]
    alert = [unanswered for method, path, unanswered in watch.others if path.endswith("/alerts")]
    assert finish == [0] and alert == [0]  # sent only once no telemetry batch was unanswered
    with sqlite3.connect(spool_dir / "overlap.spool") as conn:
        unsent, batches = conn.execute("SELECT SUM(sent = 0), COUNT(DISTINCT group_key) FROM ops").fetchone()
    assert unsent == 0 and batches >= 6 and watch.arrived == batches  # each batch sent once, no retries needed


def test_one_batch_fails_while_the_other_succeeds_each_acknowledged_on_its_own(serve, proxy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """deliver() on a spool of four batches: the first to arrive is refused (503) only after
    the ledger answered the other, so both are in flight together. The answered one is marked
    sent, the refused one stays unsent under its key; the next deliver sends what is left and every
    point is stored once."""
    db, port, spool_dir, client = offline_client(tmp_path, "split", "one of two fails")
    assert not client.close(timeout=0.2).delivered
    spool = Spool(spool_dir / "split.spool")
    spool.append_points(
        [encode_columns([point_rows(range(k * 100, k * 100 + 100))]) for k in range(4)]
    )  # 400 points each
    server = serve(db, port=port)
    watch = Watch()

    def fault(number: int, method: str, path: str, telemetry: int) -> Fault:
        if telemetry == 1:  # the first batch: refused once the second was answered
            deadline = time.monotonic() + WAIT_S
            while watch.answered < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            return Fault(refuse=True, status=503)
        return Fault()

    front = proxy(server.url, watched(watch, fault))
    transport = Transport(front.url, None, "p", timeout=WAIT_S, in_flight=2)
    try:
        with pytest.raises(Unavailable):
            deliver(spool, transport, max_points=400)
        telemetry = [op for op in spool.ops() if op.kind == "columns"]
        unsent = {row[0] for row in spool._conn().execute("SELECT seq FROM ops WHERE sent = 0")}
        # the two in flight may reach the proxy in either order: the refused one is the one
        # that arrived first, the other is acknowledged on its own answer
        (refused,) = [k for k in (0, 1) if telemetry[k].seq in unsent]
        answered = 1 - refused
        assert telemetry[refused].group_key == f"split-{telemetry[refused].seq}"  # kept, under its key
        assert telemetry[answered].seq not in unsent
        stored = stored_points(db)
        assert max(stored.values()) == 1
        assert expected_points(range(answered * 100, answered * 100 + 100)) - stored == {}  # its points
        assert not set(expected_points(range(refused * 100, refused * 100 + 100))) & set(
            stored
        )  # none of the refused one's
        assert deliver(spool, transport, max_points=400) == 1600 - sum(stored.values())
    finally:
        transport.close()
    assert spool.pending() == (0, 0)
    assert stored_points(db) == expected_points(range(400))
    assert watch.max_in_flight == 2


def test_ledger_dies_with_batches_in_flight_and_every_point_is_stored_once(serve, proxy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    watch = Watch()
    killed = threading.Event()

    def fault(number: int, method: str, path: str, telemetry: int) -> Fault:
        if telemetry and not killed.is_set() and watch.arrived - watch.answered >= 2:
            killed.set()  # two in flight: the ledger goes away under them
            server.kill()
            return Fault()  # forwarded to a dead ledger: 502
        if telemetry and telemetry % 3 == 0:
            return Fault(drop_reply=True, status=502)  # stored, but the client hears 502
        return Fault(delay=0.05) if telemetry else Fault()

    front = proxy(server.url, watched(watch, fault))
    client = fast_client(front.url, tmp_path / "spool", max_batch_points=150)
    client.ensure_project()
    client.plan_trial(hypothesis="dies mid-flight")
    log_steps(client, range(400))
    deadline = time.monotonic() + WAIT_S
    while not killed.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert killed.is_set()
    assert client.flush(timeout=0.3) is False
    server.start()
    log_steps(client, range(400, 500))
    client.finish_trial(core_metric=1.0)
    assert client.close().delivered
    assert stored_points(db) == expected_points(range(500))
    assert trial_count(db) == 1
    assert [u for _, path, u in watch.others if path.endswith("/finish")][-1] == 0


def test_a_batch_spooled_while_one_is_in_flight_goes_out_before_that_one_is_answered(tmp_path: Path) -> None:
    """deliver() with the writer's ``wake`` event: with one batch in flight and nothing
    more spooled it waits for the answer or the event, so a batch appended meanwhile fills
    the window at once (the ledger here holds the first request until the second came)."""
    import httpx

    spool = Spool(tmp_path / "w.spool")
    spool.set("run_id", "w")
    spool.set("exp_id", "e1")
    chunk = encode_columns([step_rows(s, {"loss": step_value(s, "loss")}, None, 1.7e9)[0] for s in range(10)])
    spool.append_points([chunk])
    second = threading.Event()
    order: list[str] = []

    def ledger(request: httpx.Request) -> httpx.Response:
        key = request.headers["Idempotency-Key"]
        order.append(f"arrived {key}")
        if len(order) == 1:
            second.wait(WAIT_S)  # the first batch is answered only once the second arrived
        else:
            second.set()
        order.append(f"answered {key}")
        return httpx.Response(201, json={"accepted": 10, "replayed": False, "batch_id": key})

    http = httpx.Client(base_url="http://127.0.0.1:9", transport=httpx.MockTransport(ledger))
    transport = Transport("http://127.0.0.1:9", None, "p", http=http)
    wake = threading.Event()
    sent: list[int] = []
    sender = threading.Thread(target=lambda: sent.append(deliver(spool, transport, max_points=10, wake=wake)))
    sender.start()
    deadline = time.monotonic() + WAIT_S
    while not order and time.monotonic() < deadline:
        time.sleep(0.01)
    spool.append_points([chunk])
    wake.set()
    sender.join(WAIT_S)
    transport.close()
    assert order == ["arrived w-1", "arrived w-2", "answered w-2", "answered w-1"]
    assert sent == [20] and spool.pending() == (0, 0)
