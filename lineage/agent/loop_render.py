"""The session-start prompt of a loop that is not fieldkit's: sections built from what the
project has (:func:`render_loop_prompt` over a :class:`LoopView`).

fieldkit's prompt (``lineage.agent.render``) assumes specialists and its own columns; a
loop fed by a results file (karpathy/autoresearch: ``commit``, ``val_bpb``,
``memory_gb``, ``status``, ``description``) has neither specialists nor fieldkit's
labels, and its ``program.md`` asks the agent to know the commit of the best (it resets
to it), the file's other columns (``memory_gb``: "a soft constraint") and the size of
each change ("simplicity criterion"). So this prompt shows, for each trial:

* its exp_id, status (the file's own word), metric and delta against the best before it;
* its commit (the layout's commit column, else ``extra["commit"]``);
* each of the file's other columns (from the stored layout) that holds a value in the
  trials shown -- no empty columns;
* the size of its change, from the stored diffstat (``extra["_git"]``): ``+12 -3 (2 files)``;
* its specialist, only when some trial shown has one -- no invented labels;
* its description under the file's own name for that column (``hypothesis`` otherwise).

Sections: the header, the current best, the chain of kept changes to it (its last
:data:`CHAIN_SHOWN` links: a chain can be thousands long, and walking it whole would cost
more than the rest of the prompt), the top kept trials, the recent trials once (the newest
``last_m`` with their whole text and notes), and the status words this loop uses.

Pure: no database, no clock. Every interpolated text goes through the same folding and
escaping as fieldkit's prompt (``render.safe_text``/``safe_cell``), so no trial text can
forge a heading or break a table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lineage.agent.render import EMPTY_PROMPT, fmt_delta, fmt_metric, safe_cell, safe_text
from lineage.domain import FailureLabel, Project, Trial
from lineage.trial_fields import STATUS_MEANINGS

__all__ = ["CHAIN_SHOWN", "LoopColumns", "LoopView", "diff_size", "loop_columns", "loop_statuses", "render_loop_prompt"]

#: Chain links shown, the newest ones (the best last); the prompt says when there are more.
CHAIN_SHOWN = 30
#: Widths of descriptions, as in fieldkit's prompt.
_BEST_WIDTH = 200
_TABLE_WIDTH = 100
_RECENT_WIDTH = 80
_NOTES_WIDTH = 300
_GIT_KEY = "_git"
_DIFFSTAT = re.compile(r"(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?")


@dataclass(frozen=True, slots=True)
class LoopColumns:
    """Where a trial's loop values are: the keys of ``extra`` and the names they show as
    (taken from the project's stored results-file layout, when it has one)."""

    #: ``extra`` key of the commit, or None
    commit: str | None = None
    #: ``extra`` key of the file's status word, or None
    word: str | None = None
    #: ``(column name, extra key)`` of the file's other columns, in file order
    others: tuple[tuple[str, str], ...] = ()
    #: what the description is called (the file's column name, else ``hypothesis``)
    description: str = "hypothesis"
    #: label -> the file's word for it
    words: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LoopView:
    """The trials a loop's prompt shows, already selected (``Ledger.prompt_document``).

    ``chain`` runs root first, the best last: the last :data:`CHAIN_SHOWN` links of the
    chain to the best; ``earlier``: the chain goes on before them. ``recent`` is oldest first; its
    last ``full`` trials are shown with their whole text. ``statuses``: the labels of
    this loop, in :class:`FailureLabel` order."""

    project: Project
    best: Trial | None
    chain: tuple[Trial, ...]
    earlier: bool
    top_kept: tuple[Trial, ...]
    recent: tuple[Trial, ...]
    full: int
    columns: LoopColumns
    statuses: tuple[str, ...]
    trial_count: int


def diff_size(trial: Trial) -> str:
    """The size of the trial's change from its stored diffstat: ``+12 -3 (2 files)``; ""
    without one."""
    git = trial.extra.get(_GIT_KEY)
    stat = git.get("diffstat") if isinstance(git, dict) else None
    if not isinstance(stat, str):
        return ""
    found = _DIFFSTAT.search(stat)
    if found is None:
        return ""
    files, added, removed = found.group(1), found.group(2) or "0", found.group(3) or "0"
    return f"+{added} -{removed} ({files} file{'s' if files != '1' else ''})"


def _value(trial: Trial, key: str | None) -> str:
    if key is None:
        return ""
    value = trial.extra.get(key)
    if value is None or isinstance(value, (dict, list)):
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _word(view: LoopView, trial: Trial) -> str:
    word = _value(trial, view.columns.word)
    return word or view.columns.words.get(trial.status.value, trial.status.value)


class _Table:
    """The optional columns of a set of trials: those with a value in at least one."""

    def __init__(self, view: LoopView, trials: Sequence[Trial]) -> None:
        columns = view.columns
        self.specialist = any(t.specialist for t in trials)
        self.commit = columns.commit if any(_value(t, columns.commit) for t in trials) else None
        self.others = [(name, key) for name, key in columns.others if any(_value(t, key) for t in trials)]
        self.diff = any(diff_size(t) for t in trials)

    def head(self) -> list[str]:
        names = ["specialist"] if self.specialist else []
        names += ["commit"] if self.commit else []
        names += [name for name, _ in self.others]
        names += ["change"] if self.diff else []
        return names

    def cells(self, trial: Trial) -> list[str]:
        cells = [safe_cell(trial.specialist)] if self.specialist else []
        cells += [safe_cell(_value(trial, self.commit))] if self.commit else []
        cells += [safe_cell(_value(trial, key)) for _, key in self.others]
        cells += [diff_size(trial)] if self.diff else []
        return cells

    def tags(self, trial: Trial) -> list[str]:
        """The same values as ``name value`` words for a chain line (empty ones left out)."""
        tags = [safe_text(trial.specialist)] if self.specialist and trial.specialist else []
        commit = _value(trial, self.commit)
        tags += [f"commit {safe_text(commit)}"] if commit else []
        tags += [f"{safe_text(name)}={safe_text(v)}" for name, key in self.others if (v := _value(trial, key))]
        size = diff_size(trial)
        tags += [size] if size else []
        return tags


def render_loop_prompt(view: LoopView, *, specialist: str = "", timestamp: str = "") -> str:
    """The loop's session-start prompt (module doc)."""
    best = view.best
    if best is None:
        return EMPTY_PROMPT
    project = view.project
    metric = safe_text(project.metric_name) or "core_metric"
    direction = "lower" if project.lower_is_better else "higher"
    described = safe_text(view.columns.description)
    lines = [f"# Session start — {safe_text(timestamp) or safe_text(project.title or project.slug)}", ""]
    if specialist:
        lines.append(f"You are specialist **{safe_text(specialist)}**.")
    commit = _value(best, view.columns.commit)
    at = f", commit `{safe_text(commit)}`" if commit else ""
    count = f"{view.trial_count} trial{'' if view.trial_count == 1 else 's'}"
    lines.append(
        f"Project `{safe_text(project.slug)}`: {count}; {metric}, {direction} is better. "
        f"Current best: **exp_{safe_text(best.exp_id)}** ({metric}={fmt_metric(best.core_metric)}{at})."
    )
    against = "" if best.delta_vs_best is None else f" (Δ={fmt_delta(best.delta_vs_best)} against the best before it)"
    lines += [
        "",
        "## Current best",
        f"- **exp_id**: {safe_text(best.exp_id)}",
        f"- **{metric}**: {fmt_metric(best.core_metric)}{against}",
    ]
    if commit:
        lines.append(f"- **commit**: `{safe_text(commit)}`")
    if best.specialist:
        lines.append(f"- **specialist**: {safe_text(best.specialist)}")
    for name, key in view.columns.others:
        if value := _value(best, key):
            lines.append(f"- **{safe_text(name)}**: {safe_text(value)}")
    if size := diff_size(best):
        lines.append(f"- **change**: {size}")
    lines.append(f"- **{described}**: {safe_text(best.hypothesis, _BEST_WIDTH)}")
    if best.notes:
        lines.append(f"- **notes**: {safe_text(best.notes, _NOTES_WIDTH)}")
    if best.snapshot_path:
        lines.append(f"- **snapshot**: `{safe_text(best.snapshot_path)}`")
    lines.append("")
    lines += _chain(view, metric)
    lines += _top(view, metric, described)
    lines += _recent(view, metric, described)
    lines += _statuses(view)
    return "\n".join(lines) + "\n"


def _chain(view: LoopView, metric: str) -> list[str]:
    table = _Table(view, view.chain)
    heading = (
        f"## Kept changes to the best (the last {len(view.chain)}, oldest first)"
        if view.earlier
        else "## Kept changes to the best (root → best)"
    )
    lines = [heading, "", "```"]
    if view.earlier:
        lines.append("⋮  earlier kept changes (the whole chain: get_knowledge, or GET .../trials/ID/lineage)")
    for i, trial in enumerate(view.chain):
        prefix = "" if i == 0 and not view.earlier else " └─ "
        first = i == 0 and not view.earlier
        tags = ", ".join(
            [
                _word(view, trial),
                f"{metric}={fmt_metric(trial.core_metric)}",
                *([] if first else [f"Δ={fmt_delta(trial.delta_vs_best)}"]),
                *table.tags(trial),
            ]
        )
        lines.append(f"{prefix}exp_{safe_text(trial.exp_id)} [{tags}] {safe_text(trial.hypothesis, _TABLE_WIDTH)}")
    lines[-1] += " ← BEST"
    return [*lines, "```", ""]


def _top(view: LoopView, metric: str, described: str) -> list[str]:
    if not view.top_kept:
        return []
    table = _Table(view, view.top_kept)
    head = ["exp", metric, "Δ", *table.head(), described]
    lines = [
        f"## Top {len(view.top_kept)} kept trials",
        "",
        "| " + " | ".join(safe_cell(h) for h in head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    for trial in view.top_kept:
        cells = [
            safe_cell(trial.exp_id),
            fmt_metric(trial.core_metric),
            fmt_delta(trial.delta_vs_best),
            *table.cells(trial),
            safe_cell(trial.hypothesis, _TABLE_WIDTH),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def _recent(view: LoopView, metric: str, described: str) -> list[str]:
    recent = list(reversed(view.recent))
    if not recent:
        return []
    table = _Table(view, recent)
    head = ["exp", "status", metric, "Δ", *table.head(), described]
    lines = [
        f"## Recent trials (last {len(recent)}, newest first)",
        "",
        "| " + " | ".join(safe_cell(h) for h in head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    for i, trial in enumerate(recent):
        width = None if i < view.full else _RECENT_WIDTH
        cells = [
            safe_cell(trial.exp_id),
            safe_cell(_word(view, trial)),
            fmt_metric(trial.core_metric),
            fmt_delta(trial.delta_vs_best),
            *table.cells(trial),
            safe_cell(trial.hypothesis, width),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    noted = [t for t in recent[: view.full] if t.notes]
    if noted:
        lines += ["", "Notes of the latest trials:"]
        lines += [f"- exp_{safe_text(t.exp_id)}: {safe_text(t.notes, _NOTES_WIDTH)}" for t in noted]
    return [*lines, ""]


def _statuses(view: LoopView) -> list[str]:
    words = view.columns.words
    lines = ["## Status words of this loop", ""]
    for label in view.statuses:
        word = words.get(label, label)
        said = f"`{safe_text(word)}`" + (f" ({label})" if word != label else "")
        lines.append(f"- {said}: {STATUS_MEANINGS.get(label, '')}")
    return [*lines, ""]


def loop_statuses(seen: Sequence[str], columns: LoopColumns) -> tuple[str, ...]:
    """The labels a loop uses: those its file has words for and those of the trials shown,
    plus keep, discard and crash, in :class:`FailureLabel` order."""
    used: set[Any] = {*seen, *columns.words, "keep", "discard", "crash"}
    return tuple(label.value for label in FailureLabel if label.value in used)


def loop_columns(layout: Any) -> LoopColumns:
    """The loop columns of a project with results-file ``layout``
    (``lineage.formats.autoresearch.Layout``; None: a project fed by records, whose
    writers may send ``extra["commit"]``)."""
    if layout is None:
        return LoopColumns(commit="commit")
    shown_apart = layout.role_columns()
    return LoopColumns(
        commit=layout.extra_key(layout.commit) if layout.commit else "commit",
        word=layout.extra_key(layout.status) if layout.status else None,
        others=tuple((name, layout.extra_key(name)) for name in layout.columns if name not in shown_apart),
        description=layout.description or "hypothesis",
        words=dict(layout.words),
    )
