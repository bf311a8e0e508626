"""The words of a results table: status words and the labels they map to, the names of
columns (status, description, parent, commit, id) and of directions (``loss`` lower,
``score`` higher, ``memory_gb`` a resource), and what a cell is worth: :func:`map_status`,
:func:`parse_number`, :func:`metric_value` (``-999``, ``n/a``, a crash's ``0`` are no
result) and :func:`typed_cell` (a numeric extra column's cell).

Pure values and functions; no layout, no file. The other modules of
:mod:`lineage.formats.autoresearch` read these tables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from lineage.domain import (
    MAX_LONG_TEXT,
    MAX_SHORT_TEXT,
    NO_RESULT_LABELS,
    NO_RESULT_NUMBERS,
    FailureLabel,
    is_no_result,
)
from lineage.errors import InvalidInput


def _words(label: FailureLabel, *words: str) -> dict[str, FailureLabel]:
    return {w: label for w in words}


#: Status words (normalised: stripped, lower case, ``-`` and spaces as ``_``) -> label.
#: Every label's own name maps to itself. A word not here maps to ``discard`` (see
#: :func:`map_status`).
STATUS_WORDS: dict[str, FailureLabel] = {
    **{label.value: label for label in FailureLabel},
    **_words(
        FailureLabel.KEEP,
        "kept",
        "keeper",
        "accept",
        "accepted",
        "improved",
        "improvement",
        "improves",
        "better",
        "new_best",
        "best",
        "success",
        "successful",
        "succeeded",
        "pass",
        "passed",
        "ok",
        "good",
        "win",
        "won",
        "advance",
        "advanced",
        "committed",
        "merged",
        "merge",
        "yes",
        "y",
        "true",
        "✓",
        "✔",
        "✅",
        "+",
        # other languages
        "behalten",
        "beibehalten",
        "garder",
        "gardé",
        "garde",
        "conservé",
        "conserver",
        "mantener",
        "mantenido",
        "conservado",
        "manter",
        "mantido",
        "tenere",
        "tenuto",
        "保留",
        "保持",
        "採用",
        "유지",
    ),
    **_words(
        FailureLabel.DISCARD,
        "discarded",
        "revert",
        "reverted",
        "reverting",
        "reject",
        "rejected",
        "worse",
        "regress",
        "regressed",
        "regression",
        "no_improvement",
        "no_gain",
        "rollback",
        "rolled_back",
        "reset",
        "drop",
        "dropped",
        "skip",
        "skipped",
        "no",
        "n",
        "false",
        "neutral",
        "same",
        "equal",
        "tie",
        "✗",
        "✘",
        "❌",
        "-",
        "verworfen",
        "verwerfen",
        "zurückgesetzt",
        "rejeté",
        "rejete",
        "annulé",
        "descartar",
        "descartado",
        "descartada",
        "revertido",
        "scartato",
        "丢弃",
        "放弃",
        "回滚",
        "不採用",
        "却下",
        "폐기",
    ),
    **_words(
        FailureLabel.CRASH,
        "crashed",
        "error",
        "errored",
        "fail",
        "failed",
        "failure",
        "exception",
        "oom",
        "out_of_memory",
        "cuda_oom",
        "nan",
        "diverged",
        "divergence",
        "broken",
        "segfault",
        "died",
        "absturz",
        "abgestürzt",
        "fehler",
        "plantage",
        "planté",
        "erreur",
        "fallo",
        "falló",
        "error_fatal",
        "崩溃",
        "错误",
        "失败",
        "クラッシュ",
        "エラー",
        "失敗",
        "오류",
    ),
    **_words(
        FailureLabel.HARNESS_ABORT,
        "killed",
        "abort",
        "aborted",
        "cancelled",
        "canceled",
        "interrupted",
        "preempted",
        # not a result yet: never the best, updated when the loop rewrites the row
        "running",
        "pending",
        "in_progress",
        "queued",
        "started",
        "wip",
        "todo",
    ),
    **_words(
        FailureLabel.TRAIN_BUDGET_OVERRUN,
        "timeout",
        "timed_out",
        "time_out",
        "time_limit",
        "over_budget",
        "budget_exceeded",
        "overtime",
        "too_slow",
    ),
    **_words(FailureLabel.EVAL_BUDGET_OVERRUN, "eval_timeout", "eval_timed_out", "eval_over_budget"),
    **_words(
        FailureLabel.PREFLIGHT_CRASH,
        "compile_error",
        "syntax_error",
        "build_failed",
        "import_error",
        "preflight_failed",
    ),
    **_words(FailureLabel.SIZE_BLOCKED, "too_big", "too_large", "oversize", "oversized", "param_limit"),
    **_words(FailureLabel.DISQUALIFIED, "dq", "invalid", "cheat", "cheated", "leak", "leaked"),
    **_words(FailureLabel.BASELINE, "base", "reference", "ref", "initial", "init", "original"),
}

#: Labels of rows that did not produce a result: their ``0`` metric is "no result"
#: (the rule is ``lineage.domain.is_no_result``, shared with every other writer).
CRASH_LIKE = NO_RESULT_LABELS
#: Labels that advance the loop's branch (a later row's parent).
ADVANCING = frozenset({FailureLabel.KEEP, FailureLabel.BASELINE})
#: A word not in :data:`STATUS_WORDS` becomes this label.
UNKNOWN_LABEL = FailureLabel.DISCARD

#: Cells that mean "no result" in a number column (compared lower case, stripped).
PLACEHOLDERS = frozenset(
    {
        "",
        "-",
        "--",
        "—",
        "–",
        "n/a",
        "na",
        "nan",
        "-nan",
        "none",
        "null",
        "?",
        "inf",
        "-inf",
        "+inf",
        "infinity",
        "-infinity",
        "x",
        "missing",
    }
)
#: Numbers that mean "no result" on any row.
PLACEHOLDER_NUMBERS = NO_RESULT_NUMBERS

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


def normalize_word(word: str) -> str:
    return word.strip().lower().replace("-", "_").replace(" ", "_") if word.strip() not in ("-", "+") else word.strip()


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


def map_status(word: str, extra_map: Mapping[str, str] | None = None) -> tuple[FailureLabel, bool]:
    """``(label, known)`` of a status word: ``extra_map`` first (``--status-map``), then
    :data:`STATUS_WORDS`; unknown words are ``(discard, False)``."""
    key = normalize_word(word)
    if extra_map:
        mapped = extra_map.get(key)
        if mapped is not None:
            return FailureLabel(mapped), True
    label = STATUS_WORDS.get(key)
    if label is not None:
        return label, True
    return UNKNOWN_LABEL, False


def parse_status_map(text: str | Sequence[str] | None) -> dict[str, str]:
    """``"oom=crash,flaky=discard"`` (or a list of such) -> normalised ``{word: label}``.
    A word may hold a comma: a piece without ``=`` belongs to the next pair's word
    (``best(a:1%,b:2%)=keep``); the label is after the last ``=``."""
    if not text:
        return {}
    items = [text] if isinstance(text, str) else list(text)
    out: dict[str, str] = {}
    for item in items:
        pending = ""  # a piece without "=": the start of a word that holds a comma
        for piece in item.split(","):
            pair = f"{pending},{piece}" if pending else piece
            if "=" not in pair:
                pending = pair
                continue
            pending = ""
            if not pair.strip():
                continue
            word, _sep, label = pair.rpartition("=")
            if not word.strip():
                raise InvalidInput("status_map", f"{pair.strip()!r} is not WORD=LABEL")
            out[normalize_word(word)] = FailureLabel.parse(label.strip(), field_name="status_map").value
        if pending.strip():
            raise InvalidInput("status_map", f"{pending.strip()!r} is not WORD=LABEL")
    return out


def parse_number(cell: str) -> float | None | bool:
    """A cell as a number: a float, None for a placeholder, False when it is neither."""
    try:
        value = float(cell)
    except ValueError:
        text = cell.strip()
        if text.endswith("%"):
            try:
                value = float(text[:-1])
            except ValueError:
                return False
        elif text.lower() in PLACEHOLDERS:
            return None
        else:
            return False
    if value - value != 0.0:  # NaN or infinite
        return None
    return value


def is_number(cell: str) -> bool:
    """Whether ``cell`` is a number (``0`` included), not a placeholder or a word."""
    value = parse_number(cell)
    return value is not False and value is not None


def metric_value(cell: str, label: FailureLabel | None) -> float | None | bool:
    """The metric of a cell on a row of ``label``: None for "no result", False if not a number."""
    value = parse_number(cell)
    if value is None or value is False:
        return value
    if is_no_result(value, label):
        return None
    return value


def typed_cell(cell: str) -> Any:
    """A cell of a numeric extra column: int, float, None (empty) or the text as written
    (a placeholder, a ``%`` number, anything else)."""
    if not cell:
        return None
    if cell[-1] != "%":
        try:
            value = float(cell)
        except ValueError:
            return cell
        if value - value == 0.0:
            return int(cell) if cell.lstrip("+-").isdigit() else value
    return cell


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
