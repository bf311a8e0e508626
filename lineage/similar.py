"""'Was this tried?': past trials ranked by how close their text is to a new idea.

This module owns the text rule (how a trial's text becomes search tokens and concepts) and
the ranking rule; the SQL that finds candidates is ``lineage.store.search`` and the use-case
is ``ledger.agent.find_similar``. It imports no SQL and no model: an optional embedding ranker
plugs in through :class:`Ranker`.

The rule in full -- tokens, the ML vocabulary, the candidates, the score, ``similar_prior``'s
shortlist, the thresholds and where each part lives -- is ``docs/similarity.md``.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lineage import ml_concepts
from lineage.word_closeness import QueryCloseness

__all__ = [
    "CANDIDATES",
    "PRIOR_PER_BAND",
    "PRIOR_RECENT",
    "SKETCH_BANDS",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TOKENS",
    "MIN_SCORE",
    "PRIOR_LIMIT",
    "PRIOR_THRESHOLD",
    "SPELLINGS",
    "STOP_WORDS",
    "Candidate",
    "FuzzyTokenRanker",
    "Ranker",
    "Similar",
    "concepts",
    "query_terms",
    "rank",
    "search_text",
    "tokens",
    "vocabulary_table",
]

#: Longest query text accepted, in characters (a longer one is bad input).
MAX_QUERY_CHARS = 2_000
#: Distinct query tokens used for retrieval (the rest still count in the score).
MAX_QUERY_TOKENS = 24
#: Candidates read from the database per query, at most (``similar_prior``: its shortlist).
CANDIDATES = 200
#: Results below this score are left out.
MIN_SCORE = 0.3
#: ``similar_prior``: earlier trials at least this close, at most PRIOR_LIMIT of them.
PRIOR_THRESHOLD = 0.6
PRIOR_LIMIT = 3
#: ``similar_prior``'s shortlist (``docs/similarity.md``, "Candidates of similar_prior"): the newest
#: PRIOR_RECENT trials, and per sketch band the newest PRIOR_PER_BAND sharing it.
PRIOR_RECENT = 10
PRIOR_PER_BAND = 3
#: Min-hashes of a trial's concept set kept in ``trial_sketch`` (one row each).
SKETCH_BANDS = 4
#: Longest token kept, in characters (PostgreSQL skips words over 2,047 bytes).
MAX_TOKEN_CHARS = 64

#: English function words: they carry no idea, and every trial has them.
STOP_WORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have if in into is it its
    of on or our should so than that the their then there these this those to try tried was we were what
    when which while will with without would you your""".split()
)

#: Equivalent spellings of ML terms: a concept (one token, as it is searched and scored)
#: and its other spellings, as people write them (split into tokens like any text). The
#: longest spelling wins (``embedding dim`` is ``dmodel``, ``embedding`` is ``emb``).
SPELLINGS: dict[str, tuple[str, ...]] = {
    "lr": ("learning rate", "learning rates", "learningrate", "lrate", "step size"),
    "bs": ("batch size", "batch sizes", "batchsize", "bsz", "microbatch size"),
    "wd": ("weight decay", "weightdecay", "l2 penalty", "decoupled weight decay"),
    "ln": ("layer norm", "layernorm", "layer normalization", "layer normalisation", "layer norms"),
    "bn": ("batch norm", "batchnorm", "batch normalization", "batch normalisation"),
    "rmsnorm": ("rms norm", "rms normalization", "rms normalisation", "root mean square norm"),
    "attn": ("attention", "attentions", "self attention", "self attn"),
    "ffn": ("mlp", "feed forward", "feedforward", "feed forward network", "ff layer"),
    "emb": ("embedding", "embeddings", "embed", "embeds"),
    "dmodel": (
        "d model",
        "model dim",
        "model dimension",
        "hidden size",
        "hidden dim",
        "hidden dimension",
        "embedding dim",
        "embedding dimension",
        "n embd",
        "width",
    ),
    "nlayers": ("n layer", "n layers", "nlayer", "num layers", "number of layers", "layer count", "depth"),
    "nheads": ("n head", "n heads", "nhead", "num heads", "number of heads", "head count"),
    "seqlen": ("seq len", "sequence length", "context length", "ctx len", "context window", "block size"),
    "gradclip": (
        "grad clip",
        "gradient clipping",
        "gradient clip",
        "grad clipping",
        "clip grad",
        "clip grad norm",
        "grad norm clipping",
        "gradient norm clipping",
    ),
    "warmup": ("warm up", "warmup steps", "warm up steps", "lr warmup"),
    "dropout": ("drop out",),
    "ema": ("exponential moving average",),
    "ckpt": ("checkpoint", "checkpoints"),
    "init": ("initialization", "initialisation", "initialize", "initialise", "initialized", "initialised"),
    "params": ("parameters", "param count", "parameter count", "param"),
    "optim": ("optimizer", "optimiser", "optimizers", "optimisers"),
    "hparams": ("hyperparameters", "hyperparameter", "hyper parameters", "hparam"),
    "moe": ("mixture of experts",),
    "rope": (
        "rotary embedding",
        "rotary embeddings",
        "rotary position embedding",
        "rotary positional embedding",
        "rotary positional embeddings",
    ),
    "vocab": ("vocabulary", "vocab size", "vocabulary size"),
    "bpe": ("byte pair encoding", "byte level bpe"),
    "relu2": ("relu squared", "squared relu", "relu 2"),
    "softcap": ("logit softcap", "logit soft cap", "soft cap", "softcapping", "logit softcapping"),
}

_TAG = re.compile(r"<[^<>]{0,200}>")
_WORD = re.compile(r"[^\W_]+")
# camelCase and ACRONYMWords: where an identifier's words meet (before case folding)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def tokens(text: str) -> list[str]:
    """The search tokens of ``text`` in order, stop-words included (``docs/similarity.md``, "Tokens")."""
    if not text:
        return []
    text = unicodedata.normalize("NFKC", _TAG.sub(" ", text)).casefold()
    if not text.isascii():
        text = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
        text = unicodedata.normalize("NFKC", text)
    return [word[:MAX_TOKEN_CHARS] for word in _WORD.findall(text)]


class _Spellings:
    """:data:`SPELLINGS` as look-up tables (built once per table)."""

    def __init__(self, table: dict[str, tuple[str, ...]]) -> None:
        self.table = table
        #: a spelling's tokens -> its concept
        self.concept: dict[tuple[str, ...], str] = {}
        #: a concept -> every spelling's tokens (the concept's own first)
        self.forms: dict[str, tuple[tuple[str, ...], ...]] = {}
        for concept, spellings in table.items():
            forms = [(concept,), *(tuple(tokens(spelling)) for spelling in spellings)]
            for form in forms:
                self.concept.setdefault(form, concept)
            self.forms[concept] = tuple(dict.fromkeys(forms))
        self.longest = max((len(form) for form in self.concept), default=1)
        #: names this table in stored concepts: a value stored under another table is
        #: recomputed from the text (a release that adds spellings needs no rewrite)
        import hashlib

        self.tag = hashlib.blake2b(repr(sorted(table.items())).encode("utf-8"), digest_size=4).hexdigest()
        #: a one-word spelling -> its concept
        self.single = {form[0]: concept for form, concept in self.concept.items() if len(form) == 1}
        #: the first word of a spelling of several words -> the longest such spelling's length
        self.starts: dict[str, int] = {}
        for form in self.concept:
            if len(form) > 1:
                self.starts[form[0]] = max(self.starts.get(form[0], 0), len(form))


_SPELLINGS: _Spellings | None = None
_TABLES: tuple[object, object] | None = None


def vocabulary_table() -> dict[str, tuple[str, ...]]:
    """:data:`SPELLINGS` and ``lineage.ml_concepts.CONCEPTS`` as one table: each concept
    with its spellings, then the other words that name it."""
    from lineage.ml_concepts import CONCEPTS

    table = {concept: tuple(spellings) for concept, spellings in SPELLINGS.items()}
    for concept, words in CONCEPTS.items():
        table[concept] = tuple(dict.fromkeys((*table.get(concept, ()), *words)))
    return table


def _spellings() -> _Spellings:
    global _SPELLINGS, _TABLES
    tables = (SPELLINGS, ml_concepts.CONCEPTS)  # rebuilt when either is replaced (a test, a plugin)
    if _SPELLINGS is None or _TABLES is None or _TABLES[0] is not tables[0] or _TABLES[1] is not tables[1]:
        _SPELLINGS, _TABLES = _Spellings(vocabulary_table()), tables
    return _SPELLINGS


def concepts(text: str) -> list[str]:
    """The concepts of ``text`` in order (``docs/similarity.md``, "ML vocabulary"): identifiers split,
    then the longest spelling of :data:`SPELLINGS` at each position as its concept, every
    other token as itself; stop-words included."""
    if not text:
        return []
    words = tokens(_CAMEL.sub(" ", text))
    table = _spellings()
    single, starts, concept_of = table.single, table.starts, table.concept
    out: list[str] = []
    i, n = 0, len(words)
    while i < n:
        word = words[i]
        longest = starts.get(word)
        if longest is not None:  # a spelling of several words may start here: the longest wins
            for length in range(min(longest, n - i), 1, -1):
                concept = concept_of.get(tuple(words[i : i + length]))
                if concept is not None:
                    out.append(concept)
                    i += length
                    break
            else:
                out.append(single.get(word, word))
                i += 1
        else:
            out.append(single.get(word, word))
            i += 1
    return out


def search_text(hypothesis: str, notes: str) -> str:
    """What the store writes to ``trials.search_text``: the tokens of both, space-joined."""
    return " ".join(tokens(hypothesis) + tokens(notes))


def content_tokens(text: str) -> list[str]:
    """Distinct concepts of ``text`` that are not stop-words, in first-seen order."""
    return list(dict.fromkeys(word for word in concepts(text) if word not in STOP_WORDS))


def stored_concepts(hypothesis: str, notes: str) -> str:
    """What the store writes to ``trials.search_concepts``: the tag of the spelling table
    in use, a tab, the content concepts (:func:`content_tokens`) of ``hypothesis``, a
    tab, those of ``notes``; each list space-joined (concepts hold neither)."""
    return _spellings().tag + "\t" + " ".join(content_tokens(hypothesis)) + "\t" + " ".join(content_tokens(notes))


def split_concepts(stored: str) -> tuple[list[str], list[str]] | None:
    """``(hypothesis concepts, notes concepts)`` of a ``trials.search_concepts`` value;
    None when it was computed with another spelling table (then the texts count)."""
    tag, _, rest = stored.partition("\t")
    if tag != _spellings().tag:
        return None
    hypothesis, _, notes = rest.partition("\t")
    return hypothesis.split(), notes.split()


def prior_query(hypothesis: str, notes: str, concepts: str | None = None) -> tuple[str, list[str]]:
    """``similar_prior``'s query for a trial: its text (hypothesis and notes, at most
    MAX_QUERY_CHARS) and content concepts (from its ``stored_concepts`` when given)."""
    text = f"{hypothesis}\n{notes}"[:MAX_QUERY_CHARS]
    split = split_concepts(concepts) if concepts is not None else None
    return text, (list(dict.fromkeys(split[0] + split[1])) if split is not None else content_tokens(text))


def sketch(concepts: Any) -> list[int]:
    """The :data:`SKETCH_BANDS` min-hash keys of a set of concepts (empty for none): band
    ``i`` is the smallest ``i``-th 64-bit word of the BLAKE2b digests of the concepts (a
    min-hash under the ``i``-th of independent hash functions), with ``i`` in its low
    bits, as a non-negative 62-bit number. Two trials share band ``i`` with a probability
    equal to the Jaccard similarity of their concept sets; the same on every process and
    backend."""
    words = set(concepts)
    if not words:
        return []
    rows = [_word_hashes(word) for word in words]
    return [(low & ((1 << 58) - 1)) << 4 | band for band, low in enumerate(map(min, zip(*rows)))]


@functools.lru_cache(maxsize=1 << 12)
def _word_hashes(word: str) -> tuple[int, ...]:
    """The :data:`SKETCH_BANDS` 64-bit words of ``word``'s BLAKE2b digest (:func:`sketch`),
    kept per word: a loop's texts reuse a small vocabulary, and a batch's sketches
    hashed the same words again for every trial. 4,096 words hold a loop's vocabulary
    in about 2 MB; 65,536 held 30 MB, which a long night of fresh numbers and commit
    hashes filled at a steady pace, and showed as RSS that kept rising (issue 36)."""
    import hashlib
    import struct

    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8 * SKETCH_BANDS).digest()
    return struct.unpack(f"<{SKETCH_BANDS}Q", digest)


#: A retrieval term: a token (a prefix term from 3 characters), or the alternatives of a
#: concept of :data:`SPELLINGS`, each the tokens of one spelling (an exact phrase).
Term = "str | tuple[tuple[str, ...], ...]"


def query_terms(text: str) -> list[Any]:
    """The retrieval terms of a query: its first MAX_QUERY_TOKENS distinct content
    concepts, a concept of :data:`SPELLINGS` as the alternatives of its spellings."""
    forms = _spellings().forms
    return [forms.get(concept, concept) for concept in content_tokens(text)[:MAX_QUERY_TOKENS]]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A past trial as the ranker sees it (a row of ``lineage.store.search``)."""

    seq: int
    exp_id: str
    status: str
    core_metric: float | None
    delta_vs_best: float | None
    hypothesis: str
    notes: str
    #: ``trials.search_concepts`` (:func:`stored_concepts`); None: computed from the texts
    concepts: str | None = None


@dataclass(frozen=True, slots=True)
class Similar:
    """One answer to 'was this tried?': the trial and how close it is, in [0, 1].

    ``delta_vs_best``: the trial's metric against the best before it (as stored)."""

    exp_id: str
    status: str
    core_metric: float | None
    delta_vs_best: float | None
    score: float
    hypothesis: str
    seq: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "exp_id": self.exp_id,
            "status": self.status,
            "core_metric": self.core_metric,
            "delta_vs_best": self.delta_vs_best,
            "score": self.score,
            "hypothesis": self.hypothesis,
        }


class Ranker(Protocol):
    """Scores candidates against a query: one float in [0, 1] per candidate, in order.

    The seam for another ranker (an embedding model, say): pass one to
    ``Ledger.find_similar``; candidates still come from the databases' text indexes.
    """

    def scores(self, query: str, candidates: Sequence[Candidate]) -> list[float]: ...


class FuzzyTokenRanker:
    """The default ranker: token F2 of the query against hypothesis, notes and both."""

    def scores(
        self, query: str, candidates: Sequence[Candidate], *, query_concepts: Sequence[str] | None = None
    ) -> list[float]:
        """``query_concepts``: the query's content concepts when the caller has them."""
        closeness = QueryCloseness(content_tokens(query) if query_concepts is None else query_concepts)
        # candidates often repeat a text (the same idea tried again): each distinct text
        # is tokenised and scored once per call
        fields: dict[str, tuple[frozenset[str], float]] = {}

        def field(text: str) -> tuple[frozenset[str], float]:
            found = fields.get(text)
            if found is None:
                words = frozenset(content_tokens(text))
                found = fields[text] = (words, closeness.f2(words))
            return found

        by_concepts: dict[str, tuple[frozenset[str], float]] = {"": (frozenset(), 0.0)}

        def stored(part: str) -> tuple[frozenset[str], float]:
            found = by_concepts.get(part)
            if found is None:
                words = frozenset(part.split())
                found = by_concepts[part] = (words, closeness.f2(words))
            return found

        tag = _spellings().tag + "\t"
        out = []
        for candidate in candidates:
            if candidate.concepts is not None and candidate.concepts.startswith(tag):
                # computed at write (trials.search_concepts), with this spelling table
                hypothesis_part, _, notes_part = candidate.concepts[len(tag) :].partition("\t")
                hypothesis, hypothesis_score = stored(hypothesis_part)
                notes, notes_score = stored(notes_part)
            else:
                hypothesis, hypothesis_score = field(candidate.hypothesis)
                notes, notes_score = field(candidate.notes)
            best = max(hypothesis_score, notes_score)
            # a field without a word close to the query (score 0) adds only to the length
            # of the two together, which then scores no higher than the other field alone
            if hypothesis_score > 0.0 and notes_score > 0.0 and best < 1.0:
                best = max(best, closeness.f2(hypothesis | notes))
            out.append(round(best, 4))
        return out


DEFAULT_RANKER = FuzzyTokenRanker()


def rank(
    query: str,
    candidates: Sequence[Candidate],
    *,
    limit: int,
    min_score: float = MIN_SCORE,
    ranker: Ranker | None = None,
    query_concepts: Sequence[str] | None = None,
) -> list[Similar]:
    """The ``limit`` closest candidates scoring at least ``min_score``: by score
    descending, then newest first. ``query_concepts``: the query's content concepts, when
    known (the default ranker then skips computing them)."""
    if ranker is None:
        scores = DEFAULT_RANKER.scores(query, candidates, query_concepts=query_concepts)
    else:
        scores = ranker.scores(query, candidates)
    kept = [(score, c) for score, c in zip(scores, candidates) if score >= min_score]
    kept.sort(key=lambda pair: (-pair[0], -pair[1].seq))
    return [
        Similar(
            exp_id=c.exp_id,
            status=c.status,
            core_metric=c.core_metric,
            delta_vs_best=c.delta_vs_best,
            score=score,
            hypothesis=c.hypothesis,
            seq=c.seq,
        )
        for score, c in kept[:limit]
    ]


def checked_query(text: Any, *, field: str = "text") -> list[Any]:
    """The retrieval terms of a query typed by someone, or :class:`InvalidInput` naming
    ``field``: not text, empty, longer than MAX_QUERY_CHARS, or no words once markup,
    punctuation and stop-words are left out."""
    from lineage.errors import InvalidInput

    if not isinstance(text, str):
        raise InvalidInput(field, "must be text")
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(field, f"is {len(text):,} characters long; at most {MAX_QUERY_CHARS:,} are searched")
    if not text.strip():
        raise InvalidInput(field, "is empty; give the idea to look for")
    terms = query_terms(text)
    if not terms:
        raise InvalidInput(field, "has no words to search for (only stop-words, punctuation or markup)")
    return terms


def checked_limit(limit: Any, *, field: str = "limit", most: int = 50) -> int:
    from lineage.errors import InvalidInput

    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
        raise InvalidInput(field, f"must be a whole number from 1 to {most}")
    return limit
