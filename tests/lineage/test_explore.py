"""lineage.browse.explore against a plain loop over every point, on SQLite and PostgreSQL.

The reference below reads each trial's points whole (``telemetry.series`` with no
downsampling) and applies the module doc's rules one point at a time; the explorer's
SQL and numpy must give the same numbers (to its documented rounding).
"""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import Settings
from bench.explorer import SPECIALISTS, generate_project
from lineage.browse.explore import CELL_BUDGET, ExploreQuery
from lineage.errors import InvalidInput, NotFound
from lineage.service import Ledger

SLUG = "explore"
TRIALS = 7
POINTS = 600


@pytest.fixture
def project(ledger: Ledger) -> Ledger:
    generate_project(ledger, SLUG, trials=TRIALS, points=POINTS, turns=3, seed=5)
    return ledger


def raw_points(ledger: Ledger, exp_id: str, name: str) -> dict[int, list[tuple[int, float]]]:
    """turn (-1: not per turn) -> [(step, value)] in step order, every point."""
    found, _ = ledger.telemetry.telemetry_series(SLUG, exp_id, names=[name], max_points=100_000)
    return {(-1 if s.turn is None else s.turn): list(zip(s.step, s.value)) for s in found}


def reference_step_view(ledger: Ledger, query: ExploreQuery, *, sampled: bool) -> dict[str, list[float | None]]:
    """group -> mean per bucket, by the module doc's rule, one point at a time."""
    trials = ledger.trials.list_trials(SLUG)[-query.limit :]
    series = {t.exp_id: raw_points(ledger, t.exp_id, query.metrics[0]).get(-1, []) for t in trials}
    steps = [s for pts in series.values() for s, _ in pts]
    lo, hi = min(steps), max(steps)
    buckets = max(20, min(query.buckets, CELL_BUDGET // len([p for p in series.values() if p])))
    width = math.ceil((hi - lo + 1) / buckets)
    buckets = math.ceil((hi - lo + 1) / width)
    per_trial: dict[str, list[float | None]] = {}
    for exp_id, pts in series.items():
        cells: list[list[float]] = [[] for _ in range(buckets)]
        for step, value in pts:
            cells[(step - lo) // width].append(value)
        if sampled:
            per_trial[exp_id] = [c[0] if c else None for c in cells]  # points come in step order
        else:
            per_trial[exp_id] = [sum(c) / len(c) if c else None for c in cells]
    groups: dict[str, list[str]] = defaultdict(list)
    for t in trials:
        groups[getattr(t, query.group_by) if query.group_by else "all"].append(t.exp_id)
    out = {}
    for key, members in groups.items():
        means = []
        for b in range(buckets):
            values = [per_trial[m][b] for m in members if per_trial[m][b] is not None]
            means.append(sum(values) / len(values) if values else None)
        out[key] = means
    return out


def panel_means(answer: dict) -> dict[str, list[float | None]]:
    return {g["key"]: g["mean"] for g in answer["panels"][0]["groups"]}


def assert_close(got: list[float | None], expected: list[float | None]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if e is None:
            assert g is None
        else:
            assert g == pytest.approx(e, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("sampled", [False, True], ids=["exact", "sampled"])
def test_group_means_per_bucket_match_a_loop_over_every_point(project: Ledger, sampled: bool) -> None:
    query = ExploreQuery(metrics=("loss",), group_by="specialist", buckets=50, exact_budget=10 if sampled else 10**9)
    answer = project.browse.explore(SLUG, query)
    assert answer["panels"][0]["downsampling"]["method"] == ("sampled" if sampled else "exact")
    expected = reference_step_view(project, query, sampled=sampled)
    got = panel_means(answer)
    assert set(got) == set(SPECIALISTS) == set(expected)
    for key in expected:
        assert_close(got[key], expected[key])


def test_bands_are_the_min_max_or_the_std_of_the_trials_values(project: Ledger) -> None:
    minmax = project.browse.explore(SLUG, ExploreQuery(metrics=("loss",), group_by="specialist", buckets=40))
    std = project.browse.explore(SLUG, ExploreQuery(metrics=("loss",), group_by="specialist", buckets=40, band="std"))
    curves = {t["exp_id"]: t["y"] for t in minmax["panels"][0]["trials"]}
    for group, group_std in zip(minmax["panels"][0]["groups"], std["panels"][0]["groups"]):
        members = next(g["trials"] for g in minmax["groups"] if g["key"] == group["key"])
        for b in (0, 17, 39):
            values = [curves[m][b] for m in members if curves[m][b] is not None]
            mean = sum(values) / len(values)
            spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
            assert group["lo"][b] == pytest.approx(min(values), abs=1e-6)
            assert group["hi"][b] == pytest.approx(max(values), abs=1e-6)
            assert group_std["hi"][b] - group_std["mean"][b] == pytest.approx(spread, abs=1e-5)
            assert group["n"][b] == len(values)


def test_chain_selection_is_exactly_the_chain_to_the_best(project: Ledger) -> None:
    answer = project.browse.explore(SLUG, ExploreQuery(metrics=("loss",), select="chain"))
    chain = [t.exp_id for t in project.trials.chain(SLUG)]
    assert len(chain) >= 3
    assert [t["exp_id"] for t in answer["trials"]] == chain
    assert sorted(t["exp_id"] for t in answer["panels"][0]["trials"]) == sorted(chain)


def test_subtree_selection_is_the_trial_and_its_descendants_narrowed_by_filters(project: Ledger) -> None:
    parents = {t.exp_id: t.parent_exp for t in project.trials.list_trials(SLUG)}
    root = "003"
    under = {root}
    for _ in parents:
        under |= {child for child, parent in parents.items() if parent in under}
    answer = project.browse.explore(SLUG, ExploreQuery(metrics=("core_metric",), select="subtree", root=root))
    assert {t["exp_id"] for t in answer["trials"]} == under
    kept = project.browse.explore(
        SLUG, ExploreQuery(metrics=("core_metric",), select="subtree", root=root, filters={"status": ["keep"]})
    )
    statuses = {t.exp_id: t.status.value for t in project.trials.list_trials(SLUG)}
    assert {t["exp_id"] for t in kept["trials"]} == {e for e in under if statuses[e] == "keep"}


def test_limit_keeps_the_most_recent_matching_trials(project: Ledger) -> None:
    answer = project.browse.explore(SLUG, ExploreQuery(metrics=("core_metric",), limit=3))
    assert [t["exp_id"] for t in answer["trials"]] == ["004", "005", "006"]
    assert answer["selection"] == {
        "select": "filter",
        "to": None,
        "root": None,
        "matched": TRIALS,
        "shown": 3,
        "truncated": True,
    }


def test_group_by_an_extra_key(project: Ledger) -> None:
    answer = project.browse.explore(SLUG, ExploreQuery(metrics=("loss",), group_by="extra.lr"))
    assert {g["key"]: g["trials"] for g in answer["groups"]} == {
        "0.0001": ["000", "002", "004", "006"],
        "0.0003": ["001", "003", "005"],
    }


def test_turn_axis_gives_each_trials_mean_per_turn(project: Ledger) -> None:
    answer = project.browse.explore(SLUG, ExploreQuery(metrics=("ig",), x="turn"))
    panel = answer["panels"][0]
    assert panel["grid"] == [0, 1, 2]
    for curve in panel["trials"]:
        per_turn = raw_points(project, curve["exp_id"], "ig")
        expected = [sum(v for _, v in per_turn[t]) / len(per_turn[t]) for t in (0, 1, 2)]
        assert_close(curve["y"], expected)


def test_wall_axis_counts_seconds_from_each_trials_first_point(project: Ledger) -> None:
    panel = project.browse.explore(SLUG, ExploreQuery(metrics=("loss",), x="wall", buckets=30))["panels"][0]
    assert panel["grid"][0] == 0
    # a cell sits at the mean wall time of its points; the slowest trials (0.7 s per step)
    # span the axis up to their last step bucket (steps 580-599 of 30 buckets of 20 steps),
    # the fastest (0.5 s per step) 5/7 of it
    span = 0.7 * (580 + 599) / 2
    assert panel["grid"][-1] == pytest.approx(span * 29 / 30, rel=1e-6)
    filled = {t["exp_id"]: sum(v is not None for v in t["y"]) for t in panel["trials"]}
    assert filled["002"] == 30 and filled["000"] < 24


def test_core_metric_panel_gives_each_groups_statistics(project: Ledger) -> None:
    answer = project.browse.explore(SLUG, ExploreQuery(metrics=("core_metric",), group_by="specialist"))
    panel = answer["panels"][0]
    trials = {t.exp_id: t for t in project.trials.list_trials(SLUG)}
    for group, stats in zip(answer["groups"], panel["group_stats"]):
        values = [trials[e].core_metric for e in group["trials"]]
        assert stats["n"] == len(values)
        assert stats["mean"] == pytest.approx(sum(values) / len(values))
        assert (stats["min"], stats["max"]) == (min(values), max(values))


def test_bad_queries_name_their_field(project: Ledger) -> None:
    for query, field in [
        (ExploreQuery(metrics=()), "metric"),
        (ExploreQuery(metrics=("loss",), band="wide"), "band"),
        (ExploreQuery(metrics=("loss",), group_by="hypothesis"), "group"),
        (ExploreQuery(metrics=("loss",), select="subtree"), "root"),
        (ExploreQuery(metrics=("loss",), buckets=5), "buckets"),
        (ExploreQuery(metrics=("loss",), step_min=10, step_max=5), "step_min"),
    ]:
        with pytest.raises(InvalidInput) as caught:
            project.browse.explore(SLUG, query)
        assert caught.value.field == field
    with pytest.raises(NotFound):
        project.browse.explore(SLUG, ExploreQuery(metrics=("loss",), select="subtree", root="nope"))
    with pytest.raises(NotFound):
        project.browse.explore("no-such-project", ExploreQuery(metrics=("loss",)))


def test_api_returns_the_same_answer_and_problems_name_the_field(project: Ledger, db_url: str) -> None:
    with TestClient(create_app(Settings(database_url=db_url))) as client:
        response = client.get(
            f"/api/v1/projects/{SLUG}/explore",
            params=[
                ("metric", "loss"),
                ("metric", "core_metric"),
                ("group", "specialist"),
                ("status", "keep"),
                ("status", "baseline"),
            ],
        )
        assert response.status_code == 200, response.text
        query = ExploreQuery(
            metrics=("loss", "core_metric"), group_by="specialist", filters={"status": ["keep", "baseline"]}
        )
        assert response.json() == project.browse.explore(SLUG, query)
        bad = client.get(f"/api/v1/projects/{SLUG}/explore", params={"metric": "loss", "x": "epoch"})
        assert bad.status_code == 422 and bad.json()["field"] == "x"
        missing = client.get(f"/api/v1/projects/{SLUG}/explore", params={"metric": "loss", "select": "subtree"})
        assert missing.status_code == 422 and missing.json()["field"] == "root"


def test_page_embeds_hostile_group_names_as_inert_json(project: Ledger, db_url: str) -> None:
    import html
    import json
    import re

    hostile = "</script><script>window.__xss=1</script><!--"
    project.recording.update_trial(SLUG, "006", {"specialist": hostile})
    with TestClient(create_app(Settings(database_url=db_url))) as client:
        page = client.get(f"/projects/{SLUG}/explore", params={"metric": "loss", "group": "specialist"})
    assert page.status_code == 200
    assert "<script>window.__xss" not in page.text
    embedded = re.search(r'<script type="application/json" id="explore-data">(.*?)</script>', page.text, re.S)
    assert embedded is not None
    data = json.loads(embedded.group(1))
    assert hostile in [g["key"] for g in data["answer"]["groups"]]
    assert html.escape(hostile, quote=False) in page.text  # the legend shows it as text
