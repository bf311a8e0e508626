"""The progress summary (lineage.monitor.progress) on real SQLite and PostgreSQL databases."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from api.cli import cli
from lineage.errors import InvalidInput, NotFound
from lineage.monitor.progress import TrendRule
from lineage.service import Ledger


def _record(
    ledger: Ledger,
    status: str,
    metric: float | None = None,
    total_s: float | None = None,
    project: str = "p",
    **fields: Any,
) -> None:
    ledger.recording.record_trial(project, {"status": status, "core_metric": metric, "total_s": total_s, **fields})


def _sweep(ledger: Ledger) -> None:
    """seq 0..6: baseline 10, keep 9, discard 9.5, crash, keep 8, crash, preflight_crash."""
    ledger.projects.create_project("p", lower_is_better=True)
    for status, metric, seconds in [
        ("baseline", 10.0, 3600.0),
        ("keep", 9.0, 1800.0),
        ("discard", 9.5, 1800.0),
        ("crash", None, 60.0),
        ("keep", 8.0, None),
        ("crash", None, 30.0),
        ("preflight_crash", None, 10.0),
    ]:
        _record(ledger, status, metric, seconds)


def test_summary_counts_rates_best_streak_and_time(ledger: Ledger) -> None:
    _sweep(ledger)
    summary = ledger.agent.summary("p", last_n=3).to_dict()
    assert summary["trials"] == 7
    assert summary["by_status"] == {"baseline": 1, "crash": 2, "discard": 1, "keep": 2, "preflight_crash": 1}
    assert summary["keep_rate"] == pytest.approx(2 / 6)
    assert summary["keep_rate_last_n"] == pytest.approx(1 / 3)  # keep, crash, preflight_crash
    assert summary["baseline"]["exp_id"] == "000" and summary["baseline"]["core_metric"] == 10.0
    assert summary["best"]["exp_id"] == "004" and summary["best"]["reached_at_trial"] == 5
    assert summary["best"]["reached_at"]  # when it was recorded (no timestamp was sent)
    assert summary["improvement_vs_baseline"] == pytest.approx(2.0)
    assert summary["trials_since_improvement"] == 2
    # window seq 4..6 moved the best from 9.0 (before it) to 8.0: 1.0 over 3 trials
    assert summary["improvement_per_10_trials"] == pytest.approx(10 / 3)
    assert summary["crash_streak"] == 2
    assert summary["time_spent_s"] == pytest.approx(3600 + 1800 + 1800 + 60 + 30 + 10)
    assert summary["direction"] == "lower"


def test_higher_is_better_improvement_is_positive(ledger: Ledger) -> None:
    ledger.projects.create_project("p", lower_is_better=False)
    _record(ledger, "baseline", 0.5)
    _record(ledger, "keep", 0.75)
    summary = ledger.agent.summary("p").to_dict()
    assert summary["improvement_vs_baseline"] == pytest.approx(0.25)
    assert summary["improvement_per_10_trials"] == pytest.approx(0.25 * 10 / 2)
    assert summary["trend"] == "improving"


def test_empty_project_has_no_rates_and_no_best(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    summary = ledger.agent.summary("p").to_dict()
    assert (
        summary["trials"],
        summary["keep_rate"],
        summary["keep_rate_last_n"],
        summary["best"],
        summary["baseline"],
        summary["crash_streak"],
        summary["time_spent_s"],
    ) == (0, None, None, None, None, 0, 0)
    assert summary["trend"] == "starting"


def test_trend_moves_from_improving_to_plateauing_to_stuck(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    _record(ledger, "baseline", 1.0)
    _record(ledger, "keep", 0.9)
    trends = [ledger.agent.summary("p", last_n=2).trend]
    for _ in range(6):
        _record(ledger, "discard", 2.0)
        trends.append(ledger.agent.summary("p", last_n=2).trend)
    # trials since the best: 0, 1 | 2..5 | 6 (= 3 windows of 2)
    assert trends == ["improving", "improving", "plateauing", "plateauing", "plateauing", "plateauing", "stuck"]
    rule = ledger.agent.summary("p", last_n=2).to_dict()["trend_rule"]
    assert rule["improving_if_new_best_within"] == 2 and rule["stuck_if_no_new_best_within"] == 6


def test_a_crash_streak_of_a_window_is_stuck() -> None:
    rule = TrendRule.for_window(4)
    assert rule.decide(has_best=False, trials_since_improvement=4, crash_streak=4) == "stuck"
    assert rule.decide(has_best=False, trials_since_improvement=4, crash_streak=3) == "plateauing"
    assert rule.decide(has_best=True, trials_since_improvement=3, crash_streak=3) == "improving"
    assert rule.decide(has_best=True, trials_since_improvement=11, crash_streak=0) == "plateauing"
    assert rule.decide(has_best=True, trials_since_improvement=12, crash_streak=0) == "stuck"


def test_a_tie_with_the_best_is_not_an_improvement(ledger: Ledger) -> None:
    ledger.projects.create_project("p")
    _record(ledger, "keep", 1.0)
    _record(ledger, "keep", 1.0)
    assert ledger.agent.summary("p").trials_since_improvement == 1


@pytest.mark.parametrize("last_n", [0, -1, 100_001, True, "5"])
def test_a_bad_window_names_the_field(ledger: Ledger, last_n: Any) -> None:
    ledger.projects.create_project("p")
    with pytest.raises(InvalidInput) as caught:
        ledger.agent.summary("p", last_n=last_n)
    assert caught.value.field == "last"


def test_summary_of_an_unknown_project_is_not_found(ledger: Ledger) -> None:
    with pytest.raises(NotFound):
        ledger.agent.summary("nope")


def test_wrapped_prompt_carries_the_short_summary_and_the_raw_one_does_not(ledger: Ledger) -> None:
    _sweep(ledger)
    _, wrapped = ledger.agent.prompt_document("p", specialist="s")
    _, raw = ledger.agent.prompt_document("p", specialist="s", wrap=False)
    assert "## Where the loop stands" in wrapped
    assert "- Progress: 7 trials; keep rate 33%" in wrapped and "crash streak 2" in wrapped
    assert "- Trend: **improving**" in wrapped
    assert "Where the loop stands" not in raw and raw == ledger.agent.render_prompt("p", specialist="s")


def test_cli_summary_json_and_text(ledger: Ledger, db_url: str) -> None:
    _sweep(ledger)
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", db_url, "summary", "--project", "p", "--last", "3", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == ledger.agent.summary("p", last_n=3).to_dict()
    text = runner.invoke(cli, ["--db", db_url, "summary", "-p", "p"])
    assert text.exit_code == 0 and "Trend: **improving**" in text.output


def test_cli_summary_bad_window_is_one_line_on_stderr(ledger: Ledger, db_url: str) -> None:
    ledger.projects.create_project("p")
    result = CliRunner().invoke(cli, ["--db", db_url, "summary", "-p", "p", "--last", "0"])
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "last" in result.stderr


def _grouped(engine) -> dict[str, tuple[int, float]]:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    with engine.connect() as conn:
        rows = conn.execute(text("SELECT status, COUNT(*), COALESCE(SUM(total_s), 0) FROM trials GROUP BY status"))
        return {status: (int(n), float(s)) for status, n, s in rows}


def _totals(ledger: Ledger) -> dict[str, tuple[int, float]]:
    with ledger.store.read() as conn:
        return ledger.store.progress.status_totals(conn, ledger.projects.project("p").id)


def test_status_totals_follow_every_write_path(ledger: Ledger, engine) -> None:  # type: ignore[no-untyped-def]
    """The per-status totals (kept by triggers) equal a GROUP BY over the trials after
    records, updates, a bulk import and a failed import."""
    from lineage.domain import FailureLabel, Trial

    _sweep(ledger)
    assert _totals(ledger) == _grouped(engine)
    ledger.recording.update_trial("p", "003", {"status": "discard", "total_s": 100.0})
    ledger.recording.update_trial("p", "001", {"notes": "only a note"})
    assert _totals(ledger) == _grouped(engine)
    rows = [
        Trial(exp_id=f"x{i}", status=FailureLabel.KEEP if i % 3 else FailureLabel.CRASH, total_s=float(i))
        for i in range(2_500)
    ]
    ledger.tables.import_trials("p", iter(rows))
    assert _totals(ledger) == _grouped(engine)
    with pytest.raises(InvalidInput):
        ledger.tables.import_trials("p", iter([Trial(exp_id="y1", total_s=5.0), Trial(exp_id="y1")]))
    assert _totals(ledger) == _grouped(engine)
    assert ledger.agent.summary("p").trials == 7 + 2_500
    ledger.projects.delete_project("p")
    with engine.connect() as conn:
        from sqlalchemy import text

        assert conn.execute(text("SELECT COUNT(*) FROM trial_status_totals")).scalar_one() == 0


@pytest.fixture
def fresh_url(backend: str, tmp_path):  # type: ignore[no-untyped-def]
    """An empty database of its own (the migration test downgrades it)."""
    import uuid

    from sqlalchemy import text

    from tests.conftest import POSTGRES_ADMIN_URL, _admin_engine

    if backend == "sqlite":
        yield str(tmp_path / "fresh.db")
        return
    name = f"lineage_fresh_{uuid.uuid4().hex[:10]}"
    admin = _admin_engine()
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _raw_trial(conn, seq: int, status: str, total_s: float | None) -> None:  # type: ignore[no-untyped-def]
    """A trial written with SQL alone (the code's own writes need the head schema)."""
    from sqlalchemy import text

    conn.execute(
        text(
            "INSERT INTO trials (project_id, seq, exp_id, timestamp, specialist, parent_exp, baseline_exp, domain, "
            "hypothesis, expected_delta, status, total_s, job_name, snapshot_path, notes, extra, created_at, updated_at) "
            "VALUES ((SELECT id FROM projects), :seq, :exp, '', '', '', '', '', '', '', :status, :total_s, '', '', '', "
            "'{}', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
        ),
        {"seq": seq, "exp": f"{seq:03d}", "status": status, "total_s": total_s},
    )
    conn.execute(text("UPDATE projects SET next_seq = :n, next_exp_number = :n"), {"n": seq + 1})


def test_migration_0004_backfills_the_totals_and_downgrades(fresh_url: str) -> None:
    from alembic import command
    from sqlalchemy import text

    from lineage import migrate
    from lineage.db import make_engine

    engine = make_engine(fresh_url)
    try:
        migrate.upgrade(engine, "0003")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO projects (slug, title, metric_name, lower_is_better, best_policy, settings, next_seq, "
                    "next_exp_number, revision, created_at, updated_at) VALUES ('p', 'p', 'm', true, 'kept', '{}', 0, 0, "
                    "0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                )
            )
            _raw_trial(conn, 0, "keep", 5.0)
            _raw_trial(conn, 1, "crash", 7.0)
        migrate.upgrade(engine)
        ledger = Ledger(engine)
        assert ledger.agent.summary("p").to_dict()["by_status"] == {"crash": 1, "keep": 1}
        assert ledger.agent.summary("p").time_spent_s == 12.0
        config = migrate.alembic_config(engine)
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0003")
        with engine.connect() as conn:
            tables = set(engine.dialect.get_table_names(conn))
        assert not tables & {"trial_status_totals", "guardrail_policies", "webhooks", "hook_deliveries"}
        with engine.begin() as conn:  # no trigger is left behind that writes to a dropped table
            _raw_trial(conn, 2, "crash", None)
        migrate.upgrade(engine)
        assert ledger.agent.summary("p").to_dict()["by_status"] == {"crash": 2, "keep": 1}
        ledger.recording.record_trial("p", {"status": "crash", "total_s": 1.0})
        assert ledger.agent.summary("p").to_dict()["by_status"] == {"crash": 3, "keep": 1}
        assert ledger.agent.summary("p").time_spent_s == 13.0
    finally:
        engine.dispose()
