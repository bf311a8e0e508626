"""A sync of the results file never overwrites a trial whose commit differs from the
row's: the row (and those after it) get fresh exp_ids, with a warning. The review's data
loss (agents.md B1: rows of a second file had taken the real file's exp_ids, and the next
sync overwrote the recorded trial with the real file's first row) and a file rewritten by a
restarted loop, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from lineage import loops
from lineage.service import Ledger

HEADER = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n"
ROWS = "aaaaaaa\t0.997900\t44.0\tkeep\tbaseline\nbbbbbbb\t0.995000\t44.0\tkeep\tlr 0.05\n"


def _trials(ledger: Ledger, slug: str) -> dict[str, tuple[str, str, float | None]]:
    return {t.exp_id: (t.extra.get("commit"), t.hypothesis, t.core_metric) for t in ledger.tables.stream_trials(slug)}


def test_rows_of_another_file_under_these_exp_ids_overwrite_nothing(ledger: Ledger, tmp_path: Path) -> None:
    real = tmp_path / "real.tsv"
    real.write_text(HEADER + ROWS)
    ledger.files.import_results("p", real.read_text(), source=str(real))
    # what `record --append-tsv other.tsv` left before the project stored its file: a new
    # segment (row 0 -> exp_002) and the recorded trial as that file's row 0
    layout = ledger.files.results_layout("p")
    assert layout is not None
    layout.segments.append([0, 2])
    ledger.files.save_results_layout("p", layout)
    line = "ccccccc\t0.990000\t44.0\tkeep\tnew idea\n"
    extra = {"commit": "ccccccc", "memory_gb": 44.0, "_line": line, "_row": 0}
    ledger.recording.record_trial(
        "p", {"exp_id": "002", "status": "keep", "core_metric": 0.99, "hypothesis": "new idea", "extra": extra}
    )
    report = loops.ResultsSync(ledger, "p", real).sync()
    assert report.updated == [] and report.inserted == ["003", "004"]
    assert any("exp_002, which holds commit ccccccc (not the row's aaaaaaa)" in w for w in report.warnings)
    trials = _trials(ledger, "p")
    assert trials["002"] == ("ccccccc", "new idea", 0.99)  # before: the baseline row's, 0.9979
    assert trials["000"] == ("aaaaaaa", "baseline", 0.9979) and trials["001"] == ("bbbbbbb", "lr 0.05", 0.995)


def test_a_rewritten_file_keeps_the_old_rows_trials(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "results.tsv"
    path.write_text(HEADER + ROWS)
    sync = loops.ResultsSync(ledger, "r", path)
    assert sync.sync().inserted == ["000", "001"]
    # in place, the same commit: still an update (running -> keep, a description edited)
    path.write_text(HEADER + ROWS.replace("lr 0.05", "lr 0.05 (rerun)"))
    assert sync.sync().updated == ["001"]
    # the loop restarted and wrote the file anew: other commits under the same row numbers
    fresh = "1111111\t0.990000\t40.0\tkeep\tbaseline v2\n2222222\t0.980000\t40.0\tkeep\twarmup\n"
    path.write_text(HEADER + fresh)
    report = sync.sync()
    assert report.updated == [] and report.inserted == ["002", "003"] and len(report.warnings) == 1
    with path.open("a") as fh:
        fh.write("3333333\t0.970000\t40.0\tkeep\tmuon\n")
    assert sync.sync().inserted == ["004"]
    again = loops.ResultsSync(ledger, "r", path).sync()  # a restart of the watcher changes nothing
    assert not again.changed
    assert [c for c, _, _ in _trials(ledger, "r").values()] == [
        "aaaaaaa",
        "bbbbbbb",
        "1111111",
        "2222222",
        "3333333",
    ]
