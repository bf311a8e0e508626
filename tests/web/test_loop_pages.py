"""The pages on an autoresearch-style loop (``tests/web/loop_project.py``: 2,000 trials,
blow-ups, crashes, LM telemetry for four kept trials) and on the demo, through the ASGI
app on a real SQLite file: what a researcher with such a loop needs to read (issue 20,
defects 1, 2, 3, 4, 5 and 8)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient

from lineage.service import Ledger
from tests.web.conftest import SLUG, api_points, load_demo, make_client
from tests.web.loop_project import LoopProject, load_loop_project
from tests.web.test_charts import synthetic_points

LOOP = "ar-loop"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, LoopProject, Ledger]]:
    path = tmp_path_factory.mktemp("loop") / "lineage.db"
    ledger = Ledger.open(str(path))
    loop = load_loop_project(ledger)
    load_demo(ledger)
    demo_points = api_points(synthetic_points())
    for exp_id, scale in (("003", 1.0), ("004", 1.1)):
        points = [
            *demo_points,
            *({"step": s, "name": "reward", "value": scale * s / 100} for s in range(0, 200, 10)),
            *({"step": s, "name": "response_length", "value": 300 + scale * s} for s in range(0, 200, 10)),
        ]
        from lineage.telemetry import check_points

        ledger.telemetry.ingest_telemetry(SLUG, exp_id, check_points(points))
    with make_client(str(path)) as client:
        yield client, loop, ledger
    ledger.close()


def text_of(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def main_of(html: str) -> str:
    return html.split("<main", 1)[1].split("</main>", 1)[0]


def section(html: str, marker: str, end: str = "</section>") -> str:
    return html.split(marker, 1)[1].split(end, 1)[0]


# -- 1. the dashboard's metric chart ------------------------------------------------------------


def _ticks(svg: str) -> list[float]:
    """The y tick labels of a chart (text-anchor end, left of the axis)."""
    return [
        float(v.replace(",", ""))
        for v in re.findall(r'<text class="tick" x="\d+" y="[\d.]+" text-anchor="end">([-\d.,]+)</text>', svg)
    ]


def test_dashboard_chart_kept_range_marks_blow_ups_at_the_edge(site) -> None:  # type: ignore[no-untyped-def]
    client, loop, ledger = site
    html = client.get(f"/projects/{LOOP}", params={"range": "kept"}).text
    chart = section(html, '<figure class="plot wide-plot">', "</figure>")
    ticks = _ticks(chart)
    assert ticks and max(ticks) < 1.0, ticks  # the 1.03–1.36 blow-ups do not set the axis
    window = {t.exp_id for t in ledger.trials.list_trials(LOOP, limit=1000, descending=True)}
    shown_blowups = [e for e in loop.blown_up if e in window]
    assert shown_blowups
    edges = re.findall(r'<path class="pt pt-edge[^"]*"[^>]*/><title>([^<]*)</title>', chart)
    # one marker per few pixels: a lone blow-up names itself, neighbours share a count
    counted = sum(int(m.group(1)) if (m := re.match(r"(\d+) trials above the axis", e)) else 1 for e in edges)
    assert counted == len(shown_blowups), edges
    for e in edges:
        exp_id = re.search(r"exp_(\d+) ", e).group(1)  # type: ignore[union-attr]
        metric = ledger.trials.trial(LOOP, exp_id).core_metric
        assert exp_id in shown_blowups and f"{metric:.6f}" in e, e
    # the axis still spans the whole kept range: the first kept trial in the window is on it
    kept = [ledger.trials.trial(LOOP, e).core_metric for e in loop.kept if e in window]
    assert min(ticks) <= min(kept) + 0.01 and max(ticks) >= max(kept) - 0.01


def test_dashboard_chart_shows_every_scored_trial_by_default(site) -> None:  # type: ignore[no-untyped-def]
    client, loop, ledger = site
    html = client.get(f"/projects/{LOOP}").text
    chart = section(html, '<figure class="plot wide-plot">', "</figure>")
    window = [t for t in ledger.trials.list_trials(LOOP, limit=1000, descending=True) if t.core_metric]
    values = sorted(t.core_metric for t in window)  # type: ignore[type-var]
    ticks = _ticks(chart)
    step = ticks[1] - ticks[0]
    assert min(ticks) - step <= values[len(values) * 2 // 100] and max(ticks) + step >= values[len(values) * 98 // 100]
    assert chart.count("pt-edge") <= len(values) * 0.04
    assert "every trial</strong>" in html and "range=kept" in html


# -- 2. labels only from data the trial has -------------------------------------------------------


def test_autoresearch_trials_are_not_labelled_baseline(site) -> None:  # type: ignore[no-untyped-def]
    client, loop, ledger = site
    kept = loop.kept[5]
    hypothesis = ledger.trials.trial(LOOP, kept).hypothesis
    assert "baseline" not in hypothesis
    dashboard = client.get(f"/projects/{LOOP}").text
    chain = section(dashboard, '<ol class="chain">', "</ol>")
    assert "baseline," not in text_of(chain)
    page = client.get(f"/projects/{LOOP}/trials/{kept}").text
    head = section(page, '<header class="page-head">', "</header>")
    assert "baseline" not in text_of(head) and hypothesis in text_of(head)
    assert "[baseline" not in text_of(main_of(page)) and "no specialist" not in page
    tree = client.get(f"/projects/{LOOP}/tree").text
    labels = re.findall(r'<span class="spec[^"]*"[^>]*>([^<]*)</span>', tree)
    assert labels and labels.count("baseline") <= 1  # exp 000 whose description is "baseline"
    assert hypothesis in unescape(tree)


# -- 3. compare overlays the telemetry the trials share -------------------------------------------


def test_compare_overlays_every_shared_telemetry_name(site) -> None:  # type: ignore[no-untyped-def]
    client, loop, _ = site
    ids = "&".join(f"exp={e}" for e in loop.with_telemetry)
    html = client.get(f"/projects/{LOOP}/compare?{ids}").text
    for name in ("train_loss", "val_bpb", "lr", "grad_norm"):
        figure = section(html, f'data-plot="cmp-{name}"', "</figure>")
        assert figure.count('<path class="ln') == len(loop.with_telemetry), name
    demo = client.get(f"/projects/{SLUG}/compare?exp=003&exp=004").text
    for name in ("reward", "response_length"):
        assert section(demo, f'data-plot="cmp-{name}"', "</figure>").count('<path class="ln') == 2
    assert 'data-plot="ig"' in demo or "Information gain" in demo


def test_compare_reads_only_the_series_two_trials_share(site) -> None:  # type: ignore[no-untyped-def]
    _, loop, ledger = site
    from lineage.telemetry import check_points

    ledger.telemetry.ingest_telemetry(
        SLUG,
        "005",
        check_points([{"step": 1, "name": "only_mine", "value": 1.0}, {"step": 1, "name": "reward", "value": 2.0}]),
    )
    shared = ledger.telemetry.shared_telemetry(SLUG, ["004", "005"], max_points=50)
    assert set(shared) == {"reward"}  # not 004's other series, not 005's own
    assert set(shared["reward"]) == {"004", "005"}
    shared = ledger.telemetry.shared_telemetry(LOOP, loop.with_telemetry[:2], max_points=50)
    assert set(shared) == {"train_loss", "val_bpb", "lr", "grad_norm"}
    assert len(shared["train_loss"][loop.with_telemetry[0]]) <= 50  # downsampled in the database


# -- 4. the explorer's defaults and sparse series -------------------------------------------------


def test_explorer_defaults_to_the_project_metric_on_the_trials_with_telemetry(site) -> None:  # type: ignore[no-untyped-def]
    client, loop, _ = site
    html = client.get(f"/projects/{LOOP}/explore").text
    assert re.search(r'<h2 id="panel-0-h">val_bpb\b', html), "the project's metric, not the alphabetically first"
    assert f"{len(loop.with_telemetry)} of {len(loop.with_telemetry)}" in text_of(html)
    figure = section(html, '<div class="explore-fallback">', "</div>")
    # val_bpb every 250 steps: drawn as a line through its points, with markers
    assert re.search(r'<path class="ln [^"]*" d="M[\d.,]+(L[\d.,]+){3,}"', figure)
    assert figure.count("<circle") >= 4
    assert '<select name="metric" multiple' not in html  # no ctrl-click list box


def test_explorer_grouped_by_status_uses_the_status_colours(site) -> None:  # type: ignore[no-untyped-def]
    client, loop, _ = site
    html = client.get(f"/projects/{SLUG}/explore?metric=core_metric&group=status&select=filter").text
    key = section(html, '<p class="explore-key">', "</p>")
    assert re.search(r'swatch st-failed"[^>]*></span> eval_budget_overrun', key), key
    assert re.search(r'swatch st-kept"[^>]*></span> keep', key), key


# -- 5. the tree of a linear loop -----------------------------------------------------------------


class _Depth(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.depth = self.deepest = 0

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        if tag == "ul":
            self.depth += 1
            self.deepest = max(self.deepest, self.depth)

    def handle_endtag(self, tag):  # type: ignore[no-untyped-def]
        if tag == "ul":
            self.depth -= 1


def test_tree_of_a_linear_loop_is_a_flat_chain_with_folded_siblings(site) -> None:  # type: ignore[no-untyped-def]
    client, loop, ledger = site
    html = client.get(f"/projects/{LOOP}/tree").text
    chain = [t.exp_id for t in ledger.trials.chain(LOOP)]
    assert len(chain) > 100
    # the chain's first page reaches far past 8 levels, as one column
    for exp_id in chain[:60]:
        assert f'id="t-{exp_id}"' in html, exp_id
    parser = _Depth()
    parser.feed(main_of(html))
    assert parser.deepest <= 3, parser.deepest
    # a discard is folded under the kept trial it forked from
    discard = next(
        t
        for t in ledger.trials.list_trials(LOOP, limit=200)
        if t.status.value == "discard" and t.parent_exp == chain[3]
    )
    folded = section(html, f'id="t-{chain[3]}"', f'id="t-{chain[4]}"')
    assert f'id="t-{discard.exp_id}"' in folded and "<details" in folded
    # the best is one link away, on the chain's last page
    best = client.get(f"/projects/{LOOP}/tree?focus={loop.best_exp}").text
    assert f'id="t-{loop.best_exp}"' in best and "★ best ◆ focus" in text_of(best)


# -- 8. words ---------------------------------------------------------------------------------------


def test_dashboard_words(site) -> None:  # type: ignore[no-untyped-def]
    client, loop, ledger = site
    demo = client.get(f"/projects/{SLUG}").text
    assert "1 trial since the last new best" in text_of(demo)
    loop_page = client.get(f"/projects/{LOOP}").text
    words = text_of(loop_page)
    assert " h spent" not in words  # imported: no durations
    assert "Trials per failure label" not in words and "Trials per status" in words
    rule = ledger.agent.summary(LOOP).rule.to_dict()["rule"]
    progress = section(loop_page, 'class="card progress"')
    assert rule in text_of(progress)  # told once, folded away in a <details>
    assert rule not in text_of(re.sub(r"<details.*?</details>", "", progress, flags=re.S))
    assert 'href="/projects/ar-loop/calibration"' not in loop_page
    assert f'href="/projects/{SLUG}/calibration"' in demo


def test_the_best_trial_has_no_delta_to_itself(site) -> None:  # type: ignore[no-untyped-def]
    client, loop, _ = site
    sub = section(client.get(f"/projects/{LOOP}/trials/{loop.best_exp}").text, '<p class="sub">', "</p>")
    assert "Δ vs best" not in sub
    assert "Δ vs best" in client.get(f"/projects/{LOOP}/trials/{loop.kept[5]}").text


def test_a_tripped_guardrail_is_not_shown_beside_improving(site) -> None:  # type: ignore[no-untyped-def]
    client, loop, ledger = site
    summary = ledger.agent.summary(SLUG)
    assert summary.trend == "improving" and summary.trials_since_improvement >= 1
    ledger.agent.set_guardrails(SLUG, {"max_trials_without_improvement": 1})
    try:
        html = client.get(f"/projects/{SLUG}").text
        assert "Guardrail tripped" in html
        assert "trend-improving" not in html
    finally:
        ledger.agent.set_guardrails(SLUG, {})


def test_favicon_ico_is_served(site) -> None:  # type: ignore[no-untyped-def]
    client, _, _ = site
    response = client.get("/favicon.ico")
    assert response.status_code == 200 and response.headers["content-type"].startswith("image/svg+xml")
    assert response.text.startswith("<svg")
