"""Phones and accessibility in Debian's Chromium against a real ``lineage serve`` (issue 35),
on an autoresearch-shaped loop (crash rows holding 0 and "-"), a fieldkit-shaped one and
a trainer-client one (tests/web/words_projects.py):

* axe-core (npm, pinned: :data:`AXE_VERSION`, installed like the MCP Inspector into
  ~/.cache/lineage-tests) finds no serious or critical violation on the index, dashboard,
  trials, trial, compare, explorer, knobs, tree and upload pages, at 1280 px and 390 px;
* at 390 px no page scrolls sideways, the trials table is a list of cards with the
  hypothesis on screen, and the filters fold away;
* the knob view's parallel coordinates brush by dragging, and the brush is in the URL.

Screenshots of every page at 1280×800 and 390×844 land in ``$LINEAGE_SHOTS`` (default
``test-output/screenshots/words/``, gitignored) for a person to look at.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from lineage.service import Ledger
from tests.servers import serving
from tests.web.test_browser import browser, new_context  # noqa: F401 - the browser fixture
from tests.web.words_projects import AR, FK, TEL, load_all

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("LINEAGE_SHOTS") or ROOT / "test-output" / "screenshots" / "words")
#: The pinned axe-core (tests/run_all.sh installs the same version).
AXE_VERSION = "4.10.3"
AXE_DIR = Path(
    os.environ.get("LINEAGE_AXE_DIR") or Path.home() / ".cache" / "lineage-tests" / f"axe-core-{AXE_VERSION}"
)
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
#: axe impacts that fail the test
SERIOUS = ("serious", "critical")


@pytest.fixture(scope="module")
def axe_source() -> str:
    script = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
    if not script.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: axe-core cannot be fetched")
        done = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(AXE_DIR),
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                f"axe-core@{AXE_VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0 or not script.exists():
            pytest.skip(f"npm could not fetch axe-core@{AXE_VERSION}: {(done.stderr or done.stdout).strip()[-300:]}")
    return script.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("words-serve")
    ledger = Ledger.open(str(workdir / "lineage.db"))
    load_all(ledger, n_ar=400)
    ledger.close()
    SHOTS.mkdir(parents=True, exist_ok=True)
    with serving(workdir) as base:
        yield base


def pages_to_check() -> list[tuple[str, str]]:
    return [
        ("index", "/"),
        ("dashboard", f"/projects/{AR}"),
        ("trials", f"/projects/{AR}/trials"),
        ("trial", f"/projects/{AR}/trials/005"),
        ("compare", f"/projects/{AR}/compare?exp=003&exp=005"),
        ("explorer", f"/projects/{TEL}/explore?group=extra.wd"),
        ("knobs", f"/projects/{AR}/knobs"),
        ("tree", f"/projects/{AR}/tree"),
        ("upload", "/upload"),
        ("trials-fieldkit", f"/projects/{FK}/trials"),
        ("knobs-telemetry", f"/projects/{TEL}/knobs"),
    ]


def tab(browser, base: str, viewport: dict):  # type: ignore[no-untyped-def]
    options: dict = {"base_url": base, "viewport": viewport}
    if viewport["width"] < 500:
        options.update(is_mobile=True, has_touch=True)
    context = new_context(browser, **options)
    return context, context.new_page()


def axe_problems(page, source: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The serious and critical axe violations of the page (rule, impact, a few targets)."""
    page.evaluate(source + "\n;0")  # through the debugger protocol: the page's CSP stays strict
    result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes'][:3]]}"
        for v in result["violations"]
        if v["impact"] in SERIOUS
    ]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_no_serious_axe_violation_on_any_page(browser, site, axe_source, viewport) -> None:  # type: ignore[no-untyped-def]
    context, page = tab(browser, site, viewport)
    found = {}
    for name, path in pages_to_check():
        page.goto(path)
        page.wait_for_load_state("load")
        problems = axe_problems(page, axe_source)
        if problems:
            found[name] = problems
        suffix = "d" if viewport is DESKTOP else "m"
        page.screenshot(path=str(SHOTS / f"{name}-{suffix}.png"), full_page=viewport is DESKTOP)
    context.close()
    assert not found, found


def test_no_page_scrolls_sideways_on_a_phone(browser, site) -> None:  # type: ignore[no-untyped-def]
    context, page = tab(browser, site, PHONE)
    wide = {}
    for name, path in pages_to_check():
        page.goto(path)
        width = page.evaluate("() => document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            wide[name] = width
    context.close()
    assert not wide, wide


def test_on_a_phone_trials_are_cards_with_the_hypothesis_and_the_filters_fold(browser, site) -> None:  # type: ignore[no-untyped-def]
    context, page = tab(browser, site, PHONE)
    page.goto(f"/projects/{AR}/trials")
    fold = page.locator("details.filters-fold")
    assert fold.count() == 1 and not fold.evaluate("d => d.open")
    first = page.locator("table.trials tbody tr").first
    hyp = first.locator("td.hyp")
    box = hyp.bounding_box()
    assert box is not None and hyp.is_visible() and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    assert "->" in hyp.inner_text()  # the description, as written
    assert box["y"] < PHONE["height"]  # on the first screen, not below a form
    # a card is compact: at least five trials fit on two screens
    fifth = page.locator("table.trials tbody tr").nth(4).bounding_box()
    assert fifth is not None and fifth["y"] < 2 * PHONE["height"]
    fold.locator("> summary").click()
    assert page.locator('input[name="filter"]').is_visible()
    page.screenshot(path=str(SHOTS / "trials-filters-open-m.png"))
    context.close()


def test_dragging_on_a_parallel_axis_brushes_and_writes_the_url(browser, site) -> None:  # type: ignore[no-untyped-def]
    context, page = tab(browser, site, DESKTOP)
    page.goto(f"/projects/{AR}/knobs")
    axis = page.locator('figure[data-plot="knob-parallel"] g.pc-axis[data-key="metric"] rect.pc-hit')
    axis.scroll_into_view_if_needed()
    box = axis.bounding_box()  # in the viewport now: the mouse moves in its coordinates
    assert box is not None
    x = box["x"] + box["width"] / 2
    page.mouse.move(x, box["y"] + box["height"] * 0.1)
    page.mouse.down()
    page.mouse.move(x, box["y"] + box["height"] * 0.3, steps=5)
    page.mouse.up()
    assert "brush=metric" in page.url.replace("%3A", ":")
    dimmed = page.locator("path.pc.pc-dim").count()
    total = page.locator("path.pc").count()
    assert 0 < dimmed < total
    assert "trials in the brush" in page.locator("#brush-status").inner_text()
    page.screenshot(path=str(SHOTS / "knobs-brushed-d.png"), full_page=True)
    page.reload()  # the server draws the same brush from the URL
    assert page.locator("path.pc.pc-dim").count() == dimmed
    context.close()
