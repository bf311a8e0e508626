"""The noise floor (``lineage.noise``, ``Store.repeats``): σ pooled from a loop's reruns
(declared ``rerun_of``, the same commit, the same patch, baseline repeats), the verdicts
said against it, ``status: "auto"`` above noise, and the trend and plateau guardrail
counting with it; on both backends."""

from __future__ import annotations

import io
import json
import math
import statistics

import pytest

from lineage import migrate
from lineage.db import make_engine
from lineage.errors import InvalidInput
from lineage.service import Ledger


def _patch(name: str, old: str, new: str) -> str:
    return f"diff --git a/train.py b/train.py\nindex 1a2b..3c4d 100644\n--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-{name} = {old}\n+{name} = {new}\n"


#: A loop with reruns: (status, metric, extra, rerun_of). Groups of the same code: the
#: baselines 000/001/006, commit c1 (002, 003, and 007, declared a rerun of 002), and the
#: same patch of 004 and 005 (at other commits). The best is 002.
LOOP = [
    ("baseline", 1.0000, {}, None),
    ("baseline", 1.0016, {}, None),
    ("keep", 0.9900, {"commit": "c1"}, None),
    ("discard", 0.9921, {"commit": "c1"}, None),
    ("discard", 0.9950, {"commit": "c2", "_git": {"patch": _patch("LR", "0.04", "0.06")}}, None),
    ("discard", 0.9938, {"commit": "c3", "_git": {"patch": _patch("LR", "0.04", "0.06")}}, None),
    ("baseline", 0.9991, {}, None),
    ("discard", 0.9909, {}, "002"),
    ("crash", None, {"commit": "c1"}, None),  # same code, no result: in no group
    ("discard", 0.9870, {"commit": "c9"}, None),  # alone: in no group
]
GROUPS = [[1.0000, 1.0016, 0.9991], [0.9900, 0.9921, 0.9909], [0.9950, 0.9938]]


def _by_hand(groups: list[list[float]]) -> tuple[float, int]:
    """The pooled standard deviation, from each group's sample variance."""
    dof = sum(len(g) - 1 for g in groups)
    return math.sqrt(sum(statistics.variance(g) * (len(g) - 1) for g in groups) / dof), dof


def _record_loop(ledger: Ledger, slug: str = "p") -> list:  # type: ignore[type-arg]
    ledger.projects.create_project(slug, metric_name="val_bpb", lower_is_better=True)
    answers = []
    for status, metric, extra, rerun_of in LOOP:
        body = {"status": status, "core_metric": metric, "extra": extra}
        if rerun_of:
            body["rerun_of"] = rerun_of
        answers.append(ledger.recording.record_trial(slug, body))
    return answers


def test_sigma_is_the_pooled_standard_deviation_of_the_loops_reruns(ledger: Ledger) -> None:
    answers = _record_loop(ledger)
    sigma, reruns = _by_hand(GROUPS)
    with ledger.store.read() as conn:
        floor = ledger.store.repeats.floor(conn, ledger.projects.project("p"))
    assert (floor.source, floor.reruns, floor.groups) == ("reruns", reruns, 3)
    assert floor.sigma == pytest.approx(sigma, rel=1e-12)
    # the last record's answer used the floor of everything before it
    last = answers[-1].noise
    assert last is not None and last.floor.sigma == pytest.approx(sigma, rel=1e-12)
    assert last.floor.reruns == reruns == 5
    assert f"against σ {sigma:.4f} from 5 reruns" in last.text


def test_a_delta_within_k_sigma_is_within_noise_and_one_beyond_is_above(ledger: Ledger) -> None:
    _record_loop(ledger)
    sigma, _ = _by_hand(GROUPS)
    best = 0.9900  # exp 002 (009 is a discard)
    small = ledger.recording.record_trial("p", {"status": "keep", "core_metric": best - 0.5 * sigma})
    assert small.noise is not None and small.noise.within is True
    delta = small.trial.delta_vs_best
    assert delta == pytest.approx(-0.5 * sigma)
    assert small.noise.text.startswith(f"within noise: {delta:+.4f} against σ {sigma:.4f} from 5 reruns")
    assert 'rerun it (rerun_of: "010")' in small.noise.text  # a keep within noise: confirm it
    big = ledger.recording.record_trial("p", {"status": "keep", "core_metric": best - 0.5 * sigma - 3 * sigma})
    assert big.noise is not None and big.noise.within is False
    assert big.noise.text.startswith("above noise: ")
    assert big.to_dict()["noise"]["within_noise"] is False


def test_without_reruns_the_answer_says_so_and_suggests_one_for_a_marginal_keep(ledger: Ledger) -> None:
    ledger.projects.create_project("p", lower_is_better=True)
    first = ledger.recording.record_trial("p", {"status": "baseline", "core_metric": 1.0})
    assert first.noise is not None and first.noise.text == "no noise floor: no reruns yet"
    marginal = ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.999})
    assert marginal.noise is not None and marginal.noise.within is None
    assert marginal.noise.text == (
        "no noise floor: no reruns yet to tell this delta from noise; a marginal keep (-0.0010); "
        'rerun it (rerun_of: "001") before building on it'
    )
    clear = ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.9})
    assert clear.noise is not None and clear.noise.text == "no noise floor: no reruns yet to tell this delta from noise"
    summary = ledger.agent.summary("p")
    assert summary.noise is not None and summary.noise.sigma is None
    assert "no noise floor yet: no reruns" in summary.short_text()


def test_auto_keeps_only_above_noise_when_the_project_chooses_it(ledger: Ledger) -> None:
    _record_loop(ledger)
    sigma, _ = _by_hand(GROUPS)
    gain = 1.5 * sigma  # a strict improvement, within 2σ
    off = ledger.recording.record_trial("p", {"status": "auto", "core_metric": 0.9900 - gain})
    assert off.trial.status.value == "keep"  # the default: any strict gain keeps
    ledger.projects.update_project("p", {"auto_keep_above_noise": True})
    best = off.trial.core_metric
    within = ledger.recording.record_trial("p", {"status": "auto", "core_metric": best - gain})
    assert within.trial.status.value == "discard" and within.noise is not None and within.noise.within is True
    above = ledger.recording.record_trial("p", {"status": "auto", "core_metric": best - 2.5 * sigma})
    assert above.trial.status.value == "keep" and above.noise is not None and above.noise.within is False
    # the multiple is the project's: with k 1, 1.5σ is above noise
    ledger.projects.update_project("p", {"noise_k": 1})
    k1 = ledger.recording.record_trial("p", {"status": "auto", "core_metric": above.trial.core_metric - gain})
    assert k1.trial.status.value == "keep" and k1.noise is not None and "(k 1)" in k1.noise.text
    # a planned trial finishing with "auto" is judged the same way
    planned = ledger.recording.record_trial("p", {"status": "running"})
    ledger.projects.update_project("p", {"noise_k": None})
    finished = ledger.recording.update_trial(
        "p", planned.trial.exp_id, {"status": "auto", "core_metric": k1.trial.core_metric - gain}
    )
    assert finished.status.value == "discard"


def test_a_hand_set_sigma_replaces_the_estimate(ledger: Ledger) -> None:
    _record_loop(ledger)
    ledger.projects.update_project("p", {"noise_sigma": 0.01})
    answer = ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.98})
    assert answer.noise is not None and answer.noise.floor.source == "setting"
    assert answer.noise.text.startswith("within noise: -0.010 against σ 0.010 (set by hand)")


@pytest.mark.parametrize(
    ("name", "bad"), [("noise_sigma", 0), ("noise_sigma", -1.0), ("noise_sigma", "x"), ("noise_k", 0), ("noise_k", 1e9)]
)
def test_bad_noise_settings_are_refused_naming_the_setting(ledger: Ledger, name: str, bad: object) -> None:
    ledger.projects.create_project("p")
    with pytest.raises(InvalidInput) as info:
        ledger.projects.update_project("p", {name: bad})
    assert info.value.field == name
    with pytest.raises(InvalidInput) as created:
        ledger.projects.create_project("q", settings={"auto_keep_above_noise": "yes"})
    assert created.value.field == "auto_keep_above_noise"


def test_rerun_of_into_another_project_or_to_no_trial_is_refused(ledger: Ledger) -> None:
    _record_loop(ledger)
    ledger.projects.create_project("q")
    ledger.recording.record_trial("q", {"status": "baseline", "core_metric": 1.0})
    with pytest.raises(InvalidInput) as info:
        ledger.recording.record_trial("q", {"status": "keep", "core_metric": 0.9, "rerun_of": "005"})
    assert info.value.field == "rerun_of" and "'p'" in info.value.reason
    with pytest.raises(InvalidInput) as unknown:
        ledger.recording.record_trial("q", {"status": "keep", "core_metric": 0.9, "rerun_of": "777"})
    assert unknown.value.field == "rerun_of"
    with pytest.raises(InvalidInput) as batch:
        ledger.recording.record_trials("q", [{"status": "keep", "core_metric": 0.9, "rerun_of": "005"}])
    assert batch.value.field == "trials[0].rerun_of"
    assert ledger.projects.project("q").trial_count == 1  # nothing half-written


def test_a_batch_records_reruns_of_its_own_earlier_items(ledger: Ledger) -> None:
    ledger.projects.create_project("p", lower_is_better=True)
    items = [
        {"status": "baseline", "core_metric": 1.0},
        {"status": "discard", "core_metric": 1.004, "rerun_of": "000"},
        {"status": "keep", "core_metric": 0.95},
    ]
    result = ledger.recording.record_trials("p", items)
    sigma, _ = _by_hand([[1.0, 1.004]])
    last = result.results[-1].noise
    assert last is not None and last.floor.sigma == pytest.approx(sigma) and last.within is False


def test_an_import_with_repeated_commits_has_a_noise_floor(ledger: Ledger) -> None:
    tsv = (
        "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n"
        "a1\t1.000\t40.0\tkeep\tbaseline\n"
        "b2\t0.990\t40.0\tkeep\tlr up\n"
        "b2\t0.993\t40.0\tdiscard\tlr up, other seed\n"
        "c3\t0.995\t40.0\tdiscard\twd\n"
    )
    ledger.files.import_file("loop", io.StringIO(tsv, newline=""), create_with={"lower_is_better": True})
    sigma, _ = _by_hand([[0.990, 0.993]])
    summary = ledger.agent.summary("loop")
    assert summary.noise is not None and summary.noise.sigma == pytest.approx(sigma) and summary.noise.reruns == 1


def test_the_trend_and_the_plateau_guardrail_count_only_gains_above_noise(ledger: Ledger) -> None:
    ledger.projects.create_project("p", lower_is_better=True)
    for metric in (1.0, 1.002, 0.998, 1.0):  # four baselines: σ from three reruns
        ledger.recording.record_trial("p", {"status": "baseline", "core_metric": metric})
    sigma, _ = _by_hand([[1.0, 1.002, 0.998, 1.0]])
    ledger.agent.set_guardrails("p", {"max_trials_without_improvement": 3})
    ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.99})  # 5σ: a real gain
    for i in range(3):  # tiny new bests, each within noise
        ledger.recording.record_trial("p", {"status": "keep", "core_metric": 0.99 - (i + 1) * 0.1 * sigma})
    summary = ledger.agent.summary("p", last_n=3)
    assert summary.trials_since_improvement == 0  # the raw figure: the last trial is a new best
    assert summary.trials_since_improvement_above_noise == 3  # since 004 (within kσ of today's best)
    assert summary.trend == "plateauing"
    tripped = [trip["name"] for trip in (summary.guardrails or {}).get("tripped", [])]
    assert tripped == ["no_improvement"]
    assert "3 trials since a gain above noise" in summary.short_text()


def test_the_session_start_prompt_carries_the_noise_floor(ledger: Ledger) -> None:
    _record_loop(ledger)
    sigma, _ = _by_hand(GROUPS)
    _, prompt = ledger.agent.prompt_document("p", face="mcp")
    assert f"- Noise: floor σ {sigma:.4f} from 5 reruns, k 2" in prompt


def test_revision_0014_fills_the_repeats_of_stored_trials(fresh_db_url: str) -> None:
    """Trials stored before trial_repeats get their keys on upgrade: the floor counts them."""
    from sqlalchemy import text

    engine = make_engine(fresh_db_url)
    migrate.upgrade(engine, "0013")
    ledger = Ledger(engine)
    ledger.projects.create_project("p")
    rows = [("000", "baseline", 1.0, "{}"), ("001", "baseline", 1.003, "{}"), ("002", "keep", 0.99, "{}")]
    rows += [("003", "discard", 0.992, json.dumps({"commit": "x"})), ("004", "discard", 0.995, '{"commit": "x"}')]
    with engine.begin() as conn:
        project_id = conn.execute(text("SELECT id FROM projects WHERE slug = 'p'")).scalar_one()
        for seq, (exp_id, status, metric, extra) in enumerate(rows):
            conn.execute(
                text(
                    "INSERT INTO trials (project_id, seq, exp_id, timestamp, specialist, parent_exp, baseline_exp, "
                    "domain, hypothesis, expected_delta, status, core_metric, job_name, snapshot_path, notes, extra, "
                    "created_at, updated_at) VALUES (:p, :seq, :e, '', '', '', '', '', '', '', :s, :m, '', '', '', "
                    ":x, '2026-11-01 10:00:00', '2026-11-02 11:30:00')"
                ),
                {"p": project_id, "seq": seq, "e": exp_id, "s": status, "m": metric, "x": extra},
            )
        conn.execute(text("UPDATE projects SET next_seq = 5, next_exp_number = 5 WHERE id = :p"), {"p": project_id})
    migrate.upgrade(engine)
    sigma, reruns = _by_hand([[1.0, 1.003], [0.992, 0.995]])
    floor = ledger.agent.summary("p").noise
    assert floor is not None and (floor.reruns, floor.groups) == (reruns, 2)
    assert floor.sigma == pytest.approx(sigma)
    engine.dispose()
