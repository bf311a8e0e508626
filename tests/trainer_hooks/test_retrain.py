"""retrain's advantage pipeline: hand-worked numbers, the loop reference, and properties."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer_hooks import registry
from trainer_hooks.advantages import retrain as R

try:  # tests/trainer_hooks may or may not be a package
    from . import retrain_loop_reference as ref
except ImportError:  # pragma: no cover - depends on the rootdir layout
    import retrain_loop_reference as ref

HYPOTHESIS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def t(values, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype)


# ---------------------------------------------------------------------------------------
# Episode-level advantages
# ---------------------------------------------------------------------------------------


def test_retrain_grpo_centers_rewards_within_each_group():
    # group 0: mean 0.5 -> +-0.5; group 5: all 1 -> skipped (0); group 9: singleton -> r - r = 0
    rewards = t([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.5])
    groups = torch.tensor([0, 0, 0, 0, 5, 5, 9])
    adv = R.retrain_grpo_advantages(rewards, groups)
    torch.testing.assert_close(adv, t([0.5, -0.5, -0.5, 0.5, 0.0, 0.0, 0.0]))
    torch.testing.assert_close(R.grpo_advantages(rewards, groups, compat="retrain"), adv)


def test_grpo_is_verls_by_default_and_a_single_completion_keeps_its_score():
    # verl: group 0 / (unbiased std sqrt(1/3) + 1e-6); all-equal group 0; a group of one has
    # mean 0 and std 1 (compute_grpo_outcome_advantage), so A = 0.5 / (1 + 1e-6).
    rewards = t([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.5])
    groups = torch.tensor([0, 0, 0, 0, 5, 5, 9])
    a = 0.5 / (math.sqrt(1.0 / 3.0) + 1e-6)
    expected = t([a, -a, -a, a, 0.0, 0.0, 0.5 / (1.0 + 1e-6)])
    torch.testing.assert_close(R.grpo_advantages(rewards, groups), expected)
    torch.testing.assert_close(R.grpo_advantages(rewards, groups, compat="verl"), expected)
    # norm_adv_by_std_in_grpo=False: centred, the single completion's score as it is
    centred = R.grpo_advantages(rewards, groups, normalize_by_std=False)
    torch.testing.assert_close(centred, t([0.5, -0.5, -0.5, 0.5, 0.0, 0.0, 0.5]))
    # rollout.n = 1: every advantage is the score (retrain's rule would make them all 0)
    one_each = R.grpo_advantages(t([0.25, 1.0]), torch.tensor([0, 1]))
    torch.testing.assert_close(one_each, t([0.25, 1.0]) / (1.0 + 1e-6))
    assert torch.equal(R.grpo_advantages(t([0.25, 1.0]), torch.tensor([0, 1]), single_completion="zero"), t([0.0, 0.0]))


def test_grpo_option_errors_name_the_option():
    with pytest.raises(ValueError, match="single_completion"):
        R.grpo_advantages(t([1.0]), torch.tensor([0]), single_completion="mean")
    with pytest.raises(ValueError, match="compat='areal'"):
        R.grpo_advantages(t([1.0]), torch.tensor([0]), compat="areal")
    with pytest.raises(ValueError, match=r"must both be \[B\]"):
        R.grpo_advantages(t([[1.0, 0.0]]), torch.tensor([0]))


def test_grpo_std_normalization_divides_by_unbiased_group_std():
    # [1, 0, 0, 1]: mean 0.5, unbiased var = 4 * 0.25 / 3 = 1/3, std = 0.5773503
    # A = 0.5 / (0.5773503 + 1e-6) = 0.8660239
    rewards = t([1.0, 0.0, 0.0, 1.0])
    adv = R.retrain_grpo_advantages(rewards, torch.zeros(4, dtype=torch.long), normalize_by_std=True)
    expected = 0.5 / (math.sqrt(1.0 / 3.0 + 1e-8) + 1e-6)  # retrain's var_eps 1e-8 inside the sqrt
    torch.testing.assert_close(adv, t([expected, -expected, -expected, expected]))


def test_retrain_grpo_std_default_is_off_and_the_two_settings_differ():
    rewards = t([1.0, 0.0, 0.0, 0.0])
    groups = torch.zeros(4, dtype=torch.long)
    centered = R.retrain_grpo_advantages(rewards, groups)
    normalized = R.retrain_grpo_advantages(rewards, groups, normalize_by_std=True)
    # mean 0.25: centered [0.75, -0.25, ...]; std = sqrt((0.5625 + 3 * 0.0625) / 3) = 0.5
    torch.testing.assert_close(centered, t([0.75, -0.25, -0.25, -0.25]))
    torch.testing.assert_close(normalized, t([0.75, -0.25, -0.25, -0.25]) / (math.sqrt(0.25 + 1e-8) + 1e-6))


def test_grpo_accepts_arbitrary_unsorted_group_ids():
    rewards = t([3.0, 1.0, 0.0, 2.0])
    groups = torch.tensor([-7, 100, 100, -7])  # {-7: [3, 2] mean 2.5, 100: [1, 0] mean 0.5}
    torch.testing.assert_close(R.retrain_grpo_advantages(rewards, groups), t([0.5, 0.5, -0.5, -0.5]))


def test_grpo_zeroes_constant_groups_exactly_even_with_std_normalization():
    # In float32 the mean of seven 0.3s is off by 3e-8; / (0 + 1e-6) that would be 0.03.
    rewards = torch.full((7,), 0.3, dtype=torch.float32)
    assert (rewards - rewards.sum() / 7).abs().max() > 0
    adv = R.grpo_advantages(rewards, torch.zeros(7, dtype=torch.long), normalize_by_std=True)
    assert torch.equal(adv, torch.zeros(7))


def test_maxrl_divides_by_group_success_rate():
    # [1, 0, 0, 0]: mean 0.25 -> (1 - .25) / .250001 = 2.999988, (0 - .25) / .250001 = -0.999996
    # [0.2, 0.0]: mean 0.1 -> +-0.1 / 0.100001
    rewards = t([1.0, 0.0, 0.0, 0.0, 0.2, 0.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    adv = R.maxrl_advantages(rewards, groups)
    d1, d2 = 0.25 + 1e-6, 0.1 + 1e-6
    torch.testing.assert_close(adv, t([0.75 / d1, -0.25 / d1, -0.25 / d1, -0.25 / d1, 0.1 / d2, -0.1 / d2]))


def test_maxrl_returns_zero_when_group_mean_is_not_positive():
    # all wrong -> 0; mean exactly 0 with signed rewards -> 0 (retrain: mean <= eps)
    rewards = t([0.0, 0.0, -1.0, 1.0])
    adv = R.maxrl_advantages(rewards, torch.tensor([0, 0, 1, 1]))
    assert torch.equal(adv, torch.zeros(4, dtype=torch.float64))


def test_grpo_var_eps_setting():
    # [1, 0]: unbiased var 0.5; var_eps 0 -> 0.5 / sqrt(0.5); var_eps 0.5 -> 0.5 / sqrt(1.0)
    rewards, groups = t([1.0, 0.0]), torch.tensor([0, 0])
    exact = R.grpo_advantages(rewards, groups, normalize_by_std=True, eps=0.0, var_eps=0.0)
    padded = R.grpo_advantages(rewards, groups, normalize_by_std=True, eps=0.0, var_eps=0.5)
    torch.testing.assert_close(exact, t([0.5, -0.5]) / math.sqrt(0.5))
    torch.testing.assert_close(padded, t([0.5, -0.5]))


def test_estimators_reject_float_group_ids():
    with pytest.raises(TypeError):
        R.grpo_advantages(t([1.0, 0.0]), torch.tensor([0.0, 1.0]))


# ---------------------------------------------------------------------------------------
# Uncertainty and token transforms
# ---------------------------------------------------------------------------------------


def test_surprisal_is_negative_logprob_capped_at_50():
    lp = t([-0.5, 0.0, -float("inf"), -60.0])
    torch.testing.assert_close(R.token_uncertainty("surprisal", logprobs=lp), t([0.5, 0.0, 50.0, 50.0]))


def test_predictive_variance_peaks_at_half_probability():
    # p = 0.5 -> 0.25; p = 1 -> 0; p = 0.1 -> 0.09; p = e^-50 -> ~0
    lp = t([math.log(0.5), 0.0, math.log(0.1), -1000.0])
    out = R.token_uncertainty("pred_var", logprobs=lp)
    torch.testing.assert_close(out, t([0.25, 0.0, 0.09, math.exp(-50) * (1 - math.exp(-50))]))


def test_shannon_entropy_needs_the_entropy_tensor():
    with pytest.raises(ValueError, match="entropy"):
        R.token_uncertainty("shannon_entropy", logprobs=t([[-1.0]]))
    torch.testing.assert_close(R.token_uncertainty("entropy", entropy=t([1.5, 70.0])), t([1.5, 50.0]))


def test_entropy_from_logits_of_uniform_distribution_is_log_vocab():
    logits = torch.zeros(2, 3, 8, dtype=torch.bfloat16)
    out = R.entropy_from_logits(logits)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.full((2, 3), math.log(8.0)))


def test_entropy_of_a_distribution_with_impossible_tokens_is_finite_with_finite_gradient():
    # logits [0, 0, -inf, -inf]: p = [.5, .5, 0, 0]; retrain sums -p log p over p > 0 only,
    # so H = log 2 (0 * log 0 counts 0, as torch.special.entr); before: 0 * -inf = NaN.
    ninf = float("-inf")
    logits = torch.tensor([[[0.0, 0.0, ninf, ninf], [1.0, ninf, ninf, ninf]]], dtype=torch.float64, requires_grad=True)
    out = R.entropy_from_logits(logits)
    torch.testing.assert_close(out, torch.tensor([[math.log(2.0), 0.0]], dtype=torch.float64))
    out.sum().backward()
    assert torch.isfinite(logits.grad).all()
    # the pipeline's shannon_entropy uncertainty takes it as it is
    torch.testing.assert_close(R.token_uncertainty("shannon_entropy", entropy=out.detach()), out.detach())


def test_unknown_uncertainty_kind_is_rejected():
    with pytest.raises(ValueError, match="unknown uncertainty_kind"):
        R.canonical_uncertainty_kind("varentropy_typo")


def test_gtpo_scales_advantage_by_relative_uncertainty():
    # A = 2, H = [1, 2, 3], mean 2: w = 1 + 0.1 (H / 2 - 1) = [0.95, 1.0, 1.05] -> [1.9, 2, 2.1]
    # row 2: beta 0.1, H = [0, 4], mean 2: w = [0.9, 1.1], A = -1 -> [-0.9, -1.1]
    adv = t([2.0, -1.0])
    h = t([[1.0, 2.0, 3.0], [0.0, 4.0, 99.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    out = R.gtpo_weighting(adv, h, mask, beta=0.1)
    torch.testing.assert_close(out, t([[1.9, 2.0, 2.1], [-0.9, -1.1, 0.0]]), atol=1e-7, rtol=1e-7)


def test_gtpo_weight_is_floored_at_zero():
    # beta 2, H = [0, 4], mean 2: w = max(0, 1 + 2 (0 - 1)) = 0 and 1 + 2 (2 - 1) = 3
    out = R.gtpo_weighting(t([2.0]), t([[0.0, 4.0]]), torch.ones(1, 2, dtype=torch.bool), beta=2.0)
    torch.testing.assert_close(out, t([[0.0, 6.0]]), atol=1e-7, rtol=1e-7)


def test_gtpo_is_uniform_for_zero_beta_or_zero_mean_uncertainty():
    mask = torch.ones(2, 2, dtype=torch.bool)
    out = R.gtpo_weighting(t([3.0, 3.0]), t([[0.0, 0.0], [1.0, 5.0]]), mask, beta=0.0)
    torch.testing.assert_close(out, torch.full((2, 2), 3.0, dtype=torch.float64))
    out = R.gtpo_weighting(t([3.0]), t([[0.0, 0.0]]), mask[:1], beta=0.5)
    torch.testing.assert_close(out, t([[3.0, 3.0]]))
    # mean 2e-8 < 1e-7 still counts as "no uncertainty" (else w would be [0.75, 1.25])
    out = R.gtpo_weighting(t([3.0]), t([[1e-8, 3e-8]]), mask[:1], beta=0.5)
    torch.testing.assert_close(out, t([[3.0, 3.0]]))


def test_hicra_amplifies_planning_tokens_preserving_sign():
    # 1 + 0.2 * 1 = 1.2; -2 + 0.2 * 2 = -1.6; 0 stays 0; execution token unchanged
    out = R.hicra_amplify(t([[1.0, -2.0, 0.0, 5.0]]), torch.tensor([[True, True, True, False]]), alpha=0.2)
    torch.testing.assert_close(out, t([[1.2, -1.6, 0.0, 5.0]]))


def test_sepa_pulls_execution_uncertainty_toward_its_mean():
    # execution H = [1, 3, 5], mean 3; lam 0.5 -> [2, 3, 4]; planning 10 untouched
    h = t([[1.0, 3.0, 5.0, 10.0]])
    plan = torch.tensor([[False, False, False, True]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    torch.testing.assert_close(R.sepa_pool(h, plan, mask, lam=0.5), t([[2.0, 3.0, 4.0, 10.0]]))
    torch.testing.assert_close(R.sepa_pool(h, plan, mask, lam=1.0), t([[3.0, 3.0, 3.0, 10.0]]))
    torch.testing.assert_close(R.sepa_pool(h, plan, mask, lam=0.0), h)
    torch.testing.assert_close(R.sepa_pool(h, plan, mask, lam=7.0), t([[3.0, 3.0, 3.0, 10.0]]))  # clamped


def test_sepa_leaves_all_planning_rows_unchanged():
    h = t([[1.0, 3.0]])
    out = R.sepa_pool(h, torch.ones(1, 2, dtype=torch.bool), torch.ones(1, 2, dtype=torch.bool), lam=0.7)
    torch.testing.assert_close(out, h)


# ---------------------------------------------------------------------------------------
# Planning tokens
# ---------------------------------------------------------------------------------------


def test_default_strategic_grams_are_retrains_eighteen():
    assert len(R.DEFAULT_STRATEGIC_GRAMS) == 18
    assert R.DEFAULT_STRATEGIC_GRAMS[0] == "wait let me"
    assert "the key insight" in R.DEFAULT_STRATEGIC_GRAMS


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('["wait let me", "let me think"]', ("wait let me", "let me think")),
        ("wait let me, let me think ,the key insight", ("wait let me", "let me think", "the key insight")),
        ("", R.DEFAULT_STRATEGIC_GRAMS),
        (None, R.DEFAULT_STRATEGIC_GRAMS),
        (["notice that"], ("notice that",)),
    ],
)
def test_parse_strategic_grams_accepts_retrains_config_forms(value, expected):
    assert R.parse_strategic_grams(value) == expected


def test_planning_ids_marks_every_token_of_each_matched_gram():
    # grams [1 2 3] and [3 4]; row 0: 1 2 3 4 5 -> [1 2 3] at 0, [3 4] at 2 -> tokens 0..3
    # row 1: 9 1 2 | 3 masked -> the gram may not reach into the masked token -> nothing
    ids = torch.tensor([[1, 2, 3, 4, 5], [9, 1, 2, 3, 0]])
    grams = torch.tensor([[1, 2, 3], [3, 4, -1]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    out = R.planning_mask_from_token_ids(ids, grams, mask)
    assert out.tolist() == [[True, True, True, True, False], [False] * 5]


def test_planning_ids_without_grams_is_all_false():
    out = R.planning_mask_from_token_ids(torch.tensor([[1, 2]]), torch.empty(0, 1, dtype=torch.long))
    assert not out.any()


def test_encode_strategic_grams_builds_one_row_per_distinct_spelling():
    vocab: dict[str, int] = {}

    def encode(text: str) -> list[int]:  # word-level toy tokenizer: " wait" and "wait" differ
        pieces = text.replace(" ", "\n ").split("\n")
        return [vocab.setdefault(p, len(vocab)) for p in pieces if p]

    table = R.encode_strategic_grams(["let me think"], encode)
    # "let me think", " let me think", "Let me think", " Let me think" -> 4 rows of 3 ids
    assert table.shape == (4, 3)
    ids = torch.tensor([encode("so") + encode(" Let me think")])
    assert R.planning_mask_from_token_ids(ids, table).tolist() == [[False, True, True, True]]


def test_planning_strs_matches_across_subword_splits_and_markers():
    tokens = [
        ["Wait", " let", " me", " think", "."],  # capitalised, ordinary spaces
        ["so", "\u2581the", "\u2581key", "\u2581insight", "\u2581is"],  # sentencepiece markers
        ["let me", " che", "ck", " this"],  # "check" split over two tokens
        ["no", "tice", "  that", "\n"],  # word split + a double space
    ]
    out = R.planning_mask_from_token_strs(tokens)
    assert out.tolist() == [
        [True, True, True, True, False],
        [False, True, True, True, False],
        [True, True, True, False, False],
        [True, True, True, False, False],
    ]


def test_planning_strs_respects_word_boundaries_and_completion_boundaries():
    tokens = [
        ["renotice", " that"],  # \b fails before "notice"
        ["notice", " thatch"],  # \b fails after "that"
        ["wait", " let"],  # gram continues in the next completion: must not match
        [" me", " now"],
    ]
    out = R.planning_mask_from_token_strs(tokens, ["notice that", "wait let me"])
    assert not out.any()


def test_planning_strs_handles_apostrophe_variants_and_custom_length():
    tokens = [["That\u2019s", " not", " right"]]
    out = R.planning_mask_from_token_strs(tokens, length=5)
    assert out.tolist() == [[True, True, True, False, False]]


def test_planning_strs_retrain_window_marks_from_the_window_start_and_misses_split_words():
    # retrain's identify_planning_tokens (max_window 5): from start 0 the window
    # "so wait let me" matches at token 3, so tokens 0..3 are marked, "so" included;
    # "wa" + "it" is "wa it" after its strip-and-join, which no gram matches.
    tokens = [["so", " wait", " let", " me", " see"], ["wa", "it", " let", " me"]]
    ours = R.planning_mask_from_token_strs(tokens)
    assert ours.tolist() == [[False, True, True, True, False], [True, True, True, True, False]]
    expected = [[True, True, True, True, False], [False, False, False, False, False]]
    assert R.planning_mask_from_token_strs(tokens, window=5).tolist() == expected
    assert R.planning_mask_from_token_strs(tokens, compat="retrain").tolist() == expected
    # the window bounds how far back a match reaches: 7 tokens before the gram, window 5
    far = [["a", " b", " c", " d", " e", " f", " g", " let", " me", " check"]]
    assert R.planning_mask_from_token_strs(far, window=5).tolist() == [[False] * 5 + [True] * 5]
    with pytest.raises(ValueError, match="window must be >= 1"):
        R.planning_mask_from_token_strs(tokens, window=0)


# ---------------------------------------------------------------------------------------
# SEPA schedule
# ---------------------------------------------------------------------------------------


def test_sepa_linear_ramp_after_delay():
    c = R.SEPAController(steps=100, delay_steps=10, correct_rate_gate=0.0)
    # (step - 10) / 100 clamped to [0, 1]
    assert [c.resolve_lambda(s) for s in (0, 10, 60, 110, 500)] == [0.0, 0.0, 0.5, 1.0, 1.0]


def test_sepa_defaults_follow_retrains_trainer_config():
    c = R.SEPAController()
    assert (c.steps, c.delay_steps, c.correct_rate_gate) == (500, 50, 0.1)
    assert c.resolve_lambda(300) == 0.0  # gate closed until a batch reaches 10% correct
    c.observe_rewards(torch.tensor([1.0, 0.0, 0.0, 0.0]))  # 25% correct
    assert c.resolve_lambda(300) == pytest.approx(0.5)  # (300 - 50) / 500


def test_sepa_controller_zero_defaults_disable_pooling():
    # retrain's SEPAController() constructor defaults: steps 0, delay 0, gate 0
    c = R.SEPAController(steps=0, delay_steps=0, correct_rate_gate=0.0)
    assert c.gate_open
    assert c.resolve_lambda(10_000) == 0.0


def test_sepa_gate_is_sticky_once_open():
    c = R.SEPAController(steps=10, delay_steps=0, correct_rate_gate=0.5)
    c.observe_correct_rate(0.4)
    assert c.resolve_lambda(5) == 0.0
    c.observe_correct_rate(0.5)
    c.observe_correct_rate(0.0)
    assert c.resolve_lambda(5) == 0.5
    c.observe_correct_rate(float("nan"))
    assert c.gate_open


def test_sepa_auto_schedule_grows_as_execution_variance_collapses():
    c = R.SEPAController(steps=0, delay_steps=0, correct_rate_gate=0.0, schedule="auto", ema_decay=0.0, warmup=1)
    c.update_auto_state(1.0)  # var_0 = 1
    assert c.resolve_lambda(0) == 0.0  # ratio 1 / threshold 0.2 -> capped 1 -> lambda 0
    c.update_auto_state(0.1)  # ratio 0.1 -> 0.1 / 0.2 = 0.5 -> lambda 0.5
    assert c.resolve_lambda(0) == pytest.approx(0.5)
    restored = R.SEPAController(steps=0, delay_steps=0, correct_rate_gate=0.0, schedule="auto", warmup=1)
    restored.load_state_dict(c.state_dict())
    assert restored.resolve_lambda(0) == pytest.approx(0.5)


def test_sepa_controller_validates_arguments():
    with pytest.raises(ValueError):
        R.SEPAController(schedule="cosine")
    with pytest.raises(ValueError):
        R.SEPAController(correct_rate_gate=1.5)


# ---------------------------------------------------------------------------------------
# The pipeline
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("none", set()),
        ("gtpo", {"gtpo"}),
        ("gtpo_hicra", {"gtpo", "hicra"}),
        ("gtpo_sepa", {"gtpo", "sepa"}),
        ("hicra+gtpo+sepa", {"gtpo", "hicra", "sepa"}),
        ("hicra", {"hicra"}),
        ("gtpo_sepa_amp", {"gtpo", "sepa_amp"}),
        ("gtpo_sepa_amp_c", {"gtpo", "sepa_amp_c"}),
        ("gtpo_sepa_amp_hicra", {"gtpo", "sepa_amp", "hicra"}),
    ],
)
def test_parse_transform_mode(mode, expected):
    assert R.parse_transform_mode(mode) == expected


@pytest.mark.parametrize("mode", ["sepa", "gtpo_bogus", "gtpo_amp", "sepa_amp", "gtpo_sepa_sepa_amp"])
def test_parse_transform_mode_rejects_invalid_modes(mode):
    with pytest.raises(ValueError):
        R.parse_transform_mode(mode)


def test_sepa_amplification_pushes_execution_uncertainty_away_from_its_mean():
    # retrain's apply_sepa_amplification: exec tokens (1 + lam) h - lam * mean_exec.
    # h = [1, 2, 3 | planning 6], lam 0.5, exec mean 2 -> [0.5, 2, 3.5, 6]
    h = t([[1.0, 2.0, 3.0, 6.0, 9.0]])
    plan = torch.tensor([[False, False, False, True, False]])
    mask = torch.tensor([[True, True, True, True, False]])
    torch.testing.assert_close(R.sepa_amplify(h, plan, mask, lam=0.5), t([[0.5, 2.0, 3.5, 6.0, 0.0]]))
    # lam 1: 2h - 2 = [0, 2, 4]; clamped variant floors the negative one
    low = t([[0.2, 2.0, 3.8, 6.0, 0.0]])
    torch.testing.assert_close(R.sepa_amplify(low, plan, mask, lam=1.0), t([[-1.6, 2.0, 5.6, 6.0, 0.0]]))
    torch.testing.assert_close(R.sepa_amplify_clamped(low, plan, mask, lam=1.0), t([[0.0, 2.0, 5.6, 6.0, 0.0]]))
    assert registry.get_advantage_transform("sepa_amp") is R.sepa_amplify


@pytest.mark.parametrize("mode, transform", [("gtpo_sepa_amp", "sepa_amp"), ("gtpo_sepa_amp_c", "sepa_amp_c")])
def test_compose_runs_retrains_sepa_amplification_modes(mode, transform):
    rewards, groups = t([1.0, 0.0, 0.0, 1.0]), torch.tensor([0, 0, 0, 0])
    logprobs = -t([[0.1, 2.0, 0.5], [1.0, 0.01, 3.0], [0.2, 0.2, 0.2], [4.0, 0.3, 0.1]])
    mask = torch.ones(4, 3, dtype=torch.bool)
    plan = torch.tensor([[True, False, False]] * 4)
    out = R.compose_advantages(
        rewards, groups, mask, config={"transform_mode": mode}, logprobs=logprobs, planning_mask=plan, sepa_lambda=0.8
    )
    h = R.token_uncertainty("surprisal", logprobs=logprobs)
    shaped = registry.get_advantage_transform(transform)(h, plan, mask, lam=0.8)
    expected = R.gtpo_weighting(R.retrain_grpo_advantages(rewards, groups), shaped, mask)
    torch.testing.assert_close(out.token_advantages, expected)
    assert out.telemetry["sepa_lambda"].item() == pytest.approx(0.8)


def test_compose_maxrl_gtpo_hicra_by_hand():
    # group [1, 0]: mean 0.5 -> MaxRL A = +-0.5 / 0.500001 = +-0.999998
    # completion 0: H = -lp = [1, 3], mean 2 -> w = [0.95, 1.05]; token 1 planning -> * 1.2
    # completion 1: H = [2, 2] -> w = [1, 1]; token 0 planning: -a + 0.2 a = -0.8 a
    a = 0.5 / (0.5 + 1e-6)
    out = R.compose_advantages(
        t([1.0, 0.0]),
        torch.tensor([3, 3]),
        torch.ones(2, 2, dtype=torch.bool),
        config={"advantage_mode": "maxrl", "transform_mode": "gtpo_hicra"},
        logprobs=t([[-1.0, -3.0], [-2.0, -2.0]]),
        planning_mask=torch.tensor([[False, True], [True, False]]),
    )
    w0 = 1 + 0.1 * (1 / (2 + 1e-8) - 1)
    w1 = 1 + 0.1 * (3 / (2 + 1e-8) - 1)
    expected = t([[a * w0, a * w1 * 1.2], [-a * 0.8, -a]])
    torch.testing.assert_close(out.token_advantages, expected)
    torch.testing.assert_close(out.episode_advantages, t([a, -a]))


def test_compose_sepa_then_gtpo_flattens_execution_weights():
    # lam 1: execution H all become their mean -> GTPO weights on execution tokens equal
    out = R.compose_advantages(
        t([1.0, 0.0]),
        torch.tensor([0, 0]),
        torch.ones(2, 3, dtype=torch.bool),
        config={"transform_mode": "gtpo_sepa"},
        logprobs=t([[-1.0, -3.0, -5.0], [-1.0, -1.0, -1.0]]),
        planning_mask=torch.tensor([[False, False, True], [False, False, False]]),
        sepa_lambda=1.0,
    )
    # completion 0: pooled H = [2, 2, 5], mean 3: w_exec = 1 + 0.1 (2/3 - 1), w_plan = 1 + 0.1 (5/3 - 1)
    w_exec = 1 + 0.1 * (2 / (3 + 1e-8) - 1)
    w_plan = 1 + 0.1 * (5 / (3 + 1e-8) - 1)
    torch.testing.assert_close(out.token_advantages[0], t([0.5 * w_exec, 0.5 * w_exec, 0.5 * w_plan]))
    assert out.telemetry["sepa_lambda"].item() == 1.0
    assert out.telemetry["uncertainty_exec_var_post"] < out.telemetry["uncertainty_exec_var"]


def test_compose_skips_uninformative_groups_and_counts_them():
    # retrain's rule: a single completion is not uniform (kept), two or more tied are
    rewards = t([1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.7])
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 3])
    mask = torch.ones(7, 2, dtype=torch.bool)
    out = R.compose_advantages(rewards, groups, mask)
    assert out.informative.tolist() == [False, False, False, False, True, True, True]
    assert out.loss_mask.sum().item() == 6
    tel = out.telemetry
    assert tel["groups"].item() == 4
    assert tel["groups_informative"].item() == 2
    assert tel["groups_skipped_all_correct"].item() == 1  # the all-1 group
    assert tel["groups_skipped_all_wrong"].item() == 1
    assert tel["correct_rate"].item() == pytest.approx(4 / 7)
    assert all(v.dim() == 0 for v in tel.values())
    # the earlier rule, one argument away: singletons count as uniform too
    strict = R.compose_advantages(rewards, groups, mask, config={"single_completion_uniform": True})
    assert strict.informative.tolist() == [False, False, False, False, True, True, False]
    assert strict.telemetry["groups_skipped_all_correct"].item() == 2  # all-1 group and the 0.7 singleton


def test_compose_counts_rewards_tied_within_1e_6_as_uniform():
    # retrain's _summarize_reward_ties: sorted rewards within 1e-6 of the smallest are one bucket
    rewards = t([0.3, 0.3 + 5e-7, 0.3 + 1e-6, 1.0, 1.0 + 2e-6])
    groups = torch.tensor([0, 0, 0, 1, 1])
    mask = torch.ones(5, 1, dtype=torch.bool)
    out = R.compose_advantages(rewards, groups, mask)
    assert out.informative.tolist() == [False, False, False, True, True]
    exact = R.compose_advantages(rewards, groups, mask, config={"uniform_tolerance": 0.0})
    assert exact.informative.tolist() == [True, True, True, True, True]


def test_compose_can_keep_uninformative_tokens_in_the_loss_mask():
    rewards = t([1.0, 1.0, 1.0, 0.0])
    groups = torch.tensor([0, 0, 1, 1])
    mask = torch.ones(4, 3, dtype=torch.bool)
    kept = R.compose_advantages(rewards, groups, mask, config={"skip_uninformative": False})
    skipped = R.compose_advantages(rewards, groups, mask)
    assert kept.loss_mask.all()
    assert skipped.loss_mask.sum().item() == 6
    torch.testing.assert_close(kept.token_advantages, skipped.token_advantages)


def test_compose_grpo_std_setting_is_passed_through_advantage_params():
    rewards = t([1.0, 0.0, 0.0, 0.0])
    groups = torch.zeros(4, dtype=torch.long)
    mask = torch.ones(4, 1, dtype=torch.bool)
    plain = R.compose_advantages(rewards, groups, mask)
    scaled = R.compose_advantages(rewards, groups, mask, config={"advantage_params": {"normalize_by_std": True}})
    torch.testing.assert_close(scaled.token_advantages, plain.token_advantages / (math.sqrt(0.25 + 1e-8) + 1e-6))


def test_compose_requires_the_inputs_its_stages_need():
    mask = torch.ones(2, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="planning_mask"):
        R.compose_advantages(t([1.0, 0.0]), torch.tensor([0, 0]), mask, config={"transform_mode": "gtpo_hicra"})
    with pytest.raises(ValueError, match="logprobs"):
        R.compose_advantages(t([1.0, 0.0]), torch.tensor([0, 0]), mask, config={"transform_mode": "gtpo"})
    with pytest.raises(ValueError, match="unknown retrain advantage config"):
        R.compose_advantages(t([1.0, 0.0]), torch.tensor([0, 0]), mask, config={"gtpo_betta": 0.1})


def test_compose_grpo_is_retrains_and_verls_is_one_parameter_away():
    rewards = t([1.0, 0.0, 0.0, 0.0, 0.7])
    groups = torch.tensor([0, 0, 0, 0, 1])
    mask = torch.ones(5, 1, dtype=torch.bool)
    plain = R.compose_advantages(rewards, groups, mask)
    torch.testing.assert_close(plain.episode_advantages, R.retrain_grpo_advantages(rewards, groups))
    verl = R.compose_advantages(rewards, groups, mask, config={"advantage_params": {"compat": "verl"}})
    torch.testing.assert_close(verl.episode_advantages, R.grpo_advantages(rewards, groups))
    assert verl.episode_advantages[4].item() == pytest.approx(0.7 / (1 + 1e-6))


def test_token_shapes_are_checked_not_broadcast():
    square = torch.ones(3, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"hicra_amplify: token_advantages must be \[B, L\], got \(3,\)"):
        R.hicra_amplify(t([1.0, 2.0, 3.0]), square)
    with pytest.raises(ValueError, match=r"gtpo_weighting: advantages must be \[B, L\] = \(3, 3\), got \(2,\)"):
        R.gtpo_weighting(t([1.0, 2.0]), t([[1.0] * 3] * 3), square)
    with pytest.raises(ValueError, match=r"compose_advantages: logprobs \(3, 2\) must match response_mask \(3, 3\)"):
        R.compose_advantages(
            t([1.0, 0.0, 1.0]),
            torch.tensor([0, 0, 0]),
            square,
            config={"transform_mode": "gtpo"},
            logprobs=t([[-1.0] * 2] * 3),
        )


def test_registry_serves_the_builtin_estimators_and_transforms():
    assert registry.get_advantage_estimator("grpo") is R.grpo_advantages
    assert registry.get_advantage_estimator("retrain_grpo") is R.retrain_grpo_advantages
    assert registry.get_advantage_estimator("maxrl") is R.maxrl_advantages
    assert registry.get_advantage_transform("gtpo") is R.gtpo_weighting
    assert registry.get_advantage_transform("hicra") is R.hicra_amplify
    assert registry.get_advantage_transform("sepa") is R.sepa_pool


def test_compose_accepts_a_dotted_path_estimator():
    out = R.compose_advantages(
        t([1.0, 0.0]),
        torch.tensor([0, 0]),
        torch.ones(2, 1, dtype=torch.bool),
        config={"advantage_mode": "trainer_hooks.advantages.retrain:maxrl_advantages"},
    )
    a = 0.5 / (0.5 + 1e-6)
    torch.testing.assert_close(out.token_advantages, t([[a], [-a]]))


# ---------------------------------------------------------------------------------------
# Against the loop reference on random ragged batches
# ---------------------------------------------------------------------------------------

REWARDS = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 0.1, 0.9])


@st.composite
def ragged_batches(draw):
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
    group_ids, rewards, logprobs, planning, entropy = [], [], [], [], []
    for gid, size in enumerate(sizes):
        gid = draw(st.integers(-3, 40)) * 100 + gid  # arbitrary, unsorted ids
        for _ in range(size):
            length = draw(st.integers(0, 6))
            group_ids.append(gid)
            rewards.append(draw(REWARDS))
            logprobs.append(draw(st.lists(st.floats(-8.0, 0.0), min_size=length, max_size=length)))
            planning.append(draw(st.lists(st.booleans(), min_size=length, max_size=length)))
            entropy.append(draw(st.lists(st.floats(0.0, 6.0), min_size=length, max_size=length)))
    return group_ids, rewards, logprobs, planning, entropy


def pad(rows, fill, dtype):
    width = max(1, max(len(r) for r in rows))
    return torch.tensor([list(r) + [fill] * (width - len(r)) for r in rows], dtype=dtype)


COMPOSE_CASES = st.tuples(
    st.sampled_from(["grpo", "maxrl"]),
    st.booleans(),
    st.sampled_from(
        ["none", "gtpo", "gtpo_hicra", "gtpo_sepa", "gtpo_sepa_hicra", "hicra", "gtpo_sepa_amp", "gtpo_sepa_amp_c"]
    ),
    st.sampled_from(["surprisal", "predictive_variance", "shannon_entropy"]),
    st.sampled_from([0.0, 0.1, 0.7]),
    st.sampled_from([0.0, 0.3, 1.0]),
)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@HYPOTHESIS
@given(batch=ragged_batches(), case=COMPOSE_CASES)
def test_compose_matches_loop_reference(dtype, batch, case):
    group_ids, rewards, logprobs, planning, entropy = batch
    mode, by_std, transform, kind, beta, lam = case
    # Padding holds poison: the result may not depend on it.
    lp = pad(logprobs, -float("inf"), dtype)
    ent = pad(entropy, float("nan"), dtype)
    mask = pad([[True] * len(r) for r in logprobs], False, torch.bool)
    plan = pad(planning, True, torch.bool)
    out = R.compose_advantages(
        torch.tensor(rewards, dtype=dtype),
        torch.tensor(group_ids),
        mask,
        config={
            "advantage_mode": mode,
            "advantage_params": {"normalize_by_std": by_std} if mode == "grpo" else {},
            "transform_mode": transform,
            "uncertainty_kind": kind,
            "gtpo_beta": beta,
        },
        logprobs=lp,
        entropy=ent,
        planning_mask=plan,
        sepa_lambda=lam,
    )
    episode, token_advs, informative = ref.compose(
        rewards,
        group_ids,
        logprobs,
        planning,
        advantage_mode=mode,
        normalize_by_std=by_std,
        transform_mode=transform,
        uncertainty_kind=kind,
        gtpo_beta=beta,
        sepa_lambda=lam,
        entropy=entropy,
    )
    tol = dict(atol=1e-6, rtol=1e-6) if dtype == torch.float64 else dict(atol=1e-4, rtol=1e-4)
    assert out.token_advantages.dtype == dtype
    torch.testing.assert_close(out.episode_advantages, torch.tensor(episode, dtype=dtype), **tol)
    torch.testing.assert_close(out.token_advantages, pad(token_advs, 0.0, dtype), **tol)
    assert out.informative.tolist() == informative
    assert torch.isfinite(out.token_advantages).all()
    assert all(torch.isfinite(v).all() for v in out.telemetry.values())


@HYPOTHESIS
@given(
    rows=st.lists(st.lists(st.integers(0, 4), max_size=10), min_size=1, max_size=4),
    grams=st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=3), max_size=4),
)
def test_planning_ids_match_loop_reference(rows, grams):
    ids = pad(rows, 0, torch.long)
    mask = pad([[True] * len(r) for r in rows], False, torch.bool)
    width = max((len(g) for g in grams), default=1)
    table = torch.tensor([g + [-1] * (width - len(g)) for g in grams], dtype=torch.long).reshape(len(grams), width)
    out = R.planning_mask_from_token_ids(ids, table, mask)
    expected = pad([ref.planning_from_ids(r, grams) for r in rows], False, torch.bool)
    assert out.tolist() == expected.tolist()


PIECES = [
    "wait",
    " Wait",
    " let",
    " me",
    "Let",
    " think",
    "\u0120check",
    "\u2581the",
    " key",
    " is",
    "ight",
    " ins",
    "not",
    "ice",
    " that",
    "'s",
    " not",
    " right",
    "\n",
    "  ",
    " ",
    ".",
    "x",
    "ok",
    "\u00e9",
    " double",
    " check",
    "that",
    " doesn",
    "\u2019t",
    " work",
    "",
]


@st.composite
def split_gram(draw):
    """A default gram spelled the way a tokenizer might: random case, marker, splits."""
    gram = draw(st.sampled_from(R.DEFAULT_STRATEGIC_GRAMS))
    if draw(st.booleans()):
        gram = gram[0].upper() + gram[1:]
    gram = draw(st.sampled_from(["", " ", "\u0120", "\u2581", "\n"])) + gram
    gram = gram.replace(" ", draw(st.sampled_from([" ", "  ", "\u2581", " \n"])))
    cuts = sorted(draw(st.sets(st.integers(1, len(gram) - 1), max_size=4)))
    return [gram[a:b] for a, b in zip([0, *cuts], [*cuts, len(gram)])]


ROW_CHUNKS = st.lists(st.one_of(st.lists(st.sampled_from(PIECES), min_size=1, max_size=3), split_gram()), max_size=4)


@HYPOTHESIS
@given(chunked=st.lists(ROW_CHUNKS, min_size=1, max_size=4))
def test_planning_strs_match_loop_reference(chunked):
    rows = [[piece for chunk in chunks for piece in chunk] for chunks in chunked]
    expected = pad([ref.planning_from_strs(r, list(R.DEFAULT_STRATEGIC_GRAMS)) for r in rows], False, torch.bool)
    out = R.planning_mask_from_token_strs(rows, length=expected.shape[1])
    assert out.tolist() == expected.tolist()


# ---------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------


def _full_pipeline(rewards, groups, mask, logprobs, planning, **config):
    cfg = {"advantage_mode": "maxrl", "transform_mode": "gtpo_sepa_hicra"} | config
    return R.compose_advantages(
        rewards, groups, mask, config=cfg, logprobs=logprobs, planning_mask=planning, sepa_lambda=0.5
    )


@pytest.mark.parametrize("mode", ["grpo", "maxrl"])
@pytest.mark.parametrize("by_std", [False, True])
def test_singletons_constant_groups_and_masked_rows_give_finite_zero_and_finite_grads(mode, by_std):
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.5], dtype=torch.float64, requires_grad=True)
    groups = torch.tensor([0, 1, 1, 2, 2, 3])  # singleton, all-wrong, all-correct, singleton
    mask = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1], [0, 0, 0]], dtype=torch.bool)
    logprobs = torch.full((6, 3), -0.7, dtype=torch.float64)
    logprobs[~mask] = -float("inf")
    logprobs.requires_grad_(True)
    params = {"normalize_by_std": by_std} if mode == "grpo" else {}
    out = _full_pipeline(rewards, groups, mask, logprobs, mask.clone(), advantage_mode=mode, advantage_params=params)
    assert torch.equal(out.token_advantages, torch.zeros(6, 3, dtype=torch.float64))
    (out.token_advantages.sum() + sum(out.telemetry.values())).backward()
    assert torch.isfinite(rewards.grad).all() and torch.isfinite(logprobs.grad).all()


def test_gradients_are_finite_with_poisoned_padding():
    torch.manual_seed(0)
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.0], dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0], [1, 1, 0]], dtype=torch.bool)
    logprobs = -torch.rand(4, 3, dtype=torch.float64) * 3
    logprobs = torch.where(mask, logprobs, torch.tensor(float("nan"), dtype=torch.float64)).requires_grad_(True)
    for kind in ("surprisal", "predictive_variance"):
        planning = torch.rand(4, 3) > 0.5
        out = _full_pipeline(rewards, torch.tensor([0, 0, 1, 1]), mask, logprobs, planning, uncertainty_kind=kind)
        grads = torch.autograd.grad(out.token_advantages.sum(), (rewards, logprobs))
        assert all(torch.isfinite(g).all() for g in grads)
        assert torch.equal(grads[1][~mask], torch.zeros_like(grads[1][~mask]))


def test_compose_gradcheck_float64():
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    planning = torch.tensor([[0, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 1]], dtype=torch.bool)
    groups = torch.tensor([0, 0, 1, 1])
    rewards = torch.tensor([0.9, 0.2, 0.4, 0.8], dtype=torch.float64, requires_grad=True)
    logprobs = torch.tensor(
        [[-0.3, -1.2, -2.1], [-0.8, -0.4, 0.0], [-1.7, 0.0, 0.0], [-0.2, -2.5, -0.9]],
        dtype=torch.float64,
        requires_grad=True,
    )

    def fn(r, lp):
        return _full_pipeline(r, groups, mask, lp, planning).token_advantages

    assert torch.autograd.gradcheck(fn, (rewards, logprobs))


def test_bfloat16_inputs_are_close_to_float32():
    torch.manual_seed(1)
    rewards = torch.rand(16).round()
    groups = torch.arange(16) // 4
    mask = torch.rand(16, 32) > 0.2
    logprobs = -torch.rand(16, 32) * 4
    planning = torch.rand(16, 32) > 0.8
    full = _full_pipeline(rewards, groups, mask, logprobs, planning)
    half = _full_pipeline(rewards.bfloat16(), groups, mask, logprobs.bfloat16(), planning)
    assert half.token_advantages.dtype == torch.float32
    torch.testing.assert_close(half.token_advantages, full.token_advantages, atol=2e-2, rtol=2e-2)


def test_padding_contents_do_not_change_the_result():
    torch.manual_seed(2)
    rewards = torch.rand(8).round()
    groups = torch.arange(8) // 2
    mask = torch.rand(8, 10) > 0.3
    planning = torch.rand(8, 10) > 0.7
    lp = -torch.rand(8, 10) * 3
    other = torch.where(mask, lp, torch.randn(8, 10) * 100)
    a = _full_pipeline(rewards, groups, mask, lp, planning)
    b = _full_pipeline(rewards, groups, mask, other, planning)
    torch.testing.assert_close(a.token_advantages, b.token_advantages)
    assert torch.equal(a.token_advantages[~mask], torch.zeros_like(a.token_advantages[~mask]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_pipeline_and_planning_run_on_cuda():
    dev = torch.device("cuda")
    torch.manual_seed(4)
    rewards = torch.rand(8, device=dev).round()
    groups = (torch.arange(8) // 4).to(dev)
    mask = torch.rand(8, 12, device=dev) > 0.2
    ids = torch.randint(0, 5, (8, 12), device=dev)
    planning = R.planning_mask_from_token_ids(ids, torch.tensor([[1, 2], [3, -1]]), mask)
    text_planning = R.planning_mask_from_token_strs([["wait", " let", " me"]], device=dev)
    assert planning.device.type == "cuda" and text_planning.device.type == "cuda"
    logprobs = (-torch.rand(8, 12, device=dev) * 3).bfloat16()
    gpu = _full_pipeline(rewards, groups, mask, logprobs, planning)
    cpu = _full_pipeline(rewards.cpu(), groups.cpu(), mask.cpu(), logprobs.cpu(), planning.cpu())
    assert gpu.token_advantages.device.type == "cuda"
    torch.testing.assert_close(gpu.token_advantages.cpu(), cpu.token_advantages, atol=1e-5, rtol=1e-5)
