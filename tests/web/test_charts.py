"""The SVG charts and the telemetry plots: pure functions, checked on their text."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest

from api.pages import charts, telemetry
from api.pages.charts import Point


def parse(svg: str) -> ET.Element:
    """The SVG must be well-formed XML (it is inlined into HTML as is)."""
    return ET.fromstring(svg)


@pytest.mark.parametrize("lo,hi", [(0, 1), (33.21, 34.96), (-0.003, 0.002), (1e-9, 3e-9), (5, 5), (0, 100_000)])
def test_nice_ticks_cover_the_range_with_round_steps(lo: float, hi: float) -> None:
    ticks = charts.nice_ticks(lo, hi, 5)
    assert ticks and 1 <= len(ticks) <= 12
    if hi > lo:
        step = ticks[1] - ticks[0]
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert any(abs(mantissa - m) < 1e-6 for m in (1, 2, 2.5, 5, 10))
        assert lo - step < ticks[0] <= lo + step and hi - step <= ticks[-1] < hi + step


def test_status_classes() -> None:
    assert [
        charts.status_class(s) for s in ("keep", "baseline", "discard", "disqualified", "crash", "harness_abort")
    ] == ["kept", "kept", "discarded", "discarded", "failed", "failed"]


def test_metric_chart_is_valid_svg_with_escaped_titles_and_links() -> None:
    points = [
        Point(0, 1.0, "kept", "a <b> & c", "/t?x=1&y=2"),
        Point(1, None, "failed", "no metric", "/t/1"),
        Point(2, 0.5, "discarded", "d", None),
        Point(3, 0.7, "failed", "f", None),
    ]
    svg = charts.metric_chart(points, [(0, 1.0), (2, 0.5)], label="m <x>", metric_name="bpb", best_x=0)
    root = parse(svg)
    assert root.tag.endswith("svg") and 'aria-label="m &lt;x&gt;"' in svg
    assert "a &lt;b&gt; &amp; c" in svg and 'href="/t?x=1&amp;y=2"' in svg
    assert svg.count('class="rug rug-failed"') == 1 and svg.count("pt-failed") == 1
    assert '<path class="runbest"' in svg


def test_empty_and_degenerate_charts_still_render() -> None:
    for svg in (
        charts.metric_chart([], [], label="x", metric_name="m"),
        charts.line_chart([], label="x"),
        charts.scatter([], label="x", x_label="a", y_label="b"),
        charts.sparkline([], x_max=0, label="x"),
        charts.bars([], label="x"),
        charts.clip_scale_figure(mean=None, std=None, low=None, high=None, frac_low=None, frac_high=None),
        charts.line_chart([charts.Series("one", [(3, 2.0)])], label="single point"),
    ):
        parse(svg)


def test_scatter_draws_the_diagonal_on_a_square_domain() -> None:
    svg = charts.scatter([Point(0.1, 0.3), Point(-0.2, 0.05, "discarded")], label="cal", x_label="e", y_label="o")
    parse(svg)
    line = re.search(r'<line class="diag" x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="([\d.]+)"', svg)
    assert line is not None
    x1, y1, x2, y2 = map(float, line.groups())
    assert abs((x2 - x1) - (y1 - y2)) < 1.0  # 45 degrees on screen


def test_clip_scale_figure_marks_both_bounds_and_the_fractions() -> None:
    svg = charts.clip_scale_figure(mean=1.01, std=0.09, low=0.72, high=1.29, frac_low=0.02, frac_high=0.125, beta=0.3)
    parse(svg)
    assert "1−β = 0.7 · 2.0% at bound" in svg and "1+β = 1.3 · 12.5% at bound" in svg
    assert 'class="box"' in svg and 'class="meanline"' in svg


def test_split_name_finds_turn_indices() -> None:
    assert telemetry.split_name("ig_turn_3") == ("ig", 3)
    assert telemetry.split_name("telemetry/ig/turn2") == ("ig", 2)
    assert telemetry.split_name("ig[4]") == ("ig", 4)
    assert telemetry.split_name("clip_scale_mean") == ("clip_scale_mean", None)


def synthetic_points() -> list[dict]:
    points = []
    for step in range(50):
        for turn in range(3):
            points.append({"step": step, "name": "ig", "turn": turn, "value": 0.1 * turn + 0.01 * step})
        points += [
            {"step": step, "name": "clip_scale_mean", "value": 1 + 0.001 * step},
            {"step": step, "name": "clip_scale_std", "value": 0.05},
            {"step": step, "name": "clip_scale_min", "value": 0.75},
            {"step": step, "name": "clip_scale_max", "value": 1.28},
            {"step": step, "name": "clip_scale_frac_low", "value": 0.01},
            {"step": step, "name": "clip_scale_frac_high", "value": 0.03},
            {"step": step, "name": "adv_mean", "value": 0.0},
            {"step": step, "name": "adv_std", "value": 1.0},
            {"step": step, "key": "kl", "value": 0.001 * step},
            {"step": step, "name": "entropy", "value": 2.0},
        ]
    points.append({"step": 0, "name": "clip_scale_beta", "value": 0.25})
    points.append({"step": 1, "name": "kl", "value": float("nan")})
    return points


def test_trial_plots_cover_ig_per_turn_clip_scale_advantages_kl_and_the_rest() -> None:
    view = telemetry.build_view(synthetic_points())
    assert sorted(view.per_turn["ig"]) == [0, 1, 2] and view.beta == 0.25
    assert len(view.scalars["kl"]) == 50  # the NaN is dropped
    plots = telemetry.trial_plots(view)
    assert [p.key for p in plots] == ["ig", "clip", "clip-frac", "adv", "kl", "x-entropy"]
    clip = next(p for p in plots if p.key == "clip").svg
    parse(clip)
    assert "bound 1−β = 0.75" in clip and "bound 1+β = 1.25" in clip and clip.count('<path class="band') == 2
    assert plots[0].svg.count('<path class="ln') == 3  # one line per turn


def test_compare_plots_overlay_one_line_per_trial() -> None:
    a = telemetry.build_view(synthetic_points())
    b = telemetry.build_view([{"step": s, "name": "kl", "value": 0.002 * s} for s in range(10)])
    plots = telemetry.compare_plots({"exp_001": a, "exp_002": b})
    kl = next(p for p in plots if p.title == "KL")
    assert kl.svg.count('<path class="ln') == 2 and "exp_002" in kl.svg
    ig = next(p for p in plots if p.title.startswith("Information gain"))
    assert ig.svg.count('<path class="ln') == 1  # the per-turn IG of exp_001, averaged


def test_no_telemetry_means_no_plots() -> None:
    assert telemetry.trial_plots(telemetry.build_view([])) == []


def test_thin_keeps_the_ends_and_the_limit() -> None:
    points = [(float(i), float(i)) for i in range(10_000)]
    thinned = telemetry.thin(points, 600)
    assert len(thinned) == 600 and thinned[0] == points[0] and thinned[-1] == points[-1]
