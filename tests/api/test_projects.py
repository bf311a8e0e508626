"""Projects over HTTP, on SQLite and PostgreSQL: create, list, get with ETag, update, delete."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import API, assert_problem, bearer, new_project, record


def test_create_list_get_update(client: TestClient) -> None:
    created = client.post(
        f"{API}/projects",
        json={
            "slug": "rl-loop",
            "title": "RL",
            "metric_name": "val_bpb",
            "lower_is_better": True,
            "best_policy": "fieldkit",
        },
    )
    assert created.status_code == 201
    assert created.headers["location"] == f"{API}/projects/rl-loop"
    body = created.json()
    assert body["slug"] == "rl-loop" and body["metric_name"] == "val_bpb" and body["best_policy"] == "fieldkit"
    assert body["trial_count"] == 0 and body["revision"] == 0
    assert [p["slug"] for p in client.get(f"{API}/projects").json()] == ["rl-loop"]

    got = client.get(f"{API}/projects/rl-loop")
    assert got.status_code == 200 and got.json()["title"] == "RL"
    tag = got.headers["etag"]
    assert client.get(f"{API}/projects/rl-loop", headers={"If-None-Match": tag}).status_code == 304

    changed = client.patch(
        f"{API}/projects/rl-loop",
        json={"title": "New", "lower_is_better": False, "metric_name": "em", "prompt_template": "{{ prompt }}"},
    )
    assert changed.status_code == 200
    assert changed.json()["title"] == "New" and changed.json()["lower_is_better"] is False
    assert changed.json()["revision"] > body["revision"]
    assert client.get(f"{API}/projects/rl-loop", headers={"If-None-Match": tag}).status_code == 200
    reset = client.patch(f"{API}/projects/rl-loop", json={"prompt_template": None})
    assert reset.json()["prompt_template"] is None and reset.json()["title"] == "New"


def test_project_errors_name_the_field(client: TestClient) -> None:
    new_project(client, "dup")
    assert_problem(client.post(f"{API}/projects", json={"slug": "dup"}), 409, "slug")
    assert_problem(client.post(f"{API}/projects", json={"slug": "Has Spaces"}), 422, "slug")
    assert_problem(client.post(f"{API}/projects", json={"slug": "x", "colour": "red"}), 422, "colour")
    assert_problem(client.post(f"{API}/projects", json={"slug": "x", "best_policy": "best"}), 422, "best_policy")
    assert_problem(client.post(f"{API}/projects", json={"slug": "x", "lower_is_better": "yes"}), 422, "lower_is_better")
    assert_problem(client.patch(f"{API}/projects/dup", json={"lower_is_better": 0}), 422, "lower_is_better")
    assert_problem(client.patch(f"{API}/projects/dup", json={"title": None}), 422, "title")
    assert_problem(client.patch(f"{API}/projects/dup", json={"slug": "other"}), 422, "slug")
    bad = assert_problem(
        client.patch(f"{API}/projects/dup", json={"prompt_template": "ok\n{% if %}"}), 422, "prompt_template"
    )
    assert bad["line"] == 2
    assert_problem(client.patch(f"{API}/projects/dup", json={"metric_name": "a|b"}), 422, "metric_name")
    assert_problem(client.get(f"{API}/projects/missing"), 404, "project")
    assert_problem(client.post(f"{API}/projects", json={"slug": "x", "title": "a\u0000b"}), 422, "title")
    assert_problem(client.post(f"{API}/projects", json={"slug": "x", "title": "t" * 301}), 422, "title")
    assert_problem(client.patch(f"{API}/projects/dup", json={"title": "t" * 301}), 422, "title")


def test_delete_needs_an_admin_token_and_takes_the_trials(client: TestClient, token_of) -> None:  # type: ignore[no-untyped-def]
    admin, writer = token_of("admin"), token_of("writer")
    new_project(client, "gone", headers=bearer(writer))
    assert record(client, "gone", headers=bearer(writer), status="baseline", core_metric=1.0).status_code == 201
    assert_problem(client.delete(f"{API}/projects/gone"), 401)
    assert_problem(client.delete(f"{API}/projects/gone", headers=bearer(writer)), 403)
    assert client.delete(f"{API}/projects/gone", headers=bearer(admin)).status_code == 204
    assert_problem(client.get(f"{API}/projects/gone"), 404)
    new_project(client, "gone", headers=bearer(writer))
    assert client.get(f"{API}/projects/gone/trials").json()["items"] == []
