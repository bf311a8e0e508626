"""The demo project: the six-trial A²TGPO sweep of the seed article, as plain data.

``lineage demo`` loads it; the tests render it and check the KNOWLEDGE.md chain the
article shows (baseline → ATPO joint → turn-group → full v1d ← BEST, with the
separate-normalization discard branching off exp_001 and the alpha=0.9 budget overrun
in recent activity). Values the article gives are copied verbatim; the discard's
metric (33.87) and the bookkeeping fields of trials the article does not spell out
(timestamps, run times, job names) are plausible inventions in the same style.
"""

from __future__ import annotations

from typing import Any

from lineage.domain import FailureLabel, Trial

__all__ = ["DEMO_PROJECT", "DEMO_TRIALS"]

#: Keyword arguments for ``Ledger.create_project``. HotpotQA EM: higher is better.
DEMO_PROJECT: dict[str, Any] = {
    "slug": "a2tgpo-demo",
    "title": "A²TGPO on a single Spark — adaptive turn-level clipping, one trial per night",
    "metric_name": "core_metric",
    "lower_is_better": False,
}

_DOMAIN = "agentic-grpo-multihop"

DEMO_TRIALS: tuple[Trial, ...] = (
    Trial(
        exp_id="000",
        timestamp="2026-05-12T08:00:00Z",
        specialist="grpo-baseline",
        parent_exp="",
        baseline_exp="",
        domain=_DOMAIN,
        hypothesis="Vanilla GRPO, token-level IS, fixed clip [0.8, 1.2], no IG signal",
        expected_delta="",
        status=FailureLabel.BASELINE,
        core_metric=33.21,
        delta_vs_best=None,
        train_s=12980.0,
        total_s=13040.0,
        job_name="atgpo-grpo-baseline-000",
        snapshot_path="snapshots/000_grpo-baseline",
        notes="info_gain_norm_mode=none; dynamic_clip=false; clip [0.8, 1.2]",
        seq=0,
    ),
    Trial(
        exp_id="001",
        timestamp="2026-05-12T09:05:00Z",
        specialist="atpo-joint",
        parent_exp="000",
        baseline_exp="000",
        domain=_DOMAIN,
        hypothesis=("Switch token-level IS to turn-level IS; keep joint IG/outcome normalization; clip still fixed"),
        expected_delta="+0.5 EM over baseline",
        status=FailureLabel.KEEP,
        core_metric=34.02,
        delta_vs_best=0.81,
        train_s=13850.0,
        total_s=13910.0,
        job_name="atgpo-atpo-joint-001",
        snapshot_path="snapshots/001_atpo-joint",
        notes="info_gain_norm_mode=joint; IG forward +164 s/step, generation -86 s/step",
        seq=1,
    ),
    Trial(
        exp_id="002",
        timestamp="2026-05-12T10:10:00Z",
        specialist="atpo-separate",
        parent_exp="001",
        baseline_exp="000",
        domain=_DOMAIN,
        hypothesis="Normalize outcome and IG rewards separately instead of jointly",
        expected_delta="+0.3 EM over joint",
        status=FailureLabel.DISCARD,
        core_metric=33.87,
        delta_vs_best=-0.15,
        train_s=13790.0,
        total_s=13850.0,
        job_name="atgpo-atpo-separate-002",
        snapshot_path="",
        notes=("info_gain_norm_mode=separate; turn-1 and turn-5 IG still share one scale, deep-turn advantages drift"),
        seq=2,
    ),
    Trial(
        exp_id="003",
        timestamp="2026-05-12T11:15:00Z",
        specialist="atpo-turn-group",
        parent_exp="001",
        baseline_exp="000",
        domain=_DOMAIN,
        hypothesis="Add turn-group normalization: normalize IG per (prompt, turn_index) composite group",
        expected_delta="+0.4 EM over joint",
        status=FailureLabel.KEEP,
        core_metric=34.51,
        delta_vs_best=0.49,
        train_s=14010.0,
        total_s=14070.0,
        job_name="atgpo-atpo-turn-group-003",
        snapshot_path="snapshots/003_atpo-turn-group",
        notes="info_gain_norm_mode=turn-group; composite group id = prompt_group_id * max_turns + turn_index",
        seq=3,
    ),
    Trial(
        exp_id="004",
        timestamp="2026-05-12T12:20:00Z",
        specialist="a2tgpo-v1d",
        parent_exp="003",
        baseline_exp="000",
        domain=_DOMAIN,
        hypothesis=(
            "Full A²TGPO: turn-group norm + variance-rescaled discounted accumulation + adaptive clip via sigmoid"
        ),
        expected_delta="+0.75 EM over turn-group",
        status=FailureLabel.KEEP,
        core_metric=34.96,
        delta_vs_best=0.45,
        train_s=14260.0,
        total_s=14320.0,
        job_name="atgpo-a2tgpo-v1d-004",
        snapshot_path="snapshots/004_a2tgpo-v1d",
        notes=(
            "ig_clip_scale mean=1.014 std=0.087 "
            "(informative turns widen, uninformative narrow); "
            "alpha=0.300 fixed; gamma=1.000"
        ),
        ig_clip_scale_mean=1.014,
        ig_clip_scale_std=0.087,
        seq=4,
    ),
    Trial(
        exp_id="005",
        timestamp="2026-05-12T13:25:00Z",
        specialist="a2tgpo-v1d-alpha09",
        parent_exp="004",
        baseline_exp="000",
        domain=_DOMAIN,
        hypothesis="Increase adv_rescale_alpha 0.3 → 0.9 to weight IG-discounted accumulation more heavily",
        expected_delta="+0.3 EM over v1d",
        status=FailureLabel.EVAL_BUDGET_OVERRUN,
        core_metric=None,
        delta_vs_best=None,
        train_s=14410.0,
        total_s=21600.0,
        job_name="atgpo-a2tgpo-v1d-alpha09-005",
        snapshot_path="",
        notes=(
            "ig_clip_scale mean=1.022 std=0.114; eval wall exceeded budget on MuSiQue 4-hop "
            "subset — high alpha amplifies long-tail trajectory variance"
        ),
        ig_clip_scale_mean=1.022,
        ig_clip_scale_std=0.114,
        seq=5,
    ),
)
