"""The prompt's "Knobs tried" section: what each knob was tried at, within a stated budget.

Built from ``ledger.knobs.knob_history`` (every knob of the project's newest tries) and
the best trial. Most informative first: a knob whose value the best set, then knobs with
kept values, then knobs with values that crashed, then the rest (most tried first); within
a knob, its values in the same order (the best's, kept, crashed, the others as first
tried). The section holds at most :data:`MAX_KNOBS` knobs, :data:`MAX_VALUES` values a
knob and :data:`BUDGET_CHARS` characters; what is left out is counted on its last line,
which names the tool that answers in full. Every name and value is folded like any trial
text (``render.safe_text``).

Pure: no database, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lineage.agent.render import safe_text

__all__ = ["BUDGET_CHARS", "MAX_KNOBS", "MAX_VALUES", "knobs_tried_lines"]

#: the section's budget, in characters (about 400 tokens), its last line included
BUDGET_CHARS = 1_600
#: knobs shown at most
MAX_KNOBS = 12
#: values shown per knob at most
MAX_VALUES = 6
_VALUE_CHARS = 24


def _rank(trials: Sequence[Mapping[str, Any]], best: str | None) -> int:
    """How informative a value is: the best set it (3), a trial kept it (2), it crashed (1)."""
    statuses = {t["status"] for t in trials}
    if best is not None and any(t["exp_id"] == best for t in trials):
        return 3
    if statuses & {"keep", "baseline"}:
        return 2
    return 1 if "crash" in statuses else 0


def _value(value: Mapping[str, Any], best: str | None) -> str:
    trials = value["trials"]
    statuses = [t["status"] for t in trials]
    said = "/".join(dict.fromkeys(statuses)) + (f"×{len(statuses)}" if len(statuses) > 1 else "")
    mark = " (best)" if best is not None and any(t["exp_id"] == best for t in trials) else ""
    return f"{safe_text(str(value['value']), _VALUE_CHARS)} {said}{mark}"


def knobs_tried_lines(knobs: Sequence[Mapping[str, Any]], best: str | None) -> list[str]:
    """The section's lines (no heading): one list item per knob (module doc), then a line
    counting what the budget left out; empty when no knob was tried. ``knobs``:
    ``knob_history``'s ``knobs``; ``best``: the best trial's exp_id."""
    ranked: list[tuple[tuple[int, int, int], Mapping[str, Any], list[Mapping[str, Any]]]] = []
    for order, knob in enumerate(knobs):
        numbered = sorted(enumerate(knob["values"]), key=lambda pair: (-_rank(pair[1]["trials"], best), pair[0]))
        values = [value for _, value in numbered]
        top = max((_rank(v["trials"], best) for v in values), default=0)
        ranked.append(((-top, -knob["tried"], order), knob, values))
    ranked.sort(key=lambda row: row[0])
    lines: list[str] = []
    used = 0
    left = len(ranked)
    for _, knob, values in ranked[:MAX_KNOBS]:
        shown = ", ".join(_value(v, best) for v in values[:MAX_VALUES])
        more = f", +{len(values) - MAX_VALUES} more" if len(values) > MAX_VALUES else ""
        line = f"- {safe_text(knob['name'] or knob['knob'], 40)}: {shown}{more}"
        if used + len(line) + 1 > BUDGET_CHARS - 80:  # room for the closing line
            break
        lines.append(line)
        used += len(line) + 1
        left -= 1
    if left:
        lines.append(f"- … {left} more knob{'s' if left != 1 else ''}: ask knob_history (MCP) or GET .../knob-history")
    return lines if knobs else []
