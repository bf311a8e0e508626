"""The knob view and the column picker in a real browser: Debian's Chromium (Playwright)
against a real ``lineage serve`` holding the 2,000-trial autoresearch loop. Screenshots
(1280×800 and 390 px wide) land in test-output/screenshots/."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from lineage.service import Ledger
from tests.servers import serving
from tests.web.loop_project import LoopProject, load_loop_project
from tests.web.test_browser import SHOTS, browser, new_context  # noqa: F401 - the browser fixture

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def loop_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, LoopProject]]:
    workdir = tmp_path_factory.mktemp("loop")
    ledger = Ledger.open(str(workdir / "lineage.db"))
    made = load_loop_project(ledger)
    ledger.close()
    with serving(workdir) as base:
        yield base, made


def open_page(browser, base: str, width: int = 1280, height: int = 800):  # type: ignore[no-untyped-def]
    context = new_context(browser, base_url=base, viewport={"width": width, "height": height})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    return context, tab, problems


def test_knob_view_draws_the_loop_and_clicks_through(browser, loop_server) -> None:  # type: ignore[no-untyped-def]
    base, made = loop_server
    context, tab, problems = open_page(browser, base)
    tab.goto(f"/projects/{made.slug}/knobs")
    scatter = tab.locator('figure[data-plot="knob-scatter"] svg')
    scatter.wait_for(state="visible")
    box = scatter.bounding_box()
    assert box is not None and box["width"] > 800 and box["height"] > 300
    assert scatter.locator("a[data-exp]").count() == made.trials  # every trial has memory_gb
    assert scatter.locator("path.chainline").count() == 1 and scatter.locator("circle.pt-best-ring").count() == 1
    tab.locator('nav.tabs a[aria-current="page"]', has_text="Knobs").wait_for()
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / "knobs-1280.png"), full_page=False)
    # click the best trial's dot: its page
    best = scatter.locator(f'a[data-exp="{made.best_exp}"]')
    best.dispatch_event("click")
    tab.wait_for_url(re.compile(rf"/trials/{made.best_exp}$"))
    assert tab.locator("h1").inner_text().startswith(f"exp_{made.best_exp}")
    # changing the knob applies at once (script), to a category axis
    tab.goto(f"/projects/{made.slug}/knobs")
    tab.select_option('select[name="x"]', "extra.commit")
    tab.wait_for_url(re.compile(r"x=extra.commit"))
    assert "one band per value" in tab.locator("#scatter-h").inner_text()
    # a telemetry summary on a log scale
    tab.goto(f"/projects/{made.slug}/knobs?x=telemetry.train_loss.last&log=1&axes=extra.memory_gb,telemetry.lr.last")
    assert tab.locator('figure[data-plot="knob-scatter"] a[data-exp]').count() == len(made.with_telemetry)
    assert tab.locator('figure[data-plot="knob-parallel"] path.pc').count() >= len(made.with_telemetry)
    tab.screenshot(path=str(SHOTS / "knobs-telemetry-1280.png"), full_page=True)
    context.close()
    assert not problems, problems


def test_column_picker_applies_with_script_and_pages_fit_a_phone(browser, loop_server) -> None:  # type: ignore[no-untyped-def]
    base, made = loop_server
    context, tab, problems = open_page(browser, base)
    tab.goto(f"/projects/{made.slug}/trials")
    tab.locator("details.col-picker summary").click()
    tab.locator('details.col-picker input[value="extra.commit"]').uncheck()
    tab.wait_for_url(re.compile(r"cols="))
    cols = re.search(r"cols=([^&]+)", tab.url).group(1)  # type: ignore[union-attr]
    assert "extra.commit" not in cols and "extra.memory_gb" in cols.replace("%2C", ",")
    heads = tab.locator("table.trials thead th").all_inner_texts()
    assert "memory_gb" in heads and "commit" not in heads
    tab.screenshot(path=str(SHOTS / "trials-picker-1280.png"), full_page=False)
    for url, name in (
        (f"/projects/{made.slug}/compare?exp={made.best_exp},{made.exp_ids[1]}", "compare"),
        (f"/projects/{made.slug}/trials/{made.best_exp}", "trial"),
        (f"/projects/{made.slug}/chain", "chain"),
        (f"/projects/{made.slug}/tree?focus={made.best_exp}", "tree"),
    ):
        tab.goto(url)
        tab.screenshot(path=str(SHOTS / f"{name}-cols-1280.png"), full_page=False)
    context.close()
    phone, small, more = open_page(browser, base, width=390, height=844)
    for url, name in (
        (f"/projects/{made.slug}/knobs", "knobs"),
        (f"/projects/{made.slug}/trials", "trials"),
        (f"/projects/{made.slug}/trials/{made.best_exp}", "trial"),
    ):
        small.goto(url)
        small.screenshot(path=str(SHOTS / f"{name}-390.png"), full_page=False)
    small.goto(f"/projects/{made.slug}/knobs")
    # the figure fits the phone; its chart keeps a readable size and scrolls sideways
    figure = small.locator('figure[data-plot="knob-scatter"]').bounding_box()
    box = small.locator('figure[data-plot="knob-scatter"] svg').bounding_box()
    assert figure is not None and figure["x"] + figure["width"] <= 390
    assert box is not None and box["width"] >= 590 and box["height"] > 200
    phone.close()
    assert not problems and not more, problems + more
