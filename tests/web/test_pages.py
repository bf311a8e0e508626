"""The web pages through the ASGI app, on SQLite and PostgreSQL: status codes, content,
escaping, errors as HTML pages."""

from __future__ import annotations

import csv
import io
import re
from html import unescape

import pytest
from fastapi.testclient import TestClient

from lineage.formats.fieldkit import read_trials
from lineage.service import Ledger
from tests.web.conftest import SLUG, XSS


def text_of(html: str) -> str:
    """The visible text of a page, roughly (tags dropped, entities decoded)."""
    return unescape(re.sub(r"<[^>]+>", " ", html))


def test_index_lists_the_demo_with_its_best_and_a_sparkline(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    html = response.text
    assert f'href="/projects/{SLUG}"' in html
    assert f'href="/projects/{SLUG}/trials/004">exp_004</a>' in html and "34.960000" in html
    assert 'class="spark"' in html and '<path class="runbest"' in html
    assert "exp_005" in html  # the latest trial


def test_dashboard_shows_the_chain_to_the_best_with_links_in_order(client: TestClient) -> None:
    html = client.get(f"/projects/{SLUG}").text
    chain = html.split('<ol class="chain">', 1)[1].split("</ol>", 1)[0]
    links = re.findall(r'href="/projects/a2tgpo-demo/trials/(\d+)">exp_\d+</a>', chain)
    assert links == ["000", "001", "003", "004"]
    assert chain.count("← BEST") == 1 and "exp_002" not in chain
    assert "metric=34.960000, Δ=+0.450000" in text_of(chain)


def test_dashboard_chart_draws_kept_discarded_failed_and_the_running_best(client: TestClient) -> None:
    html = client.get(f"/projects/{SLUG}").text
    chart = html.split('id="chart"', 1)[1].split('<figure class="plot wide-plot">', 1)[1].split("</figure>", 1)[0]
    assert chart.count('class="pt pt-kept"') == 4  # 000 baseline, 001, 003, 004
    assert chart.count('class="pt pt-discarded"') == 1  # 002
    assert chart.count('class="rug rug-failed"') == 1  # 005: no metric
    assert '<path class="runbest"' in chart and 'class="pt-best-ring"' in chart
    assert "exp_005 · eval_budget_overrun · metric —" in chart


def test_dashboard_counts_failure_labels_and_links_to_the_filtered_table(client: TestClient) -> None:
    html = client.get(f"/projects/{SLUG}").text
    assert f'href="/projects/{SLUG}/trials?status=keep"' in html
    assert "keep: 3" in html and "eval_budget_overrun: 1" in html


def test_dashboard_links_knowledge_and_the_raw_prompt(client: TestClient, demo: Ledger) -> None:
    html = client.get(f"/projects/{SLUG}").text
    assert f'data-copy-url="/projects/{SLUG}/knowledge.md"' in html
    assert f'href="/api/v1/projects/{SLUG}/prompt?raw=1"' in html
    response = client.get(f"/projects/{SLUG}/knowledge.md")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/markdown")
    assert response.text == demo.agent.render_knowledge(SLUG)


def test_every_page_sends_a_strict_content_security_policy(client: TestClient) -> None:
    for url in ("/", f"/projects/{SLUG}", f"/projects/{SLUG}/trials/004", "/nope-not-a-page-of-ours" and "/upload"):
        policy = client.get(url).headers["content-security-policy"]
        assert "script-src 'self'" in policy and "default-src 'self'" in policy


@pytest.mark.parametrize(
    "url",
    [
        "/projects/nope",
        "/projects/nope/tree",
        "/projects/nope/trials",
        "/projects/nope/calibration",
        f"/projects/{SLUG}/trials/999",
        f"/projects/{SLUG}/compare?exp=000&exp=999",
        f"/projects/{SLUG}/tree?root=999",
        f"/projects/{SLUG}/chain?to=999",
        "/projects/nope/knowledge.md",
        "/projects/nope/trials?format=tsv",
    ],
)
def test_unknown_project_or_trial_is_a_404_html_page(client: TestClient, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "Not found" in response.text and "not found" in text_of(response.text)


@pytest.mark.parametrize(
    "url",
    [
        f"/projects/{SLUG}/trials?min=abc",
        f"/projects/{SLUG}/trials?status=exploded",
        f"/projects/{SLUG}/trials?sort=x",
        f"/projects/{SLUG}/trials?after=!!!",
        f"/projects/{SLUG}/tree?depth=0",
        f"/projects/{SLUG}?before=-1",
        f"/projects/{SLUG}/compare?exp=" + ",".join(f"{i:03d}" for i in range(9)),
    ],
)
def test_a_bad_parameter_is_a_400_html_page(client: TestClient, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 400 and response.headers["content-type"].startswith("text/html")


# -- escaping ---------------------------------------------------------------------------------


@pytest.fixture
def hostile(demo: Ledger) -> str:
    demo.recording.record_trial(
        SLUG,
        {
            "exp_id": "006",
            "parent_exp": "004",
            "status": "discard",
            "core_metric": 34.1,
            "specialist": "<b>bold</b>",
            "hypothesis": XSS,
            "notes": "# Heading\n\n**bold** [link](javascript:alert(1)) `code`",
            "expected_delta": "+0.2 EM <i>x</i>",
        },
    )
    return "006"


@pytest.mark.parametrize(
    "url",
    [
        f"/projects/{SLUG}",
        f"/projects/{SLUG}/trials/006",
        f"/projects/{SLUG}/trials",
        f"/projects/{SLUG}/tree",
        f"/projects/{SLUG}/compare?exp=004&exp=006",
        f"/projects/{SLUG}/tree?focus=006",
        f"/projects/{SLUG}/chain?to=006",
    ],
)
def test_hostile_text_is_escaped_everywhere(client: TestClient, hostile: str, url: str) -> None:
    html = client.get(url).text
    assert "<script>window.__xss" not in html and "<img src=x" not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html


def test_hostile_expectation_is_escaped_on_the_calibration_page(client: TestClient, hostile: str) -> None:
    html = client.get(f"/projects/{SLUG}/calibration").text
    assert "<i>x</i>" not in html and "+0.2 EM &lt;i&gt;x&lt;/i&gt;" in html and "&lt;b&gt;bold&lt;/b&gt;" in html


def test_markdown_in_notes_stays_plain_text(client: TestClient, hostile: str) -> None:
    html = client.get(f"/projects/{SLUG}/trials/006").text
    notes = html.split('id="notes">', 1)[1].split("</div>", 1)[0]
    assert notes == "# Heading\n\n**bold** [link](javascript:alert(1)) `code`"
    assert "<h1>Heading" not in html and 'href="javascript:' not in html


def test_odd_exp_ids_are_quoted_in_links(client: TestClient, demo: Ledger) -> None:
    demo.recording.record_trial(
        SLUG, {"exp_id": "a b?c#d%", "parent_exp": "004", "status": "keep", "core_metric": 35.5}
    )
    html = client.get(f"/projects/{SLUG}").text
    assert 'href="/projects/a2tgpo-demo/trials/a%20b%3Fc%23d%25"' in html
    page = client.get("/projects/a2tgpo-demo/trials/a%20b%3Fc%23d%25")
    assert page.status_code == 200 and "exp_a b?c#d%" in text_of(page.text)


# -- tree -------------------------------------------------------------------------------------


def test_tree_shows_every_trial_greys_discards_and_highlights_the_chain(client: TestClient) -> None:
    html = client.get(f"/projects/{SLUG}/tree").text
    for exp in ("000", "001", "002", "003", "004", "005"):
        assert f'id="t-{exp}"' in html
    assert re.search(r'id="t-002" class="node discarded[^"]*leaf"', html)
    assert re.search(r'id="t-005" class="node failed[^"]*leaf"', html)
    for exp in ("000", "001", "003", "004"):
        assert re.search(rf'id="t-{exp}" class="node kept on-chain"><details open>', html), exp
    assert "★ best" in html


@pytest.fixture
def hub(ledger: Ledger) -> Ledger:
    """A root with 60 children, and a 12-deep chain under its first child."""
    ledger.projects.create_project("hub")
    ledger.recording.record_trial("hub", {"exp_id": "r", "status": "baseline", "core_metric": 10.0})
    for i in range(60):
        ledger.recording.record_trial(
            "hub", {"exp_id": f"c{i:02d}", "parent_exp": "r", "status": "discard", "core_metric": 11.0}
        )
    parent = "c00"
    for depth in range(12):
        ledger.recording.record_trial(
            "hub", {"exp_id": f"d{depth:02d}", "parent_exp": parent, "status": "keep", "core_metric": 9.0 - depth * 0.1}
        )
        parent = f"d{depth:02d}"
    return ledger


def test_tree_windows_a_wide_node_and_pages_its_children(hub: Ledger, db_url: str) -> None:
    from tests.web.conftest import make_client

    with make_client(db_url) as client:
        html = client.get("/projects/hub/tree?per=25&view=nested").text
        assert html.count('id="t-c') == 25  # c00 (on the chain) is among the first 25
        assert "+ 35 more children of exp_r" in html
        more = client.get("/projects/hub/tree?root=r&offset=25&per=25").text
        assert 'id="t-c25"' in more and 'id="t-c49"' in more and 'id="t-c50"' not in more
        assert "children 26–50 of 60" in text_of(more)


def test_tree_stops_at_its_depth_and_links_onwards(hub: Ledger, db_url: str) -> None:
    from tests.web.conftest import make_client

    with make_client(db_url) as client:
        html = client.get("/projects/hub/tree?depth=4&view=nested").text
        assert 'id="t-d01"' in html and 'id="t-d02"' not in html
        assert 'href="/projects/hub/tree?root=d01"' in html and "continue the tree from exp_d01" in html


def test_tree_focus_roots_the_window_above_the_trial_with_its_ancestors(hub: Ledger, db_url: str) -> None:
    from tests.web.conftest import make_client

    with make_client(db_url) as client:
        html = client.get("/projects/hub/tree?focus=d10&view=nested").text
        crumbs = html.split('<nav class="breadcrumb"', 1)[1].split("</nav>", 1)[0]
        assert "<strong>exp_d07</strong>" in crumbs and "exp_r" in crumbs
        assert re.search(r'id="t-d10" class="node kept on-chain on-focus"', html)
        assert "◆ focus" in html


def test_tree_lists_trials_whose_parent_is_missing(demo: Ledger, client: TestClient) -> None:
    demo.tables.import_trials(
        SLUG, iter([demo.trials.trial(SLUG, "002").with_changes(exp_id="007", parent_exp="gone")])
    )
    html = client.get(f"/projects/{SLUG}/tree").text
    assert "parent is not in the project" in html and "(parent exp_gone)" in html


# -- trial page -------------------------------------------------------------------------------


def test_trial_page_shows_every_field_parent_children_and_the_clip_summary(client: TestClient) -> None:
    html = client.get(f"/projects/{SLUG}/trials/004").text
    # every field the demo's trials fill, its A²TGPO statistics included; none that all leave empty
    for name in (
        "exp_id",
        "timestamp",
        "specialist",
        "parent_exp",
        "baseline_exp",
        "domain",
        "expected_delta",
        "status",
        "core_metric",
        "delta_vs_best",
        "train_s",
        "total_s",
        "job_name",
        "snapshot_path",
        "ig_clip_scale_mean",
        "ig_clip_scale_std",
        "seq",
        "created_at",
    ):
        assert f'<th scope="row">{name}</th>' in html, name
    for empty in ("val_bpb", "ig_clip_scale_frac_high"):
        assert f'<th scope="row">{empty}</th>' not in html, empty
    assert "current best" in html
    assert f'href="/projects/{SLUG}/trials/003">exp_003</a>' in html  # parent
    assert f'href="/projects/{SLUG}/trials/005">exp_005</a>' in html  # child
    figure = html.split('data-plot="clip-summary"', 1)[1].split("</figure>", 1)[0]
    assert '<svg class="chart clipfig"' in figure and "mean ± std: 1.014 ± 0.087" in figure
    assert "1−β = 0.7" in figure and "1+β = 1.3" in figure
    assert 'data-plot="chain"' in html


def test_trial_without_clip_statistics_says_so(client: TestClient) -> None:
    html = client.get(f"/projects/{SLUG}/trials/000").text
    assert "No clip-scale statistics recorded" in html and "none — a root" in html


def test_whole_chain_page_lists_every_trial(client: TestClient) -> None:
    html = client.get(f"/projects/{SLUG}/chain").text
    assert re.findall(r'trials/(\d+)">exp_', html) == ["000", "001", "003", "004"]
    to = client.get(f"/projects/{SLUG}/chain?to=002").text
    assert re.findall(r'trials/(\d+)">exp_', to.split('<section class="card">', 1)[1]) == ["000", "001", "002"]


# -- trials table -----------------------------------------------------------------------------


def rows_of(html: str) -> list[str]:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r'name="exp" value="([^"]+)"', body)


def test_trials_table_filters_by_status_text_specialist_and_metric(client: TestClient) -> None:
    base = f"/projects/{SLUG}/trials"
    assert rows_of(client.get(base).text) == ["005", "004", "003", "002", "001", "000"]
    assert rows_of(client.get(f"{base}?status=keep&status=baseline").text) == ["004", "003", "001", "000"]
    assert rows_of(client.get(f"{base}?q=TURN-GROUP").text) == ["004", "003"]
    assert rows_of(client.get(f"{base}?specialist=atpo-joint").text) == ["001"]
    assert rows_of(client.get(f"{base}?min=34&max=34.6&order=asc").text) == ["001", "003"]
    assert rows_of(client.get(f"{base}?q=100%25").text) == []  # LIKE wildcards are literal


def test_trials_table_sorts_by_metric_with_unscored_last(client: TestClient) -> None:
    base = f"/projects/{SLUG}/trials"
    assert rows_of(client.get(f"{base}?sort=metric&order=desc").text) == ["004", "003", "001", "002", "000", "005"]
    assert rows_of(client.get(f"{base}?sort=metric&order=asc").text) == ["000", "002", "001", "003", "004", "005"]


@pytest.mark.parametrize(
    "sort,order", [("seq", "desc"), ("seq", "asc"), ("metric", "asc"), ("metric", "desc"), ("exp_id", "asc")]
)
def test_cursor_pages_visit_every_trial_once(ledger: Ledger, db_url: str, sort: str, order: str) -> None:
    import random

    from tests.sweeps import random_sweep
    from tests.web.conftest import make_client

    trials = random_sweep(random.Random(5), 57, lower_is_better=True)
    ledger.projects.create_project("pages")
    ledger.tables.import_trials("pages", iter(trials))
    seen: list[str] = []
    with make_client(db_url) as client:
        url = f"/projects/pages/trials?sort={sort}&order={order}&limit=25"
        while url:
            html = client.get(url).text
            seen += rows_of(html)
            found = re.search(r'<a href="([^"]+)" rel="next">', html)
            url = unescape(found.group(1)) if found else ""
    assert sorted(seen) == sorted(t.exp_id for t in trials) and len(seen) == len(set(seen))
    if sort == "metric":
        metrics = [ledger.trials.trial("pages", e).core_metric for e in seen]
        scored = [m for m in metrics if m is not None]
        assert scored == sorted(scored, reverse=order == "desc")
        assert all(m is None for m in metrics[len(scored) :])


def test_tsv_export_is_the_filtered_view_in_fieldkit_format(client: TestClient, demo: Ledger) -> None:
    response = client.get(f"/projects/{SLUG}/trials?status=keep&order=asc&format=tsv")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/tab-separated-values")
    assert "attachment" in response.headers["content-disposition"]
    rows = list(read_trials(io.StringIO(response.text, newline="")))
    assert [t.exp_id for t in rows] == ["001", "003", "004"]
    assert rows == [
        demo.trials.trial(SLUG, t.exp_id).with_changes(
            seq=t.seq, created_at=None, updated_at=None, ig_clip_scale_mean=None, ig_clip_scale_std=None
        )
        for t in rows
    ]
    html = client.get(f"/projects/{SLUG}/trials?status=keep").text
    for fmt in ("csv", "parquet", "results"):  # the view's downloads: its filters, no page state
        assert f'href="/projects/{SLUG}/trials?status=keep&amp;format={fmt}"' in html
    extended = client.get(f"/projects/{SLUG}/trials?status=keep&format=tsv&columns=extended").text
    assert next(csv.reader(io.StringIO(extended), delimiter="\t"))[-1] == "extra"


def test_tsv_export_streams_more_than_one_batch(ledger: Ledger, db_url: str) -> None:
    from tests.web.conftest import make_client

    ledger.projects.create_project("big")
    ledger.tables.import_trials("big", iter(__import__("bench.ledger", fromlist=["x"]).generate_sweep(4_500)))
    with make_client(db_url) as client:
        text = client.get("/projects/big/trials?order=asc&format=tsv").text
    lines = text.splitlines()
    assert len(lines) == 4_501 and lines[1].startswith("000\t") and lines[-1].startswith("4499\t")


# -- compare ----------------------------------------------------------------------------------


def test_compare_puts_trials_side_by_side_and_diffs_hypotheses(client: TestClient) -> None:
    html = client.get(f"/projects/{SLUG}/compare?exp=001&exp=003").text
    assert "<del>" in html and "<ins>" in html
    diff = html.split('id="hyp-003">', 1)[1].split("</p>", 1)[0]
    assert diff.startswith(
        "<del>Switch token-level IS to turn-level IS; keep joint IG/outcome normalization; clip still fixed</del>"
    )
    assert "<ins>Add turn-group normalization: normalize IG per (prompt, turn_index) composite group</ins>" in diff
    partial = (
        client.get(f"/projects/{SLUG}/compare?exp=004&exp=005").text.split('id="hyp-005">', 1)[1].split("</p>", 1)[0]
    )
    assert "<span>" in partial  # shared words stay plain
    assert re.search(r'<tr class="differs"[^>]*><th scope="row">core_metric</th>', html)
    assert not re.search(r'<tr class="differs"[^>]*><th scope="row">domain</th>', html)


def test_compare_accepts_comma_separated_ids_and_asks_for_two(client: TestClient) -> None:
    assert client.get(f"/projects/{SLUG}/compare?exp=000,001,004").text.count('<th scope="col"><a href') == 3
    one = client.get(f"/projects/{SLUG}/compare?exp=000")
    assert one.status_code == 200 and "Name at least two trials" in one.text


def test_hypothesis_diff_escapes_its_text(client: TestClient, hostile: str) -> None:
    html = client.get(f"/projects/{SLUG}/compare?exp=004&exp=006").text
    diff = html.split('id="hyp-006">', 1)[1].split("</p>", 1)[0]
    assert "<script>" not in diff and "&lt;script&gt;" in diff


# -- calibration ------------------------------------------------------------------------------


def test_calibration_plots_parsed_expectations_per_specialist(client: TestClient) -> None:
    html = client.get(f"/projects/{SLUG}/calibration").text
    # 001..004 expect a number and have an observed delta; 005 has none (budget overrun)
    assert "4 trials plotted" in text_of(html) and "1 without an observed delta" in text_of(html)
    assert html.count('<section class="card panel"') == 4
    assert "expected +0.75 EM over turn-group · observed Δ +0.450000" in html


# -- upload -----------------------------------------------------------------------------------


def upload(client: TestClient, text: str, project: str = "up", **extra: str):  # type: ignore[no-untyped-def]
    client.get("/upload")  # sets the CSRF cookie
    token = client.cookies.get("lineage_csrf")
    return client.post(
        "/upload",
        data={"csrf": token, "project": project, **extra},
        files={"file": ("results.tsv", text.encode(), "text/tab-separated-values")},
    )


def demo_tsv(demo: Ledger) -> str:
    from lineage.formats.fieldkit import write_trials

    buffer = io.StringIO(newline="")
    write_trials(demo.tables.stream_trials(SLUG), buffer)
    return buffer.getvalue()


def test_upload_of_a_bad_row_names_line_and_column_and_imports_nothing(client: TestClient, demo: Ledger) -> None:
    lines = demo_tsv(demo).splitlines(keepends=True)
    cells = lines[2].split("\t")
    cells[8] = "exploded"
    lines[2] = "\t".join(cells)
    response = upload(client, "".join(lines))
    assert response.status_code == 400
    html = response.text
    assert "Line 3, column 9" in html and "status" in html and "Nothing was imported" in html
    assert '<td class="bad">exploded</td>' in html
    assert client.get("/projects/up").status_code == 404


def test_upload_imports_a_good_file_into_a_new_project(client: TestClient, demo: Ledger) -> None:
    response = upload(client, demo_tsv(demo), direction="higher")
    assert response.status_code == 200 and "Imported 6 trials into up" in response.text
    assert [t.exp_id for t in demo.trials.chain("up")] == ["000", "001", "003", "004"]
    assert demo.projects.project("up").lower_is_better is False


def test_upload_of_a_pasted_tsv_with_a_duplicate_id_is_refused(client: TestClient, demo: Ledger) -> None:
    client.get("/upload")
    response = client.post(
        "/upload",
        data={"csrf": client.cookies.get("lineage_csrf"), "project": SLUG, "text": demo_tsv(demo)},
        files={"file": ("", b"", "application/octet-stream")},
    )
    assert response.status_code == 400 and "Line 2, column 1" in response.text and "already" in response.text


def test_upload_without_the_csrf_token_or_from_another_site_is_refused(client: TestClient, demo: Ledger) -> None:
    client.get("/upload")
    missing = client.post("/upload", data={"project": "x"}, files={"file": ("r.tsv", b"x", "text/plain")})
    assert missing.status_code == 403 and "security token" in missing.text
    token = client.cookies.get("lineage_csrf")
    foreign = client.post(
        "/upload",
        data={"csrf": token, "project": "x"},
        files={"file": ("r.tsv", b"x", "text/plain")},
        headers={"Origin": "http://evil.example"},
    )
    assert foreign.status_code == 403 and "another site" in foreign.text
    assert client.get("/projects/x").status_code == 404


def test_upload_reports_text_that_is_not_utf8(client: TestClient) -> None:
    client.get("/upload")
    response = client.post(
        "/upload",
        data={"csrf": client.cookies.get("lineage_csrf"), "project": "bin"},
        files={"file": ("r.tsv", b"exp_id\n\xff\xfe", "text/plain")},
    )
    assert response.status_code == 400 and "Line 2" in response.text and "UTF-8" in response.text


# -- telemetry --------------------------------------------------------------------------------


@pytest.fixture
def telemetry(client: TestClient) -> None:
    """Telemetry of 003 and 004, posted through the JSON API (``lineage.telemetry``)."""
    from tests.web.conftest import api_points
    from tests.web.test_charts import synthetic_points

    for exp_id in ("003", "004"):
        response = client.post(
            f"/api/v1/projects/{SLUG}/trials/{exp_id}/telemetry", json={"points": api_points(synthetic_points())}
        )
        assert response.status_code == 201, response.text


def test_trial_page_plots_its_telemetry_over_steps(client: TestClient, telemetry: None) -> None:
    html = client.get(f"/projects/{SLUG}/trials/004").text
    for key in ("ig", "clip", "clip-frac", "adv", "kl"):
        assert f'data-plot="{key}"' in html, key
    assert "No telemetry recorded" not in html
    assert "bound 1−β = 0.75" in html  # the beta the job logged (clip_scale_beta = 0.25)
    assert "No telemetry recorded" in client.get(f"/projects/{SLUG}/trials/000").text


def test_compare_overlays_the_telemetry_of_each_trial(client: TestClient, telemetry: None) -> None:
    html = client.get(f"/projects/{SLUG}/compare?exp=003&exp=004&exp=005").text
    kl = html.split("<figcaption>KL</figcaption>", 1)[1].split("</figure>", 1)[0]
    assert kl.count('<path class="ln') == 2 and "exp_003" in kl and "exp_004" in kl


def test_an_empty_project_renders_every_page(client: TestClient, demo: Ledger) -> None:
    demo.projects.create_project("empty", title="Nothing yet")
    for url in (
        "/",
        "/projects/empty",
        "/projects/empty/tree",
        "/projects/empty/trials",
        "/projects/empty/calibration",
        "/projects/empty/chain",
        "/projects/empty/compare",
        "/projects/empty/knowledge.md",
        "/projects/empty/trials?format=tsv",
    ):
        assert client.get(url).status_code == 200, url
    assert "No trials yet" in client.get("/projects/empty").text


def test_patch_lines_tell_headers_hunks_and_changed_lines_apart() -> None:
    from api.pages.trial import patch_lines

    patch = (
        "diff --git a/q.sql b/q.sql\nindex 1..2 100644\n--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,2 @@\n"
        "--- old comment\n+++ new comment\n select 1;\ndiff --git a/x b/x\n--- a/x\n"
    )
    assert [kind for kind, _ in patch_lines(patch)] == [
        "file",
        "file",
        "file",
        "file",
        "hunk",
        "del",
        "add",
        "",
        "file",
        "file",
    ]
