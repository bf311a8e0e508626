"""Knob changes read from patches, configs and hypotheses (lineage.knobs.extract)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.knobs import KnobChange, extract_changes, knob_name, parse_number
from lineage.knobs.extract import MAX_PATCH_CHARS, config_changes, hypothesis_changes, patch_changes

AUTORESEARCH_PATCH = """\
diff --git a/train.py b/train.py
index 3f1c2e1..9ab0c7d 100644
--- a/train.py
+++ b/train.py
@@ -431,12 +431,12 @@ class GPTConfig:
     vocab_size: int = 8192
-    n_layer: int = 8
+    n_layer: int = 12
     n_embd: int = 768
@@ -612,9 +612,9 @@ WARMDOWN_RATIO = 0.5
-MATRIX_LR = 0.04         # learning rate for the matrix params (Muon)
+MATRIX_LR = 0.06         # learning rate for the matrix params (Muon)
 EMBEDDING_LR = 0.6
-TOTAL_BATCH_SIZE = 2**19 # ~524K tokens per optimizer step
+TOTAL_BATCH_SIZE = 2**20 # ~1M tokens per optimizer step
-        self.softcap = 15.0
+        self.softcap = 30.0
-optimizer = torch.optim.AdamW(params, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.0)
+optimizer = torch.optim.AdamW(params, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
-x = compute(1)
+x = compute(2)
-if step == 100:
+if step == 200:
diff --git a/configs/base.yaml b/configs/base.yaml
--- a/configs/base.yaml
+++ b/configs/base.yaml
@@ -1,4 +1,4 @@
-warmup_steps: 100   # linear warmup
+warmup_steps: 200   # linear warmup
-optimizer: "adamw"
+optimizer: "muon"
diff --git a/config.json b/config.json
--- a/config.json
+++ b/config.json
-  "dropout": 0.1,
+  "dropout": 0.0,
diff --git a/run.sh b/run.sh
--- a/run.sh
+++ b/run.sh
-torchrun train.py --depth 8 --device-batch-size=32 --seed 1
+torchrun train.py --depth 12 --device-batch-size=64 --seed 1
diff --git a/logo.png b/logo.png
Binary files a/logo.png and b/logo.png differ
"""


def _table(changes: list[KnobChange]) -> dict[str, tuple[str | None, str | None]]:
    return {change.knob: (change.old, change.new) for change in changes}


def test_a_patch_yields_each_assignment_it_changes_with_old_and_new_value() -> None:
    changes = patch_changes(AUTORESEARCH_PATCH)
    assert _table(changes) == {
        "nlayers": ("8", "12"),  # a dataclass field, and --depth (the first one wins)
        "matrix lr": ("0.04", "0.06"),
        "total bs": ("2**19", "2**20"),
        "softcap": ("15.0", "30.0"),
        "wd": ("0.0", "0.1"),  # a keyword argument; lr=3e-4 is unchanged
        "warmup": ("100", "200"),
        "optim": ('"adamw"', '"muon"'),
        "dropout": ("0.1", "0.0"),
        "device bs": ("32", "64"),
        "logo png": (None, "binary"),  # a binary file: kept as text, source unparsed
    } | {"nlayers": ("8", "12")}
    assert {c.knob for c in changes if c.source == "unparsed"} == {"logo png"}
    assert {change.source for change in changes} == {"patch", "unparsed"}
    by_name = {change.name: change for change in changes}
    assert by_name["TOTAL_BATCH_SIZE"].new_number == 2**20
    assert by_name["depth"].old == "8"  # the flag is kept, under its own name


def test_code_and_unchanged_values_are_no_knob_changes() -> None:
    names = {change.name for change in patch_changes(AUTORESEARCH_PATCH)}
    assert not names & {"x", "step", "seed", "lr", "EMBEDDING_LR", "betas"}


def test_a_patch_too_large_is_read_up_to_its_bound_and_never_fails() -> None:
    filler = "+" + "y" * 1000 + "\n"
    patch = AUTORESEARCH_PATCH + filler * (MAX_PATCH_CHARS // len(filler) + 10) + "-LATE = 1\n+LATE = 2\n"
    assert "late" not in _table(patch_changes(patch))
    assert patch_changes("\x00\x01 binary \xff garbage --flag") == []


@pytest.mark.parametrize(
    ("text", "knob", "old", "new", "factor"),
    [
        ("increase MATRIX_LR from 0.04 to 0.06", "matrix lr", "0.04", "0.06", None),
        ("lr 3e-4 -> 1e-3", "lr", "3e-4", "1e-3", None),
        ("depth 8 → 12", "nlayers", "8", "12", None),
        ("double the batch size", "bs", None, None, 2.0),
        ("Halve the learning rate.", "lr", None, None, 0.5),
        ("switch to 16 layers", "nlayers", None, "16", None),
        ("set weight decay to 0.1", "wd", None, "0.1", None),
        ("TOTAL_BATCH_SIZE 2**19 -> 2**20 (OOM before)", "total bs", "2**19", "2**20", None),
        ("bump warmup steps from 100 to 200 to stabilise", "warmup", "100", "200", None),
        ("Lower the embedding lr: 0.6 => 0.4", "emb lr", "0.6", "0.4", None),
        ("try dropout=0.1 on the attention", "dropout", None, "0.1", None),
        ("use 512K tokens per step, n_head 6 to 8", "nheads", "6", "8", None),
    ],
)
def test_a_hypothesis_states_its_knob_change(
    text: str, knob: str, old: str | None, new: str | None, factor: float | None
) -> None:
    found = {change.knob: change for change in hypothesis_changes(text)}
    assert knob in found, found
    change = found[knob]
    assert (change.old, change.new, change.factor, change.source) == (old, new, factor, "hypothesis")


@pytest.mark.parametrize(
    "text",
    ["try 3 ideas at once", "bigger model, same recipe", "revert exp_012", "baseline", "fix the 2 bugs in eval"],
)
def test_a_hypothesis_without_a_knob_change_yields_none(text: str) -> None:
    assert hypothesis_changes(text) == []


def test_config_changes_compare_with_the_parent_or_are_set() -> None:
    config = {"learning_rate": 3e-4, "optimizer": {"beta2": 0.95, "name": "adamw"}, "seed": 1, "tags": ["a"]}
    parent = {"learning_rate": 1e-3, "optimizer": {"beta2": 0.95, "name": "adamw"}, "seed": 1}
    assert _table(config_changes(config, parent)) == {"lr": ("0.001", "0.0003")}
    assert _table(config_changes(config)) == {
        "lr": (None, "0.0003"),
        "optim beta2": (None, "0.95"),
        "optim name": (None, "adamw"),
        "seed": (None, "1"),
    }
    assert config_changes("not a mapping") == []


def test_one_change_per_knob_the_most_trusted_source_first() -> None:
    extra = {"_git": {"patch": AUTORESEARCH_PATCH}, "config": {"MATRIX_LR": 0.05, "momentum": 0.9}}
    changes = extract_changes("increase MATRIX_LR from 0.04 to 0.07, double the batch size", extra)
    by_knob = {change.knob: change for change in changes}
    assert (by_knob["matrix lr"].source, by_knob["matrix lr"].new) == ("patch", "0.06")
    assert by_knob["momentum"].source == "config"
    assert "bs" not in by_knob  # "double the batch size": the patch names it more fully
    assert by_knob["total bs"].source == "patch"
    assert len(by_knob) == len(changes)
    assert extract_changes("", {"_git": "not a mapping", "config": None}) == []


@pytest.mark.parametrize(
    ("name", "knob"),
    [
        ("MATRIX_LR", "matrix lr"),
        ("learning_rate", "lr"),
        ("--learning-rate", "lr"),
        ("nLayers", "nlayers"),
        ("model.n_embd", "model dmodel"),
    ],
)
def test_knob_names_are_split_and_spelled_one_way(name: str, knob: str) -> None:
    assert knob_name(name.lstrip("-")) == knob


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3e-4", 3e-4),
        ("2**19", 524288.0),
        ("512K", 512_000.0),
        ("1_000", 1000.0),
        ("2^10", 1024.0),
        ("64 * 1024", 65536.0),
    ],
)
def test_numbers_with_units_and_expressions(text: str, value: float) -> None:
    assert parse_number(text) == value


@pytest.mark.parametrize("text", ['"adam"', "True", "2**1000", "1e400", "foo(2)", "__import__('os')", ""])
def test_what_is_not_a_number_is_none(text: str) -> None:
    assert parse_number(text) is None


_IDENT = st.from_regex(r"[A-Z][A-Z_]{0,10}[A-Z]", fullmatch=True)
_NUMBERS = st.sampled_from(["0.04", "0.06", "3e-4", "1e-3", "2**19", "2**20", "8", "12", "512K", "0.5"])


@settings(max_examples=60, deadline=None)
@given(name=_IDENT, old=_NUMBERS, new=_NUMBERS, comment=st.sampled_from(["", "  # why", "# tokens"]))
def test_any_constant_changed_in_a_patch_is_found_with_its_values(name: str, old: str, new: str, comment: str) -> None:
    patch = f"--- a/train.py\n+++ b/train.py\n@@ -1,3 +1,3 @@\n-{name} = {old}{comment}\n+{name} = {new}{comment}\n"
    changes = patch_changes(patch)
    if parse_number(old) == parse_number(new):
        assert changes == []
    else:
        assert [(c.name, c.old, c.new) for c in changes] == [(name, old, new)]
        assert changes[0].knob == knob_name(name)


@settings(max_examples=60, deadline=None)
@given(
    verb=st.sampled_from(["increase", "decrease", "change", "try", ""]),
    name=st.sampled_from(["MATRIX_LR", "lr", "warmup steps", "n_head", "weight decay"]),
    old=_NUMBERS,
    new=_NUMBERS,
    arrow=st.sampled_from([" to ", " -> ", " → ", "->", " => "]),
    tail=st.sampled_from(["", ".", " (was unstable)", ", keep the rest"]),
)
def test_any_from_to_phrasing_yields_the_change(
    verb: str, name: str, old: str, new: str, arrow: str, tail: str
) -> None:
    text = f"{verb} {name} from {old}{arrow}{new}{tail}".strip()
    changes = hypothesis_changes(text)
    assert [(c.knob, c.old, c.new) for c in changes] == [(knob_name(name), old, new)]


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_extraction_never_fails_on_any_text(text: str) -> None:
    extract_changes(text, {"_git": {"patch": text}, "config": {"k": text}})
