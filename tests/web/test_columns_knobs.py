"""Columns that follow the project, the column picker and the knob view, on an
autoresearch loop (``tests/web/loop_project.py``) and on the A²TGPO demo, both backends."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from lineage.service import Ledger
from tests.web.conftest import SLUG, make_client
from tests.web.loop_project import LoopProject, load_loop_project

A2TGPO_ONLY = ("specialist", "domain", "expected_delta", "ig_clip_scale_mean", "ig_clip_scale_frac_high")


@pytest.fixture
def loop(ledger: Ledger, db_url: str) -> Iterator[tuple[Ledger, LoopProject, TestClient]]:
    made = load_loop_project(ledger)
    with make_client(db_url) as client:
        yield ledger, made, client


def headers(html: str) -> list[str]:
    """The trials table's column headers (less the compare box), as shown."""
    head = html.split('<table class="trials">', 1)[1].split("</thead>", 1)[0]
    cells = re.findall(r"<th scope=\"col\"[^>]*>(.*?)</th>", head, re.S)[1:]
    return [re.sub(r"<[^>]+>|[↑↓]", "", cell).strip() for cell in cells]


def row_names(html: str) -> list[str]:
    return re.findall(r'<th scope="row">([^<]*)</th>', html)


def test_the_loop_file_columns_are_first_class_and_empty_fields_hidden(loop) -> None:  # type: ignore[no-untyped-def]
    ledger, made, client = loop
    columns = ledger.browse.project_columns(made.slug)
    assert [(c.key, c.label, c.numeric) for c in columns.file] == [
        ("extra.commit", "commit", False),
        ("extra.memory_gb", "memory_gb", True),
    ]
    best = ledger.trials.trial(made.slug, made.best_exp)

    table = client.get(f"/projects/{made.slug}/trials").text
    shown = headers(table)
    assert "commit" in shown and "memory_gb" in shown and "val_bpb" in shown
    assert not set(shown) & {"specialist", "domain"}
    newest = ledger.trials.trial(made.slug, made.exp_ids[-1])
    assert f">{newest.extra['commit']}<" in table

    compare = client.get(f"/projects/{made.slug}/compare?exp={made.best_exp}&exp={made.exp_ids[1]}").text
    rows = row_names(compare)
    assert "commit" in rows and "memory_gb" in rows
    assert not set(rows) & set(A2TGPO_ONLY), rows
    assert best.extra["commit"] in compare

    page = client.get(f"/projects/{made.slug}/trials/{made.best_exp}").text
    rows = row_names(page)
    assert "commit" in rows and "memory_gb" in rows and not set(rows) & set(A2TGPO_ONLY)
    assert "Clip-scale summary" not in page and "Expected delta" not in page
    assert "other extra keys" not in page  # nothing left in a raw blob: _row is bookkeeping
    assert re.search(rf'<th scope="row">memory_gb</th><td>{best.extra["memory_gb"]:g}</td>', page)

    for url in (
        f"/projects/{made.slug}/chain",
        f"/projects/{made.slug}/tree?focus={made.best_exp}",
        f"/projects/{made.slug}",
    ):
        html = client.get(url).text
        assert re.search(r'data-col="extra.commit"><span class="muted">commit</span> ' + best.extra["commit"], html), (
            url
        )


def test_the_demo_keeps_its_a2tgpo_fields(client: TestClient) -> None:
    page = client.get(f"/projects/{SLUG}/trials/004").text
    rows = row_names(page)
    for name in ("specialist", "domain", "expected_delta", "ig_clip_scale_mean"):
        assert name in rows
    assert "Clip-scale summary" in page and "Expected delta" in page
    assert {"specialist", "domain"} <= set(headers(client.get(f"/projects/{SLUG}/trials").text))
    assert "specialist" in row_names(client.get(f"/projects/{SLUG}/compare?exp=003,004").text)


def test_the_column_picker_lives_in_the_url(loop) -> None:  # type: ignore[no-untyped-def]
    _, made, client = loop
    url = f"/projects/{made.slug}/trials?cols=exp_id,status,val_bpb,extra.memory_gb"
    html = client.get(url).text
    assert headers(html) == ["exp", "status", "val_bpb", "memory_gb"]
    picker = html.split('<details class="col-picker"', 1)[1].split("</details>", 1)[0]
    ticked = re.findall(r'name="cols" value="([^"]+)" checked', picker)
    assert ticked == ["exp_id", "status", "val_bpb", "extra.memory_gb"]
    # the form as a browser without script sends it (cols repeated) reads the same
    again = client.get(f"/projects/{made.slug}/trials", params=[("cols", key) for key in ticked]).text
    assert headers(again) == headers(html)
    # sorting and paging keep the choice
    assert "cols=exp_id%2Cstatus%2Cval_bpb%2Cextra.memory_gb&amp;sort=metric" in html
    nxt = re.search(r'href="([^"]+)" rel="next"', html).group(1).replace("&amp;", "&")  # type: ignore[union-attr]
    assert headers(client.get(nxt).text) == headers(html)
    # compare takes the same names
    compare = client.get(f"/projects/{made.slug}/compare?exp={made.best_exp},000&cols=extra.memory_gb,val_bpb").text
    assert row_names(compare)[:2] == ["memory_gb", "val_bpb"]
    bad = client.get(f"/projects/{made.slug}/trials?cols=exp_id,nonsense")
    assert bad.status_code == 400 and "nonsense" in bad.text and "cols" in bad.text


def test_the_knob_view_plots_every_trial_with_the_column_and_flags_the_chain(loop) -> None:  # type: ignore[no-untyped-def]
    ledger, made, client = loop
    trials = {t.exp_id: t for t in ledger.tables.stream_trials(made.slug)}
    chain = [t.exp_id for t in ledger.trials.chain(made.slug)]
    view = ledger.browse.knobs(made.slug, ["extra.memory_gb"])
    assert view.axes[0].kind == "number" and not view.axes[0].positive  # crashes log 0.0
    assert {p.exp_id for p in view.points} == {e for e, t in trials.items() if "memory_gb" in t.extra}
    for p in view.points:
        assert p.values[0] == pytest.approx(trials[p.exp_id].extra["memory_gb"])
        assert p.metric == trials[p.exp_id].core_metric and p.status == trials[p.exp_id].status.value
    assert {p.exp_id for p in view.points if p.on_chain} == set(chain) and list(view.chain) == chain
    assert view.best_exp == made.best_exp

    # a telemetry summary: the last train_loss of each trial that has it, from SQL
    loss = ledger.browse.knobs(made.slug, ["telemetry.train_loss.last"])
    assert {p.exp_id for p in loss.points} == set(made.with_telemetry) and loss.axes[0].positive
    for p in loss.points:
        series = [pt for pt in ledger.telemetry.telemetry_points(made.slug, p.exp_id) if pt["name"] == "train_loss"]
        assert p.values[0] == pytest.approx(max(series, key=lambda pt: pt["step"])["value"])

    # a text column is a category axis
    commits = ledger.browse.knobs(made.slug, ["extra.commit"], limit=50)
    assert commits.axes[0].kind == "category" and commits.truncated
    assert {p.exp_id for p in commits.points} >= set(made.exp_ids[-50:]) | set(chain[-300:])

    # the page draws them, each a link to its trial; the JSON twin says the same
    page = client.get(f"/projects/{made.slug}/knobs?x=extra.memory_gb&axes=extra.memory_gb,seq").text
    scatter = page.split('data-plot="knob-scatter"', 1)[1].split("</figure>", 1)[0]
    linked = re.findall(rf'<a href="/projects/{made.slug}/trials/([^"]+)" data-exp', scatter)
    assert sorted(linked) == sorted(p.exp_id for p in view.points)
    assert 'class="chainline"' in scatter and 'class="pt-best-ring"' in scatter
    assert 'data-plot="knob-parallel"' in page and "pc-chain" in page
    data = client.get(f"/api/v1/projects/{made.slug}/knobs", params={"x": "extra.memory_gb"}).json()
    assert len(data["points"]) == len(view.points) and data["chain"] == chain
    assert {p["exp_id"] for p in data["points"] if p["on_chain"]} == set(chain)
    assert client.get(f"/projects/{made.slug}/knobs?x=telemetry.train_loss.last&log=1").text.count("(log scale)") == 1
    problem = client.get(f"/api/v1/projects/{made.slug}/knobs", params={"x": "nope"})
    assert problem.status_code == 422 and problem.json()["field"] == "x"
    assert client.get(f"/projects/{made.slug}/knobs?x=hypothesis").status_code == 400
