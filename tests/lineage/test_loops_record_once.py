"""``lineage record`` records a trial once: run again (a retry, a replayed shell history)
it answers the trial it stored and appends nothing, by its ``--idempotency-key`` or, given
none, by its commit and values (the ledger's one Idempotency-Key rule)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from api.cli import cli
from lineage.service import Ledger

HEADER = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n"
ROWS = "aaaaaaa\t0.997900\t44.0\tkeep\tbaseline\nbbbbbbb\t0.995000\t44.0\tkeep\tlr 0.05\n"


def cli_run(db: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)


def record_json(db: str, *args: str) -> dict:  # type: ignore[type-arg]
    result = cli_run(db, "record", "-p", "p", *args, "--format", "json")
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.output)


def test_the_same_record_run_twice_is_one_trial_and_one_row(ledger: Ledger, db_url: str, tmp_path: Path) -> None:
    results = tmp_path / "results.tsv"
    results.write_text(HEADER + ROWS)
    assert cli_run(db_url, "import", str(results), "--project", "p").exit_code == 0
    options = ["--metric", "0.99", "--status", "keep", "-d", "new idea", "--commit", "ccccccc", "--memory-gb", "44.0"]
    first = record_json(db_url, *options, "--append-tsv", str(results))
    assert first["created"] and first["exp_id"] == "002" and first["line"]
    again = record_json(db_url, *options, "--append-tsv", str(results))
    assert not again["created"] and again["exp_id"] == "002" and again["line"] is None
    assert results.read_text() == HEADER + ROWS + first["line"]
    # the metric as a number: 0.990 is 0.99; the text form says what happened
    text = cli_run(db_url, "record", "-p", "p", *options[:1], "0.990", *options[2:])
    assert text.exit_code == 0 and "exp_002" in text.output and "already recorded" in text.output
    assert [t.exp_id for t in ledger.tables.stream_trials("p")] == ["000", "001", "002"]
    # the same commit with another metric is another trial (a re-run measured again)
    other = record_json(db_url, "--metric", "0.991", *options[2:], "--append-tsv", str(results))
    assert other["created"] and other["exp_id"] == "003"
    # no commit: nothing tells a replay from a repeat, so each run records
    plain = ["--metric", "0.98", "--status", "discard", "-d", "no commit"]
    assert [record_json(db_url, *plain)["exp_id"] for _ in range(2)] == ["004", "005"]


def test_an_idempotency_key_replays_its_trial_and_refuses_other_options(ledger: Ledger, db_url: str) -> None:
    options = ["--metric", "0.99", "--status", "keep", "-d", "idea", "--idempotency-key", "run-7"]
    first = record_json(db_url, *options)
    assert first["created"] and first["exp_id"] == "000"
    assert not record_json(db_url, *options)["created"]
    clash = cli_run(db_url, "record", "-p", "p", "--metric", "0.5", *options[2:])
    assert clash.exit_code != 0 and clash.stdout == ""
    assert clash.stderr.count("\n") == 1 and "'run-7'" in clash.stderr and "000" in clash.stderr
    bad = cli_run(db_url, "record", "-p", "p", *options[:-1], "has space")
    assert bad.exit_code != 0 and "idempotency_key" in bad.stderr
    assert [t.exp_id for t in ledger.tables.stream_trials("p")] == ["000"]
    # the key is the run's: the same options under another key are another trial
    assert record_json(db_url, *options[:-1], "run-8")["exp_id"] == "001"
