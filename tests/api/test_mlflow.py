"""MLflow's tracking API over HTTP (``api.routes.mlflow``, rules in ``lineage.mlflow_compat``):
the requests MLflow clients send, as JSON, and the answers and errors they parse. The real
client against a real server is ``test_mlflow_client.py``."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from lineage.service import Ledger
from tests.api.conftest import bearer

M = "/api/2.0/mlflow"


def _post(client: TestClient, path: str, body: dict[str, Any], status: int = 200, **kw: Any) -> dict[str, Any]:
    answer = client.post(M + path, json=body, **kw)
    assert answer.status_code == status, answer.text
    return answer.json()


def _run(client: TestClient, experiment_id: str = "0", **fields: Any) -> str:
    body = {"experiment_id": experiment_id, "start_time": 1_700_000_000_000, **fields}
    return _post(client, "/runs/create", body)["run"]["info"]["run_id"]


def test_an_experiment_is_a_project_named_by_its_slug(client: TestClient, ledger: Ledger) -> None:
    made = _post(
        client, "/experiments/create", {"name": "My Sweep: v2", "tags": [{"key": "lineage.direction", "value": "max"}]}
    )
    assert made == {"experiment_id": "my-sweep-v2"}
    project = ledger.projects.project("my-sweep-v2")
    assert (project.title, project.lower_is_better) == ("My Sweep: v2", False)
    found = client.get(M + "/experiments/get-by-name", params={"experiment_name": "My Sweep: v2"}).json()
    assert found["experiment"]["experiment_id"] == "my-sweep-v2"
    assert found["experiment"]["name"] == "My Sweep: v2"
    assert client.get(M + "/experiments/get", params={"experiment_id": "my-sweep-v2"}).status_code == 200
    again = _post(client, "/experiments/create", {"name": "My Sweep: v2"}, status=400)
    assert again["error_code"] == "RESOURCE_ALREADY_EXISTS"
    gone = client.get(M + "/experiments/get-by-name", params={"experiment_name": "nothing"})
    assert gone.status_code == 404 and gone.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"


def test_a_run_is_a_running_trial_whose_params_tags_and_metrics_are_stored(client: TestClient, ledger: Ledger) -> None:
    run_id = _run(client, run_name="warmup", tags=[{"key": "team", "value": "rl"}])
    assert run_id == "default__000"
    trial = ledger.trials.trial("default", "000")
    assert (trial.status.value, trial.hypothesis, trial.extra["tags"]) == ("running", "warmup", {"team": "rl"})
    _post(
        client,
        "/runs/log-batch",
        {
            "run_id": run_id,
            "params": [{"key": "lr", "value": "0.01"}],
            "tags": [{"key": "mlflow.note.content", "value": "warm up the lr"}],
            "metrics": [
                {"key": "loss", "value": 2.0 - s, "timestamp": 1_700_000_000_000 + s, "step": s} for s in range(3)
            ],
        },
    )
    _post(client, "/runs/log-parameter", {"run_id": run_id, "key": "bs", "value": "32"})
    _post(client, "/runs/set-tag", {"run_id": run_id, "key": "team", "value": "rl2"})
    trial = ledger.trials.trial("default", "000")
    assert trial.extra["config"] == {"lr": "0.01", "bs": "32"}
    assert trial.extra["tags"]["team"] == "rl2"
    assert trial.hypothesis == "warm up the lr"
    history = client.get(M + "/metrics/get-history", params={"run_id": run_id, "metric_key": "loss"}).json()
    assert [(m["step"], m["value"], m["timestamp"]) for m in history["metrics"]] == [
        (0, 2.0, 1_700_000_000_000),
        (1, 1.0, 1_700_000_000_001),
        (2, 0.0, 1_700_000_000_002),
    ]
    run = client.get(M + "/runs/get", params={"run_id": run_id}).json()["run"]
    assert run["info"]["status"] == "RUNNING"
    assert run["data"]["metrics"] == [{"key": "loss", "value": 0.0, "timestamp": 1_700_000_000_002, "step": 2}]


def test_finished_is_the_ledgers_verdict_failed_is_crash_killed_is_harness_abort(
    client: TestClient, ledger: Ledger
) -> None:
    first = _run(client, run_name="a")
    _post(client, "/runs/log-metric", {"run_id": first, "key": "core_metric", "value": 0.5, "step": 1})
    _post(client, "/runs/update", {"run_id": first, "status": "FINISHED", "end_time": 1_700_000_005_000})
    second = _run(client, run_name="b", start_time=1_700_000_000_001)
    _post(client, "/runs/log-metric", {"run_id": second, "key": "core_metric", "value": 0.7, "step": 1})
    _post(client, "/runs/update", {"run_id": second, "status": "FINISHED"})
    crashed, killed = _run(client, start_time=1), _run(client, start_time=2)
    _post(client, "/runs/update", {"run_id": crashed, "status": "FAILED"})
    _post(client, "/runs/update", {"run_id": killed, "status": "KILLED"})
    trials = {t.exp_id: t for t in ledger.trials.list_trials("default")}
    assert [(t.status.value, t.core_metric) for t in trials.values()] == [
        ("keep", 0.5),
        ("discard", 0.7),
        ("crash", None),
        ("harness_abort", None),
    ]
    assert trials["000"].total_s == 5.0
    statuses = [r["info"]["status"] for r in _post(client, "/runs/search", {"experiment_ids": ["0"]})["runs"]]
    assert statuses == ["KILLED", "FAILED", "FINISHED", "FINISHED"]  # newest first, as MLflow


def test_metrics_are_the_running_trials_heartbeat(client: TestClient, ledger: Ledger) -> None:
    run_id = _run(client, user_id="ada")
    assert [lease.heartbeat_at for lease in ledger.leases.running("default")] == [None]
    _post(client, "/runs/log-metric", {"run_id": run_id, "key": "loss", "value": 1.0, "step": 0})
    (lease,) = ledger.leases.running("default")
    assert lease.owner == "ada" and lease.heartbeat_at is not None
    _post(client, "/runs/log-metric", {"run_id": run_id, "key": "loss", "value": 0.5, "step": 1})
    (again,) = ledger.leases.running("default")
    assert again.heartbeat_at == lease.heartbeat_at  # a step's batch is one write: beats come once a minute


def test_a_parent_run_id_is_the_parent_exp(client: TestClient, ledger: Ledger) -> None:
    parent = _run(client, run_name="sweep")
    child = _run(client, run_name="point", tags=[{"key": "mlflow.parentRunId", "value": parent}])
    assert ledger.trials.trial("default", child.split("__")[1]).parent_exp == "000"


def test_retries_store_once(client: TestClient, ledger: Ledger) -> None:
    assert _run(client, run_name="x") == _run(client, run_name="x")
    batch = {"run_id": "default__000", "metrics": [{"key": "m", "value": 1.0, "timestamp": 5, "step": 0}]}
    _post(client, "/runs/log-batch", batch)
    _post(client, "/runs/log-batch", batch)
    assert len(ledger.telemetry.telemetry_points("default", "000")) == 1
    assert len(ledger.trials.list_trials("default")) == 1


def test_bad_input_is_mlflows_error_and_stores_nothing(client: TestClient, ledger: Ledger) -> None:
    run_id = _run(client)
    _post(client, "/runs/log-parameter", {"run_id": run_id, "key": "lr", "value": "1"})
    changed = _post(client, "/runs/log-parameter", {"run_id": run_id, "key": "lr", "value": "2"}, status=400)
    assert changed["error_code"] == "INVALID_PARAMETER_VALUE" and "Changing param values" in changed["message"]
    at_limit = {"run_id": run_id, "metrics": [{"key": "m", "value": 1.0, "step": s} for s in range(1000)]}
    at_limit["params"] = [{"key": f"q{i}", "value": "v" * 6000} for i in range(50)]
    at_limit["tags"] = [{"key": "t" * 250, "value": "v"}] + [{"key": f"t{i}", "value": "v"} for i in range(49)]
    _post(client, "/runs/log-batch", at_limit)
    too_many = {"run_id": run_id, "metrics": [{"key": "m", "value": 1.0, "step": s} for s in range(1001)]}
    assert "limit is 1000" in _post(client, "/runs/log-batch", too_many, status=400)["message"]
    params = [{"key": f"p{i}", "value": "v"} for i in range(101)]
    assert (
        "limit is 100" in _post(client, "/runs/log-batch", {"run_id": run_id, "params": params}, status=400)["message"]
    )
    long_key = {"run_id": run_id, "params": [{"key": "k" * 251, "value": "v"}]}
    assert _post(client, "/runs/log-batch", long_key, status=400)["error_code"] == "INVALID_PARAMETER_VALUE"
    long_value = {"run_id": run_id, "key": "big", "value": "v" * 6001}
    assert "limit is 6000" in _post(client, "/runs/log-parameter", long_value, status=400)["message"]
    negative = {"run_id": run_id, "metrics": [{"key": "m", "value": 1.0, "step": -1}]}
    assert "metrics[0].step" in _post(client, "/runs/log-batch", negative, status=400)["message"]
    unknown = _post(client, "/runs/log-metric", {"run_id": "default__999", "key": "m", "value": 1}, status=404)
    assert unknown["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    assert (
        _post(client, "/runs/create", {"experiment_id": "nope"}, status=404)["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    )
    not_json = client.post(M + "/runs/create", content=b"{", headers={"content-type": "application/json"})
    assert not_json.status_code == 400 and not_json.json()["error_code"] == "INVALID_PARAMETER_VALUE"
    bad_filter = _post(client, "/runs/search", {"experiment_ids": ["0"], "filter": "metrics.m > 1"}, status=400)
    assert "not supported" in bad_filter["message"]
    trial = ledger.trials.trial("default", "000")
    assert trial.extra["config"] == {"lr": "1", **{f"q{i}": "v" * 6000 for i in range(50)}}
    assert len(ledger.telemetry.metric_history("default", "000", "m")) == 1000  # the batch at the limits only


def test_search_filters_on_tags_params_and_status(client: TestClient) -> None:
    a = _run(client, run_name="a", tags=[{"key": "group", "value": "x"}], start_time=1)
    _run(client, run_name="b", tags=[{"key": "group", "value": "y"}], start_time=2)
    _post(client, "/runs/log-parameter", {"run_id": a, "key": "lr", "value": "0.1"})

    def names(text: str) -> list[str]:
        found = _post(client, "/runs/search", {"experiment_ids": ["0"], "filter": text})["runs"]
        return [r["info"]["run_name"] for r in found]

    assert names("tags.group = 'x'") == ["a"]
    assert names("params.lr = '0.1' and attributes.status = 'RUNNING'") == ["a"]
    assert names("tags.group != 'x'") == ["b"]
    page = _post(client, "/runs/search", {"experiment_ids": ["0"], "max_results": 1})
    assert page["next_page_token"] == "1"
    assert len(_post(client, "/runs/search", {"experiment_ids": ["0"], "page_token": "1"})["runs"]) == 1


def test_the_ajax_prefix_and_server_info_answer(client: TestClient) -> None:
    assert client.post("/ajax-api/2.0/mlflow/runs/search", json={}).status_code == 200
    assert client.get("/api/3.0/mlflow/server-info").json()["workspaces_enabled"] is False


def test_tokens_and_roles_apply_as_on_the_json_api(client: TestClient, token_of) -> None:  # type: ignore[no-untyped-def]
    reader = token_of("reader")
    refused = client.post(M + "/runs/create", json={}, headers=bearer(reader))
    assert refused.status_code == 403 and refused.json()["error_code"] == "PERMISSION_DENIED"
    anonymous = client.post(M + "/runs/create", json={})
    assert anonymous.status_code == 401 and anonymous.json()["error_code"] == "UNAUTHENTICATED"
    writer = token_of("writer")
    assert client.post(M + "/runs/create", json={}, headers=bearer(writer)).status_code == 200
    assert client.post(M + "/runs/search", json={}, headers=bearer(reader)).status_code == 200


ODD = [None, 5, "x", [], {}, [1], {"a": 1}, True, -1, 1e300, "default__000", "a" * 300]


def test_no_body_makes_a_500(client: TestClient) -> None:
    _run(client)
    paths = ["/runs/create", "/runs/update", "/runs/search", "/runs/log-batch", "/runs/log-metric"]
    paths += ["/runs/log-parameter", "/runs/set-tag", "/experiments/create"]
    fields = ["experiment_id", "run_id", "name", "tags", "metrics", "params", "key", "value", "step", "timestamp"]
    fields += ["status", "end_time", "start_time", "run_name", "filter", "max_results", "page_token", "experiment_ids"]
    for path in paths:
        for name in fields:
            for value in ODD:
                body = {"run_id": "default__000", "experiment_id": "0", "key": "k", "value": 1.0, name: value}
                answer = client.post(M + path, json=body)
                assert answer.status_code < 500, (path, body, answer.text)
    for path in ["/runs/get", "/experiments/get", "/experiments/get-by-name", "/metrics/get-history"]:
        for value in ["", "x", "default__", "__000", "a" * 300, "default__000"]:
            query = {"run_id": value, "experiment_id": value, "experiment_name": value, "metric_key": value}
            assert client.get(M + path, params=query).status_code < 500, (path, value)


def test_nan_and_infinite_metrics_are_left_out_and_counted_as_the_client_does(
    client: TestClient, ledger: Ledger
) -> None:
    run_id = _run(client)
    metrics = [{"key": "loss", "value": 1.0, "step": 0}, {"key": "loss", "value": "NaN", "step": 1}]
    metrics += [{"key": "loss", "value": "Infinity", "step": 2}, {"key": "loss", "value": "-Infinity", "step": 3}]
    metrics += [{"key": "loss", "value": 1e200, "step": 4}, {"key": "loss", "value": "0.5", "step": 5}]
    batch = {"run_id": run_id, "metrics": metrics}
    _post(client, "/runs/log-batch", batch)
    _post(client, "/runs/log-batch", batch)  # a retry: stored and counted once
    _post(client, "/runs/log-metric", {"run_id": run_id, "key": "kl", "value": "NaN", "step": 6})
    assert ledger.telemetry.metric_history("default", "000", "loss") == [(0, 1.0, None), (5, 0.5, None)]
    assert ledger.trials.trial("default", "000").extra["nonfinite_dropped"] == 5
    word = _post(client, "/runs/log-metric", {"run_id": run_id, "key": "kl", "value": "high", "step": 7}, status=400)
    assert "metrics[0].value" in word["message"]
    bad_step = {"run_id": run_id, "metrics": [{"key": "x", "value": "NaN", "step": -1}]}
    assert "metrics[0].step" in _post(client, "/runs/log-batch", bad_step, status=400)["message"]
    assert ledger.trials.trial("default", "000").extra["nonfinite_dropped"] == 5


def test_experiments_are_searched_by_name_and_tags(client: TestClient) -> None:
    _post(client, "/experiments/create", {"name": "Acc Tiny", "tags": [{"key": "lineage.direction", "value": "max"}]})
    _post(client, "/experiments/create", {"name": "other"})

    def names(text: str) -> list[str]:
        return [e["name"] for e in _post(client, "/experiments/search", {"filter": text})["experiments"]]

    assert names("name = 'Acc Tiny'") == ["Acc Tiny"]
    assert names("name = 'acc-tiny'") == ["Acc Tiny"]  # the same slug: the experiment get-by-name finds
    assert names("name LIKE 'Acc%'") == ["Acc Tiny"] and names("name ILIKE 'acc%'") == ["Acc Tiny"]
    assert names("tags.`lineage.direction` = 'max'") == ["Acc Tiny"]
    assert sorted(names("")) == ["Acc Tiny", "other"]
    assert client.get(M + "/experiments/search", params={"filter": "name = 'other'"}).json()["experiments"]
    assert (
        "not supported" in _post(client, "/experiments/search", {"filter": "creation_time > 1"}, status=400)["message"]
    )


def test_a_path_not_served_is_mlflows_endpoint_not_found(client: TestClient) -> None:
    answer = client.post(M + "/runs/delete", json={"run_id": "default__000"})
    assert answer.status_code == 404 and answer.json()["error_code"] == "ENDPOINT_NOT_FOUND"
    assert "runs/log-batch" in answer.json()["message"]
    assert client.get("/ajax-api/3.0/mlflow/traces").json()["error_code"] == "ENDPOINT_NOT_FOUND"
