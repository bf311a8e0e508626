"""Exports from the trials table (issue 35): CSV, Parquet and the project's own results
file, each the bytes ``lineage export`` writes for the same trials (one function,
``ledger.exports``, serves both), for an autoresearch-shaped and a fieldkit-shaped project,
the whole project and a filtered view."""

from __future__ import annotations

import io

import pytest
from click.testing import CliRunner

from api.cli import cli
from lineage.service import Ledger
from tests.web.conftest import make_client
from tests.web.words_projects import AR, FK, ar_results, load_ar, load_fk


def cli_export(db_url: str, tmp_path, *args: str) -> bytes:  # type: ignore[no-untyped-def]
    out = tmp_path / "out.bin"
    result = CliRunner().invoke(cli, ["--db", db_url, "export", *args, "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out.read_bytes()


@pytest.fixture
def loops(ledger: Ledger) -> Ledger:
    load_ar(ledger)
    load_fk(ledger)
    return ledger


@pytest.mark.parametrize("fmt", ["csv", "parquet", "results"])
@pytest.mark.parametrize("slug", [AR, FK])
def test_a_page_download_is_byte_for_byte_the_cli_export(loops: Ledger, db_url: str, tmp_path, slug, fmt) -> None:  # type: ignore[no-untyped-def]
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    with make_client(db_url) as client:
        whole = client.get(f"/projects/{slug}/trials", params={"format": fmt})
        view = client.get(f"/projects/{slug}/trials", params={"format": fmt, "status": "keep", "filter": "seq > 5"})
    assert whole.status_code == 200 and view.status_code == 200
    assert "attachment" in whole.headers["content-disposition"]
    assert whole.content == cli_export(db_url, tmp_path, "-p", slug, "--format", fmt)
    assert view.content == cli_export(
        db_url, tmp_path, "-p", slug, "--format", fmt, "--status", "keep", "--filter", "seq > 5"
    )
    assert len(view.content) < len(whole.content)


def test_the_loops_own_file_comes_back_as_it_was_written(loops: Ledger, db_url: str) -> None:
    with make_client(db_url) as client:
        own = client.get(f"/projects/{AR}/trials", params={"format": "results"})
        kept = client.get(f"/projects/{AR}/trials", params={"format": "results", "status": "keep"})
    assert own.text == ar_results()  # the file's own columns, numbers and words
    lines = kept.text.splitlines()
    assert lines[0] == ar_results().splitlines()[0] and all(line.split("\t")[6] == "keep" for line in lines[1:])


def test_csv_has_the_files_columns_and_no_float_noise(loops: Ledger, db_url: str) -> None:
    with make_client(db_url) as client:
        text = client.get(f"/projects/{AR}/trials", params={"format": "csv"}).text
    header = text.splitlines()[0].split(",")
    assert {"extra.commit", "extra.peak_vram_mb", "extra.wd", "core_metric"} <= set(header)
    assert "0000000" not in text and "9999999" not in text  # deltas at 12 significant digits


def test_the_trials_page_links_each_download_of_its_view(loops: Ledger, db_url: str) -> None:
    with make_client(db_url) as client:
        html = client.get(f"/projects/{AR}/trials", params={"status": "keep", "sort": "metric", "limit": 25}).text
    for fmt in ("csv", "parquet", "results"):
        assert f'href="/projects/{AR}/trials?status=keep&amp;format={fmt}"' in html
    assert "results.tsv (the loop&#39;s own)" in html


def test_a_bad_format_or_filter_is_a_problem_not_a_broken_download(loops: Ledger, db_url: str) -> None:
    with make_client(db_url) as client:
        bad_format = client.get(f"/projects/{AR}/trials", params={"format": "xlsx"})
        bad_filter = client.get(f"/projects/{AR}/trials", params={"format": "csv", "filter": "nope < 1"})
    assert bad_format.status_code == 400 and "format" in bad_format.text
    assert bad_filter.status_code in (400, 422) and "filter" in bad_filter.text


def test_the_cli_refuses_an_unknown_filter_in_one_line(loops: Ledger, db_url: str) -> None:
    result = CliRunner().invoke(cli, ["--db", db_url, "export", "-p", AR, "--format", "csv", "--filter", "nope < 1"])
    assert result.exit_code != 0 and "nope" in result.output and len(result.output.strip().splitlines()) == 1
    assert io.StringIO(result.output).read().count("Traceback") == 0
