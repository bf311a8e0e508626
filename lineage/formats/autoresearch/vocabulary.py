"""The words of a results table's columns: the names of columns (status, description,
parent, commit, id, long-format name/value) and of directions (``loss`` lower, ``score``
higher, ``memory_gb`` a resource, ``tok_per_sec`` a rate): :func:`name_tokens`,
:func:`direction_of_name`, :func:`is_resource`, :func:`is_id_column`.

The status words (:mod:`~lineage.formats.autoresearch.status_words`: :func:`map_status`) and
what a cell is worth (:mod:`~lineage.formats.autoresearch.cells`: :func:`parse_number`,
:func:`metric_value`, :func:`typed_cell`) have modules of their own, re-exported here.

Pure values and functions; no layout, no file. The other modules of
:mod:`lineage.formats.autoresearch` read these tables.
"""

from __future__ import annotations

import re

from lineage.domain import MAX_LONG_TEXT, MAX_SHORT_TEXT, FailureLabel

# the status words and the cell values have modules of their own; re-exported here, where
# the other modules of the package (and the package's ``__init__``) import them from
from lineage.formats.autoresearch.cells import (
    PLACEHOLDER_NUMBERS,
    PLACEHOLDERS,
    is_number,
    metric_value,
    parse_number,
    typed_cell,
)
from lineage.formats.autoresearch.status_words import (
    ADVANCING,
    CRASH_LIKE,
    STATUS_WORDS,
    UNKNOWN_LABEL,
    map_status,
    normalize_word,
    parse_status_map,
)

__all__ = [
    "ADVANCING",
    "COMMIT_COLUMN_NAMES",
    "COUNTED_WORDS",
    "CRASH_LIKE",
    "DESCRIPTION_COLUMN_NAMES",
    "HEX",
    "HIGHER_WORDS",
    "ID_COLUMN_NAMES",
    "ID_SUFFIXES",
    "LONG_NAME_COLUMNS",
    "LONG_NAME_SURE",
    "LONG_VALUE_COLUMNS",
    "LOWER_WORDS",
    "NOT_MEASURED_WORDS",
    "NUMBER_FIELD_COLUMNS",
    "PARENT_COLUMN_NAMES",
    "PLACEHOLDERS",
    "PLACEHOLDER_NUMBERS",
    "RESOURCE_WORDS",
    "SECOND_UNITS",
    "STATUS_COLUMN_NAMES",
    "STATUS_WORDS",
    "TEXT_FIELD_COLUMNS",
    "TIME_UNITS",
    "UNKNOWN_LABEL",
    "VERDICT_WORDS",
    "direction_of_name",
    "is_id_column",
    "is_number",
    "is_rate",
    "is_resource",
    "map_status",
    "metric_value",
    "name_tokens",
    "normalize_word",
    "parse_number",
    "parse_status_map",
    "typed_cell",
]

STATUS_COLUMN_NAMES = (
    "status",
    "verdict",
    "decision",
    "result",
    "outcome",
    "kept_or_reverted",
    "keep_or_discard",
    "kept_or_discarded",
    "keep_discard",
    "kept",
    "action",
    "state",
    "label",
    "judgement",
    "judgment",
)
DESCRIPTION_COLUMN_NAMES = (
    "description",
    "desc",
    "hypothesis",
    "idea",
    "change",
    "changes",
    "experiment",
    "summary",
    "message",
    "comment",
    "comments",
    "what",
    "notes",
    "note",
)
PARENT_COLUMN_NAMES = ("parent", "parent_exp", "parent_commit", "parent_id", "parent_hash", "parent_sha")
COMMIT_COLUMN_NAMES = ("commit", "hash", "sha", "git_hash", "commit_hash", "git_commit", "rev", "revision", "sha1")
#: Names of columns that identify a row or time it: never the metric.
ID_COLUMN_NAMES = frozenset(
    {
        *COMMIT_COLUMN_NAMES,
        "id",
        "run",
        "run_id",
        "exp",
        "exp_id",
        "experiment_id",
        "iter",
        "iteration",
        "idx",
        "index",
        "trial",
        "trial_id",
        "step",
        "round",
        "gen",
        "generation",
        "#",
        "n",
        "no",
        "num",
        "timestamp",
        "time",
        "date",
        "datetime",
        "epoch",
        "seed",
        "attempt",
        "try",
    }
)
LOWER_WORDS = frozenset(
    {
        "loss",
        "bpb",
        "bpc",
        "perplexity",
        "ppl",
        "error",
        "err",
        "wer",
        "cer",
        "mse",
        "mae",
        "rmse",
        "nll",
        "latency",
        "regret",
        "distance",
        "cost",
        "fid",
        "lpips",
        "bits",
        "entropy",
        "divergence",
        "kl",
        "mape",
        "smape",
        "drawdown",
        "runtime",
        "duration",
    }
)
HIGHER_WORDS = frozenset(
    {
        "score",
        "sharpe",
        "sortino",
        "accuracy",
        "acc",
        "reward",
        "return",
        "returns",
        "throughput",
        "f1",
        "auc",
        "auroc",
        "bleu",
        "rouge",
        "precision",
        "recall",
        "winrate",
        "win",
        "success",
        "pass",
        "elo",
        "tps",
        "mfu",
        "speedup",
        "map",
        "ndcg",
        "r2",
        "em",
        "exact",
        "match",
        "fitness",
        "profit",
        "pnl",
        "gain",
        "tflops",
        "flops",
        "qps",
        "iou",
        "dice",
        "psnr",
        "ssim",
        "top1",
        "top5",
        "hit",
        "hits",
        "mrr",
        "coverage",
        "solved",
        "correct",
        "tokens_per_sec",
        "tok_s",
        "samples_per_sec",
    }
)
#: Resource columns: numeric, but rarely the metric (a rate such as ``tok_sec`` is not one:
#: see :func:`is_rate`).
RESOURCE_WORDS = frozenset(
    {
        "memory",
        "mem",
        "gb",
        "mb",
        "vram",
        "gpu",
        "seconds",
        "secs",
        "sec",
        "s",
        "minutes",
        "min",
        "hours",
        "time",
        "duration",
        "params",
        "parameters",
        "tokens",
        "steps",
        "epochs",
        "lr",
        "batch",
        "size",
        "bytes",
        "flops_total",
        "cost_usd",
        "usd",
        "seed",
    }
)
#: Units of time: after ``per`` they make a name a rate; so do :data:`SECOND_UNITS` right
#: after a counted thing.
TIME_UNITS = frozenset(
    {
        "s",
        "sec",
        "secs",
        "second",
        "seconds",
        "min",
        "mins",
        "minute",
        "minutes",
        "hr",
        "hrs",
        "hour",
        "hours",
        "day",
        "days",
    }
)
SECOND_UNITS = frozenset({"s", "sec", "secs", "second", "seconds"})
#: Things a loop counts per unit of time (``tok_sec``, ``samples_s``, ``generations_per_s``).
COUNTED_WORDS = frozenset(
    {
        "tok",
        "toks",
        "token",
        "tokens",
        "sample",
        "samples",
        "img",
        "imgs",
        "image",
        "images",
        "it",
        "iter",
        "iters",
        "iteration",
        "iterations",
        "step",
        "steps",
        "gen",
        "gens",
        "generation",
        "generations",
        "req",
        "reqs",
        "request",
        "requests",
        "query",
        "queries",
        "op",
        "ops",
        "frame",
        "frames",
        "item",
        "items",
        "example",
        "examples",
        "seq",
        "seqs",
        "sequence",
        "sequences",
        "word",
        "words",
        "char",
        "chars",
        "event",
        "events",
        "episode",
        "episodes",
        "game",
        "games",
        "call",
        "calls",
        "tx",
        "msg",
        "msgs",
        "message",
        "messages",
        "row",
        "rows",
        "record",
        "records",
        "pixel",
        "pixels",
    }
)
#: The last word of a column that identifies or times a row (``candidate_id``,
#: ``created_at``, ``ts``, ``run_date``): never the metric.
ID_SUFFIXES = frozenset({"id", "ids", "ts", "at", "timestamp", "datetime", "date"})
#: Long format: a column naming each row's metric, and the column holding its value.
LONG_NAME_COLUMNS = (
    "metric",
    "metric_name",
    "name",
    "key",
    "measure",
    "variable",
    "quantity",
    "stat",
    "statistic",
    "kpi",
)
LONG_VALUE_COLUMNS = ("value", "metric_value", "val", "reading", "amount", "measurement")
#: A value column's other words that say it is not the measured value (``predicted_value``).
NOT_MEASURED_WORDS = frozenset(
    {
        "predicted",
        "prediction",
        "expected",
        "target",
        "goal",
        "threshold",
        "prior",
        "baseline",
        "forecast",
        "estimated",
        "estimate",
        "min",
        "max",
    }
)
#: Names of a long format's name column that say so without a repeated name.
LONG_NAME_SURE = frozenset({"metric", "metric_name"})
#: Words that record a loop's verdict and never name a column: one in line 1 says line 1
#: is data, not a header.
VERDICT_WORDS = frozenset(
    {
        *(label.value for label in FailureLabel if label not in (FailureLabel.BASELINE, FailureLabel.RUNNING)),
        "discarded",
        "crashed",
        "revert",
        "reverted",
        "reverting",
        "accepted",
        "rejected",
        "improved",
        "regressed",
        "keeper",
        "oom",
    }
)
#: Columns that fill a trial field of the same name (text fields, then number fields).
TEXT_FIELD_COLUMNS = {
    "timestamp": MAX_SHORT_TEXT,
    "specialist": MAX_SHORT_TEXT,
    "domain": MAX_SHORT_TEXT,
    "job_name": MAX_SHORT_TEXT,
    "snapshot_path": MAX_SHORT_TEXT,
    "notes": MAX_LONG_TEXT,
    "expected_delta": MAX_LONG_TEXT,
}
NUMBER_FIELD_COLUMNS = ("val_bpb", "train_s", "total_s")

HEX = re.compile(r"[0-9a-fA-F]{7,40}")
_WORD_SPLIT = re.compile(r"[^0-9a-zA-Z]+|(?<=[a-z])(?=[A-Z])")
_LETTERS_THEN_DIGITS = re.compile(r"([a-z]{2,})[0-9]+")


def name_tokens(name: str) -> list[str]:
    """``val_bpb`` -> ``["val", "bpb"]``; ``winRate`` -> ``["win", "rate"]``; also the whole
    name, and the letters of a word that ends in digits (``val_map50`` -> ``map50``, ``map``)."""
    tokens = [t.lower() for t in _WORD_SPLIT.split(name) if t]
    whole = name.strip().lower().replace(" ", "_")
    stems = [m.group(1) for t in tokens if (m := _LETTERS_THEN_DIGITS.fullmatch(t))]
    return [whole, *tokens, *stems]


def is_rate(name: str) -> bool:
    """A count per unit of time -- ``tok_per_sec``, ``tok_sec``, ``tg_tok_s``,
    ``generations_per_s``, ``samples/sec`` -- a throughput: higher is better, and not a
    resource although its unit (``sec``) is one. A time unit after ``per``, or right after
    a counted thing (:data:`COUNTED_WORDS`, :data:`SECOND_UNITS`); ``time_s``, ``train_s``, ``wall_sec`` are
    durations, not rates."""
    tokens = [t.lower() for t in _WORD_SPLIT.split(name) if t]
    for before, unit in zip(tokens, tokens[1:]):
        if (before == "per" and unit in TIME_UNITS) or (before in COUNTED_WORDS and unit in SECOND_UNITS):
            return True
    return False


def is_resource(name: str) -> bool:
    """A column of what a run cost (``memory_gb``, ``seconds``, ``params``): numeric, but
    rarely the metric. A rate is not a resource."""
    return bool(set(name_tokens(name)) & RESOURCE_WORDS) and not is_rate(name)


def is_id_column(name: str) -> bool:
    """A column that identifies or times a row -- :data:`ID_COLUMN_NAMES`, or a name whose
    last word is one of :data:`ID_SUFFIXES` (``candidate_id``, ``created_at``, ``ts``) --
    never the metric, whatever its cells."""
    lowered = name.strip().lower().replace(" ", "_").replace("-", "_")
    if lowered in ID_COLUMN_NAMES:
        return True
    tokens = [t.lower() for t in _WORD_SPLIT.split(name) if t]
    return bool(tokens) and tokens[-1] in ID_SUFFIXES


def direction_of_name(name: str) -> bool | None:
    """True (lower is better), False (higher), None: the name does not say. A rate
    (:func:`is_rate`) is a throughput: higher."""
    if is_rate(name):
        return False
    tokens = set(name_tokens(name))
    lower = bool(tokens & LOWER_WORDS)
    higher = bool(tokens & HIGHER_WORDS)
    if lower == higher:
        return None
    return lower
