"""The pages show a running trial as running: a neutral live badge, never the failure
colour, never the best; its owner, start and last heartbeat (review D5)."""

from __future__ import annotations

import re

import pytest

from lineage.service import Ledger
from tests.web.conftest import make_client


@pytest.fixture
def trainer(ledger: Ledger, db_url: str):  # type: ignore[no-untyped-def]
    """A project whose only trial is a trainer's, still training (the review's toy-rl)."""
    ledger.projects.create_project("toy-rl")
    exp_id = ledger.recording.record_trial("toy-rl", {"status": "running", "hypothesis": "ppo lr 3e-4"}).trial.exp_id
    ledger.leases.heartbeat("toy-rl", exp_id, owner="run-7@gpu3")
    with make_client(db_url) as client:
        yield client, exp_id


def test_the_index_shows_no_best_and_a_running_badge(trainer) -> None:  # type: ignore[no-untyped-def]
    client, exp_id = trainer
    html = client.get("/").text
    row = html[html.index("toy-rl") :]
    row = row[: row.index("</tr>")]
    assert '<span class="badge running">running</span>' in row
    assert "badge failed" not in row and "harness_abort" not in row
    best_cell = re.findall(r'<td data-label="best">(.*?)</td>', row, re.S)[0]
    assert f"exp_{exp_id}" not in best_cell  # no "Best" until a trial is scored


def test_the_dashboard_lists_it_under_running_now_and_has_no_best(trainer) -> None:  # type: ignore[no-untyped-def]
    client, exp_id = trainer
    html = client.get("/projects/toy-rl").text
    running = html[html.index('id="running"') :]
    running = running[: running.index("</section>")]
    assert f"exp_{exp_id}" in running and "run-7@gpu3" in running and "ppo lr 3e-4" in running
    assert "No scored trial yet (1 running)" in html
    assert "No lineage yet" in html


def test_the_trial_page_shows_the_lease(trainer) -> None:  # type: ignore[no-untyped-def]
    client, exp_id = trainer
    html = client.get(f"/projects/toy-rl/trials/{exp_id}").text
    lease = html[html.index('id="lease"') :]
    lease = lease[: lease.index("</section>")]
    assert "run-7@gpu3" in lease and "last heartbeat" in lease and "none yet" not in lease
    assert "current best" not in html


def test_the_charts_and_knobs_draw_a_running_trial_with_a_metric(ledger: Ledger, db_url: str) -> None:
    ledger.projects.create_project("p")
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0, "extra": {"lr": 0.1}})
    ledger.recording.record_trial("p", {"status": "running", "core_metric": 0.5, "extra": {"lr": 0.2}})
    with make_client(db_url) as client:
        dashboard = client.get("/projects/p")
        assert dashboard.status_code == 200 and "pt-running" in dashboard.text
        knobs = client.get("/projects/p/knobs", params={"x": "extra.lr"})
        assert knobs.status_code == 200 and "1 running" in knobs.text
        table = client.get("/projects/p/trials", params={"status": "running"})
        assert table.status_code == 200 and 'aria-label="compare exp_001"' in table.text
        assert 'aria-label="compare exp_000"' not in table.text  # exp_000 only as exp_001's parent
