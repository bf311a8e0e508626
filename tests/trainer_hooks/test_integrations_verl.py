"""The verl adapters without verl: signatures, verl's data layout, verl's metric names.
(Through verl's own registries: tests/trainer_hooks/upstream/test_verl.py.)"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from trainer_hooks.integrations import verl as V

F64 = torch.float64


def test_the_adapters_import_without_verl_and_register_nothing():
    # verl hidden (a None in sys.modules: find_spec says absent, import raises): importing the
    # adapters still works; register() then says verl is missing
    code = (
        "import sys; sys.modules['verl'] = None\n"
        "import trainer_hooks.integrations.verl as V\n"
        "try:\n    V.register()\nexcept ImportError:\n    print('no verl')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "no verl"


@pytest.mark.parametrize(
    "version, compat",
    [("0.8.0.dev", "verl"), ("0.7.1", "verl"), ("0.9.1", "verl-0.9.1"), ("1.0.0", "verl-0.9.1"), ("", "verl-0.9.1")],
)
def test_the_installed_verls_version_picks_the_preset(version, compat):
    assert V.verl_compat(version) == compat


def test_grpo_adapter_takes_verls_token_rewards_and_string_uids():
    # rows 0, 1 share uid "a" (scores 1 and 0: +-0.5 / (std sqrt(0.5) + 1e-6)); row 2 is alone
    # (verl: mean 0, std 1 -> 0.25 / (1 + 1e-6)); scores sit on each row's last token
    rewards = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.25, 0.0, 0.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]], dtype=F64)
    adv, returns = V.grpo_outcome_advantage(rewards, mask, np.array(["a", "a", "b"], dtype=object))
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    expected = torch.tensor([[a, a, 0.0], [-a, -a, -a], [0.25 / (1 + 1e-6), 0.0, 0.0]], dtype=F64)
    torch.testing.assert_close(adv, expected)
    assert returns is adv
    uids = np.array(["a", "a", "b"])
    centred, _ = V.grpo_outcome_advantage(rewards, mask, uids, config={"norm_adv_by_std_in_grpo": False})
    torch.testing.assert_close(centred[:, 0], torch.tensor([0.5, -0.5, 0.25], dtype=F64))
    with pytest.raises(ValueError, match="index must hold one uid per row"):
        V.grpo_outcome_advantage(rewards, mask, np.array(["a", "b"]))
    with pytest.raises(ValueError, match=r"token_level_rewards \(3,\) and response_mask \(3, 3\) must both"):
        V.grpo_outcome_advantage(rewards.sum(-1), mask, uids)


def test_multi_turn_layout_turns_are_runs_of_the_response_mask():
    # tool output (mask 0) splits a response into turns; a turn's reward sits on its last token
    mask = torch.tensor([[1, 1, 0, 0, 1, 0, 1, 1], [1, 1, 1, 0, 0, 0, 0, 0]])
    turn_ids, is_end, turns = V.turns_of(mask)
    assert turn_ids.tolist() == [[0, 0, -1, -1, 1, -1, 2, 2], [0, 0, 0, -1, -1, -1, -1, -1]]
    assert is_end.int().tolist() == [[0, 1, 0, 0, 1, 0, 0, 1], [0, 0, 1, 0, 0, 0, 0, 0]]
    assert turns.tolist() == [3, 1]


def test_a2tgpo_adapter_reads_ig_and_outcome_from_turn_ends():
    mask = torch.tensor([[1, 1, 0, 1, 1], [1, 1, 0, 1, 1], [1, 0, 1, 1, 0]], dtype=F64)
    rewards = torch.zeros(3, 5, dtype=F64)
    rewards[0, 1], rewards[0, 4] = 0.3, 1.0  # IG 0.3 on turn 0, outcome 1
    rewards[1, 1], rewards[1, 4] = -0.1, 0.0
    rewards[2, 0], rewards[2, 3] = 0.2, 1.0
    adv, _ = V.a2tgpo_advantage(rewards, mask, np.array(["g", "g", "g"]))
    from trainer_hooks.advantages.a2tgpo import compute_a2tgpo_advantages

    turn_ids = torch.tensor([[0, 0, -1, 1, 1], [0, 0, -1, 1, 1], [0, -1, 1, 1, -1]])
    direct = compute_a2tgpo_advantages(
        torch.tensor([1.0, 0.0, 1.0], dtype=F64),
        torch.zeros(3, dtype=torch.long),
        torch.tensor([[0.3], [-0.1], [0.2]], dtype=F64),
        torch.ones(3, 1, dtype=torch.bool),
        turn_ids,
        mask,
        with_telemetry=False,
    )
    torch.testing.assert_close(adv, direct.advantages.contiguous())
    assert (adv[mask == 0] == 0).all() and adv.abs().sum() > 0


def test_policy_adapters_return_verls_metric_names_as_floats():
    torch.manual_seed(0)
    old, lp = -torch.rand(4, 6, dtype=F64), -torch.rand(4, 6, dtype=F64)
    adv, mask = torch.randn(4, 6, dtype=F64), torch.rand(4, 6) < 0.8
    mask[:, 0] = True
    config = {
        "clip_ratio": 0.2,
        "clip_ratio_low": None,
        "clip_ratio_high": 0.28,
        "clip_ratio_c": 3.0,
        "global_batch_info": {},
    }
    loss, metrics = V.ppo_loss(old, lp, adv, mask, "token-mean", config=config)
    assert {"actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower"} <= set(metrics)
    assert all(isinstance(v, float) for v in metrics.values())
    assert metrics["actor/ppo_kl"] == pytest.approx(float(((old - lp) * mask).sum() / mask.sum()))
    with pytest.raises(ValueError, match="ledger_a2tgpo needs clip_scale"):
        V.a2tgpo_loss(old, lp, adv, mask, "token-mean", config=config)
    scaled, _ = V.a2tgpo_loss(old, lp, adv, mask, "token-mean", config=config, clip_scale=torch.ones_like(lp))
    torch.testing.assert_close(scaled, loss)  # a clip scale of 1 is plain PPO
