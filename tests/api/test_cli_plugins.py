"""Commands other packages add to ``lineage`` through the ``lineage.commands`` entry points.

Each test installs a real distribution (a ``.dist-info`` with ``entry_points.txt`` and its
module) into a directory on ``PYTHONPATH`` and runs ``python -m api.cli`` in its own
process, as a user's shell would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PLUGIN_MODULE = '''
import os
import pathlib

import click

pathlib.Path(os.environ["PLUGIN_MARKER"]).write_text("imported")


@click.command()
@click.option("--name", default="world")
def hello(name):
    """Say hello (a test plugin)."""
    click.echo(f"hello {name}")


@click.command()
def shadow():
    """A plugin that names itself like a built-in command."""
    click.echo("the plugin's import")


NOT_A_COMMAND = 42
'''

ENTRY_POINTS = """\
[lineage.commands]
hello = lineage_test_plugin:hello
broken = lineage_test_plugin_that_is_not_installed:command
notacommand = lineage_test_plugin:NOT_A_COMMAND
import = lineage_test_plugin:shadow
"""


@pytest.fixture
def plugin_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    dist = site / "lineage_test_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lineage-test-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    (site / "lineage_test_plugin.py").write_text(PLUGIN_MODULE)
    return site


def lineage(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PLUGIN_MARKER": str(site / "imported.marker")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    env.pop("LINEAGE_DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def warnings_about(stderr: str, name: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: ") and f"'{name}'" in line]


def test_help_lists_a_plugin_command_with_its_help_and_warns_once_per_broken_plugin(plugin_site: Path) -> None:
    done = lineage(plugin_site, "--help")
    assert done.returncode == 0, done.stderr
    assert "hello" in done.stdout and "Say hello (a test plugin)." in done.stdout
    assert "  serve " in done.stdout and "  import " in done.stdout  # the built-ins are all there
    assert "broken" not in done.stdout and "notacommand" not in done.stdout
    [missing] = warnings_about(done.stderr, "broken")
    assert "lineage_test_plugin_that_is_not_installed:command" in missing and "ModuleNotFoundError" in missing
    [wrong] = warnings_about(done.stderr, "notacommand")
    assert "int is not a click command" in wrong
    assert len(done.stderr.splitlines()) == 2, done.stderr


def test_a_plugin_command_runs_with_its_options(plugin_site: Path) -> None:
    done = lineage(plugin_site, "hello", "--name", "ledger")
    assert (done.returncode, done.stdout, done.stderr) == (0, "hello ledger\n", "")


def test_a_built_in_command_never_imports_a_plugin(plugin_site: Path, tmp_path: Path) -> None:
    done = lineage(plugin_site, "--db", str(tmp_path / "x.db"), "db", "current")
    assert (done.returncode, done.stdout, done.stderr) == (0, "(empty)\n", "")
    assert not (plugin_site / "imported.marker").exists()


def test_a_built_in_command_wins_over_a_plugin_of_the_same_name(plugin_site: Path) -> None:
    done = lineage(plugin_site, "import", "--help")
    assert done.returncode == 0, done.stderr
    assert "Import FILE (a results.tsv) into PROJECT" in done.stdout
    assert not (plugin_site / "imported.marker").exists()


def test_a_broken_plugin_called_by_name_is_its_warning_and_no_such_command(plugin_site: Path) -> None:
    done = lineage(plugin_site, "broken")
    assert done.returncode == 2
    assert len(warnings_about(done.stderr, "broken")) == 1
    assert "No such command 'broken'" in done.stderr
