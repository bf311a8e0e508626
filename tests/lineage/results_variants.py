"""Generated look-alikes of the results files of issue 19's variant catalogue: 94 real
``results.tsv`` files of public autoresearch-style repositories, each read by a person
(with its repository's program.md/README) who wrote down its variant, trial count,
metric, direction and best -- decided by reading, not by running the importer. The
catalogue's entries are the ``#n`` in the notes; the files themselves are not here.

Each public function builds one *variant* seen in the wild. It returns ``(text, expected)``:
``text`` is a small file with the same shape and quirks as the real ones, and ``expected``
is what a correct importer should conclude from it. The values and descriptions are
synthetic: no row is copied from any real file. The functions are deterministic and use
only the standard library.

``expected`` always has these keys:

* ``trial_count``: the number of records, decided as a human reader would. Every row the
  loop wrote counts as a trial, including rows whose metric cell is not a number. The
  header, blank lines, stray program output, separators and annotation text do not count.
* ``metric``: the column that holds the loop's metric. For a headerless file it is the
  name the supplied ``--columns`` gives it. It is ``None`` when there is no single metric
  (long format, not a loop log).
* ``lower_is_better``: ``True``, ``False``, or ``None`` when the question does not apply.
* ``best_value``: the best metric under the ledger's default ``kept`` policy, meaning the
  best over rows whose status means keep or baseline, with ties going to the earliest
  row. ``None`` when no such row has a metric.
* ``notes``: what the variant tests and which catalogue entries (``#n``) it mirrors.

Optional keys, present when they apply:

* ``best_line``: the 1-based physical line of the best row (the header is line 1).
* ``text_lines``: physical lines that are *not* records (program output, separators,
  blank lines, annotation rows). The header is not listed.
* ``non_numeric_metric_lines``: lines of trials whose metric cell is not a number.
* ``shape_rule_trial_count``: the count issue 19's mechanical rule gives ("a line with
  the table's column count, or a status word where the status column is, is a trial"),
  when it differs from ``trial_count``.
* ``needs``: the flags a correct importer legitimately needs, e.g.
  ``["--metric total_ms", "--lower"]``. ``[]`` means it should import without flags.
* ``columns``: the header to pass with ``--columns`` for a headerless file.
* ``kept_moves``: ``(down, up, ties)`` between consecutive kept metric values, the
  evidence for issue 19's direction rule.
* ``refuse``: ``True`` when the file is not an experiment log and should be refused.
* ``naive_best_trap``: the value a careless importer would report as best (a
  crash-written zero, a sentinel, a decoy column...).
* ``delimiter`` / ``line_ending``: reported when they are not TAB and LF.

Use::

    from tests.lineage.results_variants import VARIANTS
    for name, make in VARIANTS.items():
        text, expected = make()
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable

__all__ = ["VARIANTS", "all_fixtures", "write_all"]

Fixture = tuple[str, dict]


# -- helpers ----------------------------------------------------------------------------


def _commit(seed: object, n: int = 7) -> str:
    """A deterministic fake git hash."""
    return hashlib.sha1(f"lineage-fixture-{seed}".encode()).hexdigest()[:n]


class _Doc:
    """Builds a file line by line while recording which lines are trials."""

    def __init__(self, sep: str = "\t", eol: str = "\n", final_eol: bool = True) -> None:
        self.sep = sep
        self.eol = eol
        self.final_eol = final_eol
        self.lines: list[str] = []
        self.trials: list[dict] = []
        self.text_lines: list[int] = []

    def _emit(self, text: str) -> int:
        self.lines.extend(text.split("\n"))
        return len(self.lines) - text.count("\n")  # the line the text starts on

    def header(self, cells: Iterable[str]) -> None:
        self._emit(self.sep.join(cells))

    def row(self, cells: Iterable[str], metric: float | None, eligible: bool, numeric: bool = True) -> int:
        """One trial on one physical line. ``metric`` is its value (``None``: no metric),
        ``eligible`` whether its status makes it a candidate for best (keep/baseline) and
        ``numeric`` whether the metric cell is written as a plain number."""
        line = self._emit(self.sep.join(cells))
        self.trials.append({"line": line, "metric": metric, "eligible": eligible, "numeric": numeric})
        return line

    def joined(self, first: list[str], second: list[str], trials: list[tuple[float | None, bool]]) -> int:
        """Two records on one physical line: the newline between them is missing, so the
        last cell of the first runs straight into the first cell of the second."""
        line = self._emit(self.sep.join(first) + self.sep.join(second))
        for metric, eligible in trials:
            self.trials.append({"line": line, "metric": metric, "eligible": eligible, "numeric": True})
        return line

    def text(self, text: str) -> int:
        line = self._emit(text)
        self.text_lines.append(line)
        return line

    def render(self) -> str:
        body = self.eol.join(self.lines)
        return body + (self.eol if self.final_eol and self.lines else "")

    def expected(
        self, *, metric: str | None, lower: bool | None, notes: str, needs: list[str] | None = None, **extra: object
    ) -> dict:
        out: dict = {
            "trial_count": len(self.trials),
            "metric": metric,
            "lower_is_better": lower,
            "best_value": None,
            "notes": notes,
            "needs": needs or [],
        }
        scored = [t for t in self.trials if t["eligible"] and t["metric"] is not None]
        if lower is not None and scored:
            best = scored[0]
            for t in scored[1:]:
                if (t["metric"] < best["metric"]) if lower else (t["metric"] > best["metric"]):
                    best = t
            out["best_value"] = best["metric"]
            out["best_line"] = best["line"]
            down = sum(1 for a, b in zip(scored, scored[1:]) if b["metric"] < a["metric"])
            up = sum(1 for a, b in zip(scored, scored[1:]) if b["metric"] > a["metric"])
            out["kept_moves"] = (down, up, len(scored) - 1 - down - up)
        if self.text_lines:
            out["text_lines"] = list(self.text_lines)
        odd = [t["line"] for t in self.trials if not t["numeric"]]
        if odd:
            out["non_numeric_metric_lines"] = odd
        if self.sep != "\t":
            out["delimiter"] = self.sep
        if self.eol != "\n":
            out["line_ending"] = self.eol
        out.update(extra)
        return out


def _f(value: float, digits: int = 6) -> str:
    return f"{value:.{digits}f}"


# -- classic autoresearch shapes ----------------------------------------------------------


def karpathy_classic() -> Fixture:
    """commit, val_bpb, memory_gb, status, description; keep/discard/crash; crashes written
    as 0.000000 and 0.0 (#14, #25, #38, #45, #69)."""
    d = _Doc()
    d.header(["commit", "val_bpb", "memory_gb", "status", "description"])
    plan = [
        (1.3120, "keep", "baseline run"),
        (1.3075, "keep", "raise matrix lr to 0.05"),
        (1.3191, "discard", "swap rmsnorm for layernorm"),
        (None, "crash", "depth 16 ran out of memory"),
        (1.2998, "keep", "longer warmdown"),
        (1.3003, "discard", "tie embeddings"),
        (1.2941, "keep", "wider mlp ratio 5"),
        (None, "crash", "bf16 logits overflowed"),
        (1.2950, "discard", "smaller batch, more steps"),
        (1.2902, "keep", "value embeddings on alternate layers"),
    ]
    for i, (v, status, desc) in enumerate(plan):
        mem = "0.0" if v is None else f"{40.0 + i * 0.3:.1f}"
        cell = "0.000000" if v is None else _f(v)
        d.row([_commit(("classic", i)), cell, mem, status, desc], v, status == "keep")
    return d.render(), d.expected(
        metric="val_bpb",
        lower=True,
        naive_best_trap=0.0,
        notes="karpathy's canonical file. Crash rows write 0.000000, which is no result "
        "on a crash row and never the best (#14, #25, #38, #45, #69).",
    )


def wide_extra_metrics_higher() -> Fixture:
    """A throughput metric first, several resource columns after it, and ≥ 8 kept moves
    almost all up (#12, #22, #39, #52)."""
    d = _Doc()
    d.header(["commit", "tok_per_sec", "vram_gb", "ram_gb", "cache_hit", "status", "description"])
    vals = [2.10, 2.35, 2.31, 2.62, 2.90, 2.70, 3.15, 3.40, 3.38, 3.92, 4.40, 4.05, 4.71, 5.02]
    keeps = [0, 1, 3, 4, 6, 7, 9, 10, 12, 13]
    for i, v in enumerate(vals):
        st = "keep" if i in keeps else "discard"
        d.row(
            [
                _commit(("wide", i)),
                f"{v:.3f}",
                "0.0",
                f"{0.70 + i * 0.01:.3f}",
                f"{min(1.0, i / 10):.3f}",
                st,
                f"prefetch tweak number {i} — cache window {4 + i}",
            ],
            v,
            st == "keep",
        )
    return d.render(), d.expected(
        metric="tok_per_sec",
        lower=False,
        notes="Higher-is-better throughput. The kept values rise 9 times out of 9, so the "
        "values decide even if the name does not (#12, #22, #39, #52).",
    )


def uppercase_words_minus_999_sentinel() -> Fixture:
    """BASELINE/KEEP/REVERT in upper case and a -999.000 'gate failed' sentinel in the
    metric (#3)."""
    d = _Doc()
    d.header(["commit", "score", "sharpe", "max_dd", "status", "description"])
    plan = [
        (None, "0.000", "BASELINE", "audited branch, gate not met"),
        (0.95, "0.950", "KEEP", "hourly fallback entries"),
        (None, "0.610", "REVERT", "tighter entry threshold"),
        (1.02, "1.020", "KEEP", "meta threshold 0.45"),
        (0.88, "0.880", "REVERT", "confidence-scaled sizing"),
        (None, "0.440", "REVERT", "short-side filter"),
        (1.41, "1.410", "REVERT", "auto iteration"),
        (-2.10, "-2.100", "REVERT", "balanced sample weights"),
    ]
    for i, (v, sharpe, st, desc) in enumerate(plan):
        cell = "-999.000" if v is None else f"{v:.3f}"
        d.row([f"exp{i}", cell, sharpe, f"{3 + i * 0.7:.2f}", st, desc], v, st in ("KEEP", "BASELINE"))
    return d.render(), d.expected(
        metric="score",
        lower=False,
        naive_best_trap=1.41,
        notes="-999.000 means 'the gate failed', not a result. The best kept value is a KEEP "
        "row. A REVERT row holds the overall maximum (#3).",
    )


# -- headerless ---------------------------------------------------------------------------


FLASH_COLUMNS = ["commit", "model", "params_B", "active_B", "tok_sec", "ttft_ms", "mem_gb", "status", "description"]


def headerless_inference_log() -> Fixture:
    """Line 1 is already data: 'HEAD' or hex in column 1, keep/discard in column 8, numbers
    where a header would have names (#15, #16)."""
    d = _Doc()
    plan = [
        ("HEAD", "MoE-400B-4bit", 2.95, 2210, "keep", 'E2E: "explain a rainbow" 340ms/tok'),
        ("HEAD", "MoE-400B-4bit", 0.61, 0, "discard", "mmap experts: page faults dominate"),
        ("HEAD", "MoE-400B-4bit", 3.20, 0, "keep", "fused attention command buffer"),
        ("HEAD", "MoE-400B-2bit", 4.85, 0, "keep", "2-bit experts, quality spot-checked"),
        ("HEAD", "MoE-400B-2bit", 4.60, 0, "discard", "speculative routing, cache pollution"),
        (_commit("fl1"), "MoE-400B-2bit", 5.40, 0, "keep", "bypass page cache for expert reads"),
        (_commit("fl2"), "MoE-400B-2bit", 5.10, 0, "discard", 'GPU top-k "looked" faster, was not'),
        (_commit("fl3"), "MoE-400B-2bit", 5.52, 1890, "keep", "batched prefill"),
    ]
    for commit, model, tok, ttft, st, desc in plan:
        d.row([commit, model, "400.0", "18.0", f"{tok:.2f}", str(ttft), "5.5", st, desc], tok, st == "keep")
    return d.render(), d.expected(
        metric="tok_sec",
        lower=False,
        columns=list(FLASH_COLUMNS),
        needs=["--columns " + ",".join(FLASH_COLUMNS)],
        notes="Headerless: line 1 is data (a status word in column 8, HEAD/hex commits, "
        "numbers where names would be). Detect this, name line 1, and accept --columns. "
        "The descriptions hold bare double quotes, which are not CSV quoting (#15, #16).",
    )


SKILL_COLUMNS = ["timestamp", "commit", "skill", "old_score", "new_score", "status", "dimension", "note", "eval_mode"]


def headerless_single_row_cjk() -> Fixture:
    """One headerless row from a skill-optimiser template: CJK text, an old/new score pair
    (#4)."""
    d = _Doc()
    d.row(
        [
            "2026-01-05T09:30",
            _commit("cjk"),
            "写作助手",
            "52",
            "61",
            "keep",
            "结构清晰度",
            "增加三个自检步骤",
            "dry_run",
        ],
        61.0,
        True,
    )
    return d.render(), d.expected(
        metric="new_score",
        lower=False,
        columns=list(SKILL_COLUMNS),
        needs=["--columns " + ",".join(SKILL_COLUMNS), "--metric new_score"],
        notes="A single data line with no header. old_score precedes new_score, so the metric "
        "must be named even after --columns. With one row, the direction cannot come "
        "from the values (#4).",
    )


# -- non-numeric metric cells and direction ----------------------------------------------


def fail_na_score_lower_in_microseconds() -> Fixture:
    """commit, cycle, score, improvement, status, description. The score is a time in µs
    (lower is better); one record says FAIL/NA; the kept values fall every time (#32)."""
    d = _Doc()
    d.header(["commit", "cycle", "score", "improvement", "status", "description"])
    score = 812345.5
    prev_kept = score
    d.row([_commit("us0"), "baseline", f"{score:.4f}", "0.00%", "keep", "baseline"], score, True)
    cycle = ["tick", "tock"]
    for i in range(1, 22):
        if i == 9:
            d.row(
                [
                    _commit(("us", i)),
                    cycle[i % 2],
                    "FAIL",
                    "NA",
                    "discard",
                    "inline head pointer broke the FIFO property test",
                ],
                None,
                False,
                numeric=False,
            )
            continue
        kept = i % 2 == 1
        value = round(prev_kept * (0.86 if kept else 1.07), 4)
        imp = (prev_kept - value) / prev_kept * 100
        st = "keep" if kept else "discard"
        d.row(
            [
                _commit(("us", i)),
                cycle[i % 2],
                f"{value:.4f}",
                f"{imp:.2f}%",
                st,
                f"cycle {i}: {'shrink' if kept else 'grow'} level index",
            ],
            value,
            kept,
        )
        if kept:
            prev_kept = value
    return d.render(), d.expected(
        metric="score",
        lower=True,
        needs=[],
        notes="Issue 19 cases 1 and 3. The FAIL/NA line is a trial with no metric, and its "
        "cells are kept verbatim. The name 'score' suggests higher is better, but 10 of "
        "10 kept moves go down: the values decide, with a warning naming both (#32).",
    )


def score_minimized_with_parent_column() -> Fixture:
    """An explicit parent column and a 'score' that program.md says to minimise; every row is
    keep (#36)."""
    d = _Doc()
    d.header(
        ["candidate_id", "parent_id", "timestamp", "score", "valid", "f_res_thz", "solve_status", "status", "note"]
    )
    v = 0.52
    parent = "root"
    for i in range(1, 12):
        cid = f"{i:04d}"
        d.row(
            [
                cid,
                parent,
                f"2026-02-01T10:{i:02d}:00",
                _f(v),
                "true",
                f"{0.40 + v:.6f}",
                "success",
                "keep",
                f"ring {i}: radius +{i * 0.5:.1f}",
            ],
            v,
            True,
        )
        parent = cid
        v = round(v * 0.62, 6)
    return d.render(), d.expected(
        metric="score",
        lower=True,
        notes="'score' reads as higher-is-better, but 10 of 10 kept moves go down (program.md: "
        "'minimize the score'). A parent column names each row's parent. There are two "
        "status-like columns (solve_status, status) (#36).",
    )


def fitness_lower_too_few_moves() -> Fixture:
    """'fitness' documented as LOWER IS BETTER, but only 5 kept moves, below the 8-move
    threshold (#58)."""
    d = _Doc()
    d.header(["commit", "fitness", "recall", "duration_ms", "status", "description"])
    plan = [
        (0.6010, "baseline"),
        (0.6030, "discard"),
        (0.5995, "SUCCESS"),
        (0.5950, "SUCCESS"),
        (0.5120, "keep"),
        (0.5190, "discard"),
        (0.5101, "keep"),
        (0.5140, "discard"),
        (0.5076, "keep"),
        (0.5150, "discard"),
    ]
    for i, (v, st) in enumerate(plan):
        d.row(
            [_commit(("fit", i)), _f(v), "0.2000", str(400 + i * 13), st, f"tune coupling step {i}"],
            v,
            st in ("keep", "baseline", "SUCCESS"),
        )
    return d.render(), d.expected(
        metric="fitness",
        lower=True,
        needs=["--lower"],
        notes="The name suggests higher and the loop went lower, but with only 5 kept moves the "
        "evidence is too thin: refuse, naming --lower. SUCCESS means keep (#58).",
    )


def long_format_metric_per_row() -> Fixture:
    """One metric name and value per row (run_id, metric, …, actual_value); two rows lack
    the trailing description cell (#62)."""
    d = _Doc()
    cols = [
        "run_id",
        "metric",
        "predicted_value",
        "predicted_direction",
        "confidence",
        "actual_value",
        "signal",
        "runtime_s",
        "status",
        "description",
    ]
    d.header(cols)
    rows = [
        ("ablation-a", "gate_false_accept_pp", "0", "match-baseline", "high", "0", "confirm", "2", None),
        ("ablation-a", "gate_safe_finish_pp", "0", "match-baseline", "high", "0", "confirm", "2", None),
        (
            "regime-b",
            "diffuse_false_accept_on",
            "0",
            "beat-baseline",
            "high",
            "25.0",
            "disconfirm",
            "1",
            "surprise: threshold too loose for diffuse cases",
        ),
        (
            "regime-b",
            "diffuse_false_accept_off",
            "100",
            "regress",
            "high",
            "100",
            "confirm",
            "1",
            "ablating the gate accepts every diffuse case",
        ),
        (
            "calib-c",
            "heldout_acc_delta_pp",
            "0",
            "beat-baseline",
            "medium",
            "17.5",
            "confirm",
            "1",
            "weighted rule beats plain count on held-out split",
        ),
        (
            "robust-d",
            "false_accept_vs_knob",
            "0",
            "match-baseline",
            "high",
            "0",
            "confirm",
            "4",
            "headline invariant across five knob settings",
        ),
        (
            "adv-e",
            "emit_corrupt_pct",
            "0",
            "match-baseline",
            "medium",
            "12",
            "partial",
            "1",
            "one of six defences falls to self-report corruption",
        ),
    ]
    for r in rows:
        cells = list(r[:8]) + ["keep"] + ([] if r[8] is None else [r[8]])
        d.row(cells, None, True, numeric=True)
    return d.render(), d.expected(
        metric=None,
        lower=None,
        notes="Long format: each row names its own metric ('metric' column) and value "
        "('actual_value'). All 7 rows are trials. There is no project-wide metric or best; "
        "document what the project's metric is. Lines 2-3 are one cell short (no "
        "description) (#62).",
    )


def self_describing_metric_columns() -> Fixture:
    """metric_name, metric_value and metric_direction columns in a wide file, a 'decision'
    column, and NaN on the crash row (#23)."""
    d = _Doc()
    d.header(
        [
            "run_id",
            "timestamp",
            "parent_ref",
            "candidate_ref",
            "phase",
            "metric_name",
            "metric_value",
            "metric_direction",
            "gate_status",
            "decision",
            "idea",
        ]
    )
    plan = [
        ("baseline_001", "no_ref", "no_ref", "baseline", 0.81, "pass", "keep", "baseline separation check"),
        ("iterate_002", "baseline_001", "cand_002", "iterate", 0.86, "pass", "keep", "simpler gate parsing"),
        ("iterate_003", "cand_002", "cand_003", "iterate", 0.88, "pass", "discard", "broad exploratory probes"),
        ("crash_004", "cand_002", "cand_004", "iterate", None, "fail", "crash", "unrestricted timing sweep"),
        ("check_005", "cand_002", "cand_002", "iterate", 0.70, "pass", "discard", "clean rerun on fixture"),
    ]
    for i, (rid, par, cand, phase, v, gate, dec, idea) in enumerate(plan):
        d.row(
            [
                rid,
                f"2026-03-0{i + 1}T01:00:00Z",
                par,
                cand,
                phase,
                "separation_score",
                "NaN" if v is None else f"{v:.2f}",
                "max",
                gate,
                dec,
                idea,
            ],
            v,
            dec == "keep",
            numeric=v is not None,
        )
    return d.render(), d.expected(
        metric="metric_value",
        lower=False,
        needs=["--higher"],
        naive_best_trap=0.88,
        notes="The file states its own metric (metric_name) and direction (metric_direction = "
        "max). An importer that reads them needs no flag. The best overall row is a "
        "discard; NaN is no result (#23).",
    )


def dash_placeholders_in_metric() -> Fixture:
    """'-' in the metric cell of partial runs and 'n/a' as a commit (#20, #24, #46)."""
    d = _Doc()
    d.header(["commit", "mean_score", "min_score", "set_a", "set_b", "cost_usd", "status", "description", "notes"])
    plan = [
        (0.0712, "keep", "prompt v3"),
        (0.0705, "discard", "scale by episode count"),
        (0.0930, "keep", "scale only for procedural sets"),
        (None, "discard", "distinctness check"),
        (None, "discard", "skip the review pass"),
        (None, "keep", "pass obstacles to step two"),
        (0.0951, "keep", "merge near-duplicate lines"),
    ]
    for i, (v, st, desc) in enumerate(plan):
        commit = "n/a" if i == 4 else _commit(("dash", i))
        cell = "-" if v is None else f"{v:.4f}"
        d.row(
            [
                commit,
                cell,
                "-" if v is None else f"{(v or 0) - 0.01:.4f}",
                f"{0.06 + i * 0.004:.4f}",
                "-" if i % 3 == 0 else f"{0.05 + i * 0.003:.4f}",
                f"{0.4 + i * 0.1:.2f}",
                st,
                desc,
                f"set_a {'+' if i % 2 else '-'}0.00{i}",
            ],
            v,
            st == "keep",
            numeric=v is not None,
        )
    return d.render(), d.expected(
        metric="mean_score",
        lower=False,
        notes="'-' in the metric cell: a trial without a metric, never dropped. 'n/a' is a commit (#20, #24, #46).",
    )


def empty_metric_cells_failed_rows() -> Fixture:
    """Failed rows leave every metric cell empty; statuses ok/partial/failed; the commit is
    'unknown' (#11, #70)."""
    d = _Doc()
    d.header(["git_commit", "wer", "war", "int8_wer", "status", "description"])
    plan = [
        (None, "failed", 'baseline | RuntimeError("dtype mismatch in conv bias")'),
        (None, "failed", "baseline | gated dataset, token missing"),
        (15.10, "partial", "baseline"),
        (15.10, "ok", "baseline with int8 export"),
        (13.85, "ok", "lower-case normalisation"),
        (13.85, "ok", "strip punctuation before scoring"),
        (12.40, "ok", "decoder tail padding 200"),
    ]
    for v, st, desc in plan:
        cells = [
            "unknown",
            "" if v is None else f"{v:.4f}",
            "" if v is None else f"{100 - v:.4f}",
            "" if v is None or st == "partial" else f"{v + 0.9:.4f}",
            st,
            desc,
        ]
        d.row(cells, v, st == "ok", numeric=v is not None)
    return d.render(), d.expected(
        metric="wer",
        lower=True,
        notes="Empty metric cells on failed rows are trials without a metric. 'partial' is an "
        "unknown status word (not keep). The descriptions hold quotes and '|' (#11, #70).",
    )


def na_on_crash_rows_and_bogus_discard() -> Fixture:
    """'N/A' metrics on crash rows, 'reverted' as a commit, and a discard with an impossible
    value (#75, #53)."""
    d = _Doc()
    d.header(["commit", "val_bpb", "memory_gb", "status", "description"])
    d.row(["baseline", "1.702100", "0.0", "keep", "Baseline: 4 layers, 256 dim"], 1.7021, True)
    plan = [
        (None, "crash"),
        (1.6650, "keep"),
        (None, "crash"),
        (0.0041, "discard"),
        (1.6712, "discard"),
        (None, "crash"),
        (1.6233, "keep"),
        (1.6301, "discard"),
    ]
    for i, (v, st) in enumerate(plan):
        desc = "INVALID: causal mask missing, bogus val_bpb" if v == 0.0041 else f"{st.upper()}: attention variant {i}"
        d.row(["reverted", "N/A" if v is None else _f(v), "0.0", st, desc], v, st == "keep", numeric=v is not None)
    return d.render(), d.expected(
        metric="val_bpb",
        lower=True,
        naive_best_trap=0.0041,
        notes="N/A on crash rows means no metric. The discard row's 0.0041 is a leak and must not "
        "be best: the kept policy avoids it (#75, #53).",
    )


def zero_metric_on_non_crash_rows() -> Fixture:
    """0.000000 val_bpb on discard and 'repair' rows that are not marked crash, plus the
    file's own delta_vs_best column (#31)."""
    d = _Doc()
    d.header(
        ["commit", "kind", "thread", "val_bpb", "delta_vs_best", "memory_gb", "status", "hypothesis", "description"]
    )
    best = None
    plan = [
        (0.9712, "keep"),
        (0.9650, "keep"),
        (0.0, "discard"),
        (1.0121, "discard"),
        (0.9588, "keep"),
        (0.0, "repair"),
        (0.0, "discard"),
        (0.9544, "keep"),
        (0.9601, "tentative"),
    ]
    for i, (v, st) in enumerate(plan):
        delta = 0.0 if v == 0.0 or best is None else v - best
        if st == "keep" and (best is None or v < best):
            best = v
        d.row(
            [
                _commit(("zero", i)),
                "architecture",
                "backbone",
                _f(v),
                _f(delta),
                "29.9",
                st,
                "A longer hypothesis about router load and value residuals that runs on for a while",
                f"variant {i}",
            ],
            None if v == 0.0 else v,
            st == "keep",
        )
    return d.render(), d.expected(
        metric="val_bpb",
        lower=True,
        naive_best_trap=0.0,
        notes="Failed runs were written as 0.000000 without the crash status. Read as numbers, "
        "they win any lower-is-better 'best' and spoil delta_vs_best. The intended "
        "reading is 'no result'. tentative/repair are unknown words (#31).",
    )


# -- status columns under other names ------------------------------------------------------


def accepted_zero_one_flag() -> Fixture:
    """An 'accepted' column of 1/0 instead of a status column; the metric is an error rate
    (#18)."""
    d = _Doc()
    d.header(["gen", "sha", "intent_err", "shape_err", "wall_s", "usd", "accepted", "note", "violations", "split"])
    plan = [
        (0.4410, 1),
        (0.4302, 1),
        (0.3550, 1),
        (0.3601, 0),
        (0.3559, 0),
        (0.2810, 1),
        (0.2822, 0),
        (0.2810, 0),
        (0.1402, 1),
    ]
    for i, (v, acc) in enumerate(plan):
        d.row(
            [
                str(i),
                "baseline" if i == 0 else _commit(("acc", i)),
                _f(v),
                _f(v * 1.2),
                f"{50 + i * 1.7:.2f}",
                "0.0",
                str(acc),
                f"enable_template_{i}",
                "",
                "dev",
            ],
            v,
            acc == 1,
        )
    return d.render(), d.expected(
        metric="intent_err",
        lower=True,
        needs=["--status accepted", "--status-map 1=keep,0=discard"],
        notes="Acceptance is a 0/1 column under a name that is not a status name. Without the "
        "mapping every row is keep; the best value happens to be the same, but the lineage "
        "is wrong. Empty 'violations' cells (#18).",
    )


def verdict_words_ranges_multi_series() -> Fixture:
    """verdict BASELINE/BETTER/SAME/WORSE; several problems interleaved; metric cells such as
    '~0.05', '0.03-0.08', 'identical' (#43)."""
    d = _Doc()
    d.header(
        ["iter", "date", "hypothesis", "method", "problem", "alpha", "hpd_mean", "hpd_ks", "time_s", "verdict", "notes"]
    )
    plan = [
        ("0", "baseline", "Sampler A", "ProbA", "0.5", "0.430", "0.150", "BASELINE"),
        ("0", "baseline", "Sampler A", "ProbB", "1.0", "0.720", "0.410", "BASELINE"),
        ("1", "H1 moment matching", "Sampler M", "ProbA", "0.5", "0.560", "0.120", "BETTER"),
        ("1", "H1 moment matching", "Sampler M", "ProbB", "1.0", "0.530", "0.080", "BETTER"),
        ("2", "H2 fewer steps", "Sampler M", "ProbA", "0.5", "0.480", "0.090", "SAME"),
        ("3", "H3 auto scale", "Sampler M*", "ProbA", "0.0-1.5", "~0.51", "~0.05", "BETTER"),
        ("4", "H4 solver swap", "Sampler W", "both", "-", "identical", "identical", "SAME"),
        ("5", "lit search", "-", "-", "-", "-", "-", "-"),
        ("6", "H5 noise sweep", "Sampler M", "ProbA", "0.5", "0.49-0.53", "0.03-0.08", "BETTER"),
        ("7", "H6 splitting", "Sampler G", "ProbB", "1.0", "0.260", "0.560", "WORSE"),
        ("8", "reference grid", "Grid", "ProbC", "-", "0.500", "0.020", "BASELINE"),
    ]
    for it, hyp, method, prob, alpha, mean, ks, verdict in plan:
        try:
            v: float | None = float(ks)
        except ValueError:
            v = None
        d.row(
            [it, "2026-01-20", hyp, method, prob, alpha, mean, ks, "-", verdict, "calibration note"],
            v,
            verdict in ("BASELINE", "BETTER"),
            numeric=v is not None,
        )
    return d.render(), d.expected(
        metric="hpd_ks",
        lower=True,
        needs=["--metric hpd_ks", "--lower"],
        notes="The verdict column uses BETTER (keep), SAME/WORSE (discard) and BASELINE. The "
        "metric cells '~0.05', '0.03-0.08', 'identical' and '-' are trials without a "
        "metric. Several problems are interleaved, so the 'best' mixes series. The best "
        "kept value here is the reference grid baseline (#43).",
    )


def correct_ok_fail_zero_rows() -> Fixture:
    """No keep/discard: a 'correct' column with OK/FAIL; FAIL rows write 0.000 in every
    number; epoch timestamps; notes that start with ' | ' (#30)."""
    d = _Doc()
    d.header(["timestamp", "commit", "toffoli", "clifford", "qubits", "ops", "correct", "notes"])
    t = 1770000000
    plan = [
        (9.81e7, "OK", "baseline"),
        (9.65e7, "OK", "subtract as inverse adder"),
        (None, "FAIL", " | load: op count exceeds cap"),
        (9.65e7, "OK", "same circuit, new seed"),
        (9.02e7, "OK", "windowed lookup"),
        (None, "FAIL", " | load: control equals target"),
        (9.11e7, "OK", "wider window"),
        (8.77e7, "OK", "lazy uncompute"),
    ]
    for i, (v, ok, note) in enumerate(plan):
        if v is None:
            cells = [str(t + i * 97), _commit(("ec", i)), "0.000", "0.000", "0", "0", ok, note]
        else:
            cells = [
                str(t + i * 97),
                _commit(("ec", i)),
                f"{v:.3f}",
                f"{v * 2.1:.3f}",
                str(3300 - i * 10),
                str(int(v * 3.9)),
                ok,
                note,
            ]
        d.row(cells, v, ok == "OK")
    return d.render(), d.expected(
        metric="toffoli",
        lower=True,
        needs=["--lower"],
        naive_best_trap=0.0,
        notes="The status is OK/FAIL under 'correct'. FAIL rows are crash-like and their zeros "
        "are no result. The README says lower is better; the name says nothing and there "
        "are only 5 moves (#30).",
    )


def correctness_column_mixed_units() -> Fixture:
    """A 'correctness' column that mixes PASS/FAIL with REVERT/KEEP/BLOCKED; different
    kernel types share one throughput column (#33)."""
    d = _Doc()
    d.header(
        [
            "experiment",
            "tag",
            "kernel_type",
            "throughput_tflops",
            "latency_us",
            "speedup_vs_pytorch",
            "correctness",
            "peak_vram_mb",
            "description",
        ]
    )
    plan = [
        (0, "baseline", "qmatmul", 14.2, "PASS"),
        (4, "autotune", "qmatmul", 121.5, "PASS"),
        (7, "split_k", "qmatmul", 118.0, "REVERT"),
        (9, "two_level_k", "qmatmul", 133.9, "KEEP"),
        (12, "fp4_tiles", "fp4_matmul", 1480.0, "PASS"),
        (15, "bad_swizzle", "fp4_matmul", 0.0, "FAIL"),
        (21, "serve_e2e", "e2e_serving", 9120.4, "PASS"),
        (22, "oom_calib", "quantization", 0.0, "BLOCKED"),
    ]
    for exp, tag, kind, v, corr in plan:
        metric = None if corr in ("FAIL", "BLOCKED") else v
        d.row(
            [
                str(exp),
                tag,
                kind,
                f"{v:.1f}",
                "0" if v == 0 else f"{1e5 / (v + 1):.1f}",
                "0" if v == 0 else f"{v / 60:.2f}",
                corr,
                "0" if v == 0 else "1603.2",
                f"{tag} on {kind}",
            ],
            metric,
            corr in ("PASS", "KEEP"),
        )
    return d.render(), d.expected(
        metric="throughput_tflops",
        lower=False,
        notes="The status column is named 'correctness' and mixes correctness with decisions. "
        "The 'TFLOPS' column holds tok/s on e2e_serving rows, so the best across kernel "
        "types is an artefact. It is meaningful per kernel_type only (#33).",
    )


def same_improved_status_words() -> Fixture:
    """SAME/IMPROVED status words, a metric named 'yield', and a full 40-hex commit on the
    first row (#66)."""
    d = _Doc()
    d.header(["commit_hash", "yield", "status", "description"])
    plan = [
        (0.9600, "SAME"),
        (0.9600, "SAME"),
        (0.9300, "SAME"),
        (0.9900, "IMPROVED"),
        (0.9900, "SAME"),
        (0.9410, "SAME"),
    ]
    for i, (v, st) in enumerate(plan):
        d.row(
            [_commit(("yield", i), 40 if i == 0 else 7), f"{v:.4f}", st, f"weights {0.1 + i * 0.05:.2f}/0.30/0.30"],
            v,
            st == "IMPROVED",
        )
    return d.render(), d.expected(
        metric="yield",
        lower=False,
        needs=["--higher"],
        notes="SAME maps to discard and IMPROVED to keep. 'yield' (really a precision) gives no "
        "direction, and one keep gives no moves. Commit lengths are mixed (40 and 7) (#66).",
    )


def kept_true_false_json_params() -> Fixture:
    """A 'kept' column of True/False, a running best_score decoy, and bare JSON with double
    quotes in a TSV cell (#63)."""
    d = _Doc()
    d.header(["experiment", "timestamp", "score", "best_score", "kept", "mutations", "elapsed_sec", "params"])
    best = None
    vals = [70.1, 69.8, 71.4, 60.2, 72.0, 71.9, 73.3, 73.1, 72.2]
    for i, v in enumerate(vals):
        kept = best is None or v > best
        if kept:
            best = v
        params = json.dumps({"min_df": 2, "max_edges": 10 + i, "norm": "l2"})
        d.row(
            [
                str(i + 1),
                f"2026-01-09T11:{i:02d}:00.000000",
                f"{v:.4f}",
                f"{best:.4f}",
                str(kept),
                f"max_edges: {9 + i} -> {10 + i}",
                f"{3.0 + i * 0.2:.1f}",
                params,
            ],
            v,
            kept,
        )
    return d.render(), d.expected(
        metric="score",
        lower=False,
        notes="True and False are the status words. best_score is a running maximum and must "
        "not be taken as the metric. The params cells hold bare JSON with double quotes "
        "and commas, which is not TSV quoting (#63).",
    )


# -- line endings, delimiters, quoting ----------------------------------------------------


def crlf_uppercase_sparse_cells() -> Fixture:
    """CRLF line ends, KEPT/REVERTED, many empty cells, a best_so_far decoy, and a REVERTED
    row that beats the best kept (#68, #54, #67)."""
    d = _Doc(eol="\r\n")
    d.header(
        [
            "id",
            "timestamp",
            "hypothesis",
            "balanced_accuracy",
            "mcc",
            "ece",
            "top_5_accuracy",
            "best_so_far",
            "status",
            "duration_s",
            "commit_sha",
            "error",
        ]
    )
    plan = [
        ("1", 0.771, "KEPT"),
        ("1", 0.772, "KEPT"),
        ("2", 0.779, "KEPT"),
        ("5", 0.768, "REVERTED"),
        ("9", 0.788, "REVERTED"),
        ("12", 0.781, "KEPT"),
    ]
    best = 0.0
    for i, (rid, v, st) in enumerate(plan):
        if st == "KEPT":
            best = max(best, v)
        sparse = i < 2
        d.row(
            [
                rid,
                f"2026-02-1{i}T00:00:00+00:00",
                "baseline" if i < 2 else f"label smoothing {i / 20:.2f}",
                _f(v),
                "" if sparse else f"{v - 0.1:.6f}",
                "" if sparse else f"{0.05 + i / 100:.6f}",
                "" if sparse else f"{v + 0.12:.6f}",
                _f(best),
                st,
                str(3800 + i * 50),
                _commit(("crlf", i)),
                "",
            ],
            v,
            st == "KEPT",
        )
    return d.render(), d.expected(
        metric="balanced_accuracy",
        lower=False,
        naive_best_trap=0.788,
        notes="CRLF line ends (export byte for byte). KEPT/REVERTED in upper case. The id repeats. "
        "Many cells are empty. best_so_far is a decoy. The overall maximum is a REVERTED "
        "row (#68, #54, #67).",
    )


def comma_csv_fully_quoted() -> Fixture:
    """A results.csv with comma delimiters, every text cell double-quoted, and no status
    column (#73)."""
    d = _Doc(sep=",")
    d.header(['"iteration"', '"description"', '"j_index"', '"timestamp"'])
    vals = [0.8012, 0.7950, 0.8077, 0.8031, 0.8120, 0.8104, 0.8099, 0.8151, 0.8142, 0.8137]
    for i, v in enumerate(vals):
        desc = f'"feature set {i}, downsample and re-tune penalty"'
        d.row([str(i + 1), desc, f"{v:.6f}", f'"2026-03-0{1 + i // 4} 14:{10 + i:02d}:05.123456"'], v, True)
    return d.render(), d.expected(
        metric="j_index",
        lower=False,
        needs=["--higher"],
        notes="Comma-delimited, with quoted cells that contain commas. There is no status column, "
        "so every row is keep, and the values zig-zag (no keep decisions), so the "
        "direction needs a flag (#73).",
    )


def tsv_with_csv_style_quoting() -> Fixture:
    """TSV descriptions wrapped in double quotes with doubled inner quotes; crash rows leave
    the metric and memory cells empty (#44, #76)."""
    d = _Doc()
    d.header(["commit", "val_bpb", "memory_gb", "status", "description"])
    plan = [
        (2.3012, "keep", "--preset small"),
        (1.5540, "keep", "--preset small --steps 2x"),
        (1.4702, "keep", "--preset small --batch 4096"),
        (None, "crash", "--preset small --batch 1024"),
        (1.5121, "discard", "--preset large --seq 768"),
        (None, "crash", "--preset tiny"),
        (1.4988, "keep", "--preset small --warmup 2%"),
    ]
    for i, (v, st, args) in enumerate(plan):
        desc = f'"run_tag=night-{i} exp=e{i} args=""{args}"""'
        d.row(
            [_commit(("q", i // 3)), "" if v is None else _f(v), "" if v is None else "1.002", st, desc],
            v,
            st == "keep",
            numeric=v is not None,
        )
    return d.render(), d.expected(
        metric="val_bpb",
        lower=True,
        notes="CSV quoting conventions inside a TSV: keep each description byte for byte (with "
        "its quotes) or unquote it consistently, and export it as it was. Crash rows have "
        "empty cells (#44, #76).",
    )


# -- stray and damaged lines --------------------------------------------------------------


def interleaved_program_output() -> Fixture:
    """The harness echoes a 7-field status line before each record, and its second cell is a
    large number (#72)."""
    d = _Doc()
    d.header(["commit", "generations_per_s", "status", "description"])
    recs = [
        (140.2, "keep", "baseline: sparse list"),
        (140.2, "discard", "dense grid, scans every cell"),
        (21800.4, "keep", "hybrid grid plus live list"),
        (33120.9, "keep", "double-buffered colours"),
        (40110.0, "keep", "ring buffer average"),
    ]
    for i, (v, st, desc) in enumerate(recs):
        echoes = 2 if i == 1 else 1
        for k in range(echoes):
            d.text(
                "\t".join(
                    [
                        f"2026-01-11 10:{i * 4 + k:02d}:00",
                        str(int(v * 180)),
                        f"{v - 0.1:.2f}",
                        f"180.00{i}{k}",
                        "true",
                        "null",
                        "",
                    ]
                )
            )
        d.row([_commit(("golly", i)), f"{v:.2f}", st, desc], v, st == "keep")
    exp = d.expected(
        metric="generations_per_s",
        lower=False,
        needs=["--higher"],
        naive_best_trap=float(int(40110.0 * 180)),
        notes="Stray program output with 7 fields, more than the header's 4, is interleaved with "
        "the records. It is text, each line named in one warning, and its numbers (up to "
        "7.2 million) must not become trials or the best. 3 kept moves are too few for the "
        "direction rule (#72).",
    )
    return d.render(), exp


def separator_line_and_extra_trailing_cells() -> Fixture:
    """Upper-case KEEP, a free-text separator line mid-file, then rows with 2 unnamed extra
    cells (#5)."""
    d = _Doc()
    d.header(["timestamp", "experiment", "hypothesis", "score", "status"])
    first = [88, 95, 100, 100, 100]
    for i, v in enumerate(first):
        d.row(
            [f"2026-02-01T1{i}:00:00", f"feature-batch-{i}", f"adding widget set {i} raises coverage", str(v), "KEEP"],
            float(v),
            True,
        )
    d.text("── rubric v2 from here; rows above were scored on v1, count them as half ──")
    second = [58, 71, 90, 97, 100]
    for i, v in enumerate(second):
        d.row(
            [
                f"2026-02-09T1{i}:05:00+02:00",
                f"v2-step-{i}",
                f"stub for probe B{i} lifts its cap",
                str(v),
                "KEEP",
                "100",
                str(v - 7),
            ],
            float(v),
            True,
        )
    return d.render(), d.expected(
        metric="score",
        lower=False,
        notes="A prose separator line is text. The rows after it have 2 extra unnamed cells: "
        "they are still trials, with the extra cells kept for export (#5).",
    )


def annotation_rows_and_cjk_status() -> Fixture:
    """'---' annotation rows in the table's shape; CJK status words carrying annotations; %
    cells; the metric (val_score) is not the first score column (#47)."""
    d = _Doc()
    d.header(["round", "strategy", "train_score", "val_score", "train_return", "val_return", "status"])
    plan = [
        ("0", "均线交叉基线", -0.31, -1.52, "基线"),
        ("1", "RSI回归", -1.70, -2.95, "回滚"),
        ("2", "通道突破", 0.41, 0.48, "保留✔"),
        ("3", "加入ATR止损", 0.29, 0.05, "回滚(交易<10)"),
        ("4", "双向过滤", 0.35, 0.91, "保留✔✔"),
        ("---", "阶段小结：趋势类优于回归类", None, None, "已完成"),
        ("5", "通道+斜率", 0.18, 1.33, "旧最佳(test:-8.1%)"),
        ("---", "发现新组合", None, None, "突破性改进"),
        ("6", "组合+做空过滤", 0.12, 1.61, "最新最佳✔✔✔(test:+2.2%,dd:4.9%)"),
        ("7", "仓位动态化", 0.02, 1.44, "回滚"),
    ]
    for rnd, strat, tr, va, st in plan:
        if va is None:
            d.text("\t".join([rnd, strat, "-", "-", "-", "-", st]))
            continue
        d.row(
            [rnd, strat, f"{tr:.4f}", f"{va:.4f}", f"{tr * 20:.2f}%", f"{va * 3:.2f}%", st],
            va,
            st.startswith(("保留", "旧最佳", "最新最佳", "基线")),
        )
    return d.render(), d.expected(
        metric="val_score",
        lower=False,
        shape_rule_trial_count=10,
        needs=["--metric val_score", "--status-map (see status_map)"],
        status_map={
            "保留✔": "keep",
            "保留✔✔": "keep",
            "旧最佳(test:-8.1%)": "keep",
            "最新最佳✔✔✔(test:+2.2%,dd:4.9%)": "keep",
            "基线": "baseline",
            "回滚": "discard",
            "回滚(交易<10)": "discard",
        },
        notes="The '---' rows have the table's column count, so the mechanical shape rule makes "
        "them trials without a metric. By reading they are annotations. Status words carry "
        "check marks and notes; 保留/旧最佳/最新最佳 mean keep and 回滚 means discard. "
        "train_score comes before the real metric val_score (#47).",
    )


def two_records_on_one_line() -> Fixture:
    """A missing newline joins two records into one physical line of 2n-1 fields (#21,
    #58)."""
    d = _Doc()
    cols = ["commit", "fitness", "recall", "duration_ms", "status", "description"]
    d.header(cols)
    d.row([_commit("j0"), "0.611000", "0.2000", "455", "baseline", "initial parameters"], 0.611, True)
    a = [_commit("j1"), "0.613000", "0.2000", "470", "discard", "lower threshold to 0.5 (worse)"]
    b = [_commit("j2"), "0.607500", "0.2000", "431", "keep", "raise prune threshold to 0.3"]
    d.joined(a, b, [(0.6130, False), (0.6075, True)])
    for i, v in enumerate([0.6010, 0.6102, 0.5921, 0.5990, 0.5874, 0.5850, 0.5901, 0.5799]):
        st = "keep" if v < 0.6 and i % 2 == 0 else "discard"
        d.row([_commit(("j", i + 3)), _f(v), "0.2000", str(420 + i * 9), st, f"coupling step {i}"], v, st == "keep")
    return d.render(), d.expected(
        metric="fitness",
        lower=True,
        needs=["--lower"],
        shape_rule_trial_count=len(d.trials) - 1,
        notes="Line 3 carries two records (11 fields under a 6-column header) because a newline "
        "was lost. By reading it is 2 trials. A shape rule sees 'discard' where the status "
        "belongs and makes it 1 trial, and the second record vanishes into the first's "
        "description. At least a warning should name line 3. Documented as lower is better; the name suggests "
        "higher (#21, #58).",
    )


def record_split_over_two_lines() -> Fixture:
    """Every record is broken in two by an unquoted newline inside a cell; nothing has been
    scored yet (#56)."""
    d = _Doc()
    d.header(
        [
            "date",
            "pipeline",
            "methodology_version",
            "accuracy",
            "actionability",
            "coverage",
            "composite_score",
            "experiment",
            "status",
            "notes",
        ]
    )
    for i in range(6):
        line = d._emit(f"2026-05-0{i + 1}\tdaily-run\tv2.0\nv\t0\t0\t0\t0\tbaseline\tpending\tAuto-scored")
        d.trials.append({"line": line, "metric": None, "eligible": False, "numeric": True})
    return d.render(), d.expected(
        metric="composite_score",
        lower=False,
        shape_rule_trial_count=0,
        notes="Each record spans 2 physical lines (3 fields + 8 fields), with a bare newline inside "
        "'methodology_version'. By reading there are 6 trials, all pending (not a result) "
        "with 0 metrics. A line-shape rule sees 12 text lines (#56).",
    )


def misaligned_extra_cell_mid_row() -> Fixture:
    """Later rows insert a duration cell before the status, so the status position reads
    '1520s' (#28)."""
    d = _Doc()
    d.header(["commit", "train_loss", "vram_mb", "status", "description"])
    d.row(["baseline", "4.1020", "18110", "keep", "default config"], 4.102, True)
    d.row(["v1_ode_ms", "1.702215", "21950", "1520s", "keep", "ODE plus multiscale, stage B"], 1.702215, True)
    d.row(["v2_ode_only", "1.801990", "21950", "1391s", "keep", "ODE only, stage B"], 1.80199, True)
    return d.render(), d.expected(
        metric="train_loss",
        lower=True,
        shape_rule_trial_count=1,
        notes="Rows 2 and 3 have 6 fields: an unnamed duration precedes the status. By reading "
        "all three are keep. An importer that reads statuses by position sees '1520s' "
        "(unknown word, discard) and puts 'keep' in the description (#28).",
    )


def second_row_layout() -> Fixture:
    """The same file switches to a 7-field layout for one phase; some metric cells say
    DIVERGED (#48)."""
    d = _Doc()
    d.header(["commit", "val_fid", "memory_gb", "status", "description"])
    plan = [(140.2, "keep"), (111.7, "keep"), (None, "crash"), (88.1, "keep"), (90.4, "discard"), (61.05, "keep")]
    for i, (v, st) in enumerate(plan):
        d.row(
            [
                _commit(("fid", i)),
                "0.000000" if v is None else f"{v:.4f}",
                "0.0" if v is None else "2.4",
                st,
                f"backprop depth {2 + i}",
            ],
            v,
            st == "keep",
        )
    for i, v in enumerate([210.4, 205.9, 208.8]):
        d.row(
            [
                f"r9_g{i}_sweep",
                "spsa",
                "d2_e128",
                "curriculum_0.67",
                f"eps1e-2_lr1e-1_{i}",
                f"{v:.2f}",
                f"zero-order sweep {i}",
            ],
            v,
            False,
        )
    d.row(["none", "DIVERGED", "0.0", "discard", "long schedule diverged at 18%"], None, False, numeric=False)
    d.row(["none", "203.1100", "0.7", "NEW_BEST", "exponential temperature schedule"], 203.11, True)
    return d.render(), d.expected(
        metric="val_fid",
        lower=True,
        naive_best_trap=0.0,
        shape_rule_trial_count=len(d.trials) - 3,
        notes="Three rows use another layout (7 fields: id, method, arch, schedule, hyper, fid, "
        "desc). Read by the header, their metric is 'spsa' and their status is "
        "'curriculum_0.67'. DIVERGED is a trial without a metric. NEW_BEST means keep. The "
        "crash row writes 0.000000 (#48).",
    )


# -- metric choice -------------------------------------------------------------------------


def status_before_metric_annotated_cell() -> Fixture:
    """iter, status, p50_tokens, …; one metric cell reads '223/90*'; a token count to
    minimise (#57, #19)."""
    d = _Doc()
    d.header(["iter", "status", "p50_tokens", "p95_tokens", "avg_tokens", "description"])
    plan = [
        ("baseline", "260", 260.0),
        ("keep", "241", 241.0),
        ("keep", "241", 241.0),
        ("keep", "230", 230.0),
        ("keep", "230/88*", None),
        ("keep", "230", 230.0),
    ]
    for i, (st, cell, v) in enumerate(plan):
        d.row(
            [
                str(i),
                st,
                cell,
                cell.replace("230", "1190") if v is None else str(int((v or 0) * 5)),
                "350.1/96*" if v is None else f"{(v or 0) * 1.5:.1f}",
                f"trim response field {i}",
            ],
            v,
            True,
            numeric=v is not None,
        )
    return d.render(), d.expected(
        metric="p50_tokens",
        lower=True,
        needs=["--lower"],
        notes="The status column comes before the metric. '230/88*' is an annotated number, so "
        "the trial has no metric and the cell is kept verbatim. p50_tokens reads like a "
        "resource; the direction needs a flag (#57, #19).",
    )


def old_new_score_pair() -> Fixture:
    """old_score then new_score; '-' in old_score on the baseline (#34, #21)."""
    d = _Doc()
    d.header(SKILL_COLUMNS)
    plan = [
        ("-", 64.0, "baseline"),
        ("64.0", 66.5, "keep"),
        ("66.5", 68.0, "keep"),
        ("68.0", 68.0, "baseline"),
        ("68.0", 70.2, "keep"),
        ("70.2", 72.9, "keep"),
    ]
    for i, (old, new, st) in enumerate(plan):
        d.row(
            [
                f"2026-04-0{i + 1}T10:00",
                "baseline" if i == 0 else _commit(("pair", i)),
                "doc-writer",
                old,
                f"{new:.1f}",
                st,
                "-" if i == 0 else "边界条件",
                "补充检查点",
                "dry_run",
            ],
            new,
            True,
        )
    return d.render(), d.expected(
        metric="new_score",
        lower=False,
        needs=["--metric new_score"],
        notes="old_score comes first and copies the previous new_score; the metric is new_score. "
        "'-' in old_score on the baseline (#34, #21).",
    )


def before_after_pair_negative() -> Fixture:
    """composite_before, composite_after, delta; negative values falling on every keep
    (#37)."""
    d = _Doc()
    d.header(["iteration", "spec_changed", "composite_before", "composite_after", "delta", "status", "description"])
    before = -70.0
    for i in range(1, 11):
        after = round(before - (5 + i * 3.5), 2)
        d.row(
            [
                str(i),
                f"SPEC-00{i % 5 + 1}",
                f"{before}",
                f"{after}",
                f"{round(after - before, 2)}",
                "keep",
                f"replaced {i} vague phrases with concrete rules",
            ],
            after,
            True,
        )
        before = after
    return d.render(), d.expected(
        metric="composite_after",
        lower=True,
        needs=["--metric composite_after"],
        notes="composite_before is the previous row's value. With the right metric, 9 of 9 kept "
        "moves go down and the values decide 'lower'. No document says so (#37).",
    )


def first_numeric_is_not_the_metric() -> Fixture:
    """Sub-scores come first and a near-constant pass rate leads; the loop's metric is a
    later column (#7, #49, #74)."""
    d = _Doc()
    d.header(["commit", "format_pass_rate", "exact_match_rate", "field_acc", "avg_latency_ms", "status", "description"])
    plan = [
        ("json_base", 99.5, 62.0, "keep"),
        ("packed_base", 99.25, 73.5, "keep"),
        ("json_ls01", 99.5, 61.75, "discard"),
        ("packed_ls01", 99.25, 72.25, "discard"),
        ("packed_lr1e4", 99.25, 50.5, "discard"),
    ]
    for name, pr, em, st in plan:
        d.row(
            [
                name,
                f"{pr:.2f}",
                f"{em:.2f}",
                f"{em + 12:.2f}",
                f"{300 + len(name) * 20:.2f}",
                st,
                f"{name} (champion)" if name == "packed_base" else name,
            ],
            em,
            st == "keep",
        )
    return d.render(), d.expected(
        metric="exact_match_rate",
        lower=False,
        needs=["--metric exact_match_rate"],
        notes="The first numeric column (format_pass_rate, 'pass' reads as higher) is almost "
        "constant and is not what the loop optimised (#7, #49, #74).",
    )


def resource_named_objective() -> Fixture:
    """Every 'score' column is constant; the loop actually minimises total_ms; kept/rejected
    (#51, #29)."""
    d = _Doc()
    d.header(
        [
            "commit",
            "required_passes",
            "required_total",
            "target_hits",
            "total_points",
            "total_ms",
            "status",
            "description",
        ]
    )
    plan = [
        (110, "baseline"),
        (112, "rejected"),
        (97, "kept"),
        (121, "rejected"),
        (88, "kept"),
        (90, "kept"),
        (74, "kept"),
        (79, "rejected"),
        (70, "kept"),
        (61, "kept"),
        (66, "rejected"),
        (55, "kept"),
        (58, "kept"),
        (49, "kept"),
    ]
    for i, (ms, st) in enumerate(plan):
        d.row(
            [
                _commit(("res", i // 2)),
                "6",
                "6",
                "5",
                "825",
                str(ms),
                st,
                f"same score with {'lower' if st == 'kept' else 'higher'} total runtime, step {i}",
            ],
            float(ms),
            st in ("kept", "baseline"),
        )
    return d.render(), d.expected(
        metric="total_ms",
        lower=True,
        needs=["--metric total_ms", "--lower"],
        notes="The objective is a resource-named column. required_passes (the first numeric "
        "column, 'pass' reads as higher) is constant. With total_ms named, most kept moves "
        "go down but fewer than 90 % (see kept_moves), so --lower is needed too (#51, #29).",
    )


def column_named_metric_no_status() -> Fixture:
    """A column literally named 'metric', no status column, epoch timestamps, and an exp_id
    that is not the first column (#71)."""
    d = _Doc()
    d.header(["ts", "exp_id", "git_commit", "config_sha", "metric", "done", "skip", "elapsed_s", "note"])
    vals = [0.0, 4.41, 4.12, 4.55, 4.08, 4.62, 4.31, 4.70, 3.95, 4.49, 4.66, 4.20]
    for i, v in enumerate(vals):
        d.row(
            [
                str(1771000000 + i * 330),
                f"exp_{1771000000 + i * 300}_{i:04d}",
                _commit(("dd", i // 4)),
                _commit(("cfg", i), 10),
                f"{v:.3f}",
                str(int(v * 5)),
                "6" if v == 0 else "0",
                f"{290 + i:.1f}",
                f"knob:warn_at -> {40 + i * 10}",
            ],
            v,
            True,
        )
    return d.render(), d.expected(
        metric="metric",
        lower=False,
        needs=["--higher"],
        notes="The metric column is named 'metric'. There is no status, so every row is keep, "
        "and the values zig-zag. README: 'Higher is better'. exp_id is the second column "
        "(#71).",
    )


def metric_cells_with_units() -> Fixture:
    """The metric is written with units ('8.7s') or as a word ('various') (#64)."""
    d = _Doc()
    d.header(["commit", "metric", "delta", "status", "description"])
    d.row(["baseline", "various", "0", "baseline", "Initial timing measurements"], None, True, numeric=False)
    d.row(
        ["exp1", "8.7s", "-91.2s", "kept", "skip slow log fixtures in debug builds (50s + 29s → 0s)"],
        None,
        True,
        numeric=False,
    )
    d.row(["exp2", "8.1s", "-0.6s", "kept", "share one tokenizer across tests"], None, True, numeric=False)
    return d.render(), d.expected(
        metric="metric",
        lower=True,
        notes="No cell is a plain number: 'various' and '8.7s'. Each row is a trial with no "
        "metric, and nothing can be inferred. By reading it is a timing, so lower is "
        "better, and the best would be 8.1 s if units were parsed (#64).",
    )


def multi_series_categories() -> Fixture:
    """One row per (iteration, category); signed deltas; Python-dict cells (#41, #21,
    #43)."""
    d = _Doc()
    d.header(["iter", "category", "param", "old", "new", "composite", "delta", "status", "description"])
    base = {"crypto": 0.80, "politics": 0.75, "sports": 0.70}
    for cat, v in base.items():
        d.row(["0", cat, "baseline", "-", "-", _f(v), "+0.000000", "keep", "global 10-bucket baseline"], v, True)
    plan = [
        ("crypto", "bucket_count", "10", "15", 0.012, "keep"),
        ("politics", "bucket_count", "10", "15", -0.004, "discard"),
        ("sports", "shrinkage", "0.2", "0.3", 0.020, "keep"),
        ("crypto", "weights", "{'w_a': 0.3, 'w_b': 0.7}", "{'w_a': 0.4, 'w_b': 0.6}", 0.009, "keep"),
        ("politics", "use_own_table", "False", "True", 0.006, "keep"),
    ]
    cur = dict(base)
    for i, (cat, param, old, new, dv, st) in enumerate(plan, start=1):
        v = round(cur[cat] + dv, 6)
        if st == "keep":
            cur[cat] = v
        d.row([str(i), cat, param, old, new, _f(v), f"{dv:+.6f}", st, f"{param} {old} -> {new}"], v, st == "keep")
    return d.render(), d.expected(
        metric="composite",
        lower=False,
        needs=["--higher"],
        notes="Categories are interleaved, so consecutive kept values jump between series and "
        "decide no direction. 'iter' repeats. The cells hold Python dicts with commas and "
        "quotes. A project-wide best mixes series (#41, #21, #43).",
    )


def no_status_column_capitalised() -> Fixture:
    """Capitalised column names, no status column, and 'KEEP' only as text inside Notes; one
    row per draft (#8)."""
    d = _Doc()
    d.header(["Timestamp", "SOP", "Version", "Hypothesis", "Imagery", "Flow", "Hook", "Score", "Notes"])
    for run in range(3):
        for draft, bump in (("A", 0.0), ("B", 0.05), ("C", 0.08)):
            s = round(0.55 + run * 0.1 + bump, 2)
            note = f"Draft {draft} raw" if draft != "C" else f"Draft C; run_score={s:.2f}; KEEP"
            d.row(
                [
                    f"2026-05-0{run + 1}T00:00:00Z",
                    "03_Hook_Lab",
                    f"0.{run}.0",
                    "BASELINE" if run == 0 else f"twist hypothesis {run}",
                    f"{s:.2f}",
                    f"{s - 0.02:.2f}",
                    f"{s + 0.01:.2f}",
                    f"{s:.2f}",
                    note,
                ],
                s,
                True,
            )
    return d.render(), d.expected(
        metric="Score",
        lower=False,
        notes="No status column, so every row is keep. The word KEEP inside Notes must not be "
        "read as a status column. Column names are capitalised (#8).",
    )


def exp_id_first_but_not_fieldkit() -> Fixture:
    """An autoresearch-shaped file whose first column is named exp_id, with three status
    columns and mostly empty cells (#9, #74)."""
    d = _Doc()
    d.header(
        [
            "exp_id",
            "batch_id",
            "commit",
            "title",
            "val_map50",
            "val_map50_95",
            "precision",
            "recall",
            "vram_gb",
            "provisional_status",
            "final_status",
            "status",
            "description",
        ]
    )
    plan = [
        (0.0, 0.0, "crash"),
        (0.551, 0.2560, "keep"),
        (0.536, 0.2541, "discard"),
        (0.560, 0.2612, "keep"),
        (0.571, 0.2598, "discard"),
        (0.0, 0.0, "running"),
    ]
    for i, (m50, m5095, st) in enumerate(plan):
        metric = None if st in ("crash", "running") else m5095
        d.row(
            [
                "",
                "",
                _commit(("map", i)),
                "",
                _f(m50),
                _f(m5095),
                _f(m50 * 0.9),
                _f(m50 * 1.1),
                f"{10 + i * 0.7:.1f}",
                "",
                st,
                st,
                f"detector variant {i}",
            ],
            metric,
            st == "keep",
        )
    return d.render(), d.expected(
        metric="val_map50_95",
        lower=False,
        needs=["--metric val_map50_95"],
        notes="The header starts with exp_id, but the file is not fieldkit (format 'auto' must "
        "say autoresearch). exp_id is empty, so the ids come from row numbers. Three status "
        "columns. 'running' is not a result. val_map50 comes before the target "
        "val_map50_95 (#9, #74).",
    )


def shipped_only_status() -> Fixture:
    """Every row's status is 'shipped'; small integer scores that never change (#40)."""
    d = _Doc()
    d.header(["name", "research", "build", "venture", "status", "tam", "tools", "description"])
    for i, nm in enumerate(["listing-checker", "visa-helper", "lease-reader", "refund-finder", "bill-explainer"]):
        d.row(
            [
                nm,
                "3",
                "3",
                "6",
                "shipped",
                str(2 + i % 3),
                "fetch-page|verify-source|write-report",
                f"helps people with {nm.replace('-', ' ')}",
            ],
            6.0,
            True,
        )
    return d.render(), d.expected(
        metric="venture",
        lower=False,
        needs=["--status-map shipped=keep", "--metric venture", "--higher"],
        notes="'shipped' is the only status word. Unmapped it is unknown (discard) and nothing is "
        "eligible for best. research, the first numeric column, is not the metric. Tools "
        "are pipe-joined (#40).",
    )


def packed_key_value_cell() -> Fixture:
    """A category_scores cell packs key=value pairs; the experiment id is a timestamp
    (#77)."""
    d = _Doc()
    d.header(["experiment", "overall_score", "category_scores", "status", "description"])
    plan = [
        (0.10, "keep"),
        (0.30, "keep"),
        (0.25, "discard"),
        (0.45, "keep"),
        (0.45, "keep"),
        (0.40, "discard"),
        (0.70, "keep"),
    ]
    for i, (v, st) in enumerate(plan):
        cats = ",".join(f"{k}={min(1.0, v + j * 0.05):.4f}" for j, k in enumerate(["absence", "dilution", "chain"]))
        d.row([f"2026-03-11_15{i:02d}00", _f(v), cats, st, f"prompt rule {i}"], v, st == "keep")
    return d.render(), d.expected(
        metric="overall_score",
        lower=False,
        notes="category_scores is one text cell of key=value pairs, kept verbatim (#77).",
    )


def big_integer_metric() -> Fixture:
    """11-digit integer profits, negative sub-profits, kept/reverted (#50)."""
    d = _Doc()
    d.header(["experiment", "combined_profit", "reg_profit", "clf_profit", "reg_r2", "status", "description"])
    v = 10_361_477_000
    for i in range(10):
        kept = i % 3 != 2
        v = v + (123_456_789 * (i + 1) if kept else -50_000)
        d.row(
            [
                f"exp_{i}",
                str(v),
                str(v + 45_024_845),
                "-45024845",
                f"{0.58 - i * 0.01:.4f}",
                "kept" if kept else "reverted",
                f"variant {i}",
            ],
            float(v),
            kept,
        )
    return d.render(), d.expected(
        metric="combined_profit",
        lower=False,
        notes="Integers too large for float32 and negative columns. Export must write them as "
        "they were, not as 1.04e10 (#50).",
    )


def name_without_direction_many_kept_moves() -> Fixture:
    """A composite with no direction word; 10 kept moves all up, so the values decide; CRLF
    (#67)."""
    d = _Doc(eol="\r\n")
    d.header(["commit", "core", "win_acc", "spread_mae", "status", "description"])
    v = 0.2200
    d.row(["baseline", f"{v:.4f}", "0.6500", "11.20", "baseline", "production models"], v, True)
    for i in range(1, 15):
        kept = i % 4 != 0
        nv = round(v + 0.0011 * i, 4) if kept else round(v - 0.0005, 4)
        d.row(
            [
                f"exp{i:03d}",
                f"{nv:.4f}",
                "0.6500",
                f"{11.2 - i * 0.02:.2f}",
                "keep" if kept else "discard",
                f"model tweak {i}",
            ],
            nv,
            kept,
        )
        if kept:
            v = nv
    return d.render(), d.expected(
        metric="core",
        lower=False,
        notes="'core' gives no direction, but 11 of 11 kept moves go up, which clears issue "
        "19's rule (≥ 90 % of ≥ 8). CRLF line ends (#67).",
    )


# -- empty and placeholder ledgers --------------------------------------------------------


def header_only() -> Fixture:
    """The loop was set up but never logged a row (#78–84)."""
    text = "commit\tval_bpb\tmemory_mb\tstatus\tgpus\tdescription\n"
    return text, {
        "trial_count": 0,
        "metric": "val_bpb",
        "lower_is_better": True,
        "best_value": None,
        "needs": [],
        "notes": "Header only: an empty, valid import (0 trials), not a direction error (#78–84).",
    }


def header_then_blank_line() -> Fixture:
    """A header followed by one empty line (#85)."""
    text = "run_id\tcommit\tmodel_id\tseed\tmean_accuracy\tpeak_vram_gb\tstatus\tdescription\n\n"
    return text, {
        "trial_count": 0,
        "metric": "mean_accuracy",
        "lower_is_better": False,
        "best_value": None,
        "needs": [],
        "text_lines": [2],
        "notes": "A header and a blank line: 0 trials. The blank line is not a record (#85).",
    }


def placeholder_no_metric() -> Fixture:
    """A reserved ledger with only status and note, then a blank line (#86)."""
    text = "status\tnote\nreserved\tphase 3 is not implemented yet\n\n"
    return text, {
        "trial_count": 1,
        "metric": None,
        "lower_is_better": None,
        "best_value": None,
        "refuse": True,
        "needs": [],
        "text_lines": [3],
        "notes": "No numeric column at all: refuse with a clear message, or import 1 trial with no metric (#86).",
    }


# -- not loop logs ------------------------------------------------------------------------


def not_a_loop_key_value() -> Fixture:
    """A two-column name→value table with no final newline (#88)."""
    names = ["Acetate_FT", "Acetate_IT100", "Butyrate_FT", "Butyrate_IT120", "Valerate_FT", "Valerate_IT150"]
    rows = ["peak_name\tsample_07.mzML"] + [f"{n}\t{(i * 7919.37) % 1000:.10f}" for i, n in enumerate(names)]
    text = "\n".join(rows)  # no final newline
    return text, {
        "trial_count": 0,
        "metric": None,
        "lower_is_better": None,
        "best_value": None,
        "refuse": True,
        "needs": [],
        "notes": "A key/value data table called results.tsv: no status, no direction, no "
        "experiments. Refuse, and do not call it long format. No final newline "
        "(#88).",
    }


def not_a_loop_quoted_header() -> Fixture:
    """A data table whose header cells are double-quoted; one column is named 'error'
    (#87)."""
    rows = ['"#template"\t"instance"\t"endpoint"\t"error"\t"prevalence"']
    for i in range(8):
        rows.append(f'{1 + i % 3}\t"case_{chr(97 + i)}"\t"host{i % 2}.example.org"\t0\t{(i * 313) % 977}')
    text = "\n".join(rows) + "\n"
    return text, {
        "trial_count": 0,
        "metric": None,
        "lower_is_better": None,
        "best_value": None,
        "refuse": True,
        "needs": [],
        "notes": "Test-suite data, not a loop. The column 'error' is a lower-is-better "
        "word that would mislead an importer into a meaningless import (#87).",
    }


def not_a_loop_benchmark_dump() -> Fixture:
    """An HTTP benchmark's per-request dump saved as results.tsv (#91)."""
    rows = ["starttime\tseconds\tctime\tdtime\tttime\twait"]
    for i in range(10):
        rows.append(
            f"Mon Jan 12 10:00:0{i % 10} 2026\t{1768212000 + i}\t{80 + i}\t{5000 + i * 37}\t{5080 + i * 38}"
            f"\t{4900 + i * 36}"
        )
    text = "\n".join(rows) + "\n"
    return text, {
        "trial_count": 0,
        "metric": None,
        "lower_is_better": None,
        "best_value": None,
        "refuse": True,
        "needs": [],
        "notes": "ApacheBench-style output: no status, description or experiment. Refuse "
        "unless the user insists with flags (#91).",
    }


# -- registry -----------------------------------------------------------------------------

VARIANTS: dict[str, Callable[[], Fixture]] = {
    f.__name__: f
    for f in (
        karpathy_classic,
        wide_extra_metrics_higher,
        uppercase_words_minus_999_sentinel,
        headerless_inference_log,
        headerless_single_row_cjk,
        fail_na_score_lower_in_microseconds,
        score_minimized_with_parent_column,
        fitness_lower_too_few_moves,
        long_format_metric_per_row,
        self_describing_metric_columns,
        dash_placeholders_in_metric,
        empty_metric_cells_failed_rows,
        na_on_crash_rows_and_bogus_discard,
        zero_metric_on_non_crash_rows,
        accepted_zero_one_flag,
        verdict_words_ranges_multi_series,
        correct_ok_fail_zero_rows,
        correctness_column_mixed_units,
        same_improved_status_words,
        kept_true_false_json_params,
        crlf_uppercase_sparse_cells,
        comma_csv_fully_quoted,
        tsv_with_csv_style_quoting,
        interleaved_program_output,
        separator_line_and_extra_trailing_cells,
        annotation_rows_and_cjk_status,
        two_records_on_one_line,
        record_split_over_two_lines,
        misaligned_extra_cell_mid_row,
        second_row_layout,
        status_before_metric_annotated_cell,
        old_new_score_pair,
        before_after_pair_negative,
        first_numeric_is_not_the_metric,
        resource_named_objective,
        column_named_metric_no_status,
        metric_cells_with_units,
        multi_series_categories,
        no_status_column_capitalised,
        exp_id_first_but_not_fieldkit,
        shipped_only_status,
        packed_key_value_cell,
        big_integer_metric,
        name_without_direction_many_kept_moves,
        header_only,
        header_then_blank_line,
        placeholder_no_metric,
        not_a_loop_key_value,
        not_a_loop_quoted_header,
        not_a_loop_benchmark_dump,
    )
}


def all_fixtures() -> Iterable[tuple[str, str, dict]]:
    """Yield ``(name, text, expected)`` for every variant."""
    for name, make in VARIANTS.items():
        text, expected = make()
        yield name, text, expected


def write_all(directory: str) -> list[str]:
    """Write every fixture as ``<name>.tsv`` (``.csv`` for the comma one) plus
    ``<name>.expected.json`` into ``directory``, which must exist. Returns the written
    paths. The text is written byte for byte (``newline=''``)."""
    import os

    paths = []
    for name, text, expected in all_fixtures():
        ext = ".csv" if expected.get("delimiter") == "," else ".tsv"
        path = os.path.join(directory, name + ext)
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        with open(os.path.join(directory, name + ".expected.json"), "w", encoding="utf-8") as fh:
            json.dump(expected, fh, ensure_ascii=False, indent=1, default=list)
        paths.append(path)
    return paths


if __name__ == "__main__":  # a summary, no files written
    for name, text, exp in all_fixtures():
        print(
            f"{name:45s} trials={exp['trial_count']:<3} metric={exp['metric']!s:20s} "
            f"lower={exp['lower_is_better']!s:5s} best={exp['best_value']!s:12s} needs={exp['needs']}"
        )
