"""trainer_hooks against the real verl (0.9.1 from the registry): agg_loss, the vanilla PPO
loss, gspo and GRPO advantages equal verl's to 1e-6 in float64 on random ragged batches,
and our adapters run through verl's own ``get_policy_loss_fn`` / ``get_adv_estimator_fn``.

verl b178a3cd (the commit the ``"verl"`` presets pin) differs from 0.9.1 in two places;
those are checked against hand-worked vectors derived from its source in
tests/trainer_hooks/test_ppo_aggregation.py (``seq-mean-token-sum-norm``) and
tests/trainer_hooks/test_gspo.py (gspo's forced ``seq-mean-token-mean``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.trainer_hooks.upstream.upstreams import F64, ragged_batch, upstream
from trainer_hooks.advantages.retrain import grpo_advantages
from trainer_hooks.integrations import verl as ledger_verl
from trainer_hooks.losses.aggregation import LOSS_AGG_MODES, agg_loss
from trainer_hooks.losses.gspo import gspo_policy_loss
from trainer_hooks.losses.ppo import ppo_policy_loss

core_algos = upstream("verl.trainer.ppo.core_algos", "verl")
actor_config = upstream("verl.workers.config", "verl")

SEEDS = range(8)
TOL = dict(rtol=1e-6, atol=1e-6)


def verl_config(**fields):
    """verl's ActorConfig as its actor builds it (rollout_n is required there)."""
    base = dict(strategy="fsdp", ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=2, rollout_n=1)
    return actor_config.ActorConfig(**{**base, **fields})


def global_info(mask, dp_size):
    if dp_size == 1:
        return {}
    # as if this micro-batch were one of two equal ones on each of dp_size ranks
    return {
        "dp_size": dp_size,
        "batch_num_tokens": int(mask.sum()) * 2 * dp_size,
        "global_batch_size": int(mask.any(-1).sum()) * 2 * dp_size,
    }


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("dp_size", [1, 4])
def test_agg_loss_equals_verls(seed, mode, dp_size):
    _, _, loss_mat, mask = ragged_batch(seed)
    info = global_info(mask, dp_size)
    theirs = core_algos.agg_loss(loss_mat, mask.to(F64), mode, **info)
    ours = agg_loss(loss_mat, mask, mode, compat="verl-0.9.1", **info)
    torch.testing.assert_close(ours, theirs.to(F64), **TOL)
    scaled = core_algos.agg_loss(loss_mat, mask.to(F64), mode, loss_scale_factor=64, **info)
    torch.testing.assert_close(
        agg_loss(loss_mat, mask, mode, compat="verl-0.9.1", loss_scale_factor=64, **info), scaled.to(F64), **TOL
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("clip", [(0.2, 0.2), (0.2, 0.28)])
@pytest.mark.parametrize("weighted", [False, True])
def test_vanilla_ppo_equals_verls_loss_gradient_and_metrics(seed, mode, clip, weighted):
    old, lp, adv, mask = ragged_batch(seed)
    config = verl_config(clip_ratio=clip[0], clip_ratio_low=clip[0], clip_ratio_high=clip[1])
    config.global_batch_info.update(global_info(mask, 2))
    weights = torch.rand(*lp.shape, generator=torch.Generator().manual_seed(seed), dtype=F64) if weighted else None
    lp_v, lp_o = lp.clone().requires_grad_(True), lp.clone().requires_grad_(True)
    vloss, vmetrics = core_algos.compute_policy_loss_vanilla(
        old, lp_v, adv, mask, mode, config=config, rollout_is_weights=weights
    )
    loss, tel = ppo_policy_loss(
        old,
        lp_o,
        adv,
        mask,
        mode,
        clip_ratio_low=clip[0],
        clip_ratio_high=clip[1],
        compat="verl-0.9.1",
        global_batch=config.global_batch_info,
        rollout_is_weights=weights,
    )
    torch.testing.assert_close(loss, vloss, **TOL)
    vloss.backward()
    loss.backward()
    torch.testing.assert_close(lp_o.grad, lp_v.grad, **TOL)
    ours = ledger_verl.verl_metrics(tel)
    for key in ("actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower"):
        assert ours[key] == pytest.approx(vmetrics[key], rel=1e-6, abs=1e-7), key


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_gspo_of_verl_0_9_1_equals_ours_under_its_preset(seed, mode):
    old, lp, adv, mask = ragged_batch(seed)
    lp = old + 0.01 * (lp - old)  # length-normalised ratios near 1, so the GSPO bounds matter
    config = verl_config(clip_ratio=0.2, clip_ratio_low=3e-4, clip_ratio_high=4e-4)
    lp_v, lp_o = lp.clone().requires_grad_(True), lp.clone().requires_grad_(True)
    vloss, vmetrics = core_algos.compute_policy_loss_gspo(old, lp_v, adv, mask, mode, config=config)
    loss, tel = gspo_policy_loss(
        old, lp_o, adv, mask, mode, clip_ratio_low=3e-4, clip_ratio_high=4e-4, compat="verl-0.9.1"
    )
    torch.testing.assert_close(loss, vloss, **TOL)
    vloss.backward()
    loss.backward()
    torch.testing.assert_close(lp_o.grad, lp_v.grad, **TOL)
    assert ledger_verl.verl_metrics(tel)["actor/pg_clipfrac"] == pytest.approx(vmetrics["actor/pg_clipfrac"], abs=1e-7)


def grpo_batch(seed, rows=24, width=9):
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, 6, size=rows)  # some groups of one, some tied
    uids = np.array([f"uid-{g}" for g in groups], dtype=object)
    lengths = rng.integers(1, width + 1, size=rows)
    mask = torch.arange(width)[None, :] < torch.from_numpy(lengths)[:, None]
    scores = torch.from_numpy(rng.choice([0.0, 0.25, 1.0, 0.7], size=rows)).to(F64)
    rewards = torch.zeros(rows, width, dtype=F64)
    rewards[torch.arange(rows), torch.from_numpy(lengths - 1)] = scores  # verl puts the score on the last token
    return rewards, mask.to(F64), uids, torch.from_numpy(groups)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("by_std", [True, False])
def test_grpo_equals_verls_one_completion_groups_included(seed, by_std):
    rewards, mask, uids, groups = grpo_batch(seed)
    theirs, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, uids, norm_adv_by_std_in_grpo=by_std)
    ours, returns = ledger_verl.grpo_outcome_advantage(rewards, mask, uids, norm_adv_by_std_in_grpo=by_std)
    torch.testing.assert_close(ours, theirs, **TOL)
    assert ours is returns
    native = grpo_advantages(rewards.sum(-1), groups, normalize_by_std=by_std)
    torch.testing.assert_close(native[:, None] * mask, theirs, **TOL)
    one_each, _ = core_algos.compute_grpo_outcome_advantage(rewards[:3], mask[:3], np.array(["a", "b", "c"]))
    assert one_each.abs().sum() > 0  # verl's rollout.n = 1: the score itself
    torch.testing.assert_close(
        ledger_verl.grpo_outcome_advantage(rewards[:3], mask[:3], np.array(["a", "b", "c"]))[0], one_each, **TOL
    )


def test_our_adapters_run_through_verls_registries():
    ledger_verl.register()
    old, lp, adv, mask = ragged_batch(11)
    config = verl_config()
    for name in ("ledger_ppo", "ledger_gspo_token", "ledger_gspo_smallgain", "ledger_a3po", "ledger_astar_po"):
        fn = core_algos.get_policy_loss_fn(name)
        leaf = lp.clone().requires_grad_(True)
        loss, metrics = fn(
            old_log_prob=old,
            log_prob=leaf,
            advantages=adv,
            response_mask=mask,
            loss_agg_mode="token-mean",
            config=config,
            rollout_is_weights=None,
        )
        loss.backward()
        assert loss.dim() == 0 and torch.isfinite(loss) and torch.isfinite(leaf.grad).all(), name
        assert {"actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower"} <= set(metrics), name
        assert all(isinstance(v, float) for v in metrics.values()), name
    # ledger_ppo is verl's vanilla through verl's own lookup
    vloss, vmetrics = core_algos.get_policy_loss_fn("vanilla")(old, lp, adv, mask, "token-mean", config=config)
    loss, metrics = core_algos.get_policy_loss_fn("ledger_ppo")(old, lp, adv, mask, "token-mean", config=config)
    torch.testing.assert_close(loss, vloss, **TOL)
    assert metrics["actor/ppo_kl"] == pytest.approx(vmetrics["actor/ppo_kl"], rel=1e-6)
    with pytest.raises(ValueError, match="ledger_a2tgpo needs clip_scale"):
        core_algos.get_policy_loss_fn("ledger_a2tgpo")(old, lp, adv, mask, "token-mean", config=config)

    rewards, rmask, uids, _ = grpo_batch(3)
    theirs, _ = core_algos.get_adv_estimator_fn("grpo")(rewards, rmask, uids)
    ours, _ = core_algos.get_adv_estimator_fn("ledger_grpo")(
        token_level_rewards=rewards,
        response_mask=rmask,
        config=upstream("verl.trainer.config", "verl").AlgoConfig(),
        index=uids,
    )
    torch.testing.assert_close(ours, theirs, **TOL)
    for name in ("ledger_retrain", "ledger_astar_po", "ledger_a2tgpo"):
        adv_out, returns = core_algos.get_adv_estimator_fn(name)(
            token_level_rewards=rewards, response_mask=rmask, config=None, index=uids
        )
        assert adv_out.shape == rewards.shape and returns.shape == rewards.shape, name
        assert torch.isfinite(adv_out).all() and (adv_out[rmask == 0] == 0).all(), name


def test_register_never_replaces_verls_own_entries():
    assert core_algos.get_policy_loss_fn("vanilla") is core_algos.compute_policy_loss_vanilla
    ledger_verl.register()
    assert core_algos.get_policy_loss_fn("vanilla") is core_algos.compute_policy_loss_vanilla
    assert core_algos.get_adv_estimator_fn("grpo") is core_algos.compute_grpo_outcome_advantage
    core_algos.POLICY_LOSS_REGISTRY["ledger_ppo"] = core_algos.compute_policy_loss_vanilla
    try:
        with pytest.raises(ValueError, match=r"already has \['ledger_ppo'\] with another function"):
            ledger_verl.register()
    finally:
        core_algos.POLICY_LOSS_REGISTRY["ledger_ppo"] = ledger_verl.ppo_loss
    with pytest.raises(ValueError, match="options for unknown name"):
        ledger_verl.register({"ledger_nothing": {}})
