"""The query plan of a filtered trials-table page on SQLite and PostgreSQL: the filter
expression compiles to ONE indexed query (issue 20). Run:

    .venv/bin/python bench/filter_plan.py [--trials 100000] [--postgres URL]

It imports an autoresearch-style project (tests/web/loop_project.py's generator) into a
fresh SQLite file and a fresh PostgreSQL database, then prints the SQL, the time of one
page (with the load average: the machine is shared) and EXPLAIN of each query.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import create_engine, text  # noqa: E402

from lineage.db import make_engine  # noqa: E402
from lineage.service import Ledger  # noqa: E402
from tests.web.loop_project import results_tsv  # noqa: E402

QUERIES = (
    ("status = keep and core_metric < 0.99", "seq"),
    ("status = keep and core_metric < 0.99", "metric"),
    ("extra.memory_gb >= 47.5 and not hypothesis ~ warmup", "seq"),
    ("exp_id >= exp_5000 and exp_id < 5100", "exp_id"),
)


def explain(ledger: Ledger, expression: str, sort: str) -> None:
    store = ledger.store
    with store.read() as conn:
        project = store.projects.project(conn, "loop")
        captured: list[tuple[str, list]] = []
        original = store.core.execute

        def spy(c, sql, params=()):  # type: ignore[no-untyped-def]
            captured.append((sql, list(params)))
            return original(c, sql, params)

        store.core.execute = spy  # type: ignore[method-assign]
        started = time.perf_counter()
        rows = store.pages.page_trials(conn, project, sort=sort, limit=51, expression=expression)
        elapsed = time.perf_counter() - started
        store.core.execute = original  # type: ignore[method-assign]
        print(
            f"\n[{'sqlite' if store.sqlite else 'postgresql'}] filter={expression!r} sort={sort}: "
            f"{len(rows)} rows, {len(captured)} query, {elapsed * 1000:.1f} ms (load {os.getloadavg()[0]:.2f})"
        )
        for sql, params in captured:
            prefix = "EXPLAIN QUERY PLAN " if store.sqlite else "EXPLAIN "
            plan = original(conn, prefix + sql, params).fetchall()
            for row in plan:
                print("   ", row[-1] if store.sqlite else row[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    tsv, _ = results_tsv(args.trials)
    with tempfile.TemporaryDirectory() as tmp:
        name = f"lineage_plan_{uuid.uuid4().hex[:8]}"
        admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            for url in (str(Path(tmp) / "plan.db"), args.postgres.rsplit("/", 1)[0] + f"/{name}"):
                ledger = Ledger(make_engine(url))
                from lineage import migrate

                migrate.upgrade(ledger.engine)
                ledger.files.import_file(
                    "loop",
                    io.StringIO(tsv, newline=""),
                    fmt="autoresearch",
                    source="results.tsv",
                    create_with={"lower_is_better": True},
                )
                for expression, sort in QUERIES:
                    explain(ledger, expression, sort)
                ledger.close()
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()


if __name__ == "__main__":
    main()
