"""trainer_hooks.advantages.retrain against the real retrain 0.3.2: the composable pipeline
(every advantage and transform mode we implement, every uncertainty kind), its group tests,
the planning-token window scan, SEPA amplification and the Shannon entropy, equal to 1e-6
in float64 on random ragged batches.

retrain works one prompt group at a time on Python lists; the batch here is several
groups of ragged completions padded to one ``[B, L]`` tensor, and each group's retrain
result is compared with its rows of ours.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from tests.trainer_hooks.upstream.upstreams import F64, upstream
from trainer_hooks.advantages import retrain as R

advantages = upstream("retrain.advantages", "retrain")
trainer = upstream("retrain.trainer", "retrain")

SEEDS = range(12)
TRANSFORMS = ["none", "gtpo", "gtpo_hicra", "gtpo_sepa", "gtpo_sepa_amp", "gtpo_sepa_amp_c"]
KINDS = ["surprisal", "predictive_variance", "shannon_entropy"]


def groups_batch(seed: int):
    """Groups of 1-5 completions of 1-9 tokens; rewards from a small set (ties, uniform and
    near-uniform groups, single completions)."""
    rng = random.Random(seed)
    rows = []
    for gid in range(rng.randint(2, 5)):
        size = rng.choice([1, 2, 3, 4, 5])
        base = rng.choice([0.0, 0.25, 0.5, 1.0, 0.9])
        for _ in range(size):
            reward = base if rng.random() < 0.4 else rng.choice([0.0, 0.25, 0.5, 1.0, 0.9, base + 5e-7])
            n = rng.randint(1, 9)
            logprobs = [-rng.expovariate(1.0) for _ in range(n)]
            entropy = [rng.uniform(0.0, 4.0) for _ in range(n)]
            planning = [int(rng.random() < 0.3) for _ in range(n)]
            rows.append((gid, reward, logprobs, entropy, planning))
    return rows


def padded(rows, key, fill=0.0):
    width = max(len(r[2]) for r in rows)
    return torch.tensor([r[key] + [fill] * (width - len(r[key])) for r in rows], dtype=F64)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["grpo", "maxrl"])
def test_compose_equals_retrains_pipeline(seed, transform, kind, mode):
    rows = groups_batch(seed)
    width = max(len(r[2]) for r in rows)
    lengths = torch.tensor([len(r[2]) for r in rows])
    mask = torch.arange(width)[None, :] < lengths[:, None]
    out = R.compose_advantages(
        torch.tensor([r[1] for r in rows], dtype=F64),
        torch.tensor([r[0] for r in rows]),
        mask,
        config={"advantage_mode": mode, "transform_mode": transform, "uncertainty_kind": kind},
        logprobs=padded(rows, 2),
        entropy=padded(rows, 3),
        planning_mask=padded(rows, 4).bool(),
        sepa_lambda=0.6,
    )
    for gid in sorted({r[0] for r in rows}):
        members = [i for i, r in enumerate(rows) if r[0] == gid]
        rewards_g = [rows[i][1] for i in members]
        ties = trainer._summarize_reward_ties(rewards_g)
        assert bool(out.informative[members[0]]) == (not ties["is_uniform"])  # retrain's skip rule
        result = advantages.compute_composable_advantages(
            rewards_g,
            [rows[i][2] for i in members],
            [rows[i][4] for i in members],
            advantage_mode=mode,
            transform_mode=transform,
            sepa_lambda=0.6,
            transform_params={"uncertainty_kind": kind},
            precomputed_entropies_G=[rows[i][3] for i in members],
        )
        for i, expected in zip(members, result.token_advs):
            got = out.token_advantages[i, : len(expected)].tolist()
            assert got == pytest.approx(expected, rel=1e-6, abs=1e-6), (gid, i)


@pytest.mark.parametrize("seed", range(40))
def test_planning_window_scan_equals_retrains(seed):
    rng = random.Random(seed)
    pieces = [
        "wait",
        " let",
        " me",
        " Let",
        " think",
        "\u2581check",
        " notice",
        " that",
        "so",
        ",",
        " the",
        " key",
        " is",
        "Wait",
        " le",
        "t",
        " ",
        "",
        "\u0120double",
        " check",
        "on",
        " second",
        " thought",
        "\n",
        "\u00e9",
        "that's",
        " not",
        " right",
        "'s",
        " go",
        " back",
        " and",
    ]
    rows = [[rng.choice(pieces) for _ in range(rng.randint(0, 16))] for _ in range(rng.randint(1, 5))]
    window = rng.choice([1, 3, 5, 8])
    ours = R.planning_mask_from_token_strs(rows, window=window)
    for b, row in enumerate(rows):
        expected = advantages.identify_planning_tokens(row, list(advantages.DEFAULT_STRATEGIC_GRAMS), max_window=window)
        assert ours[b, : len(row)].int().tolist() == expected


@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0])
def test_sepa_variants_equal_retrains(lam):
    h = [0.2, 3.0, 0.1, 7.5, 60.0, 1.0]
    plan = [0, 1, 0, 0, 0, 1]
    mask = torch.ones(1, len(h), dtype=torch.bool)
    ht, pt = torch.tensor([h], dtype=F64), torch.tensor([plan], dtype=torch.bool)
    for ours, theirs in (
        (R.sepa_pool, advantages.apply_sepa_pooling),
        (R.sepa_amplify, advantages.apply_sepa_amplification),
        (R.sepa_amplify_clamped, advantages.apply_sepa_amplification_clamped),
    ):
        expected = theirs(h, plan, lam)
        if lam == 0.0:  # retrain returns its input uncapped at lam 0 (the pipeline's input is capped already)
            expected = [min(x, 50.0) for x in expected]
        assert ours(ht, pt, mask, lam=lam)[0].tolist() == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_shannon_entropy_with_impossible_tokens_equals_retrains():
    dists = [[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4]]
    with torch.no_grad():
        logits = torch.tensor(dists, dtype=F64).log()[None]  # log 0 = -inf logits
    ours = R.entropy_from_logits(logits)[0].tolist()
    ctx = advantages.UncertaintyContext(
        logprobs=[0.0] * 3, token_distributions=dists, precomputed_entropy=None, planning_mask=[0] * 3, params={}
    )
    theirs = advantages._compute_shannon_entropy(ctx)
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-12)
    assert all(math.isfinite(x) for x in ours)


@pytest.mark.parametrize("rewards", [[1.0], [0.3, 0.3 + 1e-6], [0.3, 0.3 + 1.1e-6], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
def test_group_tests_equal_retrains(rewards):
    expected = trainer._summarize_reward_ties(rewards)["is_uniform"]
    index = torch.zeros(len(rewards), dtype=torch.long)
    assert bool(R.uniform_groups(torch.tensor(rewards, dtype=F64), index, 1)[0]) == expected
