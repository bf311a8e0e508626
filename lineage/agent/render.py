"""The session-start prompt: fieldkit's Markdown lineage block, rendered from a view.

This module owns the *text* of the prompt and nothing else: which trials appear in it is
decided by the service (``Ledger.prompt_view``) and handed over as a :class:`PromptView`.
No database, no I/O, no clock: the output is a pure function of the view and the
arguments.

Byte compatibility
    For ``metric_name="core_metric"`` (the default) and text without structure-breaking
    characters (see below), :func:`render_prompt` returns exactly the bytes of fieldkit
    0.34.1's ``LineageStore.render_prompt(...).rendered_prompt`` for the same trials and
    arguments: same headings, metrics with 6 decimals, ``—`` for a missing number, deltas
    with a sign, hypotheses cut to 110/100/100/80 characters and notes to 200, with ``…``.

Structure safety
    fieldkit interpolates trial text verbatim, so a newline in a hypothesis can forge a
    ``## SYSTEM`` heading that the next agent obeys, and a ``|`` shifts table columns.
    Every interpolated text field (trial text, the specialist and timestamp arguments,
    the metric name) goes through these steps, in this order (and so does every value
    the prompt wrapper inserts, through :func:`inline_text`):

    1. **fold**: each run of line breaks and tabs (``\\r\\n``, ``\\r``, ``\\n``, ``\\v``, ``\\f``,
       ``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028``, ``\\u2029``, ``\\t``) becomes one space.
       Every line of the prompt starts with fixed text, so after folding no interpolated
       text can begin a line: no forged heading, list item, table row or code fence.
    2. **truncate** (where fieldkit truncates) on the folded text, so the cut counts the
       characters the reader sees, and the ``…`` cannot land inside an escape.
    3. **escape**: a run of 3 or more backticks becomes as many ``ˋ`` (U+02CB), so a
       field can neither close the chain's code fence nor open one; inside table cells
       only, ``|`` becomes ``\\|`` and any backslashes directly before it are doubled, so
       the pipe stays escaped under both GFM's rule (a backslash before it) and
       CommonMark's (an odd number of backslashes before it).

    Text without those characters passes through unchanged, which is what keeps the
    output byte-identical to fieldkit's.

``metric_name``
    Projects imported from other formats name their metric (``val_bpb``). It replaces
    fieldkit's literal ``core_metric`` in exactly four places: the header sentence
    ``(core_metric=…)``, the ``- **core_metric**:`` line of the current best, and the
    ``core_metric`` column header of both tables (the delimiter rows stay as fieldkit
    writes them). The per-trial ``metric=`` labels are fieldkit's and stay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lineage.domain import FailureLabel, Trial

__all__ = [
    "EMPTY_PROMPT",
    "KNOWLEDGE_HEADING",
    "PromptView",
    "fmt_delta",
    "fmt_metric",
    "inline_text",
    "render_knowledge",
    "render_prompt",
    "safe_cell",
    "safe_text",
]

#: The whole prompt of a project without trials (fieldkit's wording).
EMPTY_PROMPT = "# Session start — empty lineage\n"
#: The line where the KNOWLEDGE.md part of the prompt starts.
KNOWLEDGE_HEADING = "## KNOWLEDGE.md"
DEFAULT_METRIC_NAME = "core_metric"

# fieldkit's truncation widths, per place in the prompt.
_BEST_HYPOTHESIS_WIDTH = 110
_TABLE_HYPOTHESIS_WIDTH = 100
_CHAIN_HYPOTHESIS_WIDTH = 100
_RECENT_HYPOTHESIS_WIDTH = 80
_NOTES_WIDTH = 200

# Exactly the boundaries of str.splitlines(), plus the tab. Compiled once: the renderer
# runs on every prompt request.
_BREAK_RUN = re.compile("(?:\r\n|[\t\n\v\f\r\x1c\x1d\x1e\x85\u2028\u2029])+")
_BACKTICK_RUN = re.compile("`{3,}")
# U+02CB MODIFIER LETTER GRAVE ACCENT: reads like a backtick, means nothing to Markdown.
_INERT_BACKTICK = "\u02cb"


@dataclass(frozen=True, slots=True)
class PromptView:
    """The trials a prompt shows, already selected and ordered.

    ``best`` is None for a project without trials. ``chain`` runs root first, best last.
    ``top_kept`` is the leaderboard in fieldkit's order, at most top_k long. ``recent``
    and ``recent_full`` are the last recent_n and last_m trials, oldest first.
    """

    best: Trial | None
    chain: tuple[Trial, ...]
    top_kept: tuple[Trial, ...]
    recent: tuple[Trial, ...]
    recent_full: tuple[Trial, ...]


def render_prompt(
    view: PromptView, *, specialist: str, timestamp: str = "", metric_name: str = DEFAULT_METRIC_NAME
) -> str:
    """The full session-start prompt: header, LEADERBOARD.md part, KNOWLEDGE.md part."""
    if view.best is None:
        return EMPTY_PROMPT
    metric = _metric_label(metric_name)
    return _leaderboard(view, view.best, specialist, timestamp, metric) + _knowledge(view, metric)


def render_knowledge(view: PromptView, *, metric_name: str = DEFAULT_METRIC_NAME) -> str:
    """The KNOWLEDGE.md part alone: the suffix of :func:`render_prompt` from its
    ``## KNOWLEDGE.md`` line to the end, byte for byte. ``""`` for an empty project,
    whose prompt has no such part."""
    if view.best is None:
        return ""
    return _knowledge(view, _metric_label(metric_name))


# -- the two parts ------------------------------------------------------------------------


def _leaderboard(view: PromptView, best: Trial, specialist: str, timestamp: str, metric: str) -> str:
    """Header and LEADERBOARD.md part, ending with the blank line before KNOWLEDGE.md."""
    metric_cell = _escape_pipes(metric)
    lines = [
        f"# Session start — {_text(timestamp) or '—'}",
        f"You are specialist **{_text(specialist)}**. "
        f"Current best: **exp_{_text(best.exp_id)}** ({metric}={_fmt_metric(best.core_metric)}).",
        "",
        "## LEADERBOARD.md",
        "",
        "## Current Best",
        f"- **exp_id**: {_text(best.exp_id)}",
        f"- **{metric}**: {_fmt_metric(best.core_metric)}",
        f"- **specialist**: {_text(best.specialist)}",
        f"- **hypothesis**: {_text(best.hypothesis, _BEST_HYPOTHESIS_WIDTH)}",
    ]
    if best.snapshot_path:
        lines.append(f"- **snapshot**: `{_text(best.snapshot_path)}`")
    lines.append("")

    lines.append(f"## Top {len(view.top_kept)} Kept Trials")
    lines.append("")
    if view.top_kept:
        lines.append(f"| exp | {metric_cell} | Δ | specialist | hypothesis |")
        lines.append("|-----|-------------|---|------------|------------|")
        for t in view.top_kept:
            lines.append(
                f"| {_cell(t.exp_id)} | {_fmt_metric(t.core_metric)} "
                f"| {_fmt_delta(t.delta_vs_best)} | {_cell(t.specialist)} "
                f"| {_cell(t.hypothesis, _TABLE_HYPOTHESIS_WIDTH)} |"
            )
    else:
        lines.append("*(no keeps yet)*")
    lines.append("")
    # Joined with a trailing newline, the final "" yields the blank line before KNOWLEDGE.md,
    # exactly as fieldkit's single "\n".join over both parts does.
    return "\n".join(lines) + "\n"


def _knowledge(view: PromptView, metric: str) -> str:
    """The KNOWLEDGE.md part: lineage chain, recent table, last trials in full."""
    lines = [
        KNOWLEDGE_HEADING,
        "",
        "**Current-best lineage** (root → best):",
        "```",
    ]
    for i, t in enumerate(view.chain):
        prefix = "" if i == 0 else " └─ "
        lines.append(
            f"{prefix}exp_{_text(t.exp_id)} "
            f"[{_text(t.specialist) or 'baseline'}, {_status(t)}, "
            f"metric={_fmt_metric(t.core_metric)}, Δ={_fmt_delta(t.delta_vs_best)}] "
            f"{_text(t.hypothesis, _CHAIN_HYPOTHESIS_WIDTH)}"
        )
    if view.chain:
        lines[-1] += " ← BEST"
    lines.append("```")
    lines.append("")

    lines.append(f"## Recent Activity (last {len(view.recent)})")
    lines.append("")
    if view.recent:
        lines.append(f"| exp | specialist | status | {_escape_pipes(metric)} | hypothesis |")
        lines.append("|-----|------------|--------|-------------|------------|")
        for t in reversed(view.recent):
            lines.append(
                f"| {_cell(t.exp_id)} | {_cell(t.specialist)} | {_status(t)} "
                f"| {_fmt_metric(t.core_metric)} | {_cell(t.hypothesis, _RECENT_HYPOTHESIS_WIDTH)} |"
            )
    lines.append("")

    if view.recent_full:
        lines.append(f"## Recent Activity (most recent {len(view.recent_full)} — full hypothesis)")
        for t in reversed(view.recent_full):
            lines.append(
                f"- exp_{_text(t.exp_id)} [{_text(t.specialist)}, {_status(t)}, "
                f"metric={_fmt_metric(t.core_metric)}, Δ={_fmt_delta(t.delta_vs_best)}] "
                f"{_text(t.hypothesis)}"
            )
            if t.notes:
                lines.append(f"  └─ {_text(t.notes, _NOTES_WIDTH)}")
        lines.append("")

    return "\n".join(lines) + "\n"


# -- field formatting ---------------------------------------------------------------------


def _metric_label(metric_name: str) -> str:
    # An unnamed metric keeps fieldkit's word rather than rendering "(=34.960000)".
    return _text(metric_name) or DEFAULT_METRIC_NAME


def _fmt_metric(value: float | None) -> str:
    return f"{value:.6f}" if value is not None else "—"


def _fmt_delta(value: float | None) -> str:
    return f"{value:+.6f}" if value is not None else "—"


def _status(trial: Trial) -> str:
    status = trial.status
    # Tolerate a raw string from a caller that skipped parsing; fold it like any text.
    return status.value if isinstance(status, FailureLabel) else _text(str(status))


def _text(value: str, width: int | None = None) -> str:
    """A field outside tables: fold, truncate, neutralise backtick fences."""
    folded = _fold(value)
    if width is not None:
        folded = _truncate(folded, width)
    return _neutralise_fences(folded)


def inline_text(value: str, width: int | None = None) -> str:
    """``value`` made safe to insert into a line of Markdown, by the steps of the module
    doc (fold, then neutralise backtick fences; cut to ``width`` when given): what every
    text the prompt wrapper (``lineage.agent.prompt``) inserts goes through, as trial text
    does here."""
    return _text(value, width)


def _cell(value: str, width: int | None = None) -> str:
    """A field inside a table cell: as :func:`_text`, then escape pipes."""
    return _escape_pipes(_text(value, width))


def _fold(value: str) -> str:
    # isprintable() is False for every break character and the tab, so single-line text
    # (nearly all of it) skips the regex.
    if value.isprintable():
        return value
    return _BREAK_RUN.sub(" ", value)


def _truncate(value: str, width: int) -> str:
    # fieldkit's rule: keep width-1 characters and add an ellipsis.
    if len(value) <= width:
        return value
    return value[: max(0, width - 1)] + "…"


def _neutralise_fences(value: str) -> str:
    if "```" not in value:
        return value
    return _BACKTICK_RUN.sub(_inert_backticks, value)


def _inert_backticks(match: re.Match[str]) -> str:
    return _INERT_BACKTICK * len(match.group())


def _escape_pipes(value: str) -> str:
    if "|" not in value:
        return value
    pieces = value.split("|")
    out: list[str] = []
    for piece in pieces[:-1]:
        # Double the backslashes that already precede the pipe so that none of them
        # pairs with ours: an odd run before "|" means "escaped" to every parser.
        backslashes = len(piece) - len(piece.rstrip("\\"))
        out.append(piece + "\\" * backslashes + "\\|")
    out.append(pieces[-1])
    return "".join(out)


# The structure-safety steps and number formats, for the loop's own prompt
# (lineage.agent.loop_render), which must be as safe as this one.
safe_text = _text
safe_cell = _cell
fmt_metric = _fmt_metric
fmt_delta = _fmt_delta
