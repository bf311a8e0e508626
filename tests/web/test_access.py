"""Who may read and write through the pages: tokens, the session cookie, CSRF.

Tokens are real ``lineage.auth`` tokens, made in the test's ledger: the pages accept
exactly what the API accepts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from lineage.service import Ledger
from tests.web.conftest import load_demo, make_client

TSV_HEADER = "exp_id\ttimestamp\tspecialist\tparent_exp\tbaseline_exp\tdomain\thypothesis\texpected_delta\tstatus\tcore_metric\tval_bpb\tdelta_vs_best\ttrain_s\ttotal_s\tjob_name\tsnapshot_path\tnotes\n"
GOOD_TSV = TSV_HEADER + "000\t\t\t\t\t\tfirst\t\tbaseline\t1.0\t\t\t\t\t\t\t\n"


@pytest.fixture
def tokens(app_client: TestClient, sqlite_ledger: Ledger) -> dict[str, str]:
    """Real tokens in the served ledger: a writer, a reader and an admin, by role."""
    made = {}
    for name, role in (("alice", "writer"), ("bob", "reader"), ("carol", "admin")):
        _record, secret = sqlite_ledger.tokens.create_token(name=name, role=role)
        made[role] = secret
    return made


@pytest.fixture
def app_client(sqlite_ledger: Ledger) -> Iterator[TestClient]:
    load_demo(sqlite_ledger)
    with make_client(str(sqlite_ledger.engine.url.database)) as client:
        yield client


@pytest.fixture
def closed_client(app_client: TestClient, sqlite_ledger: Ledger) -> Iterator[TestClient]:
    """An app on the same ledger with anonymous reading switched off."""
    with make_client(str(sqlite_ledger.engine.url.database), anonymous_read=False) as client:
        yield client


def login(client: TestClient, token: str, next_url: str = "/"):  # type: ignore[no-untyped-def]
    client.get("/login")
    return client.post(
        "/login",
        data={"csrf": client.cookies.get("lineage_csrf"), "token": token, "next": next_url},
        follow_redirects=False,
    )


def post_upload(client: TestClient, project: str = "new"):  # type: ignore[no-untyped-def]
    client.get("/upload")
    return client.post(
        "/upload",
        data={"csrf": client.cookies.get("lineage_csrf"), "project": project},
        files={"file": ("r.tsv", GOOD_TSV.encode(), "text/plain")},
    )


def test_without_tokens_the_upload_form_is_open(app_client: TestClient) -> None:
    assert "Log in" not in app_client.get("/").text
    response = post_upload(app_client)
    assert response.status_code == 200 and "Imported 1 trial into new" in response.text


def test_with_tokens_an_anonymous_upload_is_refused(app_client: TestClient, tokens: dict[str, str]) -> None:
    form = app_client.get("/upload").text
    assert "needs a writer token" in form and "disabled" in form
    response = post_upload(app_client)
    assert response.status_code == 403 and "writer token" in response.text
    assert app_client.get("/projects/new").status_code == 404


def test_a_writer_logs_in_once_and_uploads(app_client: TestClient, tokens: dict[str, str]) -> None:
    response = login(app_client, tokens["writer"], "/upload")
    assert response.status_code == 303 and response.headers["location"] == "/upload"
    cookie = response.headers["set-cookie"]
    assert "lineage_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "alice" in app_client.get("/").text
    assert post_upload(app_client).status_code == 200


def test_an_admin_token_may_write(app_client: TestClient, tokens: dict[str, str]) -> None:
    login(app_client, tokens["admin"])
    assert post_upload(app_client).status_code == 200


def test_a_read_only_token_cannot_upload(app_client: TestClient, tokens: dict[str, str]) -> None:
    login(app_client, tokens["reader"])
    assert "(read-only)" in app_client.get("/").text
    assert post_upload(app_client).status_code == 403


def test_a_wrong_token_is_refused_and_sets_no_session(app_client: TestClient, tokens: dict[str, str]) -> None:
    response = login(app_client, tokens["writer"][:-1] + "x")
    assert response.status_code == 401 and "not valid" in response.text
    assert "lineage_session" not in app_client.cookies


def test_login_never_redirects_to_another_site(app_client: TestClient, tokens: dict[str, str]) -> None:
    for target in ("//evil.example/x", "https://evil.example", "/\\evil.example"):
        app_client.cookies.clear()
        assert login(app_client, tokens["writer"], target).headers["location"] == "/"


def test_login_and_logout_need_the_csrf_token(app_client: TestClient, tokens: dict[str, str]) -> None:
    app_client.get("/login")
    assert app_client.post("/login", data={"token": tokens["writer"]}).status_code == 403
    login(app_client, tokens["writer"])
    assert app_client.post("/logout", data={}).status_code == 403
    out = app_client.post("/logout", data={"csrf": app_client.cookies.get("lineage_csrf")}, follow_redirects=False)
    assert out.status_code == 303 and 'lineage_session=""' in out.headers["set-cookie"]


def test_closed_reading_redirects_to_login_and_back(closed_client: TestClient, tokens: dict[str, str]) -> None:
    client = closed_client
    response = client.get("/projects/a2tgpo-demo/tree?focus=004", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=%2Fprojects%2Fa2tgpo-demo%2Ftree%3Ffocus%3D004"
    assert client.get("/projects/a2tgpo-demo/knowledge.md", follow_redirects=False).status_code == 303
    assert login(client, tokens["reader"], "/projects/a2tgpo-demo").headers["location"] == "/projects/a2tgpo-demo"
    assert client.get("/projects/a2tgpo-demo").status_code == 200


def test_closed_reading_without_any_token_stays_open(closed_client: TestClient) -> None:
    assert closed_client.get("/").status_code == 200


def test_a_revoked_token_ends_its_session_at_once(app_client: TestClient, tokens: dict[str, str]) -> None:
    login(app_client, tokens["writer"])
    assert post_upload(app_client, "first").status_code == 200
    app_client.app.state.ledger.tokens.revoke_token("alice")  # type: ignore[attr-defined]
    assert "alice" not in app_client.get("/").text
    assert post_upload(app_client, "second").status_code == 403


def test_the_pages_accept_the_same_tokens_as_the_api(closed_client: TestClient, tokens: dict[str, str]) -> None:
    client = closed_client
    assert client.get("/api/v1/projects", headers={"Authorization": f"Bearer {tokens['reader']}"}).status_code == 200
    assert login(client, tokens["reader"]).status_code == 303
    assert client.get("/projects/a2tgpo-demo").status_code == 200


def test_after_the_last_token_is_revoked_an_anonymous_upload_is_still_refused(
    app_client: TestClient, sqlite_ledger: Ledger
) -> None:
    sqlite_ledger.tokens.create_token(name="only", role="writer")
    sqlite_ledger.tokens.revoke_token("only")
    assert not sqlite_ledger.tokens.tokens_exist()
    form = app_client.get("/upload").text
    assert "disabled" in form
    assert post_upload(app_client).status_code == 403
    sqlite_ledger.tokens.set_anonymous_writes("open", by="test")  # an explicit re-opening
    assert post_upload(app_client).status_code == 200


def test_a_page_server_on_a_public_address_takes_no_anonymous_upload(sqlite_ledger: Ledger) -> None:
    load_demo(sqlite_ledger)
    with make_client(str(sqlite_ledger.engine.url.database), bind_host="0.0.0.0") as client:
        assert client.get("/").status_code == 200
        assert post_upload(client).status_code == 403
