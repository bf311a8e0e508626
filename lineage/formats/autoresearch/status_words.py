"""The status words of a results table and the labels they map to: :data:`STATUS_WORDS`,
what a word not there becomes (:data:`UNKNOWN_LABEL`), the labels that advance a branch
(:data:`ADVANCING`) or mean "no result" (:data:`CRASH_LIKE`), :func:`map_status` and the
``--status-map`` parser (:func:`parse_status_map`).

Pure values and functions; :mod:`lineage.formats.autoresearch.vocabulary` re-exports them
with the column-name and direction words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lineage.domain import NO_RESULT_LABELS, FailureLabel
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


def normalize_word(word: str) -> str:
    return word.strip().lower().replace("-", "_").replace(" ", "_") if word.strip() not in ("-", "+") else word.strip()


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
