"""Results files without loss (issue 19), without a database: the loop's own kept values
decide the direction when they are overwhelming."""

from __future__ import annotations

import io

import pytest

from lineage.domain import BestPolicy, Trial, ordered_best
from lineage.errors import InvalidInput
from lineage.formats import autoresearch as ar
from tests.lineage.autoresearch_files import score_is_a_time


def read(text: str, **options) -> tuple[list[Trial], ar.Layout, list[str]]:  # type: ignore[no-untyped-def]
    warnings: list[str] = []
    layouts: list[ar.Layout] = []
    trials = list(ar.read_trials(io.StringIO(text, newline=""), options=ar.ImportOptions(**options),
                                 warnings=warnings, layout_out=layouts))
    return trials, layouts[0], warnings


def best_of(trials: list[Trial], lower: bool) -> Trial | None:
    eligible = BestPolicy.KEPT.eligible_statuses()
    seq = [t.with_changes(seq=i) for i, t in enumerate(trials) if t.status.value in eligible]
    return ordered_best(seq, lower_is_better=lower)


# -- direction ---------------------------------------------------------------------------------------


def test_overwhelming_kept_values_overrule_the_name_with_a_warning() -> None:
    falling = [float(100 - i) for i in range(27)]  # 26 of 26 moves go down
    lower, how, warning = ar.weigh_direction("score", falling)
    assert lower is True and "against the name 'score'" in how
    assert warning is not None and "'score' says higher is better" in warning and "26 of 26 moves" in warning
    assert ar.infer_direction("score", falling, flag=False) == (False, "from the flag")  # flags always win
    assert ar.weigh_direction("val_bpb", falling)[2] is None  # name and values agree: no warning


@pytest.mark.parametrize(
    ("kept", "decides"),
    [
        ([9.0, 8, 7, 6, 5, 4, 3, 2], False),  # 7 moves: too few, today's rule (an error)
        ([9.0, 8, 7, 6, 5, 4, 3, 2, 1], True),  # 8 of 8
        ([9.0, 8, 7, 6, 7, 5, 4, 3, 2], False),  # 7 of 8: 87.5%
        ([10.0, 9, 8, 7, 6, 7, 5, 4, 3, 2, 1], True),  # 9 of 10: 90%
        ([9.0, 9, 9, 8, 8, 7, 7, 6, 6, 5, 5, 4], False),  # equal neighbours are no move: 5 moves
    ],
)
def test_the_values_decide_from_8_moves_and_90_percent(kept: list[float], decides: bool) -> None:
    if decides:
        assert ar.infer_direction("score", kept)[0] is True
    else:
        with pytest.raises(InvalidInput, match="says higher is better"):
            ar.infer_direction("score", kept)


def test_decide_direction_puts_the_warning_with_the_files_warnings() -> None:
    trials, layout, warnings = read(score_is_a_time())
    assert sum("'score' says higher is better" in w for w in warnings) == 1
    assert best_of(trials, True).core_metric == min(t.core_metric for t in trials)  # type: ignore[union-attr]
    table = ar.parse_table(score_is_a_time())
    notes: list[str] = []
    assert ar.decide_direction(table, None, notes)[0] is True and len(notes) == 1
    assert ar.decide_direction(table, False, notes) == (False, "from the flag") and len(notes) == 1
