"""Round trips to PostgreSQL per single-trial record, counted at libpq.

    LINEAGE_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/postgres \
        .venv/bin/python bench/roundtrips.py

Runs the API in process (FastAPI's TestClient, the server's own settings) on a fresh
database, records a few trials (a warm-up), then counts the libpq calls of the next
records: one ``send_*``/``exec*`` outside pipeline mode is one round trip; in pipeline
mode a ``pipeline_sync`` or a flush request (the client then waits on results) is one,
except the flush psycopg sends right after the Sync that leaves pipeline mode.
Figures (issue 23): 17 per record before pipelining (pool pre-ping, BEGIN, access check
with BEGIN/ROLLBACK, 10 statements, COMMIT), 9 after. Prints the count per
record and the statements.
"""

from __future__ import annotations

import os
import sys
import uuid

os.environ["PSYCOPG_IMPL"] = "python"  # the pure-Python libpq wrapper, so it can be counted

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402
from psycopg.pq import pq_ctypes  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

LOG: list[str] = []
QUEUED: list[str] = []
_PIPELINE = {"on": False}
_PREPARED: dict[bytes, bytes] = {}


def _statement(name: str, args: tuple) -> bytes:  # type: ignore[type-arg]
    """What a libpq call sends, as logged: the query, or PREPARE/EXECUTE and its text."""
    query = args[0] if args else b""
    if name in ("send_prepare", "prepare"):
        _PREPARED[bytes(args[0])] = bytes(args[1])
        return b"PREPARE " + bytes(args[1])
    if name in ("send_query_prepared", "exec_prepared"):
        return b"EXECUTE " + _PREPARED.get(bytes(query), bytes(query))
    return bytes(query or b"")


def _wrap(name: str) -> None:
    original = getattr(pq_ctypes.PGconn, name)

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name in ("enter_pipeline_mode",):
            _PIPELINE["on"] = True
        elif name == "exit_pipeline_mode":
            _PIPELINE["on"] = False
        elif name not in ("pipeline_sync", "send_flush_request") and _PIPELINE["on"]:
            QUEUED.append(f"  (queued) {name}: {_statement(name, args)[:100].decode(errors='replace')}")
        else:
            query = _statement(name, args)
            if name == "send_flush_request" and not QUEUED and LOG and LOG[-1].startswith("pipeline_sync"):
                # leaving pipeline mode: a Sync then a flush, answered together (one wait)
                LOG.append("  (queued) send_flush_request (the same wait as the Sync before)")
                return original(self, *args, **kwargs)
            LOG.extend(QUEUED)
            QUEUED.clear()
            LOG.append(f"{name}: {query[:110].decode(errors='replace')}")
        return original(self, *args, **kwargs)

    setattr(pq_ctypes.PGconn, name, counted)


for _name in (
    "send_query",
    "send_query_params",
    "send_prepare",
    "send_query_prepared",
    "exec_",
    "exec_params",
    "prepare",
    "exec_prepared",
    "pipeline_sync",
    "send_flush_request",
    "enter_pipeline_mode",
    "exit_pipeline_mode",
):
    _wrap(_name)


def main() -> None:
    assert psycopg.pq.__impl__ == "python", psycopg.pq.__impl__
    base = os.environ.get("LINEAGE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    name = f"rt_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = base.rsplit("/", 1)[0] + "/" + name
    try:
        os.environ["LINEAGE_DATABASE_URL"] = url
        from fastapi.testclient import TestClient

        from api.app import create_app
        from api.settings import Settings

        with TestClient(create_app(Settings())) as client:
            assert client.post("/api/v1/projects", json={"slug": "p", "metric_name": "val_bpb"}).status_code == 201
            for i in range(5):
                client.post(
                    "/api/v1/projects/p/trials",
                    json={"hypothesis": f"warm up {i} lower lr", "core_metric": 1.0 - i / 100, "status": "keep"},
                )
            counts = []
            for i in range(3):
                LOG.clear()
                r = client.post(
                    "/api/v1/projects/p/trials",
                    json={
                        "hypothesis": f"try a cosine schedule {i} with warmup",
                        "core_metric": 0.9 - i / 100,
                        "status": "keep" if i % 2 else "discard",
                    },
                )
                assert r.status_code == 201, r.text
                counts.append(sum(not line.startswith("  (queued)") for line in LOG))
            print("\n".join(LOG))
            print(f"round trips per record (last three): {counts}")
    finally:
        admin.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
