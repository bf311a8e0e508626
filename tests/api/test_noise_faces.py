"""The noise verdict on every face: HTTP (record, batch, project settings), MCP's
record_trial and ``lineage record``; ``rerun_of`` into another project refused on each."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import anyio
from click.testing import CliRunner
from mcp import Client

from api.cli import cli
from api.mcp_server import build_server
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, new_project, record


def _pooled(groups: list[list[float]]) -> float:
    dof = sum(len(g) - 1 for g in groups)
    return math.sqrt(sum(statistics.variance(g) * (len(g) - 1) for g in groups) / dof)


def test_http_record_answers_say_within_noise_and_refuse_a_foreign_rerun(client) -> None:  # type: ignore[no-untyped-def]
    new_project(client, "p", metric_name="val_bpb", lower_is_better=True)
    new_project(client, "q", metric_name="val_bpb", lower_is_better=True)
    first = record(client, "p", status="baseline", core_metric=1.0).json()
    assert first["noise"]["text"] == "no noise floor: no reruns yet" and first["noise"]["sigma"] is None
    again = record(client, "p", status="baseline", core_metric=1.002, rerun_of="000")
    assert again.status_code == 201, again.text
    record(client, "p", status="keep", core_metric=0.99, extra={"commit": "c1"})
    record(client, "p", status="discard", core_metric=0.991, extra={"commit": "c1"})
    sigma = _pooled([[1.0, 1.002], [0.99, 0.991]])
    answer = record(client, "p", status="keep", core_metric=0.9895).json()
    assert answer["noise"]["within_noise"] is True and answer["noise"]["reruns"] == 2
    assert math.isclose(answer["noise"]["sigma"], sigma)
    assert answer["noise"]["text"].startswith(f"within noise: -0.0005 against σ {sigma:.4f} from 2 reruns")
    assert_problem(record(client, "q", status="keep", core_metric=0.9, rerun_of="001"), 422, "rerun_of")
    batch = client.post(f"{API}/projects/q/trials:batch", json={"trials": [{"status": "keep", "rerun_of": "001"}]})
    assert_problem(batch, 422, "trials[0].rerun_of")
    assert client.get(f"{API}/projects/q").json()["trial_count"] == 0
    summary = client.get(f"{API}/projects/p/summary").json()
    assert math.isclose(summary["noise"]["sigma"], sigma) and "within noise" in summary["best_vs_noise"]


def test_http_noise_settings_are_stored_and_bad_values_name_the_setting(client) -> None:  # type: ignore[no-untyped-def]
    new_project(client, "p")
    changed = client.patch(
        f"{API}/projects/p", json={"noise_sigma": 0.002, "noise_k": 3, "auto_keep_above_noise": True}
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["settings"] == {"noise_sigma": 0.002, "noise_k": 3, "auto_keep_above_noise": True}
    for name, bad in (("noise_sigma", -1), ("noise_sigma", 0), ("noise_k", 0), ("auto_keep_above_noise", "yes")):
        assert_problem(client.patch(f"{API}/projects/p", json={name: bad}), 422, name)
    record(client, "p", status="baseline", core_metric=1.0)
    kept = record(client, "p", status="auto", core_metric=0.995).json()  # 0.005 < 3 x 0.002
    assert kept["trial"]["status"] == "discard" and kept["noise"]["text"].startswith("within noise: -0.005")
    reset = client.patch(f"{API}/projects/p", json={"noise_sigma": None, "auto_keep_above_noise": None})
    assert reset.json()["settings"] == {"noise_k": 3}


def test_mcp_record_trial_carries_rerun_of_and_the_verdict(tmp_path: Path) -> None:
    ledger = Ledger.open(str(tmp_path / "t.db"))
    ledger.projects.create_project("p", lower_is_better=True)
    ledger.projects.create_project("q", lower_is_better=True)

    async def calls() -> list[Any]:
        async with Client(build_server(ledger)) as client:
            answers = []
            for trial in (
                {"status": "baseline", "core_metric": 1.0},
                {"status": "baseline", "core_metric": 1.004, "rerun_of": "000"},
                {"status": "keep", "core_metric": 0.999},
            ):
                answers.append(await client.call_tool("record_trial", {"project": "p", "trial": trial}))
            trial = {"status": "keep", "core_metric": 0.9, "rerun_of": "001"}
            answers.append(await client.call_tool("record_trial", {"project": "q", "trial": trial}))
            return answers

    answers = anyio.run(calls)
    sigma = _pooled([[1.0, 1.004]])
    last = answers[2].structured_content["noise"]
    assert last["within_noise"] is True and math.isclose(last["sigma"], sigma)
    assert last["text"].startswith(f"within noise: -0.0010 against σ {sigma:.4f} from 1 rerun;")
    refused = answers[3]
    assert refused.is_error and "rerun_of" in refused.content[0].text
    ledger.close()


def test_lineage_record_takes_rerun_of_and_prints_the_verdict(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--db", db, "record", "-p", "loop", *args], catch_exceptions=False)

    assert run("--metric", "1.000", "--status", "keep", "-d", "baseline", "--commit", "a1").exit_code == 0
    rerun = run(
        "--metric", "1.003", "--status", "discard", "-d", "baseline again", "--commit", "b2", "--rerun-of", "000"
    )
    assert rerun.exit_code == 0, rerun.output
    sigma = _pooled([[1.0, 1.003]])
    third = run("--metric", "0.999", "--status", "keep", "-d", "tiny", "--commit", "c3")
    assert third.exit_code == 0, third.output
    assert f"within noise: -0.0010 against σ {sigma:.4f} from 1 rerun" in third.output
    refused = run("--metric", "0.9", "--status", "keep", "--commit", "d4", "--rerun-of", "nope")
    assert refused.exit_code != 0 and "rerun_of" in refused.stderr
