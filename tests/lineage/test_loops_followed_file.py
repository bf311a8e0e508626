"""A project follows one results file (lineage.loops.followed): its path is stored when the
project first imports, watches or appends to a file; ``record --append-tsv``, ``watch``
and ``import`` refuse any other file with one line naming the right one, storing
nothing; the prompt's ``lineage record`` line names the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from api.cli import cli
from lineage.loops.followed import followed_file
from lineage.service import Ledger

HEADER = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n"
ROWS = "aaaaaaa\t0.997900\t44.0\tkeep\tbaseline\nbbbbbbb\t0.995000\t44.0\tkeep\tlr 0.05\n"
NEW_IDEA = ["--metric", "0.99", "--status", "keep", "-d", "new idea", "--commit", "ccccccc", "--memory-gb", "44.0"]


def cli_run(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)


def refused(result, right: Path) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code != 0 and result.stdout == "", result.output
    assert result.stderr.count("\n") == 1 and str(right.resolve()) in result.stderr, result.stderr


def test_a_second_file_is_refused_naming_the_followed_one(
    ledger: Ledger, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real.tsv"
    real.write_text(HEADER + ROWS)
    assert cli_run(db_url, "import", str(real), "--project", "p").exit_code == 0
    assert followed_file(ledger.projects.project("p")) == str(real.resolve())
    revision = ledger.projects.project("p").revision
    # the review's reproduction: a record that would start other.tsv for the project
    other = tmp_path / "other.tsv"
    result = cli_run(db_url, "record", "-p", "p", *NEW_IDEA, "--append-tsv", str(other))
    refused(result, real)
    assert "append_tsv" in result.stderr and not other.exists()
    copy = tmp_path / "copy.tsv"
    copy.write_text(HEADER + ROWS)
    refused(cli_run(db_url, "watch", str(copy), "--project", "p", "--once"), real)
    refused(cli_run(db_url, "import", str(copy), "--project", "p"), real)
    assert [t.exp_id for t in ledger.tables.stream_trials("p")] == ["000", "001"]
    assert ledger.projects.project("p").revision == revision and real.read_text() == HEADER + ROWS
    # the right file, named from another directory, is the same file
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    done = cli_run(db_url, "record", "-p", "p", *NEW_IDEA, "--append-tsv", "../real.tsv")
    assert done.exit_code == 0 and "exp_002" in done.output
    assert real.read_text().endswith("ccccccc\t0.990000\t44.0\tkeep\tnew idea\n")


def test_the_first_file_a_project_meets_is_the_one_it_follows(ledger: Ledger, db_url: str, tmp_path: Path) -> None:
    fresh = tmp_path / "runs" / "results.tsv"
    fresh.parent.mkdir()
    assert cli_run(db_url, "record", "-p", "r", *NEW_IDEA, "--append-tsv", str(fresh)).exit_code == 0
    assert followed_file(ledger.projects.project("r")) == str(fresh.resolve())
    watched = tmp_path / "watched.tsv"
    watched.write_text(HEADER + ROWS)
    assert cli_run(db_url, "watch", str(watched), "--project", "w", "--once").exit_code == 0
    assert followed_file(ledger.projects.project("w")) == str(watched.resolve())
    # a project that took its trials elsewhere first follows the file it is first given
    assert cli_run(db_url, "record", "-p", "n", *NEW_IDEA).exit_code == 0
    assert followed_file(ledger.projects.project("n")) is None
    assert (
        cli_run(
            db_url, "record", "-p", "n", *NEW_IDEA[:7], "ddddddd", "--append-tsv", str(tmp_path / "n.tsv")
        ).exit_code
        == 0
    )
    assert followed_file(ledger.projects.project("n")) == str((tmp_path / "n.tsv").resolve())


def test_a_project_imported_before_paths_were_stored(ledger: Ledger, db_url: str, tmp_path: Path) -> None:
    """No path stored (imported by an older ledger, or over HTTP): a file that does not
    exist would start a second file beside the rows the project holds, so it is refused;
    the existing file becomes the followed one."""
    real = tmp_path / "real.tsv"
    real.write_text(HEADER + ROWS)
    ledger.files.import_results("old", real.read_text(), source=str(real))
    assert followed_file(ledger.projects.project("old")) is None
    assert "--append-tsv <results file>" in ledger.agent.prompt_document("old", face="cli")[1]
    other = tmp_path / "other.tsv"
    result = cli_run(db_url, "record", "-p", "old", *NEW_IDEA, "--append-tsv", str(other))
    assert result.exit_code != 0 and "exp_000 is its first row" in result.stderr and not other.exists()
    assert result.stderr.count("\n") == 1
    assert cli_run(db_url, "record", "-p", "old", *NEW_IDEA, "--append-tsv", str(real)).exit_code == 0
    assert followed_file(ledger.projects.project("old")) == str(real.resolve())
    prompt = ledger.agent.prompt_document("old", face="http", base_url="http://h")[1]
    assert f"--append-tsv {real.resolve()}" in prompt and f"results file `{real.resolve()}`" in prompt
