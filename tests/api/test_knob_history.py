"""Knob history over HTTP: ``GET /api/v1/projects/{p}/knobs/{knob}``, a record's
``same_knob`` and ``/similar``'s, from a loop whose commits change knobs."""

from __future__ import annotations

import pytest

from tests.api.conftest import API, assert_problem, new_project, record


def _patch(name: str, old: str, new: str) -> str:
    return f"diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-{name} = {old}\n+{name} = {new}\n"


def _loop(client) -> list[dict]:  # type: ignore[no-untyped-def]
    new_project(client, "p", metric_name="val_bpb", lower_is_better=True)
    steps = [
        ("baseline", 1.00, "baseline", None),
        ("keep", 0.99, "increase MATRIX_LR from 0.04 to 0.06", _patch("MATRIX_LR", "0.04", "0.06")),
        ("discard", 1.01, "matrix lr higher still", _patch("MATRIX_LR", "0.06", "0.08")),
        ("crash", None, "double the batch size", _patch("TOTAL_BATCH_SIZE", "2**19", "2**20")),
        ("discard", 0.995, "retry MATRIX_LR at 0.08", _patch("MATRIX_LR", "0.06", "0.08")),
    ]
    answers = []
    for status, metric, hypothesis, patch in steps:
        extra = {"_git": {"patch": patch}} if patch else {}
        response = record(client, "p", status=status, core_metric=metric, hypothesis=hypothesis, extra=extra)
        assert response.status_code == 201, response.text
        answers.append(response.json())
    return answers


def test_a_knobs_history_lists_each_value_with_its_trials(client) -> None:  # type: ignore[no-untyped-def]
    _loop(client)
    response = client.get(f"{API}/projects/p/knobs/MATRIX_LR")
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["knob"], body["knobs"], body["tried"]) == ("matrix lr", ["matrix lr"], 3)
    assert [(v["value"], [(t["exp_id"], t["status"], t["source"]) for t in v["trials"]]) for v in body["values"]] == [
        ("0.06", [("001", "keep", "patch")]),
        ("0.08", [("002", "discard", "patch"), ("004", "discard", "patch")]),
    ]
    assert body["values"][0]["trials"][0]["core_metric"] == 0.99
    # any spelling; a name that is no knob finds the knobs holding its words
    assert client.get(f"{API}/projects/p/knobs/matrix%20lr").json()["tried"] == 3
    # "double the batch size" beside the patch's TOTAL_BATCH_SIZE: the patch names the knob
    batch = client.get(f"{API}/projects/p/knobs/batch_size").json()
    assert (batch["knobs"], batch["values"][0]["value"], batch["values"][0]["trials"][0]["status"]) == (
        ["total bs"],
        "2**20",
        "crash",
    )
    total = client.get(f"{API}/projects/p/knobs/total").json()
    assert (total["knobs"], total["values"][0]["value"]) == (["total bs"], "2**20")
    never = client.get(f"{API}/projects/p/knobs/dropout").json()
    assert (never["tried"], never["values"]) == (0, [])


def test_a_record_says_which_earlier_trials_changed_the_same_knob(client) -> None:  # type: ignore[no-untyped-def]
    answers = _loop(client)
    assert answers[1]["same_knob"] == []
    last = answers[4]["same_knob"]
    assert [(t["exp_id"], t["value"], t["same_value"]) for t in last] == [
        ("001", "0.06", False),
        ("002", "0.08", True),
    ]


def test_similar_lists_the_same_knob_tries_of_the_text(client) -> None:  # type: ignore[no-untyped-def]
    _loop(client)
    body = client.get(f"{API}/projects/p/similar", params={"q": "MATRIX_LR 0.06 -> 0.07"}).json()
    assert [(t["exp_id"], t["same_value"]) for t in body["same_knob"]] == [
        ("001", False),
        ("002", False),
        ("004", False),
    ]
    assert client.post(f"{API}/projects/p/similar", json={"q": "bigger model"}).json()["same_knob"] == []


def test_bad_knob_names_and_unknown_projects_are_problems(client) -> None:  # type: ignore[no-untyped-def]
    new_project(client, "p")
    assert_problem(client.get(f"{API}/projects/p/knobs/___"), 422, "knob")
    assert_problem(client.get(f"{API}/projects/p/knobs/{'x' * 121}"), 422, "knob")
    assert_problem(client.get(f"{API}/projects/nope/knobs/lr"), 404)


def test_the_cli_answers_what_http_answers(client, db_url: str) -> None:  # type: ignore[no-untyped-def]
    import json

    from click.testing import CliRunner

    from api.cli import cli

    _loop(client)
    runner = CliRunner()
    out = runner.invoke(cli, ["--db", db_url, "knobs", "-p", "p", "--knob", "MATRIX_LR", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == client.get(f"{API}/projects/p/knob-history", params={"knob": "MATRIX_LR"}).json()
    every = runner.invoke(cli, ["--db", db_url, "knobs", "-p", "p", "--format", "json"])
    assert json.loads(every.output) == client.get(f"{API}/projects/p/knob-history").json()
    text = runner.invoke(cli, ["--db", db_url, "knobs", "-p", "p", "-k", "matrix lr"])
    assert text.exit_code == 0 and text.output.splitlines() == [
        "MATRIX_LR (matrix lr): 3 tries, 2 values",
        "  0.06: exp_001 keep 0.99 Δ=-0.01",
        "  0.08: exp_002 discard 1.01 Δ=+0.02, exp_004 discard 0.995 Δ=+0.005",
    ]
    similar = runner.invoke(cli, ["--db", db_url, "similar", "-p", "p", "MATRIX_LR 0.06 -> 0.08", "--format", "json"])
    assert (
        json.loads(similar.output)["same_knob"]
        == (client.get(f"{API}/projects/p/similar", params={"q": "MATRIX_LR 0.06 -> 0.08"}).json()["same_knob"])
    )
    bad = runner.invoke(cli, ["--db", db_url, "knobs", "-p", "p", "-k", "__"])
    assert bad.exit_code != 0 and "knob" in bad.output and len(bad.output.strip().splitlines()) == 1


def test_knob_history_lists_every_knob_or_one(client) -> None:  # type: ignore[no-untyped-def]
    answers = _loop(client)
    body = client.get(f"{API}/projects/p/knob-history").json()
    assert (body["project"], body["knob"], body["window"]) == ("p", None, None)
    assert [(k["knob"], k["name"], k["tried"]) for k in body["knobs"]] == [
        ("matrix lr", "MATRIX_LR", 3),
        ("total bs", "TOTAL_BATCH_SIZE", 1),
    ]
    values = body["knobs"][0]["values"]
    assert [(v["value"], [(t["exp_id"], t["status"]) for t in v["trials"]]) for v in values] == [
        ("0.06", [("001", "keep")]),
        ("0.08", [("002", "discard"), ("004", "discard")]),
    ]
    deltas = [t["delta_vs_best"] for v in values for t in v["trials"]]
    assert deltas == pytest.approx([-0.01, 0.02, 0.005])
    one = client.get(f"{API}/projects/p/knob-history", params={"knob": "matrix_lr"}).json()
    assert (one["knob"], one["knobs"]) == ("matrix lr", body["knobs"][:1])
    assert_problem(client.get(f"{API}/projects/p/knob-history", params={"knob": "___"}), 422, "knob")
    assert_problem(client.get(f"{API}/projects/p/knob-history", params={"knob": "x" * 121}), 422, "knob")
    # the record answers said it: 002 a sweep, 004 a repeat of 002 (the same patch)
    assert [one["says"] for one in answers[2]["tried_before"]] == ["sweep of MATRIX_LR: 0.06 keep"]
    assert [one["says"] for one in answers[4]["tried_before"]][0] == "repeat of exp_002: same patch, discard"
    similar = client.get(f"{API}/projects/p/similar", params={"q": "MATRIX_LR 0.06 -> 0.07"}).json()
    assert [one["says"] for one in similar["tried_before"]] == ["sweep of MATRIX_LR: 0.06 keep, 0.08 discard/discard"]
