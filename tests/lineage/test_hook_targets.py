"""Webhook targets for a hosted ledger: loopback, link-local, private and unspecified
addresses are refused in every notation, at registration and again at delivery (a name is
resolved then), unless the server allows private targets; user info is refused; the
published URL pattern reads the same in ECMA 262 and Python."""

from __future__ import annotations

import re
import socket
from ipaddress import ip_address

import pytest
from fastapi.testclient import TestClient

from lineage.errors import InvalidInput
from lineage.monitor import hooks
from lineage.monitor.delivery import DeliveryPolicy, deliver_due, refused_delivery
from lineage.service import Ledger
from tests.api.conftest import API, bearer, make_client
from tests.lineage.webhook_receiver import Receiver


@pytest.fixture
def project(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    monkeypatch.delenv(hooks.PRIVATE_TARGETS_ENV, raising=False)
    ledger.projects.create_project("p")
    return ledger


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8752/",
        "http://0x7f000001:8752/",
        "http://2130706433:8752/",
        "http://127.1/",
        "http://0177.0.0.1/",
        "http://127.0.0.1./",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://172.16.0.1/",
        "http://172.31.255.254/",
        "http://192.168.1.1/",
        "http://0.0.0.0/",
        "http://0/",
        "http://100.64.0.1/",
        "http://localhost:22/",
        "http://LOCALHOST./",
        "http://app.localhost/",
    ],
)
def test_a_private_target_is_refused_in_every_notation(project: Ledger, url: str) -> None:
    with pytest.raises(InvalidInput, match=hooks.PRIVATE_TARGETS_ENV) as refused:
        project.agent.add_hook("p", url)
    assert refused.value.field == "url"
    assert project.agent.hooks("p") == []


@pytest.mark.parametrize("url", ["http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://[fe80::1]/"])
def test_an_ipv6_literal_is_refused(project: Ledger, url: str) -> None:
    with pytest.raises(InvalidInput, match="IPv4 address") as refused:
        project.agent.add_hook("p", url)
    assert refused.value.field == "url"


@pytest.mark.parametrize("url", ["http://user:pw@example.com/", "http://u@example.com/", "http://:pw@example.com/"])
def test_user_info_is_refused_even_where_private_targets_are_allowed(
    project: Ledger, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(hooks.PRIVATE_TARGETS_ENV, "1")
    with pytest.raises(InvalidInput, match="user info"):
        project.agent.add_hook("p", url)


def test_public_targets_and_private_ones_where_the_server_allows_them(
    project: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.agent.add_hook("p", "https://example.com/hook")
    project.agent.add_hook("p", "http://93.184.216.34:8080/x")
    monkeypatch.setenv(hooks.PRIVATE_TARGETS_ENV, "1")
    project.agent.add_hook("p", "http://127.0.0.1:9/x")
    assert len(project.agent.hooks("p")) == 3


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.1.2.3", "private"),
        ("::ffff:169.254.169.254", "link-local"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("8.8.8.8", None),
        ("::ffff:8.8.8.8", None),
        ("2001:4860:4860::8888", None),
    ],
)
def test_resolved_addresses_are_judged_with_ipv4_mapped_ones_as_ipv4(address: str, why: str | None) -> None:
    assert hooks.refused_address(ip_address(address)) == why


def test_a_stored_private_target_is_refused_at_delivery(project: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    with Receiver("ok") as receiver:
        monkeypatch.setenv(hooks.PRIVATE_TARGETS_ENV, "1")
        project.agent.add_hook("p", receiver.url, events=["trial_crashed"])
        monkeypatch.delenv(hooks.PRIVATE_TARGETS_ENV)  # the setting was turned off since
        project.recording.record_trial("p", {"status": "crash"})
        report = deliver_due(project, DeliveryPolicy(max_attempts=1))
        assert report.failed == 1 and "refused: targets 127.0.0.1, which is loopback" in report.errors[0]
        assert receiver.requests == []


def test_a_name_that_resolves_to_a_private_address_is_refused_at_delivery(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(hooks.PRIVATE_TARGETS_ENV, raising=False)
    for name in ("ip6-localhost", "ip6-loopback", socket.gethostname()):
        try:
            found = {info[4][0] for info in socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)}
        except OSError:
            continue
        if found and any(hooks.refused_address(ip_address(a.split("%")[0])) for a in found):
            refused = refused_delivery(f"http://{name}/hook")
            assert refused is not None and refused.startswith(f"refused: {name} resolves to")
            return
    pytest.skip("no host name here resolves to a private address")


def test_the_published_pattern_reads_alike_in_ecma_and_python(project: Ledger) -> None:
    assert not re.search(r"\\[sSwWdDbB]", hooks.URL_PATTERN)  # classes that differ between the two
    for char in ("\u0085", "\u00a0", "\u2028", "\ufeff", "\u3000", "\x7f", "\x9f", "\x1c", " "):
        url = f"http://z.example/#a{char}b"
        assert re.fullmatch(hooks.URL_PATTERN, url) is None, repr(char)
        with pytest.raises(InvalidInput):
            project.agent.add_hook("p", url)
    for char in ("\u200b", "é", "~"):
        url = f"http://z.example/#a{char}b"
        assert re.fullmatch(hooks.URL_PATTERN, url) is not None
        project.agent.add_hook("p", url)


def test_the_api_refuses_a_private_target_naming_url(
    ledger: Ledger, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(hooks.PRIVATE_TARGETS_ENV, raising=False)
    ledger.projects.create_project("p")
    admin = bearer(ledger.tokens.create_token(name="adm", role="admin")[1])
    client: TestClient
    with make_client(db_url) as client:
        for url in ("http://0x7f000001:8752/", "http://user:pw@example.com/", "http://z.example/#a\u0085b"):
            answer = client.post(f"{API}/projects/p/hooks", json={"url": url}, headers=admin)
            assert answer.status_code == 422 and answer.json()["field"] == "url", (url, answer.text)
        assert client.post(f"{API}/projects/p/hooks", json={"url": "https://example.com/h"}, headers=admin).is_success
