"""The reference run: examples/overnight_toy.py with small settings against a real
``lineage serve``; the trial ends up in KNOWLEDGE.md and on its page with its plots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import API, ROOT

pytestmark = pytest.mark.slow


def test_overnight_toy_run_lands_in_knowledge_and_on_the_trial_page(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(str(tmp_path / "ledger.db"))
    done = subprocess.run(
        [
            sys.executable,
            "examples/overnight_toy.py",
            "--url",
            server.url,
            "--project",
            "toy",
            "--spool-dir",
            str(tmp_path / "spool"),
            "--steps",
            "4",
            "--questions",
            "4",
            "--samples",
            "4",
            "--hypothesis",
            "turn-group IG on look-ups",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,  # an upper bound: a busy machine is slow
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["delivered"] and summary["error"] is None
    exp_id = summary["exp_id"]
    with httpx.Client(base_url=server.url, timeout=60) as http:
        trial = http.get(f"{API}/projects/toy/trials/{exp_id}").json()
        assert trial["status"] == "keep"  # the project's first scored trial
        assert trial["core_metric"] == summary["core_metric"]
        assert trial["ig_clip_scale_mean"] is not None and trial["ig_clip_scale_frac_high"] is not None
        assert trial["train_s"] > 0 and trial["total_s"] >= trial["train_s"]
        assert trial["extra"]["config"]["steps"] == 4 and trial["extra"]["state"] == "finished"
        series = http.get(f"{API}/projects/toy/trials/{exp_id}/telemetry", params={"max_points": 100}).json()["series"]
        found = {(s["name"], s["turn"]) for s in series}
        for name in (
            "clip_scale_mean",
            "ig_mean",
            "approx_kl",
            "ratio_std",
            "entropy_mean",
            "adv_mean",
            "budget_global",
            "spent_global",
            "score:group:0",
            "alloc:group:0",
            "cost:group:0",
        ):
            assert (name, None) in found, name
        for name in ("clip_scale_mean", "ig_mean", "turn_adv_mean", "approx_kl", "entropy_mean"):
            assert (name, 0) in found, name  # per turn
        # the training's points (a run longer than the sampler's interval also has sys/ series)
        assert sum(s["count"] for s in series if not s["name"].startswith("sys/")) == summary["points_logged"]
        knowledge = http.get(f"{API}/projects/toy/knowledge").text
        assert f"exp_{exp_id}" in knowledge and "turn-group IG on look-ups" in knowledge
        page = http.get(f"/projects/toy/trials/{exp_id}")
        assert page.status_code == 200
        assert page.text.count('<svg class="chart') >= 2 and "clip-scale" in page.text
