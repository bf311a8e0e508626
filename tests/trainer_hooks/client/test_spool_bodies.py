"""The spool's telemetry bodies (``trainer_hooks.client.spool``, "Bodies from memory"): a
batch a live client sends comes from memory yet is on disk, unsent, until the ledger
acknowledged it; what is not in memory (past the memory budget, after a restart, in a
spool of the earlier layout with bodies in ``ops``) is read from the file, and the
requests are the same bytes either way. The ledger here is an ``httpx.MockTransport``:
what is checked is what the client sends and what its spool file holds meanwhile."""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from trainer_hooks.client.delivery import Transport, Unavailable, deliver
from trainer_hooks.client.points import encode_columns, step_record
from trainer_hooks.client.spool import Spool


def blocks(count: int, steps: int = 50) -> list[tuple[bytes, int]]:
    """``count`` columnar chunks of ``steps`` steps of two scalars each."""
    return [
        encode_columns(
            [
                step_record(step, {"loss": 1.0 / (step + 1), "lr": 0.5}, None, 1.7e9)[0]
                for step in range(k * steps, (k + 1) * steps)
            ]
        )
        for k in range(count)
    ]


def a_spool(path: Path, **kwargs: Any) -> Spool:
    spool = Spool(path, **kwargs)
    spool.set("run_id", "r")
    spool.set("exp_id", "e1")
    return spool


def on_disk(path: Path) -> dict[int, tuple[int, str | None, bytes | None]]:
    """``seq -> (sent, group_key, body)`` of the telemetry ops, as another process reads the file."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT o.seq, o.sent, o.group_key, COALESCE(b.body, o.body) FROM ops o "
            "LEFT JOIN bodies b ON b.seq = o.seq WHERE o.kind = 'columns'"
        ).fetchall()
    return {
        seq: (sent, key, body if body is None or isinstance(body, bytes) else body.encode())
        for seq, sent, key, body in rows
    }


class Ledger:
    """A mock ledger recording each telemetry request; ``answers`` pops a status per request
    (201 once they run out), ``check`` runs on each request before it is answered."""

    def __init__(self, answers: list[int] | None = None, check: Any = None) -> None:
        self.answers = list(answers or [])
        self.check = check
        self.requests: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        key = request.headers["Idempotency-Key"]
        with self.lock:
            self.requests.append((key, body))
            status = self.answers.pop(0) if self.answers else 201
        if self.check is not None:
            self.check(key, body)
        return httpx.Response(status, json={"accepted": 0, "replayed": False, "batch_id": key})

    def transport(self) -> Transport:
        http = httpx.Client(base_url="http://127.0.0.1:9", transport=httpx.MockTransport(self.handle))
        return Transport("http://127.0.0.1:9", None, "p", http=http)


def test_a_batch_goes_from_memory_and_stays_on_disk_unsent_until_the_ledger_acknowledged_it(tmp_path: Path) -> None:
    path = tmp_path / "r.spool"
    spool = a_spool(path)
    chunks = blocks(2)
    seqs = spool.append_points(chunks)
    seen: list[dict[int, tuple[int, str | None, bytes | None]]] = []

    def check(key: str, body: bytes) -> None:
        seen.append(on_disk(path))  # while the ledger holds the request, before its answer

    ledger = Ledger(answers=[503], check=check)
    transport = ledger.transport()
    try:
        with pytest.raises(Unavailable):
            deliver(spool, transport, max_points=1000)
        assert len(ledger.requests) == 1
        key, body = ledger.requests[0]
        assert key == f"r-{seqs[0]}"
        assert body == b'{"batch_id":"r-%d","columns":[%s,%s]}' % (seqs[0], chunks[0][0], chunks[1][0])
        for state in (seen[0], on_disk(path)):  # while in flight, and after the 503
            assert state == {seq: (0, key, chunk) for seq, (chunk, _) in zip(seqs, chunks)}
        assert deliver(spool, transport, max_points=1000) == 200  # retried: same key, same bytes
        assert ledger.requests[1] == (key, body)
        assert seen[1] == seen[0]  # still unsent on disk while the retry was in flight
    finally:
        transport.close()
    assert on_disk(path) == {seq: (1, key, None) for seq in seqs}  # acknowledged: marked, body gone
    assert spool.pending() == (0, 0)


def test_bodies_past_the_memory_budget_and_after_a_restart_are_read_from_the_file(tmp_path: Path) -> None:
    chunks = blocks(3)
    live = a_spool(tmp_path / "r.spool", hot_bytes=len(chunks[0][0]))  # memory for the first body only
    live.append_points(chunks)
    shutil.copytree(tmp_path, tmp_path.parent / "copy")  # the same file, opened again: a restart
    restarted = a_spool(tmp_path.parent / "copy" / "r.spool")
    sent = []
    for spool in (live, restarted):
        ledger = Ledger()
        transport = ledger.transport()
        try:
            assert deliver(spool, transport, max_points=100) == 300  # one chunk a batch
        finally:
            transport.close()
        assert spool.pending() == (0, 0)
        sent.append(ledger.requests)
    assert sent[0] == sent[1]
    assert [json.loads(body)["columns"] for _, body in sent[0]] == [json.loads(chunk) for chunk, _ in chunks]


def test_a_spool_of_the_earlier_layout_with_bodies_in_ops_is_delivered(tmp_path: Path) -> None:
    """Earlier clients kept a telemetry body in its ``ops`` row (no ``bodies`` table): the
    body is read from there, and dropped from there once acknowledged."""
    path = tmp_path / "old.spool"
    chunks = blocks(2)
    with sqlite3.connect(path) as conn:
        conn.executescript("""
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE ops (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, body BLOB,
                points INTEGER NOT NULL DEFAULT 0, group_key TEXT, sent INTEGER NOT NULL DEFAULT 0,
                created REAL NOT NULL);
            INSERT INTO meta VALUES ('run_id', 'old'), ('exp_id', 'e1');
        """)
        conn.executemany(
            "INSERT INTO ops (kind, body, points, created) VALUES ('columns', ?, ?, 0)",
            [(chunk.decode(), count) for chunk, count in chunks],
        )  # TEXT, as they were written
    spool = Spool(path)
    ledger = Ledger()
    transport = ledger.transport()
    try:
        assert deliver(spool, transport, max_points=1000) == 200
    finally:
        transport.close()
    assert ledger.requests == [("old-1", b'{"batch_id":"old-1","columns":[%s,%s]}' % (chunks[0][0], chunks[1][0]))]
    assert on_disk(path) == {1: (1, "old-1", None), 2: (1, "old-1", None)}
