"""The charts of issue 35 in a real browser: Debian's Chromium (Playwright) against a real
``lineage serve`` holding the plateau (4 keeps, 2,000 discards) and the telemetry runs
(a sparse val_loss, one diverged run with an alert, one trial still running).
Screenshots at 1280×800 and 390×844 land in test-output/screenshots/."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from lineage.service import Ledger
from tests.servers import serving
from tests.web.chart_projects import ALERT_STEP, PLATEAU, TELEMETRY, ChartProjects, load_chart_projects, more_points
from tests.web.test_browser import SHOTS, browser, new_context  # noqa: F401 - the browser fixture

pytestmark = pytest.mark.slow

SIZES = ((1280, 800, "d"), (390, 844, "m"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ChartProjects, str]]:
    workdir = tmp_path_factory.mktemp("charts")
    ledger = Ledger.open(str(workdir / "lineage.db"))
    made = load_chart_projects(ledger)
    ledger.close()
    with serving(workdir) as base:
        yield base, made, str(workdir / "lineage.db")


def open_tab(browser, base: str, width: int = 1280, height: int = 800):  # type: ignore[no-untyped-def]
    context = new_context(browser, base_url=base, viewport={"width": width, "height": height})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    return context, tab, problems


def shoot(tab, name: str, selector: str | None = None) -> None:  # type: ignore[no-untyped-def]
    SHOTS.mkdir(parents=True, exist_ok=True)
    if selector:
        tab.locator(selector).first.scroll_into_view_if_needed()
    tab.screenshot(path=str(SHOTS / f"charts-{name}.png"))


def test_the_plateau_dashboard_shows_every_trial_and_the_kept_range_on_request(browser, site) -> None:  # type: ignore[no-untyped-def]
    base, made, _ = site
    for width, height, tag in SIZES:
        context, tab, problems = open_tab(browser, base, width, height)
        tab.goto(f"/projects/{PLATEAU}#chart")
        chart = tab.locator("figure.wide-plot svg.chart")
        discards = chart.locator("circle.pt-discarded").count()
        assert discards >= 950  # of the 1,000 trials in the window, nearly all on the axis
        assert chart.locator("path.pt-edge").count() <= 40
        shoot(tab, f"plateau-{tag}", "#chart")
        tab.get_by_role("link", name="the kept trials").click()
        tab.wait_for_url(re.compile(r"range=kept"))
        edges = tab.locator("figure.wide-plot svg.chart path.pt-edge").count()
        assert 0 < edges <= 120  # one marker per few pixels, not a strip of 900 triangles
        note = tab.locator("p.chart-range").inner_text()
        assert re.search(r"\d[\d,]* trials below 0\.9", note), note
        shoot(tab, f"plateau-kept-{tag}", "#chart")
        context.close()
        assert not problems, problems


def test_the_trial_grid_has_search_log_cap_full_screen_snapping_hover_and_alert_marks(browser, site) -> None:  # type: ignore[no-untyped-def]
    base, made, _ = site
    context, tab, problems = open_tab(browser, base)
    tab.goto(f"/projects/{TELEMETRY}/trials/{made.diverged}#telemetry")
    figures = tab.locator("#telemetry figure[data-plot]")
    assert figures.count() == 4 and tab.locator("svg.grid-svg").count() == 4
    assert tab.locator("svg.grid-svg line.vl").count() == 4  # the alert at step 320 on every chart
    # hover the sparse val_loss anywhere: it snaps to the nearest logged point
    val = tab.locator('figure[data-plot="x-val_loss"]')
    box = val.locator("svg.grid-svg").bounding_box()
    assert box is not None
    tab.mouse.move(box["x"] + box["width"] * 0.37, box["y"] + box["height"] * 0.5)
    tip = val.locator(".grid-tip")
    tip.wait_for(state="visible")
    assert re.search(r"val_loss: [\d.]+ at step \d+", tip.inner_text()), tip.inner_text()
    shoot(tab, "trial-hover-d", "#telemetry")
    # per chart log scale
    grad = tab.locator('figure[data-plot="x-grad_norm"]')
    grad.get_by_role("button", name="log scale for this chart").click()
    assert "log scale" in (grad.locator("svg.grid-svg").get_attribute("aria-label") or "")
    # search
    tab.get_by_role("searchbox", name="search the charts by name").fill("grad")
    assert tab.locator("#telemetry figure[data-plot]:visible").count() == 1
    tab.get_by_role("searchbox", name="search the charts by name").fill("")
    # full screen, Esc closes
    grad.get_by_role("button", name="full screen (Esc closes)").click()
    full = grad.bounding_box()
    assert full is not None and full["width"] >= 1200
    shoot(tab, "trial-full-d")
    tab.keyboard.press("Escape")
    assert "full" not in (grad.get_attribute("class") or "")
    # smoothing keeps the raw curve, faint, behind the smoothed one
    tab.locator(".tgrid-bar input[type=range]").fill("0.8")
    assert tab.locator('figure[data-plot="x-train_loss"] path.ln.raw').count() == 1
    shoot(tab, "trial-smooth-d", "#telemetry")
    context.close()
    assert not problems, problems


def test_compare_caps_the_diverged_run_and_says_what_it_hid(browser, site) -> None:  # type: ignore[no-untyped-def]
    base, made, _ = site
    for width, height, tag in SIZES:
        context, tab, problems = open_tab(browser, base, width, height)
        tab.goto(f"/projects/{TELEMETRY}/compare?exp={','.join(made.runs)}#telemetry")
        grad = tab.locator('figure[data-plot="cmp-grad_norm"]')
        note = grad.locator("svg.grid-svg text.cap-note").text_content() or ""
        assert re.fullmatch(r"\d+ points above [\d.]+ hidden", note), note
        shoot(tab, f"compare-{tag}", "#telemetry")
        grad.get_by_role("button", name="hide outliers in this chart (it says how many)").click()
        assert grad.locator("svg.grid-svg text.cap-note").count() == 0
        context.close()
        assert not problems, problems


def test_the_explorer_hover_names_a_value_for_a_sparse_series(browser, site) -> None:  # type: ignore[no-untyped-def]
    base, made, _ = site
    context, tab, problems = open_tab(browser, base)
    tab.goto(f"/projects/{TELEMETRY}/explore?metric=val_loss&band=none")
    assert "every logged point" in tab.locator(".explore-panel h2").first.inner_text()
    svg = tab.locator("svg.explore-svg").first
    box = svg.bounding_box()
    assert box is not None
    tab.mouse.move(box["x"] + box["width"] * 0.43, box["y"] + box["height"] * 0.6)
    tip = tab.locator("#explore-tip")
    tip.wait_for(state="visible")
    assert re.search(r"exp_\d+: [\d.]+ at \d+", tip.inner_text()), tip.inner_text()
    shoot(tab, "explore-hover-d")
    tab.goto(f"/projects/{TELEMETRY}/explore?metric=train_loss&metric=grad_norm&group=status&band=std&smooth=0.9&log=1")
    tab.locator("svg.explore-svg").first.wait_for()
    shoot(tab, "explore-log-band-d", ".explore-panel")
    context.close()
    assert not problems, problems


def test_a_running_trial_page_shows_new_points_while_it_runs(browser, site) -> None:  # type: ignore[no-untyped-def]
    base, made, db = site
    for width, height, tag in SIZES:
        context, tab, problems = open_tab(browser, base, width, height)
        tab.goto(f"/projects/{TELEMETRY}/trials/{made.running}#telemetry")
        assert tab.locator("#telemetry[data-live]").count() == 1
        shoot(tab, f"running-{tag}", "#telemetry")
        context.close()
        assert not problems, problems
    context, tab, problems = open_tab(browser, base)
    tab.goto(f"/projects/{TELEMETRY}/trials/{made.running}#telemetry")
    ticks = tab.locator('figure[data-plot="x-train_loss"] svg.grid-svg text.xt')
    assert "300" not in ticks.all_text_contents()
    ledger = Ledger.open(db, upgrade=False)
    more_points(ledger, made.running, 205, 400)
    ledger.close()
    tab.wait_for_function(
        """() => [...document.querySelectorAll('figure[data-plot="x-train_loss"] svg.grid-svg text.xt')]
                 .some(t => t.textContent === "400")""",
        timeout=60_000,
    )
    assert ALERT_STEP  # the running trial has no alert: its charts carry no marks
    assert tab.locator("svg.grid-svg line.vl").count() == 0
    context.close()
    assert not problems, problems
