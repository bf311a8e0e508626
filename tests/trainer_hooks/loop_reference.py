"""Deliberately plain references for the A²TGPO / PPO / GSPO / allocator code.

One Python loop per sample, per turn, per token, on Python floats and lists — the way the
formulas read in the papers and the released code, with no vectorization tricks, so that
the vectorized implementations in ``trainer_hooks`` can be checked against them (the
property tests) and timed against them (``bench/trainer_hooks.py``).

Inputs are nested lists (``tensor.tolist()``); outputs are nested lists / floats.
"""

from __future__ import annotations

import math
import random

# ---------------------------------------------------------------------------------------
# Random ragged batches (shared by tests and the bench)
# ---------------------------------------------------------------------------------------


def make_ragged_batch(
    rng: random.Random,
    *,
    num_prompts: int,
    group_size: int,
    max_turns: int,
    tokens_per_turn: int,
    gap_tokens: int = 1,
    zero_ig: bool = False,
    empty_row_prob: float = 0.0,
    grid: int | None = 64,
    length: int | None = None,
) -> dict:
    """A random A²TGPO batch as nested lists.

    Each trajectory has ``n_b`` in ``[0, max_turns]`` IG turns and one outcome turn; every
    turn gets 1..``tokens_per_turn`` tokens, separated by ``gap_tokens`` tokens of no
    turn (tool output, id -1); the rest of the row is padding (-1). Returns a dict with
    ``outcome [B]``, ``prompt_group [B]``, ``ig [B][T]``, ``ig_mask [B][T]``,
    ``turn_ids [B][L]``, ``response_mask [B][L]``, ``n_turns [B]``. With ``grid`` the
    random values are multiples of ``1 / grid`` (exact in every float dtype, ties common,
    distinct values never closer than ``1 / grid``); ``grid=None`` gives continuous values.
    ``length`` pads rows to at least that many tokens.
    """

    def draw(lo: float, hi: float) -> float:
        v = rng.uniform(lo, hi)
        return v if grid is None else round(v * grid) / grid

    T = max_turns
    L = max((T + 1) * (tokens_per_turn + gap_tokens) + 1, length or 0)
    prompt_ids = rng.sample(range(1000), num_prompts)
    outcome, prompt_group, ig, ig_mask, turn_ids, response_mask, n_turns = [], [], [], [], [], [], []
    for p in range(num_prompts):
        for _ in range(group_size):
            n = rng.randint(0, T)
            n_turns.append(n)
            prompt_group.append(prompt_ids[p])
            outcome.append(float(rng.choice([0.0, 1.0, draw(0.0, 1.0)])))
            ig.append([0.0 if zero_ig else draw(-1.0, 1.0) for _ in range(T)])
            ig_mask.append([t < n for t in range(T)])
            ids = [-1] * L
            pos = gap_tokens
            for k in range(n + 1):
                for _ in range(rng.randint(1, tokens_per_turn)):
                    ids[pos] = k
                    pos += 1
                pos += gap_tokens
            turn_ids.append(ids)
            empty = rng.random() < empty_row_prob
            response_mask.append([(i >= 0) and not empty for i in ids])
    return dict(
        outcome=outcome,
        prompt_group=prompt_group,
        ig=ig,
        ig_mask=ig_mask,
        turn_ids=turn_ids,
        response_mask=response_mask,
        n_turns=n_turns,
    )


# ---------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------


def agg_loss(loss_mat, mask, mode, loss_scale_factor=None, seq_sum_norm="batch"):
    """verl's modes; fully masked rows are left out of every sequence mean.
    ``seq-mean-token-sum-norm``: "batch" sums the row sums (verl b178a3cd), "rows" averages
    them (verl 0.9.1); both divide by the constant."""
    sums, counts = [], []
    for row_loss, row_mask in zip(loss_mat, mask):
        s, n = 0.0, 0
        for value, m in zip(row_loss, row_mask):
            if m:
                s += value
                n += 1
        sums.append(s)
        counts.append(n)
    if mode == "token-mean":
        total = sum(counts)
        return sum(sums) / total if total else 0.0
    if mode == "token-sum":
        return sum(sums)
    if mode == "seq-mean-token-sum-norm" and seq_sum_norm == "batch":
        return sum(sums) / (len(mask[0]) if loss_scale_factor is None else loss_scale_factor)
    rows = [(s, n) for s, n in zip(sums, counts) if n > 0]
    if not rows:
        return 0.0
    if mode == "seq-mean-token-sum":
        return sum(s for s, _ in rows) / len(rows)
    if mode == "seq-mean-token-mean":
        return sum(s / n for s, n in rows) / len(rows)
    if mode == "seq-mean-token-sum-norm":
        scale = len(mask[0]) if loss_scale_factor is None else loss_scale_factor
        return sum(s for s, _ in rows) / len(rows) / scale
    raise ValueError(mode)


# ---------------------------------------------------------------------------------------
# A²TGPO
# ---------------------------------------------------------------------------------------


def information_gain(gold_logprobs, turn_mask, info_gain_type="prob_diff"):
    out = []
    for row_lp, row_mask in zip(gold_logprobs, turn_mask):
        row = []
        for t, valid in enumerate(row_mask):
            if not valid:
                row.append(0.0)
            elif info_gain_type == "prob_diff":
                row.append(math.exp(row_lp[t + 1]) - math.exp(row_lp[t]))
            else:
                row.append(row_lp[t + 1] - row_lp[t])
        out.append(row)
    return out


def normalize_groups(groups, use_std=True, eps=1e-6, unbiased=False, var_eps=1e-8):
    """``groups``: {group key: [(item key, value), ...]} -> {item key: normalized value}."""
    out = {}
    for members in groups.values():
        values = [v for _, v in members]
        n = len(values)
        if n <= 1 or max(values) == min(values):
            for key, _ in members:
                out[key] = 0.0
            continue
        mean = sum(values) / n
        ss = sum((v - mean) ** 2 for v in values)
        var = ss / (n - 1) if unbiased else ss / n
        std = math.sqrt(var + var_eps)
        for key, v in members:
            out[key] = (v - mean) / (std + eps) if use_std else v - mean
    return out


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def a2tgpo(
    outcome,
    prompt_group,
    ig,
    ig_mask,
    turn_ids,
    response_mask=None,
    *,
    mode="turn-group-v1d",
    gamma=1.0,
    alpha=0.3,
    beta=0.3,
    dynamic_clip=None,
    use_std=True,
    eps=1e-6,
    unbiased=False,
):
    """Returns dict with ``advantages [B][L]``, ``clip_scale [B][L]``, ``turn_adv [B][T+1]``,
    ``turn_scale [B][T+1]``, ``normed_ig [B][T]``, ``outcome_adv [B]``."""
    B, T = len(ig), len(ig[0])
    n_turns = [sum(1 for m in row if m) for row in ig_mask]
    norm = dict(use_std=use_std, eps=eps, unbiased=unbiased)
    normed_ig = [[0.0] * T for _ in range(B)]
    outcome_adv = [0.0] * B

    if mode == "joint":
        groups = {}
        for b in range(B):
            for t in range(n_turns[b]):
                groups.setdefault(prompt_group[b], []).append(((b, t), ig[b][t]))
            groups.setdefault(prompt_group[b], []).append(((b, "outcome"), outcome[b]))
        normed = normalize_groups(groups, **norm)
        for b in range(B):
            outcome_adv[b] = normed[(b, "outcome")]
            for t in range(n_turns[b]):
                normed_ig[b][t] = normed[(b, t)]
    else:
        outcome_groups = {}
        for b in range(B):
            outcome_groups.setdefault(prompt_group[b], []).append((b, outcome[b]))
        normed_outcome = normalize_groups(outcome_groups, **norm)
        ig_groups = {}
        for b in range(B):
            outcome_adv[b] = normed_outcome[b]
            for t in range(n_turns[b]):
                key = prompt_group[b] if mode == "separate" else (prompt_group[b], t)
                ig_groups.setdefault(key, []).append(((b, t), ig[b][t]))
        normed = normalize_groups(ig_groups, **norm)
        for (b, t), value in normed.items():
            normed_ig[b][t] = value

    if dynamic_clip is None:
        dynamic_clip = mode == "turn-group-v1d"
    turn_adv = [[0.0] * (T + 1) for _ in range(B)]
    turn_scale = [[1.0] * (T + 1) for _ in range(B)]
    for b in range(B):
        n = n_turns[b]
        if mode == "turn-group-v1d":
            for t in range(n):
                D = 0.0
                for j in range(t, n):
                    D += (gamma ** (j - t)) * normed_ig[b][j]
                D = D / math.sqrt(n - t)
                turn_adv[b][t] = alpha * D + outcome_adv[b]
            turn_adv[b][n] = outcome_adv[b]
        else:
            rewards = normed_ig[b][:n] + [outcome_adv[b]]
            running = 0.0
            for t in reversed(range(n + 1)):
                running = rewards[t] + gamma * running
                turn_adv[b][t] = running
        if dynamic_clip:
            for t in range(n):
                turn_scale[b][t] = 1.0 + beta * (2.0 * sigmoid(normed_ig[b][t]) - 1.0)

    L = len(turn_ids[0])
    advantages = [[0.0] * L for _ in range(B)]
    clip_scale = [[1.0] * L for _ in range(B)]
    for b in range(B):
        for pos in range(L):
            k = turn_ids[b][pos]
            in_mask = response_mask is None or response_mask[b][pos]
            if 0 <= k <= n_turns[b] and in_mask:
                advantages[b][pos] = turn_adv[b][k]
                clip_scale[b][pos] = turn_scale[b][k]
    return dict(
        advantages=advantages,
        clip_scale=clip_scale,
        turn_adv=turn_adv,
        turn_scale=turn_scale,
        normed_ig=normed_ig,
        outcome_adv=outcome_adv,
    )


# ---------------------------------------------------------------------------------------
# Policy losses (values only)
# ---------------------------------------------------------------------------------------


def _clipped(ratio, adv, lower, upper, clip_ratio_c):
    clamped = min(max(ratio, lower), upper)
    loss = max(-adv * ratio, -adv * clamped)
    if clip_ratio_c is not None and adv < 0:
        loss = min(loss, -adv * clip_ratio_c)
    return loss


def ppo_loss(
    old,
    new,
    adv,
    mask,
    *,
    mode="token-mean",
    low=0.2,
    high=0.2,
    clip_ratio_c=3.0,
    clip_scale=None,
    turn_ids=None,
    ratio_level="token",
):
    B, L = len(new), len(new[0])
    loss_mat = [[0.0] * L for _ in range(B)]
    for b in range(B):
        log_ratio = [min(max(new[b][i] - old[b][i], -20.0), 20.0) for i in range(L)]
        used = list(log_ratio)
        if ratio_level == "turn":
            turn_sum, turn_n = {}, {}
            for i in range(L):
                k = turn_ids[b][i]
                if k >= 0 and mask[b][i]:
                    turn_sum[k] = turn_sum.get(k, 0.0) + log_ratio[i]
                    turn_n[k] = turn_n.get(k, 0) + 1
            for i in range(L):
                k = turn_ids[b][i]
                if k >= 0 and mask[b][i]:
                    used[i] = turn_sum[k] / turn_n[k]
        for i in range(L):
            s = 1.0 if clip_scale is None else clip_scale[b][i]
            ratio = math.exp(used[i])
            loss_mat[b][i] = _clipped(ratio, adv[b][i], 1.0 - low * s, 1.0 + high * s, clip_ratio_c)
    return agg_loss(loss_mat, mask, mode)


def gspo_token_loss(
    old, new, adv, mask, *, mode="seq-mean-token-mean", low=3e-4, high=4e-4, clip_ratio_c=None, clip_scale=None
):
    B, L = len(new), len(new[0])
    loss_mat = [[0.0] * L for _ in range(B)]
    for b in range(B):
        total, n = 0.0, 0
        for i in range(L):
            if mask[b][i]:
                total += new[b][i] - old[b][i]
                n += 1
        seq = total / n if n else 0.0
        ratio = math.exp(min(seq, 10.0))
        for i in range(L):
            s = 1.0 if clip_scale is None else clip_scale[b][i]
            loss_mat[b][i] = _clipped(ratio, adv[b][i], 1.0 - low * s, 1.0 + high * s, clip_ratio_c)
    return agg_loss(loss_mat, mask, mode)


def gspo_seq_loss(
    old, new, adv, mask, *, mode="seq-mean-token-mean", low=3e-4, high=4e-4, clip_ratio_c=None, clip_scale=None
):
    B, L = len(new), len(new[0])
    loss_mat = [[0.0] * L for _ in range(B)]
    for b in range(B):
        lr_sum, adv_sum, scale_sum, n = 0.0, 0.0, 0.0, 0
        for i in range(L):
            if mask[b][i]:
                lr_sum += new[b][i] - old[b][i]
                adv_sum += adv[b][i]
                scale_sum += 1.0 if clip_scale is None else clip_scale[b][i]
                n += 1
        if n == 0:
            continue
        ratio = math.exp(min(lr_sum / n, 10.0))
        s = scale_sum / n
        seq_loss = _clipped(ratio, adv_sum / n, 1.0 - low * s, 1.0 + high * s, clip_ratio_c)
        for i in range(L):
            loss_mat[b][i] = seq_loss
    return agg_loss(loss_mat, mask, mode)


# ---------------------------------------------------------------------------------------
# SmallGain–KL allocator
# ---------------------------------------------------------------------------------------


def fractional_knapsack(score, cost, budget, active):
    order = sorted([k for k in range(len(score)) if active[k]], key=lambda k: -score[k])
    frac = [0.0] * len(score)
    spent_full = 0.0  # sum of the full prices of the items already visited
    for k in order:
        remaining = budget - spent_full
        if cost[k] > 0:
            frac[k] = min(1.0, max(0.0, remaining / cost[k]))
        else:
            frac[k] = 1.0 if remaining > 0 else 0.0
        spent_full += cost[k]
    return frac


class Allocator:
    """The spec's pseudocode, per group, made stateful exactly as trainer_hooks.allocator."""

    def __init__(
        self, G, rho=0.7, alpha=0.3, lam_min=0.8, lam_max=1.25, max_step=0.10, eps=1e-9, target=1.0, decay=0.5
    ):
        self.G, self.rho, self.alpha, self.eps = G, rho, alpha, eps
        self.lam_min, self.lam_max, self.max_step, self.target, self.decay = lam_min, lam_max, max_step, target, decay
        self.score, self.value, self.cost = [0.0] * G, [0.0] * G, [0.0] * G
        self.lam, self.lam_before, self.seen = [1.0] * G, [1.0] * G, [False] * G
        self.spent = 0.0

    def step(self, adv, log_ratio, mask, group_ids, budget):
        G = self.G
        a2, c2, n = [0.0] * G, [0.0] * G, [0] * G
        for b in range(len(adv)):
            for i in range(len(adv[b])):
                k = group_ids[b][i]
                if mask[b][i] and 0 <= k < G:
                    a2[k] += adv[b][i] ** 2
                    c2[k] += log_ratio[b][i] ** 2
                    n[k] += 1
        active = [n[k] > 0 for k in range(G)]
        for k in range(G):
            if not active[k]:
                continue
            value, cost = a2[k] / n[k], c2[k] / n[k]
            raw = value / (cost + self.eps) if cost > 0 else value
            if self.seen[k]:
                self.score[k] = self.alpha * raw + (1 - self.alpha) * self.score[k]
                self.value[k] = self.alpha * value + (1 - self.alpha) * self.value[k]
                self.cost[k] = self.alpha * cost + (1 - self.alpha) * self.cost[k]
            else:
                self.score[k], self.value[k], self.cost[k] = raw, value, cost
            self.seen[k] = True
        seen = [k for k in range(G) if self.seen[k]]
        mean_cost = sum(self.cost[k] for k in seen) / max(len(seen), 1)
        up, dkl = [0.0] * G, [0.0] * G
        for k in range(G):
            proposed = min(self.lam_max, max(self.lam_min, self.lam[k] * (1 + self.max_step)))
            up[k] = max(proposed - self.lam[k], 0.0)
            cost_hat = self.cost[k] / mean_cost if mean_cost > 0 else 0.0
            dkl[k] = cost_hat * up[k] / max(self.lam[k], self.eps)
        frac = fractional_knapsack(self.score, dkl, self.rho * budget, active)
        new = list(self.lam)
        for k in range(G):
            if not active[k]:
                continue
            if frac[k] > 0:
                new[k] = self.lam[k] + frac[k] * up[k]
            else:
                limit = self.max_step * self.lam[k]
                new[k] = self.lam[k] + min(max(self.target - self.lam[k], -limit), limit)
            new[k] = min(max(new[k], self.lam_min), self.lam_max)
        self.lam_before, self.lam = self.lam, new
        self.spent = sum(f * d for f, d in zip(frac, dkl))
        return list(self.lam), self.spent


# ---------------------------------------------------------------------------------------
# A user-defined callable for the registry's dotted-path lookup
# ---------------------------------------------------------------------------------------


def custom_policy_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", **_):
    """Plain policy-gradient loss ``-A log pi`` (token mean), for the registry tests."""
    mask = response_mask.to(log_prob.dtype)
    loss = -(advantages * log_prob * mask).sum() / mask.sum().clamp_min(1.0)
    return loss, {}
