"""The HTTP prompt's own example, taken out of the prompt and run as an agent would run it
(real bash, real curl, a real ``lineage serve``): the ``KEY=`` line once, the ``curl``
command, and a retry of the ``curl`` command, as the prompt says; on a ledger without
tokens (no Authorization header) and on one with a writer token made by ``lineage token
create``. Each time: exactly one trial."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from lineage.service import Ledger
from tests.api.conftest import API, LINEAGE, ROOT

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")


def _example(prompt: str) -> tuple[str, str]:
    """The bash block of the prompt's recording section, as its ``KEY=`` line and the rest."""
    section = prompt[prompt.index("## Recording") :]
    block = re.search(r"```bash\n(.*?)\n```", section, re.S)
    assert block is not None, section
    key_line, _, command = block.group(1).partition("\n")
    assert key_line.startswith("KEY=") and command.startswith("curl "), block.group(1)
    return key_line, command


def _bash(script: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=60
    )


def _answers(text: str) -> list[dict]:  # type: ignore[type-arg]
    """The JSON answers curl printed one after the other (without line ends between them)."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while at < len(text.rstrip()):
        answer, at = decoder.raw_decode(text, at)
        out.append(answer)
    return out


def _trial_ids(url: str, slug: str) -> list[str]:
    answer = httpx.get(f"{url}{API}/projects/{slug}/trials", timeout=10)
    assert answer.status_code == 200, answer.text
    return [trial["exp_id"] for trial in answer.json()["items"]]


@pytest.mark.parametrize("tokens", [False, True], ids=["no-tokens", "writer-token"])
def test_the_prompts_curl_example_run_twice_records_one_trial(serve, tmp_path: Path, tokens: bool) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("p", metric_name="loss")
    ledger.recording.record_trial("p", {"status": "keep", "core_metric": 1.0, "hypothesis": "baseline"})
    ledger.close()
    server = serve(db)
    prompt_url = f"{server.url}{API}/projects/p/prompt"
    before = httpx.get(prompt_url, timeout=10)
    env: dict[str, str] = {}
    if tokens:
        made = subprocess.run(
            [*LINEAGE, "--db", db, "token", "create", "--name", "agent", "--role", "writer"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        env["LINEAGE_TOKEN"] = made.stdout.strip()
        # the prompt changed with the ledger's first token: a cached copy is not reused
        again = httpx.get(prompt_url, headers={"If-None-Match": before.headers["etag"]}, timeout=10)
        assert again.status_code == 200
        prompt = again.text
        assert "lineage token create --name <agent> --role writer" in prompt
    else:
        prompt = before.text
        assert "LINEAGE_TOKEN" not in prompt and "token create" not in prompt
    key_line, command = _example(prompt)
    assert ("Authorization: Bearer $" in command or "Authorization: Bearer ${" in command) == tokens
    assert "uuidgen" not in prompt and "run the `curl` command again with the same `$KEY`" in prompt

    # the example, then the retry the prompt describes: the same $KEY, the curl command again
    run = _bash(f"{key_line}\n{command}\n{command}\n", env)
    assert run.returncode == 0, run.stderr
    printed = re.match(r"Idempotency-Key: (\S+)\n", run.stdout)
    assert printed is not None, run.stdout
    answers = _answers(run.stdout[printed.end() :])
    assert [a["trial"]["exp_id"] for a in answers] == ["001", "001"], answers
    assert [a["created"] for a in answers] == [True, False]
    # a retry from a new shell, with the key the example printed
    retry = _bash(f"KEY={printed.group(1)}\n{command}\n", env)
    assert retry.returncode == 0 and json.loads(retry.stdout)["created"] is False, retry.stdout + retry.stderr
    # the curl command alone, without its KEY, stops instead of posting without a key
    keyless = _bash(command, {**env, "KEY": ""})
    assert keyless.returncode != 0 and "KEY" in keyless.stderr
    assert _trial_ids(server.url, "p") == ["000", "001"]
