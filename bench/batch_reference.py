"""The limit batched ingest is measured against (``bench/batch_headroom.py``, issue 36).

A minimal FastAPI app that does what ``POST .../trials:batch`` must at least do: parse
and validate the batch's trial-like items with one pydantic model, and insert them as
rows into SQLite (WAL, ``synchronous=NORMAL``, as the ledger opens it) in one
transaction per batch, answering each row's id. No ids allocated from a counter, no
parents, no search index, no idempotency: the floor of the HTTP and SQLite work.

Run: ``python -m uvicorn bench.batch_reference:app`` with ``BATCH_REFERENCE_DB`` set.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field

DB = os.environ.get("BATCH_REFERENCE_DB", "reference.db")
SCHEMA = """
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY,
    exp_id TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    core_metric REAL,
    hypothesis TEXT NOT NULL,
    specialist TEXT NOT NULL,
    extra TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
)
"""


class Item(BaseModel):
    status: str = Field(min_length=1, max_length=64)
    core_metric: float | None = Field(None, allow_inf_nan=False)
    hypothesis: str = Field("", max_length=10_000)
    specialist: str = Field("", max_length=200)
    extra: dict[str, Any] = Field(default_factory=dict)


class Batch(BaseModel):
    trials: list[Item] = Field(min_length=1, max_length=1_000)


app = FastAPI()
_lock = threading.Lock()
_conn = sqlite3.connect(DB, check_same_thread=False, isolation_level=None)
_conn.execute("PRAGMA journal_mode=WAL")
_conn.execute("PRAGMA synchronous=NORMAL")
_conn.execute(SCHEMA)
_next = [_conn.execute("SELECT coalesce(max(id), 0) FROM trials").fetchone()[0] + 1]


@app.post("/batch", status_code=201)
def record(batch: Batch) -> dict[str, Any]:
    with _lock:
        first = _next[0]
        rows = [
            (first + i, f"exp_{first + i}", t.status, t.core_metric, t.hypothesis, t.specialist, json.dumps(t.extra))
            for i, t in enumerate(batch.trials)
        ]
        _conn.execute("BEGIN IMMEDIATE")
        try:
            _conn.executemany(
                "INSERT INTO trials (id, exp_id, status, core_metric, hypothesis, specialist, extra) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            _conn.execute("COMMIT")
        except BaseException:
            _conn.execute("ROLLBACK")
            raise
        _next[0] = first + len(rows)
    return {"created": len(rows), "results": [{"exp_id": row[1]} for row in rows]}
