"""Cheaper reading for agents: a small tools/list, trials newest first, ``fields`` with
``extra.KEY``, git patches only when asked for, metrics at the project's precision, and
alerts raised by an agent -- through the MCP SDK's own client (stdio and in-process) and
the HTTP API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, ClientSession

from api.mcp_server import build_server
from lineage.agent.reading import metric_decimals, round_metrics
from lineage.service import Ledger
from tests.api.conftest import API, make_client
from tests.api.test_mcp import _session_run

#: the most tools/list may weigh as compact JSON (issue 32: it was about 27 KB)
MAX_TOOLS_LIST_BYTES = 12 * 1024
PATCH = "diff --git a/train.py b/train.py\n-MATRIX_LR = 0.04\n+MATRIX_LR = 0.05\n"


def _loop(ledger: Ledger) -> None:
    """Three trials of a val_bpb loop whose deltas carry float noise, with a git patch."""
    ledger.projects.create_project("p", metric_name="val_bpb", lower_is_better=True)
    git = {"_git": {"subject": "lr", "diffstat": "train.py | 2 +-", "patch": PATCH}}
    for metric, extra in [
        (1.0026, {}),
        (0.9979, {"commit": "a1", "memory_gb": 44.0, **git}),
        (0.9932, {"commit": "b2"}),
    ]:
        ledger.recording.record_trial("p", {"status": "keep", "core_metric": metric, "hypothesis": "x", "extra": extra})


@pytest.fixture
def loop(ledger: Ledger) -> Ledger:
    """The ledger of the test's backend (SQLite, PostgreSQL) holding :func:`_loop`."""
    _loop(ledger)
    return ledger


@pytest.mark.slow
def test_tools_list_is_small_through_the_sdk_client_over_stdio(tmp_path: Path) -> None:
    db = str(tmp_path / "size.db")
    Ledger.open(db).close()

    async def steps(session: ClientSession) -> Any:
        return await session.list_tools()

    listed = anyio.run(_session_run, db, steps)
    size = len(json.dumps(listed.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":")))
    names = {tool.name for tool in listed.tools}
    assert {"record_trial", "list_trials", "add_note", "list_notes", "raise_alert", "knob_history"} <= names
    assert size <= MAX_TOOLS_LIST_BYTES, f"tools/list is {size:,} bytes"
    # the trial schema is written once: record_trials and update_trial refer to it in words
    text = json.dumps(listed.model_dump(mode="json", by_alias=True, exclude_none=True))
    assert text.count('"keep_margin"') == 1 and "ig_clip_scale_mean" not in text


def _call(ledger: Ledger, name: str, arguments: dict[str, Any]) -> Any:
    async def call() -> Any:
        async with Client(build_server(ledger)) as client:
            return await client.call_tool(name, arguments)

    result = anyio.run(call)
    return result.structured_content if not result.is_error else result.content[0].text


def test_list_trials_is_newest_first_and_fields_take_extra_keys(ledger: Ledger, loop: Ledger) -> None:
    page = _call(ledger, "list_trials", {"project": "p"})
    assert [t["exp_id"] for t in page["items"]] == ["002", "001", "000"]
    chosen = _call(ledger, "list_trials", {"project": "p", "fields": ["exp_id", "extra.commit", "extra.memory_gb"]})
    assert chosen["items"] == [
        {"exp_id": "002", "extra.commit": "b2", "extra.memory_gb": None},
        {"exp_id": "001", "extra.commit": "a1", "extra.memory_gb": 44.0},
        {"exp_id": "000", "extra.commit": None, "extra.memory_gb": None},
    ]
    oldest = _call(ledger, "list_trials", {"project": "p", "sort": "seq", "limit": 1})
    assert [t["exp_id"] for t in oldest["items"]] == ["000"]


def test_git_patches_only_when_asked_for_by_name(ledger: Ledger, loop: Ledger) -> None:
    listed = _call(ledger, "list_trials", {"project": "p", "fields": ["exp_id", "extra"]})
    git = listed["items"][1]["extra"]["_git"]
    assert "patch" not in git and git["diffstat"] == "train.py | 2 +-"
    named = _call(ledger, "list_trials", {"project": "p", "fields": ["exp_id", "extra._git.patch"]})
    assert named["items"][1]["extra._git.patch"] == PATCH
    assert "patch" not in _call(ledger, "get_trial", {"project": "p", "exp_id": "001"})["extra"]["_git"]
    assert (
        _call(ledger, "get_trial", {"project": "p", "exp_id": "001", "include_patch": True})["extra._git.patch"]
        == PATCH
    )
    knowledge = json.loads(_call(ledger, "get_knowledge", {"project": "p", "format": "json"})["result"])
    assert PATCH not in json.dumps(knowledge) and knowledge["best"]["delta_vs_best"] == -0.0047


def test_git_patches_over_http_only_when_asked_for(ledger: Ledger, loop: Ledger, db_url: str) -> None:
    with make_client(db_url) as http:
        one = http.get(f"{API}/projects/p/trials/001").json()
        assert "patch" not in one["extra"]["_git"] and one["extra"]["_git"]["subject"] == "lr"
        asked = http.get(f"{API}/projects/p/trials/001", params={"include_patch": "true"}).json()
        assert asked["extra"]["_git"]["patch"] == PATCH
        listed = http.get(f"{API}/projects/p/trials").json()["items"]
        assert "patch" not in listed[1]["extra"]["_git"]
        assert (
            http.get(f"{API}/projects/p/trials", params={"include_patch": "true"}).json()["items"][1]["extra"]["_git"][
                "patch"
            ]
            == PATCH
        )
        chain = http.get(f"{API}/projects/p/trials/001/lineage").json()["chain"]
        assert all("patch" not in (t["extra"].get("_git") or {}) for t in chain)


def test_metrics_come_at_the_projects_precision(ledger: Ledger, loop: Ledger) -> None:
    stored = ledger.trials.trial("p", "002").delta_vs_best
    assert stored is not None and stored != -0.0047  # the float noise the agent is spared
    page = _call(ledger, "list_trials", {"project": "p"})
    assert [t["delta_vs_best"] for t in page["items"]] == [-0.0047, -0.0047, None]
    assert [t["core_metric"] for t in page["items"]] == [0.9932, 0.9979, 1.0026]
    recorded = _call(ledger, "record_trial", {"project": "p", "trial": {"status": "discard", "core_metric": 0.9941}})
    assert recorded["trial"]["delta_vs_best"] == 0.0009 and "ig_clip_scale_mean" not in recorded["trial"]
    summary = _call(ledger, "get_summary", {"project": "p"})
    assert summary["improvement_vs_baseline"] == 0.0094


@pytest.mark.parametrize(
    ("values", "decimals"),
    [
        ([0.9979, 1.0026], 4),
        ([33.21, 34.5], 2),
        ([0.30000000000000004], 6),  # float noise: 6 significant digits
        ([120.0, 118.0], 0),
        ([3e-05, 0.00012], 5),
        ([None], None),
    ],
)
def test_the_precision_is_read_from_the_recorded_metrics(values: list[Any], decimals: int | None) -> None:
    assert metric_decimals(values) == decimals


def test_rounding_leaves_extra_and_other_numbers_alone() -> None:
    answer = {"delta_vs_best": -0.0047000000000000375, "score": 0.71428, "extra": {"delta_vs_best": 0.123456}}
    assert round_metrics(answer, 4) == {
        "delta_vs_best": -0.0047,
        "score": 0.71428,
        "extra": {"delta_vs_best": 0.123456},
    }
    assert round_metrics({"delta": -0.00001}, 4) == {"delta": 0.0}  # no -0.0


def test_an_agent_raises_an_alert_over_mcp(ledger: Ledger, loop: Ledger) -> None:
    raised = _call(
        ledger, "raise_alert", {"project": "p", "exp_id": "exp_002", "title": "eval leaks", "level": "error"}
    )
    assert raised["exp_id"] == "002" and raised["level"] == "error"
    listed = _call(ledger, "list_alerts", {"project": "p"})
    assert [a["title"] for a in listed["items"]] == ["eval leaks"]
    bad = _call(ledger, "raise_alert", {"project": "p", "exp_id": "002", "title": " "})
    assert isinstance(bad, str) and '"field": "title"' in bad
    assert "ALERT (error) from exp 002" in ledger.agent.prompt_document("p", face="mcp")[1]
