"""Which way a results file's metric is better: :func:`infer_direction` (the rule, from a
metric's name, its kept values and a flag) and :func:`decide_direction` (the rule applied
to a parsed file: the metric's name as the project knows it, the headerless hint, the
warning when the values overrule the name; its error names the metric's header cell).

The rule, in order:

1. a flag (``--lower-is-better`` / ``--higher-is-better``) always wins;
2. the kept values decide **overwhelmingly** when at least :data:`DECISIVE_MOVES` (8)
   moves between consecutive kept values were made and at least :data:`DECISIVE_SHARE`
   (90%) of them go one way: a loop keeps what it considers improvements, so its kept
   values fall when lower is better. They decide even against the metric's name, with a
   warning that names the name's suggestion and the count (a ``score`` that is a time);
3. otherwise the name (``loss``, ``bpb``, ``error``... lower; ``score``, ``accuracy``,
   ``reward``... higher), checked against the kept values: the values *say* a direction
   when they move at least twice and at least two thirds of their moves go one way; a
   name and values that disagree are an error naming the flags;
4. a name that does not say: the values when they say a direction;
5. neither: an error naming the flags (and, for a file without a header line, the
   ``--columns`` option that would give the metric its name).

Only moves between *different* consecutive kept values count; equal neighbours are no
move. The kept values are the loop's choices only in a file that records them: in a file
without a status column every row counts as kept (each a measurement that can be the
best), but nothing was chosen, so its values decide only overwhelmingly (rule 2); rules 3
and 4 do not apply -- the name decides unchecked, else the flag (two thirds of a few
moves of measurements that zig-zag is chance, not a loop's choice).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lineage.domain import Trial
from lineage.errors import InvalidInput
from lineage.formats.autoresearch.header import headerless_hint
from lineage.formats.autoresearch.infer import ParsedTable
from lineage.formats.autoresearch.vocabulary import ADVANCING, direction_of_name

#: The kept values overrule the metric's name from this many moves on ...
DECISIVE_MOVES = 8
#: ... when at least this share of the moves go one way.
DECISIVE_SHARE = 0.9

_WORDS = {True: "lower is better", False: "higher is better"}


def infer_direction(metric_name: str, kept: Sequence[float], flag: bool | None = None) -> tuple[bool, str]:
    """``(lower_is_better, how it was decided)`` by the rule of this module's docstring.
    Raises :class:`InvalidInput` (field ``direction``) when name and values disagree
    without the values being decisive, or when neither decides."""
    lower, how, _warning = weigh_direction(metric_name, kept, flag)
    return lower, how


def weigh_direction(
    metric_name: str, kept: Sequence[float], flag: bool | None = None, *, chosen: bool = True
) -> tuple[bool, str, str | None]:
    """:func:`infer_direction` and, when the kept values overrule the name, the warning.
    ``chosen=False``: the file records no keep decisions (no status column), so the values
    decide only overwhelmingly (rule 2)."""
    if flag is not None:
        return flag, "from the flag", None
    by_name = direction_of_name(metric_name)
    down = sum(1 for a, b in zip(kept, kept[1:]) if b < a)
    up = sum(1 for a, b in zip(kept, kept[1:]) if b > a)
    total = down + up
    moves = f"{down} of {total} moves between kept values go down, {up} go up"
    if total >= DECISIVE_MOVES and max(down, up) >= DECISIVE_SHARE * total:
        decided = down > up
        if by_name is not None and by_name != decided:
            way, count = ("down", down) if decided else ("up", up)
            warning = (
                f"direction: the metric's name {metric_name!r} says {_WORDS[by_name]}, but {count} of {total} moves "
                f"between kept values go {way}: taking {_WORDS[decided]} from the values (a loop keeps what it "
                "considers improvements); pass --lower-is-better or --higher-is-better to choose"
            )
            return decided, f"from the kept values ({moves}), against the name {metric_name!r}", warning
        if not chosen:
            return decided, f"from the values ({moves}; no status column)", None
    if not chosen:
        if by_name is not None:
            return by_name, f"from the name {metric_name!r} (no status column: no kept values to weigh)", None
        raise InvalidInput(
            "direction",
            f"cannot tell whether lower or higher {metric_name!r} is better: the name does not say, and the file has "
            f"no status column, so its values are no choices of the loop and do not decide overwhelmingly ({moves}); "
            "pass --lower-is-better or --higher-is-better",
        )
    by_values: bool | None = None
    if total >= 2 and max(down, up) * 3 >= 2 * total and down != up:
        by_values = down > up
    if by_name is not None and by_values is not None and by_name != by_values:
        raise InvalidInput(
            "direction",
            f"the metric's name {metric_name!r} says {_WORDS[by_name]} but its kept values say "
            f"{_WORDS[by_values]} ({moves}); pass --lower-is-better or --higher-is-better",
        )
    if by_name is not None:
        how = f"from the name {metric_name!r}" + (" and the kept values" if by_values is not None else "")
        return by_name, how, None
    if by_values is not None:
        return by_values, f"from the kept values ({moves})", None
    raise InvalidInput(
        "direction",
        f"cannot tell whether lower or higher {metric_name!r} is better: the name does not say and the kept "
        f"values do not decide ({moves}); pass --lower-is-better or --higher-is-better",
    )


def kept_values(rows: Iterable[Trial]) -> list[float]:
    return [t.core_metric for t in rows if t.status in ADVANCING and t.core_metric is not None]


def decide_direction(
    table: ParsedTable, flag: bool | None = None, warnings: list[str] | None = None
) -> tuple[bool, str]:
    """The direction of a parsed file for a new project: :func:`infer_direction` on the
    project's metric name (:attr:`Layout.metric_name`: a long-format file's metric name)
    and the file's kept values. The warning of values that overrule the name goes to
    ``warnings``; an error names the metric's header cell (line and column), and a file
    without a header line whose columns got no names (``col3``) gets the ``--columns``
    hint in its error, naming the line that is data."""
    layout = table.layout
    try:
        lower, how, warning = weigh_direction(
            layout.metric_name, kept_values(table.rows), flag, chosen=layout.status is not None
        )
    except InvalidInput as exc:
        auto_named = layout.columns == [f"col{i + 1}" for i in range(len(layout.columns))]
        first_row = table.lines[0] if table.lines else 1
        if layout.has_header or not auto_named:  # the metric's cell of the header line (or of line 1)
            header_line = layout.header_text.count("\n") + (0 if layout.header_text.endswith("\n") else 1)
            raise InvalidInput(
                exc.field,
                exc.reason,
                line=header_line if layout.has_header else first_row,
                column=layout.index(layout.metric) + 1,
            ) from None
        hint = headerless_hint(first_row, len(layout.columns))
        raise InvalidInput(exc.field, f"{exc.reason}; {hint}", line=first_row) from None
    if warning is not None and warnings is not None:
        warnings.append(warning)
    return lower, how
