"""The client's payloads against the OpenAPI schema the ledger serves: the bodies a run
spools (project, plan, telemetry batches, alerts, finish) are valid requests of the endpoints they
go to, so the two sides cannot drift apart. And the order rules of the spool: points
logged before ``plan_trial`` go after it; points with no trial at all are refused with a
clear error and kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import free_port, make_client
from tests.trainer_hooks.client.conftest import expected_points, fast_client, log_steps, stored_points
from trainer_hooks.client import Spool
from trainer_hooks.client.claims import claim_request

jsonschema = pytest.importorskip("jsonschema")


def request_schema(openapi: dict[str, Any], path: str, method: str) -> Any:
    schema = openapi["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    # refs are "#/components/...": resolve them against the whole document
    return jsonschema.Draft202012Validator({**schema, "components": openapi["components"]})


def test_spooled_payloads_are_valid_requests_of_the_served_schema(tmp_path: Path) -> None:
    with make_client(f"sqlite:///{tmp_path / 'schema.db'}") as http:
        openapi = http.get("/openapi.json").json()
    client = fast_client(f"http://127.0.0.1:{free_port()}", tmp_path / "spool", run_id="contract")  # nothing listens
    client.ensure_project(lower_is_better=False, title="t")
    client.plan_trial(
        hypothesis="h",
        expected_delta="+1",
        parent_exp="001",
        specialist="s",
        domain="d",
        extra={"config": {"lr": 0.1}},
        lease_s=60,
        rerun_of="000",
    )
    log_steps(client, range(20))
    client.log(20, {"clip_scale_mean": 1.0, 'quote"d ünï': -1e-300})
    client.alert("loss diverging\nat step 20", "NaN in the loss", level="warn")
    client.finish_trial(core_metric=0.5, train_s=1.0, total_s=2.0, notes="n", keep_margin=0.1)
    client.close(timeout=0)
    validators = {
        "project": request_schema(openapi, "/api/v1/projects", "post"),
        "plan": request_schema(openapi, "/api/v1/projects/{project}/trials", "post"),
        "columns": request_schema(openapi, "/api/v1/projects/{project}/trials/{exp_id}/telemetry", "post"),
        "finish": request_schema(openapi, "/api/v1/projects/{project}/trials/{exp_id}", "patch"),
        "alert": request_schema(openapi, "/api/v1/projects/{project}/trials/{exp_id}/alerts", "post"),
    }
    claims = {
        "plan": request_schema(openapi, "/api/v1/projects/{project}/claims", "post"),
        "finish": request_schema(openapi, "/api/v1/projects/{project}/claims/{exp_id}/finish", "post"),
    }
    seen = set()
    for op in Spool(tmp_path / "spool" / "contract.spool").ops():
        if op.kind == "columns":
            body: Any = {"batch_id": f"contract-{op.seq}", "columns": json.loads(op.body)}
        elif op.kind == "plan":  # a claim, or the plain running record it falls back to
            body = json.loads(op.body)
            assert body["claim"] == {"owner": "contract", "lease_s": 60.0}
            assert not [e.message for e in claims["plan"].iter_errors(claim_request(body))]
            body.pop("claim")
        elif op.kind == "finish":
            body = {**json.loads(op.body)["fields"], "status": "keep"}  # "auto" is decided before sending
            assert not [e.message for e in claims["finish"].iter_errors({**body, "owner": "contract"})]
        elif op.kind == "project":
            body = json.loads(op.body)
            assert body.pop("declared") == [{"name": None, "lower_is_better": False, "by": "lower_is_better=False"}]
            # what the run declared is the client's to check against an existing project, not sent
        elif op.kind == "summarize":
            continue  # no body
        else:
            body = json.loads(op.body)
        errors = [e.message for e in validators[op.kind].iter_errors(body)]
        assert not errors, (op.kind, errors)
        seen.add(op.kind)
    assert seen == set(validators)
    blocks = [json.loads(op.body) for op in Spool(tmp_path / "spool" / "contract.spool").ops() if op.kind == "columns"]
    joined = {"batch_id": "all", "columns": blocks * 2}  # what the sender joins into one request when behind
    assert blocks and not [e.message for e in validators["columns"].iter_errors(joined)]


def test_points_logged_before_the_plan_are_sent_after_it(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    client = fast_client(server.url, tmp_path / "spool")
    log_steps(client, range(10))
    client.ensure_project()
    client.plan_trial(hypothesis="late plan")
    log_steps(client, range(10, 20))
    client.finish_trial(core_metric=1.0)
    assert client.close().delivered
    assert stored_points(db) == expected_points(range(20))


def test_points_without_a_trial_are_refused_clearly_and_kept(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    client = fast_client(server.url, tmp_path / "spool")
    log_steps(client, range(5))
    report = client.close()
    assert not report.delivered and report.pending_points == 20
    assert report.error is not None and "call plan_trial" in report.error and "lineage spool flush" in report.error


def test_a_full_memory_buffer_spills_to_the_spool_not_to_the_floor(tmp_path: Path) -> None:
    client = fast_client(
        f"http://127.0.0.1:{free_port()}",
        tmp_path / "spool",
        spool_interval=60.0,
        max_buffer_points=100,
        max_batch_points=10_000,
    )  # the spool thread sleeps
    client.plan_trial(hypothesis="spill")
    log_steps(client, range(100))  # 400 points
    _, spooled = client.spool.pending()
    assert 400 - 100 <= spooled <= 400  # at most one buffer's worth only in memory
    report = client.close(timeout=0)
    assert report.pending_points == 400 and report.points_logged == 400


def test_a_plan_without_a_parent_forks_from_the_current_best(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The client leaves ``parent_exp`` out; the ledger's rule makes the best the parent."""
    db = str(tmp_path / "ledger.db")
    server = serve(db)
    first = fast_client(server.url, tmp_path / "spool")
    first.ensure_project()
    first.plan_trial(hypothesis="baseline run")
    first.finish_trial(status="baseline", core_metric=1.0)
    assert first.close().delivered
    second = fast_client(server.url, tmp_path / "spool")
    second.plan_trial(hypothesis="second run")
    second.finish_trial(core_metric=0.9)
    assert second.close().delivered
    rows = dict(_parents(db))
    assert rows == {"000": "", "001": "000"}


def _parents(db: str) -> list[tuple[str, str]]:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT exp_id, parent_exp FROM trials ORDER BY seq").fetchall()
