"""The ``lineage`` command line on real databases: import/export, prompt, errors, serve."""

from __future__ import annotations

import io
import os
import random
import subprocess
import time
from pathlib import Path

import click
import httpx
import pytest
from click.testing import CliRunner

from api.cli import cli
from lineage.formats.fieldkit import write_trials
from lineage.service import Ledger
from tests.api.conftest import LINEAGE, free_port
from tests.sweeps import random_sweep, seed_demo_trials, to_fieldkit_trial


def run(db: str, *args: str, ok: bool = True):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output + result.stderr
    return result


def fieldkit_tsv(tmp_path: Path, n: int = 40, seed: int = 3, lower: bool = True) -> Path:
    """A results.tsv written by fieldkit itself."""
    from fieldkit.lineage import LineageStore

    trials = random_sweep(random.Random(seed), n, lower_is_better=lower)
    trials = [t.with_changes(delta_vs_best=None if t.delta_vs_best == 0 else t.delta_vs_best) for t in trials]
    store = LineageStore(tmp_path / "fk", lower_is_better=lower)
    for trial in trials:
        store.append(to_fieldkit_trial(trial))
    return store.results_path


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    for name, command in group.commands.items():
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from all_commands(command, (*prefix, name))


@pytest.mark.parametrize("command", [" ".join(c) for c in all_commands(cli)])
def test_every_command_has_help(command: str) -> None:
    result = CliRunner().invoke(cli, [*command.split(), "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_fieldkit_file_round_trips_byte_for_byte(db_url: str, tmp_path: Path) -> None:
    source = fieldkit_tsv(tmp_path)
    run(db_url, "import", str(source), "--project", "rt")
    out = tmp_path / "out.tsv"
    run(db_url, "export", "--project", "rt", "-o", str(out))
    assert out.read_bytes() == source.read_bytes()

    from fieldkit.lineage import LineageStore

    original = LineageStore(source.parent).all_trials()
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "results.tsv").write_bytes(out.read_bytes())
    assert LineageStore(tmp_path / "again").all_trials() == original


def test_prompt_of_an_imported_file_equals_fieldkits(db_url: str, tmp_path: Path) -> None:
    from fieldkit.lineage import LineageStore

    source = fieldkit_tsv(tmp_path, lower=False)
    run(db_url, "import", str(source), "--project", "fk", "--higher-is-better", "--best-policy", "fieldkit")
    got = run(
        db_url,
        "prompt",
        "--project",
        "fk",
        "--specialist",
        "next",
        "--top-k",
        "5",
        "--recent-n",
        "7",
        "--last-m",
        "3",
        "--timestamp",
        "T",
    ).output
    want = (
        LineageStore(source.parent, lower_is_better=False)
        .render_prompt("next", top_k=5, recent_n=7, last_m_full=3, session_timestamp="T")
        .rendered_prompt
    )
    assert got == want


def test_bad_row_imports_nothing_and_names_line_and_column(db_url: str, tmp_path: Path) -> None:
    source = fieldkit_tsv(tmp_path, n=10)
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    cells = lines[5].split("\t")
    cells[8] = "exploded"  # the status column
    lines[5] = "\t".join(cells)
    bad = tmp_path / "bad.tsv"
    bad.write_text("".join(lines), encoding="utf-8")
    result = run(db_url, "import", str(bad), "--project", "bad", ok=False)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "line 6" in result.stderr and "column 9" in result.stderr and "status" in result.stderr
    missing = run(db_url, "trials", "--project", "bad", ok=False)
    assert missing.exit_code == 2 and "not found" in missing.stderr


def test_importing_an_exp_id_already_stored_names_its_line_and_keeps_the_stored_rows(
    db_url: str, tmp_path: Path
) -> None:
    source = fieldkit_tsv(tmp_path, n=10)
    run(db_url, "import", str(source), "--project", "dup")
    before = run(db_url, "export", "--project", "dup").output
    result = run(db_url, "import", str(source), "--project", "dup", ok=False)
    assert result.exit_code == 2
    assert "line 2" in result.stderr and "column 1" in result.stderr and "already" in result.stderr
    assert run(db_url, "export", "--project", "dup").output == before


def test_a_cycle_of_parents_in_a_file_is_refused_with_its_line(db_url: str, tmp_path: Path) -> None:
    trials = [t.with_changes(parent_exp=p) for t, p in zip(seed_demo_trials()[:3], ["002", "000", "001"])]
    buffer = io.StringIO()
    write_trials(trials, buffer)
    path = tmp_path / "cycle.tsv"
    path.write_text(buffer.getvalue(), encoding="utf-8")
    result = run(db_url, "import", str(path), "--project", "cyc", ok=False)
    assert result.exit_code == 2 and "cycle" in result.stderr and "line 2" in result.stderr


def test_demo_knowledge_shows_the_seed_chain(db_url: str) -> None:
    run(db_url, "demo")
    text = run(db_url, "knowledge", "--project", "a2tgpo-demo").output
    assert text.startswith("## KNOWLEDGE.md\n")
    assert "exp_000 [grpo-baseline, baseline, metric=33.210000, Δ=—]" in text
    assert " └─ exp_001 [atpo-joint, keep, metric=34.020000, Δ=+0.810000]" in text
    assert "exp_004 [a2tgpo-v1d, keep, metric=34.960000, Δ=+0.450000]" in text and text.count("← BEST") == 1
    assert "exp_002 [" not in text.split("```")[1]  # the discard branch is not on the chain


def test_knowledge_is_the_tail_of_the_prompt(db_url: str) -> None:
    run(db_url, "demo")
    prompt = run(db_url, "prompt", "--project", "a2tgpo-demo", "--specialist", "x").output
    knowledge = run(db_url, "knowledge", "--project", "a2tgpo-demo").output
    assert prompt.endswith(knowledge)


def test_trials_and_best_as_json(db_url: str) -> None:
    import json

    run(db_url, "demo")
    rows = json.loads(run(db_url, "trials", "--project", "a2tgpo-demo", "--format", "json").output)
    assert [r["exp_id"] for r in rows] == ["000", "001", "002", "003", "004", "005"]
    best = json.loads(run(db_url, "best", "--project", "a2tgpo-demo", "--format", "json").output)
    assert best["exp_id"] == "004" and best["core_metric"] == 34.96
    table = run(db_url, "trials", "--project", "a2tgpo-demo", "--width", "0").output.splitlines()
    assert table[0].split()[:3] == ["exp", "status", "metric"] and len(table) == 7  # one line a trial, unwrapped


def test_export_csv_and_parquet_load_in_pandas(db_url: str, tmp_path: Path) -> None:
    import pandas as pd

    run(db_url, "demo")
    run(db_url, "export", "--project", "a2tgpo-demo", "--format", "csv", "-o", str(tmp_path / "t.csv"))
    run(db_url, "export", "--project", "a2tgpo-demo", "--format", "parquet", "-o", str(tmp_path / "t.parquet"))
    for frame in (pd.read_csv(tmp_path / "t.csv", dtype={"exp_id": str}), pd.read_parquet(tmp_path / "t.parquet")):
        assert list(frame["exp_id"]) == ["000", "001", "002", "003", "004", "005"]
        assert frame["core_metric"].iloc[4] == pytest.approx(34.96)


def test_extended_export_carries_clip_scale_statistics(db_url: str) -> None:
    run(db_url, "demo")
    text = run(db_url, "export", "--project", "a2tgpo-demo", "--format", "extended").output
    header, *rows = text.splitlines()
    assert header.split("\t")[17:] == [
        "ig_clip_scale_mean",
        "ig_clip_scale_std",
        "ig_clip_scale_min",
        "ig_clip_scale_max",
        "ig_clip_scale_frac_low",
        "ig_clip_scale_frac_high",
        "extra",
    ]
    assert rows[4].split("\t")[17:19] == ["1.014", "0.087"]


def test_unknown_project_is_one_line_on_stderr_and_exit_2(db_url: str) -> None:
    result = run(db_url, "knowledge", "--project", "nope", ok=False)
    assert result.exit_code == 2
    assert result.stderr == "error: project 'nope' not found\n"


def test_backup_is_a_working_copy_of_the_database(tmp_path: Path) -> None:
    db = str(tmp_path / "live.db")
    run(db, "demo")
    run(db, "backup", str(tmp_path / "copy.db"))
    copy = Ledger.open(str(tmp_path / "copy.db"), upgrade=False)
    assert [t.exp_id for t in copy.trials.chain("a2tgpo-demo")] == ["000", "001", "003", "004"]
    copy.close()


def test_backup_refuses_to_overwrite_a_file_without_force(tmp_path: Path) -> None:
    db = str(tmp_path / "live.db")
    run(db, "demo")
    out = tmp_path / "copy.db"
    out.write_bytes(b"precious")
    result = run(db, "backup", str(out), ok=False)
    assert result.exit_code == 2
    assert result.stderr == f"error: {out} exists; pass --force to replace it\n"
    assert out.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.db", "live.db"]  # no partial file left

    run(db, "backup", "--force", str(out))
    copy = Ledger.open(str(out), upgrade=False)
    assert [t.exp_id for t in copy.trials.chain("a2tgpo-demo")] == ["000", "001", "003", "004"]
    copy.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.db", "live.db"]


def test_backup_on_postgresql_points_to_pg_dump(ledger: Ledger, backend: str, db_url: str, tmp_path: Path) -> None:
    if backend != "postgres":
        pytest.skip("the SQLite case is test_backup_is_a_working_copy_of_the_database")
    result = run(db_url, "backup", str(tmp_path / "x"), ok=False)
    assert result.exit_code == 2 and "pg_dump" in result.stderr


def test_db_upgrade_reports_the_head(tmp_path: Path) -> None:
    from lineage import migrate

    out = run(str(tmp_path / "new.db"), "db", "upgrade").output
    assert out.strip() == f"schema at {migrate.head_revision()}"


@pytest.mark.slow
def test_serve_starts_a_real_server_with_the_demo_from_any_directory(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("LINEAGE_DATABASE_URL", None)
    proc = subprocess.Popen(
        [*LINEAGE, "serve", "--demo", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read().decode()  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "server did not answer within 30 s"
                time.sleep(0.1)
        assert response.status_code == 200 and response.json() == {"status": "ok"}
        assert (tmp_path / "lineage.db").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    ledger = Ledger.open(str(tmp_path / "lineage.db"), upgrade=False)
    assert ledger.trials.best("a2tgpo-demo").exp_id == "004"
    ledger.close()
