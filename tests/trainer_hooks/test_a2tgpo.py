"""A²TGPO advantages: hand-worked numbers, the loop reference on random ragged batches,
and the properties the primitives promise."""

from __future__ import annotations

import math
import random

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer_hooks import registry
from trainer_hooks.advantages import a2tgpo as A
from trainer_hooks.ops import segments as S

try:  # tests/trainer_hooks may or may not be a package
    from . import loop_reference as ref
except ImportError:  # pragma: no cover - depends on the rootdir layout
    import loop_reference as ref

HYPOTHESIS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
F64 = torch.float64


def t(values, dtype=F64):
    return torch.tensor(values, dtype=dtype)


def as_tensors(batch: dict, dtype=F64) -> dict:
    return dict(
        outcome_rewards=t(batch["outcome"], dtype),
        prompt_group=torch.tensor(batch["prompt_group"]),
        ig=t(batch["ig"], dtype),
        ig_mask=torch.tensor(batch["ig_mask"], dtype=torch.bool),
        turn_ids=torch.tensor(batch["turn_ids"]),
        response_mask=torch.tensor(batch["response_mask"], dtype=torch.bool),
    )


# ---------------------------------------------------------------------------------------
# Information gain
# ---------------------------------------------------------------------------------------


def test_information_gain_hand_worked():
    # p = exp(logp): [0.2, 0.5, 0.4] -> prob_diff IG = [0.5 - 0.2, 0.4 - 0.5] = [0.3, -0.1];
    # log_prob_diff IG = [ln 0.5 - ln 0.2, ln 0.4 - ln 0.5] = [ln 2.5, ln 0.8].
    # Row 2 has one valid turn; its second column is garbage and must come out 0.
    lp = t([[math.log(0.2), math.log(0.5), math.log(0.4)], [math.log(0.1), math.log(0.3), 123.0]])
    mask = torch.tensor([[True, True], [True, False]])
    torch.testing.assert_close(A.information_gain(lp, mask), t([[0.3, -0.1], [0.2, 0.0]]))
    torch.testing.assert_close(
        A.information_gain(lp, mask, info_gain_type="log_prob_diff"),
        t([[math.log(2.5), math.log(0.8)], [math.log(3.0), 0.0]]),
    )
    with pytest.raises(ValueError, match="prob_diff"):
        A.information_gain(lp, mask, info_gain_type="nope")


class TinyCausalLM(torch.nn.Module):
    """Causal LM with the HF call interface: each position sees the masked running mean of
    the embeddings up to itself (so padding after a token never changes its logits)."""

    def __init__(self, vocab: int = 13, dim: int = 8) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.emb = torch.nn.Parameter(torch.randn(vocab, dim, generator=g, dtype=F64))
        self.pos = torch.nn.Parameter(0.3 * torch.randn(64, dim, generator=g, dtype=F64))
        self.head = torch.nn.Parameter(torch.randn(dim, vocab, generator=g, dtype=F64))
        self.calls = 0

    def forward(self, input_ids, attention_mask):
        self.calls += 1
        h = self.emb[input_ids] + self.pos[: input_ids.shape[1]]
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        ctx = (h * m).cumsum(1) / m.cumsum(1).clamp_min(1.0)
        return type("Out", (), {"logits": torch.tanh(ctx + h) @ self.head})()


def per_row_gold_logprobs(model, context_ids, context_mask, answer_ids, answer_mask):
    """One unpadded forward per (trajectory, context): the obvious way."""
    B, K, _ = context_ids.shape
    out = torch.zeros(B, K, dtype=F64)
    for b in range(B):
        ans = answer_ids[b][answer_mask[b]]
        for k in range(K):
            ctx = context_ids[b, k][context_mask[b, k]]
            if ctx.numel() == 0:
                continue
            seq = torch.cat([ctx, ans]).unsqueeze(0)
            logits = model(input_ids=seq, attention_mask=torch.ones_like(seq)).logits[0].to(F64)
            logp = torch.log_softmax(logits, -1)
            n = ctx.numel()
            out[b, k] = sum(logp[n - 1 + j, ans[j]] for j in range(ans.numel())) / ans.numel()
    return out


def scattered_contexts(seed: int, B: int, K: int, C: int, vocab: int):
    """Contexts whose valid tokens sit at arbitrary (not left-aligned) positions; the
    context after turn k grows with k; trajectory 1 stops after one turn."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (B, K, C), generator=g)
    mask = torch.rand(B, K, C, generator=g) < 0.3 + 0.15 * torch.arange(K).view(1, K, 1)
    mask[:, :, 0] = True  # every existing context has the prompt
    mask[1, 2:] = False  # no turns 2.. for trajectory 1
    answer = torch.randint(1, vocab, (B, 3), generator=g)
    answer_mask = torch.tensor([[True, True, True], [True, True, False], [True, False, False]])[:B]
    return ids, mask, answer, answer_mask


def test_gold_answer_logprobs_match_one_forward_per_context():
    model = TinyCausalLM()
    ids, mask, answer, amask = scattered_contexts(1, B=3, K=4, C=7, vocab=13)
    expected = per_row_gold_logprobs(model, ids, mask, answer, amask)
    model.calls = 0
    got = A.gold_answer_logprobs(model, ids, mask, answer, amask)
    assert model.calls == 1  # all contexts of all turns in one batched forward
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    chunked = A.gold_answer_logprobs(model, ids, mask, answer, amask, chunk_size=4)
    torch.testing.assert_close(chunked, expected, rtol=1e-10, atol=1e-12)
    # IG end to end: turn t valid iff context t+1 exists.
    ig, gold = A.information_gain_from_model(model, ids, mask, answer, amask)
    turn_mask = mask[:, 1:].any(-1)
    assert turn_mask.tolist() == [[True, True, True], [True, False, False], [True, True, True]]
    torch.testing.assert_close(ig, t(ref.information_gain(expected.tolist(), turn_mask.tolist())))
    torch.testing.assert_close(gold, expected, rtol=1e-10, atol=1e-12)


def test_gold_answer_logprobs_with_transformers_gpt2():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(
        vocab_size=13, n_positions=32, n_embd=16, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval().double()
    ids, mask, answer, amask = scattered_contexts(2, B=3, K=3, C=6, vocab=13)
    expected = per_row_gold_logprobs(model, ids, mask, answer, amask)
    got = A.gold_answer_logprobs(model, ids, mask, answer, amask)
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-10)


# ---------------------------------------------------------------------------------------
# Primitives, hand-worked
# ---------------------------------------------------------------------------------------


def test_turn_group_normalize_hand_worked():
    # prompt 7: trajectories 0, 1; prompt 9: trajectory 2. T = 2.
    # (7, turn 0): {1, 3} -> mean 2, biased var 1, std = sqrt(1 + 1e-8);
    #              normalized = +-1 / (sqrt(1 + 1e-8) + 1e-6)
    # (7, turn 1): {5} (trajectory 1 has one turn) -> singleton -> 0
    # (9, turn 0): {4}, (9, turn 1): {4} -> singletons -> 0
    ig = t([[1.0, 5.0], [3.0, 99.0], [4.0, 4.0]])
    mask = torch.tensor([[True, True], [True, False], [True, True]])
    z = 1.0 / (math.sqrt(1.0 + 1e-8) + 1e-6)  # 0.9999990000059999
    out = A.turn_group_normalize(ig, mask, torch.tensor([7, 7, 9]))
    torch.testing.assert_close(out, t([[-z, 0.0], [z, 0.0], [0.0, 0.0]]), rtol=0, atol=1e-15)
    centered = A.turn_group_normalize(ig, mask, torch.tensor([7, 7, 9]), norm_adv_by_std=False)
    torch.testing.assert_close(centered, t([[-1.0, 0.0], [1.0, 0.0], [0.0, 0.0]]))
    # unbiased: var = 2 / 1 = 2 -> +-1 / (sqrt(2 + 1e-8) + 1e-6)
    zu = 1.0 / (math.sqrt(2.0 + 1e-8) + 1e-6)
    unbiased = A.turn_group_normalize(ig, mask, torch.tensor([7, 7, 9]), unbiased_std=True)
    torch.testing.assert_close(unbiased[:, 0], t([-zu, zu, 0.0]), rtol=0, atol=1e-15)


def test_composite_group_id_is_prompt_times_max_turns_plus_turn():
    ids, n = A.turn_group_ids(torch.tensor([40, 10, 40]), 3)
    # dense prompt index: 10 -> 0, 40 -> 1
    assert ids.tolist() == [[3, 4, 5], [0, 1, 2], [3, 4, 5]] and n == 6


def test_variance_rescaled_accumulation_hand_worked():
    # ig = [1, 2, 3] (3 valid turns), gamma = 0.5:
    # D_0 = (1 + 0.5*2 + 0.25*3) / sqrt(3) = 2.75 / sqrt(3)
    # D_1 = (2 + 0.5*3) / sqrt(2)           = 3.5 / sqrt(2)
    # D_2 = 3 / sqrt(1)
    # second row has 2 valid turns (ragged): D_0 = (1 + 0.5*2)/sqrt(2), D_1 = 2, col 2 -> 0
    ig = t([[1.0, 2.0, 3.0], [1.0, 2.0, 7.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    out = A.variance_rescaled_accumulation(ig, mask, gamma=0.5)
    expected = t([[2.75 / math.sqrt(3), 3.5 / math.sqrt(2), 3.0], [2.0 / math.sqrt(2), 2.0, 0.0]])
    torch.testing.assert_close(out, expected)
    # gamma = 0: only the turn itself, still divided by sqrt(n_terms)
    out0 = A.variance_rescaled_accumulation(ig, mask, gamma=0.0)
    torch.testing.assert_close(out0, t([[1 / math.sqrt(3), 2 / math.sqrt(2), 3.0], [1 / math.sqrt(2), 2.0, 0.0]]))


def test_accumulation_is_sane_for_long_horizons_and_gamma_below_one():
    # Constant values c over n = 3000 turns, gamma = 0.5:
    # D_t = c (1 - gamma^(n-t)) / (1 - gamma) / sqrt(n - t). A gamma^-t rescaled cumsum
    # would overflow float64 (0.5^-3000 = 2^3000); the power matrix just underflows to 0.
    n, c, gamma = 3000, 0.7, 0.5
    ig = torch.full((1, n), c, dtype=F64)
    out = A.variance_rescaled_accumulation(ig, torch.ones(1, n, dtype=torch.bool), gamma=gamma)
    remaining = torch.arange(n, 0, -1, dtype=F64)
    expected = c * (1 - gamma**remaining) / (1 - gamma) / remaining.sqrt()
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[0], expected, rtol=1e-12, atol=1e-14)
    # float32 at gamma = 0.99 over 3000 turns also stays finite and accurate
    out32 = A.variance_rescaled_accumulation(ig.float(), torch.ones(1, n, dtype=torch.bool), gamma=0.99)
    exp32 = c * (1 - 0.99**remaining) / (1 - 0.99) / remaining.sqrt()
    torch.testing.assert_close(out32[0].double(), exp32, rtol=1e-4, atol=1e-5)


def test_adaptive_clip_scale_hand_worked():
    # sigmoid(ln 3) = 0.75 -> 1 + 0.3 (2*0.75 - 1) = 1.15; sigmoid(-ln 3) = 0.25 -> 0.85;
    # sigmoid(0) = 0.5 -> 1.0; a masked turn -> 1.0 whatever its value.
    x = t([[math.log(3.0), -math.log(3.0), 0.0, 50.0]])
    mask = torch.tensor([[True, True, True, False]])
    torch.testing.assert_close(A.adaptive_clip_scale(x, mask), t([[1.15, 0.85, 1.0, 1.0]]))
    # beta = 0.1 -> 1 +- 0.05
    torch.testing.assert_close(A.adaptive_clip_scale(x, mask, beta=0.1), t([[1.05, 0.95, 1.0, 1.0]]))


# ---------------------------------------------------------------------------------------
# The composed estimator, hand-worked
# ---------------------------------------------------------------------------------------

# One prompt, two trajectories, gamma = 0.5, no std division:
#   A: IG [0.5, 0.1], outcome 1        B: IG [0.3], outcome 0
# Tokens (L = 8):  A: [-1, 0, 0, 1, -1, 2, 2, -1]   B: [-1, 0, 0, 1, 1, -1, -1, -1]
# (A's outcome turn is turn 2, B's is turn 1.)
HAND_IG = [[0.5, 0.1], [0.3, 0.0]]
HAND_MASK = [[True, True], [True, False]]
HAND_TURN_IDS = [[-1, 0, 0, 1, -1, 2, 2, -1], [-1, 0, 0, 1, 1, -1, -1, -1]]
HAND_CASES = {
    # joint: pool {0.5, 0.1, 1, 0.3, 0}, mean 0.38 -> A [0.12, -0.28] out 0.62, B [-0.08] out -0.38
    #   A: t1 = -0.28 + 0.5*0.62 = 0.03, t0 = 0.12 + 0.5*0.03 = 0.135;  B: t0 = -0.08 + 0.5*-0.38 = -0.27
    "joint": ([[0.135, 0.03, 0.62], [-0.27, -0.38, 0.0]], [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]),
    # separate: outcome {1, 0} -> +-0.5; IG pool {0.5, 0.1, 0.3}, mean 0.3 -> A [0.2, -0.2], B [0]
    #   A: t1 = -0.2 + 0.25 = 0.05, t0 = 0.2 + 0.025 = 0.225;  B: t0 = 0 - 0.25 = -0.25
    "separate": ([[0.225, 0.05, 0.5], [-0.25, -0.5, 0.0]], [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]),
    # turn-group: (turn 0) {0.5, 0.3} -> [0.1, -0.1]; (turn 1) {0.1} singleton -> 0
    #   A: t1 = 0 + 0.25 = 0.25, t0 = 0.1 + 0.125 = 0.225;  B: t0 = -0.1 - 0.25 = -0.35
    "turn-group": ([[0.225, 0.25, 0.5], [-0.35, -0.5, 0.0]], [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]),
    # v1d (alpha 0.3): A: D0 = (0.1 + 0.5*0)/sqrt(2), D1 = 0 -> [0.3 D0 + 0.5, 0.5, 0.5]
    #   B: D0 = -0.1 -> -0.03 - 0.5 = -0.53.  clip: A t0 = 1 + 0.3 tanh(0.05), B t0 = 1 - 0.3 tanh(0.05)
    "turn-group-v1d": (
        [[0.3 * 0.1 / math.sqrt(2) + 0.5, 0.5, 0.5], [-0.53, -0.5, 0.0]],
        [[1 + 0.3 * math.tanh(0.05), 1.0, 1.0], [1 - 0.3 * math.tanh(0.05), 1.0, 1.0]],
    ),
}


@pytest.mark.parametrize("mode", A.INFO_GAIN_NORM_MODES)
def test_estimator_hand_worked(mode):
    turn_adv, turn_scale = HAND_CASES[mode]
    out = A.compute_a2tgpo_advantages(
        t([1.0, 0.0]),
        torch.tensor([3, 3]),
        t(HAND_IG),
        torch.tensor(HAND_MASK),
        torch.tensor(HAND_TURN_IDS),
        info_gain_norm_mode=mode,
        gamma=0.5,
        norm_adv_by_std=False,
    )
    torch.testing.assert_close(out.turn_advantages, t(turn_adv), rtol=0, atol=1e-12)
    torch.testing.assert_close(out.turn_clip_scale, t(turn_scale), rtol=0, atol=1e-12)
    assert out.turn_valid.tolist() == [[True, True, True], [True, True, False]]
    (a0, a1, a2), (b0, b1, _) = turn_adv
    expected_tokens = [[0, a0, a0, a1, 0, a2, a2, 0], [0, b0, b0, b1, b1, 0, 0, 0]]
    torch.testing.assert_close(out.advantages, t(expected_tokens), rtol=0, atol=1e-12)
    (s0, s1, s2), (r0, r1, _) = turn_scale
    torch.testing.assert_close(
        out.clip_scale, t([[1, s0, s0, s1, 1, s2, s2, 1], [1, r0, r0, r1, r1, 1, 1, 1]]), rtol=0, atol=1e-12
    )


def test_outcome_normalization_with_std_hand_worked():
    # outcome {1, 0}: mean 0.5, biased var 0.25, std = sqrt(0.25 + 1e-8) -> +-0.5 / (std + 1e-6)
    o = 0.5 / (math.sqrt(0.25 + 1e-8) + 1e-6)  # 0.9999979800040805
    out = A.compute_a2tgpo_advantages(
        t([1.0, 0.0]), torch.tensor([3, 3]), t(HAND_IG), torch.tensor(HAND_MASK), torch.tensor(HAND_TURN_IDS)
    )
    torch.testing.assert_close(out.outcome_advantages, t([o, -o]), rtol=0, atol=1e-15)


def test_adjacent_turns_with_equal_advantages_stay_two_turns():
    # Two adjacent turns (ids 0 and 1, no gap) with the same advantage 0.5 but different clip
    # scales. Boundary detection by "advantage changed" would merge them and smear one
    # scale over both; the explicit ids keep each token's own turn.
    turn_values = t([[0.5, 0.5, -1.0]])
    scales = t([[1.2, 0.8, 1.0]])
    ids = torch.tensor([[0, 0, 1, 1, 2, -1]])
    assert S.broadcast_turns(turn_values, ids).tolist() == [[0.5, 0.5, 0.5, 0.5, -1.0, 0.0]]
    assert S.broadcast_turns(scales, ids, fill=1.0).tolist() == [[1.2, 1.2, 0.8, 0.8, 1.0, 1.0]]
    # Same through the estimator: IG turns 0 and 1 of trajectory 0 with normed IG +-0.5 get
    # equal advantages (alpha = 0: advantage = outcome advantage on every turn) but keep
    # distinct clip scales.
    out = A.compute_a2tgpo_advantages(
        t([1.0, 0.0]),
        torch.tensor([0, 0]),
        t([[1.0, 0.0], [0.0, 1.0]]),
        torch.ones(2, 2, dtype=torch.bool),
        torch.tensor([[0, 0, 1, 1, 2], [0, 1, 1, 2, -1]]),
        adv_rescale_alpha=0.0,
        norm_adv_by_std=False,
    )
    assert out.advantages[0, :4].unique().numel() == 1
    s = out.clip_scale[0].tolist()
    assert s[0] == s[1] and s[2] == s[3] and s[0] > 1.0 > s[2]


# ---------------------------------------------------------------------------------------
# Against the loop reference, and properties
# ---------------------------------------------------------------------------------------

batch_params = st.fixed_dictionaries(
    dict(
        seed=st.integers(0, 2**31),
        num_prompts=st.integers(1, 4),
        group_size=st.integers(1, 5),
        max_turns=st.integers(1, 5),
        tokens_per_turn=st.integers(1, 3),
        zero_ig=st.booleans(),
        empty_row_prob=st.sampled_from([0.0, 0.3]),
    )
)


def build(params: dict) -> dict:
    p = dict(params)
    rng = random.Random(p.pop("seed"))
    p["zero_ig"] = p["zero_ig"] and rng.random() < 0.3
    return ref.make_ragged_batch(rng, **p)


@HYPOTHESIS
@given(
    params=batch_params,
    mode=st.sampled_from(A.INFO_GAIN_NORM_MODES),
    gamma=st.sampled_from([0.0, 0.5, 0.9, 1.0]),
    alpha=st.sampled_from([0.0, 0.3, 0.9]),
    use_std=st.booleans(),
    unbiased=st.booleans(),
    dtype=st.sampled_from([torch.float64, torch.float32]),
)
def test_matches_loop_reference(params, mode, gamma, alpha, use_std, unbiased, dtype):
    batch = build(params)
    x = as_tensors(batch, dtype)
    out = A.compute_a2tgpo_advantages(
        **x,
        info_gain_norm_mode=mode,
        gamma=gamma,
        adv_rescale_alpha=alpha,
        norm_adv_by_std=use_std,
        unbiased_std=unbiased,
    )
    expected = ref.a2tgpo(
        batch["outcome"],
        batch["prompt_group"],
        batch["ig"],
        batch["ig_mask"],
        batch["turn_ids"],
        batch["response_mask"],
        mode=mode,
        gamma=gamma,
        alpha=alpha,
        use_std=use_std,
        unbiased=unbiased,
    )
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-4)
    assert out.advantages.dtype == dtype
    torch.testing.assert_close(out.advantages, t(expected["advantages"], dtype), **tol)
    torch.testing.assert_close(out.clip_scale, t(expected["clip_scale"], dtype), **tol)
    torch.testing.assert_close(out.turn_advantages, t(expected["turn_adv"], dtype), **tol)
    torch.testing.assert_close(out.normed_ig, t(expected["normed_ig"], dtype), **tol)
    torch.testing.assert_close(out.outcome_advantages, t(expected["outcome_adv"], dtype), **tol)


@HYPOTHESIS
@given(
    params=batch_params,
    mode=st.sampled_from(A.INFO_GAIN_NORM_MODES),
    gamma=st.sampled_from([0.0, 0.5, 1.0]),
    alpha=st.sampled_from([0.0, 0.3]),
    beta=st.sampled_from([0.1, 0.3]),
)
def test_estimator_equals_the_chain_of_public_primitives(params, mode, gamma, alpha, beta):
    # The estimator runs a fused version of the chain; the primitives must compose to it.
    x = as_tensors(build(params))
    out = A.compute_a2tgpo_advantages(
        **x, info_gain_norm_mode=mode, gamma=gamma, adv_rescale_alpha=alpha, clip_beta=beta, dynamic_clip=True
    )
    mask, oa = x["ig_mask"], out.outcome_advantages
    index, G = S.dense_index(x["prompt_group"])
    if mode != "joint":  # joint pools the outcomes with the IG values
        torch.testing.assert_close(oa, S.segment_normalize(x["outcome_rewards"], index, G, torch.ones_like(mask[:, 0])))
    if mode in ("turn-group", "turn-group-v1d"):
        torch.testing.assert_close(out.normed_ig, A.turn_group_normalize(x["ig"], mask, x["prompt_group"]))
    normed = out.normed_ig
    if mode == "turn-group-v1d":
        D = A.variance_rescaled_accumulation(normed, mask, gamma)
        turn_adv, valid, _ = A.assemble_turns(alpha * D + oa.unsqueeze(1), mask, oa)
    else:
        rewards, valid, _ = A.assemble_turns(normed, mask, oa)
        turn_adv = A.discounted_turn_returns(rewards, valid, gamma)
    scale, _, _ = A.assemble_turns(A.adaptive_clip_scale(normed, mask, beta), mask, torch.ones_like(oa))
    scale = torch.where(valid, scale, 1.0)
    assert torch.equal(out.turn_valid, valid)
    torch.testing.assert_close(out.turn_advantages, turn_adv, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out.turn_clip_scale, scale, rtol=1e-12, atol=1e-12)
    ids, tokens = x["turn_ids"], x["response_mask"]
    torch.testing.assert_close(out.advantages, S.broadcast_turns(turn_adv, ids, tokens), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out.clip_scale, S.broadcast_turns(scale, ids, tokens, fill=1.0), rtol=1e-12, atol=1e-12)


@HYPOTHESIS
@given(params=batch_params)
def test_each_composite_group_normalizes_to_mean_zero_std_one(params):
    batch = build(dict(params, zero_ig=False))
    x = as_tensors(batch)
    normed = A.turn_group_normalize(x["ig"], x["ig_mask"], x["prompt_group"])
    groups: dict = {}
    for b, (row, mask) in enumerate(zip(batch["ig"], batch["ig_mask"])):
        for turn, valid in enumerate(mask):
            if valid:
                groups.setdefault((batch["prompt_group"][b], turn), []).append((row[turn], normed[b, turn].item()))
    for members in groups.values():
        raw = [r for r, _ in members]
        values = torch.tensor([v for _, v in members], dtype=F64)
        if len(members) == 1 or max(raw) == min(raw):
            assert values.abs().max() == 0  # singleton / constant group -> exactly 0
            continue
        assert abs(values.mean().item()) < 1e-9
        # biased std of a z-score is 1, less the eps terms (< 1e-3 for raw std >= 1/128)
        assert values.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-3)


@HYPOTHESIS
@given(params=batch_params, beta=st.floats(0.01, 0.9), use_std=st.booleans())
def test_clip_scale_strictly_inside_bounds(params, beta, use_std):
    x = as_tensors(build(params))
    out = A.compute_a2tgpo_advantages(**x, clip_beta=beta, norm_adv_by_std=use_std)
    s = out.turn_clip_scale[out.turn_valid]
    assert ((s > 1 - beta) & (s < 1 + beta)).all()
    # the outcome turns and the non-turn tokens are exactly 1
    outcome_col = x["ig_mask"].sum(-1)
    assert (out.turn_clip_scale.gather(1, outcome_col.unsqueeze(1)) == 1).all()
    assert (out.clip_scale[x["turn_ids"] < 0] == 1).all()
    assert (out.advantages[x["turn_ids"] < 0] == 0).all()


EDGE_BATCHES = {
    # prompt 1's trajectories have no IG turn at all: its composite groups are empty
    "empty_groups": dict(
        outcome=[1.0, 0.0, 0.5, 0.5],
        prompt_group=[0, 0, 1, 1],
        ig=[[0.2, 0.1], [0.4, 0.0], [0.0, 0.0], [0.0, 0.0]],
        ig_mask=[[True, True], [True, False], [False, False], [False, False]],
    ),
    "singletons": dict(
        outcome=[1.0, 0.0, 0.3],
        prompt_group=[0, 1, 2],
        ig=[[0.2, 0.1], [0.4, 0.0], [0.3, 0.3]],
        ig_mask=[[True, True], [True, False], [True, True]],
    ),
    "all_zero_ig": dict(
        outcome=[1.0, 0.0, 1.0],
        prompt_group=[0, 0, 0],
        ig=[[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]],
        ig_mask=[[True, True], [True, False], [True, True]],
    ),
    "all_equal_outcome": dict(
        outcome=[1.0, 1.0], prompt_group=[0, 0], ig=[[0.2, 0.1], [0.4, 0.3]], ig_mask=[[True, True], [True, True]]
    ),
}


@pytest.mark.parametrize("name", sorted(EDGE_BATCHES))
@pytest.mark.parametrize("mode", A.INFO_GAIN_NORM_MODES)
@pytest.mark.parametrize("fully_masked_rows", [False, True])
def test_finite_values_and_gradients_on_degenerate_batches(name, mode, fully_masked_rows):
    spec = EDGE_BATCHES[name]
    B = len(spec["outcome"])
    # two tokens per turn, the outcome turn n_b last (tokens past it belong to no turn)
    turn_ids = torch.tensor(
        [[k // 2 if k // 2 <= sum(row) else -1 for k in range(6)] + [-1] for row in spec["ig_mask"]]
    )
    response_mask = torch.ones(B, 7, dtype=torch.bool)
    if fully_masked_rows:
        response_mask[0] = False
    ig = t(spec["ig"]).requires_grad_(True)
    outcome = t(spec["outcome"]).requires_grad_(True)
    out = A.compute_a2tgpo_advantages(
        outcome,
        torch.tensor(spec["prompt_group"]),
        ig,
        torch.tensor(spec["ig_mask"]),
        turn_ids,
        response_mask,
        info_gain_norm_mode=mode,
    )
    for name_, value in out._asdict().items():
        if isinstance(value, torch.Tensor):
            assert torch.isfinite(value.double()).all(), name_
    assert all(torch.isfinite(v) for v in out.telemetry.values())
    if fully_masked_rows:
        assert (out.advantages[0] == 0).all() and (out.clip_scale[0] == 1).all()
    (out.advantages.sum() + out.clip_scale.sum()).backward()
    assert torch.isfinite(ig.grad).all() and torch.isfinite(outcome.grad).all()


def test_all_zero_ig_gives_pure_outcome_advantage_and_unit_clip():
    spec = EDGE_BATCHES["all_zero_ig"]
    out = A.compute_a2tgpo_advantages(
        t(spec["outcome"]),
        torch.tensor(spec["prompt_group"]),
        t(spec["ig"]),
        torch.tensor(spec["ig_mask"]),
        torch.tensor([[0, 1, 2, -1], [0, 1, -1, -1], [0, 1, 2, -1]]),
    )
    turn_outcome = out.outcome_advantages.unsqueeze(1).expand(-1, 3)
    torch.testing.assert_close(out.turn_advantages[out.turn_valid], turn_outcome[out.turn_valid])
    assert (out.turn_clip_scale == 1).all()


@HYPOTHESIS
@given(params=batch_params, mode=st.sampled_from(A.INFO_GAIN_NORM_MODES))
def test_bf16_inputs_close_to_fp32(params, mode):
    x32 = as_tensors(build(params), torch.float32)
    # quantize to bf16 first so that both runs see the same numbers
    x16 = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in x32.items()}
    xq = {k: (v.float() if v.is_floating_point() else v) for k, v in x16.items()}
    low = A.compute_a2tgpo_advantages(**x16, info_gain_norm_mode=mode)
    high = A.compute_a2tgpo_advantages(**xq, info_gain_norm_mode=mode)
    assert low.advantages.dtype == torch.bfloat16
    # only the final cast to bf16 differs (relative 2^-8)
    torch.testing.assert_close(low.advantages.float(), high.advantages, rtol=8e-3, atol=8e-3)
    torch.testing.assert_close(low.clip_scale.float(), high.clip_scale, rtol=8e-3, atol=8e-3)


def test_telemetry_keys_and_values():
    out = A.compute_a2tgpo_advantages(
        t([1.0, 0.0]),
        torch.tensor([3, 3]),
        t(HAND_IG),
        torch.tensor(HAND_MASK),
        torch.tensor(HAND_TURN_IDS),
        gamma=0.5,
        norm_adv_by_std=False,
    )
    tel = out.telemetry
    assert {
        "ig_mean",
        "ig_std",
        "clip_scale_mean",
        "clip_scale_std",
        "clip_scale_min",
        "clip_scale_max",
        "clip_scale_frac_low",
        "clip_scale_frac_high",
    } <= set(tel)
    assert all(v.dim() == 0 for v in tel.values())
    # raw IG over valid turns: {0.5, 0.1, 0.3} -> mean 0.3, biased std sqrt(0.08/3)
    assert tel["ig_mean"].item() == pytest.approx(0.3)
    assert tel["ig_std"].item() == pytest.approx(math.sqrt(0.08 / 3))
    # valid turn scales: {1 + d, 1, 1, 1 - d, 1} -> mean 1, min 1 - d, max 1 + d
    d = 0.3 * math.tanh(0.05)
    assert tel["clip_scale_mean"].item() == pytest.approx(1.0)
    assert tel["clip_scale_min"].item() == pytest.approx(1 - d)
    assert tel["clip_scale_max"].item() == pytest.approx(1 + d)
    assert tel["clip_scale_frac_low"].item() == 0.0 and tel["clip_scale_frac_high"].item() == 0.0


def test_registered_estimators():
    assert registry.get_advantage_estimator("a2tgpo") is A.compute_a2tgpo_advantages
    tg = registry.get_advantage_estimator("a2tgpo_turn_group")
    args = (t([1.0, 0.0]), torch.tensor([3, 3]), t(HAND_IG), torch.tensor(HAND_MASK), torch.tensor(HAND_TURN_IDS))
    out = tg(*args, gamma=0.5, norm_adv_by_std=False)
    torch.testing.assert_close(out.turn_advantages, t(HAND_CASES["turn-group"][0]), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="turn-group-v1d"):
        A.compute_a2tgpo_advantages(*args, info_gain_norm_mode="bogus")


def test_ig_mask_must_be_left_aligned():
    with pytest.raises(ValueError, match="left-aligned"):
        A.compute_a2tgpo_advantages(
            t([1.0]), torch.tensor([0]), t([[0.1, 0.2]]), torch.tensor([[False, True]]), torch.tensor([[0, 1]])
        )


@pytest.mark.parametrize("mode", A.INFO_GAIN_NORM_MODES)
def test_tokens_of_no_turn_and_masked_tokens_are_outside_every_turn(mode):
    # T = 2; row 0 has one IG turn (outcome turn 1), row 1 two (outcome turn 2). -1 belongs to
    # no turn: advantage 0, scale 1. int32 ids and a 0/1 float response mask are accepted;
    # the masked-out token (last column) is outside every turn too.
    ids = [[-1, 0, 0, 1, 1, -1, -1, -1, 0], [-1, 0, 1, 1, 2, -1, 2, -1, 1]]
    mask = [[1.0] * 8 + [0.0], [1.0] * 8 + [0.0]]
    outcome, groups, ig, ig_mask = [1.0, 0.0], [7, 7], [[0.4, 0.0], [0.1, 0.3]], [[True, False], [True, True]]
    out = A.compute_a2tgpo_advantages(
        t(outcome),
        torch.tensor(groups),
        t(ig),
        torch.tensor(ig_mask),
        torch.tensor(ids, dtype=torch.int32),
        t(mask),
        info_gain_norm_mode=mode,
        dynamic_clip=True,
    )
    expected = ref.a2tgpo(
        outcome, groups, ig, ig_mask, ids, [[m > 0 for m in row] for row in mask], mode=mode, dynamic_clip=True
    )
    torch.testing.assert_close(out.advantages, t(expected["advantages"]), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out.clip_scale, t(expected["clip_scale"]), rtol=1e-12, atol=1e-12)
    outside = torch.tensor([[1, 0, 0, 0, 0, 1, 1, 1, 1], [1, 0, 0, 0, 0, 1, 0, 1, 1]], dtype=torch.bool)
    assert (out.advantages[outside] == 0).all() and (out.clip_scale[outside] == 1).all()
    # the in-turn tokens do carry their turn's values (this batch has no zero advantage)
    assert (out.advantages[~outside] != 0).all()
    assert out.advantages[0, 1] == out.turn_advantages[0, 0] and out.advantages[0, 3] == out.turn_advantages[0, 1]


def _turn_id_case(ids, mask=None, ig_mask=((True, False), (True, True))):
    """Two trajectories (one IG turn, two IG turns; T = 2) with the given token turn ids."""
    return A.compute_a2tgpo_advantages(
        t([1.0, 0.0]),
        torch.tensor([7, 7]),
        t([[0.4, 0.0], [0.1, 0.3]]),
        torch.tensor(ig_mask),
        torch.tensor(ids),
        None if mask is None else t(mask),
    )


GOOD_IDS = [[-1, 0, 0, 1, 1, -1], [-1, 0, 1, 1, 2, -1]]


def test_one_based_turn_ids_are_refused_naming_the_token_and_the_rule():
    one_based = [[-1, 1, 1, 2, 2, -1], [-1, 1, 2, 2, 3, -1]]
    with pytest.raises(ValueError, match=r"turn_ids\[0, 3\] = 2 is past row 0's outcome turn n_b = 1 .*0-based"):
        _turn_id_case(one_based)
    _turn_id_case(GOOD_IDS)  # the same batch, 0-based: fine


def test_an_outcome_turn_with_no_token_is_refused():
    # row 1 has two IG turns (0, 1) but its final answer carries no id 2
    with pytest.raises(ValueError, match=r"row 1: no token carries its outcome turn id n_b = 2"):
        _turn_id_case([[-1, 0, 0, 1, 1, -1], [-1, 0, 1, 1, -1, -1]])


def test_ids_below_minus_one_are_refused():
    with pytest.raises(ValueError, match=r"turn_ids\[1, 0\] = -2 is below -1"):
        _turn_id_case([[-1, 0, 0, 1, 1, -1], [-2, 0, 1, 1, 2, -1]])


def test_a_padding_row_with_no_turn_at_all_is_fine():
    out = _turn_id_case([[-1, 0, 0, 1, 1, -1], [-1] * 6], ig_mask=((True, False), (False, False)))
    assert (out.advantages[1] == 0).all()


def test_mask_and_turn_ids_of_different_shapes_name_both_shapes():
    with pytest.raises(ValueError, match=r"response_mask \(2, 5\) and turn_ids \(2, 6\) must have the same"):
        _turn_id_case(GOOD_IDS, mask=[[1.0] * 5, [1.0] * 5])


@pytest.mark.parametrize("mode", A.INFO_GAIN_NORM_MODES)
@pytest.mark.parametrize("garbage", [float("nan"), float("inf"), -1e30])
def test_values_under_the_ig_mask_are_ignored(mode, garbage):
    batch = build(
        dict(seed=11, num_prompts=3, group_size=4, max_turns=4, tokens_per_turn=3, zero_ig=False, empty_row_prob=0.0)
    )
    clean = as_tensors(batch)
    dirty = dict(clean, ig=clean["ig"].masked_fill(~clean["ig_mask"], garbage).requires_grad_(True))
    assert not clean["ig_mask"].all()  # the batch does have masked turns
    a = A.compute_a2tgpo_advantages(**clean, info_gain_norm_mode=mode)
    b = A.compute_a2tgpo_advantages(**dirty, info_gain_norm_mode=mode)
    for name in ("advantages", "clip_scale", "turn_advantages", "turn_clip_scale", "normed_ig", "outcome_advantages"):
        torch.testing.assert_close(getattr(b, name), getattr(a, name), rtol=0, atol=0, msg=name)
    assert a.telemetry.keys() == b.telemetry.keys()
    for key in a.telemetry:
        torch.testing.assert_close(b.telemetry[key], a.telemetry[key], rtol=0, atol=0, msg=key)
    (b.advantages.sum() + b.clip_scale.sum()).backward()
    assert torch.isfinite(dirty["ig"].grad).all()
    assert (dirty["ig"].grad[~clean["ig_mask"]] == 0).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    from trainer_hooks.losses.ppo import a2tgpo_policy_loss

    x = as_tensors(
        build(
            dict(seed=3, num_prompts=3, group_size=4, max_turns=4, tokens_per_turn=3, zero_ig=False, empty_row_prob=0.0)
        ),
        torch.float32,
    )
    cpu = A.compute_a2tgpo_advantages(**x)
    gpu = A.compute_a2tgpo_advantages(**{k: v.cuda() for k, v in x.items()})
    torch.testing.assert_close(gpu.advantages.cpu(), cpu.advantages)
    torch.testing.assert_close(gpu.clip_scale.cpu(), cpu.clip_scale)
    lp = -torch.rand(x["turn_ids"].shape)
    old = lp + 0.1 * torch.randn(lp.shape)
    args = (old, lp, cpu.advantages, x["response_mask"])
    l_cpu, t_cpu = a2tgpo_policy_loss(*args, clip_scale=cpu.clip_scale, turn_ids=x["turn_ids"])
    l_gpu, t_gpu = a2tgpo_policy_loss(
        *(a.cuda() for a in args), clip_scale=gpu.clip_scale, turn_ids=x["turn_ids"].cuda()
    )
    torch.testing.assert_close(l_gpu.cpu(), l_cpu)
    for key, value in t_cpu.items():
        torch.testing.assert_close(t_gpu[key].cpu(), value, msg=key)
