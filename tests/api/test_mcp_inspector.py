"""End to end with a client nobody here wrote: the official MCP Inspector CLI (npm
``@modelcontextprotocol/inspector``, pinned) drives ``lineage mcp`` on a fresh database as
an agent would: list and create the project, record a baseline, keeps, discards and
crashes without parent fields, ask find_similar, get_summary and get_prompt. The chain to
the best is the kept chain, crashes are never the best, the prompt says record_trial.

The Inspector is installed by ``tests/run_all.sh`` (``npm install --prefix`` into
:data:`INSPECTOR_DIR`); when it is missing this test installs it there, and skips, saying
why, only when npm cannot fetch it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lineage.service import Ledger
from tests.api.test_mcp import _lineage_command

pytestmark = pytest.mark.slow

#: The pinned Inspector (tests/run_all.sh installs the same version).
INSPECTOR_VERSION = "2.12.0"
INSPECTOR_DIR = Path(
    os.environ.get("LINEAGE_INSPECTOR_DIR")
    or Path.home() / ".cache" / "lineage-tests" / f"mcp-inspector-{INSPECTOR_VERSION}"
)


@pytest.fixture(scope="module")
def inspector() -> Path:
    binary = INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the MCP Inspector CLI cannot be fetched")
    done = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(INSPECTOR_DIR),
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0 or not binary.exists():
        pytest.skip(
            f"npm could not fetch @modelcontextprotocol/inspector@{INSPECTOR_VERSION}: "
            f"{(done.stderr or done.stdout).strip()[-300:]}"
        )
    return binary


class Agent:
    """The Inspector CLI against ``lineage mcp --db DB`` (a fresh stdio server per call)."""

    def __init__(self, binary: Path, db: str) -> None:
        self.binary = binary
        self.server = [*_lineage_command(), "mcp", "--db", db]

    def run(self, *args: str) -> tuple[int, Any, str]:
        done = subprocess.run(
            [str(self.binary), "--cli", *self.server, *args], capture_output=True, text=True, timeout=180, check=False
        )
        text = done.stdout.strip()
        data, _ = json.JSONDecoder().raw_decode(text) if text.startswith("{") else (None, 0)
        return done.returncode, data, done.stderr

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        pairs = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in arguments.items()]
        given = ["--tool-arg", *pairs] if pairs else []
        rc, data, stderr = self.run("--method", "tools/call", "--tool-name", tool, *given)
        assert data is not None, (rc, stderr)
        return data


def test_the_inspector_drives_lineage_mcp_from_a_blank_database(inspector: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "fresh.db")
    agent = Agent(inspector, db)

    rc, listed, stderr = agent.run("--method", "tools/list", "--strict")
    assert rc == 0, stderr  # --strict: no schema portability error
    names = {tool["name"] for tool in listed["tools"]}
    assert {"list_projects", "create_project", "record_trial", "find_similar", "get_summary", "get_prompt"} <= names
    record_schema = next(t for t in listed["tools"] if t["name"] == "record_trial")["inputSchema"]
    assert "status" in record_schema["properties"]["trial"]["required"]

    assert agent.call("list_projects")["structuredContent"] == {"projects": []}
    missing = agent.call("record_trial", project="nano", trial={"status": "baseline", "core_metric": 0.998})
    assert missing["isError"] and "create_project" in missing["content"][0]["text"]
    made = agent.call("create_project", slug="nano", metric_name="val_bpb", lower_is_better=True)
    assert made["structuredContent"]["created"] is True

    loop = [
        ("baseline", 0.9979, "baseline"),
        ("keep", 0.9932, "increase LR to 0.04"),
        ("discard", 1.005, "switch to GeLU activation"),
        ("crash", 0, "double model width (OOM)"),
        ("keep", 0.9901, "add 200 warmup steps"),
        ("discard", 0.991, "weight decay 0.2"),
        ("crash", -999, "flash attention variant"),
        ("keep", 0.9876, "muon MATRIX_LR 0.05"),
    ]
    answers = []
    for status, metric, description in loop:
        answer = agent.call(
            "record_trial", project="nano", trial={"status": status, "core_metric": metric, "hypothesis": description}
        )
        assert not answer["isError"], answer
        answers.append(answer["structuredContent"])
    assert [a["trial"]["exp_id"] for a in answers] == [f"{i:03d}" for i in range(8)]
    assert [a["trial"]["parent_exp"] for a in answers] == ["", "000", "001", "001", "001", "004", "004", "004"]
    assert all(a["parent_defaulted"] for a in answers[1:])
    crashes = [a for a in answers if a["trial"]["status"] == "crash"]
    assert all(a["trial"]["core_metric"] is None and not a["is_new_best"] for a in crashes)

    bad = agent.call("record_trial", project="nano", trial={"status": "exploded", "core_metric": 1.0})
    assert bad["isError"] and '"field": "status"' in bad["content"][0]["text"]
    typed = agent.call("record_trial", project="nano", trial={"status": "keep", "core_metric": "low"})
    assert typed["isError"] and '"field": "core_metric"' in typed["content"][0]["text"]

    similar = agent.call("find_similar", project="nano", text="try a higher matrix learning rate")
    found = [item["exp_id"] for item in similar["structuredContent"]["items"]]
    assert {"001", "007"} <= set(found)

    summary = agent.call("get_summary", project="nano")["structuredContent"]
    assert summary["trials"] == 8 and summary["best"]["exp_id"] == "007"

    knowledge = json.loads(agent.call("get_knowledge", project="nano", format="json")["content"][0]["text"])
    assert [t["exp_id"] for t in knowledge["chain"]] == ["000", "001", "004", "007"]
    assert all(t["status"] in ("baseline", "keep") for t in knowledge["chain"])

    prompt = agent.call("get_prompt", project="nano")["content"][0]["text"]
    assert "`record_trial` tool" in prompt and "curl" not in prompt
    assert "Current best: **exp_007**" in prompt and "specialist" not in prompt

    rc, got, _ = agent.run("--method", "prompts/get", "--prompt-name", "session_start", "--prompt-args", "project=nano")
    assert rc == 0 and got["messages"][0]["content"]["text"] == prompt
    rc, read, _ = agent.run("--method", "resources/read", "--uri", "lineage://projects/nano/prompt")
    assert rc == 0 and read["contents"][0]["text"] == prompt

    ledger = Ledger.open(db)
    assert ledger.projects.project("nano").trial_count == 8  # the refused calls wrote nothing
    assert ledger.trials.best("nano").exp_id == "007"  # type: ignore[union-attr]
    ledger.close()


def test_the_inspector_reaches_mcp_over_http_from_lineage_serve(inspector: Path, serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "served.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("p", metric_name="loss")
    token = ledger.tokens.create_token(name="agent", role="writer")[1]
    ledger.close()
    server = serve(db)
    base = [
        str(inspector),
        "--cli",
        f"{server.url}/mcp",
        "--transport",
        "http",
        "--method",
        "tools/call",
        "--tool-name",
        "record_trial",
        "--tool-arg",
        "project=p",
        'trial={"status": "baseline", "core_metric": 2}',
    ]

    def run(*extra: str) -> dict[str, Any]:
        done = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=180, check=False)
        return json.JSONDecoder().raw_decode(done.stdout.strip())[0]

    anonymous = run()
    assert anonymous["isError"] and "Authorization: Bearer" in anonymous["content"][0]["text"]
    done = run("--header", f"Authorization: Bearer {token}")
    assert not done["isError"] and done["structuredContent"]["trial"]["exp_id"] == "000"
