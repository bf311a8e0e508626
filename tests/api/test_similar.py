"""'Was this tried?' through every face: ``GET /api/v1/projects/{p}/similar``, the
``similar_prior`` of recorded trials (HTTP create, CLI ``record``), ``lineage similar``;
bad queries as problem+json naming ``q`` and as one CLI line on stderr."""

from __future__ import annotations

import json

from click.testing import CliRunner

from api.cli import cli
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, new_project, record

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


def test_recording_returns_similar_prior(client) -> None:  # type: ignore[no-untyped-def]
    _seed(client)
    again = record(client, "p", hypothesis="normalise IG and outcome rewards separately, not jointly")
    assert again.status_code == 201
    prior = again.json()["similar_prior"]
    assert [s["exp_id"] for s in prior] == ["001"] and prior[0]["score"] >= 0.6
    fresh = record(client, "p", hypothesis="mixture of experts router")
    assert fresh.json()["similar_prior"] == []


def test_cli_similar_prints_json_and_text(ledger: Ledger, db_url: str) -> None:
    ledger.create_project("p")
    for idea in IDEAS:
        ledger.record_trial("p", {"status": "discard", "hypothesis": idea})
    runner = CliRunner()
    out = runner.invoke(cli, ["--db", db_url, "similar", "--project", "p", "α = 0.3 turn group norm", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["items"][0]["exp_id"] == "000"
    text = runner.invoke(cli, ["--db", db_url, "similar", "-p", "p", "batch size 512", "--limit", "1"])
    assert text.exit_code == 0 and "exp_002" in text.output and len(text.output.splitlines()) == 1


def test_cli_similar_bad_query_is_one_line_on_stderr(ledger: Ledger, db_url: str) -> None:
    ledger.create_project("p")
    for query in ("", "the and of", "y" * 1_048_576):
        out = CliRunner().invoke(cli, ["--db", db_url, "similar", "-p", "p", query])
        assert out.exit_code == 2
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: text:"), out.stderr


def test_cli_record_prints_similar_prior(ledger: Ledger, db_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    runner = CliRunner()
    base = ["--db", db_url, "record", "--project", "loop"]
    first = runner.invoke(cli, [*base, "--metric", "1.0", "--status", "keep", "--description",
                                "turn-group normalization with α=0.3"])
    assert first.exit_code == 0, first.output + first.stderr
    again = runner.invoke(cli, [*base, "--metric", "1.1", "--status", "discard", "--description",
                                "α = 0.3 turn group norm", "--format", "json"])
    assert again.exit_code == 0, again.output + again.stderr
    prior = json.loads(again.output)["similar_prior"]
    assert prior and prior[0]["hypothesis"] == "turn-group normalization with α=0.3"
