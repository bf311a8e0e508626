"""The upload page shares the API's body cap (``LINEAGE_MAX_BODY_BYTES``) and reads the
file as a stream: past the cap it is a 413 page and nothing is imported, whether the
request says its length or comes in chunks."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
from fastapi.testclient import TestClient

from api.pages.upload import FORM_ROOM
from lineage.service import Ledger
from tests.web.conftest import make_client

LIMIT = 64 * 1024


def _form(token: str, data: bytes, boundary: str = "b0und4ry") -> bytes:
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n{token}\r\n'.encode(),
        f'--{boundary}\r\nContent-Disposition: form-data; name="project"\r\n\r\nbig\r\n'.encode(),
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="r.tsv"\r\n'
        "Content-Type: text/plain\r\n\r\n".encode()
        + data
        + b"\r\n",
        f"--{boundary}--\r\n".encode(),
    ]
    return b"".join(parts)


def _rows(size: int) -> bytes:
    header = b"commit\tval_bpb\tstatus\tdescription\n"
    row = b"a1b2c3d\t0.99\tkeep\tan idea\n"
    return header + row * ((size - len(header)) // len(row))


def _post(client: TestClient, data: bytes, *, chunked: bool = False) -> httpx.Response:
    client.get("/upload")
    body = _form(client.cookies.get("lineage_csrf") or "", data)
    headers = {"Content-Type": "multipart/form-data; boundary=b0und4ry"}

    def chunks() -> Iterator[bytes]:
        for at in range(0, len(body), 65536):
            yield body[at : at + 65536]

    return client.post("/upload", content=chunks() if chunked else body, headers=headers)


def test_a_file_within_the_cap_is_imported(ledger: Ledger, db_url: str) -> None:
    with make_client(db_url, max_body_bytes=LIMIT) as client:
        response = _post(client, _rows(LIMIT - 1024))
    assert response.status_code == 200, response.text[-2000:]
    assert ledger.projects.project("big").trial_count > 1000


def test_a_file_past_the_cap_is_a_413_page_and_imports_nothing(ledger: Ledger, db_url: str) -> None:
    with make_client(db_url, max_body_bytes=LIMIT) as client:
        for data, chunked in (
            (_rows(LIMIT + 1024), False),  # the body fits the form's room: the file's size decides
            (_rows(LIMIT + FORM_ROOM + 1024), False),  # Content-Length says it all
            (_rows(LIMIT + FORM_ROOM + 1024), True),  # chunked: counted as it comes
        ):
            response = _post(client, data, chunked=chunked)
            assert response.status_code == 413, (len(data), chunked)
            assert "LINEAGE_MAX_BODY_BYTES" in response.text and "text/html" in response.headers["content-type"]
        assert client.get("/projects/big").status_code == 404


def test_a_bad_line_of_a_streamed_file_is_shown_from_the_file(ledger: Ledger, db_url: str) -> None:
    data = _rows(20_000) + b"a1b2c3d\t0.99\t\xff\tbad\n"
    with make_client(db_url) as client:
        response = _post(client, data)
    assert response.status_code == 400 and "UTF-8" in response.text
    bad_line = data.count(b"\n")
    assert f"Line {bad_line}" in response.text
