"""Synthetic results files of autoresearch-style loops, written here (none copied from
other repositories): the original format, its forks, and the quirks of agent-written
files. Each entry is ``name -> (text, expectations)``; the tests of the format and of
the ledger (import, export, watch) share them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    text: str
    #: the metric column and whether lower is better (as inferred without flags)
    metric: str
    lower: bool | None
    rows: int
    #: extra import flags (as ImportOptions keyword arguments)
    options: dict = field(default_factory=dict)
    #: warnings expected (substrings), each must appear
    warns: tuple[str, ...] = ()
    #: exp_id of the best trial under the default (kept) policy
    best: str | None = None


def tsv(*rows: str, nl: str = "\n") -> str:
    return "".join(row + nl for row in rows)


ORIGINAL = tsv(
    "commit\tval_bpb\tmemory_gb\tstatus\tdescription",
    "a1b2c3d\t0.997900\t44.0\tkeep\tbaseline",
    "b2c3d4e\t0.993200\t44.2\tkeep\tincrease LR to 0.04",
    "c3d4e5f\t1.005000\t44.0\tdiscard\tswitch to GeLU activation",
    "d4e5f6a\t0.000000\t0.0\tcrash\tdouble model width (OOM)",
    "e5f6a7b\t0.990100\t44.1\tkeep\tadd 200 warmup steps",
    "f6a7b8c\t0.991000\t44.1\tdiscard\tweight decay 0.2",
    "a7b8c9d\t0.000000\t0.0\tcrash\tflash attention variant (segfault)",
    "b8c9d0e\t0.987600\t45.3\tkeep\tmuon lr 0.05",
)

WELL_FORMED: dict[str, Case] = {
    "original": Case(ORIGINAL, "val_bpb", True, 8, best="007"),
    # higher is better, upper-case words, a BASELINE row
    "score_upper": Case(
        tsv(
            "commit\tscore\tstatus\tdescription",
            "1a2b3c4\t0.412\tBASELINE\tbaseline policy",
            "2b3c4d5\t0.455\tKEEP\tlonger context",
            "3c4d5e6\t0.431\tREVERT\tsmaller batch",
            "4d5e6f7\t0.000\tCRASH\tbigger model OOM",
            "5e6f7a8\t0.478\tKEEP\tcurriculum",
            "6f7a8b9\t0.466\tREVERT\tdropout 0.1",
        ),
        "score",
        False,
        6,
        best="004",
    ),
    # no commit column, a numeric id column, verdict kept/reverted, extra columns
    "sharpe_verdict": Case(
        tsv(
            "iteration\tsharpe\tmax_drawdown\tverdict\tnotes",
            "1\t1.12\t-0.21\tkept\tbuy and hold baseline",
            "2\t1.35\t-0.18\tkept\tmomentum filter",
            "3\t1.20\t-0.25\treverted\tmean reversion overlay",
            "4\t1.41\t-0.17\tkept\tvolatility targeting",
            "5\t-999\t\tcrashed\tdata loader broke",
            "6\t1.38\t-0.19\treverted\tadd leverage",
        ),
        "sharpe",
        False,
        6,
        best="003",
    ),
    # percent numbers, decision accepted/rejected
    "accuracy_percent": Case(
        tsv(
            "commit\taccuracy\tdecision\tdescription",
            "0a1b2c3\t71.2%\taccepted\tbaseline",
            "1b2c3d4\t73.9%\taccepted\tmixup",
            "2c3d4e5\t72.0%\trejected\tcutout",
            "3d4e5f6\t-\tfailed\tlabel smoothing diverged",
            "4e5f6a7\t75.5%\taccepted\trandaugment",
        ),
        "accuracy",
        False,
        5,
        best="004",
    ),
    # extra columns on both sides of the metric, kept_or_reverted
    "extra_columns": Case(
        tsv(
            "run\tcommit\treward\tthroughput\tgpu_hours\tkept_or_reverted\tdescription",
            "r0\tab12cd3\t12.5\t1830\t0.50\tkept\tbaseline PPO",
            "r1\tbc23de4\t14.1\t1790\t0.52\tkept\tGAE lambda 0.97",
            "r2\tcd34ef5\t13.2\t1905\t0.49\treverted\tentropy bonus 0.02",
            "r3\tde45fa6\t15.0\t1650\t0.61\tkept\tlarger critic",
        ),
        "reward",
        False,
        4,
        best="003",
    ),
    # other languages, non-ASCII text, a 'result' column
    "languages": Case(
        tsv(
            "commit\tval_loss\tresult\tdescription",
            "aa11bb2\t2.3100\tbehalten\tBasislinie — erster Lauf",
            "bb22cc3\t2.2800\tbehalten\t学习率 0.04 に変更 🚀",
            "cc33dd4\t2.3500\tverworfen\tGeLU statt ReLU",
            "dd44ee5\t0.0000\t崩溃\tdoppelte Breite (OOM)",
            "ee55ff6\t2.2500\tgardé\tnaïve café warmup",
        ),
        "val_loss",
        True,
        5,
        best="004",
    ),
    # no status column at all: every row is a measurement
    "no_status": Case(
        tsv(
            "step\tval_bpb\tnotes",
            "0\t1.020\tstart",
            "1\t1.010\tlr up",
            "2\t1.015\tnoise",
            "3\t0.998\tlonger warmup",
        ),
        "val_bpb",
        True,
        4,
        best="003",
    ),
    # words beyond keep/discard/crash
    "many_words": Case(
        tsv(
            "commit\tval_bpb\tmemory_gb\tstatus\tdescription",
            "1111aaa\t1.000000\t40.0\tkeep\tbaseline",
            "2222bbb\t0.000000\t0.0\toom\tbatch 2x",
            "3333ccc\t0.000000\t0.0\ttimeout\ttoo many layers",
            "4444ddd\t-999\t0.0\tkilled\tpreempted by the scheduler",
            "5555eee\t\t\trunning\tnew tokenizer",
            "6666fff\t0.998000\t40.1\tkept\tsmaller vocab",
            "7777aaa\t0.997000\t40.2\tmeh\tunsure about this one",
            "8888bbb\t0.999000\t40.0\treverted\tno bias",
        ),
        "val_bpb",
        True,
        8,
        warns=("'meh' (1 row)",),
        best="005",
    ),
    "crlf": Case(ORIGINAL.replace("\n", "\r\n"), "val_bpb", True, 8, best="007"),
    "bom": Case("\ufeff" + ORIGINAL, "val_bpb", True, 8, best="007"),
    "blank_lines": Case(
        "\n" + ORIGINAL.replace("keep\tincrease LR to 0.04\n", "keep\tincrease LR to 0.04\n\n\n") + "\n",
        "val_bpb",
        True,
        8,
        best="007",
    ),
    "trailing_tabs": Case(
        "".join(line[:-1] + "\t\n" for line in ORIGINAL.splitlines(keepends=True)), "val_bpb", True, 8, best="007"
    ),
    "no_final_newline": Case(ORIGINAL.rstrip("\n"), "val_bpb", True, 8, best="007"),
    "header_only": Case(tsv("commit\tval_bpb\tmemory_gb\tstatus\tdescription"), "val_bpb", True, 0),
    "headerless": Case(
        "".join(ORIGINAL.splitlines(keepends=True)[1:]),
        "col2",
        True,
        8,
        warns=("no header line",),
        best="007",
    ),
    "summary_after": Case(
        ORIGINAL + "\nSummary: 8 experiments, best val_bpb 0.987600 (b8c9d0e)\n",
        "val_bpb",
        True,
        8,
        warns=("line 11: import stops",),
        best="007",
    ),
    "box_table_after": Case(
        ORIGINAL + "┌─────────┬──────────┐\n│ commit  │ val_bpb  │\n├─────────┼──────────┤\n│ b8c9d0e │ 0.987600 │\n"
        "└─────────┴──────────┘\n",
        "val_bpb",
        True,
        8,
        warns=("line 10: import stops",),
        best="007",
    ),
    "csv_generic": Case(
        "exp,loss,status,description\n"
        "e0,0.91,keep,baseline\n"
        'e1,0.88,keep,"warmup, then cosine"\n'
        'e2,0.93,discard,"bigger ""wide"" model"\n'
        "e3,0.87,keep,label smoothing\n",
        "loss",
        True,
        4,
        best="003",
    ),
}

#: Files with quirks that are repaired on import (one warning per row) and still round-trip.
QUIRKS: dict[str, Case] = {
    "tab_in_description": Case(
        ORIGINAL.replace("switch to GeLU activation", "switch to GeLU\tactivation"),
        "val_bpb",
        True,
        8,
        warns=("line 4: 6 cells",),
        best="007",
    ),
    "missing_cell": Case(
        ORIGINAL.replace("e5f6a7b\t0.990100\t44.1\tkeep", "e5f6a7b\t0.990100\tkeep"),
        "val_bpb",
        True,
        8,
        warns=("line 6: 4 cells", "'memory_gb' filled empty"),
        best="007",
    ),
    "missing_description": Case(
        ORIGINAL.replace("\tweight decay 0.2", ""),
        "val_bpb",
        True,
        8,
        warns=("line 7: 4 cells", "'description' filled empty"),
        best="007",
    ),
    "merged_rows_tab": Case(
        ORIGINAL.replace("increase LR to 0.04\nc3d4e5f", "increase LR to 0.04\tc3d4e5f"),
        "val_bpb",
        True,
        8,
        warns=("line 3: two rows on one line",),
        best="007",
    ),
    "merged_rows_glued": Case(
        ORIGINAL.replace("increase LR to 0.04\nc3d4e5f", "increase LR to 0.04c3d4e5f"),
        "val_bpb",
        True,
        8,
        warns=("line 3: two rows on one line",),
        best="007",
    ),
    "literal_backslash_t": Case(
        ORIGINAL.replace("f6a7b8c\t0.991000\t44.1\tdiscard\t", "f6a7b8c\\t0.991000\\t44.1\\tdiscard\\t"),
        "val_bpb",
        True,
        8,
        warns=("line 7: literal",),
        best="007",
    ),
    "repeated_header": Case(
        ORIGINAL.replace("e5f6a7b", "commit\tval_bpb\tmemory_gb\tstatus\tdescription\ne5f6a7b"),
        "val_bpb",
        True,
        8,
        warns=("line 6: not a row",),
        best="007",
    ),
}

#: A file where the crash rows' 0.0 would be the best under the direction if taken as a metric.
CRASH_ZERO = ORIGINAL

#: Not results tables: (bytes, expected line of the error, a word of the message).
NOT_TABLES: dict[str, tuple[bytes, int, str]] = {
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", 1, "NUL"),
    "nul_later": (ORIGINAL.encode() + b"b9c0d1e\t0.98\x00\t44.0\tkeep\tx\n", 10, "NUL"),
    "latin1": ("commit\tval_bpb\tstatus\tdescription\na1b2c3d\t0.99\tkeep\tcaf\xe9\n".encode("latin-1"), 2, "UTF-8"),
    "giant_line": (b"x" * (1 << 20) + b"y\n", 1, "characters long"),
    "prose": (b"This is a README.\nIt has no tabs at all.\nNot a table.\n", 1, "no tab"),
    "no_two_lines_alike": (b"name\tvalue\nsome prose without any structure\nmore prose here\n", 2, "no line after"),
    "empty": (b"", 1, "empty"),
}


# -- issue 19: results files without loss ------------------------------------------------------

#: commit, cycle and a metric cell that is not a number on records the loop wrote itself.
FAIL_RECORDS = tsv(
    "commit\tcycle\tval_bpb\tmemory_gb\tstatus\tdescription",
    "a1b2c3d\t1\t0.997900\t44.0\tkeep\tbaseline",
    "b2c3d4e\t2\tFAIL\tNA\tdiscard\tdouble width (compile error)",
    "c3d4e5f\t3\t0.993200\t44.2\tkeep\tincrease LR to 0.04",
    "d4e5f6a\t4\tNA\tNA\tcrash\tflash attention variant",
    "e5f6a7b\t5\terror: CUDA OOM\t0.0\tcrash\tbatch 2x",
    "f6a7b8c\t6\t0.990100\t44.1\tkeep\tadd warmup",
    "a7b8c9d\t7\t-\t44.1\tdiscard\tweight decay 0.2",
)


def long_format(cycles: int = 24) -> str:
    """One metric name and its value per row: two numeric metrics and a word per cycle."""
    rows = ["cycle\tmetric\tvalue\tnotes"]
    for c in range(1, cycles + 1):
        rows.append(f"{c}\tresolution_rate\t{0.150 + c * 0.002 - (0.004 if c % 5 == 0 else 0):.3f}\tcycle {c}")
        if c % 2:
            rows.append(f"{c}\tcost_usd\t{1.25 * c:.2f}\t")
        rows.append(f"{c}\ttrend\t{'declining' if c % 5 == 0 else 'rising' if c % 3 else 'flat'}\t")
    return tsv(*rows)


#: A headerless file whose first line is data (a model column, numbers, a status word).
HEADERLESS_MODELS = tsv(
    "HEAD\tQwen3.5-397B\t397.0\t17.0\t3.30\tkeep\tC/METAL E2E baseline",
    "HEAD\tQwen3.5-397B\t397.0\t17.6\t3.10\tkeep\tfused rmsnorm",
    "HEAD\tQwen3.5-397B\t397.0\t17.2\t3.40\tdiscard\tsmaller tiles",
    "HEAD\tQwen3.5-397B\t397.0\t18.4\t2.95\tkeep\tasync copy",
)
HEADERLESS_COLUMNS = "commit,model,params_b,tok_s,latency_s,status,description"


def score_is_a_time(keeps: int = 27) -> str:
    """A metric named ``score`` that the loop lowers (a time in microseconds): every kept
    value is below the one before; discarded attempts in between are slower."""
    rows = ["commit\tscore\tstatus\tdescription"]
    value = 5000
    for i in range(keeps):
        rows.append(f"{0xA000000 + 2 * i:07x}\t{value}\tkeep\tidea {i}")
        rows.append(f"{0xA000001 + 2 * i:07x}\t{value + 37}\tdiscard\tslower idea {i}")
        value -= 50 + i
    return tsv(*rows)


RECORDS: dict[str, Case] = {
    "fail_records": Case(
        FAIL_RECORDS, "val_bpb", True, 7, warns=("lines 3, 6: the 'val_bpb' cell is not a number",), best="005"
    ),
    "stray_output": Case(
        ORIGINAL.replace("e5f6a7b", 'Traceback (most recent call last):\n  File "train.py", line 3\ne5f6a7b').replace(
            "b8c9d0e\t0.987600", "step 500 | loss 3.21\nb8c9d0e\tFAIL"
        )
        + "best so far: 0.9901 (e5f6a7b)\n",
        "val_bpb",
        True,
        8,
        warns=("lines 6, 7: not a row", "line 11: not a row", "line 13: import stops", "line 12: the 'val_bpb' cell"),
        best="004",
    ),
    # no status column: the values are no loop's choices and 19 of 23 moves up do not decide
    # overwhelmingly, so the direction is a flag (see lineage.formats.autoresearch.direction)
    "long_format": Case(long_format(), "value", False, 24 + 12 + 24, best="058", options={"lower_is_better": False}),
    "headerless_named": Case(HEADERLESS_MODELS, "tok_s", False, 4, options={"columns": HEADERLESS_COLUMNS}, best="003"),
    "score_is_a_time": Case(
        score_is_a_time(),
        "score",
        True,
        54,
        warns=("name 'score' says higher is better, but 26 of 26 moves",),
        best="052",
    ),
    # one non-numeric cell must not hand the metric to memory_gb
    "named_metric_one_word": Case(
        tsv(
            "commit\tval_bpb\tmemory_gb\tstatus\tdescription",
            "a1b2c3d\t0.997900\t44.0\tkeep\tbaseline",
            "b2c3d4e\tsee log\t44.0\tdiscard\tbroken run",
            "c3d4e5f\t0.993200\t44.2\tkeep\tlr 0.04",
        ),
        "val_bpb",
        True,
        3,
        warns=("line 3: the 'val_bpb' cell is not a number",),
        best="002",
    ),
}
#: the project's metric of a long-format case (a name in its metric column)
RECORDS_METRIC_NAME = {"long_format": "resolution_rate"}
