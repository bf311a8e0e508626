"""Autoresearch-style loops in the ledger, on SQLite and PostgreSQL: import/export round
trips, "no result" never best in any face, record, watch sync semantics, git details,
plots, and the CLI around them."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from api.cli import cli
from lineage import loops
from lineage.domain import FailureLabel
from lineage.errors import InvalidInput, NotFound
from lineage.formats import autoresearch as ar
from lineage.service import Ledger
from tests.lineage.autoresearch_files import CRASH_ZERO, ORIGINAL, QUIRKS, WELL_FORMED, tsv


def run(db: str, *args: str, ok: bool = True):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output + result.stderr
    return result


def imported(ledger: Ledger, text: str, slug: str = "loop", **options) -> loops.LoopImport:  # type: ignore[no-untyped-def]
    fmt = options.pop("fmt", ar.NAME)
    policy = options.pop("best_policy", None)
    git_repo = options.pop("git_repo", None)
    return ledger.files.import_results(
        slug, text, fmt=fmt, options=ar.ImportOptions(**options), best_policy=policy, git_repo=git_repo
    )


def exported(ledger: Ledger, slug: str = "loop") -> str:
    out = io.StringIO(newline="")
    ledger.files.export_results(slug, out)
    return out.getvalue()


# -- round trips through the database ----------------------------------------------------------


@pytest.mark.parametrize("name", sorted({**WELL_FORMED, **QUIRKS}))
def test_import_then_export_is_byte_identical(ledger: Ledger, name: str) -> None:
    case = {**WELL_FORMED, **QUIRKS}[name]
    fmt = ar.GENERIC if name.startswith("csv") else ar.NAME
    done = imported(ledger, case.text, fmt=fmt)
    assert done.rows == case.rows and done.created
    assert exported(ledger) == case.text
    project = ledger.projects.project("loop")
    assert project.metric_name == case.metric and project.source_format == fmt
    if case.lower is not None:
        assert project.lower_is_better is case.lower
    if case.best is not None:
        assert ledger.trials.best("loop").exp_id == case.best  # type: ignore[union-attr]


def test_cli_import_export_round_trip_and_json_outputs(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "results.tsv"
    source.write_bytes(WELL_FORMED["crlf"].text.encode())
    result = run(db_url, "import", str(source), "--project", "ar")
    assert "imported 8 trials" in result.output and "metric 'val_bpb'" in result.output
    assert "lower is better: from the name 'val_bpb' and the kept values" in result.output
    out = tmp_path / "out.tsv"
    run(db_url, "export", "--project", "ar", "--format", "autoresearch", "-o", str(out))
    assert out.read_bytes() == source.read_bytes()
    best = json.loads(run(db_url, "best", "--project", "ar", "--format", "json").output)
    assert best["exp_id"] == "007" and best["core_metric"] == 0.9876 and best["extra"]["commit"] == "b8c9d0e"
    rows = json.loads(run(db_url, "trials", "--project", "ar", "--format", "json").output)
    assert [r["exp_id"] for r in rows] == [f"{i:03d}" for i in range(8)]
    assert rows[3]["status"] == "crash" and rows[3]["core_metric"] is None and rows[3]["extra"]["memory_gb"] == 0.0
    assert rows[5]["parent_exp"] == "004" and rows[5]["baseline_exp"] == "000"


def test_cli_import_warns_once_per_repaired_row(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "results.tsv"
    source.write_text(QUIRKS["tab_in_description"].text + "\nSummary: best 0.9876\n", encoding="utf-8")
    result = run(db_url, "import", str(source), "--project", "q")
    assert result.stderr.count("warning: line 4:") == 1
    assert "warning: line 11: import stops at text that is not a row" in result.stderr
    out = run(db_url, "export", "--project", "q", "--format", "autoresearch").output
    assert out == source.read_text(encoding="utf-8")


def test_auto_format_still_imports_fieldkit_files(db_url: str, tmp_path: Path) -> None:
    from lineage.formats.fieldkit import write_trials
    from tests.sweeps import seed_demo_trials

    buffer = io.StringIO(newline="")
    write_trials(seed_demo_trials(), buffer)
    source = tmp_path / "fk.tsv"
    source.write_text(buffer.getvalue(), encoding="utf-8")
    run(db_url, "import", str(source), "--project", "fk")
    assert run(db_url, "export", "--project", "fk").output == buffer.getvalue()
    bad = run(db_url, "import", str(source), "--project", "fk2", "--metric", "x", ok=False)
    assert bad.exit_code == 2 and "fieldkit" in bad.output


# -- "no result" is never the best ------------------------------------------------------------


@pytest.mark.parametrize("policy", ["kept", "fieldkit"])
def test_crash_zero_is_never_the_best_in_cli_prompt_and_pages(ledger: Ledger, db_url: str, policy: str) -> None:
    # lower is better, so a crash row's 0.000000 would win if it were taken as a metric
    imported(ledger, CRASH_ZERO, best_policy=policy)
    assert ledger.trials.best("loop").exp_id == "007"  # type: ignore[union-attr]
    best = json.loads(run(db_url, "best", "--project", "loop", "--format", "json").output)
    assert best["exp_id"] == "007" and best["core_metric"] == 0.9876
    prompt = run(db_url, "prompt", "--project", "loop", "--specialist", "agent").output
    assert "Current best: **exp_007** (val_bpb=0.987600, commit" in prompt
    assert "0.000000" not in prompt
    dashboard = ledger.browse.dashboard("loop")
    assert dashboard.best.exp_id == "007"  # type: ignore[union-attr]
    assert min(value for _, value in dashboard.running_best) == 0.9876
    assert ledger.browse.overview("loop").best.exp_id == "007"  # type: ignore[union-attr]
    assert [t.exp_id for t in ledger.trials.chain("loop")] == ["000", "001", "004", "007"]


def test_a_file_larger_than_one_insert_batch_keeps_order_and_the_search_index(ledger: Ledger) -> None:
    from lineage.store import BULK_BATCH

    rows = [
        f"{i:07x}\t{1 - i / 1e6:.6f}\t{'keep' if i % 7 == 0 else 'discard'}\tidea number{i} variant"
        for i in range(2 * BULK_BATCH + 17)
    ]
    text = tsv("commit\tval_bpb\tstatus\tdescription", *rows)
    assert imported(ledger, text).rows == len(rows)
    assert exported(ledger) == text
    last = f"{len(rows) - 1:05d}"
    assert [s.exp_id for s in ledger.agent.find_similar("loop", f"number{len(rows) - 1}")][:1] == [last]
    with ledger.store.read() as conn:
        ids = [row[0] for row in conn.exec_driver_sql("SELECT id FROM trials ORDER BY seq").fetchall()]
        assert ids == sorted(ids)  # trials.id grows with seq (the search index walks it)
        if ledger.store.sqlite:  # FTS5 checks its index against the trials table
            conn.exec_driver_sql("INSERT INTO trial_search(trial_search, rank) VALUES ('integrity-check', 1)")


def test_knowledge_names_the_metric_by_its_column(ledger: Ledger) -> None:
    imported(ledger, ORIGINAL)
    text = ledger.agent.render_knowledge("loop")
    assert "| exp | specialist | status | val_bpb | hypothesis |" in text


# -- import rules against the database -----------------------------------------------------------


def test_a_bad_file_writes_nothing(ledger: Ledger) -> None:
    bad = WELL_FORMED["extra_columns"].text.replace("r2\t", "r1\t")
    with pytest.raises(InvalidInput) as info:
        imported(ledger, bad, id_column="run")
    assert info.value.line == 4
    with pytest.raises(NotFound):
        ledger.projects.project("loop")
    with pytest.raises(InvalidInput, match="NUL"):
        imported(ledger, ORIGINAL + "x\x00y\n")
    with pytest.raises(NotFound):
        ledger.projects.project("loop")


def test_direction_errors_name_the_flag(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "r.tsv"
    source.write_text(
        tsv(
            "commit\tscore\tstatus\tdescription",
            "a1b2c3d\t0.9\tkeep\tx",
            "b2c3d4e\t0.8\tkeep\ty",
            "c3d4e5f\t0.7\tkeep\tz",
        ),
        encoding="utf-8",
    )
    result = run(db_url, "import", str(source), "--project", "d", ok=False)
    assert result.exit_code == 2 and "--lower-is-better or --higher-is-better" in result.stderr
    assert "says higher is better but its kept values say lower is better" in result.stderr
    run(db_url, "import", str(source), "--project", "d", "--lower-is-better")
    assert json.loads(run(db_url, "best", "--project", "d", "--format", "json").output)["exp_id"] == "002"


def test_import_into_a_project_with_trials_numbers_on(ledger: Ledger) -> None:
    ledger.projects.create_project("loop", metric_name="val_bpb")
    for value in (1.1, 0.9):
        ledger.recording.record_trial("loop", {"status": "keep", "core_metric": value, "hypothesis": "by hand"})
    done = imported(ledger, ORIGINAL)
    assert done.rows == 8 and not done.created
    trials = ledger.trials.list_trials("loop")
    assert [t.exp_id for t in trials[2:4]] == ["002", "003"]
    assert trials[3].parent_exp == "002" and trials[3].baseline_exp == "002"
    # deltas count the best before the file
    assert trials[2].delta_vs_best == pytest.approx(0.9979 - 0.9)
    assert exported(ledger).endswith("".join(ORIGINAL.splitlines(keepends=True)[1:]))


def test_importing_a_file_twice_says_to_watch_instead(ledger: Ledger) -> None:
    imported(ledger, ORIGINAL)
    with pytest.raises(InvalidInput, match="--once"):
        imported(ledger, ORIGINAL)
    assert ledger.projects.project("loop").trial_count == 8


def test_registry_import_file_hook_imports_autoresearch(ledger: Ledger) -> None:
    report = ledger.files.import_file(
        "up",
        io.StringIO(ORIGINAL, newline=""),
        fmt="autoresearch",
        create_with={"lower_is_better": True, "best_policy": "kept", "source_format": "x"},
    )
    assert report.rows == 8 and ledger.projects.project("up").metric_name == "val_bpb"
    assert exported(ledger, "up") == ORIGINAL


def test_cli_mapping_flags_choose_id_metric_status_description_parent_and_direction(
    db_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "fork.csv"
    source.write_text(
        "trial,after,sharpe_ratio,verdict,idea,regime\n"
        "t0,,1.10,ok,baseline,first\n"
        "t1,t0,1.30,ok,momentum filter,\n"
        "t2,t0,1.60,nope,stop loss,\n"
        "t3,t1,1.45,ok,vol targeting,\n",
        encoding="utf-8",
    )
    result = run(
        db_url,
        "import",
        str(source),
        "--project",
        "fork",
        "--format",
        "generic",
        "--id",
        "trial",
        "--parent",
        "after",
        "--metric",
        "sharpe_ratio",
        "--status",
        "verdict",
        "--description",
        "idea",
        "--higher-is-better",
        "--status-map",
        "ok=keep,nope=discard",
    )
    assert "imported 4 trials" in result.output and "metric 'sharpe_ratio'" in result.output
    rows = json.loads(run(db_url, "trials", "--project", "fork", "--format", "json").output)
    assert [(r["exp_id"], r["parent_exp"], r["status"], r["hypothesis"]) for r in rows] == [
        ("t0", "", "keep", "baseline"),
        ("t1", "t0", "keep", "momentum filter"),
        ("t2", "t0", "discard", "stop loss"),
        ("t3", "t1", "keep", "vol targeting"),
    ]
    assert rows[0]["extra"]["regime"] == "first"  # a column without a trial field is kept
    best = json.loads(run(db_url, "best", "--project", "fork", "--format", "json").output)
    assert best["exp_id"] == "t3"  # 1.60 is higher but was discarded
    assert run(db_url, "export", "--project", "fork", "--format", "generic").output == source.read_text()


def test_status_map_and_unknown_words_from_the_cli(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "r.tsv"
    source.write_text(
        tsv(
            "commit\tval_bpb\tstatus\tdescription",
            "a1b2c3d\t1.0\tkeep\tbase",
            "b2c3d4e\t0.9\tshipped\tx",
            "c3d4e5f\t0.0\tcuda-boom\ty",
        ),
        encoding="utf-8",
    )
    result = run(db_url, "import", str(source), "--project", "m", "--status-map", "shipped=keep,cuda-boom=crash")
    assert "not in the table" not in result.stderr
    rows = json.loads(run(db_url, "trials", "--project", "m", "--format", "json").output)
    assert [r["status"] for r in rows] == ["keep", "keep", "crash"] and rows[2]["core_metric"] is None
    assert rows[1]["extra"]["status"] == "shipped"


# -- record ---------------------------------------------------------------------------------------


def test_record_prints_delta_and_new_best_and_appends_in_the_files_format(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "results.tsv"
    source.write_text(WELL_FORMED["score_upper"].text, encoding="utf-8")
    run(db_url, "import", str(source), "--project", "s")
    out = run(
        db_url,
        "record",
        "--project",
        "s",
        "--metric",
        "0.5",
        "--status",
        "keep",
        "-d",
        "bigger lr",
        "--commit",
        "7a8b9c0",
        "--append-tsv",
        str(source),
    ).output
    verdict, noise = out.strip().splitlines()
    assert verdict == "exp_006  keep  score=0.500000  Δ=+0.022000  vs best exp_004 (0.478000)  NEW BEST"
    assert noise.strip() == "no noise floor: no reruns yet to tell this delta from noise"
    assert source.read_text(encoding="utf-8").endswith("7a8b9c0\t0.500\tKEEP\tbigger lr\n")
    data = json.loads(
        run(
            db_url,
            "record",
            "--project",
            "s",
            "--metric",
            "0",
            "--status",
            "crash",
            "-d",
            "oom",
            "--commit",
            "8b9c0d1",
            "--append-tsv",
            str(source),
            "--format",
            "json",
        ).output
    )
    assert data["exp_id"] == "007" and data["metric"] is None and not data["is_new_best"]
    assert data["parent_exp"] == "006" and data["status_word"] == "CRASH" and data["best_before"] == "006"
    data = json.loads(
        run(
            db_url, "record", "--project", "s", "--metric", "0.49", "--status", "REVERT", "-d", "x", "--format", "json"
        ).output
    )
    assert data["exp_id"] == "008" and data["delta_vs_best"] == pytest.approx(-0.01) and not data["is_new_best"]
    # the file was appended in its own format, so it re-imports to the same trials
    assert run(db_url, "export", "--project", "s", "--format", "autoresearch").output.startswith(
        source.read_text(encoding="utf-8")
    )
    run(db_url, "import", str(source), "--project", "again")
    assert [r["status"] for r in json.loads(run(db_url, "trials", "--project", "again", "--format", "json").output)][
        -2:
    ] == ["keep", "crash"]


def test_record_into_a_new_project_creates_it_and_the_file(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    first = loops.record_result(
        ledger,
        "fresh",
        metric="1.01",
        status="keep",
        description="baseline",
        commit="a1b2c3d",
        memory_gb="44.0",
        append_to=path,
    )
    assert first.trial.exp_id == "000" and first.is_new_best and first.trial.parent_exp == ""
    second = loops.record_result(
        ledger, "fresh", metric=1.0, status="discard", description="x", commit="b2c3d4e", memory_gb=44.5, append_to=path
    )
    assert second.trial.parent_exp == "000" and second.trial.delta_vs_best == pytest.approx(-0.01)
    assert path.read_text(encoding="utf-8") == tsv(
        "commit\tval_bpb\tmemory_gb\tstatus\tdescription",
        "a1b2c3d\t1.010000\t44.0\tkeep\tbaseline",
        "b2c3d4e\t1.000000\t44.5\tdiscard\tx",
    )
    assert exported(ledger, "fresh") == path.read_text(encoding="utf-8")
    with pytest.raises(InvalidInput, match="not a number"):
        loops.record_result(ledger, "fresh", metric="fast", status="keep")
    with pytest.raises(InvalidInput, match="cannot tell"):
        loops.record_result(ledger, "other", metric="1", status="keep", metric_name="widgets")


def test_record_then_sync_adds_nothing_twice(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    path.write_text(ORIGINAL + "\nSummary: so far so good\n", encoding="utf-8")
    sync = loops.ResultsSync(ledger, "loop", path)
    assert len(sync.sync().inserted) == 8
    loops.record_result(
        ledger,
        "loop",
        metric="0.98",
        status="keep",
        description="new",
        commit="c0c0c0c",
        memory_gb="45.0",
        append_to=path,
    )
    report = loops.ResultsSync(ledger, "loop", path).sync()
    assert not report.changed
    assert exported(ledger) == path.read_text(encoding="utf-8")


# -- watch: sync semantics -------------------------------------------------------------------------


def lines_of(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def test_sync_appends_restarts_and_replays_add_nothing_twice(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    rows = lines_of(ORIGINAL)
    path.write_text("".join(rows[:4]), encoding="utf-8")
    sync = loops.ResultsSync(ledger, "w", path)
    assert sync.sync().inserted == ["000", "001", "002"]
    with path.open("a", encoding="utf-8", newline="") as fh:
        fh.write("".join(rows[4:6]))
    assert sync.sync().inserted == ["003", "004"]
    assert not sync.sync().changed  # nothing new
    assert not loops.ResultsSync(ledger, "w", path).sync().changed  # a restarted watcher
    path.write_text("".join(rows[:6]), encoding="utf-8")  # the same text written again
    assert not sync.sync().changed
    with path.open("a", encoding="utf-8", newline="") as fh:
        fh.write("".join(rows[6:]))
    assert sync.sync().inserted == ["005", "006", "007"]
    assert exported(ledger, "w") == ORIGINAL
    assert ledger.projects.project("w").trial_count == 8


def test_a_row_rewritten_in_place_updates_its_trial_and_what_depends_on_it(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    running = ORIGINAL.replace("e5f6a7b\t0.990100\t44.1\tkeep", "e5f6a7b\t\t\trunning")
    path.write_text(running, encoding="utf-8")
    sync = loops.ResultsSync(ledger, "w", path)
    sync.sync()
    assert ledger.trials.trial("w", "004").status is FailureLabel.HARNESS_ABORT
    assert ledger.trials.trial("w", "005").parent_exp == "001"
    path.write_text(ORIGINAL, encoding="utf-8")
    report = sync.sync()
    assert "004" in report.updated and not report.inserted
    trial = ledger.trials.trial("w", "004")
    assert (trial.status, trial.core_metric) == (FailureLabel.KEEP, 0.9901)
    assert trial.delta_vs_best == pytest.approx(0.9901 - 0.9932)
    assert [ledger.trials.trial("w", i).parent_exp for i in ("005", "006", "007")] == ["004", "004", "004"]
    assert ledger.trials.trial("w", "007").delta_vs_best == pytest.approx(0.9876 - 0.9901)
    assert exported(ledger, "w") == ORIGINAL
    fresh = Ledger(ledger.engine)
    imported(fresh, ORIGINAL, slug="fresh")
    for a, b in zip(ledger.trials.list_trials("w"), fresh.trials.list_trials("fresh")):
        assert (a.exp_id, a.parent_exp, a.status, a.core_metric) == (b.exp_id, b.parent_exp, b.status, b.core_metric)
        assert (
            a.delta_vs_best == pytest.approx(b.delta_vs_best)
            if b.delta_vs_best is not None
            else a.delta_vs_best is None
        )


def test_a_truncated_file_warns_and_deletes_nothing(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    path.write_text(ORIGINAL, encoding="utf-8")
    sync = loops.ResultsSync(ledger, "w", path)
    sync.sync()
    rows = lines_of(ORIGINAL)
    path.write_text("".join(rows[:3]), encoding="utf-8")  # the loop restarted its file
    report = sync.sync()
    assert any("truncated" in w and "nothing is deleted" in w for w in report.warnings)
    assert not report.changed and ledger.projects.project("w").trial_count == 8
    with path.open("a", encoding="utf-8", newline="") as fh:
        fh.write("c0ffee0\t0.980000\t44.0\tkeep\tafter the restart\n")
    report = sync.sync()
    assert report.inserted == ["008"]  # a fresh exp_id: trial 002 is not overwritten
    assert ledger.trials.trial("w", "002").hypothesis == "switch to GeLU activation"
    assert ledger.trials.trial("w", "008").parent_exp == "001"
    assert not loops.ResultsSync(ledger, "w", path).sync().changed  # and a restart agrees


def test_a_row_whose_id_was_recorded_without_the_file_gets_a_fresh_id(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    rows = lines_of(ORIGINAL)
    path.write_text("".join(rows[:3]), encoding="utf-8")
    sync = loops.ResultsSync(ledger, "w", path)
    sync.sync()
    loops.record_result(ledger, "w", metric="0.5", status="discard", description="from elsewhere")  # takes 002
    with path.open("a", encoding="utf-8", newline="") as fh:
        fh.write(rows[3])
    report = sync.sync()
    assert report.inserted == ["003"] and any("recorded without this file" in w for w in report.warnings)
    assert ledger.trials.trial("w", "002").hypothesis == "from elsewhere"
    assert ledger.trials.trial("w", "003").hypothesis == "switch to GeLU activation"


def test_watch_creates_the_project_from_the_first_sync_and_waits_for_a_missing_file(
    ledger: Ledger, tmp_path: Path
) -> None:
    path = tmp_path / "later.tsv"
    sync = loops.ResultsSync(ledger, "w", path, options=ar.ImportOptions(status_map={"meh": "keep"}))
    assert not sync.sync().changed
    path.write_text(tsv("commit\tscore\tverdict\tdescription"), encoding="utf-8")  # header only
    assert not sync.sync().changed and ledger.projects.project("w").metric_name == "score"
    with path.open("a", encoding="utf-8", newline="") as fh:
        fh.write("a1b2c3d\t0.4\tmeh\tbase\n")
    assert sync.sync().inserted == ["000"]
    assert ledger.trials.trial("w", "000").status is FailureLabel.KEEP


def test_cli_watch_once(db_url: str, tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    path.write_text(ORIGINAL, encoding="utf-8")
    out = run(db_url, "watch", str(path), "--project", "w", "--once").output
    assert "added 8" in out
    assert "added" not in run(db_url, "watch", str(path), "--project", "w", "--once").output


# -- git ---------------------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@x",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@x",
        "GIT_AUTHOR_DATE": "2026-01-02T03:04:05+00:00",
        "GIT_COMMITTER_DATE": "2026-01-02T03:04:05+00:00",
        "PATH": "/usr/bin:/bin",
        "HOME": str(repo),
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    shas = []
    for i, body in enumerate(["lr = 0.01\n", "lr = 0.04\n", "lr = 0.04\nwarmup = 200\n" + "x" * 70_000 + "\n"]):
        (path / "train.py").write_text(body, encoding="utf-8")
        git(path, "add", "train.py")
        git(path, "commit", "-q", "-m", f"experiment {i}")
        shas.append(git(path, "rev-parse", "--short=7", "HEAD"))
    return path, shas


def test_git_details_are_stored_per_trial(ledger: Ledger, repo: tuple[Path, list[str]]) -> None:
    path, shas = repo
    text = tsv(
        "commit\tval_bpb\tstatus\tdescription",
        f"{shas[0]}\t1.0\tkeep\tbase",
        f"{shas[1]}\t0.9\tkeep\tlr",
        f"{shas[2]}\t0.8\tkeep\twarmup",
        "deadbee\t0.85\tdiscard\tnot in the repo",
    )
    done = imported(ledger, text, git_repo=path)
    assert any("1 commit(s) do not resolve" in w for w in done.warnings)
    first, second, third, missing = ledger.trials.list_trials("loop")
    details = second.extra["_git"]
    assert details["subject"] == "experiment 1" and details["author_time"] == "2026-01-02T03:04:05+00:00"
    assert "train.py | 2 +-" in details["diffstat"] and "+lr = 0.04" in details["patch"]
    assert details["patch_base"].startswith(shas[0])  # against the parent trial's commit
    assert first.extra["_git"]["patch_base"] == "parent commit" and "+lr = 0.01" in first.extra["_git"]["patch"]
    big = third.extra["_git"]
    assert len(big["patch"].encode()) <= 64 * 1024 and "patch cut at" in big["patch_note"]
    assert "_git" not in missing.extra
    assert exported(ledger) == text  # commit details do not change what export writes


def test_cli_import_watch_and_record_take_git_repo(db_url: str, repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, shas = repo
    source = tmp_path / "results.tsv"
    source.write_text(tsv("commit\tval_bpb\tstatus\tdescription", f"{shas[0]}\t1.0\tkeep\tbase"), encoding="utf-8")
    run(db_url, "import", str(source), "--project", "g", "--git-repo", str(path))
    with source.open("a", encoding="utf-8") as fh:
        fh.write(f"{shas[1]}\t0.9\tkeep\tlr\n")
    run(db_url, "watch", str(source), "--project", "g", "--once", "--git-repo", str(path))
    run(
        db_url,
        "record",
        "--project",
        "g",
        "--metric",
        "0.8",
        "--status",
        "keep",
        "-d",
        "warmup",
        "--commit",
        shas[2],
        "--git-repo",
        str(path),
    )
    rows = json.loads(run(db_url, "trials", "--project", "g", "--format", "json").output)
    assert rows[0]["extra"]["_git"]["subject"] == "experiment 0"
    assert rows[1]["extra"]["_git"]["subject"] == "experiment 1"
    assert rows[2]["extra"]["_git"]["subject"] == "experiment 2" and rows[2]["extra"]["_git"]["patch_base"].startswith(
        shas[1]
    )
    assert (
        rows[1]["extra"]["_git"]["patch_base"].startswith(shas[0]) and "+lr = 0.04" in rows[1]["extra"]["_git"]["patch"]
    )


def test_record_with_git_repo(ledger: Ledger, repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    path, shas = repo
    loops.record_result(ledger, "g", metric="1.0", status="keep", commit=shas[0], git_repo=path)
    outcome = loops.record_result(ledger, "g", metric="0.9", status="keep", commit=shas[1], git_repo=path)
    assert outcome.trial.extra["_git"]["subject"] == "experiment 1"
    assert outcome.trial.extra["_git"]["patch_base"].startswith(shas[0])


def test_the_trial_page_and_its_json_show_the_code_change(
    ledger: Ledger, db_url: str, repo: tuple[Path, list[str]]
) -> None:
    from tests.web.conftest import make_client

    path, shas = repo
    imported(
        ledger,
        tsv("commit\tval_bpb\tstatus\tdescription", f"{shas[0]}\t1.0\tkeep\tbase", f"{shas[1]}\t0.9\tkeep\tlr"),
        git_repo=path,
    )
    with make_client(db_url) as client:
        page = client.get("/projects/loop/trials/001").text
        as_json = client.get("/api/v1/projects/loop/trials/001", params={"include_patch": "true"}).json()
        lean = client.get("/api/v1/projects/loop/trials/001").json()
    section = page[page.index('id="code-change"') :]
    assert "experiment 1" in section and f"the parent trial's commit {shas[0]}" in section
    assert '<span class="del">-lr = 0.01</span>' in section and '<span class="add">+lr = 0.04</span>' in section
    assert "+lr = 0.04" in as_json["extra"]["_git"]["patch"]
    assert "patch" not in lean["extra"]["_git"] and lean["extra"]["_git"]["diffstat"]  # only when asked for


# -- plot --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_plot_draws_progress(sqlite_ledger: Ledger, tmp_path: Path, suffix: str) -> None:
    pytest.importorskip("matplotlib")
    imported(sqlite_ledger, CRASH_ZERO)
    out = tmp_path / f"progress.{suffix}"
    assert loops.plot_progress(sqlite_ledger, "loop", out) == 8
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == "png" else b"<svg" in data[:2000]
    if suffix == "svg":
        text = data.decode()
        assert "muon lr 0.05" in text and "running best" in text and "crash (no result)" in text


def test_cli_plot_writes_the_chart(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    imported(sqlite_ledger, CRASH_ZERO)
    out = tmp_path / "progress.svg"
    result = run(str(sqlite_ledger.engine.url.database), "plot", "--project", "loop", "-o", str(out))
    assert "8" in result.output and b"running best" in out.read_bytes()
    bad = run(str(sqlite_ledger.engine.url.database), "plot", "--project", "nope", "-o", str(out), ok=False)
    assert bad.exit_code != 0 and "nope" in bad.stderr


def test_watch_adopts_a_project_made_without_a_file(ledger: Ledger, tmp_path: Path) -> None:
    ledger.projects.create_project("made")
    ledger.recording.record_trial("made", {"status": "keep", "core_metric": 2.0, "hypothesis": "by hand"})
    path = tmp_path / "results.tsv"
    path.write_text(ORIGINAL, encoding="utf-8")
    report = loops.ResultsSync(ledger, "made", path).sync()
    assert report.inserted == [f"{i:03d}" for i in range(1, 9)]
    project = ledger.projects.project("made")
    assert project.metric_name == "val_bpb" and project.settings["results_file"]["segments"] == [[0, 1]]
    assert ledger.trials.trial("made", "000").hypothesis == "by hand"
    assert not loops.ResultsSync(ledger, "made", path).sync().changed


@pytest.mark.parametrize("name", ["binary", "giant_line", "prose", "latin1"])
def test_cli_refuses_what_is_not_a_results_table_with_one_line(db_url: str, tmp_path: Path, name: str) -> None:
    from tests.lineage.autoresearch_files import NOT_TABLES

    data, _line, word = NOT_TABLES[name]
    source = tmp_path / "in.tsv"
    source.write_bytes(data)
    result = run(db_url, "import", str(source), "--project", "nope", ok=False)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "line " in result.stderr and word in result.stderr
    assert run(db_url, "trials", "--project", "nope", ok=False).exit_code == 2  # nothing written
