"""retrain's composable advantage pipeline, vectorized over a padded batch.

Owns the pieces of retrain (github.com/teilomillet/retrain) that turn per-completion
rewards into per-token advantages, and the one function that chains them::

    rewards [B] --advantage_mode--> A_i [B]                         grpo | maxrl | astar_po | dotted path
                --uncertainty_kind--> H(t) [B, L]                   surprisal | predictive_variance | shannon_entropy
                --sepa--> H_pooled(t)   (execution tokens pulled toward their mean, strength lambda)
                --gtpo--> A_i * w(t),  w(t) = max(0, 1 + beta (H(t)/mean_i(H) - 1))
                --hicra--> A(t) + alpha |A(t)| planning(t)

``compose_advantages`` runs that chain from names in a :class:`RetrainAdvantageConfig`;
estimators and transforms are fetched from :mod:`trainer_hooks.registry` (``"grpo"``,
``"maxrl"``; ``"gtpo"``, ``"sepa"``, ``"hicra"``). It also owns strategic-gram
planning-token detection (on token ids, or on decoded token text) and the SEPA lambda
schedule (:class:`SEPAController`, the only state here).

Batch layout
    ``B`` completions padded to ``L`` tokens. ``group_ids: [B] int`` gives each
    completion its prompt group (any integers, any order). ``response_mask: [B, L] bool``
    is True on generated tokens; every ``[B, L]`` output is exactly 0 / False elsewhere.
    All reductions are scatter/segment ops over the batch; there is no Python loop over
    completions, groups or tokens. bf16/fp16 inputs are computed in float32; float64
    stays float64.

Where sources disagree, the choice made here (each is a keyword you can flip)
    * GRPO std normalisation: ``normalize_by_std=False``. retrain's GRPO is pure mean
      centering (``A_i = r_i - mean(r)``, "No normalization"); verl / the DeepSeekMath
      paper divide by the group std (unbiased, ``+1e-6``). Off by default because this
      module implements retrain, and because dividing by a tiny std blows up
      near-uniform groups (the Dr. GRPO objection). When on, the std is the shared
      ``segment_normalize``'s ``sqrt(var + var_eps)`` (``var_eps=1e-8``; 0 is verl-exact).
    * SEPA schedule: retrain's trainer config (``steps=500, delay_steps=50,
      correct_rate_gate=0.1``), not its controller's constructor defaults (all 0), which
      make ``gtpo_sepa`` silently equal to ``gtpo``.
    * Planning tokens: only the tokens that overlap a matched gram are marked. retrain's
      window scan also marks up to four tokens *before* a gram that share its window,
      and cannot match a word split over two sub-word tokens; neither is reproduced.

Telemetry of :func:`compose_advantages` (flat ``dict[str, Tensor]``, 0-dim float):
    ``groups``, ``groups_informative``, ``groups_skipped_all_correct``,
    ``groups_skipped_all_wrong`` (counts; a group is skipped when all its rewards are
    equal, "correct" when that common reward is > ``correct_threshold``),
    ``correct_rate`` (fraction of completions with reward > ``correct_threshold``),
    ``episode_adv_mean``, ``episode_adv_abs_mean`` (over completions),
    ``token_adv_mean``, ``token_adv_abs_mean`` (over ``loss_mask`` tokens),
    ``planning_token_frac`` (when a planning mask is given),
    ``uncertainty_exec_mean/var``, ``uncertainty_plan_mean/var`` (before SEPA) and
    ``uncertainty_exec_var_post`` (after SEPA) when GTPO runs, ``sepa_lambda``.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from trainer_hooks.ops.masked import masked_mean, masked_var
from trainer_hooks.ops.segments import (
    SegmentStats,
    compute_dtype,
    dense_index,
    segment_normalize,
    segment_stats,
)
from trainer_hooks.registry import (
    get_advantage_estimator,
    get_advantage_transform,
    register_advantage_estimator,
    register_advantage_transform,
)

__all__ = [
    "CORRECT_THRESHOLD",
    "DEFAULT_STRATEGIC_GRAMS",
    "MAX_UNCERTAINTY",
    "RetrainAdvantageConfig",
    "RetrainAdvantages",
    "SEPAController",
    "canonical_uncertainty_kind",
    "compose_advantages",
    "encode_strategic_grams",
    "entropy_from_logits",
    "grpo_advantages",
    "gtpo_weighting",
    "hicra_amplify",
    "maxrl_advantages",
    "normalize_gram_text",
    "parse_strategic_grams",
    "parse_transform_mode",
    "planning_mask_from_token_ids",
    "planning_mask_from_token_strs",
    "sepa_pool",
    "token_uncertainty",
]

#: Uncertainty values are capped: a -inf log-prob (or a huge surprisal from a sampler
#: tail) would otherwise dominate GTPO's per-sequence mean. Same cap as retrain.
MAX_UNCERTAINTY = 50.0
#: A completion counts as correct when its reward exceeds this (retrain's trainer).
CORRECT_THRESHOLD = 0.5

#: retrain's 18 default strategic grams (planning / self-correction phrases).
DEFAULT_STRATEGIC_GRAMS: tuple[str, ...] = (
    "wait let me",
    "let me think",
    "on second thought",
    "let me check",
    "let me verify",
    "is this right",
    "double check",
    "try another approach",
    "go back and",
    "start over",
    "that's not right",
    "that doesn't work",
    "another way to",
    "or we could",
    "what if we",
    "notice that",
    "the key is",
    "the key insight",
)


def _as_float(x: Tensor) -> Tensor:
    # Half precision runs in float32 (sums over long rows lose mass in bf16); float64 is
    # kept so gradcheck and the float64 reference comparisons stay exact.
    return x.to(compute_dtype(x))


def _group_stats(rewards: Tensor, group_ids: Tensor) -> tuple[Tensor, SegmentStats]:
    """Dense group index ``[B]`` and per-group reward statistics (each ``[G]``)."""
    r = _as_float(rewards)
    if r.dim() != 1 or r.shape != group_ids.shape:
        raise ValueError(f"rewards {tuple(r.shape)} and group_ids {tuple(group_ids.shape)} must both be [B]")
    index, num_groups = dense_index(group_ids)
    return index, segment_stats(r, index, num_groups, torch.ones_like(r, dtype=torch.bool), unbiased=True)


# ---------------------------------------------------------------------------------------
# Episode-level advantages
# ---------------------------------------------------------------------------------------


@register_advantage_estimator("grpo")
def grpo_advantages(
    rewards: Tensor,
    group_ids: Tensor,
    *,
    normalize_by_std: bool = False,
    eps: float = 1e-6,
    var_eps: float = 1e-8,
) -> Tensor:
    """Group-relative advantage ``A_i = r_i - mean_g(r)``, optionally ``/ (std_g + eps)``.

    Args:
        rewards: ``[B]`` scalar reward per completion.
        group_ids: ``[B]`` int prompt group of each completion (any integers).
        normalize_by_std: divide by the group std (verl / DeepSeekMath GRPO). Default
            False: retrain's GRPO centers only (see module docstring).
        eps: added to the std when normalizing (verl's 1e-6).
        var_eps: the std is ``sqrt(unbiased_var + var_eps)`` (the shared
            :func:`~trainer_hooks.ops.segments.segment_normalize`); it keeps the
            gradient finite for constant groups and moves the result by < 1e-6 relative
            for any group whose variance exceeds 1e-2.

    Returns:
        ``[B]`` advantages; exactly 0 for groups whose rewards are all equal (singletons
        included): centering those leaves only rounding residue, which the std division
        would amplify to O(1).
    """
    r = _as_float(rewards)
    if r.dim() != 1 or r.shape != group_ids.shape:
        raise ValueError(f"rewards {tuple(r.shape)} and group_ids {tuple(group_ids.shape)} must both be [B]")
    index, num_groups = dense_index(group_ids)
    everyone = torch.ones_like(r, dtype=torch.bool)
    return segment_normalize(
        r, index, num_groups, everyone, use_std=normalize_by_std, eps=eps, unbiased=True, var_eps=var_eps
    )


@register_advantage_estimator("maxrl")
def maxrl_advantages(rewards: Tensor, group_ids: Tensor, *, eps: float = 1e-6) -> Tensor:
    """MaxRL inverse success-rate reweighting ``A_i = (r_i - mean_g) / (mean_g + eps)``.

    Meant for rewards in ``[0, 1]``: a low group mean (rare successes) amplifies the
    advantage of the successes. Groups with ``mean_g <= eps`` (all wrong) get 0, as do
    groups with all-equal rewards.

    Args:
        rewards: ``[B]``; group_ids: ``[B]`` int; eps: denominator guard (retrain: 1e-6).

    Returns:
        ``[B]`` advantages.
    """
    index, stats = _group_stats(rewards, group_ids)
    mean = stats.mean[index]
    usable = (mean > eps) & stats.informative[index]
    denom = torch.where(usable, mean + eps, torch.ones_like(mean))
    adv = (_as_float(rewards) - mean) / denom
    return torch.where(usable, adv, torch.zeros_like(adv))


# ---------------------------------------------------------------------------------------
# Token uncertainty
# ---------------------------------------------------------------------------------------

_UNCERTAINTY_ALIASES = {
    "surprisal": "surprisal",
    "token_surprisal": "surprisal",
    "neg_logprob": "surprisal",
    "negative_logprob": "surprisal",
    "nll": "surprisal",
    "predictive_variance": "predictive_variance",
    "pred_var": "predictive_variance",
    "bernoulli_variance": "predictive_variance",
    "shannon_entropy": "shannon_entropy",
    "shannon": "shannon_entropy",
    "entropy": "shannon_entropy",
    "token_entropy": "shannon_entropy",
}


def canonical_uncertainty_kind(kind: str) -> str:
    """Canonical name of an uncertainty kind (accepts retrain's aliases)."""
    try:
        return _UNCERTAINTY_ALIASES[kind.strip().lower()]
    except KeyError:
        known = ", ".join(sorted(_UNCERTAINTY_ALIASES))
        raise ValueError(f"unknown uncertainty_kind {kind!r}; known: {known}") from None


def entropy_from_logits(logits: Tensor, *, temperature: float = 1.0) -> Tensor:
    """Shannon entropy of the full next-token distribution, ``[B, L, V]`` -> ``[B, L]``.

    Computed in float32 (float64 kept) so bf16 logits do not lose the tail mass.
    """
    x = _as_float(logits) / temperature
    logp = torch.log_softmax(x, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def token_uncertainty(
    kind: str = "surprisal",
    *,
    logprobs: Tensor | None = None,
    entropy: Tensor | None = None,
) -> Tensor:
    """Per-token uncertainty signal fed to GTPO, capped at :data:`MAX_UNCERTAINTY`.

    Args:
        kind: ``"surprisal"`` (default, ``-logprob``), ``"predictive_variance"``
            (``p (1 - p)``, ``p = exp(logprob)``) or ``"shannon_entropy"`` (precomputed
            full-vocabulary entropy, e.g. :func:`entropy_from_logits`); aliases accepted.
        logprobs: ``[B, L]`` log-prob of each sampled token (surprisal, predictive_variance).
        entropy: ``[B, L]`` full-distribution entropy (shannon_entropy).

    Returns:
        ``[B, L]`` float tensor (padding positions are whatever the inputs hold there).
    """
    kind = canonical_uncertainty_kind(kind)
    if kind == "shannon_entropy":
        if entropy is None:
            raise ValueError(
                "uncertainty_kind='shannon_entropy' needs the per-token entropy of the full "
                "distribution (entropy=...; see entropy_from_logits); use 'surprisal' when "
                "only sampled-token log-probs are available"
            )
        return _as_float(entropy).clamp(max=MAX_UNCERTAINTY)
    if logprobs is None:
        raise ValueError(f"uncertainty_kind={kind!r} needs logprobs=[B, L] sampled-token log-probs")
    lp = _as_float(logprobs)
    if kind == "surprisal":
        return (-lp).clamp(max=MAX_UNCERTAINTY)
    p = lp.clamp(min=-MAX_UNCERTAINTY).exp().clamp(0.0, 1.0)
    return p * (1.0 - p)


# ---------------------------------------------------------------------------------------
# Token-level transforms
# ---------------------------------------------------------------------------------------


@register_advantage_transform("gtpo")
def gtpo_weighting(
    advantages: Tensor,
    uncertainty: Tensor,
    response_mask: Tensor,
    *,
    beta: float = 0.1,
) -> Tensor:
    """GTPO: scale each token's advantage by its relative uncertainty.

    ``w(t) = max(0, 1 + beta * (H(t) / (mean_i(H) + 1e-8) - 1))`` where ``mean_i`` is over
    completion i's response tokens. The weight is 1 everywhere when ``beta == 0`` or
    ``mean_i(H) < 1e-7`` (retrain's guards).

    Args:
        advantages: ``[B]`` episode advantages (broadcast over tokens) or ``[B, L]``.
        uncertainty: ``[B, L]`` H(t) (see :func:`token_uncertainty`); capped at 50.
        response_mask: ``[B, L]`` bool.
        beta: strength; 0 disables (retrain default 0.1).

    Returns:
        ``[B, L]`` token advantages, 0 outside ``response_mask``.
    """
    mask = response_mask.bool()
    adv = _as_float(advantages)
    adv = adv[:, None] if adv.dim() == 1 else adv
    h = torch.where(mask, _as_float(uncertainty).clamp(max=MAX_UNCERTAINTY), torch.zeros_like(adv))
    mean_h = masked_mean(h, mask, dim=-1)
    uniform = mean_h < 1e-7
    if beta == 0.0:
        uniform = torch.ones_like(uniform)
    weight = (1.0 + beta * (h / (mean_h + 1e-8)[:, None] - 1.0)).clamp_min(0.0)
    weight = torch.where(uniform[:, None], torch.ones_like(weight), weight)
    return torch.where(mask, adv * weight, torch.zeros_like(weight))


@register_advantage_transform("hicra")
def hicra_amplify(
    token_advantages: Tensor,
    planning_mask: Tensor,
    *,
    alpha: float = 0.2,
) -> Tensor:
    """HICRA: ``A(t) + alpha * |A(t)| * planning(t)``; amplifies planning tokens, keeps sign.

    Args:
        token_advantages: ``[B, L]``.
        planning_mask: ``[B, L]`` bool, True on planning tokens (see ``planning_mask_*``).
        alpha: amplification; 0 disables (retrain default 0.2).

    Returns:
        ``[B, L]``; positions where ``token_advantages`` is 0 stay 0.
    """
    adv = _as_float(token_advantages)
    return adv + alpha * adv.abs() * planning_mask.to(adv.dtype)


@register_advantage_transform("sepa")
def sepa_pool(
    uncertainty: Tensor,
    planning_mask: Tensor,
    response_mask: Tensor,
    *,
    lam: float | Tensor = 0.0,
) -> Tensor:
    """SEPA: pull execution-token uncertainty toward its per-completion mean.

    ``H'(t) = lam * mean_i(H_exec) + (1 - lam) * H(t)`` on execution tokens (response and
    not planning); planning tokens keep ``H(t)``. ``lam`` is clamped to ``[0, 1]``; get it
    from :class:`SEPAController`. Run before GTPO so that GTPO's differentiation falls on
    planning tokens.

    Args:
        uncertainty: ``[B, L]``; planning_mask, response_mask: ``[B, L]`` bool.
        lam: pooling strength (float or 0-dim tensor).

    Returns:
        ``[B, L]`` pooled uncertainty, 0 outside ``response_mask``.
    """
    mask = response_mask.bool()
    h = _as_float(uncertainty).clamp(max=MAX_UNCERTAINTY)
    h = torch.where(mask, h, torch.zeros_like(h))
    lam_t = torch.as_tensor(lam, dtype=h.dtype, device=h.device).clamp(0.0, 1.0)
    execution = mask & ~planning_mask.bool()
    mean_exec = masked_mean(h, execution, dim=-1)
    pooled = lam_t * mean_exec[:, None] + (1.0 - lam_t) * h
    return torch.where(execution, pooled, h)


# ---------------------------------------------------------------------------------------
# Planning-token detection (strategic grams)
# ---------------------------------------------------------------------------------------

# Pattern codes (negative so they never equal a token id or a code point).
_PAD = -1  # past the end of a pattern: matches anything
_NONE = -2  # stream filler (masked token, padding): equals no literal
_NON_WORD = -3  # must be a non-word character (regex \b on the outside of a word char)
_WORD = -4  # must be a word character (\b on the outside of a non-word char)

_SPACE_LIKE = (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0xA0, 0x2581, 0x0120, 0x010A)
# SentencePiece (U+2581) and byte-level BPE (U+0120 space, U+010A newline) markers read
# as whitespace, as retrain's fragment cleaning does.
_GRAM_CHAR_MAP = {chr(c): " " for c in _SPACE_LIKE} | {"\u2019": "'"}


def parse_strategic_grams(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Strategic grams from retrain's config forms: a JSON list string, a comma-separated
    string, or a sequence. Empty / None gives :data:`DEFAULT_STRATEGIC_GRAMS`."""
    if value is None:
        return DEFAULT_STRATEGIC_GRAMS
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return DEFAULT_STRATEGIC_GRAMS
        if text.startswith("["):
            items = json.loads(text)
            if not isinstance(items, list) or not all(isinstance(g, str) for g in items):
                raise ValueError("strategic_grams JSON must be a list of strings")
        else:
            items = text.split(",")
    else:
        items = list(value)
    grams = tuple(g.strip() for g in items if g.strip())
    return grams or DEFAULT_STRATEGIC_GRAMS


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def normalize_gram_text(text: str) -> str:
    """The normal form text is matched in: ASCII lower case, sub-word markers and other
    whitespace as one space, U+2019 as an apostrophe. (Gram case folding is ASCII only.)"""
    mapped = "".join(_GRAM_CHAR_MAP.get(ch, ch) for ch in text)
    lowered = mapped.translate(_ASCII_LOWER)
    return re.sub(" +", " ", lowered)


def _is_word_char(ch: str) -> bool:
    # Python's re \w for str patterns: alphanumeric in any script, or underscore.
    return ch.isalnum() or ch == "_"


def _longest_match(stream: Tensor, patterns: Tensor, lengths: Tensor, word: Tensor | None) -> Tensor:
    """Length of the longest pattern that starts at each stream position (0: none).

    Args:
        stream: ``[R, T]`` int64 symbols (token ids or code points; ``_NONE`` = filler).
        patterns: ``[G, N]`` int64, right-padded with ``_PAD``; may use ``_WORD`` /
            ``_NON_WORD`` class codes when ``word`` is given.
        lengths: ``[G]`` int64 pattern lengths.
        word: ``[R, T]`` bool word-character flags, or None.

    Returns:
        ``[R, T]`` int64.
    """
    rows, width = stream.shape
    num_patterns, span = patterns.shape
    if num_patterns == 0 or width == 0:
        return torch.zeros_like(stream)
    windows = F.pad(stream, (0, span - 1), value=_NONE).unfold(1, span, 1)  # [R, T, N]
    if word is not None:
        word_windows = F.pad(word, (0, span - 1), value=False).unfold(1, span, 1)
    hit = torch.ones(rows, width, num_patterns, dtype=torch.bool, device=stream.device)
    # One pass per pattern column: the trip count is the longest gram, never the batch.
    for n in range(span):
        column = patterns[:, n]
        ok = (windows[..., n, None] == column) | (column == _PAD)
        if word is not None:
            is_word = word_windows[..., n, None]
            ok = ok | ((column == _NON_WORD) & ~is_word) | ((column == _WORD) & is_word)
        hit &= ok
    return torch.where(hit, lengths, torch.zeros_like(lengths)).amax(-1)


def _cover(first: Tensor, last: Tensor, size: int) -> Tensor:
    """Bool ``[size]`` marking the union of inclusive index ranges ``[first_k, last_k]``."""
    diff = torch.zeros(size + 1, dtype=torch.long, device=first.device)
    diff.index_add_(0, first, torch.ones_like(first))
    diff.index_add_(0, last + 1, -torch.ones_like(last))
    return diff.cumsum(0)[:size] > 0


def encode_strategic_grams(
    grams: Iterable[str] | None,
    encode: Callable[[str], Sequence[int]],
    *,
    variants: Sequence[str] = ("{}", " {}", "{Cap}", " {Cap}"),
    device: torch.device | str | None = None,
) -> Tensor:
    """Token-id patterns for :func:`planning_mask_from_token_ids`.

    A BPE tokenizer spells a phrase differently at the start of a text, after a space
    and capitalised, so each gram is encoded in every ``variants`` spelling (``{}`` the
    gram, ``{Cap}`` it with a capital first letter); duplicates are dropped. The loop
    runs over grams x variants (configuration size), once per run.

    Args:
        grams: phrases (None: :data:`DEFAULT_STRATEGIC_GRAMS`).
        encode: ``str -> token ids`` without special tokens, e.g.
            ``lambda s: tok.encode(s, add_special_tokens=False)``.

    Returns:
        ``[G, N]`` int64, right-padded with -1.
    """
    seen: dict[tuple[int, ...], None] = {}
    for gram in parse_strategic_grams(None if grams is None else list(grams)):
        for variant in variants:
            text = variant.replace("{Cap}", gram[:1].upper() + gram[1:]).replace("{}", gram)
            ids = tuple(int(i) for i in encode(text))
            if ids:
                seen.setdefault(ids, None)
    width = max((len(ids) for ids in seen), default=1)
    table = torch.full((len(seen), width), _PAD, dtype=torch.long)
    for row, ids in enumerate(seen):
        table[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return table.to(device) if device is not None else table


def planning_mask_from_token_ids(
    token_ids: Tensor,
    gram_ids: Tensor,
    response_mask: Tensor | None = None,
) -> Tensor:
    """Planning tokens by exact n-gram match of token ids (fully on device).

    Args:
        token_ids: ``[B, L]`` int token ids.
        gram_ids: ``[G, N]`` int64 patterns right-padded with -1
            (from :func:`encode_strategic_grams`).
        response_mask: ``[B, L]`` bool; grams never match across or into masked positions.

    Returns:
        ``[B, L]`` bool, True on every token of every matched gram.
    """
    if token_ids.dim() != 2:
        raise ValueError(f"token_ids must be [B, L], got {tuple(token_ids.shape)}")
    ids = token_ids.long()
    if response_mask is not None:
        ids = torch.where(response_mask.bool(), ids, torch.full_like(ids, _NONE))
    patterns = gram_ids.to(device=ids.device, dtype=torch.long)
    lengths = (patterns != _PAD).sum(-1)
    start_len = _longest_match(ids, patterns, lengths, None)
    rows, width = ids.shape
    positions = torch.arange(width, device=ids.device).expand(rows, width)
    starts = start_len > 0
    flat_pos = (positions + torch.arange(rows, device=ids.device)[:, None] * width)[starts]
    covered = _cover(flat_pos, flat_pos + start_len[starts] - 1, rows * width).view(rows, width)
    return covered if response_mask is None else covered & response_mask.bool()


def _text_patterns(grams: Sequence[str]) -> tuple[Tensor, Tensor]:
    """Code-point patterns ``[G, N]`` framed by regex-\\b class codes, and their lengths."""
    encoded = []
    for gram in grams:
        core = normalize_gram_text(gram).strip(" ")
        if not core:
            continue
        before = _NON_WORD if _is_word_char(core[0]) else _WORD
        after = _NON_WORD if _is_word_char(core[-1]) else _WORD
        encoded.append([before, *map(ord, core), after])
    width = max((len(p) for p in encoded), default=1)
    table = torch.full((len(encoded), width), _PAD, dtype=torch.long)
    for row, pattern in enumerate(encoded):
        table[row, : len(pattern)] = torch.tensor(pattern, dtype=torch.long)
    return table, (table != _PAD).sum(-1)


def planning_mask_from_token_strs(
    token_strs: Sequence[Sequence[str]],
    grams: Sequence[str] | str | None = None,
    *,
    length: int | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """Planning tokens by matching grams in the decoded text of each completion.

    Each completion's fragments are concatenated (sub-word markers read as spaces, see
    :func:`normalize_gram_text`), grams are matched case-insensitively as whole words with
    any run of whitespace between their words (regex ``\\bwait\\s+let\\s+me\\b``), and
    every token overlapping a match is marked, so grams split over sub-word tokens are
    found. The whole batch is matched at once on a code-point tensor; the only host work
    is joining the strings and classifying the batch's distinct non-ASCII characters.

    Args:
        token_strs: per completion, its response token strings (ragged).
        grams: phrases; None / "" give the 18 defaults (JSON or comma strings accepted).
        length: ``L`` of the output (default: longest completion).

    Returns:
        ``[B, L]`` bool, completion b's token j at ``[b, j]``.
    """
    gram_list = parse_strategic_grams(grams)
    num_seqs = len(token_strs)
    seq_lens = torch.tensor(list(map(len, token_strs)), dtype=torch.long)
    width = int(seq_lens.max()) if length is None and num_seqs else (length or 0)
    flat = list(itertools.chain.from_iterable(token_strs))
    num_tokens = len(flat)
    out = torch.zeros(num_seqs, width, dtype=torch.bool)
    if num_tokens == 0:
        return out.to(device) if device is not None else out

    # One text for the whole batch; "\0" separators keep grams inside a completion.
    text = "\0" + "\0".join(map("".join, token_strs)) + "\0"
    codes = torch.frombuffer(bytearray(text.encode("utf-32-le")), dtype=torch.int32).long()
    tok_lens = torch.tensor(list(map(len, flat)), dtype=torch.long)
    seq_of_tok = torch.repeat_interleave(torch.arange(num_seqs), seq_lens)
    seq_chars = torch.zeros(num_seqs, dtype=torch.long).index_add_(0, seq_of_tok, tok_lens)
    # Separators sit by position (not by value) so a NUL inside a token stays a token char.
    separators = torch.cumsum(F.pad(seq_chars + 1, (1, 0)), 0)
    is_separator = torch.zeros(codes.numel(), dtype=torch.bool)
    is_separator[separators] = True
    char_tok = torch.full((codes.numel(),), -1, dtype=torch.long)
    char_tok[~is_separator] = torch.repeat_interleave(torch.arange(num_tokens), tok_lens)
    codes = torch.where(is_separator, torch.zeros_like(codes), codes)

    # Normal form (see normalize_gram_text), vectorized.
    space_like = torch.isin(codes, torch.tensor(_SPACE_LIKE))
    codes = torch.where(space_like, torch.full_like(codes, 0x20), codes)
    codes = torch.where(codes == 0x2019, torch.full_like(codes, ord("'")), codes)
    upper = (codes >= ord("A")) & (codes <= ord("Z"))
    codes = torch.where(upper, codes + 32, codes)
    is_space = codes == 0x20
    keep = ~(is_space & F.pad(is_space[:-1], (1, 0), value=False))
    codes, char_tok = codes[keep], char_tok[keep]

    ascii_word = (
        ((codes >= ord("a")) & (codes <= ord("z")))
        | ((codes >= ord("0")) & (codes <= ord("9")))
        | (codes == ord("_"))
    )
    non_ascii = torch.unique(codes[codes >= 128])
    # Distinct characters, not tokens: bounded by the alphabet the batch uses.
    non_ascii_word = non_ascii[torch.tensor([_is_word_char(chr(c)) for c in non_ascii.tolist()], dtype=torch.bool)]
    word = ascii_word | torch.isin(codes, non_ascii_word)

    patterns, lengths = _text_patterns(gram_list)
    start_len = _longest_match(codes[None], patterns, lengths, word[None])[0]
    starts = torch.nonzero(start_len > 0).squeeze(-1)
    # A match covers the pattern minus its two boundary characters.
    first_tok = char_tok[starts + 1]
    last_tok = char_tok[starts + start_len[starts] - 2]
    covered = _cover(first_tok, last_tok, num_tokens)

    pos_of_tok = torch.arange(num_tokens) - torch.repeat_interleave(torch.cumsum(seq_lens, 0) - seq_lens, seq_lens)
    inside = pos_of_tok < width
    out[seq_of_tok[inside], pos_of_tok[inside]] = covered[inside]
    return out.to(device) if device is not None else out


# ---------------------------------------------------------------------------------------
# SEPA schedule
# ---------------------------------------------------------------------------------------


class SEPAController:
    """SEPA pooling strength over training: a lambda ramp behind a correct-rate gate.

    ``linear``: ``lambda = clamp((step - delay_steps) / steps, 0, 1)``.
    ``auto``: ``lambda = max(linear, 1 - min(var_ema / (var_0 * var_threshold), 1))`` where
    ``var_ema`` tracks the execution-token uncertainty variance and ``var_0`` is its EMA
    after ``warmup`` observations, so pooling grows as execution entropy collapses.
    Gate: lambda stays 0 until a batch's correct rate reaches ``correct_rate_gate``;
    it then stays open (sticky). ``correct_rate_gate=0`` opens it from the start.

    Defaults are retrain's trainer config (steps=500, delay 50, gate 0.1); see the module
    docstring for why not its controller's zeros.

    Host-side state (Python floats); feed it scalars once per step.
    """

    def __init__(
        self,
        *,
        steps: int = 500,
        delay_steps: int = 50,
        correct_rate_gate: float = 0.1,
        schedule: str = "linear",
        ema_decay: float = 0.99,
        var_threshold: float = 0.2,
        warmup: int = 50,
        eps: float = 1e-8,
    ) -> None:
        if steps < 0 or delay_steps < 0:
            raise ValueError("steps and delay_steps must be >= 0")
        if not 0.0 <= correct_rate_gate <= 1.0:
            raise ValueError(f"correct_rate_gate must be in [0, 1], got {correct_rate_gate}")
        if not 0.0 <= ema_decay <= 1.0:
            raise ValueError(f"ema_decay must be in [0, 1], got {ema_decay}")
        if var_threshold <= 0.0 or warmup < 1 or eps <= 0.0:
            raise ValueError("var_threshold and eps must be > 0 and warmup >= 1")
        if schedule not in ("linear", "auto"):
            raise ValueError(f"schedule must be 'linear' or 'auto', got {schedule!r}")
        self.steps = steps
        self.delay_steps = delay_steps
        self.correct_rate_gate = correct_rate_gate
        self.schedule = schedule
        self.ema_decay = ema_decay
        self.var_threshold = var_threshold
        self.warmup = warmup
        self.eps = eps
        self.var_ema: float | None = None
        self.var_0: float | None = None
        self.warmup_seen = 0
        self.gate_open = correct_rate_gate <= 0.0

    def observe_correct_rate(self, correct_rate: float | Tensor | None) -> None:
        """Open the gate (for good) once a batch's correct rate reaches the threshold."""
        if self.gate_open or correct_rate is None:
            return
        rate = float(correct_rate)
        if math.isfinite(rate) and rate >= self.correct_rate_gate:
            self.gate_open = True

    def observe_rewards(self, rewards: Tensor, threshold: float = CORRECT_THRESHOLD) -> None:
        """:meth:`observe_correct_rate` with the fraction of ``rewards: [B]`` > threshold."""
        if rewards.numel():
            self.observe_correct_rate((rewards > threshold).float().mean())

    def update_auto_state(self, exec_variance: float | Tensor) -> None:
        """Feed one step's execution-token uncertainty variance (``auto`` schedule only);
        :func:`compose_advantages` reports it as ``uncertainty_exec_var``."""
        if self.schedule != "auto":
            return
        var = float(exec_variance)
        if not math.isfinite(var):
            return
        self.var_ema = var if self.var_ema is None else self.ema_decay * self.var_ema + (1.0 - self.ema_decay) * var
        if self.var_0 is None:
            self.warmup_seen += 1
            if self.warmup_seen >= self.warmup:
                self.var_0 = max(self.var_ema, self.eps)

    def _linear(self, step: float) -> float:
        if self.steps <= 0:
            return 0.0
        return min(max(step - self.delay_steps, 0.0) / self.steps, 1.0)

    def _auto(self) -> float:
        if self.var_ema is None or self.var_0 is None:
            return 0.0
        ratio = max(0.0, self.var_ema / max(self.var_0, self.eps))
        return 1.0 - min(ratio / max(self.var_threshold, self.eps), 1.0)

    def resolve_lambda(self, step: float) -> float:
        """Pooling strength in ``[0, 1]`` at training step ``step``."""
        if not self.gate_open:
            return 0.0
        linear = self._linear(float(step))
        return max(self._auto(), linear) if self.schedule == "auto" else linear

    def state_dict(self) -> dict[str, Any]:
        """The mutable state (EMA, baseline, warmup count, gate) for checkpoints."""
        return {
            "var_ema": self.var_ema,
            "var_0": self.var_0,
            "warmup_seen": self.warmup_seen,
            "gate_open": self.gate_open,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output (hyperparameters come from the constructor)."""
        self.var_ema = None if state.get("var_ema") is None else float(state["var_ema"])
        self.var_0 = None if state.get("var_0") is None else float(state["var_0"])
        self.warmup_seen = int(state.get("warmup_seen", 0))
        self.gate_open = bool(state.get("gate_open", self.gate_open))


# ---------------------------------------------------------------------------------------
# The pipeline
# ---------------------------------------------------------------------------------------

_STAGES = ("sepa", "gtpo", "hicra")


def parse_transform_mode(mode: str) -> frozenset[str]:
    """Stages named by a retrain ``transform_mode``.

    ``"none"``, ``"gtpo"``, ``"gtpo_hicra"``, ``"gtpo_sepa"`` (retrain's names) or any
    ``_``/``+``/``,``-joined subset of ``{gtpo, sepa, hicra}``. The stages always run in
    the order sepa -> gtpo -> hicra whatever the spelling. ``sepa`` needs ``gtpo`` (it
    only reshapes the uncertainty GTPO consumes).
    """
    text = mode.strip().lower()
    if text in ("", "none"):
        return frozenset()
    parts = frozenset(p for p in re.split(r"[_+,\s]+", text) if p)
    unknown = parts - set(_STAGES)
    if unknown:
        raise ValueError(f"unknown transform stage(s) {sorted(unknown)} in {mode!r}; known: gtpo, sepa, hicra")
    if "sepa" in parts and "gtpo" not in parts:
        raise ValueError(f"transform_mode {mode!r}: sepa pools the uncertainty that gtpo consumes; use 'gtpo_sepa'")
    return parts


@dataclass(frozen=True)
class RetrainAdvantageConfig:
    """Names and knobs of the pipeline (retrain's ``[algorithm]`` / ``[gtpo]`` / ``[hicra]``).

    Attributes:
        advantage_mode: registered estimator (``grpo``, ``maxrl``, ``astar_po``) or a
            dotted path to ``fn(rewards [B], group_ids [B], **advantage_params) -> [B]``.
        advantage_params: keyword arguments of the estimator, e.g.
            ``{"normalize_by_std": True}`` for verl-style GRPO.
        transform_mode: see :func:`parse_transform_mode`; ``"none"`` broadcasts A_i.
        uncertainty_kind: ``surprisal`` | ``predictive_variance`` | ``shannon_entropy``.
        gtpo_beta: GTPO strength (0.1). hicra_alpha: HICRA amplification (0.2).
        skip_uninformative: drop all-equal-reward groups from ``loss_mask`` (True), as
            retrain skips them; False keeps their (zero-advantage) tokens in the loss.
        correct_threshold: reward above which a completion counts as correct (0.5).
    """

    advantage_mode: str = "grpo"
    advantage_params: Mapping[str, Any] = field(default_factory=dict)
    transform_mode: str = "none"
    uncertainty_kind: str = "surprisal"
    gtpo_beta: float = 0.1
    hicra_alpha: float = 0.2
    skip_uninformative: bool = True
    correct_threshold: float = CORRECT_THRESHOLD

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "RetrainAdvantageConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown retrain advantage config key(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**dict(values))


@dataclass
class RetrainAdvantages:
    """Output of :func:`compose_advantages`.

    Attributes:
        token_advantages: ``[B, L]`` float, 0 outside ``response_mask``.
        episode_advantages: ``[B]`` float, the estimator's output.
        informative: ``[B]`` bool, False for completions of all-equal-reward groups.
        loss_mask: ``[B, L]`` bool, ``response_mask`` minus skipped groups (pass it to the
            loss so skipped tokens do not dilute a token-mean).
        telemetry: flat ``dict[str, Tensor]`` (keys in the module docstring).
    """

    token_advantages: Tensor
    episode_advantages: Tensor
    informative: Tensor
    loss_mask: Tensor
    telemetry: dict[str, Tensor]


def _masked_mean_var(values: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    # Population variance, as retrain's entropy statistics report it.
    return masked_mean(values, mask), masked_var(values, mask, unbiased=False)


def compose_advantages(
    rewards: Tensor,
    group_ids: Tensor,
    response_mask: Tensor,
    *,
    config: RetrainAdvantageConfig | Mapping[str, Any] | None = None,
    logprobs: Tensor | None = None,
    entropy: Tensor | None = None,
    planning_mask: Tensor | None = None,
    sepa_lambda: float | Tensor = 0.0,
) -> RetrainAdvantages:
    """retrain's pipeline: advantage -> uncertainty -> transform (SEPA, GTPO) -> HICRA.

    Args:
        rewards: ``[B]`` reward per completion.
        group_ids: ``[B]`` int prompt group per completion.
        response_mask: ``[B, L]`` bool, True on generated tokens.
        config: :class:`RetrainAdvantageConfig` or a mapping of its fields (default: GRPO,
            no transform).
        logprobs: ``[B, L]`` sampled-token log-probs (GTPO with surprisal /
            predictive_variance).
        entropy: ``[B, L]`` full-distribution entropy (GTPO with shannon_entropy).
        planning_mask: ``[B, L]`` bool planning tokens (needed by sepa and hicra;
            see :func:`planning_mask_from_token_ids` / :func:`planning_mask_from_token_strs`).
        sepa_lambda: pooling strength, usually ``SEPAController.resolve_lambda(step)``.

    Returns:
        :class:`RetrainAdvantages`.
    """
    if config is None:
        cfg = RetrainAdvantageConfig()
    elif isinstance(config, RetrainAdvantageConfig):
        cfg = config
    else:
        cfg = RetrainAdvantageConfig.from_mapping(config)
    mask = response_mask.bool()
    if mask.dim() != 2 or mask.shape[0] != rewards.shape[0]:
        raise ValueError(f"response_mask must be [B, L] with B={rewards.shape[0]}, got {tuple(mask.shape)}")
    stages = parse_transform_mode(cfg.transform_mode)
    if stages & {"sepa", "hicra"} and planning_mask is None:
        raise ValueError(f"transform_mode {cfg.transform_mode!r} needs planning_mask=[B, L] bool")

    estimator = get_advantage_estimator(cfg.advantage_mode)
    episode = _as_float(torch.as_tensor(estimator(rewards, group_ids, **dict(cfg.advantage_params))))
    if episode.shape != rewards.shape:
        raise ValueError(f"advantage_mode {cfg.advantage_mode!r} returned shape {tuple(episode.shape)}, expected [B]")
    index, stats = _group_stats(rewards, group_ids)
    telemetry: dict[str, Tensor] = {}

    planning = planning_mask.bool() & mask if planning_mask is not None else None
    if "gtpo" in stages:
        # Padding may hold -inf / nan log-probs; zero it before any op whose backward
        # would multiply a zero gradient by a non-finite local derivative.
        lp = None if logprobs is None else torch.where(mask, _as_float(logprobs), 0.0)
        ent = None if entropy is None else torch.where(mask, _as_float(entropy), 0.0)
        raw = token_uncertainty(cfg.uncertainty_kind, logprobs=lp, entropy=ent)
        raw = torch.where(mask, raw, torch.zeros_like(raw))
        plan = planning if planning is not None else torch.zeros_like(mask)
        exec_tokens = mask & ~plan
        exec_mean, exec_var = _masked_mean_var(raw.detach(), exec_tokens)
        plan_mean, plan_var = _masked_mean_var(raw.detach(), plan)
        telemetry |= {
            "uncertainty_exec_mean": exec_mean,
            "uncertainty_exec_var": exec_var,
            "uncertainty_plan_mean": plan_mean,
            "uncertainty_plan_var": plan_var,
        }
        uncertainty = raw
        if "sepa" in stages:
            uncertainty = get_advantage_transform("sepa")(raw, plan, mask, lam=sepa_lambda)
        telemetry["uncertainty_exec_var_post"] = _masked_mean_var(uncertainty.detach(), exec_tokens)[1]
        token_adv = get_advantage_transform("gtpo")(episode, uncertainty, mask, beta=cfg.gtpo_beta)
    else:
        token_adv = torch.where(mask, episode[:, None], torch.zeros((), dtype=episode.dtype, device=episode.device))
    if "hicra" in stages:
        token_adv = get_advantage_transform("hicra")(token_adv, planning, alpha=cfg.hicra_alpha)

    informative = stats.informative[index]
    loss_mask = mask & informative[:, None] if cfg.skip_uninformative else mask

    # Group-level counts: the first completion of each group stands for it.
    fdtype = episode.dtype
    num_groups = stats.count.numel()
    order = torch.arange(index.numel(), device=mask.device)
    first_of_group = torch.zeros(num_groups, dtype=torch.long, device=mask.device)
    first_of_group = first_of_group.scatter_reduce(0, index, order, "amin", include_self=False)
    skipped = ~stats.informative
    r = _as_float(rewards).detach()
    # A skipped group's rewards are all equal: its first member's reward is the group's.
    group_correct = r[first_of_group] > cfg.correct_threshold
    telemetry |= {
        "groups": torch.tensor(float(num_groups), dtype=fdtype, device=mask.device),
        "groups_informative": (~skipped).sum().to(fdtype),
        "groups_skipped_all_correct": (skipped & group_correct).sum().to(fdtype),
        "groups_skipped_all_wrong": (skipped & ~group_correct).sum().to(fdtype),
        "correct_rate": (r > cfg.correct_threshold).to(fdtype).mean(),
        "episode_adv_mean": episode.detach().mean(),
        "episode_adv_abs_mean": episode.detach().abs().mean(),
        "token_adv_mean": masked_mean(token_adv.detach(), loss_mask),
        "token_adv_abs_mean": masked_mean(token_adv.detach().abs(), loss_mask),
        "sepa_lambda": torch.as_tensor(sepa_lambda, dtype=fdtype, device=mask.device).clamp(0.0, 1.0)
        if "sepa" in stages
        else torch.zeros((), dtype=fdtype, device=mask.device),
    }
    if planning is not None:
        telemetry["planning_token_frac"] = masked_mean(planning.to(fdtype), mask)
    return RetrainAdvantages(
        token_advantages=token_adv,
        episode_advantages=episode,
        informative=informative,
        loss_mask=loss_mask,
        telemetry=telemetry,
    )
