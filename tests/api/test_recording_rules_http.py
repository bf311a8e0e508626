"""The recording rules over HTTP (the rule itself: ``lineage.service.recording.prepare_record``):
a parent left out is the branch tip and the answer says so, ``status: "auto"`` is the ledger's verdict, ``""``/``null`` is a root,
a crash's 0 is no result, the project's metric under its own name passes the request
model and is read (or refused naming it), and any other unknown key is a 422 naming it."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import API, assert_problem, new_project, record


def test_parent_default_root_and_no_result_over_http(client: TestClient) -> None:
    new_project(client, "nano", metric_name="val_bpb", lower_is_better=True)
    base = record(client, "nano", status="baseline", core_metric=0.998)
    assert base.status_code == 201 and base.json()["parent_defaulted"] is False and base.json()["warnings"] == []
    kept = record(client, "nano", status="keep", core_metric=0.99).json()
    assert kept["parent_defaulted"] is True and kept["trial"]["parent_exp"] == "000"
    assert kept["warnings"] == []  # the chosen parent is a field of the answer, not a warning
    root = record(client, "nano", status="discard", core_metric=1.2, parent_exp=None).json()
    assert root["trial"]["parent_exp"] == "" and root["parent_defaulted"] is False
    crash = record(client, "nano", status="crash", core_metric=0).json()
    assert crash["trial"]["core_metric"] is None and crash["trial"]["delta_vs_best"] is None
    assert crash["trial"]["extra"] == {"_reported_metric": 0} and crash["is_new_best"] is False
    lineage = client.get(f"{API}/projects/nano/trials/001/lineage").json()
    assert [t["exp_id"] for t in lineage["chain"]] == ["000", "001"]


def test_the_metric_under_its_own_name_over_http(client: TestClient) -> None:
    new_project(client, "s", metric_name="score", lower_is_better=False)
    read = record(client, "s", status="baseline", score=0.7)
    assert read.status_code == 201, read.text
    assert read.json()["trial"]["core_metric"] == 0.7 and "score" in read.json()["warnings"][0]
    assert_problem(record(client, "s", status="keep", score=0.9, core_metric=0.8), 422, "score")
    assert_problem(record(client, "s", status="keep", scroe=0.9), 422, "scroe")
    assert_problem(record(client, "s", status="keep", core_metric="0.9"), 422, "core_metric")
    keep = record(client, "s", status="keep").json()
    assert any("without a metric" in w for w in keep["warnings"])
    assert client.get(f"{API}/projects/s").json()["trial_count"] == 2


def test_the_ledgers_verdict_over_http(client: TestClient) -> None:
    new_project(client, "v", metric_name="loss", lower_is_better=True)
    assert record(client, "v", status="baseline", core_metric=1.0).status_code == 201
    kept = record(client, "v", status="auto", core_metric=0.9).json()
    assert kept["trial"]["status"] == "keep" and kept["is_new_best"] is True
    tie = record(client, "v", status="auto", core_metric=0.9).json()
    assert tie["trial"]["status"] == "discard"
    short = record(client, "v", status="auto", core_metric=0.85, keep_margin=0.1).json()
    assert short["trial"]["status"] == "discard"
    planned = record(client, "v", status="running", hypothesis="a run").json()["trial"]["exp_id"]
    done = client.patch(f"{API}/projects/v/trials/{planned}", json={"status": "auto", "core_metric": 0.5})
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "keep" and done.json()["delta_vs_best"] == -0.4
    assert_problem(record(client, "v", status="auto", core_metric=0.5, keep_margin=-1), 422, "keep_margin")
    assert_problem(record(client, "v", status="keep", core_metric=0.5, keep_margin=0.1), 422, "keep_margin")
    assert_problem(record(client, "v", status="automatic", core_metric=0.5), 422, "status")
