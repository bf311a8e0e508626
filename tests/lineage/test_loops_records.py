"""Results files without loss (issue 19) in the ledger, on SQLite and PostgreSQL: the
loop's kept values decide an overwhelming direction."""

from __future__ import annotations

from lineage import loops
from lineage.formats import autoresearch as ar
from lineage.service import Ledger
from tests.lineage.autoresearch_files import score_is_a_time


def imported(ledger: Ledger, text: str, slug: str = "loop", **options: object) -> loops.LoopImport:
    return loops.import_results(ledger, slug, text, options=ar.ImportOptions(**options))  # type: ignore[arg-type]


def test_the_loops_own_choices_decide_the_direction_with_a_warning(ledger: Ledger) -> None:
    done = imported(ledger, score_is_a_time())
    assert done.lower_is_better is True and "against the name 'score'" in done.direction
    assert sum("says higher is better, but 26 of 26 moves" in w for w in done.warnings) == 1
    assert ledger.project("loop").lower_is_better is True
    imported(ledger, score_is_a_time(), slug="flagged", lower_is_better=False)  # the flag wins
    assert ledger.project("flagged").lower_is_better is False
