"""Ids as shown are accepted back, exp ids sort as counted, any field sorts, and the filter
expression reaches the API, the pages and the CLI (issue 20, defects 7 and 9, item 10)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from api.cli import cli
from lineage.domain import FailureLabel, Trial
from lineage.exp_ids import exp_sort_key, shown_forms
from lineage.service import Ledger

API = "/api/v1/projects"
IDS = ["000", "001", "099", "100", "101", "1000", "1009", "10", "009", "2", "a10", "a9", "b", "exp_x"]


def _project(ledger: Ledger, slug: str = "p") -> None:
    rng = random.Random(7)
    trials = []
    for i, exp_id in enumerate(IDS):
        trials.append(
            Trial(
                exp_id=exp_id,
                status=FailureLabel.KEEP if i % 3 else FailureLabel.DISCARD,
                core_metric=None if i % 5 == 4 else round(rng.uniform(0.9, 1.0), 4),
                delta_vs_best=None if i == 0 else round(rng.uniform(-0.01, 0.01), 4),
                parent_exp="" if i == 0 else IDS[i - 1],
                hypothesis=f"idea {i}",
                extra={"memory_gb": 40 + i % 4} if i % 4 else ({"memory_gb": "n/a"} if i % 8 == 0 else {}),
            )
        )
    ledger.tables.import_trials(slug, trials, create_with={"lower_is_better": True})


def test_sort_key_counts_digits_as_numbers() -> None:
    ordered = sorted(["1009", "101", "1000", "099", "100", "001", "10", "2", "a10", "a9"], key=exp_sort_key)
    assert ordered == ["001", "2", "10", "099", "100", "101", "1000", "1009", "a9", "a10"]
    assert exp_sort_key("001") == exp_sort_key("1")
    assert shown_forms("exp_1995") == ("exp_1995", "1995") and shown_forms(" 12 ") == ("12",)


def test_migration_keeps_a_frozen_copy_of_the_sort_key() -> None:
    import importlib

    frozen = importlib.import_module("migrations.versions.0008_exp_key").frozen_exp_sort_key
    rng = random.Random(3)
    samples = IDS + ["".join(rng.choice("0123456789ab_-") for _ in range(rng.randint(1, 12))) for _ in range(500)]
    assert all(frozen(s) == exp_sort_key(s) for s in samples)


def _numeric_order(rows: list[str]) -> list[str]:
    return sorted(rows, key=lambda i: (exp_sort_key(i), IDS.index(i)))


def test_api_sorts_exp_ids_numeric_aware_across_pages(ledger: Ledger, client: TestClient) -> None:
    _project(ledger)
    for order in ("asc", "desc"):
        seen, cursor = [], None
        while True:
            params = {"sort": "exp_id", "order": order, "limit": 4, **({"cursor": cursor} if cursor else {})}
            body = client.get(f"{API}/p/trials", params=params).json()
            seen += [t["exp_id"] for t in body["items"]]
            cursor = body["next_cursor"]
            if not cursor:
                break
        expected = _numeric_order(IDS)
        assert seen == (expected if order == "asc" else list(reversed(expected)))


@pytest.mark.parametrize(
    "sort", ["core_metric", "-delta_vs_best", "extra.memory_gb", "-extra.memory_gb", "status", "-hypothesis", "metric"]
)
def test_any_field_sorts_in_stable_pages_with_missing_values_last(
    ledger: Ledger, client: TestClient, sort: str
) -> None:
    _project(ledger)
    trials = {t.exp_id: t for t in ledger.tables.stream_trials("p")}
    seen, cursor = [], None
    while True:
        body = client.get(
            f"{API}/p/trials", params={"sort": sort, "limit": 3, **({"cursor": cursor} if cursor else {})}
        )
        assert body.status_code == 200, body.text
        seen += [t["exp_id"] for t in body.json()["items"]]
        cursor = body.json()["next_cursor"]
        if not cursor:
            break
    assert sorted(seen) == sorted(IDS)  # nothing skipped or repeated
    key = "core_metric" if sort == "metric" else sort.lstrip("-")
    descending = sort.startswith("-")

    def value(t: Trial):  # type: ignore[no-untyped-def]
        v = t.extra.get(key[6:]) if key.startswith("extra.") else getattr(t, key)
        return v.value if isinstance(v, FailureLabel) else v

    ranks = {int: 0, float: 0, str: 1}
    groups = [ranks.get(type(value(trials[i])), 2) for i in seen]
    assert groups == sorted(groups)  # numbers, then text, then none: in both directions
    for kind in (0, 1):
        run = [value(trials[i]) for i, g in zip(seen, groups) if g == kind]
        assert run == sorted(run, reverse=descending)


def test_sort_and_filter_errors_are_problems_naming_the_field(ledger: Ledger, client: TestClient) -> None:
    _project(ledger)
    bad = client.get(f"{API}/p/trials", params={"filter": "status = keep and (core_metric < 1"})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")
    problem = bad.json()
    assert problem["field"] == "filter" and problem["column"] == 35
    assert client.get(f"{API}/p/trials", params={"sort": "nope"}).json()["field"] == "sort"
    explore = client.get(f"{API}/p/explore", params={"metric": "core_metric", "filter": "extra.x >"})
    assert explore.status_code == 422 and explore.json()["field"] == "filter"


def test_api_filter_narrows_the_listing_and_its_count(ledger: Ledger, client: TestClient) -> None:
    _project(ledger)
    body = client.get(
        f"{API}/p/trials", params={"filter": "extra.memory_gb >= 42 and exp_id < exp_1000", "sort": "exp_id"}
    )
    assert body.status_code == 200
    expected = _numeric_order(
        [
            t.exp_id
            for t in ledger.tables.stream_trials("p")
            if isinstance(t.extra.get("memory_gb"), int)
            and t.extra["memory_gb"] >= 42
            and exp_sort_key(t.exp_id) < exp_sort_key("1000")
        ]
    )
    assert [t["exp_id"] for t in body.json()["items"]] == expected and body.json()["total"] == len(expected)
    assert expected  # the filter kept some and dropped some
    assert len(expected) < len(IDS)


def test_ids_as_shown_are_accepted_everywhere(ledger: Ledger, client: TestClient) -> None:
    _project(ledger)
    assert client.get(f"{API}/p/trials/exp_1009").json()["exp_id"] == "1009"
    assert client.get(f"{API}/p/trials/exp_1009/lineage").json()["chain"][-1]["exp_id"] == "1009"
    assert client.get(f"{API}/p/trials/exp_x").json()["exp_id"] == "exp_x"  # a stored id wins over a form
    assert client.get(f"{API}/p/trials/exp_nope").status_code == 404
    children = client.get(f"{API}/p/trials", params={"parent": "exp_1000"}).json()["items"]
    assert [t["exp_id"] for t in children] == ["1009"]
    assert ledger.trials.trial("p", "EXP_099").exp_id == "099"
    assert ledger.trials.trial("p", "9").exp_id == "009"  # the same number, one trial
    page = client.get("/projects/p/compare", params=[("exp", "exp_1000"), ("exp", "exp_1009")])
    assert page.status_code == 200 and "exp_1009" in page.text
    assert client.get("/projects/p/trials/exp_1009").status_code == 200
    table = client.get("/projects/p/trials", params={"parent": "exp_1000"})
    assert table.status_code == 200 and "/trials/1009" in table.text


def test_table_page_takes_the_filter_and_shows_its_error_in_place(ledger: Ledger, client: TestClient) -> None:
    _project(ledger)
    page = client.get("/projects/p/trials", params={"filter": "hypothesis ~ 'idea 1' and status = keep"})
    assert page.status_code == 200
    shown = {
        t.exp_id for t in ledger.tables.stream_trials("p") if "idea 1" in t.hypothesis and t.status.value == "keep"
    }
    assert shown and all(f'value="{i}" aria-label="compare exp_{i}"' in page.text for i in shown)
    assert 'aria-label="compare exp_000"' not in page.text  # a row's parent links it, as exp_000
    bad = client.get("/projects/p/trials", params={"filter": "status = kep"})
    assert bad.status_code == 422 and 'id="filter-error"' in bad.text and 'data-column="10"' in bad.text


def test_a_filter_past_the_caps_is_a_problem_on_every_face(ledger: Ledger, client: TestClient, db_url: str) -> None:
    """996 bare words fit in the 2,000 characters but went past SQLite's expression depth
    (a 500 on the API and the pages, a traceback in the CLI): now a 422 naming ``filter``."""
    _project(ledger)
    words = " ".join(["a"] * 996)
    for path, params in (
        (f"{API}/p/trials", {"filter": words}),
        (f"{API}/p/explore", {"metric": "core_metric", "filter": words}),
    ):
        bad = client.get(path, params=params)
        assert bad.status_code == 422 and bad.json()["field"] == "filter", path
        assert "more than 256 terms" in bad.json()["detail"]
    for page in ("/projects/p/trials", "/projects/p/explore"):  # the explorer's page answers a bad query 400
        bad = client.get(page, params={"filter": words})
        assert bad.status_code in (400, 422) and "more than 256 terms" in bad.text, page
    cli_bad = CliRunner().invoke(cli, ["--db", db_url, "trials", "-p", "p", "--filter", words])
    assert cli_bad.exit_code != 0 and len(cli_bad.output.strip().splitlines()) == 1, cli_bad.output


def _run(db_url: str, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--db", db_url, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_cli_trials_filters_sorts_and_prints_whole_hypotheses(ledger: Ledger, db_url: str) -> None:
    long = "a hypothesis long enough to be cut by the old sixty character table of the command line, and then some"
    ledger.tables.import_trials(
        "p",
        [
            Trial(
                exp_id=e,
                status=FailureLabel.KEEP,
                core_metric=1.0 - i / 100,
                hypothesis=long if e == "100" else f"idea {e}",
            )
            for i, e in enumerate(["1000", "99", "100", "101"])
        ],
        create_with={},
    )
    out = _run(db_url, "trials", "-p", "p", "--sort", "exp_id", "--width", "0")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["exp_99", "exp_100", "exp_101", "exp_1000"]
    assert long in out
    wrapped = _run(db_url, "trials", "-p", "p", "--filter", "exp_id = exp_100", "--width", "70")
    lines = wrapped.splitlines()[1:]
    assert len(lines) > 1 and all(len(line) <= 70 for line in lines)
    assert " ".join(" ".join(lines).split()).endswith(long.split()[-1])
    csv_out = _run(
        db_url, "trials", "-p", "p", "--filter", "core_metric < 0.985", "--sort", "-core_metric", "--format", "csv"
    )
    assert [row.split(",")[0] for row in csv_out.splitlines()[1:]] == ["100", "101"]
    bad = CliRunner().invoke(cli, ["--db", db_url, "trials", "-p", "p", "--filter", "core_metric <"])
    assert bad.exit_code != 0 and "column 14" in bad.output
    assert len(bad.output.strip().splitlines()) == 1, bad.output  # a CLI error is one line


def test_export_schema_is_typed_and_stable_with_all_null_columns(ledger: Ledger, db_url: str, tmp_path: Path) -> None:
    import pandas as pd
    import pyarrow.parquet as pq

    ledger.tables.import_trials(
        "p",
        [
            Trial(
                exp_id="000",
                status=FailureLabel.BASELINE,
                core_metric=0.99999,
                extra={"commit": "abc", "memory_gb": 44},
            ),
            Trial(
                exp_id="001",
                status=FailureLabel.KEEP,
                core_metric=0.9953,
                delta_vs_best=0.9953 - 0.99999,
                extra={"commit": "1234567", "memory_gb": 44.5, "note": {"a": 1}},
            ),
        ],
        create_with={},
    )
    _run(db_url, "export", "-p", "p", "--format", "parquet", "-o", str(tmp_path / "t.parquet"))
    schema = pq.read_schema(tmp_path / "t.parquet")
    types = {name: str(schema.field(name).type) for name in schema.names}
    assert types["train_s"] == "double" and types["notes"] == "string" and types["ig_clip_scale_mean"] == "double"
    assert types["created_at"] == "timestamp[us, tz=UTC]" and types["seq"] == "int64"
    assert (
        types["extra.memory_gb"] == "double" and types["extra.commit"] == "string" and types["extra.note"] == "string"
    )
    assert "extra" not in types
    frame = pd.read_parquet(tmp_path / "t.parquet")
    assert str(frame["created_at"].dt.tz) == "UTC"
    assert frame["delta_vs_best"].iloc[1] == -0.00469  # not -0.0046900000000000386
    assert list(frame["extra.commit"]) == ["abc", "1234567"] and frame["extra.note"].iloc[1] == '{"a":1}'
    text = _run(db_url, "export", "-p", "p", "--format", "csv")
    header, first, second = text.splitlines()
    assert "-0.00469," in second and "+00:00" in first
    assert header.split(",")[-3:] == ["extra.commit", "extra.memory_gb", "extra.note"]
