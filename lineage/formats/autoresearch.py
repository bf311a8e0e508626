"""Results tables of autoresearch-style loops: karpathy/autoresearch's ``results.tsv`` and
its forks (``autoresearch``), and any other delimited results table (``generic``).

Pure: text in, :class:`~lineage.domain.Trial` and text out; no database, no clock. The
service-level use-cases (import into a project, watch, record, git) are in
:mod:`lineage.loops`.

The file as written in the wild
    ``commit<TAB>val_bpb<TAB>memory_gb<TAB>status<TAB>description``, one line per
    experiment, appended by an agent. Forks rename, reorder and add columns, use other
    status words, drop the status or commit column, write ``%`` after numbers, and leave
    all the quirks of hand-rolled writers (see :class:`RowParser`).

What a file becomes (the rules, each written once here)
    * **Columns** (:func:`infer_layout`): the status column is found by name (``status``,
      ``verdict``, ``decision``, ``result``, ``outcome``, ``kept_or_reverted``, ... see
      :data:`STATUS_COLUMN_NAMES`), else as the text column whose words are at least 80%
      status words; the metric is ``--metric`` or the first numeric column that is not an
      id column (``commit``, ``run``, ``step``...), preferring one whose name says a
      direction (``val_bpb``, ``score``...) over resource columns (``memory_gb``,
      ``seconds``...); the description is found by name (``description``, ``idea``,
      ``hypothesis``...) or is the text column with the longest cells. A column named
      like a trial field (``timestamp``, ``notes``, ``val_bpb``...) fills that field;
      every other column is kept per trial in ``extra`` under its own name.
    * **Status words** (:data:`STATUS_WORDS`): mapped case-insensitively onto the
      ledger's failure labels (``kept`` -> ``keep``, ``reverted`` -> ``discard``, ``oom`` ->
      ``crash``, ``timeout`` -> ``train_budget_overrun``, ``running`` -> ``harness_abort``...).
      A word not in the table becomes ``discard`` -- never the best under the ``kept``
      policy, never an error -- and is listed once in a warning. The word as written is
      kept in ``extra[<status column>]`` whenever it is not exactly the label's name, so
      export writes it back. A file without a status column: every row is ``keep`` (a
      measurement that can be best).
    * **No result** (:func:`metric_value`): ``-999``, ``-``, ``—``, ``n/a``, ``nan``,
      ``inf``, empty... are no metric on any row; ``0`` (``0.000000``) is no metric on a
      crash-like row (:data:`CRASH_LIKE`). A trial without a metric is never the best.
    * **exp_id**: the zero-padded 0-based row number (``000``, ``001``..., as fieldkit
      numbers trials), counted from the project's next free number when the project
      already has trials; ``--id COL`` takes a column instead. The commit stays in
      ``extra["commit"]``.
    * **Lineage** (:class:`LineageBuilder`): the loop advances its branch on ``keep``
      and resets otherwise, so a row's parent is the last ``keep`` (or ``baseline``) row
      before it, or the first row when there is none; the first row is every row's
      ``baseline_exp``. A file that names parents (``--parent COL`` or a ``parent``
      column) is taken at its word: a cell naming an earlier row's exp_id or commit.
    * **delta_vs_best**: metric minus the best eligible metric before the row.
    * **Direction** (:func:`infer_direction`): the flag; else the metric's name (loss,
      bpb, perplexity, error... lower; score, sharpe, accuracy, reward... higher) checked
      against the kept values; when they disagree or neither decides: an error naming the
      flag to pass.

Round trip
    The file's header text, trailing text (a summary after the rows), line ends, number
    formats and status words are in its layout (``project.settings["results_file"]``,
    :class:`Layout`). Each trial from the file has ``extra["_row"]`` (its row number)
    and, when the trial alone does not give its text back byte for byte (a repaired row,
    blank or stray lines before it, a number written another way, a ``-999``...),
    ``extra["_line"]``: the physical line with its line end, after the lines that preceded
    it. The writer emits that text while the trial still says what it says (re-parsed and
    compared), and renders every other trial -- recorded later, or changed since -- in the
    file's own columns, formats and words; so an imported file exports byte for byte.
    ``extra`` also holds every column without a trial field under its own name, the status
    word as written when it is not the label's name, and ``_git`` (``--git-repo``).
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TextIO

from lineage.domain import (
    TRIAL_FIELD_NAMES,
    MAX_LONG_TEXT,
    MAX_SHORT_TEXT,
    BestPolicy,
    FailureLabel,
    Trial,
)
from lineage.errors import InvalidInput

__all__ = [
    "CRASH_LIKE",
    "GENERIC",
    "NAME",
    "STATUS_WORDS",
    "ImportOptions",
    "Layout",
    "LineageBuilder",
    "ParsedTable",
    "RowParser",
    "default_layout",
    "infer_direction",
    "infer_layout",
    "map_status",
    "parse_table",
    "read_trials",
    "render_row",
    "sniff",
    "sniff_generic",
    "write_trials",
]

NAME = "autoresearch"
GENERIC = "generic"
DESCRIPTION = "autoresearch results.tsv (commit, metric, memory, status, description) and its forks"
GENERIC_DESCRIPTION = "any tab- or comma-separated results table with a header (columns inferred)"

#: Keys of ``Trial.extra`` the format owns (a column of the same name is stored as ``col:NAME``).
#: the row's text as written (with blank or stray lines before it), when the trial alone
#: does not give it back byte for byte (a repaired row, another number format...)
LINE_KEY = "_line"
#: the 0-based row number in its file: marks a trial that came from the file
ROW_KEY = "_row"
#: 1 for the second row of two merged on one line
PART_KEY = "_part"
#: commit details (``--git-repo``)
GIT_KEY = "_git"
RESERVED_KEYS = frozenset({LINE_KEY, ROW_KEY, PART_KEY, GIT_KEY})
#: The key of the layout in ``Project.settings``.
SETTINGS_KEY = "results_file"

#: A line longer than this is not a row of a results table ("one giant line").
MAX_LINE_CHARS = 1 << 20
#: How many rows the column inference looks at.
SAMPLE_ROWS = 2_000
#: Width of row-number exp_ids (fieldkit's).
ID_WIDTH = 3

_BOM = "\ufeff"

# --------------------------------------------------------------------------- vocabulary


def _words(label: FailureLabel, *words: str) -> dict[str, FailureLabel]:
    return {w: label for w in words}


#: Status words (normalised: stripped, lower case, ``-`` and spaces as ``_``) -> label.
#: Every label's own name maps to itself. A word not here maps to ``discard`` (see
#: :func:`map_status`).
STATUS_WORDS: dict[str, FailureLabel] = {
    **{label.value: label for label in FailureLabel},
    **_words(
        FailureLabel.KEEP,
        "kept", "keeper", "accept", "accepted", "improved", "improvement", "improves", "better", "new_best",
        "best", "success", "successful", "succeeded", "pass", "passed", "ok", "good", "win", "won", "advance",
        "advanced", "committed", "merged", "merge", "yes", "y", "true", "✓", "✔", "✅", "+",
        # other languages
        "behalten", "beibehalten", "garder", "gardé", "garde", "conservé", "conserver", "mantener", "mantenido",
        "conservado", "manter", "mantido", "tenere", "tenuto", "保留", "保持", "採用", "유지",
    ),
    **_words(
        FailureLabel.DISCARD,
        "discarded", "revert", "reverted", "reverting", "reject", "rejected", "worse", "regress", "regressed",
        "regression", "no_improvement", "no_gain", "rollback", "rolled_back", "reset", "drop", "dropped", "skip",
        "skipped", "no", "n", "false", "neutral", "same", "equal", "tie", "✗", "✘", "❌", "-",
        "verworfen", "verwerfen", "zurückgesetzt", "rejeté", "rejete", "annulé", "descartar", "descartado",
        "descartada", "revertido", "scartato", "丢弃", "放弃", "回滚", "不採用", "却下", "폐기",
    ),
    **_words(
        FailureLabel.CRASH,
        "crashed", "error", "errored", "fail", "failed", "failure", "exception", "oom", "out_of_memory",
        "cuda_oom", "nan", "diverged", "divergence", "broken", "segfault", "died",
        "absturz", "abgestürzt", "fehler", "plantage", "planté", "erreur", "fallo", "falló", "error_fatal",
        "崩溃", "错误", "失败", "クラッシュ", "エラー", "失敗", "오류",
    ),
    **_words(
        FailureLabel.HARNESS_ABORT,
        "killed", "abort", "aborted", "cancelled", "canceled", "interrupted", "preempted",
        # not a result yet: never the best, updated when the loop rewrites the row
        "running", "pending", "in_progress", "queued", "started", "wip", "todo",
    ),
    **_words(
        FailureLabel.TRAIN_BUDGET_OVERRUN,
        "timeout", "timed_out", "time_out", "time_limit", "over_budget", "budget_exceeded", "overtime", "too_slow",
    ),
    **_words(FailureLabel.EVAL_BUDGET_OVERRUN, "eval_timeout", "eval_timed_out", "eval_over_budget"),
    **_words(
        FailureLabel.PREFLIGHT_CRASH,
        "compile_error", "syntax_error", "build_failed", "import_error", "preflight_failed",
    ),
    **_words(FailureLabel.SIZE_BLOCKED, "too_big", "too_large", "oversize", "oversized", "param_limit"),
    **_words(FailureLabel.DISQUALIFIED, "dq", "invalid", "cheat", "cheated", "leak", "leaked"),
    **_words(FailureLabel.BASELINE, "base", "reference", "ref", "initial", "init", "original"),
}

#: Labels of rows that did not produce a result: their ``0`` metric is "no result".
CRASH_LIKE = frozenset(
    {
        FailureLabel.CRASH,
        FailureLabel.PREFLIGHT_CRASH,
        FailureLabel.TRAIN_BUDGET_OVERRUN,
        FailureLabel.EVAL_BUDGET_OVERRUN,
        FailureLabel.HARNESS_ABORT,
        FailureLabel.SIZE_BLOCKED,
        FailureLabel.DISQUALIFIED,
    }
)
#: Labels that advance the loop's branch (a later row's parent).
ADVANCING = frozenset({FailureLabel.KEEP, FailureLabel.BASELINE})
#: A word not in :data:`STATUS_WORDS` becomes this label.
UNKNOWN_LABEL = FailureLabel.DISCARD

#: Cells that mean "no result" in a number column (compared lower case, stripped).
PLACEHOLDERS = frozenset({"", "-", "--", "—", "–", "n/a", "na", "nan", "-nan", "none", "null", "?", "inf", "-inf",
                          "+inf", "infinity", "-infinity", "x", "missing"})
#: Numbers that mean "no result" on any row.
PLACEHOLDER_NUMBERS = frozenset({-999.0, -9999.0})

STATUS_COLUMN_NAMES = (
    "status", "verdict", "decision", "result", "outcome", "kept_or_reverted", "keep_or_discard", "kept_or_discarded",
    "keep_discard", "kept", "action", "state", "label", "judgement", "judgment",
)
DESCRIPTION_COLUMN_NAMES = (
    "description", "desc", "hypothesis", "idea", "change", "changes", "experiment", "summary", "message",
    "comment", "comments", "what", "notes", "note",
)
PARENT_COLUMN_NAMES = ("parent", "parent_exp", "parent_commit", "parent_id", "parent_hash", "parent_sha")
COMMIT_COLUMN_NAMES = ("commit", "hash", "sha", "git_hash", "commit_hash", "git_commit", "rev", "revision", "sha1")
#: Names of columns that identify a row or time it: never the metric.
ID_COLUMN_NAMES = frozenset(
    {*COMMIT_COLUMN_NAMES, "id", "run", "run_id", "exp", "exp_id", "experiment_id", "iter", "iteration", "idx",
     "index", "trial", "trial_id", "step", "round", "gen", "generation", "#", "n", "no", "num", "timestamp", "time",
     "date", "datetime", "epoch", "seed", "attempt", "try"}
)
LOWER_WORDS = frozenset(
    {"loss", "bpb", "bpc", "perplexity", "ppl", "error", "err", "wer", "cer", "mse", "mae", "rmse", "nll", "latency",
     "regret", "distance", "cost", "fid", "lpips", "bits", "entropy", "divergence", "kl", "mape", "smape",
     "drawdown", "runtime", "duration"}
)
HIGHER_WORDS = frozenset(
    {"score", "sharpe", "sortino", "accuracy", "acc", "reward", "return", "returns", "throughput", "f1", "auc",
     "auroc", "bleu", "rouge", "precision", "recall", "winrate", "win", "success", "pass", "elo", "tps", "mfu",
     "speedup", "map", "ndcg", "r2", "em", "exact", "match", "fitness", "profit", "pnl", "gain", "tflops",
     "flops", "qps", "iou", "dice", "psnr", "ssim", "top1", "top5", "hit", "hits", "mrr", "coverage", "solved",
     "correct", "tokens_per_sec", "tok_s", "samples_per_sec"}
)
#: Resource columns: numeric, but rarely the metric.
RESOURCE_WORDS = frozenset(
    {"memory", "mem", "gb", "mb", "vram", "gpu", "seconds", "secs", "sec", "s", "minutes", "min", "hours", "time",
     "duration", "params", "parameters", "tokens", "steps", "epochs", "lr", "batch", "size", "bytes", "flops_total",
     "cost_usd", "usd", "seed"}
)
#: Columns that fill a trial field of the same name (text fields, then number fields).
TEXT_FIELD_COLUMNS = {
    "timestamp": MAX_SHORT_TEXT, "specialist": MAX_SHORT_TEXT, "domain": MAX_SHORT_TEXT,
    "job_name": MAX_SHORT_TEXT, "snapshot_path": MAX_SHORT_TEXT, "notes": MAX_LONG_TEXT,
    "expected_delta": MAX_LONG_TEXT,
}
NUMBER_FIELD_COLUMNS = ("val_bpb", "train_s", "total_s")

_HEX = re.compile(r"[0-9a-fA-F]{7,40}")
_WORD_SPLIT = re.compile(r"[^0-9a-zA-Z]+|(?<=[a-z])(?=[A-Z])")
_PLAIN_INT = re.compile(r"[+-]?\d+")


def normalize_word(word: str) -> str:
    return word.strip().lower().replace("-", "_").replace(" ", "_") if word.strip() not in ("-", "+") else word.strip()


def name_tokens(name: str) -> list[str]:
    """``val_bpb`` -> ``["val", "bpb"]``; ``winRate`` -> ``["win", "rate"]``; also the whole name."""
    tokens = [t.lower() for t in _WORD_SPLIT.split(name) if t]
    whole = name.strip().lower().replace(" ", "_")
    return [whole, *tokens]


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
    """``"oom=crash,flaky=discard"`` (or a list of such) -> normalised ``{word: label}``."""
    if not text:
        return {}
    items = [text] if isinstance(text, str) else list(text)
    out: dict[str, str] = {}
    for item in items:
        for pair in item.split(","):
            if not pair.strip():
                continue
            word, sep, label = pair.partition("=")
            if not sep or not word.strip():
                raise InvalidInput("status_map", f"{pair.strip()!r} is not WORD=LABEL")
            out[normalize_word(word)] = FailureLabel.parse(label.strip(), field_name="status_map").value
    return out


def _number(cell: str) -> float | None | bool:
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


def metric_value(cell: str, label: FailureLabel | None) -> float | None | bool:
    """The metric of a cell on a row of ``label``: None for "no result", False if not a number."""
    value = _number(cell)
    if value is None or value is False:
        return value
    if value in PLACEHOLDER_NUMBERS or (value == 0.0 and label in CRASH_LIKE):
        return None
    return value


def _typed(cell: str) -> Any:
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


# --------------------------------------------------------------------------- options and layout


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """The column mapping flags of ``lineage import`` (all optional)."""

    id_column: str | None = None
    metric: str | None = None
    #: a column name; ``"-"``: the file has no status column
    status: str | None = None
    description: str | None = None
    parent: str | None = None
    lower_is_better: bool | None = None
    status_map: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Layout:
    """How a results file is laid out: what export needs to write it back and what
    watch needs to read more of it. Stored as a dict in ``project.settings["results_file"]``."""

    columns: list[str]
    metric: str
    format: str = NAME
    delimiter: str = "\t"
    has_header: bool = True
    #: the exact text up to and including the header line (BOM, blank lines before it)
    header_text: str = ""
    newline: str = "\n"
    #: text after the last row (a summary, a box-drawn table), written back after the rows
    trailer: str = ""
    status: str | None = None
    description: str | None = None
    id_column: str | None = None
    parent: str | None = None
    commit: str | None = None
    #: column -> trial field it fills (``timestamp``, ``notes``, ``val_bpb``...)
    fields: dict[str, str] = field(default_factory=dict)
    #: columns whose cells are stored as numbers in ``extra``
    numeric: list[str] = field(default_factory=list)
    #: column -> [decimals or None (shortest repr), suffix] for writing new rows
    formats: dict[str, list[Any]] = field(default_factory=dict)
    status_map: dict[str, str] = field(default_factory=dict)
    #: label -> the word this file uses for it (new rows are written in the file's words)
    words: dict[str, str] = field(default_factory=dict)
    #: how a crash-like row without a metric writes its metric cell
    placeholder: str = ""
    #: ``[first_row, first_number]``: row ``i`` is exp_id ``first_number + i - first_row``
    #: of the last segment with ``first_row <= i`` (a truncated file starts a new segment)
    segments: list[list[int]] = field(default_factory=lambda: [[0, 0]])
    id_width: int = ID_WIDTH
    #: the usual length of a commit hash in the file (to split two rows glued on one line)
    commit_length: int = 7

    # derived, not stored
    def __post_init__(self) -> None:
        self._index = {name: i for i, name in enumerate(self.columns)}

    def index(self, name: str | None) -> int:
        return -1 if name is None else self._index.get(name, -1)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if not k.startswith("_")}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Layout":
        known = {f for f in cls.__dataclass_fields__ if not f.startswith("_")}
        return cls(**{k: v for k, v in dict(data).items() if k in known})

    def exp_id(self, row: int) -> str:
        first_row, number = 0, 0
        for start, base in self.segments:
            if start <= row:
                first_row, number = start, base
        return str(number + row - first_row).zfill(self.id_width)

    def extra_key(self, column: str) -> str:
        return f"col:{column}" if column in RESERVED_KEYS else column

    @property
    def is_csv(self) -> bool:
        return self.delimiter == ","


def default_layout(metric_name: str = "val_bpb") -> Layout:
    """karpathy/autoresearch's own header, for a project that has no file yet."""
    columns = ["commit", metric_name, "memory_gb", "status", "description"]
    return Layout(
        columns=columns,
        metric=metric_name,
        header_text="\t".join(columns) + "\n",
        status="status",
        description="description",
        commit="commit",
        numeric=["memory_gb"],
        formats={metric_name: [6, ""], "memory_gb": [1, ""]},
        placeholder="0.000000",
    )


# --------------------------------------------------------------------------- rows


# RowParser.feed builds Trials positionally: the dataclass must keep this field order.
if TRIAL_FIELD_NAMES[:24] != (
    "exp_id", "timestamp", "specialist", "parent_exp", "baseline_exp", "domain", "hypothesis", "expected_delta",
    "status", "core_metric", "val_bpb", "delta_vs_best", "train_s", "total_s", "job_name", "snapshot_path", "notes",
    "ig_clip_scale_mean", "ig_clip_scale_std", "ig_clip_scale_min", "ig_clip_scale_max", "ig_clip_scale_frac_low",
    "ig_clip_scale_frac_high", "extra",
):  # pragma: no cover
    raise ImportError("lineage.domain.Trial changed its field order; update RowParser.feed")


def _split_csv(body: str) -> list[str]:
    try:
        return next(csv.reader([body]))
    except (csv.Error, StopIteration):
        return body.split(",")




def _printf(spec: Sequence[Any] | None) -> str | None:
    """The ``%`` pattern of a fixed-decimal number column (no suffix), else None."""
    if spec and spec[0] is not None and not spec[1]:
        return f"%.{int(spec[0])}f"
    return None


def number_formatter(spec: Sequence[Any] | None) -> Callable[[Any], str]:
    """``format_number`` for one column, with its format looked up once."""
    decimals, suffix = (spec or [None, ""])[0], (spec or [None, ""])[1]
    if decimals is not None:
        pattern = f"%.{int(decimals)}f" + suffix.replace("%", "%%")

        def fixed(value: Any) -> str:
            if value is None:
                return ""
            if isinstance(value, str):
                return value
            if isinstance(value, int) and not isinstance(value, bool) and decimals == 0:
                return f"{value}{suffix}"
            return pattern % value

        return fixed
    return lambda value: format_number(value, spec)


class RowParser:
    """Turns the physical lines of a results file into trials, one line at a time (so
    watch can feed appended lines to the parser that read the file so far).

    A row becomes a :class:`~lineage.domain.Trial` with its status, metric,
    description, the fields its columns fill and ``extra`` (the other columns, the word
    as written, ``_line``); exp_id, parent, baseline and delta are
    :class:`LineageBuilder`'s (``exp_id`` is ``""`` until then). ``rows`` and ``lines``
    (the physical line of each row) grow as lines are fed.

    The quirks of files written by agents, and what happens to each:

    * CRLF, blank lines, trailing tabs, a BOM: kept in the row's text; nothing to repair.
    * a row with one or two cells too few: the empty cells go where the row's cells fit
      the columns best (numbers under number columns, a status word under the status);
      a row with cells too many: joined into the description (a tab inside the text);
      two rows on one line (``2n`` cells, or ``2n - 1`` with the second commit glued to
      the first description): split into two trials; a literal ``\\t`` instead of tabs:
      split on it. Each repaired row gives one warning naming its line.
    * a line that is not a row (a repeated header, a comment, a summary): kept as text
      before the next row, with a warning; the lines after the last row are the trailer.
    * NUL bytes or a line over :data:`MAX_LINE_CHARS`: :class:`InvalidInput` naming the line.
    """

    def __init__(self, layout: Layout, *, source: str = "<stream>", first_line: int = 1, first_row: int = 0) -> None:
        self.layout = layout
        self.source = source
        self.n = len(layout.columns)
        self.delimiter = layout.delimiter
        self.mi = layout.index(layout.metric)
        if self.mi < 0:
            raise InvalidInput("metric", f"column {layout.metric!r} is not in the file's columns")
        self.si = layout.index(layout.status)
        self.di = layout.index(layout.description)
        self.ci = layout.index(layout.commit)
        numeric = set(layout.numeric)
        self.field_specs = [(layout.index(col), col, name) for col, name in layout.fields.items() if layout.index(col) >= 0]
        skip = {self.mi, self.si, self.di, *(i for i, _, _ in self.field_specs)}
        self.extra_specs = [
            (i, layout.extra_key(name), name in numeric) for i, name in enumerate(layout.columns) if i not in skip
        ]
        self.status_key = layout.extra_key(layout.status) if layout.status else None
        self.metric_is_val_bpb = layout.metric == "val_bpb"
        self.metric_text = number_formatter(layout.formats.get(layout.metric))
        self.number_text = {i: number_formatter(layout.formats.get(layout.columns[i])) for i, _, numeric in
                            self.extra_specs if numeric}
        self.status_map = dict(layout.status_map)
        self._word_cache: dict[str, tuple[FailureLabel, bool]] = {}
        #: word -> (label, word differs from the label's name, crash-like, known)
        self._hot_words: dict[str, tuple[FailureLabel, bool, bool, bool]] = {}
        self.rows: list[Trial] = []
        self.lines: list[int] = []
        #: each row's text as written (blank or stray lines before it included)
        self.texts: list[str] = []
        self.warnings: list[str] = []
        self.unknown_words: Counter[str] = Counter()
        self.prefix: list[str] = []  # raw lines (blank or stray) waiting for the next row
        self.prefix_line: int | None = None  # line of the first stray (non-blank) line in prefix
        self.line = first_line - 1  # the last physical line consumed
        self.first_row = first_row
        self.commit_length = layout.commit_length

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, lines: Iterable[str]) -> None:
        """Consume physical lines, each with its line end (the last may have none)."""
        n, delimiter, mi, si, di = self.n, self.delimiter, self.mi, self.si, self.di
        fast = delimiter != "," and not self.field_specs
        val_bpb = self.metric_is_val_bpb
        extra_specs, status_key = self.extra_specs, self.status_key
        text_specs = [(i, key) for i, key, numeric in extra_specs if not numeric]
        number_specs: list[Any] = [(i, key) for i, key, numeric in extra_specs if numeric]
        hot = self._hot_words
        rows, row_lines, row_texts, prefix = self.rows, self.lines, self.texts, self.prefix
        metric_text, number_text = self.metric_text, self.number_text
        # printf patterns of fixed-decimal columns (the common case), else None
        metric_pattern = _printf(self.layout.formats.get(self.layout.metric))
        number_specs = [(i, key, _printf(self.layout.formats.get(self.layout.columns[i]))) for i, key in number_specs]
        newline = self.layout.newline
        placeholder = self.layout.placeholder
        placeholder_numbers = PLACEHOLDER_NUMBERS
        no_status = (FailureLabel.KEEP, False, False, True)
        unknown = self.unknown_words
        first_row = self.first_row
        line_no = self.line
        for text in lines:
            line_no += 1
            if len(text) > MAX_LINE_CHARS or "\x00" in text:
                self.line = line_no
                self._refuse(text)
            body = text[:-1] if text[-1:] == "\n" else text
            if body[-1:] == "\r":
                body = body[:-1]
            cells = body.split(delimiter)
            if len(cells) != n or not fast or prefix or line_no == 1 or not body or body.isspace():
                self.line = line_no
                self._line(text, body)
                continue
            # the hot path: a well-formed row (what _row does, inlined)
            if si >= 0:
                word = cells[si]
                found = hot.get(word)
                if found is None:
                    label, known = self._label(word)
                    found = hot[word] = (label, word != label.value, label in CRASH_LIKE, known)
            else:
                word, found = "", no_status
            cell = cells[mi]
            try:
                metric: float | None = float(cell)
            except ValueError:
                metric = metric_value(cell, found[0])  # type: ignore[assignment]
                if metric is False:
                    self.line = line_no
                    self._line(text, body)
                    continue
            else:
                if metric - metric != 0.0 or metric in placeholder_numbers or (metric == 0.0 and found[2]):  # type: ignore[operator]
                    metric = None
            # can the trial alone give this text back (then it is not stored)?
            if metric is None:
                exact = cell == (placeholder if found[2] else "")
            elif metric_pattern is not None:
                exact = metric_pattern % metric == cell
            else:
                exact = metric_text(metric) == cell
            if exact and (not text.endswith(newline) or "\r" in body):
                exact = False
            extra: dict[str, Any] = {}
            for i, key in text_specs:
                extra[key] = cells[i]
            for i, key, pattern in number_specs:
                value = cells[i]
                if not value:
                    extra[key] = None
                    continue
                if value[-1] != "%":
                    try:
                        number = float(value)
                    except ValueError:
                        pass
                    else:
                        if number - number == 0.0:
                            if value.lstrip("+-").isdigit():
                                number = int(value)
                                if exact and number_text[i](number) != value:
                                    exact = False
                            elif exact and (pattern % number if pattern is not None else number_text[i](number)) != value:
                                exact = False
                            extra[key] = number
                            continue
                extra[key] = value
            if found[1]:
                extra[status_key] = word  # type: ignore[index]
            extra[ROW_KEY] = first_row + len(rows)
            if not exact:
                extra[LINE_KEY] = text
            row_texts.append(text)
            if not found[3]:
                unknown[word.strip() or "(empty)"] += 1
            # positionally, in Trial's field order (a third faster than keywords)
            rows.append(Trial("", "", "", "", "", "", cells[di] if di >= 0 else "", "", found[0], metric,
                              metric if val_bpb else None, None, None, None, "", "", "", None, None, None, None,
                              None, None, extra))
            row_lines.append(line_no)
        self.line = line_no

    def _refuse(self, text: str) -> None:
        if "\x00" in text:
            raise InvalidInput("file", f"NUL bytes: not a text results table (in {self.source})", line=self.line)
        raise InvalidInput(
            "file", f"line is {len(text):,} characters long: not a results table (in {self.source})", line=self.line
        )

    def _line(self, text: str, body: str) -> None:
        if self.line == 1 and body.startswith(_BOM):
            body = body[1:]
        if not body.strip():
            self.prefix.append(text)
            return
        cells = _split_csv(body) if self.delimiter == "," else body.split(self.delimiter)
        if len(cells) == self.n:
            trial = self._row(cells)
            if trial is not None:
                self._emit([(trial, None)], text)
                return
        repaired = self._repair(body, cells)
        if repaired is None:
            if self.prefix_line is None or not any(p.strip() for p in self.prefix):
                self.prefix_line = self.line
            self.prefix.append(text)
            return
        self._emit(repaired, text)

    def _emit(self, made: list[tuple[Trial, str | None]], text: str) -> None:
        raw = text
        if self.prefix:
            raw = "".join(self.prefix) + text
            if self.prefix_line is not None:
                self.warnings.append(
                    f"line {self.prefix_line}: not a row of the table; kept as text before line {self.line} "
                    f"(in {self.source})"
                )
            self.prefix.clear()
            self.prefix_line = None
        if made[0][1]:
            self.warnings.append(f"line {self.line}: {made[0][1]} (in {self.source})")
        for part, (trial, _) in enumerate(made):
            trial.extra[ROW_KEY] = self.first_row + len(self.rows)  # type: ignore[index]
            trial.extra[LINE_KEY] = raw  # type: ignore[index]
            if part:
                trial.extra[PART_KEY] = part  # type: ignore[index]
            self.rows.append(trial)
            self.lines.append(self.line)
            self.texts.append(raw)

    def trailer(self) -> tuple[str, int | None]:
        """The text after the last row and the line of its first non-blank line."""
        return "".join(self.prefix), self.prefix_line

    # -- one row ---------------------------------------------------------------------------

    def _label(self, word: str) -> tuple[FailureLabel, bool]:
        found = self._word_cache.get(word)
        if found is None:
            found = self._word_cache[word] = map_status(word, self.status_map)
        return found

    def _row(self, cells: list[str]) -> Trial | None:
        """The trial these cells (exactly n) say, or None if they are not a row."""
        si = self.si
        if si >= 0:
            word = cells[si]
            label, known = self._label(word)
        else:
            word, label, known = "", FailureLabel.KEEP, True
        metric = metric_value(cells[self.mi], label)
        if metric is False:
            return None
        extra: dict[str, Any] = {}
        for i, key, numeric in self.extra_specs:
            cell = cells[i]
            extra[key] = _typed(cell) if numeric else cell
        if si >= 0 and word != label.value:
            extra[self.status_key] = word  # type: ignore[index]
        fields: dict[str, Any] = {}
        layout = self.layout
        for i, col, name in self.field_specs:
            cell = cells[i]
            if name in TEXT_FIELD_COLUMNS:
                if len(cell) <= TEXT_FIELD_COLUMNS[name]:
                    fields[name] = cell
                else:
                    extra[layout.extra_key(col)] = cell
            else:
                value = _number(cell)
                if value is False or (value is not None and name != "val_bpb" and value < 0):
                    extra[layout.extra_key(col)] = cell
                else:
                    fields[name] = value
        if self.metric_is_val_bpb:
            fields["val_bpb"] = metric
        if not known:
            self.unknown_words[word.strip() or "(empty)"] += 1
        return Trial("", hypothesis=cells[self.di] if self.di >= 0 else "", status=label, core_metric=metric,
                     extra=extra, **fields)

    def _fit(self, cells: list[str]) -> int:
        """How well cells (exactly n) fit the columns: higher is better; < 0: not a row."""
        if metric_value(cells[self.mi], None) is False:
            return -1
        score = 0
        if self.si >= 0:
            word = cells[self.si]
            if self._label(word)[1]:
                score += 3
            elif not word.strip() or _number(word) is not False:
                score -= 2
        for i, _, numeric in self.extra_specs:
            if numeric:
                score += 1 if _number(cells[i]) is not False else -1
        if self.ci >= 0:
            score += 1 if _HEX.fullmatch(cells[self.ci] or "") else -1
        return score

    def _repair(self, body: str, cells: list[str]) -> list[tuple[Trial, str | None]] | None:
        n, c = self.n, len(cells)
        delim = self.delimiter
        if c != n and delim == "\t" and "\\t" in body:
            alt = body.replace("\\t", "\t").split("\t")
            if len(alt) == n:
                trial = self._row(alt)
                if trial is not None:
                    return [(trial, "literal '\\t' instead of tabs; split on it")]
            cells, c = alt, len(alt)
        if c > n and not any(cells[n:]):
            trial = self._row(cells[:n])  # trailing delimiters: nothing to repair
            if trial is not None:
                return [(trial, None)]
        if c > n:
            merged = self._merged(cells)
            if merged is not None:
                return merged
            if self.di >= 0:
                extra = c - n
                joined = cells[: self.di] + [delim.join(cells[self.di : self.di + extra + 1])] + cells[self.di + extra + 1 :]
                if self._fit(joined) >= 0:
                    trial = self._row(joined)
                    if trial is not None:
                        return [(trial, f"{c} cells, the header has {n}; joined cells {self.di + 1}-{self.di + extra + 1} "
                                        f"into {self.layout.description!r} (a tab inside the text?)")]
            return None
        if 2 <= c < n and n - c <= 2:
            best: tuple[int, list[str], list[int]] | None = None
            for positions in _insertions(c, n - c):
                candidate = list(cells)
                for p in positions:
                    candidate.insert(p, "")
                score = self._fit(candidate)
                # ties go to the latest positions (a missing trailing cell is the common case)
                if score >= 0 and (best is None or score >= best[0]):
                    best = (score, candidate, positions)
            if best is not None:
                trial = self._row(best[1])
                if trial is not None:
                    missing = ", ".join(repr(self.layout.columns[p]) for p in best[2])
                    return [(trial, f"{c} cells, the header has {n}; {missing} filled empty")]
        return None

    def _merged(self, cells: list[str]) -> list[tuple[Trial, str | None]] | None:
        n, c = self.n, len(cells)
        halves: tuple[list[str], list[str]] | None = None
        if c == 2 * n:
            halves = (cells[:n], cells[n:])
        elif c == 2 * n - 1 and self.ci == 0:
            glued = cells[n - 1]
            length = self.commit_length
            tail = glued[-length:] if len(glued) > length else ""
            if tail and _HEX.fullmatch(tail):
                halves = (cells[: n - 1] + [glued[:-length]], [tail] + cells[n:])
        if halves is None:
            return None
        first, second = halves
        if self._fit(first) < 0 or self._fit(second) < 0:
            return None
        if self.si >= 0 and not (self._label(first[self.si])[1] and self._label(second[self.si])[1]):
            return None
        a, b = self._row(first), self._row(second)
        if a is None or b is None:
            return None
        return [(a, f"two rows on one line ({c} cells, the header has {n}); split into two trials"), (b, None)]


def _insertions(c: int, k: int) -> list[list[int]]:
    """Positions (ascending, in the final row) where ``k`` empty cells can go among ``c``."""
    if k == 1:
        return [[p] for p in range(c + 1)]
    return [[p, q] for p in range(c + 2) for q in range(p + 1, c + 2)]


# --------------------------------------------------------------------------- the whole file


@dataclass(slots=True)
class ParsedTable:
    layout: Layout
    #: one trial per row, exp_id ``""`` (see :class:`LineageBuilder`)
    rows: list[Trial]
    #: the physical line of each row
    lines: list[int]
    warnings: list[str]
    #: words not in the status table -> rows
    unknown_words: Counter[str]
    #: the line of the first trailing non-row line, if any
    trailer_line: int | None = None


def split_lines(text: str) -> list[str]:
    """Physical lines with their line ends (``\\n`` only; a ``\\r`` stays in its line)."""
    parts = text.split("\n")
    last = parts.pop()
    lines = [p + "\n" for p in parts]
    if last:
        lines.append(last)
    return lines


def check_text(data: bytes, *, source: str) -> str:
    """``data`` as text, or one clear error naming the line: NUL bytes, not UTF-8."""
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise InvalidInput("file", f"NUL bytes: a binary file, not a results table (in {source})", line=line)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InvalidInput(
            "file", f"not UTF-8 text ({exc.reason} at byte {exc.start}): not a results table (in {source})", line=line
        ) from None


def _cells_of(body: str, delimiter: str) -> list[str]:
    return _split_csv(body) if delimiter == "," else body.split(delimiter)


def _delimiter_of(line: str, *, allow_csv: bool) -> str | None:
    if "\t" in line:
        return "\t"
    if "\\t" in line:
        return "\\t"
    if allow_csv and "," in line:
        return ","
    return None


def _looks_like_data(cells: Sequence[str]) -> bool:
    """A first line that is a row, not a header: a number cell, or a commit hash first."""
    if any(cell.strip() and _number(cell) not in (False, None) for cell in cells):
        return True
    return bool(cells) and bool(_HEX.fullmatch(cells[0].strip())) and any(ch.isdigit() for ch in cells[0])


def _header_names(cells: Sequence[str]) -> list[str]:
    names: list[str] = []
    seen: set[str] = set()
    for i, cell in enumerate(cells):
        name = cell.strip() or f"col{i + 1}"
        base, k = name, 2
        while name in seen:
            name = f"{base}_{k}"
            k += 1
        seen.add(name)
        names.append(name)
    return names


def _by_name(columns: Sequence[str], wanted: Iterable[str], exclude: set[int] = frozenset()) -> int:  # type: ignore[assignment]
    lowered = [c.strip().lower().replace(" ", "_").replace("-", "_") for c in columns]
    for name in wanted:
        for i, col in enumerate(lowered):
            if col == name and i not in exclude:
                return i
    return -1


def _column_index(columns: Sequence[str], name: str, flag: str) -> int:
    if name in columns:
        return list(columns).index(name)
    lowered = [c.lower() for c in columns]
    if name.lower() in lowered:
        return lowered.index(name.lower())
    if name.isdigit() and 1 <= int(name) <= len(columns):
        return int(name) - 1
    raise InvalidInput(flag, f"no column {name!r}; the columns are {', '.join(columns)}")


def direction_of_name(name: str) -> bool | None:
    """True (lower is better), False (higher), None: the name does not say."""
    tokens = set(name_tokens(name))
    lower = bool(tokens & LOWER_WORDS)
    higher = bool(tokens & HIGHER_WORDS)
    if lower == higher:
        return None
    return lower


def infer_layout(
    header_cells: list[str] | None,
    sample: list[list[str]],
    *,
    options: ImportOptions,
    fmt: str,
    delimiter: str,
) -> tuple[Layout, list[str]]:
    """Columns, their roles and formats, from the header and a sample of well-formed rows."""
    notes: list[str] = []
    n = len(header_cells) if header_cells is not None else max((len(r) for r in sample), default=0)
    columns = _header_names(header_cells) if header_cells is not None else [f"col{i + 1}" for i in range(n)]
    rows = [r for r in sample if len(r) == n]

    def values(i: int) -> list[str]:
        return [r[i] for r in rows]

    numeric_share: list[float] = []
    hex_col: list[bool] = []
    for i in range(n):
        cells = [c for c in values(i) if c.strip()]
        nums = [c for c in cells if _number(c) is not False]
        real = [c for c in nums if _number(c) is not None]
        numeric_share.append(len(nums) / len(cells) if cells and real else 0.0)
        hex_col.append(bool(cells) and all(_HEX.fullmatch(c.strip()) for c in cells) and any(
            any(ch.isalpha() for ch in c) for c in cells))

    def is_numeric(i: int) -> bool:
        return numeric_share[i] >= 0.8

    lowered = [c.strip().lower().replace(" ", "_").replace("-", "_") for c in columns]
    # commit column: by name, else hex cells
    ci = _by_name(columns, COMMIT_COLUMN_NAMES)
    if ci < 0:
        ci = next((i for i in range(n) if hex_col[i]), -1)
    used: set[int] = set()
    if ci >= 0:
        used.add(ci)
    # id column
    ii = -1
    if options.id_column:
        ii = _column_index(columns, options.id_column, "id")
        used.add(ii)
    # status column
    si = -1
    if options.status == "-":
        si = -1
    elif options.status:
        si = _column_index(columns, options.status, "status")
    else:
        for name in STATUS_COLUMN_NAMES:
            j = _by_name(columns, (name,), used)
            if j >= 0 and not is_numeric(j):
                si = j
                break
        if si < 0:
            for name in ("status", "verdict", "decision", "outcome"):
                j = next((k for k, col in enumerate(lowered) if name in col and k not in used and not is_numeric(k)), -1)
                if j >= 0:
                    si = j
                    break
        if si < 0:
            for j in range(n):
                cells = [c for c in values(j) if c.strip()]
                if j in used or is_numeric(j) or not cells:
                    continue
                known = sum(1 for c in cells if normalize_word(c) in STATUS_WORDS)
                if known / len(cells) >= 0.8:
                    si = j
                    notes.append(f"status column {columns[j]!r} found by its words")
                    break
    if si >= 0:
        used.add(si)
    # parent column
    pi = -1
    if options.parent:
        pi = _column_index(columns, options.parent, "parent")
    else:
        pi = _by_name(columns, PARENT_COLUMN_NAMES, used)
    if pi >= 0:
        used.add(pi)
    # description column
    di = -1
    if options.description:
        di = _column_index(columns, options.description, "description")
    else:
        di = _by_name(columns, DESCRIPTION_COLUMN_NAMES, used)
        if di >= 0 and is_numeric(di):
            di = -1
        if di < 0:
            texts = [j for j in range(n) if j not in used and not is_numeric(j) and not hex_col[j]]
            if texts:
                di = max(texts, key=lambda j: (sum(len(c) for c in values(j)) / max(1, len(rows)), j))
                if header_cells is not None and sum(len(c) for c in values(di)) == 0:
                    di = -1
    if di >= 0:
        used.add(di)
    # metric column
    if options.metric:
        mi = _column_index(columns, options.metric, "metric")
    else:
        candidates = [
            j for j in range(n)
            if j not in used and is_numeric(j) and lowered[j] not in ID_COLUMN_NAMES
        ]
        if not candidates and header_cells is not None and not rows:
            # a header-only file: the first column named like a metric, else the second column
            candidates = [j for j in range(n) if j not in used and lowered[j] not in ID_COLUMN_NAMES]
            named = [j for j in candidates if direction_of_name(columns[j]) is not None]
            candidates = named or [j for j in candidates if not (set(name_tokens(columns[j])) & RESOURCE_WORDS)] or candidates
        if not candidates:
            raise InvalidInput(
                "metric",
                "no numeric column to take as the metric; name it with --metric COLUMN "
                f"(the columns are {', '.join(columns)})",
            )
        named = [j for j in candidates if direction_of_name(columns[j]) is not None]
        plain = [j for j in candidates if not (set(name_tokens(columns[j])) & RESOURCE_WORDS)]
        mi = (named or plain or candidates)[0]
    if mi == si:
        si = -1
    used.add(mi)
    if header_cells is None:
        notes.append(
            f"no header line: columns named {', '.join(columns)}; metric {columns[mi]!r}"
            + (f", status {columns[si]!r}" if si >= 0 else ", no status column")
            + (f", description {columns[di]!r}" if di >= 0 else "")
        )

    fields: dict[str, str] = {}
    for j, name in enumerate(lowered):
        if j in used or j == ii:
            continue
        if name in TEXT_FIELD_COLUMNS:  # (the description column, even "notes", is in ``used``)
            fields[columns[j]] = name
        elif name in NUMBER_FIELD_COLUMNS and is_numeric(j):
            fields[columns[j]] = name
    numeric = [columns[j] for j in range(n) if is_numeric(j) and j != mi and not hex_col[j] and j != ci and j != pi]
    formats: dict[str, list[Any]] = {}
    for j in range(n):
        if j == mi or columns[j] in numeric:
            formats[columns[j]] = _number_format(values(j))
    placeholder = ""
    crash_cells = Counter(
        r[mi] for r in rows if si >= 0 and map_status(r[si], options.status_map)[0] in CRASH_LIKE
        and metric_value(r[mi], FailureLabel.CRASH) is None
    )
    if crash_cells:
        placeholder = crash_cells.most_common(1)[0][0]
    words: dict[str, str] = {}
    if si >= 0:
        by_label: dict[str, Counter[str]] = {}
        for r in rows:
            label, known = map_status(r[si], options.status_map)
            if known:
                by_label.setdefault(label.value, Counter())[r[si]] += 1
        words = {label: counts.most_common(1)[0][0] for label, counts in by_label.items()}
    layout = Layout(
        columns=columns,
        metric=columns[mi],
        format=fmt,
        delimiter=delimiter,
        has_header=header_cells is not None,
        status=columns[si] if si >= 0 else None,
        description=columns[di] if di >= 0 else None,
        id_column=columns[ii] if ii >= 0 else None,
        parent=columns[pi] if pi >= 0 else None,
        commit=columns[ci] if ci >= 0 else None,
        fields=fields,
        numeric=numeric,
        formats=formats,
        status_map=dict(options.status_map),
        words=words,
        placeholder=placeholder,
    )
    return layout, notes


def _number_format(cells: Iterable[str]) -> list[Any]:
    decimals: Counter[int | None] = Counter()
    suffix = ""
    for cell in cells:
        text = cell.strip()
        if text.endswith("%"):
            suffix = "%"
            text = text[:-1]
        if _number(text) in (False, None):
            continue
        if "e" in text.lower():
            decimals[None] += 1
        elif "." in text:
            decimals[len(text) - text.index(".") - 1] += 1
        else:
            decimals[0] += 1
    if not decimals:
        return [6, suffix]
    if len(decimals) == 1:
        return [next(iter(decimals)), suffix]
    if set(decimals) == {0, 1} or None in decimals:
        return [None, suffix]
    return [decimals.most_common(1)[0][0], suffix]


def parse_table(
    text: str,
    *,
    source: str = "<stream>",
    fmt: str = NAME,
    options: ImportOptions = ImportOptions(),
    layout: Layout | None = None,
) -> ParsedTable:
    """Parse a whole results file. With ``layout`` (a project's), columns are not inferred
    again (watch, export); otherwise they are, from the header and the first rows."""
    lines = split_lines(text)
    if layout is None:
        layout, notes, start = _layout_from_lines(lines, source=source, fmt=fmt, options=options)
    else:
        notes = []
        start = _header_end(lines, layout)
    parser = RowParser(layout, source=source, first_line=start + 1)
    parser.feed(lines[start:])
    trailer, trailer_line = parser.trailer()
    warnings = list(notes) + parser.warnings
    if trailer_line is not None:
        warnings.append(
            f"line {trailer_line}: import stops at text that is not a row (a summary?); "
            f"kept for export (in {source})"
        )
    if parser.unknown_words:
        listed = ", ".join(f"{w!r} ({k} row{'s' if k > 1 else ''})" for w, k in parser.unknown_words.most_common())
        warnings.append(
            f"status words not in the table, stored as {UNKNOWN_LABEL.value!r} (never the best): {listed}; "
            "map them with --status-map WORD=LABEL"
        )
    layout.trailer = trailer
    return ParsedTable(layout=layout, rows=parser.rows, lines=parser.lines, warnings=warnings,
                       unknown_words=parser.unknown_words, trailer_line=trailer_line)


def _first_nonblank(lines: Sequence[str], start: int = 0) -> tuple[int, str] | None:
    for i in range(start, len(lines)):
        body = lines[i].rstrip("\n").rstrip("\r")
        if body.strip():
            return i, body
    return None


def _header_end(lines: Sequence[str], layout: Layout) -> int:
    """Index of the first line after the header text (0 for a headerless file)."""
    if not layout.has_header:
        return 0
    consumed = 0
    for i, line in enumerate(lines):
        consumed += len(line)
        if consumed >= len(layout.header_text):
            return i + 1
    return len(lines)


def _commit_length(lines: Sequence[str], layout: Layout) -> int:
    ci = layout.index(layout.commit)
    if ci < 0:
        return 7
    lengths: Counter[int] = Counter()
    for line in lines:
        cells = _cells_of(line.rstrip("\n").rstrip("\r"), layout.delimiter)
        if len(cells) == len(layout.columns) and _HEX.fullmatch(cells[ci].strip()):
            lengths[len(cells[ci].strip())] += 1
    return lengths.most_common(1)[0][0] if lengths else 7


def _layout_from_lines(
    lines: Sequence[str], *, source: str, fmt: str, options: ImportOptions
) -> tuple[Layout, list[str], int]:
    first = _first_nonblank(lines)
    if first is None:
        raise InvalidInput("file", f"the file is empty: not a results table (in {source})", line=1)
    at, body = first
    body_no_bom = body.lstrip(_BOM)
    if len(body_no_bom) > MAX_LINE_CHARS:
        raise InvalidInput(
            "file", f"line is {len(body_no_bom):,} characters long: not a results table (in {source})", line=at + 1
        )
    if "\x00" in body_no_bom:
        raise InvalidInput("file", f"NUL bytes: not a text results table (in {source})", line=at + 1)
    delimiter = _delimiter_of(body_no_bom, allow_csv=fmt == GENERIC)
    if delimiter is None:
        expected = "tab- or comma-separated" if fmt == GENERIC else "tab-separated"
        raise InvalidInput(
            "file",
            f"not a results table: line {at + 1} has no {'tab or comma' if fmt == GENERIC else 'tab'} "
            f"(expected a {expected} header such as commit<TAB>val_bpb<TAB>memory_gb<TAB>status<TAB>description; "
            f"in {source})",
            line=at + 1,
        )
    cells = _cells_of(body_no_bom, delimiter)
    while len(cells) > 1 and not cells[-1].strip():
        cells.pop()  # trailing delimiters after the header
    headerless = _looks_like_data(cells)
    notes: list[str] = []
    if headerless:
        start = 0
        header_cells = None
    else:
        start = at + 1
        header_cells = cells
        if len(cells) < 2:
            raise InvalidInput("file", f"not a results table: the header has one column (in {source})", line=at + 1)
        too_long = [c for c in cells if len(c) > 200]
        if too_long:
            raise InvalidInput(
                "file", f"not a results table: line {at + 1} is not a header (a cell of {len(too_long[0])} "
                f"characters; in {source})", line=at + 1,
            )
    sample: list[list[str]] = []
    data_lines = 0
    for line in lines[start : start + SAMPLE_ROWS * 2]:
        body_i = line.rstrip("\n").rstrip("\r")
        if not body_i.strip():
            continue
        data_lines += 1
        row = _cells_of(body_i.lstrip(_BOM) if not sample and headerless else body_i, delimiter)
        width = len(header_cells) if header_cells is not None else len(cells)
        if len(row) > width and not any(row[width:]):
            row = row[:width]
        sample.append(row)
        if len(sample) >= SAMPLE_ROWS:
            break
    if header_cells is None:
        width = len(cells)
        sample = [r for r in sample if len(r) == width]
    else:
        width = len(header_cells)
    well_formed = [r for r in sample if len(r) == width]
    if data_lines and not well_formed:
        raise InvalidInput(
            "file",
            f"not a results table: no line after the header has its {width} cells (line {at + 2}...; in {source})",
            line=at + 2 if header_cells is not None else at + 1,
        )
    layout, inferred = infer_layout(header_cells, well_formed, options=options, fmt=fmt, delimiter=delimiter)
    notes.extend(inferred)
    layout.commit_length = _commit_length(lines[start : start + SAMPLE_ROWS], layout)
    if header_cells is not None:
        layout.header_text = "".join(lines[:start])
    layout.newline = _dominant_newline(lines)
    return layout, notes, start


def _dominant_newline(lines: Sequence[str]) -> str:
    crlf = sum(1 for line in lines[:SAMPLE_ROWS] if line.endswith("\r\n"))
    lf = sum(1 for line in lines[:SAMPLE_ROWS] if line.endswith("\n"))
    return "\r\n" if crlf * 2 > lf else "\n"


# --------------------------------------------------------------------------- direction


def infer_direction(metric_name: str, kept: Sequence[float], flag: bool | None = None) -> tuple[bool, str]:
    """``(lower_is_better, how it was decided)``. The flag wins; else the name, checked
    against the kept values; else the kept values alone. Raises :class:`InvalidInput`
    (field ``direction``) when name and values disagree or neither decides.

    The kept values decide when they move at least twice and at least two thirds of
    their moves go one way (a loop keeps improvements, so they fall when lower is better).
    """
    if flag is not None:
        return flag, "from the flag"
    by_name = direction_of_name(metric_name)
    down = sum(1 for a, b in zip(kept, kept[1:]) if b < a)
    up = sum(1 for a, b in zip(kept, kept[1:]) if b > a)
    by_values: bool | None = None
    if down + up >= 2 and max(down, up) * 3 >= 2 * (down + up) and down != up:
        by_values = down > up
    words = {True: "lower is better", False: "higher is better"}
    moves = f"{down} of {down + up} moves between kept values go down, {up} go up"
    if by_name is not None and by_values is not None and by_name != by_values:
        raise InvalidInput(
            "direction",
            f"the metric's name {metric_name!r} says {words[by_name]} but its kept values say "
            f"{words[by_values]} ({moves}); pass --lower-is-better or --higher-is-better",
        )
    if by_name is not None:
        return by_name, f"from the name {metric_name!r}" + (" and the kept values" if by_values is not None else "")
    if by_values is not None:
        return by_values, f"from the kept values ({moves})"
    raise InvalidInput(
        "direction",
        f"cannot tell whether lower or higher {metric_name!r} is better: the name does not say and the kept "
        f"values do not decide ({moves}); pass --lower-is-better or --higher-is-better",
    )


def kept_values(rows: Iterable[Trial]) -> list[float]:
    return [t.core_metric for t in rows if t.status in ADVANCING and t.core_metric is not None]


class LineageBuilder:
    """Names parsed rows (in file order, in place): exp_id, parent, baseline, and then
    ``delta_vs_best`` once the direction is known.

    Keeps its state (branch tip, baseline, commits and ids seen, best so far), so watch
    can go on with the rows appended later.
    """

    def __init__(
        self,
        layout: Layout,
        *,
        lower_is_better: bool,
        best_policy: BestPolicy = BestPolicy.KEPT,
        source: str = "<stream>",
    ) -> None:
        self.layout = layout
        self.lower = lower_is_better
        self.eligible = frozenset(FailureLabel(v) for v in best_policy.eligible_statuses())
        self.source = source
        self.tip: str | None = None
        self.baseline: str | None = None
        self.best: float | None = None
        self.by_commit: dict[str, str] = {}
        self.ids: set[str] = set()
        self.unresolved = 0
        self.commit_key = layout.extra_key(layout.commit) if layout.commit else None
        self.id_key = layout.extra_key(layout.id_column) if layout.id_column else None
        self.parent_key = layout.extra_key(layout.parent) if layout.parent else None

    def name(self, trials: Sequence[Trial], *, first_row: int, lines: Sequence[int] | None = None) -> None:
        """Set exp_id, parent_exp and baseline_exp of ``trials`` (rows ``first_row``...)."""
        layout = self.layout
        segments = layout.segments
        width = layout.id_width
        single = len(segments) == 1 and segments[0][0] == 0
        base = segments[0][1] if single else 0
        id_key, parent_key, commit_key = self.id_key, self.parent_key, self.commit_key
        track = parent_key is not None
        advancing = ADVANCING
        tip, baseline = self.tip, self.baseline
        for offset, trial in enumerate(trials):
            index = first_row + offset
            if id_key is not None:
                exp_id = self._id_cell(trial, lines[offset] if lines is not None else None)
            elif single:
                exp_id = str(base + index).zfill(width)
            else:
                exp_id = layout.exp_id(index)
            trial.exp_id = exp_id
            if baseline is None:
                baseline = exp_id
            elif baseline != exp_id:
                trial.baseline_exp = baseline
            if track:
                ref = trial.extra.get(parent_key)
                ref = ref.strip() if isinstance(ref, str) else ""
                parent = ""
                if ref:
                    parent = ref if ref in self.ids else self.by_commit.get(ref, "")
                    if not parent:
                        self.unresolved += 1
                if parent != exp_id:
                    trial.parent_exp = parent
                self.ids.add(exp_id)
                commit = trial.extra.get(commit_key) if commit_key else None
                if isinstance(commit, str) and commit.strip():
                    self.by_commit[commit.strip()] = exp_id
            elif tip is not None and tip != exp_id:
                trial.parent_exp = tip
            if tip is None or trial.status in advancing:
                tip = exp_id
        self.tip, self.baseline = tip, baseline

    def _id_cell(self, trial: Trial, line: int | None) -> str:
        value = trial.extra.get(self.id_key)  # type: ignore[arg-type]
        value = value.strip() if isinstance(value, str) else "" if value is None else str(value)
        if not value or any(ch in value for ch in "\t\r\n/") or len(value) > MAX_SHORT_TEXT:
            raise InvalidInput(
                "exp_id", f"column {self.layout.id_column!r} must hold an id (not empty, no '/', at most "
                f"{MAX_SHORT_TEXT} characters), got {value!r} (in {self.source})", line=line,
                column=self.layout.index(self.layout.id_column) + 1,
            )
        return value

    def deltas(self, trials: Iterable[Trial]) -> None:
        """Set ``delta_vs_best``: metric minus the best eligible metric before the row."""
        best, lower, eligible = self.best, self.lower, self.eligible
        for trial in trials:
            metric = trial.core_metric
            if metric is None:
                continue
            if best is not None:
                trial.delta_vs_best = metric - best
            if trial.status in eligible and (best is None or (metric < best if lower else metric > best)):
                best = metric
        self.best = best

    def check(self, trials: Sequence[Trial], lines: Sequence[int]) -> None:
        """Length limits the parser does not check (a description over 64 KiB)."""
        di = self.layout.index(self.layout.description) + 1
        for trial, line in zip(trials, lines):
            if len(trial.hypothesis) > MAX_LONG_TEXT:
                raise InvalidInput(
                    "hypothesis",
                    f"is {len(trial.hypothesis)} characters long; the limit is {MAX_LONG_TEXT} (in {self.source})",
                    line=line, column=di,
                )


# --------------------------------------------------------------------------- reading (registry)


def read_trials(
    stream: TextIO | Iterable[str],
    *,
    source: str = "<stream>",
    row_lines: list[int] | None = None,
    fmt: str = NAME,
    options: ImportOptions | None = None,
    best_policy: BestPolicy | str = BestPolicy.KEPT,
    warnings: list[str] | None = None,
    layout_out: list[Layout] | None = None,
    **_: Any,
) -> Iterator[Trial]:
    """The trials of a results file (the registry's ``read``): the whole file is parsed
    and the direction decided before the first trial is yielded. ``warnings`` and
    ``layout_out``, when given, receive the warnings and the layout."""
    text = stream.read() if hasattr(stream, "read") else "".join(stream)  # type: ignore[union-attr]
    options = options or ImportOptions()
    table = parse_table(text, source=source, fmt=fmt, options=options)
    lower, how = infer_direction(table.layout.metric, kept_values(table.rows), options.lower_is_better)
    if warnings is not None:
        warnings.extend(table.warnings)
    if layout_out is not None:
        layout_out.append(table.layout)
    builder = LineageBuilder(table.layout, lower_is_better=lower, best_policy=BestPolicy(best_policy), source=source)
    builder.name(table.rows, first_row=0, lines=table.lines)
    builder.check(table.rows, table.lines)
    builder.deltas(table.rows)
    seen: set[str] = set()
    for trial, line in zip(table.rows, table.lines):
        if trial.exp_id in seen:
            raise InvalidInput("exp_id", f"duplicate exp_id {trial.exp_id!r} (in {source})", line=line,
                               column=table.layout.index(table.layout.id_column) + 1)
        seen.add(trial.exp_id)
        if row_lines is not None:
            row_lines.append(line)
        yield trial


def _read_generic(stream: TextIO | Iterable[str], **kwargs: Any) -> Iterator[Trial]:
    kwargs["fmt"] = GENERIC
    return read_trials(stream, **kwargs)


# --------------------------------------------------------------------------- writing


def format_number(value: Any, spec: Sequence[Any] | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    decimals, suffix = (spec or [None, ""])[0], (spec or [None, ""])[1]
    if isinstance(value, int) and decimals in (None, 0):
        return f"{value}{suffix}"
    if decimals is None:
        return f"{value!r}{suffix}" if isinstance(value, float) else f"{value}{suffix}"
    return f"{float(value):.{decimals}f}{suffix}"


def _clean(text: str, layout: Layout) -> str:
    if layout.is_csv:
        return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    out = text
    for ch in ("\r\n", "\n", "\r", layout.delimiter):
        out = out.replace(ch, " ")
    return out


def render_cells(trial: Trial, layout: Layout, *, parent_value: str | None = None) -> list[str]:
    """The cells of ``trial`` in the file's columns, numbers and words."""
    cells: list[str] = []
    extra = trial.extra
    field_of = layout.fields
    for name in layout.columns:
        key = layout.extra_key(name)
        if name == layout.metric:
            if trial.core_metric is None:
                cell = layout.placeholder if trial.status in CRASH_LIKE else ""
            else:
                cell = format_number(trial.core_metric, layout.formats.get(name))
        elif name == layout.status:
            word = extra.get(key)
            if isinstance(word, str):
                cell = word
            elif ROW_KEY in extra:  # a row of the file wrote the label's own name
                cell = trial.status.value
            else:  # recorded elsewhere: the file's word for the label
                cell = layout.words.get(trial.status.value, trial.status.value)
        elif name == layout.description:
            cell = trial.hypothesis
        elif name == layout.id_column:
            cell = trial.exp_id
        elif name in field_of and key not in extra:
            value = getattr(trial, field_of[name])
            cell = format_number(value, layout.formats.get(name)) if not isinstance(value, str) else value
        elif name == layout.parent and key not in extra:
            cell = parent_value if parent_value is not None else trial.parent_exp
        else:
            cell = format_number(extra.get(key), layout.formats.get(name))
        cells.append(_clean(cell, layout))
    return cells


def render_row(trial: Trial, layout: Layout, *, parent_value: str | None = None) -> str:
    """One line (with the file's line end) for ``trial``."""
    cells = render_cells(trial, layout, parent_value=parent_value)
    if layout.is_csv:
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator=layout.newline).writerow(cells)
        return buffer.getvalue()
    return layout.delimiter.join(cells) + layout.newline


def _same(a: Any, b: Any) -> bool:
    if type(a) is bool or type(b) is bool:
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def trial_says(trial: Trial, parsed: Trial, layout: Layout) -> bool:
    """Whether ``trial`` still says what ``parsed`` (its own text, re-parsed) says."""
    if (
        trial.status is not parsed.status
        or not _same(trial.core_metric, parsed.core_metric)
        or trial.hypothesis != parsed.hypothesis
    ):
        return False
    extra = trial.extra
    for key, value in parsed.extra.items():
        if key in RESERVED_KEYS:
            continue
        if key not in extra or not _same(extra[key], value):
            return False
    status_key = layout.extra_key(layout.status) if layout.status else None
    if status_key and status_key not in parsed.extra and status_key in extra:
        return False  # the trial has a word of its own now
    for name in layout.fields.values():
        if not _same(getattr(trial, name), getattr(parsed, name)):
            return False
    return True


def _row_text(raw: str) -> str:
    """The row's own physical line in a stored ``_line`` (after blank or stray lines)."""
    end = len(raw) - 1 if raw.endswith("\n") else len(raw)
    start = raw.rfind("\n", 0, end) + 1
    return raw[start:]


class Writer:
    """Writes trials in a layout: each trial's own text while it still says the same,
    rendered rows otherwise. Call :meth:`write` for every trial, then :meth:`close`."""

    def __init__(self, stream: TextIO, layout: Layout) -> None:
        self.stream = stream
        self.layout = layout
        self.parser = RowParser(layout)
        self.pending: list[Trial] = []  # trials sharing one physical line (merged rows)
        self.ends_open = False
        self.count = 0
        self.commits: dict[str, str] = {}
        stream.write(layout.header_text)
        self.ends_open = bool(layout.header_text) and not layout.header_text.endswith("\n")

    def _out(self, text: str) -> None:
        if not text:
            return
        if self.ends_open:
            self.stream.write(self.layout.newline)
        self.stream.write(text)
        self.ends_open = not text.endswith("\n")

    def write(self, trial: Trial) -> None:
        raw = trial.extra.get(LINE_KEY)
        part = trial.extra.get(PART_KEY, 0)
        if self.pending and not (isinstance(raw, str) and part and raw == self.pending[0].extra.get(LINE_KEY)):
            self._flush()
        if isinstance(raw, str):
            self.pending.append(trial)
        else:
            self._render(trial, prefix="")
        self.count += 1
        if self.layout.commit:
            commit = trial.extra.get(self.layout.extra_key(self.layout.commit))
            if isinstance(commit, str):
                self.commits[trial.exp_id] = commit

    def _flush(self) -> None:
        group, self.pending = self.pending, []
        raw = group[0].extra[LINE_KEY]
        line = _row_text(raw)
        prefix = raw[: len(raw) - len(line)]
        rows = self._reparse(line)
        parts = [t.extra.get(PART_KEY, 0) for t in group]
        if rows is not None and parts == list(range(len(rows))) and all(
            trial_says(t, rows[p], self.layout) for t, p in zip(group, parts)
        ):
            self._out(raw)
            return
        for i, trial in enumerate(group):
            self._render(trial, prefix=prefix if i == 0 else "")

    def _reparse(self, line: str) -> list[Trial] | None:
        parser = self.parser
        for kept in (parser.rows, parser.lines, parser.texts, parser.prefix, parser.warnings):
            kept.clear()
        parser.prefix_line = None
        try:
            parser.feed([line])
        except InvalidInput:
            return None
        rows = list(parser.rows)
        return rows or None

    def _render(self, trial: Trial, *, prefix: str) -> None:
        parent_value = None
        if self.layout.parent and trial.parent_exp:
            parent_value = self.commits.get(trial.parent_exp, trial.parent_exp)
        self._out(prefix + render_row(trial, self.layout, parent_value=parent_value))

    def close(self) -> int:
        if self.pending:
            self._flush()
        self._out(self.layout.trailer)
        return self.count


def write_trials(
    trials: Iterable[Trial],
    stream: TextIO,
    *,
    layout: Layout | Mapping[str, Any] | None = None,
    metric_name: str = "val_bpb",
    **_: Any,
) -> int:
    """Write ``trials`` (insertion order) in ``layout`` (a project's
    ``settings["results_file"]``; default: autoresearch's own header). Returns the rows."""
    if layout is None:
        layout = default_layout(metric_name)
    elif not isinstance(layout, Layout):
        layout = Layout.from_dict(layout)
    writer = Writer(stream, layout)
    for trial in trials:
        writer.write(trial)
    return writer.close()


# --------------------------------------------------------------------------- sniffing


def _first_cells(first_line: str, *, allow_csv: bool) -> list[str] | None:
    line = first_line.lstrip(_BOM).rstrip("\r\n")
    delimiter = _delimiter_of(line, allow_csv=allow_csv)
    if delimiter is None:
        return None
    cells = _cells_of(line, delimiter)
    while len(cells) > 1 and not cells[-1].strip():
        cells.pop()
    return cells if len(cells) >= 2 else None


def _fieldkit_like(cells: Sequence[str]) -> bool:
    names = {c.strip() for c in cells}
    return "exp_id" in names and ("core_metric" in names or "parent_exp" in names)


def sniff(first_line: str) -> bool:
    """A tab-separated header that names an autoresearch column (a commit, a status, a
    known metric) -- or a first row that starts with a commit hash and holds a number."""
    cells = _first_cells(first_line, allow_csv=False)
    if cells is None or _fieldkit_like(cells):
        return False
    if _looks_like_data(cells):
        return bool(_HEX.fullmatch(cells[0].strip()))
    lowered = {c.strip().lower().replace(" ", "_").replace("-", "_") for c in cells}
    if lowered & set(COMMIT_COLUMN_NAMES) or lowered & set(STATUS_COLUMN_NAMES):
        return True
    return any(direction_of_name(c) is not None for c in cells)


def sniff_generic(first_line: str) -> bool:
    """Any tab- or comma-separated line of two cells or more (tried last)."""
    cells = _first_cells(first_line, allow_csv=True)
    return cells is not None and not _fieldkit_like(cells)
