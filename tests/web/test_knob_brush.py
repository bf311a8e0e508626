"""The knob view's parallel coordinates (issue 35): axes chosen by how much they vary and
relate to the metric, the knob changes of lineage.knobs as axes, a brush in the URL that
the server draws without script, and the page's JSON twin."""

from __future__ import annotations

import gzip
import re

import pytest

from lineage.browse.knob_axes import rank_axes
from lineage.service import Ledger
from tests.web.conftest import make_client
from tests.web.words_projects import AR, FK, TEL, load_all


def test_rank_axes_puts_the_related_knob_first_and_drops_constants_and_ids() -> None:
    metric = [float(i) for i in range(10)]
    ranked = rank_axes(
        [("noise", "number"), ("lr", "number"), ("dropped", "number"), ("commit", "category"), ("opt", "category")],
        [
            [3, 1, 4, 1, 5, 9, 2, 6, 5, 3],
            [i * 0.1 for i in range(10)],
            [0] * 10,
            [f"c{i}" for i in range(10)],
            ["adam"] * 5 + ["sgd"] * 5,
        ],
        metric,
    )
    keys = [k for k, _ in ranked]
    assert keys[0] == "lr" and "dropped" not in keys and "commit" not in keys and "opt" in keys


@pytest.fixture
def client(ledger: Ledger, db_url: str):  # type: ignore[no-untyped-def]
    load_all(ledger)
    with make_client(db_url) as test_client:
        yield test_client


def test_the_parallel_axes_are_real_knobs_with_knob_changes_offered(client) -> None:  # type: ignore[no-untyped-def]
    view = client.get(f"/projects/{AR}/knobs", params={"format": "json"}).json()
    keys = [c["key"] for c in view["choices"]]
    # "wd 0.01 -> 0.1" in the descriptions is the file's own wd column: offered once, as it
    assert "extra.wd" in keys and "knob.wd" not in keys
    fieldkit = client.get(f"/projects/{FK}/knobs", params={"format": "json"}).json()
    assert "knob.lr" in [c["key"] for c in fieldkit["choices"]]  # "lr 3e-4 -> 1e-3": no lr column
    assert view["parallel"] and not any(k.endswith(("commit", "seq")) for k in view["parallel"])
    tel = client.get(f"/projects/{TEL}/knobs", params={"format": "json"}).json()
    assert set(tel["parallel"]) == {"extra.lr", "extra.wd"}  # not run_id, telemetry_points...


def test_a_brush_in_the_url_dims_the_lines_outside_it_without_script(client) -> None:  # type: ignore[no-untyped-def]
    params = {"x": "extra.wd", "axes": "extra.wd,extra.memory_gb", "brush": "metric:0.5:0.6"}
    view = client.get(f"/projects/{AR}/knobs", params={**params, "format": "json"}).json()
    inside = set(view["selected"])
    scored = {p["exp_id"] for p in view["points"] if p["metric"] is not None and 0.5 <= p["metric"] <= 0.6}
    assert inside == scored and 0 < len(inside) < len(view["points"])
    html = client.get(f"/projects/{AR}/knobs", params=params).text
    parallel = html.split('data-plot="knob-parallel"', 1)[1]
    dimmed = set(re.findall(r'<path class="pc [^"]*pc-dim" d="[^"]*" data-exp="([^"]+)"', parallel))
    drawn = set(re.findall(r'<path class="pc [^"]*" d="[^"]*" data-exp="([^"]+)"', parallel))
    assert dimmed == drawn - inside
    assert f"{len(inside)} of {len(view['points'])} trials in the brush" in html
    assert 'class="pc-axis" data-key="metric"' in parallel and "pc-brush" in parallel
    assert f'<svg data-trials="/projects/{AR}/trials" class="chart knobs parallel"' in parallel


def test_a_bad_brush_is_a_problem_naming_it(client) -> None:  # type: ignore[no-untyped-def]
    for bad in ("metric:a:b", "nope:0:1"):
        response = client.get(f"/projects/{AR}/knobs", params={"brush": bad, "format": "json"})
        assert response.status_code == 400 and "brush" in response.text


def test_pages_stay_light_at_2000_trials(ledger: Ledger, db_url: str) -> None:
    """Each page of a 2,000-trial loop is at most 100 kB gzipped (the knob view with its
    brushable parallel coordinates included)."""
    from tests.web.words_projects import load_ar

    load_ar(ledger, n=2000)
    with make_client(db_url) as client:
        for path in ("/", f"/projects/{AR}", f"/projects/{AR}/trials", f"/projects/{AR}/knobs", f"/projects/{AR}/tree"):
            page = client.get(path)
            assert page.status_code == 200, path
            assert len(gzip.compress(page.content)) <= 100_000, (path, len(gzip.compress(page.content)))
