"""Planning tokens: where a completion says a strategic gram ("wait let me", "let me check", ...).

retrain's HICRA and SEPA treat those tokens apart from execution tokens. Two detectors
give the ``[B, L]`` bool planning mask: on token ids (:func:`planning_mask_from_token_ids`
with patterns from :func:`encode_strategic_grams`, fully on device) and on decoded token
text (:func:`planning_mask_from_token_strs`, whole-word matches in the normal form of
:func:`normalize_gram_text`, so grams split over sub-word tokens are found). Both match the
whole batch at once; no Python loop runs over completions or tokens.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from trainer_hooks.compat import resolve_options

__all__ = [
    "DEFAULT_STRATEGIC_GRAMS",
    "encode_strategic_grams",
    "normalize_gram_text",
    "parse_strategic_grams",
    "planning_mask_from_token_ids",
    "planning_mask_from_token_strs",
]

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
    window: int | None = None,
    compat: str | None = None,
) -> Tensor:
    """Planning tokens by matching grams in the decoded text of each completion.

    Default (``window=None``): each completion's fragments are concatenated (sub-word
    markers read as spaces, see :func:`normalize_gram_text`), grams are matched
    case-insensitively as whole words with any run of whitespace between their words
    (regex ``\\bwait\\s+let\\s+me\\b``), and every token overlapping a match is marked,
    so grams split over sub-word tokens are found. The whole batch is matched at once on a
    code-point tensor; the only host work is joining the strings and classifying the
    batch's distinct non-ASCII characters.

    ``window=5`` (or ``compat="retrain"``): retrain's ``identify_planning_tokens`` exactly
    (see :func:`_retrain_window_mask`): fragments are stripped and joined with one space,
    and from each start token a window of up to ``max(window, words of the longest
    gram)`` tokens grows until ``\\bgram\\b`` matches; every token from the window start
    through the end of the match is marked — up to four tokens *before* the gram — and a
    word split over two fragments is never found.

    Args:
        token_strs: per completion, its response token strings (ragged).
        grams: phrases; None / "" give the 18 defaults (JSON or comma strings accepted).
        length: ``L`` of the output (default: longest completion).
        window: retrain's ``max_window`` (None: the default matching above).
        compat: ``"retrain"`` sets ``window=5``.

    Returns:
        ``[B, L]`` bool, completion b's token j at ``[b, j]``.
    """
    window = resolve_options(
        "planning_mask_from_token_strs", compat, {"retrain": {"window": 5}}, {"window": None}, {"window": window}
    )["window"]
    gram_list = parse_strategic_grams(grams)
    if window is not None:
        return _retrain_window_mask(token_strs, gram_list, window, length, device)
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
        ((codes >= ord("a")) & (codes <= ord("z"))) | ((codes >= ord("0")) & (codes <= ord("9"))) | (codes == ord("_"))
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


def _clean_fragment(fragment: str) -> str:
    # retrain's _clean_token_fragment: SentencePiece / byte-level BPE space markers -> " ", strip.
    return fragment.replace("\u2581", " ").replace("\u0120", " ").strip()


def _retrain_window_mask(
    token_strs: Sequence[Sequence[str]],
    grams: Sequence[str],
    window: int,
    length: int | None,
    device: torch.device | str | None,
) -> Tensor:
    """retrain 0.3.2's ``identify_planning_tokens``, without its per-window regex loop.

    retrain: for each start token ``s``, append the cleaned fragments ``s, s+1, ..., e``
    (joined by one space, empty ones skipped) while ``e < s + W``
    (``W = max(window, words of the longest gram)``), and at the first ``e`` where some
    ``\\bgram\\b`` (case-insensitive) matches the window text, mark ``s..e``.

    The window text is a substring of the completion's whole joined text, and its ends
    sit on token starts / ends, which are spaces or the text's ends in the whole text, so
    ``\\b`` reads the same in both: a window matches iff an occurrence of a gram in the whole
    text lies inside it. So each gram is searched once per completion (overlapping
    occurrences included), and the first ``e`` for start ``s`` is the least last-token
    of the occurrences whose first token is ``>= s`` (a suffix minimum over occurrences
    sorted by first token), kept when ``e - s < W``.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    patterns = [re.compile(r"(?=(\b" + re.escape(g) + r"\b))", re.IGNORECASE) for g in grams]
    span = max([window, *(len(g.split()) for g in grams)])
    num_seqs = len(token_strs)
    width = max(map(len, token_strs), default=0) if length is None else length
    firsts: list[int] = []
    lasts: list[int] = []
    offset = 0
    for tokens in token_strs:
        cleaned = [_clean_fragment(t) for t in tokens]
        owner: list[int] = []  # token of each character of the joined text (-1: a joining space)
        for j, piece in enumerate(cleaned):
            if piece:
                if owner:
                    owner.append(-1)
                owner.extend([j] * len(piece))
        text = " ".join(piece for piece in cleaned if piece)
        occurrences: list[tuple[int, int]] = []
        for pattern in patterns:
            for found in pattern.finditer(text):
                start, stop = found.span(1)
                hit = [t for t in owner[start:stop] if t >= 0]
                if hit:
                    occurrences.append((hit[0], hit[-1]))
        if occurrences:
            occurrences.sort()
            first = torch.tensor([o[0] for o in occurrences], dtype=torch.long)
            last = torch.tensor([o[1] for o in occurrences], dtype=torch.long)
            suffix_min = last.flip(0).cummin(0).values.flip(0)
            starts = torch.arange(len(tokens), dtype=torch.long)
            pick = torch.searchsorted(first, starts)  # first occurrence starting at or after s
            has = pick < first.numel()
            end = suffix_min[pick.clamp(max=first.numel() - 1)]
            keep = has & (end - starts < span)
            firsts.extend((starts[keep] + offset).tolist())
            lasts.extend((end[keep] + offset).tolist())
        offset += len(tokens)
    seq_lens = torch.tensor(list(map(len, token_strs)), dtype=torch.long)
    covered = _cover(torch.tensor(firsts, dtype=torch.long), torch.tensor(lasts, dtype=torch.long), offset)
    out = torch.zeros(num_seqs, width, dtype=torch.bool)
    seq_of_tok = torch.repeat_interleave(torch.arange(num_seqs), seq_lens)
    pos_of_tok = torch.arange(offset) - torch.repeat_interleave(torch.cumsum(seq_lens, 0) - seq_lens, seq_lens)
    inside = pos_of_tok < width
    out[seq_of_tok[inside], pos_of_tok[inside]] = covered[inside]
    return out.to(device) if device is not None else out
