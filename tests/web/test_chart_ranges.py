"""Every scored trial visible, outliers capped with a note, log scales that hold a band,
one date format (issue 35): the server-drawn charts and the pages that choose their
ranges, checked on their text."""

from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ET

from api.pages import charts, knob_charts
from api.pages.chart_scale import outlier_cap, percentile
from api.pages.charts import Point
from api.pages.web import fmt_when
from lineage.service import Ledger
from tests.web.chart_projects import DIVERGED_GRAD, PLATEAU, PLATEAU_KEEPS, TELEMETRY, load_chart_projects
from tests.web.conftest import make_client


def _healthy(rng: random.Random, n: int = 100) -> list[float]:
    return [abs(rng.gauss(1.0, 0.25)) for _ in range(n)]


def test_the_cap_hides_one_diverged_run_among_healthy_ones_and_says_how_many() -> None:
    rng = random.Random(1)
    curves = [_healthy(rng) for _ in range(5)]
    curves.append(_healthy(rng, 60) + [1 + (DIVERGED_GRAD - 1) * (i / 40) ** 2 for i in range(1, 41)])
    cap = outlier_cap(curves)
    assert cap is not None and cap.hi < 3 and cap.above > 20 and cap.below == 0
    assert re.fullmatch(r"\d+ points above \d\.\d+ hidden", cap.note())


def test_the_cap_leaves_a_plain_loss_curve_and_a_single_diverging_curve_whole() -> None:
    loss = [2.4 * 2.718 ** (-3 * i / 100) + 0.8 for i in range(101)]
    assert outlier_cap([loss]) is None
    diverging = [1.0] * 60 + [1 + 79 * (i / 40) ** 2 for i in range(1, 41)]
    assert outlier_cap([diverging]) is None  # 40% of the only curve is its data, not an outlier


def test_the_dashboard_range_shows_the_2nd_to_98th_percentile_of_scored_trials() -> None:
    rng = random.Random(2)
    keeps = [Point(i, v, "kept") for i, v in enumerate(PLATEAU_KEEPS)]
    discards = [Point(10 + i, 0.17 + 0.79 * rng.betavariate(4, 1.3), "discarded") for i in range(2000)]
    scored = keeps + discards
    values = sorted(p.y for p in scored)  # type: ignore[type-var]
    lo, hi = charts.metric_domain(scored, [(3, PLATEAU_KEEPS[-1])])
    assert lo <= percentile(values, 2) and hi >= percentile(values, 98) and hi >= max(PLATEAU_KEEPS)
    above, below = charts.off_axis(scored, (lo, hi))
    assert above + below <= 0.02 * len(scored) + 1
    kept_lo, kept_hi = charts.metric_domain(scored, [(3, PLATEAU_KEEPS[-1])], kept_range=True)
    assert kept_lo > 0.9 and sum(charts.off_axis(scored, (kept_lo, kept_hi))) > 1000


def test_off_axis_trials_share_one_edge_marker_per_few_pixels() -> None:
    points = [Point(i, 0.5 if i > 3 else 0.96, "kept" if i <= 3 else "discarded") for i in range(2004)]
    svg = str(charts.metric_chart(points, [(0, 0.96)], label="acs", metric_name="acs", y_domain=(0.95, 0.97)))
    markers = svg.count("pt-edge")
    assert 20 < markers < 150  # one per 14 px of ~870, not 2,000
    assert "trials below the axis" in svg
    ET.fromstring(svg)


def test_a_log_band_whose_lower_edge_is_at_or_below_zero_stays_on_the_floor() -> None:
    xs = list(range(50))
    mean = [(x, 1.0 / (1 + x)) for x in xs]
    band = charts.Band("± std", [(x, y - 0.5) for x, y in mean], [(x, y + 0.5) for x, y in mean])
    svg = str(charts.line_chart([charts.Series("loss", mean)], bands=[band], label="l", log_y=True))
    ticks = [float(t.replace(",", "")) for t in re.findall(r'text-anchor="end">([\d.,e-]+)</text>', svg)]
    assert min(ticks) >= 0.01  # the axis is not stretched towards the band's 1e-9 lows
    plot_bottom = (250 + 18) - (44 + 18)  # the frame (one legend row) less its bottom margin
    band_path = re.search(r'<path class="band s0" d="([^"]+)"', svg).group(1)  # type: ignore[union-attr]
    ys = [float(y) for y in re.findall(r"[ML][\d.]+,([\d.]+)", band_path)]
    assert max(ys) <= plot_bottom + 0.1 and len(ys) == 100  # no dive below the floor, no gap
    ET.fromstring(svg)


def test_line_chart_writes_what_the_cap_hid_and_marks_alert_steps() -> None:
    rng = random.Random(3)
    series = [charts.Series(f"exp_{i}", list(enumerate(_healthy(rng))), f"s{i}") for i in range(5)]
    series.append(charts.Series("exp_5", [(i, 1 + 79 * (i / 100) ** 2) for i in range(100)], "s5"))
    svg = str(
        charts.line_chart(series, label="grad_norm", cap=True, vlines=[charts.VLine(32, "warn at step 32: spike")])
    )
    assert re.search(r'class="cap-note"[^>]*>\d+ points above [\d.]+ hidden<', svg)
    assert 'class="vl alert-warn"' in svg and "warn at step 32" in svg
    ET.fromstring(svg)


def test_dates_share_one_format() -> None:
    assert fmt_when("2026-05-12T12:20:00Z") == fmt_when("2026-05-12 12:20:00+00:00") == "2026-05-12 12:20 UTC"
    assert fmt_when("2026-05-12T12:20:00") == "2026-05-12 12:20"
    assert fmt_when("2026-05-12") == "2026-05-12"
    assert fmt_when("yesterday") == "yesterday"


def test_the_pages_choose_ranges_and_caps_by_their_urls(ledger: Ledger, db_url: str) -> None:
    made = load_chart_projects(ledger, runs=4)
    with make_client(db_url) as client:
        board = client.get(f"/projects/{PLATEAU}")
        assert board.status_code == 200 and "every trial</strong>" in board.text
        kept = client.get(f"/projects/{PLATEAU}", params={"range": "kept"})
        found = re.search(r"([\d,]+) trials below ([\d.]+)", kept.text)
        assert found and int(found.group(1).replace(",", "")) > 500
        assert client.get(f"/projects/{PLATEAU}", params={"range": "wide"}).status_code == 400
        # the running best over the whole project starts at the first best, not at bin 0's
        overview = board.text[board.text.index("Running best over the whole project") :]
        assert "0.958" in overview
        trial = client.get(f"/projects/{TELEMETRY}/trials/{made.diverged}")
        assert trial.status_code == 200 and 'id="grid-data"' in trial.text and 'class="vl alert-warn"' in trial.text
        assert "(log)" in client.get(f"/projects/{TELEMETRY}/trials/{made.diverged}", params={"log": "1"}).text
        assert client.get(f"/projects/{TELEMETRY}/trials/{made.diverged}", params={"cap": "x"}).status_code == 400
        ids = ",".join(made.runs)
        compared = client.get(f"/projects/{TELEMETRY}/compare", params={"exp": ids})
        assert re.search(r"\d+ points above [\d.]+ hidden", compared.text)
        uncapped = client.get(f"/projects/{TELEMETRY}/compare", params={"exp": ids, "cap": "0"}).text
        assert not re.search(r"points above [\d.]+ hidden", uncapped)
        knobs = client.get(f"/projects/{TELEMETRY}/knobs", params={"x": "extra.wd"})
        assert "1 trial above" in knobs.text and "on the edge" in knobs.text
        running = client.get(f"/projects/{TELEMETRY}/trials/{made.running}")
        assert 'data-live="1"' in running.text
        explore = client.get(f"/projects/{TELEMETRY}/explore", params={"metric": "val_loss"})
        assert "every logged point: 20 per trial" in explore.text or "every logged point: up to 20" in explore.text
        assert "buckets of" not in explore.text


def test_knob_metric_cap_puts_the_diverged_run_on_the_edge() -> None:
    assert knob_charts.metric_cap([]) is None
