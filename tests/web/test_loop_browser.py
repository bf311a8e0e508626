"""The pages of an autoresearch-style loop and of the demo in Debian's Chromium against a
real ``lineage serve`` (issue 20): the explorer's script draws sparse series, zooms and
pans, uses the status colours and 1-2-5 log ticks; at 390 px the dashboard chart opens
at the newest trials, the explorer chart is tall enough, the upload page fits and the tab
bar shows that it scrolls. Screenshots of every page kind, at 1280×800 and 390 px, land in
``test-output/screenshots/loop/`` (gitignored) for a person to look at."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from lineage.service import Ledger
from lineage.telemetry import check_points
from tests.servers import serving
from tests.web.conftest import SLUG, api_points, load_demo
from tests.web.loop_project import LoopProject, load_loop_project
from tests.web.test_browser import browser, new_context  # noqa: F401 - the browser fixture
from tests.web.test_charts import synthetic_points

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-output" / "screenshots" / "loop"
LOOP = "ar-loop"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, LoopProject]]:
    workdir = tmp_path_factory.mktemp("loop-serve")
    ledger = Ledger.open(str(workdir / "lineage.db"))
    loop = load_loop_project(ledger)
    load_demo(ledger)
    for exp_id in ("003", "004"):
        ledger.telemetry.ingest_telemetry(SLUG, exp_id, check_points(api_points(synthetic_points())))
    ledger.close()
    SHOTS.mkdir(parents=True, exist_ok=True)
    with serving(workdir) as base:
        yield base, loop


def tab(browser, base: str, viewport: dict, problems: list[str]):  # type: ignore[no-untyped-def]
    options = {"base_url": base, "viewport": viewport}
    if viewport["width"] < 500:
        options.update(is_mobile=True, has_touch=True)
    context = new_context(browser, **options)
    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    return context, page


def explore_figure(page):  # type: ignore[no-untyped-def]
    figure = page.locator("figure.explore-plot").first
    figure.locator("svg.explore-svg").wait_for()
    return figure


def texts(locator) -> list[str]:  # type: ignore[no-untyped-def]
    """The text of each element (SVG text has no innerText)."""
    return locator.evaluate_all("(es) => es.map(e => e.textContent)")


def mantissa(value: float) -> float:
    return round(value / 10 ** math.floor(math.log10(value)), 6)


def test_explorer_draws_the_sparse_eval_metric_above_the_fold(browser, site) -> None:  # type: ignore[no-untyped-def]
    base, loop = site
    problems: list[str] = []
    context, page = tab(browser, base, DESKTOP, problems)
    page.goto(f"/projects/{LOOP}/explore")
    figure = explore_figure(page)
    assert page.locator("h2#panel-0-h").inner_text().startswith("val_bpb")
    mean = figure.locator("svg.explore-svg path.ln.mean").first
    assert len(re.findall(r"L", mean.get_attribute("d") or "")) >= 4  # a line through the evals, not gaps
    assert figure.locator("svg.explore-svg circle.dot").count() >= 5  # and a marker on each
    box = figure.locator("svg.explore-svg").bounding_box()
    assert box is not None and box["y"] + box["height"] / 2 < DESKTOP["height"], box  # above the fold
    page.screenshot(path=str(SHOTS / "explore-loop-1280.png"))
    # log scale: tick labels are 1-2-5 numbers
    page.goto(f"/projects/{LOOP}/explore?metric=lr&log=1")
    figure = explore_figure(page)
    labels = [float(t) for t in texts(figure.locator("svg.explore-svg text[text-anchor=end]"))]
    assert len(labels) >= 3 and all(mantissa(v) in (1.0, 2.0, 5.0) for v in labels), labels
    context.close()
    assert not problems, problems


def test_explorer_zooms_and_pans_and_resets(browser, site) -> None:  # type: ignore[no-untyped-def]
    base, _ = site
    problems: list[str] = []
    context, page = tab(browser, base, DESKTOP, problems)
    page.goto(f"/projects/{LOOP}/explore?metric=train_loss")
    figure = explore_figure(page)

    def x_ticks() -> list[float]:
        return [
            float(t.replace(",", ""))
            for t in texts(figure.locator("svg.explore-svg text[text-anchor=middle]"))
            if re.fullmatch(r"[-\d.,e]+", t)
        ]

    before = x_ticks()
    box = figure.locator("svg.explore-svg").bounding_box()
    assert box is not None
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.5, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=5)
    page.mouse.move(box["x"] + box["width"] * 0.75, y, steps=5)
    page.mouse.up()
    page.wait_for_function("document.querySelector('figure.explore-plot').classList.contains('zoomed')")
    zoomed = x_ticks()
    assert min(zoomed) > min(before) and max(zoomed) < max(before), (before, zoomed)
    page.screenshot(path=str(SHOTS / "explore-zoomed-1280.png"))
    page.get_by_role("button", name="pan right").click()
    panned = x_ticks()
    assert min(panned) > min(zoomed), (zoomed, panned)
    page.locator("figure.explore-plot svg.explore-svg").dblclick()
    page.wait_for_function("!document.querySelector('figure.explore-plot').classList.contains('zoomed')")
    assert x_ticks() == before
    assert f"/projects/{LOOP}/explore" in page.url  # no click went through to a trial
    context.close()
    assert not problems, problems


def test_trial_page_telemetry_zooms_and_resets(browser, site) -> None:  # type: ignore[no-untyped-def]
    base, loop = site
    problems: list[str] = []
    context, page = tab(browser, base, DESKTOP, problems)
    page.goto(f"/projects/{LOOP}/trials/{loop.with_telemetry[-1]}")
    assert page.locator('figure[data-plot="x-val_bpb"] svg.grid-svg circle').count() == 5  # an eval every 250 steps
    figure = page.locator('figure[data-plot="x-train_loss"]')
    svg = figure.locator("svg.grid-svg")
    svg.scroll_into_view_if_needed()

    def x_ticks() -> list[float]:
        return [float(t.replace(",", "")) for t in texts(svg.locator("text.xt")) if t]

    before = x_ticks()
    box = svg.bounding_box()
    assert box is not None and before
    y = box["y"] + box["height"] * 0.4
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.45, y, steps=5)
    page.mouse.move(box["x"] + box["width"] * 0.55, y, steps=5)
    page.mouse.up()
    page.wait_for_function("document.querySelector('figure[data-plot=\"x-train_loss\"]').classList.contains('zoomed')")
    zoomed = x_ticks()
    assert min(zoomed) > min(before) and max(zoomed) < max(before), (before, zoomed)
    page.screenshot(path=str(SHOTS / "trial-zoomed-1280.png"))
    figure.get_by_role("button", name="show every step (or double-click the chart)").click()
    assert x_ticks() == before and "zoomed" not in (figure.get_attribute("class") or "")
    context.close()
    assert not problems, problems


def test_explorer_grouped_by_status_draws_the_status_colours(browser, site) -> None:  # type: ignore[no-untyped-def]
    base, _ = site
    problems: list[str] = []
    context, page = tab(browser, base, DESKTOP, problems)
    page.goto(f"/projects/{SLUG}/explore?metric=core_metric&group=status&select=filter")
    kept = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--kept').trim()")

    def rgb(hex_colour: str) -> str:
        h = hex_colour.lstrip("#")
        return f"rgb({int(h[0:2], 16)}, {int(h[2:4], 16)}, {int(h[4:6], 16)})"

    explore_figure(page)
    by_group = page.evaluate("""() => {
        const data = JSON.parse(document.getElementById('explore-data').textContent);
        const out = {};
        document.querySelectorAll('figure.explore-plot svg.explore-svg circle.dot').forEach(d => {
            const t = data.answer.trials.find(t => t.exp_id === d.getAttribute('data-exp'));
            out[t.status] = getComputedStyle(d).fill;
        });
        return out;
    }""")
    assert by_group["keep"] == rgb(kept) == by_group["baseline"] and by_group["discard"] != rgb(kept), by_group
    swatch = page.locator(".explore-key .swatch").evaluate_all(
        "(s) => s.map(e => [e.parentElement.innerText.trim(), getComputedStyle(e).backgroundColor])"
    )
    assert dict(swatch).get("keep") == rgb(kept), swatch
    context.close()
    assert not problems, problems


def test_phone_width_pages(browser, site) -> None:  # type: ignore[no-untyped-def]
    base, _ = site
    problems: list[str] = []
    context, page = tab(browser, base, PHONE, problems)
    page.goto(f"/projects/{LOOP}")
    plot = page.locator(".wide-plot")
    scroll = plot.evaluate("e => [e.scrollLeft, e.scrollWidth - e.clientWidth]")
    assert scroll[1] > 0 and scroll[0] >= scroll[1] - 2, scroll  # opens at the newest trials
    tabs = page.locator("nav.tabs")
    assert tabs.evaluate("e => e.scrollWidth > e.clientWidth")
    assert tabs.evaluate("e => getComputedStyle(e).maskImage || getComputedStyle(e).webkitMaskImage") not in (
        "",
        "none",
    )
    page.goto(f"/projects/{LOOP}/explore")
    svg = explore_figure(page).locator("svg.explore-svg")
    box = svg.bounding_box()
    assert box is not None and box["height"] >= 220, box
    current = page.locator("nav.tabs [aria-current=page]").bounding_box()
    assert current is not None and current["x"] + current["width"] <= PHONE["width"], current  # the Explore tab in view
    page.goto("/upload")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"] + 2
    context.close()
    assert not problems, problems


def test_phone_dashboard_chart_keeps_its_y_axis_in_view(browser, site) -> None:  # type: ignore[no-untyped-def]
    """At 390 px the metric chart scrolls sideways (opening at its newest trials); its y
    axis labels stay in view beside the plot, at the chart's scale, at either end."""
    base, _ = site
    problems: list[str] = []
    context, page = tab(browser, base, PHONE, problems)
    page.goto(f"/projects/{LOOP}")
    plot = page.locator(".wide-plot")
    chart, strip = plot.locator("svg.chart"), plot.locator("svg.y-strip")
    axis_labels = texts(chart.locator('text.tick[text-anchor="end"]'))  # the y ticks (and "no metric")
    assert len(axis_labels) >= 3 and texts(strip.locator("text.tick")) == axis_labels
    for scroll in (None, 0):
        if scroll is not None:
            plot.evaluate(f"e => {{ e.scrollLeft = {scroll}; }}")
        box, frame = strip.bounding_box(), plot.bounding_box()
        assert box is not None and frame is not None
        assert frame["x"] - 1 <= box["x"] and box["x"] + box["width"] <= frame["x"] + frame["width"], (box, frame)
        assert abs(box["height"] - (chart.bounding_box() or {"height": 0})["height"]) < 1.5  # the chart's scale
        for label in strip.locator("text.tick").all():
            tick = label.bounding_box()
            assert tick is not None and tick["x"] >= frame["x"] - 1, tick  # readable, not scrolled away
    # on a wide screen the chart shows its own axis and the copy stays hidden
    context.close()
    context, page = tab(browser, base, DESKTOP, problems)
    page.goto(f"/projects/{LOOP}")
    assert not page.locator(".wide-plot svg.y-strip").is_visible()
    context.close()
    assert not problems, problems


PAGES = (
    ("index", "/"),
    ("dashboard-loop", f"/projects/{LOOP}"),
    ("dashboard-demo", f"/projects/{SLUG}"),
    ("tree-loop", f"/projects/{LOOP}/tree"),
    ("tree-demo", f"/projects/{SLUG}/tree"),
    ("trial-loop", f"/projects/{LOOP}/trials/1995"),
    ("trial-demo", f"/projects/{SLUG}/trials/004"),
    ("compare-loop", f"/projects/{LOOP}/compare?exp=1981&exp=1982&exp=1989&exp=1995"),
    ("compare-demo", f"/projects/{SLUG}/compare?exp=003&exp=004"),
    ("explore-loop", f"/projects/{LOOP}/explore"),
    ("explore-demo", f"/projects/{SLUG}/explore"),
    ("calibration-demo", f"/projects/{SLUG}/calibration"),
    ("upload", "/upload"),
)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_every_page_kind_fits_and_is_photographed(browser, site, viewport: dict) -> None:  # type: ignore[no-untyped-def]
    base, _ = site
    problems: list[str] = []
    context, page = tab(browser, base, viewport, problems)
    for name, url in PAGES:
        page.goto(url)
        page.wait_for_load_state("load")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= viewport["width"] + 2, (url, width)
        page.screenshot(path=str(SHOTS / f"{name}-{viewport['width']}.png"), full_page=True)
    context.close()
    assert not problems, problems
