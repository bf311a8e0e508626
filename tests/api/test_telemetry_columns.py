"""The columnar form of a telemetry batch over HTTP, on SQLite and PostgreSQL: what goes in
comes out (values, steps, turns, names, wall times), bad entries are named as their point,
replays are idempotent in either form, and the two forms mix in one trial."""

from __future__ import annotations

import json
import math

from fastapi.testclient import TestClient

from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, new_project, record

T = f"{API}/projects/p/trials/000/telemetry"


def _trial(client: TestClient) -> TestClient:
    new_project(client)
    assert record(client, "p", exp_id="000", status="baseline", core_metric=1.0).status_code == 201
    return client


def _points() -> list[dict]:
    """Scalars at every step, one series per turn, awkward names and extreme values."""
    points: list[dict] = []
    for step in range(30):
        points.append({"step": step, "name": "train_loss", "value": 3.0 / (step + 1), "wall_time": 1.7e9 + step})
        points.append({"step": step, "name": "lr", "value": 1e-4 * (step % 7)})
        if step % 10 == 0:
            points.append({"step": step, "name": "val_bpb", "value": -1e150 if step == 20 else 1.0 + 1 / (step + 3)})
        points.append({"step": step, "turn": step % 3, "name": 'ig "mean" ünï', "value": 5e-324 * step})
    points.append({"step": 2**53, "turn": 2**31 - 1, "name": "x" * 200, "value": 1e150, "wall_time": 0})
    return points


def _columns(points: list[dict], *, table: bool = True) -> dict:
    names = list(dict.fromkeys(p["name"] for p in points))
    columns: dict = {
        "step": [p["step"] for p in points],
        "value": [p["value"] for p in points],
        "turn": [p.get("turn") for p in points],
        "wall_time": [p.get("wall_time") for p in points],
    }
    if table:
        columns["names"] = names
        columns["name"] = [names.index(p["name"]) for p in points]
    else:
        columns["name"] = [p["name"] for p in points]
    return columns


def _stored(ledger: Ledger) -> list[tuple]:
    with ledger.store.read() as conn:
        rows = ledger.store.core.execute(
            conn, "SELECT step, turn, name, value, wall_time FROM telemetry_points ORDER BY id"
        )
        return [tuple(r) for r in rows.fetchall()]


def _expected(points: list[dict]) -> list[tuple]:
    return [
        (
            p["step"],
            -1 if p.get("turn") is None else p["turn"],
            p["name"],
            float(p["value"]),
            None if p.get("wall_time") is None else float(p["wall_time"]),
        )
        for p in points
    ]


def test_columns_round_trip_values_steps_turns_names_and_wall_times(client: TestClient, ledger: Ledger) -> None:
    _trial(client)
    points = _points()
    sent = client.post(T, json={"batch_id": "c-1", "columns": _columns(points)})
    assert sent.status_code == 201 and sent.json() == {"accepted": len(points), "replayed": False, "batch_id": "c-1"}
    assert _stored(ledger) == _expected(points)
    series = {(s["name"], s["turn"]): s for s in client.get(T, params={"max_points": 100}).json()["series"]}
    assert series[("val_bpb", None)]["step"] == [0, 10, 20] and series[("val_bpb", None)]["value"][2] == -1e150
    assert series[('ig "mean" ünï', 1)]["step"] == [1, 4, 7, 10, 13, 16, 19, 22, 25, 28]
    assert series[("x" * 200, 2**31 - 1)]["step"] == [2**53]


def test_names_may_be_given_inline_and_optional_columns_left_out(client: TestClient, ledger: Ledger) -> None:
    _trial(client)
    points = [{"step": s, "name": n, "value": s} for s in range(5) for n in ("a", "b")]
    columns = _columns(points, table=False)
    del columns["turn"], columns["wall_time"]
    assert client.post(T, json={"columns": columns}).status_code == 201
    assert _stored(ledger) == _expected(points)
    assert client.post(T, json={"columns": {"step": [], "name": [], "value": []}}).json()["accepted"] == 0


def test_a_bad_entry_is_named_as_its_point_and_nothing_is_stored(client: TestClient, ledger: Ledger) -> None:
    _trial(client)
    good = _columns(_points())

    def bad(column: str, index: int, value: object) -> dict:
        columns = json.loads(json.dumps(good))
        columns[column][index] = value
        return {"columns": columns}

    for column, index, value, field in [
        ("step", 7, -1, "points[7].step"),
        ("step", 3, 1.0, "points[3].step"),
        ("step", 4, True, "points[4].step"),
        ("step", 5, 2**53 + 1, "points[5].step"),
        ("turn", 9, -1, "points[9].turn"),
        ("turn", 2, "1", "points[2].turn"),
        ("name", 6, 99, "points[6].name"),
        ("name", 1, "lr", "points[1].name"),
        ("value", 8, "high", "points[8].value"),
        ("value", 10, 1e151, "points[10].value"),
        ("value", 11, None, "points[11].value"),
        ("wall_time", 12, "now", "points[12].wall_time"),
        ("names", 1, "bad\nname", "columns.names[1]"),
    ]:
        assert_problem(client.post(T, json=bad(column, index, value)), 422, field)
    inline = _columns(_points(), table=False)
    inline["name"][4] = ""
    assert_problem(client.post(T, json={"columns": inline}), 422, "points[4].name")
    nan = b'{"columns": {"step": [1, 2], "name": ["a", "a"], "value": [1, NaN]}}'
    assert_problem(client.post(T, content=nan, headers={"Content-Type": "application/json"}), 422, "points[1].value")
    short = json.loads(json.dumps(good))
    short["value"].pop()
    assert_problem(client.post(T, json={"columns": short}), 422, "columns.value")
    assert_problem(client.post(T, json={"columns": {"step": [1], "value": [1.0]}}), 422, "columns.name")
    assert_problem(client.post(T, json={"columns": {**good, "colour": []}}), 422, "columns.colour")
    assert_problem(client.post(T, json={"columns": good, "points": []}), 422, "points")
    assert _stored(ledger) == []


def test_replays_are_idempotent_in_either_form(client: TestClient, ledger: Ledger) -> None:
    _trial(client)
    points = _points()
    assert client.post(T, json={"batch_id": "k-1", "columns": _columns(points)}).status_code == 201
    again = client.post(T, json={"batch_id": "k-1", "columns": _columns(points, table=False)})
    assert again.status_code == 200 and again.json() == {"accepted": len(points), "replayed": True, "batch_id": "k-1"}
    as_points = client.post(T, json={"batch_id": "k-1", "points": points})
    assert as_points.status_code == 200 and as_points.json()["replayed"] is True
    by_header = client.post(T, json={"columns": _columns(points)}, headers={"Idempotency-Key": "k-1"})
    assert by_header.status_code == 200
    other = _columns(points)
    other["value"][0] += 1
    assert_problem(client.post(T, json={"batch_id": "k-1", "columns": other}), 409, "batch_id")
    assert _stored(ledger) == _expected(points)


def test_old_and_new_forms_mix_in_one_trial(client: TestClient, ledger: Ledger) -> None:
    _trial(client)
    first = [{"step": s, "name": "loss", "value": 1 / (s + 1)} for s in range(10)]
    second = [{"step": s, "name": "loss", "value": 1 / (s + 1)} for s in range(10, 20)]
    third = [{"step": s, "turn": 0, "name": "loss", "value": -s} for s in range(20, 25)]
    assert client.post(T, json={"batch_id": "m-1", "points": first}).status_code == 201
    assert client.post(T, json={"batch_id": "m-2", "columns": _columns(second)}).status_code == 201
    assert client.post(T, json={"points": third}).status_code == 201
    assert _stored(ledger) == _expected(first + second + third)
    series = {(s["name"], s["turn"]): s for s in client.get(T).json()["series"]}
    assert series[("loss", None)]["step"] == list(range(20)) and series[("loss", 0)]["value"] == [
        -20.0,
        -21,
        -22,
        -23,
        -24,
    ]
    assert all(
        math.isclose(v, 1 / (s + 1)) for s, v in zip(series[("loss", None)]["step"], series[("loss", None)]["value"])
    )


def test_blocks_of_columns_are_concatenated_in_order_and_bad_entries_counted_across_them(
    client: TestClient, ledger: Ledger
) -> None:
    _trial(client)
    points = _points()
    blocks = [_columns(points[:42]), _columns(points[42:43], table=False), _columns(points[43:])]
    assert points[42] == {"step": 13, "name": "lr", "value": 1e-4 * 6}
    del blocks[1]["turn"], blocks[1]["wall_time"]  # a block may leave out what none of its points has
    assert client.post(T, json={"batch_id": "b-1", "columns": blocks}).status_code == 201
    assert _stored(ledger) == _expected(points)
    again = client.post(T, json={"batch_id": "b-1", "columns": _columns(points)})  # the same points in one block
    assert again.status_code == 200 and again.json()["replayed"] is True
    bad = json.loads(json.dumps(blocks))
    bad[2]["step"][5] = -3
    assert_problem(client.post(T, json={"columns": bad}), 422, "points[48].step")
    bad = json.loads(json.dumps(blocks))
    bad[1]["name"] = []
    assert_problem(client.post(T, json={"columns": bad}), 422, "columns[1].name")
    assert_problem(client.post(T, json={"columns": [blocks[0], 7]}), 422, "columns[1]")
    assert len(_stored(ledger)) == len(points)


def test_batches_of_several_insert_statements_are_stored_whole_and_in_order(client: TestClient, ledger: Ledger) -> None:
    """SQLite takes a batch in multi-row INSERTs of ``ROWS_PER_INSERT`` rows and the rest
    one by one: every point lands, in the order sent, in either form."""
    from lineage.store.telemetry import ROWS_PER_INSERT

    _trial(client)
    n = 2 * ROWS_PER_INSERT + 7
    points = [
        {
            "step": k // 3,
            "name": f"m{k % 3}",
            "value": k * 0.5 - 100.0,
            "turn": k % 4 if k % 5 else None,
            **({"wall_time": 1.7e9 + k} if k % 3 == 0 else {}),
        }
        for k in range(n)
    ]
    assert client.post(T, json={"batch_id": "w-1", "columns": _columns(points)}).status_code == 201
    assert client.post(T, json={"batch_id": "w-2", "points": points[: ROWS_PER_INSERT + 1]}).status_code == 201
    assert _stored(ledger) == _expected(points + points[: ROWS_PER_INSERT + 1])


def test_the_openapi_document_describes_both_forms(client: TestClient) -> None:
    body = client.get("/openapi.json").json()["paths"][f"{API}/projects/{{project}}/trials/{{exp_id}}/telemetry"][
        "post"
    ]
    forms = body["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
    assert [sorted(f["properties"]) for f in forms] == [["batch_id", "points"], ["batch_id", "columns"]]
    block, blocks = forms[1]["properties"]["columns"]["anyOf"]
    assert set(block["properties"]) == {"step", "names", "name", "value", "turn", "wall_time"}
    assert blocks["type"] == "array" and blocks["items"] == block
