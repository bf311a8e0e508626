"""``POST .../trials/{exp_id}/resume``: one rule (``ledger.leases.resume``). A running trial
takes the new owner, a ``harness_abort`` one runs again (with a note), a finished one is
a 409 naming the trial and its status; the answer says where the run takes up."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import API, assert_problem, new_project, record

TRIALS = f"{API}/projects/p/trials"


def test_a_resume_takes_up_at_the_highest_step_with_each_series_last_value(client: TestClient) -> None:
    new_project(client)
    exp_id = record(client, "p", status="running").json()["trial"]["exp_id"]
    points = [{"step": s, "name": "loss", "value": 10.0 - s} for s in range(4)]
    points += [{"step": 5, "name": "lr", "value": 0.1}, {"step": 6, "turn": 0, "name": "ig", "value": 0.5}]
    points += [{"step": 3, "name": "loss", "value": 99.0}]  # a second point at the top step: the later one
    sent = client.post(f"{TRIALS}/{exp_id}/telemetry", json={"batch_id": "b1", "points": points})
    assert sent.status_code == 201, sent.text
    resumed = client.post(f"{TRIALS}/{exp_id}/resume", json={"owner": "run-7"})
    assert resumed.status_code == 200, resumed.text
    body = resumed.json()
    assert body["last_step"] == 6 and body["last_values"] == {"loss": 99.0, "lr": 0.1}
    assert body["trial"]["status"] == "running" and not body["trial"]["notes"]
    assert client.get(f"{API}/projects/p/running").json()["items"][0]["owner"] == "run-7"


def test_a_harness_abort_runs_again_and_a_trial_without_points_takes_up_at_none(client: TestClient) -> None:
    new_project(client)
    exp_id = record(client, "p", status="running").json()["trial"]["exp_id"]
    assert client.patch(f"{TRIALS}/{exp_id}", json={"status": "harness_abort", "notes": "SIGTERM"}).status_code == 200
    body = client.post(f"{TRIALS}/{exp_id}/resume", json={"owner": "run-8"}).json()
    assert body["trial"]["status"] == "running" and body["last_step"] is None and body["last_values"] == {}
    assert body["trial"]["notes"].startswith("SIGTERM\nresumed by run-8 at ")


def test_a_resume_of_a_finished_trial_is_409_naming_the_trial_and_changes_nothing(client: TestClient) -> None:
    new_project(client)
    exp_id = record(client, "p", status="running").json()["trial"]["exp_id"]
    assert client.patch(f"{TRIALS}/{exp_id}", json={"status": "keep", "core_metric": 1.0}).status_code == 200
    before = client.get(f"{TRIALS}/{exp_id}").json()
    body = assert_problem(client.post(f"{TRIALS}/{exp_id}/resume", json={"owner": "late"}), 409, "status")
    assert f"trial '{exp_id}' is finished (keep)" in body["detail"]
    assert client.get(f"{TRIALS}/{exp_id}").json() == before
    assert_problem(client.post(f"{TRIALS}/999/resume"), 404, "exp_id")
    assert_problem(client.post(f"{TRIALS}/{exp_id}/resume", json={"owner": ""}), 422, "owner")
