"""Size limits over HTTP: ``extra`` past a limit is a 422 naming it, and the table page
lists a bounded number of ``extra`` columns."""

from __future__ import annotations

from fastapi.testclient import TestClient

from lineage.browse.columns import MAX_FILE_COLUMNS
from lineage.domain import MAX_EXTRA_DEPTH, MAX_EXTRA_KEYS, Trial
from lineage.service import Ledger
from tests.api.conftest import assert_problem, new_project, record


def test_extra_past_a_limit_is_a_problem_naming_it(client: TestClient) -> None:
    new_project(client)
    too_many = {f"k{i}": i for i in range(MAX_EXTRA_KEYS + 1)}
    body = assert_problem(record(client, "p", extra=too_many), 422)
    assert "extra" in str(body) and f"{MAX_EXTRA_KEYS:,} keys" in body["detail"]
    deep: object = 1
    for _ in range(MAX_EXTRA_DEPTH + 1):  # the top object is level 1
        deep = {"k": deep}
    body = assert_problem(record(client, "p", extra=deep), 422)
    assert f"{MAX_EXTRA_DEPTH} levels" in body["detail"]
    assert record(client, "p", extra={f"k{i}": i for i in range(MAX_EXTRA_KEYS)}).status_code == 201
    assert client.get("/api/v1/projects/p").json()["trial_count"] == 1


def test_the_table_page_lists_a_bounded_number_of_extra_columns(ledger: Ledger, client: TestClient) -> None:
    wide = {f"key{i:04d}": i for i in range(MAX_EXTRA_KEYS)}
    ledger.tables.import_trials("p", [Trial(exp_id="000", extra=wide)], create_with={})
    page = client.get("/projects/p/trials")
    assert page.status_code == 200
    assert page.text.count('name="cols" value="extra.') == MAX_FILE_COLUMNS
    assert 'placeholder="extra.KEY"' in page.text  # the rest by name
    chosen = client.get("/projects/p/trials", params=[("cols", "exp_id"), ("cols", "extra.key0900")])
    assert chosen.status_code == 200 and "key0900" in chosen.text
