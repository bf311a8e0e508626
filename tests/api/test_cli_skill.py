"""``lineage skill``: a SKILL.md in the Agent Skills format whose commands and tools exist,
installed where agents look for skills, with an AGENTS.md snippet."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
from click.testing import CliRunner

from api.cli import cli
from api.mcp_server import build_server
from lineage.service import Ledger


def _front_matter(text: str) -> dict[str, str]:
    assert text.startswith("---\n")
    head = text[4 : text.index("\n---\n")]
    pairs = [line.split(": ", 1) for line in head.splitlines()]  # plain one-line YAML scalars
    assert all(len(pair) == 2 and pair[1].strip() and not pair[1].startswith(("'", '"', "|", ">")) for pair in pairs)
    return {key: value for key, value in pairs}


def test_the_skill_is_in_the_agent_skills_format_and_names_what_exists(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["skill"], catch_exceptions=False)
    assert out.exit_code == 0
    meta = _front_matter(out.output)
    assert set(meta) == {"name", "description"}
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", meta["name"]) and len(meta["name"]) <= 64
    assert 20 < len(meta["description"]) <= 1024 and "Use it" in meta["description"]
    body = out.output.split("\n---\n", 1)[1]
    ledger = Ledger.open(str(tmp_path / "s.db"))
    tools = {tool.name for tool in anyio.run(build_server(ledger).list_tools)}
    ledger.close()
    named_tools = set(re.findall(r"`([a-z_]+)`", body)) & {name for name in re.findall(r"[a-z]+_[a-z_]+", body)}
    mentioned = {
        name for name in named_tools if name.split("_")[0] in ("list", "create", "get", "find", "record", "update")
    }
    assert mentioned and mentioned <= tools, mentioned - tools
    commands = set(re.findall(r"`lineage ([a-z]+)", body))
    assert commands and all(cli.get_command(None, name) is not None for name in commands), commands  # type: ignore[arg-type]


def test_install_writes_the_skill_and_prints_the_agents_snippet(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["skill", "--install", str(tmp_path / ".agents" / "skills")], catch_exceptions=False)
    assert out.exit_code == 0
    written = tmp_path / ".agents" / "skills" / "lineage-ledger" / "SKILL.md"
    assert _front_matter(written.read_text())["name"] == "lineage-ledger" == written.parent.name
    assert out.stdout.startswith("## Experiment memory (Lineage Ledger)") and "get_prompt" in out.stdout
    assert "wrote" in out.stderr


def test_install_keeps_an_edited_skill_unless_forced(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    written = skills / "lineage-ledger" / "SKILL.md"
    assert CliRunner().invoke(cli, ["skill", "--install", str(skills)]).exit_code == 0
    again = CliRunner().invoke(cli, ["skill", "--install", str(skills)])
    assert again.exit_code == 0 and "already" in again.stderr  # the same text: nothing to refuse
    written.write_text("my own notes\n")
    refused = CliRunner().invoke(cli, ["skill", "--install", str(skills)])
    assert refused.exit_code != 0 and "--force" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and written.read_text() == "my own notes\n"
    forced = CliRunner().invoke(cli, ["skill", "--install", str(skills), "--force"])
    assert forced.exit_code == 0 and _front_matter(written.read_text())["name"] == "lineage-ledger"


def test_install_never_writes_through_a_symbolic_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    skills = tmp_path / "skills"
    (skills / "lineage-ledger").mkdir(parents=True)
    (skills / "lineage-ledger" / "SKILL.md").symlink_to(victim)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "lineage-ledger").symlink_to(elsewhere, target_is_directory=True)
    for directory in (skills, tmp_path / "linked"):
        for extra in ([], ["--force"]):
            out = CliRunner().invoke(cli, ["skill", "--install", str(directory), *extra])
            assert out.exit_code != 0 and "symbolic link" in out.stderr, out.output
    assert victim.read_text() == "keep me\n" and list(elsewhere.iterdir()) == []
