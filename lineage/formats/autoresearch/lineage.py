"""The lineage of a file's rows: :class:`LineageBuilder` gives each parsed row its exp_id
(row number, or an id column), its parent (the loop's branch tip, or a parent column),
the baseline, and ``delta_vs_best`` once the direction is known; it keeps its state so
watch can go on with rows appended later.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lineage.domain import MAX_LONG_TEXT, MAX_SHORT_TEXT, BestPolicy, RunningBest, Trial
from lineage.errors import InvalidInput
from lineage.formats.autoresearch.layout import Layout
from lineage.formats.autoresearch.vocabulary import ADVANCING


class LineageBuilder:
    """Names parsed rows (in file order, in place): exp_id, parent, baseline, and then
    ``delta_vs_best`` once the direction is known.

    Keeps its state (branch tip, baseline, commits and ids seen, best so far), so watch
    can go on with the rows appended later.
    """

    def __init__(
        self,
        layout: Layout,
        *,
        lower_is_better: bool,
        best_policy: BestPolicy = BestPolicy.KEPT,
        source: str = "<stream>",
    ) -> None:
        self.layout = layout
        self.lower = lower_is_better
        self.policy = best_policy
        self.source = source
        self.tip: str | None = None
        self.baseline: str | None = None
        self.best: float | None = None
        self.by_commit: dict[str, str] = {}
        self.ids: set[str] = set()
        self.unresolved = 0
        self.commit_key = layout.extra_key(layout.commit) if layout.commit else None
        self.id_key = layout.extra_key(layout.id_column) if layout.id_column else None
        self.parent_key = layout.extra_key(layout.parent) if layout.parent else None

    def name(self, trials: Sequence[Trial], *, first_row: int, lines: Sequence[int] | None = None) -> None:
        """Set exp_id, parent_exp and baseline_exp of ``trials`` (rows ``first_row``...)."""
        layout = self.layout
        segments = layout.segments
        width = layout.id_width
        single = len(segments) == 1 and segments[0][0] == 0
        base = segments[0][1] if single else 0
        id_key, parent_key, commit_key = self.id_key, self.parent_key, self.commit_key
        advancing = ADVANCING
        tip, baseline = self.tip, self.baseline
        for offset, trial in enumerate(trials):
            index = first_row + offset
            if id_key is not None:
                exp_id = self._id_cell(trial, lines[offset] if lines is not None else None)
            elif single:
                exp_id = str(base + index).zfill(width)
            else:
                exp_id = layout.exp_id(index)
            trial.exp_id = exp_id
            if baseline is None:
                baseline = exp_id
            elif baseline != exp_id:
                trial.baseline_exp = baseline
            if parent_key is not None:
                ref = trial.extra.get(parent_key)
                ref = ref.strip() if isinstance(ref, str) else ""
                parent = ""
                if ref:
                    parent = ref if ref in self.ids else self.by_commit.get(ref, "")
                    if not parent:
                        self.unresolved += 1
                if parent != exp_id:
                    trial.parent_exp = parent
                self.ids.add(exp_id)
                commit = trial.extra.get(commit_key) if commit_key else None
                if isinstance(commit, str) and commit.strip():
                    self.by_commit[commit.strip()] = exp_id
            elif tip is not None and tip != exp_id:
                trial.parent_exp = tip
            if tip is None or trial.status in advancing:
                tip = exp_id
        self.tip, self.baseline = tip, baseline

    def _id_cell(self, trial: Trial, line: int | None) -> str:
        value = trial.extra.get(self.id_key)  # type: ignore[arg-type]
        value = value.strip() if isinstance(value, str) else "" if value is None else str(value)
        if not value or any(ch in value for ch in "\t\r\n/") or len(value) > MAX_SHORT_TEXT:
            raise InvalidInput(
                "exp_id",
                f"column {self.layout.id_column!r} must hold an id (not empty, no '/', at most "
                f"{MAX_SHORT_TEXT} characters), got {value!r} (in {self.source})",
                line=line,
                column=self.layout.index(self.layout.id_column) + 1,
            )
        return value

    def deltas(self, trials: Iterable[Trial]) -> None:
        """Set ``delta_vs_best``: metric minus the best eligible metric before the row."""
        running = RunningBest(self.policy, self.lower, self.best)
        see = running.see
        for trial in trials:
            metric = trial.core_metric
            if metric is not None:
                delta = see(trial.status, metric)
                if delta is not None:  # the first scored row keeps what it had
                    trial.delta_vs_best = delta
        self.best = running.best

    def check(self, trials: Sequence[Trial], lines: Sequence[int]) -> None:
        """Length limits the parser does not check (a description over 64 KiB)."""
        di = self.layout.index(self.layout.description) + 1
        for trial, line in zip(trials, lines):
            if len(trial.hypothesis) > MAX_LONG_TEXT:
                raise InvalidInput(
                    "hypothesis",
                    f"is {len(trial.hypothesis)} characters long; the limit is {MAX_LONG_TEXT} (in {self.source})",
                    line=line,
                    column=di,
                )
