"""The wheel carries everything `lineage serve` needs: migrations and templates included."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    return next(out.glob("lineage_ledger-*.whl"))


@pytest.mark.slow
def test_installed_wheel_carries_migrations_and_templates_and_runs_from_another_directory(
    wheel: Path, tmp_path: Path
) -> None:
    # one test, one wheel build: two xdist workers building in one source tree collide in build/
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "lineage/migrations/env.py" in names
    assert "lineage/migrations/script.py.mako" in names
    assert any(n.startswith("lineage/migrations/versions/0001_") for n in names)
    assert "lineage/templates/base.html" in names and "lineage/templates/static/app.css" in names
    for package in (
        "lineage/formats/fieldkit.py",
        "lineage/store/base.py",
        "api/cli/__init__.py",
        "api/cli/__main__.py",
        "api/routes/__init__.py",
        "api/pages/__init__.py",
        "trainer_hooks/registry.py",
    ):
        assert package in names
    assert "lineage/formats/autoresearch/rows.py" in names and "lineage/formats/text.py" in names
    # every package of the source ships (pyproject.toml lists them: a new one must join the list)
    for top in ("lineage", "api", "trainer_hooks"):
        for init in (ROOT / top).rglob("__init__.py"):
            assert init.relative_to(ROOT).as_posix() in names, f"{init.parent} is not in the wheel"
    # PEP 561: type checkers read the installed packages' annotations only with the marker
    assert "lineage/py.typed" in names and "trainer_hooks/py.typed" in names
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    env.pop("LINEAGE_DATABASE_URL", None)
    code = (
        "import lineage, api.cli, sys; root = sys.argv.pop(1); "
        "assert lineage.__file__.startswith(root), lineage.__file__; api.cli.main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(target), "demo"], cwd=workdir, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert (workdir / "lineage.db").exists()
    result = subprocess.run(
        [sys.executable, "-c", code, str(target), "best", "--project", "a2tgpo-demo"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.stdout.startswith("exp_004\t34.960000\tkeep")
