"""'Was this tried?' through every face: ``GET`` and ``POST /api/v1/projects/{p}/similar``
(in process and over a real ``lineage serve``), the ``similar_prior`` of recorded trials
(HTTP create, CLI ``record``), ``lineage similar`` and MCP ``find_similar``; bad queries as
problem+json naming ``q``, as one CLI line on stderr and as an MCP tool error naming ``text``."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from click.testing import CliRunner

from api.cli import cli
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, new_project, record
from tests.api.test_mcp import _failed, _session_run, _text

MEGABYTE_OF_TEXT = "idea " * (1_048_576 // 5)

IDEAS = [
    "turn-group normalization with α=0.3",
    "Normalize outcome and IG rewards separately instead of jointly",
    "increase batch size to 512 sequences",
]


def _seed(client) -> None:  # type: ignore[no-untyped-def]
    new_project(client, "p")
    for idea in IDEAS:
        assert record(client, "p", hypothesis=idea, core_metric=1.0).status_code == 201


def test_similar_lists_the_closest_trials_first(client) -> None:  # type: ignore[no-untyped-def]
    _seed(client)
    response = client.get(f"{API}/projects/p/similar", params={"q": "α = 0.3 turn group norm", "limit": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["q"] == "α = 0.3 turn group norm" and body["project"] == "p"
    first = body["items"][0]
    assert first["exp_id"] == "000" and first["status"] == "discard" and first["core_metric"] == 1.0
    assert 0.6 <= first["score"] <= 1.0 and "delta_vs_best" in first
    assert len(body["items"]) <= 2


def test_similar_of_an_unrelated_text_is_empty(client) -> None:  # type: ignore[no-untyped-def]
    _seed(client)
    response = client.get(f"{API}/projects/p/similar", params={"q": "byte-level BPE tokenizer"})
    assert response.status_code == 200 and response.json()["items"] == []


def test_bad_queries_are_problems_naming_q(client) -> None:  # type: ignore[no-untyped-def]
    _seed(client)
    for q in ("", "the of and", "<br/>", "x" * 5_000):
        assert_problem(client.get(f"{API}/projects/p/similar", params={"q": q}), 422, "q")
    missing = client.get(f"{API}/projects/p/similar")
    assert missing.status_code == 422 and "q" in missing.text
    assert client.get(f"{API}/projects/p/similar", params={"q": "batch", "limit": 0}).status_code == 422
    assert_problem(client.get(f"{API}/projects/nope/similar", params={"q": "batch"}), 404)


def test_post_searches_like_get(client) -> None:  # type: ignore[no-untyped-def]
    _seed(client)
    query = {"q": "α = 0.3 turn group norm", "limit": 2}
    posted = client.post(f"{API}/projects/p/similar", json=query)
    assert posted.status_code == 200, posted.text
    assert posted.json() == client.get(f"{API}/projects/p/similar", params=query).json()
    assert posted.json()["items"][0]["exp_id"] == "000"
    assert client.post(f"{API}/projects/p/similar", json={"q": "batch size"}).json()["items"][0]["exp_id"] == "002"


def test_bad_post_bodies_are_problems_naming_the_field(client) -> None:  # type: ignore[no-untyped-def]
    _seed(client)
    for q in ("", "the of and", "x" * 5_000, MEGABYTE_OF_TEXT):
        assert_problem(client.post(f"{API}/projects/p/similar", json={"q": q}), 422, "q")
    for bad, field in (
        ({}, "q"),
        ({"q": 3}, "q"),
        ({"q": "batch", "limit": "2"}, "limit"),
        ({"q": "batch", "limit": 0}, "limit"),
        ({"q": "batch", "extra": 1}, "extra"),
    ):
        assert_problem(client.post(f"{API}/projects/p/similar", json=bad), 422, field)
    assert_problem(client.post(f"{API}/projects/nope/similar", json={"q": "batch"}), 404)


def _raw_get(port: int, target: str) -> tuple[int, str, str]:
    """GET with the standard library (httpx refuses a URL part over 64 KiB client-side)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", target)
        response = connection.getresponse()
        return response.status, response.getheader("content-type", ""), response.read().decode()
    finally:
        connection.close()


@pytest.mark.slow
def test_a_megabyte_query_over_a_real_server(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """GET: a long ``q`` is our 422 up to uvicorn's request-line limit, past it uvicorn's own
    text/plain 400; POST: any length is our answer (422 naming ``q``, or 413 over the body limit)."""
    server = serve(str(tmp_path / "similar.db"))
    with httpx.Client(base_url=server.url, timeout=60) as http_client:
        _seed(http_client)
        status, kind, text = _raw_get(server.port, f"{API}/projects/p/similar?q={'x' * 5_000}")
        assert (status, kind) == (422, "application/problem+json") and json.loads(text)["field"] == "q"
        status, kind, text = _raw_get(server.port, f"{API}/projects/p/similar?q={'x' * 1_048_576}")
        assert status == 400 and "problem" not in kind, (status, kind, text)  # uvicorn's, not ours
        assert_problem(http_client.post(f"{API}/projects/p/similar", json={"q": MEGABYTE_OF_TEXT}), 422, "q")
        found = http_client.post(f"{API}/projects/p/similar", json={"q": "α = 0.3 turn group norm", "limit": 1})
        assert found.status_code == 200 and [s["exp_id"] for s in found.json()["items"]] == ["000"]
    small = serve(str(tmp_path / "similar.db"), "--max-body-bytes", "65536")
    too_big = httpx.post(f"{small.url}{API}/projects/p/similar", json={"q": MEGABYTE_OF_TEXT}, timeout=60)
    assert_problem(too_big, 413)


@pytest.mark.slow
def test_mcp_find_similar_refuses_a_megabyte_naming_text(tmp_path: Path) -> None:
    db = str(tmp_path / "mcp.db")
    ledger = Ledger.open(db)
    ledger.projects.create_project("p")
    ledger.recording.record_trial("p", {"status": "discard", "hypothesis": IDEAS[0]})

    async def steps(session: Any) -> tuple[Any, Any]:
        huge = await session.call_tool("find_similar", {"project": "p", "text": MEGABYTE_OF_TEXT})
        fine = await session.call_tool("find_similar", {"project": "p", "text": "α = 0.3 turn group norm"})
        return huge, fine

    huge, fine = anyio.run(_session_run, db, steps)
    assert _failed(huge)
    message = _text(huge)  # mcp may put "Error executing tool find_similar: " in front
    error = json.loads(message[message.index("{") :])
    assert error["field"] == "text" and "1,048,575 characters long" in error["detail"], error
    assert not _failed(fine) and json.loads(_text(fine))["items"][0]["exp_id"] == "000"


def test_recording_returns_similar_prior(client) -> None:  # type: ignore[no-untyped-def]
    _seed(client)
    again = record(client, "p", hypothesis="normalise IG and outcome rewards separately, not jointly")
    assert again.status_code == 201
    prior = again.json()["similar_prior"]
    assert [s["exp_id"] for s in prior] == ["001"] and prior[0]["score"] >= 0.6
    fresh = record(client, "p", hypothesis="mixture of experts router")
    assert fresh.json()["similar_prior"] == []


def test_cli_similar_prints_json_and_text(ledger: Ledger, db_url: str) -> None:
    ledger.projects.create_project("p")
    for idea in IDEAS:
        ledger.recording.record_trial("p", {"status": "discard", "hypothesis": idea})
    runner = CliRunner()
    out = runner.invoke(
        cli, ["--db", db_url, "similar", "--project", "p", "α = 0.3 turn group norm", "--format", "json"]
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["items"][0]["exp_id"] == "000"
    text = runner.invoke(cli, ["--db", db_url, "similar", "-p", "p", "batch size 512", "--limit", "1"])
    # the closest trial, then the same knob at the same value: a repeat
    assert text.exit_code == 0 and text.output.splitlines()[0].startswith("0.83  exp_002")
    assert text.output.splitlines()[1:] == [
        "same knob batch size: 512  exp_002  discard  metric=—  (same value)",
        "repeat of exp_002: batch size 512, discard",
    ]


def test_cli_similar_bad_query_is_one_line_on_stderr(ledger: Ledger, db_url: str) -> None:
    ledger.projects.create_project("p")
    for query in ("", "the and of", "y" * 1_048_576):
        out = CliRunner().invoke(cli, ["--db", db_url, "similar", "-p", "p", query])
        assert out.exit_code == 2
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: text:"), out.stderr


def test_cli_record_prints_similar_prior(ledger: Ledger, db_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    runner = CliRunner()
    base = ["--db", db_url, "record", "--project", "loop"]
    first = runner.invoke(
        cli, [*base, "--metric", "1.0", "--status", "keep", "--description", "turn-group normalization with α=0.3"]
    )
    assert first.exit_code == 0, first.output + first.stderr
    again = runner.invoke(
        cli,
        [
            *base,
            "--metric",
            "1.1",
            "--status",
            "discard",
            "--description",
            "α = 0.3 turn group norm",
            "--format",
            "json",
        ],
    )
    assert again.exit_code == 0, again.output + again.stderr
    prior = json.loads(again.output)["similar_prior"]
    assert prior and prior[0]["hypothesis"] == "turn-group normalization with α=0.3"
