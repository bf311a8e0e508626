"""Telemetry over HTTP, on SQLite and PostgreSQL: batches (gzip, idempotent replays),
series (raw and min/max-bucketed), and the clip-scale summary rule."""

from __future__ import annotations

import gzip
import json
import math
import statistics

import pytest
from fastapi.testclient import TestClient

from lineage import telemetry
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, new_project, record

T = f"{API}/projects/p/trials/000/telemetry"


@pytest.fixture
def trial(client: TestClient) -> TestClient:
    new_project(client)
    assert record(client, "p", exp_id="000", status="baseline", core_metric=1.0).status_code == 201
    return client


def _points(n: int, name: str = "loss", turn: int | None = None, start: int = 0) -> list[dict]:
    return [{"step": start + i, "turn": turn, "name": name, "value": math.sin(i / 10)} for i in range(n)]


def test_batches_are_stored_and_replays_insert_nothing(trial: TestClient, ledger: Ledger) -> None:
    first = trial.post(T, json={"batch_id": "b-1", "points": _points(100)})
    assert first.status_code == 201 and first.json() == {"accepted": 100, "replayed": False, "batch_id": "b-1"}
    replay = trial.post(T, json={"batch_id": "b-1", "points": _points(100)})
    assert replay.status_code == 200 and replay.json() == {"accepted": 100, "replayed": True, "batch_id": "b-1"}
    by_header = trial.post(T, json={"points": _points(10, "kl")}, headers={"Idempotency-Key": "h-1"})
    assert by_header.status_code == 201
    assert trial.post(T, json={"points": _points(10, "kl")}, headers={"Idempotency-Key": "h-1"}).status_code == 200
    clash = assert_problem(trial.post(T, json={"batch_id": "b-1", "points": _points(99)}), 409, "batch_id")
    assert clash["existing"]["points"] == 100 and clash["proposed"]["points"] == 99
    assert trial.post(T, json={"points": _points(5, "x")}).status_code == 201  # no key: stored each time
    assert trial.post(T, json={"points": _points(5, "x")}).status_code == 201
    got = trial.get(T).json()
    assert got["points"] == 100 + 10 + 10
    assert {s["name"]: s["count"] for s in got["series"]} == {"loss": 100, "kl": 10, "x": 10}


def test_gzip_bodies_are_accepted(trial: TestClient) -> None:
    body = gzip.compress(json.dumps({"points": _points(2000, "g")}).encode())
    response = trial.post(T, content=body, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    assert response.status_code == 201 and response.json()["accepted"] == 2000
    assert_problem(
        trial.post(T, content=b"not gzip", headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}),
        400,
    )
    assert_problem(
        trial.post(T, content=b"{}", headers={"Content-Encoding": "br", "Content-Type": "application/json"}), 415
    )


def test_a_bad_point_is_named_and_nothing_of_the_batch_is_stored(trial: TestClient) -> None:
    points = _points(10)
    points[7]["value"] = "high"
    assert_problem(trial.post(T, json={"points": points}), 422, "points[7].value")
    points = _points(10)
    points[3]["step"] = -1
    assert_problem(trial.post(T, json={"points": points}), 422, "points[3].step")
    points = _points(10)
    points[2]["colour"] = "red"
    assert_problem(trial.post(T, json={"points": points}), 422, "points[2].colour")
    nan = b'{"points": [{"step": 1, "name": "a", "value": 1}, {"step": 2, "name": "a", "value": NaN}]}'
    assert_problem(trial.post(T, content=nan, headers={"Content-Type": "application/json"}), 422, "points[1].value")
    assert trial.get(T).json()["points"] == 0
    assert_problem(trial.post(f"{API}/projects/p/trials/404/telemetry", json={"points": []}), 404, "exp_id")


def test_series_are_whole_below_max_points_and_min_max_bucketed_above(trial: TestClient) -> None:
    values = [((i * 37) % 101) / 10 for i in range(1000)]
    points = [{"step": i, "name": "adv", "value": v} for i, v in enumerate(values)]
    points += [{"step": i, "turn": t, "name": "ig", "value": float(t)} for i in range(50) for t in range(3)]
    assert trial.post(T, json={"points": points}).status_code == 201
    whole = trial.get(T, params={"name": "adv", "max_points": 1000}).json()["series"]
    assert len(whole) == 1 and whole[0]["method"] == "raw" and whole[0]["value"] == values
    bucketed = trial.get(T, params={"name": "adv", "max_points": 100}).json()["series"][0]
    assert bucketed["method"] == "minmax" and bucketed["downsampled"] and bucketed["count"] == 1000
    assert len(bucketed["step"]) == 100
    for lo, hi, vmin, vmax, n in zip(
        bucketed["step"], bucketed["step_last"], bucketed["min"], bucketed["max"], bucketed["n"]
    ):
        chunk = values[lo : hi + 1]
        assert n == len(chunk) == 10 and vmin == min(chunk) and vmax == max(chunk)
    assert max(bucketed["max"]) == max(values) and min(bucketed["min"]) == min(values)
    per_turn = trial.get(T, params={"name": "ig"}).json()["series"]
    assert [(s["turn"], s["count"], set(s["value"])) for s in per_turn] == [(t, 50, {float(t)}) for t in range(3)]
    ranged = trial.get(T, params={"name": "adv", "step_min": 10, "step_max": 19}).json()["series"][0]
    assert ranged["step"] == list(range(10, 20))
    tag = trial.get(T).headers["etag"]
    assert trial.get(T, headers={"If-None-Match": tag}).status_code == 304


def test_summary_derives_the_clip_scale_fields_by_the_documented_rule(trial: TestClient) -> None:
    means, stds = [1.0, 1.1, 0.9, 1.05], [0.1, 0.2, 0.05, 0.1]
    mins, maxs, lows, highs = [0.75, 0.7, 0.8, 0.72], [1.2, 1.3, 1.25, 1.28], [0.0, 0.1, 0.2, 0.1], [0.3, 0.1, 0.0, 0.2]
    points = []
    for step in range(4):
        for name, series in (
            ("clip_scale_mean", means),
            ("clip_scale_std", stds),
            ("clip_scale_min", mins),
            ("clip_scale_max", maxs),
            ("clip_scale_frac_low", lows),
            ("clip_scale_frac_high", highs),
        ):
            points.append({"step": step, "name": name, "value": series[step]})
    points.append({"step": 0, "turn": 1, "name": "clip_scale_mean", "value": 99.0})  # per turn: not summarized
    assert trial.post(T, json={"points": points}).status_code == 201
    done = trial.post(f"{T}/summarize")
    assert done.status_code == 200, done.text
    derived, stored = done.json()["derived"], done.json()["trial"]
    pooled = math.sqrt(
        statistics.fmean(s * s for s in stds) + statistics.fmean(m * m for m in means) - statistics.fmean(means) ** 2
    )
    assert derived == pytest.approx(
        {
            "ig_clip_scale_mean": statistics.fmean(means),
            "ig_clip_scale_std": pooled,
            "ig_clip_scale_min": 0.7,
            "ig_clip_scale_max": 1.3,
            "ig_clip_scale_frac_low": 0.1,
            "ig_clip_scale_frac_high": 0.15,
        }
    )
    for name, value in derived.items():
        assert stored[name] == pytest.approx(value)
    assert trial.get(f"{API}/projects/p/trials/000").json()["ig_clip_scale_max"] == 1.3


def test_summary_without_clip_scale_telemetry_is_refused(trial: TestClient) -> None:
    assert trial.post(T, json={"points": _points(3)}).status_code == 201
    assert_problem(trial.post(f"{T}/summarize"), 422, "telemetry")


def test_partial_summary_leaves_other_fields_alone() -> None:
    stats = {"clip_scale_max": (2, 1.1, 1.0, 1.4, 1.3)}
    assert telemetry.derive_summary(stats) == {"ig_clip_scale_max": 1.4}


def test_the_pages_read_points_through_lineage_telemetry(trial: TestClient, ledger: Ledger) -> None:
    assert trial.post(T, json={"points": _points(3, "kl") + _points(2, "ig", turn=0)}).status_code == 201
    points = ledger.telemetry.telemetry_points("p", "000")
    assert sorted((p["name"], p["turn"], p["step"]) for p in points) == sorted(
        [("kl", None, i) for i in range(3)] + [("ig", 0, i) for i in range(2)]
    )
    page = trial.get("/projects/p/trials/000")
    assert page.status_code == 200


BAD_POINTS = [
    ({"step": -1, "name": "a", "value": 1.0}, "step"),
    ({"step": 2**53 + 1, "name": "a", "value": 1.0}, "step"),
    ({"step": 1, "turn": -2, "name": "a", "value": 1.0}, "turn"),
    ({"step": 1, "name": "", "value": 1.0}, "name"),
    ({"step": 1, "name": "tab\there", "value": 1.0}, "name"),
    ({"step": 1, "name": "x" * 201, "value": 1.0}, "name"),
    ({"step": 1, "name": "a", "value": "1e999"}, "value"),
    ({"step": 1, "name": "a", "value": 1e200}, "value"),
    ({"step": 1, "name": "a", "value": 1.0, "wall_time": "soon"}, "wall_time"),
    # no coercion, on either side: JSON integers for step and turn (1.0 is one, 1.5 is not:
    # JSON Schema's integers), JSON numbers for values
    ({"step": 1.5, "name": "a", "value": 1.0}, "step"),
    ({"step": "3", "name": "a", "value": 1.0}, "step"),
    ({"step": True, "name": "a", "value": 1.0}, "step"),
    ({"step": 1, "turn": False, "name": "a", "value": 1.0}, "turn"),
    ({"step": 1, "name": "a", "value": True}, "value"),
    ({"step": 1, "name": "a", "value": "1.5"}, "value"),
    ({"step": 1, "name": "a", "value": 1.0, "wall_time": "2"}, "wall_time"),
]


@pytest.mark.parametrize(("point", "field"), BAD_POINTS)
def test_the_api_schema_and_check_points_enforce_the_same_rules(trial: TestClient, point: dict, field: str) -> None:
    body = {"points": [{"step": 0, "name": "ok", "value": 0.0}, point]}
    assert_problem(trial.post(T, json=body), 422, f"points[1].{field}")
    with pytest.raises(telemetry.InvalidInput) as info:
        telemetry.check_points([{"turn": None, "wall_time": None, **p} for p in body["points"]])
    assert info.value.field == f"points[1].{field}"


def test_a_whole_number_written_as_a_float_is_a_step_on_both_sides(trial: TestClient) -> None:
    """The document says ``integer``; JSON Schema counts ``1523491.0`` as one (issue 22)."""
    body = {"points": [{"step": 1523491.0, "turn": 2.0, "name": "loss", "value": 0.5}]}
    assert trial.post(T, json=body).status_code == 201
    series = trial.get(T, params={"name": "loss"}).json()["series"][0]
    assert series["step"] == [1523491] and series["turn"] == 2
    assert telemetry.check_points(body["points"])[0][:2] == (1523491, 2)
