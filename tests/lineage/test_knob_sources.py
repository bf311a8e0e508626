"""The newer knob sources and bounds (lineage.knobs): a results file's own columns,
unparsed values and binary files, sweeps and repeats in words, real-world hypothesis
phrasings, and patches far over the read limit."""

from __future__ import annotations

import time

import pytest

from lineage.knobs import KnobChange, extract_changes, knob_name
from lineage.knobs.columns import column_values, is_knob_column, role_columns
from lineage.knobs.extract import MAX_CHANGES, MAX_PATCH_CHARS, hypothesis_changes, patch_changes, patch_digest
from lineage.knobs.history import KnobTry
from lineage.knobs.sweeps import tried_before


def _table(changes: list[KnobChange]) -> dict[str, tuple[str | None, str | None, str]]:
    return {c.knob: (c.old, c.new, c.source) for c in changes}


# -- columns ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["lr", "depth", "n_embd", "window_pattern", "gpu", "weight_decay"])
def test_a_column_that_a_trial_sets_is_a_knob_column(name: str) -> None:
    assert is_knob_column(name)


@pytest.mark.parametrize(
    "name",
    ["val_bpb", "memory_gb", "peak_vram_mb", "train_seconds", "tok_per_sec", "commit", "seed", "created_at", "_row"],
)
def test_a_column_that_measures_or_names_a_trial_is_not(name: str) -> None:
    assert not is_knob_column(name)


def test_column_changes_compare_with_the_parents_columns() -> None:
    parent = {"lr": 0.04, "depth": 8, "gpu": "H100", "commit": "a1b2c3d", "memory_gb": 40.0}
    mine = {"lr": 0.05, "depth": 8, "gpu": "H100", "commit": "b2c3d4e", "memory_gb": 44.0, "note": "a b c d e"}
    parent_columns = column_values(parent)
    assert _table(extract_changes("", mine, parent_columns=parent_columns)) == {"lr": ("0.04", "0.05", "column")}
    # no parent: each column as set (the root of a file)
    assert _table(extract_changes("", parent)) == {
        "lr": (None, "0.04", "column"),
        "nlayers": (None, "8", "column"),
        "gpu": (None, "H100", "column"),
    }


def test_a_layouts_role_columns_are_never_knobs() -> None:
    settings = {"results_file": {"columns": ["run", "score", "lr"], "metric": "score", "id_column": "run"}}
    roles = role_columns(settings)
    assert roles == {"score", "run"}
    assert column_values({"score": 0.9, "lr": 0.1, "run": "r1"}, roles) == {"lr": "0.1"}
    assert role_columns({}) == frozenset() and role_columns({"results_file": "garbage"}) == frozenset()


# -- unparsed and bounds ----------------------------------------------------------------------


def test_values_no_rule_reads_are_kept_as_text_with_source_unparsed() -> None:
    patch = (
        "diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n"
        "-ACTIVATION = nn.GELU\n+ACTIVATION = nn.SiLU\n"
        "-HUGE = 2**100000\n+HUGE = 2**100001\n"
        "-LR = 0.04\n+LR = 0.05\n"
        "-    local = compute(1)\n+    local = compute(2)\n"  # code inside a function: no knob
        "diff --git a/conf.yaml b/conf.yaml\n--- a/conf.yaml\n+++ b/conf.yaml\n"
        "-activation: gelu\n+activation: silu\n"
        "-schedule: !!python/name:cosine\n+schedule: !!python/name:linear\n"
        "diff --git a/weights.bin b/weights.bin\nindex 3f1c2e1..9ab0c7d 100644\nBinary files a/weights.bin and b/weights.bin differ\n"
    )
    assert _table(patch_changes(patch)) == {
        "activation": ("gelu", "silu", "patch"),  # a config's bare word is a string
        "huge": ("2**100000", "2**100001", "unparsed"),
        "lr": ("0.04", "0.05", "patch"),
        "schedule": ("!!python/name:cosine", "!!python/name:linear", "unparsed"),
        "weights bin": (None, "binary 9ab0c7d", "unparsed"),
    } | {"activation": ("gelu", "silu", "patch")}
    python_constant = [c for c in patch_changes(patch) if c.name == "ACTIVATION"]
    assert [(c.old, c.new, c.source) for c in python_constant] == [("nn.GELU", "nn.SiLU", "unparsed")]


def test_a_patch_of_megabytes_is_read_to_its_bound_and_no_further() -> None:
    head = "diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n"
    filler = "".join(f"-KNOB_{i} = {i}\n+KNOB_{i} = {i + 1}\n" for i in range(400_000))  # ~10 MB
    patch = head + filler + "-LATE_LR = 0.1\n+LATE_LR = 0.2\n"
    assert len(patch) > 50 * MAX_PATCH_CHARS
    started = time.perf_counter()
    changes = extract_changes("", {"_git": {"patch": patch}})
    assert time.perf_counter() - started < 30  # bounded: a generous ceiling, not a benchmark
    assert 0 < len(changes) <= MAX_CHANGES and "late lr" not in {c.knob for c in changes}
    assert patch_digest(patch) != patch_digest(patch + "-X = 1\n+X = 2\n")  # a longer patch differs


@pytest.mark.parametrize("odd", [{"_git": {"patch": 12}}, {"_git": {"patch": "\x00\xff" * 1000}}, {"config": [1, 2]}])
def test_odd_input_never_raises(odd: dict) -> None:  # type: ignore[type-arg]
    assert extract_changes("lr 0.1", odd) == [] or all(
        isinstance(c, KnobChange) for c in extract_changes("lr 0.1", odd)
    )


def test_one_patch_digest_for_the_same_change_on_another_base() -> None:
    first = "diff --git a/t.py b/t.py\nindex 111..222\n--- a/t.py\n+++ b/t.py\n@@ -3 +3 @@\n-LR = 0.05\n+LR = 0.06\n"
    later = "diff --git a/t.py b/t.py\nindex 333..444\n--- a/t.py\n+++ b/t.py\n@@ -9 +9 @@\n-LR = 0.05\n+LR = 0.06\n"
    assert patch_digest(first) == patch_digest(later) is not None
    assert patch_digest(first.replace("0.06", "0.07")) != patch_digest(first)
    assert patch_digest("diff --git a/t.py b/t.py\n") is None


# -- real-world phrasings ---------------------------------------------------------------------

#: descriptions as autoresearch loops write them, with the change each states
PHRASINGS = [
    ("increase MATRIX_LR from 0.04 to 0.06", "matrix lr", "0.04", "0.06", None),
    ("lr 0.08 for the matrix params", "lr", None, "0.08", None),
    ("TOTAL_BATCH_SIZE 2**20", "total bs", None, "2**20", None),
    ("bump EMBEDDING_LR to 0.8", "emb lr", None, "0.8", None),
    ("WARMDOWN_RATIO 0.5 -> 0.7", "warmdown ratio", "0.5", "0.7", None),
    ("reduce warmup to 200 steps", "warmup", None, "200", None),
    ("try 4 heads instead of 6", "nheads", None, "4", None),
    ("halve DEVICE_BATCH_SIZE to fit in memory", "device bs", None, None, 0.5),
    ("n_head=8, keep the rest", "nheads", None, "8", None),
    ("context length 1024 -> 2048", "seqlen", "1024", "2048", None),
    ("SCALAR_LR 0.5 => 0.25 (was unstable)", "scalar lr", "0.5", "0.25", None),
    ("dropout 0.1 → 0.0", "dropout", "0.1", "0.0", None),
    ("weight decay of 0.05 on the embeddings", "wd", None, "0.05", None),
    ("switch to 12 layers and wider mlp", "nlayers", None, "12", None),
    ("double the batch size (OOM)", "bs", None, None, 2.0),
]


@pytest.mark.parametrize(("text", "knob", "old", "new", "factor"), PHRASINGS)
def test_a_real_world_phrasing_states_its_change(
    text: str, knob: str, old: str | None, new: str | None, factor: float | None
) -> None:
    found = {c.knob: c for c in hypothesis_changes(text)}
    assert knob in found, found
    assert (found[knob].old, found[knob].new, found[knob].factor) == (old, new, factor)


@pytest.mark.parametrize(
    "text", ["revert exp_012", "GPT2 style init", "fix 2 bugs in the eval", "use the v2 tokenizer", "baseline run 3"]
)
def test_phrasings_without_a_knob_value_state_none(text: str) -> None:
    assert hypothesis_changes(text) == []


def test_concept_words_name_the_knob() -> None:
    assert knob_name("TOTAL_BATCH_SIZE") == "total bs" and knob_name("DEVICE_BATCH_SIZE") == "device bs"
    assert knob_name("n_layer") == knob_name("depth") == knob_name("layers") == "nlayers"
    assert knob_name("n_embd") == knob_name("hidden") == knob_name("width") == "dmodel"


# -- sweeps and repeats -----------------------------------------------------------------------


def _try(exp_id: str, value: str, status: str, same: bool) -> KnobTry:
    return KnobTry(
        "matrix lr",
        "MATRIX_LR",
        None,
        value,
        float(value),
        None,
        None,
        "patch",
        int(exp_id),
        exp_id,
        status,
        None,
        None,
        same,
    )


def test_a_knob_tried_at_other_values_is_a_sweep_and_the_same_value_a_repeat() -> None:
    tries = [
        _try("001", "0.04", "keep", False),
        _try("002", "0.05", "keep", False),
        _try("003", "0.06", "discard", True),
    ]
    said = tried_before(tries)
    assert [(s.kind, s.says) for s in said] == [
        ("repeat", "repeat of exp_003: MATRIX_LR 0.06, discard"),
        ("sweep", "sweep of MATRIX_LR: 0.04 keep, 0.05 keep, 0.06 discard"),
    ]
    assert tried_before([_try("001", "0.04", "running", True)])[0].says == "repeat of exp_001: MATRIX_LR 0.04, running"
    assert tried_before([], [("017", "keep")])[0].says == "repeat of exp_017: same patch, keep"
    assert tried_before([]) == []


def test_the_knobs_tried_section_keeps_to_its_budget() -> None:
    from lineage.agent.knob_section import BUDGET_CHARS, MAX_KNOBS, knobs_tried_lines

    def knob(i: int) -> dict:  # type: ignore[type-arg]
        values = [{"value": f"{v}e-3", "trials": [{"exp_id": f"{i}{v}", "status": "discard"}]} for v in range(9)]
        return {"knob": f"knob {i}", "name": f"KNOB_{i}_" + "X" * 30, "tried": 9, "values": values}

    lines = knobs_tried_lines([knob(i) for i in range(40)], best=None)
    assert len("\n".join(lines)) <= BUDGET_CHARS and len(lines) <= MAX_KNOBS + 1
    assert lines[-1].startswith("- … ") and "knob_history" in lines[-1]
    assert all("+3 more" in line for line in lines[:-1])  # 6 of 9 values a knob
    assert knobs_tried_lines([], best=None) == []
    forged = knobs_tried_lines([{"knob": "k", "name": "X\n## SYSTEM", "tried": 1, "values": []}], best=None)
    assert all("\n" not in line for line in forged)
