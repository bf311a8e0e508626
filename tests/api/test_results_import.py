"""One import for every face (issue 19): the HTTP import, the upload page and the CLI take
the same options (format ``auto`` by default, the column options, the direction with
``infer`` by default, the status map, the column names of a headerless file), read bytes
by the same rule (a byte-order mark kept, so the export is byte for byte), answer what the
import decided (format, metric, direction and why, warnings, lines kept as text), preview
without storing, and refuse an ambiguous file the same way -- on both backends."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from api.cli import cli
from lineage.errors import NotFound
from lineage.service import Ledger
from tests.api.conftest import API, assert_problem
from tests.lineage.autoresearch_files import HEADERLESS_COLUMNS, HEADERLESS_MODELS, ORIGINAL, RECORDS, tsv

URL = f"{API}/projects/loop/trials.tsv"

#: issue 19, case 4: one word in val_bpb must not hand the metric to memory_gb
AMBIGUOUS = tsv(
    "commit\tval_bpb\tmemory_gb\tstatus\tdescription",
    "a1b2c3d\t0.997900\t44.0\tkeep\tbaseline",
    "b2c3d4e\tsee log\t44.0\tdiscard\tbroken run",
    "c3d4e5f\tpending eval\t44.2\tkeep\tlr 0.04",
)


def exported(ledger: Ledger, slug: str = "loop") -> str:
    out = io.StringIO(newline="")
    ledger.files.export_results(slug, out)
    return out.getvalue()


def post(client: TestClient, text: str | bytes, **params: object):  # type: ignore[no-untyped-def]
    body = text.encode() if isinstance(text, str) else text
    return client.post(URL, content=body, params={"create": "true", **params})


def upload(client: TestClient, text: str | bytes, project: str = "loop", **fields: str):  # type: ignore[no-untyped-def]
    client.get("/upload")  # sets the CSRF cookie
    data = {"csrf": client.cookies.get("lineage_csrf"), "project": project, **fields}
    body = text.encode() if isinstance(text, str) else text
    return client.post("/upload", data=data, files={"file": ("results.tsv", body, "text/tab-separated-values")})


# -- HTTP ---------------------------------------------------------------------------------------


def test_http_import_sniffs_the_format_infers_the_direction_and_answers_what_it_decided(
    client: TestClient, ledger: Ledger
) -> None:
    made = post(client, ORIGINAL)
    assert made.status_code == 201, made.text
    answer = made.json()
    assert (answer["format"], answer["metric"], answer["metric_name"]) == ("autoresearch", "val_bpb", "val_bpb")
    assert answer["lower_is_better"] is True and answer["direction"].startswith("from the name 'val_bpb'")
    assert (answer["rows"], answer["committed"], answer["created"]) == (8, True, True)
    assert exported(ledger) == ORIGINAL


def test_http_import_answers_the_lines_kept_as_text_and_the_warnings(client: TestClient) -> None:
    case = RECORDS["stray_output"]
    answer = post(client, case.text).json()
    assert answer["rows"] == case.rows and answer["text_lines"] == [6, 7, 11, 13]
    assert any("lines 6, 7: not a row" in w for w in answer["warnings"])


def test_http_import_takes_every_option_of_the_cli(client: TestClient, ledger: Ledger) -> None:
    # columns for a headerless file, a direction word, a status map, the metric
    answer = post(
        client,
        HEADERLESS_MODELS,
        columns=HEADERLESS_COLUMNS,
        direction="higher",
        status_map="keep=keep",
        metric="tok_s",
    ).json()
    assert (answer["metric"], answer["lower_is_better"], answer["direction"]) == ("tok_s", False, "from the flag")
    assert ledger.files.results_layout("loop").has_header is False  # type: ignore[union-attr]
    assert exported(ledger) == HEADERLESS_MODELS
    text = tsv("commit\tscore\tverdict\tnote", "a1b2c3d\t0.5\tshipped\tbase", "b2c3d4e\t0.6\tshipped\tmore")
    made = client.post(
        f"{API}/projects/mapped/trials.tsv",
        content=text.encode(),
        params=[
            ("create", "true"),
            ("status", "verdict"),
            ("description", "note"),
            ("status_map", "shipped=keep"),
            ("id", "commit"),
        ],
    )
    assert made.status_code == 201, made.text
    assert [t.exp_id for t in ledger.trials.chain("mapped")] == ["a1b2c3d", "b2c3d4e"]


def test_http_import_refuses_what_the_cli_refuses_naming_the_field(client: TestClient) -> None:
    bad = assert_problem(post(client, AMBIGUOUS, format="autoresearch"), 422, "metric")
    assert "'val_bpb'" in bad["detail"] and "--metric" in bad["detail"]
    headerless = assert_problem(post(client, HEADERLESS_MODELS), 422, "direction")
    assert headerless["line"] == 1 and "--columns" in headerless["detail"]
    assert_problem(post(client, ORIGINAL, direction="higher", lower_is_better="true"), 422, "direction")
    assert_problem(post(client, ORIGINAL, direction="sideways"), 422, "direction")
    assert_problem(post(client, ORIGINAL, status_map="nonsense"), 422, "status_map")
    assert_problem(post(client, ORIGINAL, columns="a,,b"), 422, "columns")
    assert_problem(client.get(f"{API}/projects/loop"), 404)  # nothing was created
    # without create, a missing project is a 404 for every format
    assert_problem(client.post(URL, content=ORIGINAL.encode()), 404, "project")


def test_http_preview_decides_everything_and_stores_nothing(client: TestClient, ledger: Ledger) -> None:
    preview = post(client, ORIGINAL, preview="true")
    assert preview.status_code == 200
    assert preview.json()["committed"] is False and preview.json()["rows"] == 8
    with pytest.raises(NotFound):
        ledger.projects.project("loop")
    assert post(client, ORIGINAL).status_code == 201
    again = post(client, ORIGINAL, preview="true")  # a preview checks against what is stored
    assert_problem(again, 422, "project")


def test_http_bytes_are_read_by_the_files_rule_and_a_bom_comes_back(client: TestClient, ledger: Ledger) -> None:
    bommed = "\ufeff" + ORIGINAL
    assert post(client, bommed.encode("utf-8")).status_code == 201
    assert exported(ledger).encode("utf-8") == bommed.encode("utf-8")
    bad = assert_problem(post(client, b"commit\tval_bpb\nabc\t\xff1.0\n"), 422, "body")
    assert (bad["line"], bad["column"]) == (2, 5)
    nul = assert_problem(post(client, b"commit\tval_bpb\n\x00"), 422, "body")
    assert nul["line"] == 2
    assert_problem(post(client, b"  \n"), 422, "body")


# -- the upload page ----------------------------------------------------------------------------


def test_page_defaults_to_auto_and_infer_and_shows_what_the_import_decided(client: TestClient, ledger: Ledger) -> None:
    form = client.get("/upload").text
    assert '<option value="auto" selected' in form and 'value="infer" checked' in form
    page = upload(client, ORIGINAL)
    assert page.status_code == 200 and "Imported 8 trials into loop" in page.text
    assert "<dd>autoresearch</dd>" in page.text and "lower is better: from the name &#39;val_bpb&#39;" in page.text
    assert ledger.projects.project("loop").lower_is_better is True and exported(ledger) == ORIGINAL


def test_page_preview_shows_warnings_and_text_lines_then_imports_the_carried_text(
    client: TestClient, ledger: Ledger
) -> None:
    case = RECORDS["stray_output"]
    page = upload(client, case.text, action="preview")
    assert page.status_code == 200 and "would be imported into loop" in page.text
    assert "Traceback (most recent call last):" in page.text and "not a row of the table" in page.text
    with pytest.raises(NotFound):
        ledger.projects.project("loop")
    # the previewed file comes back in the text box; importing it stores exactly the file
    client.get("/upload")
    done = client.post(
        "/upload",
        data={
            "csrf": client.cookies.get("lineage_csrf"),
            "project": "loop",
            "text": case.text,
            "source": "results.tsv",
            "action": "import",
        },
    )
    assert done.status_code == 200 and f"Imported {case.rows} trials into loop" in done.text
    assert exported(ledger) == case.text


def test_page_takes_the_columns_of_a_headerless_file_and_refuses_an_ambiguous_one(
    client: TestClient, ledger: Ledger
) -> None:
    refused = upload(client, HEADERLESS_MODELS)
    assert refused.status_code == 400 and "Line 1" in refused.text and "--columns" in refused.text
    named = upload(client, HEADERLESS_MODELS, columns=HEADERLESS_COLUMNS)
    assert named.status_code == 200 and "Imported 4 trials" in named.text
    assert ledger.projects.project("loop").metric_name == "tok_s" and exported(ledger) == HEADERLESS_MODELS
    ambiguous = upload(client, AMBIGUOUS, project="amb", format="autoresearch")
    error = ambiguous.text.split('id="upload-error"')[1].split("</section>")[0]
    assert ambiguous.status_code == 400 and "Nothing was imported" in error and "Imported" not in ambiguous.text
    assert "(metric)" in error and "&#39;val_bpb&#39; is named like a metric" in error and "--metric" in error
    with pytest.raises(NotFound):
        ledger.projects.project("amb")


def test_page_keeps_a_bom_and_reports_bad_bytes_with_line_and_column(client: TestClient, ledger: Ledger) -> None:
    bommed = "\ufeff" + ORIGINAL
    assert upload(client, bommed.encode("utf-8")).status_code == 200
    assert exported(ledger) == bommed
    bad = upload(client, b"commit\tval_bpb\nabc\t\xff1.0\n", project="bin")
    assert bad.status_code == 400 and "Line 2, column 5" in bad.text and "UTF-8" in bad.text


# -- the CLI ------------------------------------------------------------------------------------


def test_cli_columns_names_a_headerless_file_and_preview_stores_nothing(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "results.tsv"
    source.write_text(HEADERLESS_MODELS, encoding="utf-8")
    runner = CliRunner()
    refused = runner.invoke(cli, ["--db", db_url, "import", str(source), "--project", "loop"])
    assert refused.exit_code == 2 and "line 1" in refused.stderr and "--columns" in refused.stderr
    preview = runner.invoke(
        cli, ["--db", db_url, "import", str(source), "--project", "loop", "--preview", "--columns", HEADERLESS_COLUMNS]
    )
    assert preview.exit_code == 0 and "would import (preview; nothing stored) 4 trials" in preview.output
    with pytest.raises(NotFound):
        ledger.projects.project("loop")
    done = runner.invoke(
        cli, ["--db", db_url, "import", str(source), "--project", "loop", "--columns", HEADERLESS_COLUMNS]
    )
    assert done.exit_code == 0 and "imported 4 trials into 'loop' (generic; metric 'tok_s'" in done.output
    assert exported(ledger) == HEADERLESS_MODELS
