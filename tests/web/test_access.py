"""Who may read and write through the pages: tokens, the session cookie, CSRF.

Token storage is the API's (``lineage.auth``); here its two functions are replaced by a
table of known tokens, so these tests pin the pages' rules on their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from api.pages import access
from lineage.service import Ledger
from tests.web.conftest import load_demo, make_client

TOKENS = {
    "w-secret": SimpleNamespace(name="alice", can_write=True),
    "r-secret": SimpleNamespace(name="bob", can_write=False),
    "role-secret": SimpleNamespace(name="carol", role="writer"),
}
TSV_HEADER = "exp_id\ttimestamp\tspecialist\tparent_exp\tbaseline_exp\tdomain\thypothesis\texpected_delta\tstatus\tcore_metric\tval_bpb\tdelta_vs_best\ttrain_s\ttotal_s\tjob_name\tsnapshot_path\tnotes\n"
GOOD_TSV = TSV_HEADER + "000\t\t\t\t\t\tfirst\t\tbaseline\t1.0\t\t\t\t\t\t\t\n"


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(access, "tokens_exist", lambda ledger: True)
    monkeypatch.setattr(
        access, "verify",
        lambda ledger, token: (access.Principal(name=TOKENS[token].name, can_write=access._can_write(TOKENS[token]))
                               if token in TOKENS else None),
    )
    return TOKENS


@pytest.fixture
def app_client(sqlite_ledger: Ledger) -> Iterator[TestClient]:
    load_demo(sqlite_ledger)
    with make_client(str(sqlite_ledger.engine.url.database)) as client:
        yield client


def closed(client: TestClient) -> TestClient:
    """The same app with anonymous reading switched off."""
    settings = client.app.state.settings  # type: ignore[attr-defined]
    client.app.state.settings = SimpleNamespace(**{**settings.model_dump(), "anonymous_read": False})  # type: ignore[attr-defined]
    return client


def login(client: TestClient, token: str, next_url: str = "/"):  # type: ignore[no-untyped-def]
    client.get("/login")
    return client.post("/login", data={"csrf": client.cookies.get("lineage_csrf"), "token": token, "next": next_url},
                       follow_redirects=False)


def post_upload(client: TestClient, project: str = "new"):  # type: ignore[no-untyped-def]
    client.get("/upload")
    return client.post("/upload", data={"csrf": client.cookies.get("lineage_csrf"), "project": project},
                       files={"file": ("r.tsv", GOOD_TSV.encode(), "text/plain")})


def test_without_tokens_the_upload_form_is_open(app_client: TestClient) -> None:
    assert "Log in" not in app_client.get("/").text
    response = post_upload(app_client)
    assert response.status_code == 200 and "Imported 1 trial into new" in response.text


def test_with_tokens_an_anonymous_upload_is_refused(app_client: TestClient, tokens: dict) -> None:
    form = app_client.get("/upload").text
    assert "needs a writer token" in form and "disabled" in form
    response = post_upload(app_client)
    assert response.status_code == 403 and "writer token" in response.text
    assert app_client.get("/projects/new").status_code == 404


def test_a_writer_logs_in_once_and_uploads(app_client: TestClient, tokens: dict) -> None:
    response = login(app_client, "w-secret", "/upload")
    assert response.status_code == 303 and response.headers["location"] == "/upload"
    cookie = response.headers["set-cookie"]
    assert "lineage_session=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "alice" in app_client.get("/").text
    assert post_upload(app_client).status_code == 200


def test_a_role_named_writer_may_write(app_client: TestClient, tokens: dict) -> None:
    login(app_client, "role-secret")
    assert post_upload(app_client).status_code == 200


def test_a_read_only_token_cannot_upload(app_client: TestClient, tokens: dict) -> None:
    login(app_client, "r-secret")
    assert "(read-only)" in app_client.get("/").text
    assert post_upload(app_client).status_code == 403


def test_a_wrong_token_is_refused_and_sets_no_session(app_client: TestClient, tokens: dict) -> None:
    response = login(app_client, "nope")
    assert response.status_code == 401 and "not valid" in response.text
    assert "lineage_session" not in app_client.cookies


def test_login_never_redirects_to_another_site(app_client: TestClient, tokens: dict) -> None:
    for target in ("//evil.example/x", "https://evil.example", "/\\evil.example"):
        app_client.cookies.clear()
        assert login(app_client, "w-secret", target).headers["location"] == "/"


def test_login_and_logout_need_the_csrf_token(app_client: TestClient, tokens: dict) -> None:
    app_client.get("/login")
    assert app_client.post("/login", data={"token": "w-secret"}).status_code == 403
    login(app_client, "w-secret")
    assert app_client.post("/logout", data={}).status_code == 403
    out = app_client.post("/logout", data={"csrf": app_client.cookies.get("lineage_csrf")}, follow_redirects=False)
    assert out.status_code == 303 and 'lineage_session=""' in out.headers["set-cookie"]


def test_closed_reading_redirects_to_login_and_back(app_client: TestClient, tokens: dict) -> None:
    client = closed(app_client)
    response = client.get("/projects/a2tgpo-demo/tree?focus=004", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=%2Fprojects%2Fa2tgpo-demo%2Ftree%3Ffocus%3D004"
    assert client.get("/projects/a2tgpo-demo/knowledge.md", follow_redirects=False).status_code == 303
    assert login(client, "r-secret", "/projects/a2tgpo-demo").headers["location"] == "/projects/a2tgpo-demo"
    assert client.get("/projects/a2tgpo-demo").status_code == 200


def test_closed_reading_without_any_token_stays_open(app_client: TestClient) -> None:
    assert closed(app_client).get("/").status_code == 200


def test_a_present_auth_module_without_the_expected_functions_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(access, "_auth_module", lambda: SimpleNamespace())
    with pytest.raises(RuntimeError, match="cannot check tokens"):
        access.check_auth_module()
    with pytest.raises(RuntimeError):
        access.tokens_exist(object())


def test_verify_reads_the_auth_modules_record(monkeypatch: pytest.MonkeyPatch) -> None:
    module = SimpleNamespace(
        tokens_exist=lambda ledger: True,
        verify_token=lambda ledger, token: SimpleNamespace(name="dee", scopes=["read", "write"]) if token == "t" else None,
    )
    monkeypatch.setattr(access, "_auth_module", lambda: module)
    assert access.verify(object(), "t") == access.Principal(name="dee", can_write=True)
    assert access.verify(object(), "x") is None and access.verify(object(), "") is None
