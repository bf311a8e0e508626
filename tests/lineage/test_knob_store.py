"""knob_changes is written on every write path of a trial, and filled on upgrade."""

from __future__ import annotations

import io
import json

from lineage import migrate
from lineage.db import make_engine
from lineage.service import Ledger
from lineage.service.group_commit import RecordRequest


def _patch(name: str, old: str, new: str) -> str:
    return f"diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-{name} = {old}\n+{name} = {new}\n"


def _stored(ledger: Ledger, slug: str, *knobs: str) -> list[tuple[str, str, str | None, str | None, str]]:
    project = ledger.projects.project(slug)
    with ledger.store.read() as conn:
        rows = ledger.store.knobs.history(conn, project.id, knobs)
    return [(row.exp_id, row.knob, row.old, row.new, row.source) for row in rows]


def test_a_single_record_stores_its_patch_and_hypothesis_changes(ledger: Ledger) -> None:
    ledger.projects.create_project("p", lower_is_better=True)
    ledger.recording.record_trial(
        "p",
        {
            "exp_id": "001",
            "status": "keep",
            "core_metric": 1.0,
            "hypothesis": "increase MATRIX_LR from 0.04 to 0.06 and double the batch size",
            "extra": {"_git": {"patch": _patch("MATRIX_LR", "0.04", "0.06")}},
        },
    )
    assert _stored(ledger, "p", "matrix lr", "bs") == [
        ("001", "bs", None, None, "hypothesis"),
        ("001", "matrix lr", "0.04", "0.06", "patch"),
    ]


def test_an_update_extracts_again(ledger: Ledger) -> None:
    ledger.projects.create_project("p", lower_is_better=True)
    ledger.recording.record_trial("p", {"exp_id": "001", "status": "running", "hypothesis": "lr 3e-4 -> 1e-3"})
    ledger.recording.update_trial("p", "001", {"status": "keep", "core_metric": 1.0, "hypothesis": "lr 3e-4 -> 2e-3"})
    assert _stored(ledger, "p", "lr") == [("001", "lr", "3e-4", "2e-3", "hypothesis")]


def test_a_config_is_compared_with_the_parents(ledger: Ledger) -> None:
    ledger.projects.create_project("p", lower_is_better=True)
    base = {"status": "keep", "core_metric": 1.0}
    ledger.recording.record_trial("p", {**base, "exp_id": "001", "extra": {"config": {"lr": 0.1, "seed": 1}}})
    ledger.recording.record_trial(
        "p", {**base, "exp_id": "002", "parent_exp": "001", "extra": {"config": {"lr": 0.2, "seed": 1}}}
    )
    assert _stored(ledger, "p", "lr", "seed") == [
        ("001", "lr", None, "0.1", "config"),
        ("001", "seed", None, "1", "config"),
        ("002", "lr", "0.1", "0.2", "config"),
    ]


def test_a_batch_and_a_group_store_what_single_records_store(ledger: Ledger) -> None:
    bodies = [
        {"exp_id": "001", "status": "keep", "core_metric": 1.0, "hypothesis": "depth 8 → 12"},
        {
            "exp_id": "002",
            "status": "discard",
            "core_metric": 1.1,
            "extra": {"config": {"lr": 0.2}},
            "parent_exp": "001",
        },
        {"exp_id": "003", "status": "crash", "hypothesis": "switch to 16 layers"},
    ]
    for slug in ("single", "batch", "shared", "group"):
        ledger.projects.create_project(slug, lower_is_better=True)
    for body in bodies:
        ledger.recording.record_trial("single", body)
    ledger.recording.record_trials("batch", bodies)
    ledger.recording.record_trials("shared", bodies, similar_prior=True)
    ledger.recording.record_group("group", [RecordRequest(body) for body in bodies])
    single = _stored(ledger, "single", "nlayers", "lr")
    assert single == [
        ("001", "nlayers", "8", "12", "hypothesis"),
        ("002", "lr", None, "0.2", "config"),
        ("003", "nlayers", None, "16", "hypothesis"),
    ]
    for slug in ("batch", "shared", "group"):
        assert _stored(ledger, slug, "nlayers", "lr") == single, slug


def test_an_imported_results_file_stores_its_descriptions_changes(ledger: Ledger) -> None:
    tsv = (
        "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n"
        "a1b2c3d\t0.9979\t44.0\tkeep\tbaseline\n"
        "b2c3d4e\t0.9932\t44.2\tkeep\tincrease MATRIX_LR from 0.04 to 0.06\n"
        "c3d4e5f\t1.0051\t44.1\tdiscard\tMATRIX_LR 0.06 -> 0.08\n"
        "d4e5f6a\t0.0000\t0.0\tcrash\tdouble the batch size (OOM)\n"
    )
    ledger.files.import_file("loop", io.StringIO(tsv, newline=""), create_with={"lower_is_better": True})
    assert [row[1:4] for row in _stored(ledger, "loop", "matrix lr", "bs")] == [
        ("matrix lr", "0.04", "0.06"),
        ("matrix lr", "0.06", "0.08"),
        ("bs", None, None),
    ]


def test_revision_0012_fills_the_knob_changes_of_stored_trials(fresh_db_url: str) -> None:
    """Trials stored before knob_changes get their rows on upgrade, configs compared with
    their parent's as a new record's are."""
    from sqlalchemy import text

    engine = make_engine(fresh_db_url)
    migrate.upgrade(engine, "0011")
    ledger = Ledger(engine)
    ledger.projects.create_project("p")
    with engine.begin() as conn:
        project_id = conn.execute(text("SELECT id FROM projects WHERE slug = 'p'")).scalar_one()
        rows = [
            ("000", "", "baseline", '{"config": {"lr": 0.1}}'),
            ("001", "000", "increase MATRIX_LR from 0.04 to 0.06", '{"config": {"lr": 0.3}}'),
            ("002", "001", "", json.dumps({"_git": {"patch": _patch("WD", "0.0", "0.1")}})),
        ]
        for seq, (exp_id, parent, hypothesis, extra) in enumerate(rows):
            conn.execute(
                text(
                    "INSERT INTO trials (project_id, seq, exp_id, timestamp, specialist, parent_exp, baseline_exp, "
                    "domain, hypothesis, expected_delta, status, job_name, snapshot_path, notes, extra, created_at, "
                    "updated_at) VALUES (:p, :seq, :e, '', '', :parent, '', '', :h, '', 'keep', '', '', '', :x, "
                    "'2026-11-01 10:00:00', '2026-11-02 11:30:00')"
                ),
                {"p": project_id, "seq": seq, "e": exp_id, "parent": parent, "h": hypothesis, "x": extra},
            )
        conn.execute(text("UPDATE projects SET next_seq = 3, next_exp_number = 3 WHERE id = :p"), {"p": project_id})
    migrate.upgrade(engine)
    assert _stored(ledger, "p", "lr", "matrix lr", "wd") == [
        ("000", "lr", None, "0.1", "config"),
        ("001", "lr", "0.1", "0.3", "config"),
        ("001", "matrix lr", "0.04", "0.06", "hypothesis"),
        ("002", "wd", "0.0", "0.1", "patch"),
    ]
    engine.dispose()


def test_same_knob_lists_the_newest_earlier_tries_of_each_knob_however_old(ledger: Ledger) -> None:
    from lineage.service.knobs import SAME_KNOB_LIMIT

    ledger.projects.create_project("p", lower_is_better=True)
    ledger.recording.record_trial("p", {"status": "discard", "core_metric": 1.0, "hypothesis": "set wd to 0.1"})
    for i in range(SAME_KNOB_LIMIT + 5):
        ledger.recording.record_trial(
            "p", {"status": "discard", "core_metric": 1.0, "hypothesis": f"lr 0.{i} -> 0.{i + 1}"}
        )
    wd = ledger.recording.record_trial(
        "p", {"status": "keep", "core_metric": 0.9, "hypothesis": "wd 0.1 -> 0.2"}, similar_prior=True
    )
    assert [(t.exp_id, t.knob, t.value, t.same_value) for t in wd.same_knob] == [("000", "wd", "0.1", False)]
    lr = ledger.recording.record_trial("p", {"status": "keep", "hypothesis": "lr 0.9 -> 0.8"}, similar_prior=True)
    assert [t.exp_id for t in lr.same_knob] == [f"{n:03d}" for n in range(6, SAME_KNOB_LIMIT + 6)]
    assert [t.exp_id for t in lr.same_knob if t.same_value] == ["008"]  # lr 0.7 -> 0.8 set 0.8 too
    alone = ledger.recording.record_trial("p", {"status": "keep", "hypothesis": "lr 0.3 -> 0.2"})
    assert alone.same_knob == ()  # asked with similar_prior only


def test_revision_0016_reads_every_trials_knobs_again_with_columns_and_patch_digests(fresh_db_url: str) -> None:
    """A ledger at 0012 holds knob rows of the rules then (no columns, no digests); the
    upgrade to 0016 reads every trial again: its results-file columns and its patch's digest."""
    from sqlalchemy import text

    engine = make_engine(fresh_db_url)
    migrate.upgrade(engine, "0012")
    ledger = Ledger(engine)
    ledger.projects.create_project("p")
    patch = _patch("WD", "0.0", "0.1")
    with engine.begin() as conn:
        project_id = conn.execute(text("SELECT id FROM projects WHERE slug = 'p'")).scalar_one()
        rows = [
            ("000", "", {"lr": 0.04, "memory_gb": 40.0}),
            ("001", "000", {"lr": 0.05, "memory_gb": 41.0, "_git": {"patch": patch}}),
            ("002", "000", {"lr": 0.04, "memory_gb": 42.0, "_git": {"patch": patch}}),
        ]
        for seq, (exp_id, parent, extra) in enumerate(rows):
            conn.execute(
                text(
                    "INSERT INTO trials (project_id, seq, exp_id, timestamp, specialist, parent_exp, baseline_exp, "
                    "domain, hypothesis, expected_delta, status, job_name, snapshot_path, notes, extra, created_at, "
                    "updated_at) VALUES (:p, :seq, :e, '', '', :parent, '', '', '', '', 'keep', '', '', '', :x, "
                    "'2026-11-01 10:00:00', '2026-11-02 11:30:00')"
                ),
                {"p": project_id, "seq": seq, "e": exp_id, "parent": parent, "x": json.dumps(extra)},
            )
        conn.execute(text("UPDATE projects SET next_seq = 3, next_exp_number = 3 WHERE id = :p"), {"p": project_id})
    migrate.upgrade(engine)
    assert _stored(ledger, "p", "lr", "wd", "memory gb") == [
        ("000", "lr", None, "0.04", "column"),
        ("001", "lr", "0.04", "0.05", "column"),
        ("001", "wd", "0.0", "0.1", "patch"),
        ("002", "wd", "0.0", "0.1", "patch"),
    ]
    answer = ledger.recording.record_trial(
        "p",
        {"status": "discard", "core_metric": 1.0, "parent_exp": "000", "extra": {"_git": {"patch": patch}}},
        similar_prior=True,
    )
    assert answer.tried_before[0].says == "repeat of exp_002: same patch, keep (also exp_001 keep)"
    engine.dispose()
