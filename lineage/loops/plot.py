"""``lineage plot``: a loop's progress drawn with matplotlib (the ``plot`` extra)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from lineage.domain import FailureLabel, RunningBest
from lineage.errors import InvalidInput
from lineage.formats import autoresearch as ar

if TYPE_CHECKING:
    from lineage.service import Ledger


def plot_progress(
    ledger: Ledger, project_slug: str, output: str | os.PathLike[str], *, title: str | None = None, max_labels: int = 25
) -> int:
    """Draw the project's progress to ``output`` (.png, .svg, .pdf): every trial a dot,
    kept trials highlighted, crashes marked on the axis (never at 0), the running best as
    a step line, and the descriptions of the kept trials that moved the best. Needs
    matplotlib (``pip install 'lineage-ledger[plot]'``). Returns the trials drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InvalidInput("plot", "plotting needs matplotlib: pip install 'lineage-ledger[plot]'") from None
    project = ledger.projects.project(project_slug)
    rows = ledger.files.plot_rows(project_slug)
    running = RunningBest.of(project)
    kept_statuses = {FailureLabel.KEEP.value, FailureLabel.BASELINE.value}
    crash_like = {label.value for label in ar.CRASH_LIKE}
    xs_other, ys_other, xs_kept, ys_kept, xs_fail = [], [], [], [], []
    steps_x: list[float] = []
    steps_y: list[float] = []
    movers: list[tuple[int, float, str]] = []
    for index, (_seq, _exp_id, status, metric, hypothesis) in enumerate(rows):
        if metric is None:
            if status in crash_like:
                xs_fail.append(index)
            continue
        if status in kept_statuses:
            xs_kept.append(index)
            ys_kept.append(metric)
        else:
            xs_other.append(index)
            ys_other.append(metric)
        if running.offer(status, metric):
            steps_x.append(index)
            steps_y.append(metric)
            if status in kept_statuses:
                movers.append((index, metric, hypothesis))
    figure, axes = plt.subplots(figsize=(12, 6), dpi=110)
    axes.scatter(xs_other, ys_other, s=12, color="#b0b0b0", label="discarded / other", zorder=2)
    axes.scatter(xs_kept, ys_kept, s=34, color="#2a9d3f", edgecolor="black", linewidth=0.4, label="kept", zorder=3)
    if steps_x:
        axes.step(
            [*steps_x, max(len(rows) - 1, steps_x[-1])],
            [*steps_y, steps_y[-1]],
            where="post",
            color="#1f5fbf",
            linewidth=1.6,
            label="running best",
            zorder=4,
        )
    if xs_fail:
        axes.scatter(
            xs_fail,
            [0.02] * len(xs_fail),
            transform=axes.get_xaxis_transform(),
            marker="x",
            s=26,
            color="#d62728",
            label="crash (no result)",
            zorder=5,
            clip_on=False,
        )
    step = max(1, len(movers) // max_labels) if movers else 1
    for k, (x, y, text) in enumerate(movers[::step]):
        label = text if len(text) <= 40 else text[:39] + "…"
        axes.annotate(
            label,
            (x, y),
            xytext=(4, 8 if k % 2 == 0 else -14),
            textcoords="offset points",
            fontsize=7,
            rotation=18,
            color="#14432a",
        )
    axes.set_xlabel("trial (file order)")
    axes.set_ylabel(f"{project.metric_name} ({'lower' if project.lower_is_better else 'higher'} is better)")
    axes.set_title(title or f"{project.title or project.slug}: {len(rows)} trials, {len(xs_kept)} kept")
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize=8)
    figure.tight_layout()
    figure.savefig(os.fspath(output))
    plt.close(figure)
    return len(rows)
