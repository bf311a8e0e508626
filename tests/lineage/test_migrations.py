"""The schema comes from Alembic alone, and Alembic's head matches the tables of ``lineage.models``."""

from __future__ import annotations

from datetime import UTC

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from lineage import migrate
from lineage.db import make_engine
from lineage.models import metadata
from lineage.store.search import include_object


def test_the_models_tables_and_migration_head_agree(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "include_object": include_object})
        diff = compare_metadata(context, metadata)
    assert diff == []


def test_database_is_at_the_head_revision(engine) -> None:  # type: ignore[no-untyped-def]
    assert migrate.current_revision(engine) == migrate.head_revision()


def test_upgrade_on_an_up_to_date_database_changes_nothing(engine) -> None:  # type: ignore[no-untyped-def]
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()


def test_processes_opening_a_fresh_database_at_once_all_upgrade_it(fresh_db_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # `lineage watch` and `lineage serve` started together on a new ./lineage.db, or two
    # servers on a new PostgreSQL database; the processes start upgrading at the same
    # instant (before the fix, most SQLite runs had one fail with "database is locked" and
    # every PostgreSQL run one with UniqueViolation on alembic_version). The instant is a
    # barrier, not a clock: each process says it is ready (imports done, engine made) and
    # waits for the others, however slow the machine is; each then waits for the lock as
    # long as an upgrade needs.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    db, gate, processes = fresh_db_url, tmp_path / "gate", 3
    gate.mkdir()
    code = (
        "import os, sys, time; from lineage import migrate; from lineage.db import make_engine; "
        f"engine = make_engine({str(db)!r}); gate = {str(gate)!r}; "
        "open(os.path.join(gate, str(os.getpid())), 'w').close(); deadline = time.monotonic() + 300; "
        f"[time.sleep(0.005) for _ in iter(lambda: len(os.listdir(gate)) < {processes} "
        "and time.monotonic() < deadline, False)]; migrate.upgrade(engine)"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=root, stderr=subprocess.PIPE) for _ in range(processes)]
    errors = [proc.communicate(timeout=600)[1].decode()[-500:] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * processes, errors
    assert len(list(gate.iterdir())) == processes
    engine = make_engine(str(db))
    assert migrate.current_revision(engine) == migrate.head_revision()
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").all() == [(migrate.head_revision(),)]
    engine.dispose()


def test_an_sqlite_upgrade_waits_for_a_lock_held_longer_than_a_write_would(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Another process holds the write lock past SQLITE_BUSY_TIMEOUT_MS (scaled down here):
    the upgrade waits for it instead of failing "database is locked"."""
    import sqlite3
    import threading

    from lineage import db as db_module

    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("BEGIN IMMEDIATE")
    upgraded = threading.Event()
    failures: list[BaseException] = []
    original = db_module.SQLITE_BUSY_TIMEOUT_MS
    db_module.SQLITE_BUSY_TIMEOUT_MS = 50  # a write would give up after 50 ms
    try:
        engine = make_engine(str(path))

        def run() -> None:
            try:
                migrate.upgrade(engine)
                upgraded.set()
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                failures.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        worker.join(timeout=1.0)  # twenty write timeouts pass with the lock held
        assert failures == [] and not upgraded.is_set()
        holder.execute("COMMIT")
        worker.join(timeout=300)
        assert failures == [] and upgraded.is_set()
    finally:
        db_module.SQLITE_BUSY_TIMEOUT_MS = original
        holder.close()
    assert migrate.current_revision(make_engine(str(path))) == migrate.head_revision()


def _revision(name: str):  # type: ignore[no-untyped-def]
    import importlib.util

    path = migrate.migrations_dir() / "versions" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_frozen_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_revisions_import_nothing_from_lineage() -> None:
    """An old revision must not change when today's code changes: the revisions carry
    their own DDL and tokenizer instead of importing them."""
    import ast

    for path in sorted((migrate.migrations_dir() / "versions").glob("[0-9]*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        assert not [name for name in imported if name == "lineage" or name.startswith("lineage.")], path.name


def test_the_frozen_tokenizer_of_revision_0003_agrees_with_todays() -> None:
    """0003 backfilled ``trials.search_text`` with its own copy of the tokenizer; rows it
    wrote and rows the store writes today are searched alike only while the two agree.
    If this fails, today's tokenizer changed: decide how old rows are re-tokenized (a new
    revision), and leave 0003's copy as it is."""
    from lineage import similar
    from lineage.store.search import vocabulary

    frozen = _revision("0003_trial_search")
    samples = [
        ("", ""),
        ("Normalize rewards per turn-group (α=0.3, lr 3e-4)", "<b>Crashed</b> at step 1200; OOM"),
        ("Ünïcödé ﬁligree Straße ＦＵＬＬ width", "日本語のテキスト and émigré naïve café"),
        ("x" * 80 + " under_score CamelCase 12345", "tabs\tand\nnewlines  <tag attr='1'>kept</tag>"),
    ]
    for hypothesis, notes in samples:
        assert frozen.tokens(hypothesis) == similar.tokens(hypothesis)
        assert frozen.search_text(hypothesis, notes) == similar.search_text(hypothesis, notes)
    texts = [similar.search_text(h, n) for h, n in samples]
    assert frozen.vocabulary(texts) == vocabulary(texts)


def _insert_old_trial(engine, slug: str, exp_id: str, extra: dict) -> None:  # type: ignore[no-untyped-def]
    """A trial row as an older schema holds it (today's store writes columns it lacks)."""
    import json
    from datetime import datetime

    from sqlalchemy import text

    with engine.begin() as conn:
        project_id = conn.execute(text("SELECT id FROM projects WHERE slug = :s"), {"s": slug}).scalar_one()
        now = datetime.now(UTC)
        extra_mark = "CAST(:extra AS jsonb)" if engine.dialect.name == "postgresql" else ":extra"
        conn.execute(
            text(
                "INSERT INTO trials (project_id, seq, exp_id, timestamp, specialist, parent_exp, baseline_exp, domain, "
                "hypothesis, expected_delta, status, core_metric, job_name, snapshot_path, notes, extra, created_at, "
                f"updated_at) VALUES (:p, 0, :e, '', '', '', '', '', '', '', 'keep', 1.0, '', '', '', {extra_mark}, :now, :now)"
            ),
            {"p": project_id, "e": exp_id, "extra": json.dumps(extra), "now": now},
        )
        conn.execute(text("UPDATE projects SET next_seq = 1, next_exp_number = 1 WHERE id = :p"), {"p": project_id})


def _old_trial(engine, exp_id: str, extra: str, hypothesis: str = "") -> None:  # type: ignore[no-untyped-def]
    """A trial as the code of an older schema stored it (plain SQL: today's store writes
    columns that schema lacks), in project ``p``."""
    from sqlalchemy import text

    texts = ", ".join(["''"] * 9)
    with engine.begin() as conn:
        project = conn.execute(text("SELECT id, next_seq FROM projects WHERE slug = 'p'")).one()
        conn.execute(
            text(
                "INSERT INTO trials (project_id, seq, exp_id, status, core_metric, extra, created_at, updated_at, "
                "hypothesis, timestamp, specialist, parent_exp, baseline_exp, domain, expected_delta, job_name, "
                f"snapshot_path, notes, search_text) VALUES (:p, :seq, :e, 'keep', 1.0, :x, CURRENT_TIMESTAMP, "
                f"CURRENT_TIMESTAMP, :h, {texts}, :h)"
            ),
            {"p": project[0], "seq": project[1], "e": exp_id, "x": extra, "h": hypothesis},
        )
        conn.execute(
            text("UPDATE projects SET next_seq = next_seq + 1, next_exp_number = next_exp_number + 1 WHERE id = :p"),
            {"p": project[0]},
        )


def test_revision_0006_keeps_the_extra_of_stored_trials(fresh_db_url: str) -> None:
    """trials.extra becomes JSON text on PostgreSQL (jsonb changed numbers and key order);
    rows stored before keep their values."""
    from lineage.service import Ledger

    engine = make_engine(fresh_db_url)
    migrate.upgrade(engine, "0005")
    ledger = Ledger(engine)
    ledger.projects.create_project("p")
    _insert_old_trial(engine, "p", "000", {"b": [1, 2.5, "x"], "a": {"c": None, "d": True}})
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()
    assert ledger.trials.trial("p", "000").extra == {"b": [1, 2.5, "x"], "a": {"c": None, "d": True}}
    ledger.recording.record_trial(
        "p", {"exp_id": "001", "status": "keep", "core_metric": 1.0, "extra": {"z": 1e23, "y": -0.0}}
    )
    assert repr(ledger.trials.trial("p", "001").extra) == "{'z': 1e+23, 'y': -0.0}"
    engine.dispose()


@pytest.mark.parametrize("had_token", [True, False])
def test_revision_0007_closes_anonymous_writes_of_a_ledger_that_had_a_token(fresh_db_url: str, had_token: bool) -> None:
    from sqlalchemy import text

    from lineage.service import Ledger

    engine = make_engine(fresh_db_url)
    migrate.upgrade(engine, "0006")
    if had_token:  # a token revoked before the upgrade: the ledger was open again until now
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO api_tokens (name, role, token_hash, created_at, revoked_at) "
                    "VALUES ('old', 'admin', 'h', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                )
            )
    migrate.upgrade(engine)
    state = Ledger(engine).tokens.access_state()
    assert state.anonymous_writes.value == ("closed" if had_token else "until-first-token")
    assert state.anonymous_writes_open is (not had_token)
    engine.dispose()


def test_revision_0009_fills_the_concepts_and_sketches_of_stored_trials(fresh_db_url: str) -> None:
    """Trials stored before 0009 get their concepts and sketch on upgrade, so a new trial's
    similar_prior finds them through the sketch, also beyond the newest trials."""
    from sqlalchemy import text

    from lineage.service import Ledger
    from lineage.similar import PRIOR_RECENT

    engine = make_engine(fresh_db_url)
    migrate.upgrade(engine, "0008")
    ledger = Ledger(engine)
    ledger.projects.create_project("p")
    _old_trial(engine, "000", "{}", hypothesis="turn-group normalization with alpha 0.3 on deep turns")
    for i in range(1, PRIOR_RECENT + 5):
        _old_trial(engine, f"{i:03d}", "{}", hypothesis=f"unrelated idea number {i} about tokenizer {i}")
    migrate.upgrade(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM trials WHERE search_concepts IS NULL")).scalar() == 0
        assert conn.execute(text("SELECT count(DISTINCT seq) FROM trial_sketch")).scalar() == PRIOR_RECENT + 5
    result = ledger.recording.record_trial(
        "p", {"status": "discard", "hypothesis": "alpha 0.3 turn group norm on deep turns"}, similar_prior=True
    )
    assert [s.exp_id for s in result.similar_prior] == ["000"]
    engine.dispose()


def test_revision_0011_makes_planned_trials_running_with_their_last_write_as_heartbeat(fresh_db_url: str) -> None:
    """A trainer's plan was stored as harness_abort with extra.state running: after the
    upgrade it is running, its heartbeat the time of its last write and its owner the run
    id, so the lapse sweep ends a stale one with a note. Other aborts stay as they were."""
    import json

    from sqlalchemy import text

    from lineage.domain import FailureLabel
    from lineage.service import Ledger

    engine = make_engine(fresh_db_url)
    migrate.upgrade(engine, "0010")
    ledger = Ledger(engine)
    ledger.projects.create_project("p")
    rows = {
        "000": ("keep", {"state": "running"}),  # only a harness_abort was a plan
        "001": ("harness_abort", {"run_id": "run-7", "state": "running", "lr": 0.1}),
        "002": ("harness_abort", {"state": "finished"}),
        "003": ("harness_abort", {}),
        "004": ("harness_abort", {"run_id": 7, "state": "running"}),
    }
    with engine.begin() as conn:
        project_id = conn.execute(text("SELECT id FROM projects WHERE slug = 'p'")).scalar_one()
        for seq, (exp_id, (status, extra)) in enumerate(rows.items()):
            conn.execute(
                text(
                    "INSERT INTO trials (project_id, seq, exp_id, timestamp, specialist, parent_exp, baseline_exp, "
                    "domain, hypothesis, expected_delta, status, job_name, snapshot_path, notes, extra, created_at, "
                    "updated_at) VALUES (:p, :seq, :e, '', '', '', '', '', '', '', :s, '', '', '', :x, "
                    "'2026-11-01 10:00:00', '2026-11-02 11:30:00')"
                ),
                {"p": project_id, "seq": seq, "e": exp_id, "s": status, "x": json.dumps(extra)},
            )
        conn.execute(text("UPDATE projects SET next_seq = 5, next_exp_number = 5 WHERE id = :p"), {"p": project_id})
    migrate.upgrade(engine)
    assert [ledger.trials.trial("p", exp_id).status for exp_id in rows] == [
        FailureLabel.KEEP,
        FailureLabel.RUNNING,
        FailureLabel.HARNESS_ABORT,
        FailureLabel.HARNESS_ABORT,
        FailureLabel.RUNNING,
    ]
    with engine.connect() as conn:
        leases = conn.execute(text("SELECT exp_id, owner, heartbeat_at, updated_at FROM trials ORDER BY seq")).all()
    assert [(exp_id, owner) for exp_id, owner, _, _ in leases] == [
        ("000", ""),
        ("001", "run-7"),
        ("002", ""),
        ("003", ""),
        ("004", ""),
    ]
    beats = {exp_id: (beat, updated) for exp_id, _, beat, updated in leases}
    assert beats["001"][0] is not None and beats["001"][0] == beats["001"][1]
    assert beats["002"][0] is None
    assert ledger.trials.trial("p", "001").extra == {"run_id": "run-7", "state": "running", "lr": 0.1}
    engine.dispose()
