"""The metric explorer in a real browser: Chromium (Playwright) against a real
``lineage serve`` holding a generated project (``bench.explorer.generate_project``: 12
trials, three specialists, a chain of keeps, ``loss`` per step and ``ig`` per turn).

The numbers the page draws are checked against the API's answer for the same URL; the
API's numbers are checked against a plain loop in tests/lineage/test_explore.py.
Screenshots land in test-output/screenshots/explore-*.png.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from bench.explorer import SPECIALISTS, generate_project, serving
from lineage.service import Ledger

# fixtures: browser (Chromium), page (a fresh context on this module's server; script errors fail the test)
from tests.web.test_browser import browser, page, shot  # noqa: F401

pytestmark = pytest.mark.slow

SLUG = "explore-demo"
TRIALS = 12


@pytest.fixture(scope="module")
def explore_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("explore") / "ledger.db")
    ledger = Ledger.open(path)
    generate_project(ledger, SLUG, trials=TRIALS, points=3_000, turns=4, seed=3)
    ledger.close()
    return path


@pytest.fixture(scope="module")
def server(explore_db: str) -> Iterator[str]:
    with serving(explore_db) as base:
        yield base


def _context(browser, server: str):  # type: ignore[no-untyped-def]
    return browser.new_context(base_url=server, viewport={"width": 1280, "height": 1000})


def api(server: str, page_url: str) -> dict:
    """The API's answer for the view of ``page_url`` (the page's own parameters)."""
    params = [(k, v) for k, vs in parse_qs(urlparse(page_url).query).items() for v in vs if k not in ("smooth", "log")]
    response = httpx.get(f"{server}/api/v1/projects/{SLUG}/explore", params=params, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def drawn(page) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Every drawn curve and band of the first panel: its key -> its path."""
    svg = page.locator("svg.explore-svg").first
    svg.wait_for(state="visible")
    return svg.evaluate(
        """svg => Object.fromEntries([...svg.querySelectorAll('path')].map((p, i) =>
             [(p.getAttribute('class') || '') + '|' + (p.dataset.group || p.dataset.exp || i), p.getAttribute('d')]))"""
    )


def hover_at(page, fraction: float) -> tuple[int, dict[str, float]]:  # type: ignore[no-untyped-def]
    """Move the mouse over the first plot at ``fraction`` of its width: the bucket the
    tooltip names and each group's mean it shows."""
    svg = page.locator("svg.explore-svg").first
    svg.scroll_into_view_if_needed()
    box = svg.bounding_box()
    page.mouse.move(box["x"] + box["width"] * fraction, box["y"] + box["height"] * 0.5)
    tip = page.locator("#explore-tip")
    tip.wait_for(state="visible")
    index = int(tip.get_attribute("data-index"))
    means = {}
    for line in tip.locator("div").all_inner_texts():
        found = re.match(r"^(.+): mean (\S+) \(n=", line)
        if found:
            means[found.group(1)] = float(found.group(2))
    return index, means


def test_group_by_specialist_draws_one_band_per_specialist_with_the_api_means(page, server: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/projects/{SLUG}/explore?metric=loss&group=specialist")
    paths = drawn(page)
    bands = sorted(key.split("|")[1] for key in paths if key.startswith("band "))
    assert bands == sorted(SPECIALISTS)
    assert len([key for key in paths if key.startswith("ln trial")]) == TRIALS
    answer = api(server, page.url)
    panel = answer["panels"][0]
    checked = 0
    for fraction in (0.3, 0.55, 0.8):
        index, means = hover_at(page, fraction)
        assert set(means) == set(SPECIALISTS)
        for group in panel["groups"]:
            expected = group["mean"][index]
            assert means[group["key"]] == pytest.approx(expected, rel=1e-5, abs=1e-9), (group["key"], index)
            checked += 1
    assert checked == 3 * len(SPECIALISTS)
    shot(page, "explore-01-grouped-by-specialist")


def test_the_url_reproduces_the_view_in_a_fresh_context_and_back_undoes(page, browser, server: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/projects/{SLUG}/explore?metric=loss&group=specialist&band=std")
    before = drawn(page)
    page.locator("#smooth").fill("0.8")
    page.locator("#log").check()
    assert "smooth=0.8" in page.url and "log=1" in page.url
    after = drawn(page)
    assert after != before
    shot(page, "explore-02-smoothed-log")
    fresh = _context(browser, server)
    try:
        other = fresh.new_page()
        other.goto(page.url)
        assert drawn(other) == after
        assert other.locator("#smooth").input_value() == "0.8"
        assert other.locator("#log").is_checked()
        assert other.locator("select[name=band]").input_value() == "std"
    finally:
        fresh.close()
    page.go_back()  # un-tick log scale
    page.wait_for_function("() => !location.search.includes('log=1')")
    assert not page.locator("#log").is_checked()
    assert drawn(page) != after


def test_smoothing_changes_the_drawn_values(page) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/projects/{SLUG}/explore?metric=loss&group=specialist")
    raw_paths = drawn(page)
    index, raw = hover_at(page, 0.5)
    page.locator("#smooth").fill("0.9")
    smooth_paths = drawn(page)
    changed = [key for key in raw_paths if key.startswith("ln mean") and raw_paths[key] != smooth_paths[key]]
    assert len(changed) == len(SPECIALISTS)
    index2, smoothed = hover_at(page, 0.5)
    assert index2 == index
    assert all(smoothed[key] != pytest.approx(raw[key], rel=1e-4) for key in raw)


def test_chain_to_best_shows_exactly_the_chain(page, explore_db: str) -> None:  # type: ignore[no-untyped-def]
    ledger = Ledger.open(explore_db, upgrade=False)
    try:
        chain = [t.exp_id for t in ledger.trials.chain(SLUG)]
    finally:
        ledger.close()
    assert len(chain) >= 3
    page.goto(f"/projects/{SLUG}/explore?metric=loss&select=chain&band=none")
    curves = [key.split("|")[1] for key in drawn(page) if key.startswith("ln trial")]
    assert sorted(curves) == sorted(chain)
    listed = page.locator(".explore-trials input[name=exp]").evaluate_all("boxes => boxes.map(b => b.value)")
    assert listed == chain
    shot(page, "explore-03-chain-to-best")


def test_click_opens_the_trial_and_ticked_curves_open_compare(page) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/projects/{SLUG}/explore?metric=loss&metric=core_metric&group=specialist&band=none")
    assert page.locator("svg.explore-svg").count() == 2
    assert page.locator("svg.explore-svg").nth(1).locator("circle.dot").count() == TRIALS
    shot(page, "explore-04-every-curve-and-core-metric")
    hover_at(page, 0.4)
    picked = page.locator("#explore-tip").get_attribute("data-exp")
    page.locator("svg.explore-svg").first.scroll_into_view_if_needed()
    box = page.locator("svg.explore-svg").first.bounding_box()
    page.keyboard.down("Shift")
    page.mouse.click(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.5)
    page.keyboard.up("Shift")
    assert page.locator(f".explore-trials input[value='{picked}']").is_checked()
    other = next(
        v
        for v in page.locator(".explore-trials input[name=exp]").evaluate_all("bs => bs.map(b => b.value)")
        if v != picked
    )
    page.locator(f".explore-trials input[value='{other}']").check()
    page.locator(".explore-trials button[type=submit]").click()
    page.wait_for_url(f"**/projects/{SLUG}/compare?**")
    assert sorted(parse_qs(urlparse(page.url).query)["exp"]) == sorted([picked, other])
    page.go_back()
    page.locator("svg.explore-svg").first.scroll_into_view_if_needed()
    box = page.locator("svg.explore-svg").first.bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.5)
    page.wait_for_url(f"**/projects/{SLUG}/trials/*")
    assert page.locator("h1").inner_text().startswith("exp_")


def test_a_bad_parameter_is_a_page_naming_it(page) -> None:  # type: ignore[no-untyped-def]
    response = page.goto(f"/projects/{SLUG}/explore?metric=loss&band=wide")
    assert response is not None and response.status == 400
    assert "band" in page.locator("main").inner_text()
