"""The pages in a real browser: Debian's Chromium driven by Playwright against a real
``lineage serve --demo`` process on a free loopback port.

Screenshots of every page land in test-output/screenshots/ (gitignored) for a person to
look at. Never ``playwright install``: the browser is /usr/bin/chromium (apt-get install
chromium; tests/run_all.sh does it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lineage.service import Ledger
from tests.servers import serving
from tests.web.conftest import SLUG, XSS, api_points
from tests.web.test_charts import synthetic_points

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-output" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
#: Upper bounds on waits (a busy 2-core machine is slow; a page that is ready sooner is
#: used at once): Playwright's waits and actions, and the test's own HTTP requests.
PAGE_TIMEOUT_MS = 90_000
HTTP_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``lineage serve --demo`` in a fresh directory, plus a hostile trial recorded through
    the service while it runs, and telemetry of the best trial posted through the API."""
    workdir = tmp_path_factory.mktemp("serve")
    with serving(workdir, demo=True) as base:
        ledger = Ledger.open(str(workdir / "lineage.db"), upgrade=False)
        ledger.recording.record_trial(
            SLUG,
            {
                "exp_id": "006",
                "parent_exp": "004",
                "status": "discard",
                "core_metric": 34.5,
                "specialist": "<b>red-team</b>",
                "hypothesis": XSS,
                "notes": "# not a heading\n**not bold** <script>window.__xss=3</script>",
                "expected_delta": "+0.1 EM",
            },
        )
        ledger.close()
        for exp_id in ("003", "004"):
            posted = httpx.post(
                f"{base}/api/v1/projects/{SLUG}/trials/{exp_id}/telemetry",
                json={"points": api_points(synthetic_points())},
                timeout=HTTP_TIMEOUT_S,
            )
            assert posted.status_code == 201, posted.text
        yield base


@pytest.fixture(scope="module")
def closed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A server with a writer token and anonymous reading off; yields its URL and the token."""
    workdir = tmp_path_factory.mktemp("closed")
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "api.cli",
            "--db",
            str(workdir / "lineage.db"),
            "token",
            "create",
            "--name",
            "night-shift",
            "--role",
            "writer",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    secret = next(word for word in made.stdout.split() if word.startswith("llt_"))
    with serving(workdir, "--no-anonymous-read", demo=True) as base:
        yield base, secret


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (tests/run_all.sh does it)")
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def new_context(browser, **options: object):  # type: ignore[no-untyped-def]
    """``browser.new_context(**options)`` whose waits, actions and navigations may take up
    to PAGE_TIMEOUT_MS."""
    context = browser.new_context(**options)
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    context.set_default_navigation_timeout(PAGE_TIMEOUT_MS)
    return context


@pytest.fixture
def page(browser, server: str):  # type: ignore[no-untyped-def]
    """A page whose script errors and CSP violations fail the test."""
    context = new_context(browser, base_url=server, viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    # a 4xx page (the upload's error page is a 400) is logged as "Failed to load resource":
    # statuses are asserted where they matter, so only other console errors count
    tab.on(
        "console",
        lambda m: (
            problems.append(m.text) if m.type == "error" and not m.text.startswith("Failed to load resource") else None
        ),
    )
    yield tab
    context.close()
    assert not problems, problems


def shot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def assert_plot_drawn(locator, *, min_width: int = 100, min_height: int = 40, marks: int = 3) -> None:  # type: ignore[no-untyped-def]
    """A rendered, non-empty SVG: laid out with a size, holding drawn marks."""
    locator.wait_for(state="visible")
    box = locator.bounding_box()
    assert box is not None and box["width"] >= min_width and box["height"] >= min_height, box
    assert locator.locator("path, circle, rect, line").count() >= marks


def test_follow_the_chain_from_the_index_to_the_best_trial(page) -> None:  # type: ignore[no-untyped-def]
    page.goto("/")
    shot(page, "01-index")
    assert_plot_drawn(page.locator("svg.spark").first, min_height=30, marks=2)
    page.get_by_role("link", name=SLUG).click()
    page.wait_for_url(f"**/projects/{SLUG}")
    assert_plot_drawn(page.locator("#chart svg.chart").first)
    shot(page, "02-dashboard")
    chain = page.locator("ol.chain > li")
    assert chain.count() == 4
    assert "← BEST" in chain.last.inner_text()
    chain.last.get_by_role("link", name="exp_004").click()
    page.wait_for_url(f"**/projects/{SLUG}/trials/004")
    assert page.locator("h1").inner_text().startswith("exp_004")
    assert_plot_drawn(page.locator('figure[data-plot="chain"] svg'))
    assert_plot_drawn(page.locator('figure[data-plot="clip-summary"] svg'))
    assert page.locator('figure[data-plot="clip-summary"] rect.box').is_visible()
    for key in ("ig", "clip", "clip-frac", "adv", "kl"):  # telemetry posted through the API
        assert_plot_drawn(page.locator(f'figure[data-plot="{key}"] svg'))
    assert page.locator('figure[data-plot="ig"] path.ln').count() == 3  # one line per turn
    shot(page, "03-trial-best")


def test_copy_knowledge_button_copies_the_file(page, server: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/projects/{SLUG}")
    button = page.get_by_role("button", name="Copy KNOWLEDGE.md")
    button.click()
    status = page.locator(".copy-status")
    status.filter(has_text="Copied").wait_for()
    knowledge = httpx.get(f"{server}/projects/{SLUG}/knowledge.md", timeout=HTTP_TIMEOUT_S).text
    assert page.evaluate("navigator.clipboard.readText()") == knowledge


def test_compare_two_trials_picked_in_the_table(page) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/projects/{SLUG}/trials")
    shot(page, "04-trials")
    compare = page.locator("form.compare-form button[type=submit]")
    assert compare.is_disabled()
    page.get_by_label("compare exp_001").check()
    page.get_by_label("compare exp_003").check()
    assert compare.inner_text() == "Compare 2 selected"
    compare.click()
    page.wait_for_url("**/compare?*")
    assert sorted(page.url.split("?", 1)[1].split("&")) == ["exp=001", "exp=003"]
    assert page.locator("table.compare thead th").count() == 3
    diff = page.locator("#hyp-001, #hyp-003").last
    assert diff.locator("del").count() >= 1 and diff.locator("ins").count() >= 1
    assert_plot_drawn(page.locator('figure[data-plot="metrics"] svg'))
    shot(page, "05-compare")


def test_a_bad_tsv_upload_shows_the_line_numbered_error(page, server: str) -> None:  # type: ignore[no-untyped-def]
    good = httpx.get(f"{server}/projects/{SLUG}/trials?order=asc&format=tsv", timeout=HTTP_TIMEOUT_S).text
    lines = good.splitlines(keepends=True)
    cells = lines[2].split("\t")
    cells[9] = "thirty-four"  # core_metric of the second trial
    lines[2] = "\t".join(cells)
    page.goto("/upload")
    page.get_by_label("Project").fill("uploaded")
    page.get_by_label("File").set_input_files(
        files=[{"name": "results.tsv", "mimeType": "text/tab-separated-values", "buffer": "".join(lines).encode()}]
    )
    page.get_by_role("button", name="Import").click()
    error = page.locator("#upload-error")
    error.wait_for()
    assert "Line 3, column 10" in error.inner_text() and "core_metric" in error.inner_text()
    assert page.locator("table.offending td.bad").inner_text() == "thirty-four"
    shot(page, "06-upload-error")
    assert httpx.get(f"{server}/projects/uploaded", timeout=HTTP_TIMEOUT_S).status_code == 404


def test_hostile_hypothesis_renders_as_text_and_runs_nothing(page) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/projects/{SLUG}/trials/006")
    assert page.locator("#hypothesis").inner_text() == XSS
    assert "<script>window.__xss=3</script>" in page.locator("#notes").inner_text()
    assert page.locator("#notes h1").count() == 0 and page.locator("#notes strong").count() == 0
    assert page.evaluate("typeof window.__xss") == "undefined"
    shot(page, "07-xss-trial")
    for url in (
        f"/projects/{SLUG}",
        f"/projects/{SLUG}/tree?focus=006",
        f"/projects/{SLUG}/trials",
        f"/projects/{SLUG}/compare?exp=004&exp=006",
        f"/projects/{SLUG}/chain?to=006",
    ):
        page.goto(url)
        page.wait_for_load_state("load")
        assert page.evaluate("typeof window.__xss") == "undefined", url
        assert page.locator("img[src=x]").count() == 0, url
        assert "<script>window.__xss=1</script>" in page.locator("main").inner_text(), url


def test_tree_collapses_expands_and_highlights_the_chain(page) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/projects/{SLUG}/tree")
    on_chain = page.locator("ul.tree li.on-chain")
    assert on_chain.count() == 4
    assert page.locator("#t-002").evaluate("e => getComputedStyle(e).opacity") in ("0.62", "1")  # leaf row itself
    shot(page, "08-tree")
    page.get_by_role("button", name="Collapse all").click()
    assert page.locator("ul.tree details[open]").count() == 0
    assert not page.locator("#t-004").is_visible()
    page.get_by_role("button", name="Expand all").click()
    assert page.locator("#t-004").is_visible()
    page.goto(f"/projects/{SLUG}/tree?focus=005#t-005")
    assert page.locator("#t-005").is_visible() and "◆ focus" in page.locator("#t-005").inner_text()


def test_calibration_page_draws_a_scatter_per_specialist(page) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/projects/{SLUG}/calibration")
    panels = page.locator("section.panel svg.chart")
    assert panels.count() == 5  # 001, 003, 004, 006 and 002 state a number and have a delta
    assert_plot_drawn(panels.first)
    shot(page, "09-calibration")


def test_phone_width_has_no_sideways_scrolling(browser, server: str) -> None:  # type: ignore[no-untyped-def]
    context = new_context(browser, base_url=server, viewport={"width": 390, "height": 844}, is_mobile=True)
    tab = context.new_page()
    for name, url in (
        ("10-phone-dashboard", f"/projects/{SLUG}"),
        ("11-phone-trial", f"/projects/{SLUG}/trials/004"),
        ("12-phone-tree", f"/projects/{SLUG}/tree"),
    ):
        tab.goto(url)
        width = tab.evaluate("document.documentElement.scrollWidth")
        assert width <= 392, (url, width)
        tab.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    context.close()


def test_dark_mode_is_dark_and_readable(browser, server: str) -> None:  # type: ignore[no-untyped-def]
    context = new_context(browser, base_url=server, viewport={"width": 1280, "height": 900}, color_scheme="dark")
    tab = context.new_page()
    tab.goto(f"/projects/{SLUG}")
    background = tab.evaluate("getComputedStyle(document.body).backgroundColor")
    text = tab.evaluate("getComputedStyle(document.body).color")
    channels = lambda css: [int(x) for x in css[css.index("(") + 1 : css.index(")")].split(",")[:3]]  # noqa: E731
    assert sum(channels(background)) < 150 and sum(channels(text)) > 500
    tab.screenshot(path=str(SHOTS / "13-dark-dashboard.png"), full_page=True)
    tab.goto(f"/projects/{SLUG}/trials/004")
    tab.screenshot(path=str(SHOTS / "14-dark-trial.png"), full_page=True)
    context.close()


def test_login_with_a_token_opens_closed_pages_and_the_upload(browser, closed_server: tuple[str, str]) -> None:  # type: ignore[no-untyped-def]
    base, secret = closed_server
    context = new_context(browser, base_url=base, viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.goto(f"/projects/{SLUG}/tree")
    tab.wait_for_url("**/login?next=*")
    shot(tab, "15-login")
    tab.get_by_label("Token").fill(secret[:-2] + "xx")
    tab.get_by_role("button", name="Log in").click()
    assert "not valid" in tab.locator("p.problem").inner_text()
    tab.get_by_label("Token").fill(secret)
    tab.get_by_role("button", name="Log in").click()
    tab.wait_for_url(f"**/projects/{SLUG}/tree")
    assert tab.locator("ul.tree li").count() >= 6
    cookie = next(c for c in context.cookies() if c["name"] == "lineage_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    tab.goto("/upload")
    good = httpx.get(
        f"{base}/projects/{SLUG}/trials?order=asc&format=tsv",
        cookies={"lineage_session": secret},
        timeout=HTTP_TIMEOUT_S,
    ).text
    tab.get_by_label("Project").fill("copied")
    tab.get_by_label("File").set_input_files(
        files=[{"name": "results.tsv", "mimeType": "text/tab-separated-values", "buffer": good.encode()}]
    )
    tab.get_by_role("button", name="Import").click()
    tab.get_by_text("Imported 6 trials into copied").wait_for()
    shot(tab, "16-upload-after-login")
    context.close()


def test_dark_mode_at_phone_width(browser, server: str) -> None:  # type: ignore[no-untyped-def]
    context = new_context(
        browser, base_url=server, viewport={"width": 390, "height": 844}, is_mobile=True, color_scheme="dark"
    )
    tab = context.new_page()
    for name, url in (
        ("17-phone-dark-dashboard", f"/projects/{SLUG}"),
        ("18-phone-dark-trial", f"/projects/{SLUG}/trials/004"),
    ):
        tab.goto(url)
        assert tab.evaluate("document.documentElement.scrollWidth") <= 392, url
        assert tab.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
        tab.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    context.close()


def test_an_autoresearch_trial_page_shows_its_code_change(page, server: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from lineage import loops

    repo = tmp_path / "repo"
    repo.mkdir()
    env = {
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@x",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@x",
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
    }
    git = lambda *args: subprocess.run(  # noqa: E731
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout.strip()
    git("init", "-q", "-b", "main")
    shas = []
    for subject, body in (("baseline", "lr = 0.01\nwarmup = 0\n"), ("raise the LR", "lr = 0.04\nwarmup = 0\n")):
        (repo / "train.py").write_text(body, encoding="utf-8")
        git("add", "train.py")
        git("commit", "-q", "-m", subject)
        shas.append(git("rev-parse", "--short=7", "HEAD"))
    results = tmp_path / "results.tsv"
    results.write_text(
        "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n"
        f"{shas[0]}\t0.997900\t44.0\tkeep\tbaseline\n{shas[1]}\t0.993200\t44.2\tkeep\traise the LR\n"
        "c3d4e5f\t0.000000\t0.0\tcrash\tdouble width (OOM)\n",
        encoding="utf-8",
    )
    loops.RemoteSync(server, None, "nightly", results, git_repo=repo).sync()  # over the HTTP API
    page.goto("/projects/nightly/trials/001")
    section = page.locator("#code-change")
    assert "raise the LR" in section.inner_text()
    assert page.locator("#code-change pre.patch .add").first.inner_text() == "+lr = 0.04"
    assert page.locator("#code-change pre.patch .del").first.inner_text() == "-lr = 0.01"
    shot(page, "19-autoresearch-trial-code-change")
    page.goto("/projects/nightly")
    assert "exp_001" in page.locator(".best-line").inner_text()  # the crash row's 0.000000 is no result
    shot(page, "20-autoresearch-dashboard")
