"""The trials table's filter box in Chromium against a real ``lineage serve`` on the
2,000-trial autoresearch-style loop (tests/web/loop_project.py): an expression typed in
narrows the rows and the count, a bad one is shown in place with its column, and the
exp column sorts as counted (issue 20: filter language, defect 7)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from lineage.service import Ledger
from tests.servers import serving
from tests.web.loop_project import load_loop_project
from tests.web.test_browser import HTTP_TIMEOUT_S, SHOTS, browser, new_context  # noqa: F401 - the browser fixture

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def loop_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, object]]:
    workdir = tmp_path_factory.mktemp("loop")
    ledger = Ledger.open(str(workdir / "lineage.db"))
    made = load_loop_project(ledger, telemetry_trials=0)
    ledger.close()
    with serving(workdir) as base:
        yield base, made


def test_filter_box_narrows_the_table_and_points_at_errors(browser, loop_server) -> None:  # type: ignore[no-untyped-def]
    base, made = loop_server
    context = new_context(browser, base_url=base, viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.goto(f"/projects/{made.slug}/trials")
    expression = "status = keep and extra.memory_gb >= 47.5"
    tab.fill("#filter", expression)
    with tab.expect_navigation():
        tab.press("#filter", "Enter")
    expected = httpx.get(
        f"{base}/api/v1/projects/{made.slug}/trials", params={"filter": expression, "limit": 1}, timeout=HTTP_TIMEOUT_S
    ).json()["total"]
    assert 0 < expected < len(made.kept)
    sub = tab.inner_text("header.page-head .sub")
    assert re.search(rf"\b{expected:,} trials match", sub), sub
    rows = tab.locator("table.trials tbody tr")
    assert rows.count() == min(50, expected)
    assert set(tab.locator("table.trials tbody tr td:nth-child(3)").all_inner_texts()) == {"keep"}
    assert tab.input_value("#filter") == expression  # the box keeps what was typed
    tab.screenshot(path=str(SHOTS / "trials-filter-1280.png"))

    tab.fill("#filter", "status = kep")
    with tab.expect_navigation():
        tab.press("#filter", "Enter")
    error = tab.locator("#filter-error")
    assert error.is_visible() and error.get_attribute("data-column") == "10"
    assert "unknown status 'kep'" in error.inner_text() and "^" in error.inner_text()
    assert tab.get_attribute("#filter", "aria-invalid") == "true"

    tab.goto(f"/projects/{made.slug}/trials?sort=-exp_id&filter=exp_id+%3E%3D+exp_0995+and+exp_id+%3C+1003")
    shown = tab.locator("table.trials tbody tr td:nth-child(2)").all_inner_texts()
    assert shown == [f"exp_{n}" for n in (1002, 1001, 1000)] + [f"exp_{n:03d}" for n in (999, 998, 997, 996, 995)]
    assert not errors
    context.close()
