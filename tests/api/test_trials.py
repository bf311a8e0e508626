"""Trials over HTTP, on SQLite and PostgreSQL: idempotent creation, server-side deltas,
updates, lineage, filters, stable cursor pagination and TSV listings."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from lineage.formats.fieldkit import read_trials, write_trials
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem, new_project, record

TRIALS = f"{API}/projects/p/trials"


def test_created_is_201_a_retry_is_200_another_body_is_409_with_both(client: TestClient) -> None:
    new_project(client, lower_is_better=False)
    first = record(client, "p", exp_id="000", status="baseline", core_metric=1.0, hypothesis="h")
    assert first.status_code == 201
    assert first.headers["location"] == f"{TRIALS}/000"
    assert first.json()["created"] is True and first.json()["trial"]["seq"] == 0
    again = record(client, "p", exp_id="000", status="baseline", core_metric=1.0, hypothesis="h")
    assert again.status_code == 200 and again.json()["created"] is False
    assert again.json()["trial"] == first.json()["trial"]
    clash = assert_problem(
        record(client, "p", exp_id="000", status="baseline", core_metric=2.0, hypothesis="h"), 409, "core_metric"
    )
    assert clash["existing"]["core_metric"] == 1.0 and clash["proposed"]["core_metric"] == 2.0
    assert client.get(f"{API}/projects/p").json()["trial_count"] == 1


def test_idempotency_key_makes_a_retry_of_an_allocated_trial_safe(client: TestClient) -> None:
    new_project(client)
    key = {"Idempotency-Key": "run-42-attempt"}
    first = record(client, "p", headers=key, status="baseline", core_metric=3.0)
    assert first.status_code == 201 and first.json()["trial"]["exp_id"] == "000"
    retry = record(client, "p", headers=key, status="baseline", core_metric=3.0, notes="")
    assert retry.status_code == 200 and retry.json()["trial"]["exp_id"] == "000"
    other = record(client, "p", headers={"Idempotency-Key": "other"}, status="keep", core_metric=2.0)
    assert other.status_code == 201 and other.json()["trial"]["exp_id"] == "001"
    clash = assert_problem(record(client, "p", headers=key, status="keep", core_metric=1.0), 409, "idempotency_key")
    assert clash["existing"]["exp_id"] == "000" and clash["proposed"]["core_metric"] == 1.0
    assert client.get(f"{API}/projects/p").json()["trial_count"] == 2
    assert_problem(record(client, "p", headers={"Idempotency-Key": "has space"}), 422, "Idempotency-Key")


def test_delta_and_best_are_computed_by_the_server(client: TestClient) -> None:
    new_project(client, lower_is_better=False)
    record(client, "p", exp_id="000", status="baseline", core_metric=33.21)
    made = record(client, "p", exp_id="001", status="keep", core_metric=34.02, parent_exp="000", delta_vs_best=99.0)
    assert made.json()["trial"]["delta_vs_best"] == pytest.approx(34.02 - 33.21)
    assert made.json()["is_new_best"] is True and made.json()["best_before"] == "000"
    allocated = record(client, "p", status="discard", core_metric=30.0, parent_exp="001")
    assert allocated.json()["trial"]["exp_id"] == "002"
    assert allocated.json()["trial"]["delta_vs_best"] == pytest.approx(30.0 - 34.02)


def test_bad_trials_are_422_naming_the_field_and_store_nothing(client: TestClient) -> None:
    new_project(client)
    cases = [
        ({"status": "exploded"}, "status"),
        ({"status": "keep", "parent_exp": "999"}, "parent_exp"),
        ({"status": "keep", "train_s": -1}, "train_s"),
        ({"status": "keep", "ig_clip_scale_frac_low": 1.5}, "ig_clip_scale_frac_low"),
        ({"status": "keep", "core_metric": "lots"}, "core_metric"),
        ({"status": "keep", "core_metric": "1.5"}, "core_metric"),  # numbers are not coerced
        ({"status": "keep", "core_metric": True}, "core_metric"),
        ({"status": "keep", "train_s": "300"}, "train_s"),
        ({"status": "keep", "colour": "red"}, "colour"),
        ({"status": "keep", "exp_id": "a\tb"}, "exp_id"),
        ({"status": "keep", "hypothesis": "x" * 70_000}, "hypothesis"),
        ({"status": "keep", "notes": "nul\u0000"}, "notes"),
        ({"status": "keep", "extra": {"k": "\u0000"}}, "extra"),
        ({"core_metric": 1.0}, "status"),
    ]
    for body, field in cases:
        assert_problem(client.post(TRIALS, json=body), 422, field)
    nan = client.post(
        TRIALS, content=b'{"status": "keep", "core_metric": NaN}', headers={"content-type": "application/json"}
    )
    assert_problem(nan, 422, "core_metric")
    assert_problem(client.post(TRIALS, content=b"{not json", headers={"content-type": "application/json"}), 422)
    assert client.get(f"{API}/projects/p").json()["trial_count"] == 0
    assert_problem(client.post(f"{API}/projects/nope/trials", json={"status": "keep"}), 404, "project")


def test_get_update_and_lineage(client: TestClient) -> None:
    new_project(client, lower_is_better=False)
    record(client, "p", exp_id="000", status="baseline", core_metric=10.0)
    record(client, "p", exp_id="001", status="discard", parent_exp="000")
    record(client, "p", exp_id="002", status="keep", core_metric=12.0, parent_exp="001")
    assert client.get(f"{TRIALS}/001").json()["status"] == "discard"
    updated = client.patch(
        f"{TRIALS}/001",
        json={"status": "keep", "core_metric": 11.0, "notes": "rerun", "train_s": 300.5, "ig_clip_scale_mean": 1.01},
    )
    assert updated.status_code == 200
    body = updated.json()
    assert body["status"] == "keep" and body["delta_vs_best"] == pytest.approx(1.0) and body["notes"] == "rerun"
    assert body["train_s"] == 300.5 and body["ig_clip_scale_mean"] == 1.01
    assert_problem(client.patch(f"{TRIALS}/001", json={"delta_vs_best": 5}), 422, "delta_vs_best")
    assert_problem(client.patch(f"{TRIALS}/001", json={"parent_exp": "002"}), 422, "parent_exp")
    assert_problem(client.patch(f"{TRIALS}/001", json={"status": None}), 422, "status")
    assert_problem(client.patch(f"{TRIALS}/404", json={"notes": "x"}), 404, "exp_id")
    lineage = client.get(f"{TRIALS}/002/lineage").json()
    assert [t["exp_id"] for t in lineage["chain"]] == ["000", "001", "002"]
    assert_problem(client.get(f"{TRIALS}/nope/lineage"), 404, "exp_id")


def _seed(ledger: Ledger, n: int = 60) -> None:
    ledger.projects.create_project("p", lower_is_better=False)
    for i in range(n):
        ledger.recording.record_trial(
            "p",
            {
                "exp_id": f"{i:03d}",
                "status": ["keep", "discard", "crash"][i % 3],
                "core_metric": None if i % 3 == 2 else float(i % 7),
                "specialist": f"s{i % 2}",
                "domain": "lm" if i < 30 else "rl",
                "parent_exp": "" if i == 0 else "000",
                "hypothesis": f"Idea {i}" + (" with WARMUP" if i % 10 == 0 else ""),
                "timestamp": f"2026-01-{1 + i // 10:02d}T00:00:00Z",
            },
        )


def _walk(client: TestClient, **params: object) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        page = client.get(TRIALS, params=query)
        assert page.status_code == 200, page.text
        seen += [t["exp_id"] for t in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return seen


@pytest.mark.parametrize("sort", ["seq", "metric", "exp_id"])
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_cursor_pagination_is_stable_and_complete(client: TestClient, ledger: Ledger, sort: str, order: str) -> None:
    _seed(ledger)
    walked = _walk(client, sort=sort, order=order, limit=7)
    everything = client.get(TRIALS, params={"sort": sort, "order": order, "limit": 1000}).json()["items"]
    assert walked == [t["exp_id"] for t in everything]
    assert len(walked) == len(set(walked)) == 60
    if sort == "metric":
        scored = [t["core_metric"] for t in everything if t["core_metric"] is not None]
        assert scored == sorted(scored, reverse=order == "desc")
        assert all(t["core_metric"] is None for t in everything[len(scored) :])


@pytest.mark.parametrize("sort", ["seq", "metric"])
def test_a_cursor_neither_skips_nor_repeats_when_trials_arrive_between_pages(
    client: TestClient, ledger: Ledger, sort: str
) -> None:
    _seed(ledger)
    seen: list[str] = []
    page = client.get(TRIALS, params={"sort": sort, "order": "desc", "limit": 7}).json()
    for n in range(100):
        seen += [t["exp_id"] for t in page["items"]]
        if page["next_cursor"] is None:
            break
        # new trials on both sides of the cursor: the best metric and the worst, the newest seq
        ledger.recording.record_trial("p", {"exp_id": f"new-{n}-hi", "status": "keep", "core_metric": 100.0 + n})
        ledger.recording.record_trial("p", {"exp_id": f"new-{n}-lo", "status": "keep", "core_metric": -100.0 - n})
        page = client.get(
            TRIALS, params={"sort": sort, "order": "desc", "limit": 7, "cursor": page["next_cursor"]}
        ).json()
    assert len(seen) == len(set(seen))
    assert {f"{i:03d}" for i in range(60)} <= set(seen)


def test_filters(client: TestClient, ledger: Ledger) -> None:
    _seed(ledger)

    def ids(**params: object) -> list[str]:
        response = client.get(TRIALS, params={"limit": 1000, **params})
        assert response.status_code == 200, response.text
        return [t["exp_id"] for t in response.json()["items"]]

    assert ids(status=["crash"]) == [f"{i:03d}" for i in range(60) if i % 3 == 2]
    assert ids(status=["keep", "crash"]) == [f"{i:03d}" for i in range(60) if i % 3 != 1]
    assert ids(specialist="s1", domain="rl") == [f"{i:03d}" for i in range(30, 60) if i % 2]
    assert ids(parent="") == ["000"]
    assert ids(parent="000") == [f"{i:03d}" for i in range(1, 60)]
    assert ids(parent="001") == []
    assert ids(metric_min=5, metric_max=6) == [f"{i:03d}" for i in range(60) if i % 3 != 2 and 5 <= i % 7 <= 6]
    assert ids(q="warmup") == ["000", "010", "020", "030", "040", "050"]
    assert ids(timestamp_from="2026-01-03", timestamp_to="2026-01-04") == [f"{i:03d}" for i in range(20, 30)]
    page = client.get(TRIALS, params={"status": "keep", "limit": 5})
    assert page.json()["total"] == 20 and page.headers["x-total-count"] == "20"
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert ids(created_after=future) == []
    assert len(ids(created_after=past, created_before=future)) == 60
    assert_problem(client.get(TRIALS, params={"status": "bogus"}), 422, "status")
    assert_problem(client.get(TRIALS, params={"statsu": "keep"}), 422, "statsu")
    assert_problem(client.get(TRIALS, params={"created_after": "yesterday"}), 422, "created_after")
    assert_problem(client.get(TRIALS, params={"limit": 0}), 422, "limit")
    assert_problem(client.get(TRIALS, params={"cursor": "garbage!"}), 422, "cursor")
    from lineage.service import encode_cursor

    assert_problem(client.get(TRIALS, params={"cursor": encode_cursor("seq", False, [10**30])}), 422, "cursor")
    assert_problem(client.get(TRIALS, params={"created_after": "0001-01-01T00:00:00+05:00"}), 422, "created_after")
    cursor = client.get(TRIALS, params={"limit": 2}).json()["next_cursor"]
    assert_problem(client.get(TRIALS, params={"cursor": cursor, "sort": "metric"}), 422, "cursor")


def test_tsv_listing_is_the_same_rows_in_fieldkit_format(client: TestClient, ledger: Ledger) -> None:
    _seed(ledger)
    params = {"status": "keep", "limit": 5, "sort": "metric", "order": "desc"}
    as_json = client.get(TRIALS, params=params)
    as_tsv = client.get(TRIALS, params={**params, "format": "tsv"})
    by_accept = client.get(TRIALS, params=params, headers={"Accept": "text/tab-separated-values"})
    assert as_tsv.headers["content-type"].startswith("text/tab-separated-values")
    assert as_tsv.content == by_accept.content
    rows = list(read_trials(io.StringIO(as_tsv.text, newline="")))
    assert [t.exp_id for t in rows] == [t["exp_id"] for t in as_json.json()["items"]]
    expected = io.StringIO(newline="")
    write_trials([ledger.trials.trial("p", t["exp_id"]) for t in as_json.json()["items"]], expected)
    assert as_tsv.text == expected.getvalue()
    assert as_tsv.headers["x-next-cursor"] == as_json.json()["next_cursor"]
    assert 'rel="next"' in as_tsv.headers["link"]


#: ``extra`` as a client sends it, numbers in the forms that jsonb used to change: floats
#: from 1e16 up (Python writes them in exponent form), exponent forms of every spelling,
#: -0.0, 1.0 next to 1, integers past 2**53 and past a float's range, denormals, nesting,
#: and keys in an order jsonb would sort.
EXTRA_EDGES = (
    '{"zeta": 1e16, "alpha": 1e+23, "E": 1E23, "neg": -1.5e+300, "tiny": 5e-324, "small": 1e-7,'
    ' "negzero": -0.0, "zero": 0.0, "one_float": 1.0, "one_int": 1, "flag": true, "nothing": null,'
    ' "big": 123456789012345678901234567890, "past_2_53": 9007199254740993, "neg_big": -340282366920938463463374607431768211457,'
    ' "precise": 0.30000000000000004, "max": 1.7976931348623157e308,'
    ' "nested": {"b": [1e16, 2.5e-8, {"y": 1.0, "x": 1}], "a": {"deep": [[-0.0]]}}, "": "empty key"}'
)


def _exact(value):  # type: ignore[no-untyped-def]
    """A JSON value with every number's type and sign and every key's position kept, so
    two values compare equal only when they are the same JSON."""
    import json

    return json.dumps(value, ensure_ascii=False)


def test_extra_round_trips_exactly_and_a_retry_is_200(client: TestClient, backend: str) -> None:
    import json

    new_project(client)
    body = '{"exp_id": "000", "status": "baseline", "core_metric": 1.0, "extra": ' + EXTRA_EDGES + "}"
    sent = json.loads(EXTRA_EDGES)
    created = client.post(f"{API}/projects/p/trials", content=body, headers={"Content-Type": "application/json"})
    assert created.status_code == 201, created.text
    posted = created.json()["trial"]["extra"]
    got = client.get(f"{API}/projects/p/trials/000").json()["extra"]
    assert _exact(posted) == _exact(sent)
    assert _exact(got) == _exact(sent)  # before the fix, jsonb gave 10**23, 0.0 and sorted keys
    assert list(got) == list(sent) and list(got["nested"]) == ["b", "a"]
    assert type(got["alpha"]) is float and type(got["big"]) is int and str(got["negzero"]) == "-0.0"
    listed = client.get(f"{API}/projects/p/trials").json()["items"][0]["extra"]
    assert _exact(listed) == _exact(sent)

    retry = client.post(f"{API}/projects/p/trials", content=body, headers={"Content-Type": "application/json"})
    assert retry.status_code == 200, retry.text  # before the fix: 409 "different extra" on PostgreSQL
    assert _exact(retry.json()["trial"]["extra"]) == _exact(sent)

    # JSON's distinctions count: 1 is not 1.0, -0.0 is not 0.0, true is not 1
    for key, other in (("one_float", 1), ("one_int", 1.0), ("negzero", 0.0), ("flag", 1), ("alpha", 10**23)):
        changed = {**sent, key: other}
        conflict = client.post(
            f"{API}/projects/p/trials",
            json={"exp_id": "000", "status": "baseline", "core_metric": 1.0, "extra": changed},
        )
        assert_problem(conflict, 409, "extra")
    # a PATCH keeps the text too
    patched = client.patch(
        f"{API}/projects/p/trials/000",
        content='{"extra": {"b": 1e+16, "a": -0.0}}',
        headers={"Content-Type": "application/json"},
    )
    assert patched.status_code == 200
    assert _exact(patched.json()["extra"]) == _exact(client.get(f"{API}/projects/p/trials/000").json()["extra"])
    assert _exact(client.get(f"{API}/projects/p/trials/000").json()["extra"]) == '{"b": 1e+16, "a": -0.0}'


def test_extra_keeps_its_values_through_the_ledger(ledger: Ledger) -> None:
    import json

    ledger.projects.create_project("p")
    extra = json.loads(EXTRA_EDGES)
    first = ledger.recording.record_trial("p", {"exp_id": "x", "status": "keep", "core_metric": 1.0, "extra": extra})
    assert first.created
    assert _exact(ledger.trials.trial("p", "x").extra) == _exact(extra)
    again = ledger.recording.record_trial(
        "p", {"exp_id": "x", "status": "keep", "core_metric": 1.0, "extra": json.loads(EXTRA_EDGES)}
    )
    assert not again.created
