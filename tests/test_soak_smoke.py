"""The soak test's short run (issue 22): ``bench/soak.py`` for one minute on each backend,
a real ``lineage serve`` under agents, a trainer, a researcher and ``lineage watch``.

It asserts no errors (every answer the expected one, nothing lost: the ledger holds what
was recorded) and a complete report: every kind of request timed, the server's RSS, open
descriptors and database size sampled. Timings are not asserted (they go in the bench's
output), and neither is the RSS plateau: over one minute the server is still warming up
(imports, template and statement caches), so the run asks for ``--rss-rule report``; the
rule is judged by the long run (``bench/soak.py``, 30 minutes).

One minute per backend, not two: with the start of the server and the final checks each
run takes about 80 s, and the two together stay near three minutes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.soak import KINDS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_soak_one_minute(backend: str, tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    run = subprocess.run(
        [
            sys.executable,
            "bench/soak.py",
            "--minutes",
            "1",
            "--backend",
            backend,
            "--trainer-steps",
            "100",
            "--rss-rule",
            "report",
            "--quiet",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.exists(), f"no summary written (exit {run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    [summary] = json.loads(out.read_text())
    assert summary["errors"] == 0, "\n".join(summary["first_errors"])
    assert run.returncode == 0 and summary["passed"], run.stdout[-3000:]
    assert summary["backend"] == backend
    missing = [kind for kind in KINDS if summary["kinds"].get(kind, {}).get("n", 0) == 0]
    assert not missing, f"kinds never timed: {missing}"
    for kind in summary["kinds"].values():
        assert 0 < kind["p50_ms"] <= kind["p99_ms"]
    counts = summary["counts"]
    assert counts["agent_trials"] > 0 and counts["trainer_trials"] > 0 and counts["trainer_points"] > 0
    assert counts["prompt_304"] > 0, "the prompt never answered 304 to its own ETag"
    [minute] = summary["per_minute"]
    assert minute["rss_mb"] > 0 and minute["fds"] > 0 and minute["db_mb"] > 0 and minute["kinds"]
    assert (
        summary["rss"]["start_mb"] > 0
        and summary["rss"]["end_mb"] > 0
        and summary["rss"]["growth"] == summary["rss"]["growth"]
    )
    assert summary["fds"]["end"] > 0 and summary["db_mb"]["end"] > summary["db_mb"]["start"]
    assert summary["samples"] >= 10


def _summary(errors: int, growth: float) -> dict:
    return {
        "errors": errors,
        "error_kinds": ["agent.record"] if errors else [],
        "rss": {"growth": growth, "window_s": 1200},
    }


def test_the_rules_judge_errors_and_rss_growth() -> None:
    from bench.soak import judge

    assert judge(_summary(0, 0.05), rss_rule=True) == []
    assert judge(_summary(0, 0.10), rss_rule=True) == []
    [rss] = judge(_summary(0, 0.11), rss_rule=True)
    assert "RSS grew 11.0%" in rss and "20 min" in rss
    assert judge(_summary(0, 0.11), rss_rule=False) == []
    assert judge(_summary(0, float("nan")), rss_rule=True), "an RSS never measured must not pass"
    [errors] = judge(_summary(2, 0.0), rss_rule=False)
    assert errors.startswith("2 errors")
