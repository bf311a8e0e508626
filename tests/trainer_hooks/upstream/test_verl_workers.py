"""verl's workers get the ledger's losses, and ``ledger_a2tgpo`` runs in verl's stock actor.

Ray-free: a fresh process imports verl as a Ray worker does, with only the environment
variable set, and finds the ``ledger_*`` names in verl's registries; then verl's own actor
loss (``verl.workers.utils.losses.ppo_loss``) runs ``ledger_a2tgpo`` on real tensors, the
clip scale coming from the ``ledger_a2tgpo`` advantage step through the batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from tests.trainer_hooks.upstream.upstreams import F64, upstream
from trainer_hooks.integrations import verl as ledger_verl
from trainer_hooks.losses.ppo import a2tgpo_policy_loss, ppo_policy_loss

core_algos = upstream("verl.trainer.ppo.core_algos", "verl")
verl_losses = upstream("verl.workers.utils.losses", "verl")
actor_config = upstream("verl.workers.config", "verl")
tu = upstream("verl.utils.tensordict_utils", "verl")
algo_config = upstream("verl.trainer.config", "verl")

# What a worker runs: it imports verl (and verl's loss module); nothing of ours by name.
WORKER = (
    "import json, os, sys\n"
    "import verl.workers.utils.losses\n"
    "from verl.trainer.ppo import core_algos as c\n"
    "options = sys.modules['trainer_hooks.integrations.verl.settings'].OPTIONS "
    "if 'trainer_hooks.integrations.verl.settings' in sys.modules else None\n"
    "print(json.dumps({'losses': sorted(n for n in c.POLICY_LOSS_REGISTRY if n.startswith('ledger_')),\n"
    "  'estimators': sorted(n for n in c.ADV_ESTIMATOR_REGISTRY if n.startswith('ledger_')),\n"
    "  'options': options,\n"
    "  'carrying': verl.workers.utils.losses.ppo_loss.__name__}))\n"
)


def run_worker(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_USE_EXTERNAL", "LEDGER_VERL"))}
    # only the variable under test: the package's verl.plugins entry point stays out of it
    done = subprocess.run(
        [sys.executable, "-c", WORKER],
        env={**clean, "VERL_USE_EXTERNAL_PLUGINS": "none", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_worker_with_only_the_env_var_has_every_ledger_name():
    found = run_worker(
        VERL_USE_EXTERNAL_MODULES="trainer_hooks.integrations.verl",
        LEDGER_VERL_OPTIONS='{"ledger_a3po": {"staleness": 2}}',
    )
    assert found["losses"] == sorted(ledger_verl.POLICY_LOSSES)
    assert found["estimators"] == sorted(ledger_verl.ADVANTAGE_ESTIMATORS)
    assert found["options"] == {"ledger_a3po": {"staleness": 2}}  # the workers' options, from the env
    assert found["carrying"] == "ppo_loss"  # the adapters alone leave verl's actor loss as it is


def test_without_the_env_var_a_worker_has_none_and_the_actor_extension_installs_with_it():
    assert run_worker()["losses"] == []
    found = run_worker(VERL_USE_EXTERNAL_MODULES="trainer_hooks.integrations.verl.actor")
    assert found["losses"] == sorted(ledger_verl.POLICY_LOSSES)
    assert found["carrying"] == "carrying_ppo_loss"


def test_bad_worker_options_fail_the_import_naming_the_variable():
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_USE_EXTERNAL", "LEDGER_VERL"))}
    done = subprocess.run(
        [sys.executable, "-c", "import verl"],
        env={
            **clean,
            "VERL_USE_EXTERNAL_PLUGINS": "none",
            "VERL_USE_EXTERNAL_MODULES": "trainer_hooks.integrations.verl",
            "LEDGER_VERL_OPTIONS": "[1]",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "LEDGER_VERL_OPTIONS must be a JSON object" in done.stderr


def test_the_package_declares_its_verl_plugin_entry_point():
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["verl.plugins"] == {"lineage_ledger": "trainer_hooks.integrations.verl"}


# -- ledger_a2tgpo through verl's actor loss ------------------------------------------------


def a2tgpo_batch(seed: int = 0):
    """Six trajectories in verl's multi-turn layout (turn = run of response tokens, tool
    output masked out), two prompts; IG on each IG turn's last token, the outcome on the
    last turn's. Response length 10, prompts of 3 tokens."""
    g = torch.Generator().manual_seed(seed)
    B, P, L = 6, 3, 10
    mask = torch.zeros(B, L)
    rewards = torch.zeros(B, L, dtype=F64)
    layouts = [
        [(0, 3), (5, 7), (8, 10)],
        [(0, 2), (4, 9)],
        [(0, 4)],
        [(0, 3), (5, 6), (7, 9)],
        [(0, 5), (6, 8)],
        [(0, 7)],
    ]
    for row, turns in enumerate(layouts):
        for start, end in turns:
            mask[row, start:end] = 1
            rewards[row, end - 1] = float(torch.rand((), generator=g, dtype=F64) * 2 - 1)
    uids = np.array(["p0", "p0", "p0", "p1", "p1", "p1"], dtype=object)
    old = -torch.rand(B, L, generator=g, dtype=F64) * 2
    new = old + 0.6 * torch.randn(B, L, generator=g, dtype=F64)  # ratios well outside 1 +- 0.2: clipping matters
    return dict(B=B, P=P, L=L, mask=mask, rewards=rewards, uids=uids, old=old, new=new)


def worker_data(b, advantages, returns):
    """The micro-batch as verl's actor hands it to ``ppo_loss``: padded prompts, responses and
    attention mask, the response tensors, and the global batch facts; plus the model
    output, log-probs over the whole sequence (prompt + response, ``[B * (P + L)]``)."""
    B, P, L = b["B"], b["P"], b["L"]
    data = tu.get_tensordict(
        tensor_dict={
            "prompts": torch.ones(B, P, dtype=torch.long),
            "responses": torch.ones(B, L, dtype=torch.long),
            "attention_mask": torch.ones(B, P + L, dtype=torch.long),
            "response_mask": b["mask"].to(torch.long),
            "old_log_probs": b["old"],
            "advantages": advantages,
            "returns": returns,
        },
        non_tensor_dict={"dp_size": 1, "batch_num_tokens": None, "global_batch_size": None},
    )
    # the model's log-prob of response token t sits at sequence position P + t - 1
    sequence = torch.zeros(B, P + L, dtype=F64)
    sequence[:, P - 1 : P + L - 1] = b["new"]
    log_probs = sequence.reshape(-1).clone().requires_grad_(True)
    return data, {"log_probs": log_probs}, log_probs


def a2tgpo_config(loss_mode="ledger_a2tgpo"):
    return actor_config.ActorConfig(
        strategy="fsdp",
        ppo_mini_batch_size=4,
        ppo_micro_batch_size_per_gpu=2,
        rollout_n=1,
        clip_ratio=0.2,
        clip_ratio_low=0.2,
        clip_ratio_high=0.28,
        loss_agg_mode="token-mean",
        policy_loss=actor_config.PolicyLossConfig(loss_mode=loss_mode),
    )


@pytest.fixture
def actor_extension():
    from trainer_hooks.integrations.verl import actor

    original = verl_losses.ppo_loss
    actor.install()
    try:
        yield actor
    finally:
        verl_losses.ppo_loss = original


def test_ledger_a2tgpo_runs_in_verls_actor_loss_with_the_clip_scale_of_the_advantage_step(actor_extension):
    b = a2tgpo_batch()
    estimator = core_algos.get_adv_estimator_fn("ledger_a2tgpo")
    advantages, returns = estimator(
        token_level_rewards=b["rewards"], response_mask=b["mask"], config=algo_config.AlgoConfig(), index=b["uids"]
    )
    inside = b["mask"].bool()
    assert not torch.equal(returns[inside], torch.ones_like(returns[inside]))  # an adaptive scale, not all ones
    assert ((returns[inside] > 0.7) & (returns[inside] < 1.3)).all()  # inside 1 +- beta (0.3)

    data, model_output, leaf = worker_data(b, advantages, returns)
    config = a2tgpo_config()
    loss, metrics = verl_losses.ppo_loss(config, model_output, data)  # verl's actor loss, extension installed
    loss.backward()

    # the same loss by hand: A²TGPO's loss with the estimator's clip scale and verl's turns
    turn_ids = ledger_verl.turns_of(inside)[0]
    new = b["new"].clone().requires_grad_(True)
    expected, _ = a2tgpo_policy_loss(
        b["old"],
        new,
        advantages,
        inside,
        "token-mean",
        clip_scale=torch.where(inside, returns, 1.0),
        turn_ids=turn_ids,
        clip_ratio_low=0.2,
        clip_ratio_high=0.28,
        compat="verl-0.9.1",
    )
    expected.backward()
    torch.testing.assert_close(loss, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(leaf.grad.view(b["B"], -1)[:, b["P"] - 1 : -1], new.grad, rtol=1e-12, atol=1e-12)
    assert {"actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_loss"} <= set(metrics)

    # the clip scale did change the loss: plain PPO on the same batch differs
    plain, _ = ppo_policy_loss(
        b["old"],
        b["new"],
        advantages,
        inside,
        "token-mean",
        clip_ratio_low=0.2,
        clip_ratio_high=0.28,
        turn_ids=turn_ids,
        ratio_level="turn",
    )
    assert abs(plain.item() - loss.item()) > 1e-6


def test_verls_actor_loss_without_the_extension_refuses_ledger_a2tgpo_and_other_modes_pass_through(actor_extension):
    b = a2tgpo_batch(1)
    advantages, returns = core_algos.get_adv_estimator_fn("ledger_a2tgpo")(
        token_level_rewards=b["rewards"], response_mask=b["mask"], config=None, index=b["uids"]
    )
    original = actor_extension._ORIGINAL["ppo_loss"]
    data, model_output, _ = worker_data(b, advantages, returns)
    with pytest.raises(ValueError, match="ledger_a2tgpo needs clip_scale.*actor extension"):
        original(a2tgpo_config(), model_output, data)
    # another loss mode goes through the extension as verl's own ppo_loss
    config = a2tgpo_config("vanilla")
    data, model_output, _ = worker_data(b, advantages, returns)
    ours, _ = verl_losses.ppo_loss(config, model_output, data)
    data, model_output, _ = worker_data(b, advantages, returns)
    theirs, _ = original(config, model_output, data)
    assert torch.equal(ours, theirs)
