"""The research memory on the pages, without JavaScript: the noise floor on the dashboard's
progress card, a trial's "within noise" tag and its declared rerun on the trial page, and
the notebook's newest notes on the dashboard (cited trials linked, contradicted ones
flagged), each on both backends."""

from __future__ import annotations

import re

import pytest

from lineage.service import Ledger
from tests.web.conftest import make_client


def _section(html: str, marker: str) -> str:
    part = html[html.index(marker) :]
    return part[: part.index("</section>")]


@pytest.fixture
def noisy(ledger: Ledger) -> Ledger:
    """``p`` (lower is better): a baseline and its rerun (σ 0.0014), a keep within noise of
    the best and one far above it."""
    ledger.projects.create_project("p", lower_is_better=True)
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})
    ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.002, "rerun_of": "000"})
    ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.9995, "hypothesis": "qk norm"})
    ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.9, "hypothesis": "set MATRIX_LR to 0.07"})
    return ledger


def test_the_dashboard_says_the_noise_floor(noisy: Ledger, db_url: str) -> None:
    with make_client(db_url) as client:
        progress = _section(client.get("/projects/p").text, 'aria-labelledby="progress-h"')
    assert "noise floor σ 0.0014 from 1 rerun · |Δ| under 0.00283 (k 2·σ) is within noise" in progress


def test_the_dashboard_says_when_there_are_no_reruns(ledger: Ledger, db_url: str) -> None:
    ledger.projects.create_project("p")
    ledger.recording.record_trial("p", {"status": "keep", "core_metric": 1.0})
    with make_client(db_url) as client:
        progress = _section(client.get("/projects/p").text, 'aria-labelledby="progress-h"')
    assert "no noise floor yet: no reruns" in progress


def test_the_trial_page_tags_a_delta_within_noise_and_a_declared_rerun(noisy: Ledger, db_url: str) -> None:
    with make_client(db_url) as client:
        within, above, rerun = (client.get(f"/projects/p/trials/{exp_id}").text for exp_id in ("002", "003", "001"))
    head = within[within.index("<h1>") : within.index("</h1>")]
    assert '<span class="tag noise-within" title="within noise: -0.0005 against σ 0.0014 from 1 rerun' in head
    assert 'class="tag noise-above"' in above[above.index("<h1>") : above.index("</h1>")]
    rerun_head = rerun[rerun.index("<h1>") : rerun.index("</h1>")]
    assert re.search(r'rerun of <a href="/projects/p/trials/000">exp_000</a>', rerun_head)
    assert "rerun of" not in head


def test_the_dashboard_lists_the_newest_notes_with_their_trials_and_flags(noisy: Ledger, db_url: str) -> None:
    with make_client(db_url) as client:
        assert 'id="notebook"' not in client.get("/projects/p").text  # no notes: no card
    flagged = noisy.notes.add_note("p", {"text": "MATRIX_LR above 0.06 diverges", "cites": ["002"]})
    noisy.recording.record_trial("p", {"status": "keep", "core_metric": 0.89, "hypothesis": "set MATRIX_LR to 0.08"})
    for n in range(6):
        noisy.notes.add_note("p", {"text": f"note {n} <script>alert(1)</script>", "cites": ["000", "003"]})
    with make_client(db_url) as client:
        html = client.get("/projects/p").text
        older = client.get(f"/api/v1/projects/p/notes?before_id={flagged.id + 2}").json()["items"]
    card = _section(html, 'id="notebook"')
    shown = re.findall(r'data-note="(\d+)"', card)
    assert shown == [str(flagged.id + n) for n in range(6, 1, -1)]  # the newest five, newest first
    assert re.search(r'<a href="/projects/p/trials/003" title="keep">exp_003</a>', card)
    assert "&lt;script&gt;" in card and "<script>" not in card
    assert [item["id"] for item in older] == [flagged.id + 1, flagged.id]  # the JSON link's older ones
    with make_client(db_url) as client:
        one = client.get("/projects/p").text
    assert "contradicted by" not in _section(one, 'id="notebook"')  # the flagged note is older than five


def test_a_contradicted_note_is_flagged_on_the_dashboard(noisy: Ledger, db_url: str) -> None:
    noisy.notes.add_note("p", {"text": "MATRIX_LR above 0.06 diverges", "cites": ["002"]})
    noisy.recording.record_trial("p", {"status": "keep", "core_metric": 0.89, "hypothesis": "set MATRIX_LR to 0.08"})
    with make_client(db_url) as client:
        card = _section(client.get("/projects/p").text, 'id="notebook"')
    assert '<li data-note="1" class="contradicted">' in card
    assert 'contradicted by <a href="/projects/p/trials/004">exp_004</a>' in card
    assert '<a href="/projects/p/trials/002" title="keep">exp_002</a>' in card
