"""The client's pure rules: the outcome rule, the failure labels (the ledger's vocabulary),
point checks, and the import path that must not need torch."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from lineage.domain import FailureLabel
from tests.api.conftest import ROOT
from trainer_hooks.client import FAILURE_LABELS, decide_status
from trainer_hooks.client.points import encode_columns, encode_rows, step_record, step_rows, turn_rows


def test_failure_labels_are_the_ledgers_vocabulary() -> None:
    assert FAILURE_LABELS == tuple(label.value for label in FailureLabel)


@pytest.mark.parametrize(
    ("metric", "best", "lower", "margin", "status"),
    [
        (0.9, 1.0, True, 0.0, "keep"),
        (1.0, 1.0, True, 0.0, "discard"),  # a tie does not beat
        (0.95, 1.0, True, 0.1, "discard"),
        (0.9, 1.0, True, 0.1, "keep"),
        (1.1, 1.0, False, 0.05, "keep"),
        (0.9, 1.0, False, 0.0, "discard"),
        (0.5, None, True, 0.0, "keep"),  # nothing scored to beat
        (None, 1.0, True, 0.0, "discard"),
        (math.nan, 1.0, True, 0.0, "discard"),
    ],
)
def test_outcome_rule(metric: float | None, best: float | None, lower: bool, margin: float, status: str) -> None:
    assert decide_status(metric, best, lower_is_better=lower, margin=margin) == status


def test_negative_margin_is_refused() -> None:
    with pytest.raises(ValueError, match="margin"):
        decide_status(1.0, 2.0, lower_is_better=True, margin=-0.1)


def test_bad_names_and_steps_fail_at_the_call_and_nonfinite_values_are_counted() -> None:
    with pytest.raises(ValueError, match="name"):
        step_rows(0, {"bad\nname": 1.0}, None, 0.0)
    with pytest.raises(ValueError, match="step"):
        step_rows(-1, {"loss": 1.0}, None, 0.0)
    rows, dropped = step_rows(3, {"kl": math.nan, "loss": 1.0, "big": 1e300, "lr": 0.1}, None, 5.0)
    assert rows == [(3, None, "loss", 1.0, 5.0), (3, None, "lr", 0.1, None)] and dropped == 2  # one clock per call
    rows, dropped = turn_rows(1, {"ig": [0.5, math.inf, 0.25]}, 0.0)
    assert [(r[1], r[3]) for r in rows] == [(0, 0.5), (2, 0.25)] and dropped == 1


def test_encoded_points_are_the_json_the_api_takes() -> None:
    import json

    from api.schemas import TELEMETRY_BATCH

    text, count = encode_rows([(1, None, 'quote"name', 0.1, 2.5), (2, 3, "ünï", -1e-310, 1.0)])
    batch = TELEMETRY_BATCH.validate_json(f'{{"batch_id":"k","points":[{text}]}}')
    assert count == 2 and batch["points"][0]["name"] == 'quote"name' and batch["points"][1]["turn"] == 3
    assert json.loads(f"[{text}]")[1]["value"] == -1e-310


def test_a_call_as_a_record_keeps_the_rules_of_its_rows() -> None:
    with pytest.raises(ValueError, match="name"):
        step_record(0, {"ok": 1.0, "bad\x7fname": 1.0}, None, 0.0)
    with pytest.raises(ValueError, match="turn"):
        step_record(0, {"loss": 1.0}, -2, 0.0)
    metrics = {"kl": math.nan, "loss": 1, "big": -1e300, "lr": 0.1}
    record, dropped = step_record(3, metrics, None, 5.0)
    rows, dropped_rows = step_rows(3, metrics, None, 5.0)
    assert record == (3, None, ("loss", "lr"), (1.0, 0.1), 5.0) and dropped == dropped_rows == 2
    assert step_record(4, {"kl": math.inf}, 2, 5.0) == (None, 1)
    assert step_record(4, {}, None, 5.0) == (None, 0)


def test_a_buffered_record_is_left_alone_by_the_garbage_collector() -> None:
    """A record is tuples of numbers and strings, its names the one tuple of its key set:
    once the collector passed over it, it stops tracking it, so the records a client
    buffers never lengthen a full collection (the rule in the points module doc)."""
    import gc

    record, _ = step_record(7, {"loss": 0.5, "lr": 1e-3}, None, 5.0)
    again, _ = step_record(8, {"loss": 0.25, "lr": 2e-3}, None, 6.0)
    mixed, _ = step_record(9, {"loss": 1, "lr": 0.5}, None, 7.0)  # an int converted
    assert again[2] is record[2] is mixed[2]
    gc.collect()
    gc.collect()
    assert not any(gc.is_tracked(found) for found in (record, again, mixed, record[2], record[3], mixed[3]))


def test_columnar_chunks_are_the_form_the_api_takes_and_join_in_order() -> None:
    import json

    from lineage import telemetry

    first = [step_record(s, {"loss": 1 / (s + 1), 'q"ü': -s}, None, 1.7e9 + s)[0] for s in range(3)]
    turns = turn_rows(3, {"ig": [0.5, 0.25]}, 9.0)[0]
    rows = step_rows(4, {"loss": 0.2}, None, 10.0)[0]
    one, count = encode_columns([*first, turns])
    two, count_two = encode_columns([rows])
    assert (count, count_two) == (8, 1) and "turn" not in json.loads(two)
    expected = [
        (s, -1, n, float(v), w)
        for s, (n, v, w) in [(s, x) for s in range(3) for x in (("loss", 1 / (s + 1), 1.7e9 + s), ('q"ü', -s, None))]
    ]
    expected += [(3, 0, "ig", 0.5, 9.0), (3, 1, "ig", 0.25, None), (4, -1, "loss", 0.2, 10.0)]
    assert (
        telemetry.check_columns(json.loads(b"[" + one + b"," + two + b"]")).rows() == expected
    )  # what the sender joins
    assert telemetry.check_columns(json.loads(one)).rows() == expected[:8]


def test_tensor_values_are_converted() -> None:
    torch = pytest.importorskip("torch")
    rows, _ = step_rows(0, {"a": torch.tensor(0.5), "b": 2, "c": torch.tensor(1.5, dtype=torch.float64)}, None, 0.0)
    assert [r[3] for r in rows] == [0.5, 2.0, 1.5]
    rows, _ = turn_rows(0, {"t": torch.tensor([0.25, 0.75])}, 0.0)
    assert [r[3] for r in rows] == [0.25, 0.75]


def test_spool_flush_and_the_client_import_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"  # any import of torch fails
        "import api.cli, trainer_hooks.client, trainer_hooks.client.cli, trainer_hooks.callbacks\n"
        "from click.testing import CliRunner\n"
        "result = CliRunner().invoke(api.cli.cli, ['spool', 'flush', '--help'])\n"
        "assert result.exit_code == 0, result.output\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_flush_of_a_missing_directory_is_one_line_on_stderr(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, "-m", "api.cli", "spool", "flush", str(tmp_path / "nope")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "does not exist" in done.stderr


def test_flush_of_a_file_that_is_no_spool_names_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bogus = tmp_path / "notes.spool"
    bogus.write_text("not a database, just text " * 100)
    done = subprocess.run(
        [sys.executable, "-m", "api.cli", "spool", "flush", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and done.stderr.startswith(f"error: {bogus}: not a spool file")
    assert done.stderr.count("\n") == 1
