"""Deliberately plain per-sample loop reference for trainer_hooks.advantages.retrain.

Python lists and floats only, one completion at a time, the way retrain's own list code
reads. The vectorized module must match these numbers on random ragged batches. Nothing
here is fast or clever on purpose; do not import it from library code.
"""

from __future__ import annotations

import math
import re

MAX_UNCERTAINTY = 50.0


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def grpo(rewards: list[float], normalize_by_std: bool = False, eps: float = 1e-6, var_eps: float = 1e-8) -> list[float]:
    if all(r == rewards[0] for r in rewards):
        return [0.0] * len(rewards)
    m = mean(rewards)
    advs = [r - m for r in rewards]
    if normalize_by_std:
        var = sum((r - m) ** 2 for r in rewards) / (len(rewards) - 1)
        advs = [a / (math.sqrt(var + var_eps) + eps) for a in advs]
    return advs


def maxrl(rewards: list[float], eps: float = 1e-6) -> list[float]:
    if all(r == rewards[0] for r in rewards):
        return [0.0] * len(rewards)
    m = mean(rewards)
    if m <= eps:
        return [0.0] * len(rewards)
    return [(r - m) / (m + eps) for r in rewards]


def uncertainty(kind: str, logprobs: list[float], entropy: list[float] | None = None) -> list[float]:
    if kind == "surprisal":
        return [min(-lp, MAX_UNCERTAINTY) for lp in logprobs]
    if kind == "predictive_variance":
        out = []
        for lp in logprobs:
            p = min(max(math.exp(max(lp, -MAX_UNCERTAINTY)), 0.0), 1.0)
            out.append(p * (1.0 - p))
        return out
    if kind == "shannon_entropy":
        assert entropy is not None
        return [min(h, MAX_UNCERTAINTY) for h in entropy]
    raise ValueError(kind)


def gtpo(advantage: float, h: list[float], beta: float) -> list[float]:
    if not h:
        return []
    if beta == 0.0:
        return [advantage] * len(h)
    h = [min(e, MAX_UNCERTAINTY) for e in h]
    mean_h = mean(h)
    if mean_h < 1e-7:
        return [advantage] * len(h)
    return [advantage * max(0.0, 1.0 + beta * (e / (mean_h + 1e-8) - 1.0)) for e in h]


def hicra(token_advs: list[float], planning: list[bool], alpha: float) -> list[float]:
    return [a + alpha * abs(a) if p else a for a, p in zip(token_advs, planning)]


def sepa(h: list[float], planning: list[bool], lam: float) -> list[float]:
    lam = max(0.0, min(1.0, lam))
    h = [min(e, MAX_UNCERTAINTY) for e in h]
    exec_vals = [e for e, p in zip(h, planning) if not p]
    if not exec_vals:
        return list(h)
    m = mean(exec_vals)
    return [e if p else lam * m + (1.0 - lam) * e for e, p in zip(h, planning)]


def sepa_amp(h: list[float], planning: list[bool], lam: float, clamp: bool = False) -> list[float]:
    lam = max(0.0, min(1.0, lam))
    h = [min(e, MAX_UNCERTAINTY) for e in h]
    exec_vals = [e for e, p in zip(h, planning) if not p]
    if not exec_vals:
        return list(h)
    m = mean(exec_vals)
    out = [e if p else (1.0 + lam) * e - lam * m for e, p in zip(h, planning)]
    return [e if p else max(0.0, e) for e, p in zip(out, planning)] if clamp else out


def planning_from_ids(ids: list[int], grams: list[list[int]]) -> list[bool]:
    mask = [False] * len(ids)
    for start in range(len(ids)):
        for gram in grams:
            if gram and ids[start : start + len(gram)] == gram:
                for j in range(start, start + len(gram)):
                    mask[j] = True
    return mask


def _normal_char(ch: str) -> str:
    if ch in "\t\n\x0b\x0c\r \xa0\u2581\u0120\u010a":
        return " "
    if ch == "\u2019":
        return "'"
    if "A" <= ch <= "Z":
        return chr(ord(ch) + 32)
    return ch


def planning_from_strs(tokens: list[str], grams: list[str]) -> list[bool]:
    """Regex over the completion's text; every token overlapping a match is marked."""
    text = ""
    spans = []
    for tok in tokens:
        start = len(text)
        text += "".join(_normal_char(c) for c in tok)
        spans.append((start, len(text)))
    mask = [False] * len(tokens)
    for gram in grams:
        words = "".join(_normal_char(c) for c in gram).split()
        if not words:
            continue
        pattern = re.compile(r"(?=(\b" + r" +".join(re.escape(w) for w in words) + r"\b))")
        for m in pattern.finditer(text):
            s, e = m.span(1)
            touching = [i for i, (a, b) in enumerate(spans) if a < e and b > s]
            for i in range(min(touching), max(touching) + 1):
                mask[i] = True
    return mask


def compose(
    rewards: list[float],
    group_ids: list[int],
    logprobs: list[list[float]],
    planning: list[list[bool]],
    *,
    advantage_mode: str = "grpo",
    normalize_by_std: bool = False,
    transform_mode: str = "none",
    uncertainty_kind: str = "surprisal",
    gtpo_beta: float = 0.1,
    hicra_alpha: float = 0.2,
    sepa_lambda: float = 0.0,
    entropy: list[list[float]] | None = None,
) -> tuple[list[float], list[list[float]], list[bool]]:
    """Returns (episode advantages, token advantages, informative) per completion."""
    episode = [0.0] * len(rewards)
    informative = [False] * len(rewards)
    for gid in sorted(set(group_ids)):
        members = [i for i, g in enumerate(group_ids) if g == gid]
        group_rewards = [rewards[i] for i in members]
        if advantage_mode == "grpo":
            advs = grpo(group_rewards, normalize_by_std=normalize_by_std)
        elif advantage_mode == "maxrl":
            advs = maxrl(group_rewards)
        else:
            raise ValueError(advantage_mode)
        # retrain's trainer: uniform = two or more rewards within 1e-6 of the smallest
        same = len(group_rewards) > 1 and max(group_rewards) - min(group_rewards) <= 1e-6
        for i, a in zip(members, advs):
            episode[i] = a
            informative[i] = not same

    stages = set(transform_mode.split("_")) - {"none"}
    token_advs = []
    for i in range(len(rewards)):
        if "gtpo" in stages:
            h = uncertainty(uncertainty_kind, logprobs[i], entropy[i] if entropy else None)
            if "amp" in stages:
                h = sepa_amp(h, planning[i], sepa_lambda, clamp="c" in stages)
            elif "sepa" in stages:
                h = sepa(h, planning[i], sepa_lambda)
            advs = gtpo(episode[i], h, gtpo_beta)
        else:
            advs = [episode[i]] * len(logprobs[i])
        if "hicra" in stages:
            advs = hicra(advs, planning[i], hicra_alpha)
        token_advs.append(advs)
    return episode, token_advs, informative
