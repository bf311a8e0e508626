"""Size limits over HTTP: ``extra`` past a limit is a 422 naming it, the table page
lists a bounded number of ``extra`` columns, and a results file is held to the body cap
and read from its stream (a big one within the cap is imported whole)."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi.testclient import TestClient

from lineage.browse.columns import MAX_FILE_COLUMNS
from lineage.domain import MAX_EXTRA_DEPTH, MAX_EXTRA_KEYS, Trial
from lineage.service import Ledger
from tests.api.conftest import assert_problem, make_client, new_project, record


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


def _results(size: int) -> bytes:
    header = b"commit\tval_bpb\tstatus\tdescription\n"
    row = b"a1b2c3d\t0.99\tkeep\t" + b"an idea worth a long description " * 6 + b"\n"  # few rows, many bytes
    return header + row * ((size - len(header)) // len(row))


def _chunks(data: bytes) -> Iterator[bytes]:
    for at in range(0, len(data), 65536):
        yield data[at : at + 65536]


def test_a_results_file_past_the_body_cap_is_a_413_naming_the_limit_and_stores_nothing(db_url: str) -> None:
    limit = 256 * 1024
    with make_client(db_url, max_body_bytes=limit) as client:
        for chunked in (False, True):  # told by Content-Length, or counted as it streams in
            data = _results(limit + 4096)
            body = assert_problem(
                client.post(
                    "/api/v1/projects/big/trials.tsv?create=true",
                    content=_chunks(data) if chunked else data,
                    headers={"Content-Type": "text/tab-separated-values"},
                ),
                413,
            )
            assert body["limit"] == limit and f"{limit}" in body["detail"]
        assert client.get("/api/v1/projects/big").status_code == 404


def test_a_big_results_file_within_the_cap_is_imported_whole_from_its_stream(db_url: str) -> None:
    limit = 3 * 1024 * 1024 // 2  # past the spool's memory (bodies.SPOOL_MEMORY): the file goes to disk
    data = _results(limit - 4096)
    rows = data.count(b"\n") - 1
    with make_client(db_url, max_body_bytes=limit) as client:
        response = client.post("/api/v1/projects/big/trials.tsv?create=true", content=_chunks(data))
        assert response.status_code == 201, response.text
        assert response.json()["rows"] == rows
        assert client.get("/api/v1/projects/big").json()["trial_count"] == rows
        exported = client.get("/api/v1/projects/big/trials.tsv").text.splitlines()
        assert len(exported) == 1 + rows and exported[-1].count("an idea worth") == 6  # the last row, whole


def test_a_bad_byte_deep_in_a_spooled_file_names_its_line_and_stores_nothing(db_url: str) -> None:
    data = _results(3 * 1024 * 1024 // 2)
    bad_line = data.count(b"\n") + 1
    data += b"a1b2c3d\t0.98\tkeep\tbad \xff byte\n"
    with make_client(db_url) as client:
        body = assert_problem(client.post("/api/v1/projects/big/trials.tsv?create=true", content=_chunks(data)), 422)
        assert body["field"] == "body" and body["line"] == bad_line and body["column"] == 23
        assert client.get("/api/v1/projects/big").status_code == 404
