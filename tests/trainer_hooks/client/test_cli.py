"""``lineage spool flush`` lives with the client it drives: the click group in
trainer_hooks.client.cli, reached by ``lineage`` through the ``lineage.commands`` entry
point. (Flushes against a real server are in test_durability.py.)"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

from click.testing import CliRunner

from trainer_hooks.client.cli import EXIT_NOT_DELIVERED, spool


def test_the_lineage_commands_entry_point_names_the_spool_group() -> None:
    (found,) = [ep for ep in entry_points(group="lineage.commands") if ep.name == "spool"]
    assert found.value == "trainer_hooks.client.cli:spool"
    assert found.load() is spool


def test_flush_help_names_its_options() -> None:
    done = CliRunner().invoke(spool, ["flush", "-h"])
    assert done.exit_code == 0
    for option in ("--url", "--token", "--timeout", "$LINEAGE_TOKEN", "default: 60.0"):
        assert option in done.stdout


def test_a_directory_without_spools_says_so_and_succeeds(tmp_path: Path) -> None:
    done = CliRunner().invoke(spool, ["flush", str(tmp_path)])
    assert done.exit_code == 0
    assert done.stdout == "" and done.stderr == f"no spool files (*.spool) in {tmp_path}\n"


def test_a_file_that_is_not_a_spool_is_one_line_on_stderr_and_a_non_zero_exit(tmp_path: Path) -> None:
    bogus = tmp_path / "run.spool"
    bogus.write_bytes(b"not a database, " * 64)
    done = CliRunner().invoke(spool, ["flush", str(bogus)])
    assert done.exit_code == EXIT_NOT_DELIVERED
    assert done.stderr.startswith(f"error: {bogus}: not a spool file (") and done.stderr.count("\n") == 1


def test_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    done = CliRunner().invoke(spool, ["flush", str(tmp_path / "nowhere")])
    assert done.exit_code == 2 and "does not exist" in done.stderr
