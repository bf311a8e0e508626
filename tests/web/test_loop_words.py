"""The pages speak the loop's own words (issue 35): statuses, columns, groups and knob axes
come from what the project has; nothing the ledger invents (a baseline, an empty
specialist column, the import time as "when") and no client bookkeeping shown as data."""

from __future__ import annotations

import re

import pytest

from api.pages.explore import default_metric
from lineage.service import Ledger
from tests.web.conftest import make_client
from tests.web.words_projects import AR, AR_STATUSES, FK, TEL, load_all


@pytest.fixture
def loops(ledger: Ledger) -> Ledger:
    load_all(ledger)
    return ledger


@pytest.fixture
def client(loops: Ledger, db_url: str):  # type: ignore[no-untyped-def]
    with make_client(db_url) as test_client:
        yield test_client


def offered(html: str, name: str) -> list[str]:
    return re.findall(rf'name="{name}" value="([^"]*)"', html)


def test_the_autoresearch_import_takes_the_conventions_metric_column(loops: Ledger) -> None:
    project = loops.projects.project(AR)
    assert project.metric_name == "acs"  # second column, not the later "self_org_score"


def test_status_filters_offer_the_statuses_the_loop_has(client) -> None:  # type: ignore[no-untyped-def]
    assert offered(client.get(f"/projects/{AR}/trials").text, "status") == list(AR_STATUSES)
    explore = client.get(f"/projects/{AR}/explore").text
    assert offered(explore, "status") == list(AR_STATUSES)
    # a status the address chose stays ticked even when no trial has it
    chosen = client.get(f"/projects/{AR}/trials", params={"status": "harness_abort"}).text
    assert offered(chosen, "status") == [*AR_STATUSES, "harness_abort"]


def test_an_imported_row_has_no_invented_baseline_time_or_duplicate_rows(client, loops: Ledger) -> None:  # type: ignore[no-untyped-def]
    crash = next(t for t in loops.tables.stream_trials(AR) if t.status.value == "crash")
    html = client.get(f"/projects/{AR}/trials/{crash.exp_id}").text
    assert "compared with" not in html and "baseline_exp" not in html
    fields = re.findall(r'<tr data-col="([^"]+)"><th scope="row">([^<]+)</th>', html)
    labels = [label for _, label in fields]
    assert len(labels) == len(set(labels)), labels  # status and acs once each
    assert "acs" in labels and "status" in labels
    head = html.split('<p class="sub">', 1)[1].split("</p>", 1)[0]
    assert "UTC" not in head  # the file has no time: not the import's
    table = client.get(f"/projects/{AR}/trials", params={"limit": 5}).text
    assert "UTC" not in table.split("<tbody>", 1)[1]
    assert 'value="baseline_exp"' not in table  # nor a baseline column to pick


def test_the_dashboard_has_no_empty_specialist_column(client) -> None:  # type: ignore[no-untyped-def]
    assert ">specialist</th>" not in client.get(f"/projects/{AR}").text
    assert ">specialist</th>" in client.get(f"/projects/{FK}").text


def test_a_parent_reads_as_an_exp_id(client, loops: Ledger) -> None:  # type: ignore[no-untyped-def]
    trial = next(t for t in loops.tables.stream_trials(AR) if t.parent_exp)
    html = client.get(f"/projects/{AR}/trials", params={"filter": f"exp_id = {trial.exp_id}"}).text
    assert f'/trials/{trial.parent_exp}">exp_{trial.parent_exp}</a>' in html


def test_client_bookkeeping_is_no_column_nor_group_nor_knob(client) -> None:  # type: ignore[no-untyped-def]
    bookkeeping = ("run_id", "state", "telemetry_points", "nonfinite_dropped")
    cols = offered(client.get(f"/projects/{TEL}/trials").text, "cols")
    assert {"extra.lr", "extra.wd"} <= set(cols) and not any(c.endswith(bookkeeping) for c in cols)
    trial = client.get(f"/projects/{TEL}/trials/000").text
    fields = re.findall(r'<tr data-col="([^"]+)">', trial)
    assert not any(f.endswith(bookkeeping) for f in fields)
    assert "telemetry_points" in trial.split("other extra keys", 1)[1]  # still there, as what it is
    knobs = client.get(f"/projects/{TEL}/knobs").text
    choices = re.findall(r'<option value="([^"]*)"', knobs.split('name="x"', 1)[1].split("</select>", 1)[0])
    assert "extra.wd" in choices and not any(c.endswith(bookkeeping) for c in choices)
    assert client.get(f"/projects/{TEL}/knobs?format=json").json()["axes"][0]["key"] in ("extra.lr", "extra.wd")


def test_the_explorer_groups_by_what_the_project_has_and_says_which(client) -> None:  # type: ignore[no-untyped-def]
    html = client.get(f"/projects/{TEL}/explore", params={"group": "extra.wd"}).text
    group = html.split('name="group"', 1)[1].split("</select>", 1)[0]
    options = re.findall(r'<option value="([^"]*)"', group)
    assert "extra.wd" in options and "status" in options
    assert not {"val_bpb", "specialist", "domain", "snapshot_path", "ig_clip_scale_mean"} & set(options)
    assert "wd = 0.01" in html and "<strong>wd = 0.1</strong>" in html


def test_the_explorers_default_is_a_loss_or_reward_not_the_first_name() -> None:
    answer = {"name_trials": {"adv_max": 2, "adv_mean": 2, "reward": 2, "policy_loss": 2, "lr": 1}}
    assert default_metric(answer, "greedy accuracy") == "policy_loss"
    answer["name_trials"].pop("policy_loss")
    assert default_metric(answer, "greedy accuracy") == "reward"
    assert default_metric({"name_trials": {"adv_max": 2, "val_bpb": 2}}, "val_bpb") == "val_bpb"


def test_a_numeric_knob_with_dashes_stays_numeric(client) -> None:  # type: ignore[no-untyped-def]
    view = client.get(f"/projects/{AR}/knobs", params={"x": "extra.peak_vram_mb", "format": "json"}).json()
    axis = view["axes"][0]
    assert axis["kind"] == "number" and not axis["categories"]
    values = [p["values"][0] for p in view["points"]]
    assert None in values and all(v is None or isinstance(v, float) for v in values)


def test_the_filter_error_wraps_inside_its_card(client) -> None:  # type: ignore[no-untyped-def]
    css = client.get("/static/app.css").text
    rule = css.split(".filters #filter-error", 1)[1].split("}", 1)[0]
    assert "pre-wrap" in rule and "overflow-wrap" in rule
