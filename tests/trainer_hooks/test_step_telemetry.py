"""trainer_hooks.step_telemetry against a readable per-turn loop, on random ragged batches."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer_hooks.advantages.a2tgpo import compute_a2tgpo_advantages
from trainer_hooks.step_telemetry import step_telemetry, token_entropy, turn_telemetry, turn_token_telemetry


def _batch(seed: int, B: int, T: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    n = torch.randint(0, T + 1, (B,), generator=g)
    ig_mask = torch.arange(T).unsqueeze(0) < n.unsqueeze(1)
    ig = torch.randn(B, T, generator=g, dtype=torch.float64) * ig_mask
    L = T + 3
    turn_ids = torch.full((B, L), -1)
    for b in range(B):  # one token per turn, the outcome turn included
        turn_ids[b, 1 : int(n[b]) + 2] = torch.arange(int(n[b]) + 1)
    rewards = torch.randint(0, 2, (B,), generator=g).double()
    group = torch.arange(B) // 2
    return ig, ig_mask, turn_ids, rewards, group


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), B=st.integers(1, 8), T=st.integers(1, 5))
def test_turn_telemetry_matches_a_per_turn_loop(seed: int, B: int, T: int) -> None:
    ig, ig_mask, turn_ids, rewards, group = _batch(seed, B, T)
    adv = compute_a2tgpo_advantages(rewards, group, ig, ig_mask, turn_ids)
    out = turn_telemetry(adv.turn_clip_scale, adv.turn_advantages, adv.turn_valid, ig, ig_mask, adv.normed_ig)
    assert all(v.shape == (T + 1,) for v in out.values())
    for k in range(T + 1):
        rows = adv.turn_valid[:, k]
        assert out["turn_count"][k] == rows.sum()
        if rows.any():
            scale = adv.turn_clip_scale[rows, k]
            torch.testing.assert_close(out["clip_scale_mean"][k], scale.mean())
            torch.testing.assert_close(out["clip_scale_min"][k], scale.min())
            torch.testing.assert_close(out["clip_scale_std"][k], scale.std(unbiased=False))
            torch.testing.assert_close(out["turn_adv_mean"][k], adv.turn_advantages[rows, k].mean())
            low = (scale <= 1 - 0.3 + 0.3e-3).double().mean()
            torch.testing.assert_close(out["clip_scale_frac_low"][k], low)
        if k < T and ig_mask[:, k].any():
            torch.testing.assert_close(out["ig_mean"][k], ig[ig_mask[:, k], k].mean())
        elif k == T:
            assert out["ig_mean"][k] == 0  # no trajectory has an IG turn T


def test_step_telemetry_over_response_tokens() -> None:
    adv = torch.tensor([[1.0, 2.0, 9.0], [3.0, 9.0, 9.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    log_ratio = torch.zeros(2, 3)
    logits = torch.zeros(2, 3, 4)  # uniform over 4 tokens
    out = step_telemetry(adv, mask, log_ratio=log_ratio, entropy=token_entropy(logits))
    assert out["adv_mean"] == 2.0 and out["adv_max"] == 3.0 and out["adv_min"] == 1.0
    assert out["ratio_std"] == 0.0
    torch.testing.assert_close(out["entropy_mean"], torch.log(torch.tensor(4.0)))


def test_turn_token_telemetry_means_per_turn() -> None:
    turn_ids = torch.tensor([[-1, 0, 0, 1], [-1, 0, 2, -1]])
    mask = torch.tensor([[True, True, True, True], [True, True, False, True]])  # turn 2's token is masked
    log_ratio = torch.tensor([[9.0, 0.1, 0.3, -0.2], [9.0, 0.2, 5.0, 9.0]])
    out = turn_token_telemetry(turn_ids, mask, log_ratio=log_ratio, entropy=log_ratio.abs())
    torch.testing.assert_close(out["approx_kl"], torch.tensor([-0.2, 0.2, 0.0]))
    torch.testing.assert_close(out["ratio_mean"][1], torch.tensor(-0.2).exp())
    torch.testing.assert_close(out["entropy_mean"][0], torch.tensor(0.2))


def test_token_entropy_of_masked_vocabulary_entries_is_finite():
    logits = torch.tensor([[[0.0, 0.0, float("-inf")]]])
    torch.testing.assert_close(token_entropy(logits), torch.tensor([[math.log(2.0)]]))
