"""The ledger's use-cases: what the CLI, the HTTP API, MCP and the pages all call.

Each rule lives in exactly one function here or in ``lineage.domain``: which trial is
the best, the chain to it, the next exp_id, ``delta_vs_best``, idempotent recording,
atomic imports. SQL stays in ``lineage.store``; rendering in ``lineage.render``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterable, Iterator, Mapping

from sqlalchemy import Connection, Engine

from lineage import migrate
from lineage.db import make_engine
from lineage.domain import (
    WRITABLE_FIELDS,
    BestPolicy,
    FailureLabel,
    Project,
    Trial,
    is_better,
    metric_delta,
    next_exp_id,
    trial_from_mapping,
    validate_slug,
    validate_trial,
)
from lineage.errors import Conflict, InvalidInput, NotFound
from lineage.render import PromptView, render_knowledge, render_prompt
from lineage.store import Store

#: Fields a project update may change.
PROJECT_FIELDS = ("title", "metric_name", "lower_is_better", "best_policy", "prompt_template")
#: Fields compared when a create is retried with the same exp_id (server-computed ones excluded).
IDEMPOTENT_FIELDS = tuple(name for name in WRITABLE_FIELDS if name not in ("delta_vs_best",))

ProgressCallback = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class RecordResult:
    """What recording a trial did: the stored trial, whether it was new, and the best."""

    trial: Trial
    created: bool
    best_before: Trial | None
    is_new_best: bool


@dataclass(frozen=True, slots=True)
class ImportReport:
    project: str
    rows: int
    warnings: tuple[str, ...] = ()


def walk_chain(start: str, by_id: Mapping[str, Trial]) -> list[Trial]:
    """Root-first chain from ``start`` by parent pointers.

    Stops at a missing parent and at the first repeated trial, so a cycle in stored data
    can never loop (fieldkit's ``chain_to`` has the same stopping rules).
    """
    chain: list[Trial] = []
    seen: set[str] = set()
    current: str | None = start
    while current and current not in seen:
        seen.add(current)
        trial = by_id.get(current)
        if trial is None:
            break
        chain.append(trial)
        current = trial.parent_exp or None
    chain.reverse()
    return chain


def find_cycle(parents: Mapping[str, str]) -> list[str] | None:
    """A cycle in ``exp_id -> parent_exp`` pointers, as the list of its ids, or None.

    Linear time: each id is walked at most once (colouring by walk number).
    """
    state: dict[str, int] = {}
    for walk, start in enumerate(parents):
        path: list[str] = []
        current: str | None = start
        while current and current in parents and current not in state:
            state[current] = walk
            path.append(current)
            current = parents[current] or None
        if current and state.get(current) == walk:
            return path[path.index(current):]
    return None


class Ledger:
    """The ledger on one database. Stateless beyond its engine: safe to run many of."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.store = Store(engine)

    @classmethod
    def open(cls, db: str | None = None, *, upgrade: bool = True) -> "Ledger":
        """Open ``db`` (path or URL; default ./lineage.db) and bring its schema to head."""
        engine = make_engine(db)
        if upgrade:
            migrate.upgrade(engine)
        return cls(engine)

    def close(self) -> None:
        self.engine.dispose()

    # -- projects -----------------------------------------------------------------------

    def create_project(self, slug: str, **options: Any) -> Project:
        """Create a project; ``options`` are :func:`new_project`'s."""
        with self.store.write() as conn:
            return self.store.insert_project(conn, new_project(slug, **options))

    def project(self, slug: str) -> Project:
        with self.store.read() as conn:
            return self.store.project(conn, slug)

    def projects(self) -> list[Project]:
        with self.store.read() as conn:
            return self.store.projects(conn)

    def update_project(self, slug: str, changes: Mapping[str, Any]) -> Project:
        unknown = set(changes) - set(PROJECT_FIELDS)
        if unknown:
            raise InvalidInput(sorted(unknown)[0], "is not a project field that can be changed")
        values = dict(changes)
        if "best_policy" in values:
            values["best_policy"] = _checked_policy(values["best_policy"])
        if "metric_name" in values:
            values["metric_name"] = _checked_metric_name(values["metric_name"])
        with self.store.write() as conn:
            project = self.store.project(conn, slug)
            return self.store.update_project(conn, project, values)

    # -- recording trials ---------------------------------------------------------------

    def record_trial(self, project_slug: str, fields: Mapping[str, Any]) -> RecordResult:
        """Record one trial, idempotently.

        ``exp_id`` omitted: the next free numeric id is allocated atomically. ``exp_id``
        already stored with the same fields: the stored trial comes back with
        ``created=False``. Stored with different fields: :class:`Conflict` with both.
        ``delta_vs_best`` is computed here from the best before this trial; a value the
        writer sent is ignored.
        """
        body = {k: v for k, v in fields.items() if k != "delta_vs_best"}
        proposed = trial_from_mapping(body, exp_id=body.get("exp_id") or "_")
        with self.store.write() as conn:
            project, next_seq, next_number = self.store.locked_project(conn, project_slug)
            if not body.get("exp_id"):
                proposed = proposed.with_changes(exp_id=next_exp_id(next_number - 1 if next_number else None))
            existing = self.store.find_trial(conn, project, proposed.exp_id)
            if existing is not None:
                return self._replayed(conn, project, existing, proposed)
            self._check_references(conn, project, proposed)
            best_before = self._best(conn, project)
            delta = metric_delta(proposed.core_metric, best_before.core_metric if best_before else None)
            stored = self.store.insert_trial(conn, project, proposed.with_changes(delta_vs_best=delta), seq=next_seq)
            exp_number = int(stored.exp_id) + 1 if stored.exp_id.isdigit() else 0
            self.store.advance_counters(conn, project, rows=1, exp_number=exp_number)
            return RecordResult(stored, True, best_before, self._beats_best(project, stored, best_before))

    def _replayed(self, conn: Connection, project: Project, existing: Trial, proposed: Trial) -> RecordResult:
        mine = {name: getattr(existing, name) for name in IDEMPOTENT_FIELDS}
        theirs = {name: getattr(proposed, name) for name in IDEMPOTENT_FIELDS}
        if _same_body(mine, theirs):
            return RecordResult(existing, False, None, False)
        differing = sorted(name for name in IDEMPOTENT_FIELDS if not _same_value(mine[name], theirs[name]))
        raise Conflict(
            f"trial {existing.exp_id!r} already exists in project {project.slug!r} with different "
            f"{', '.join(differing)}",
            field=differing[0],
            existing=existing.to_dict(),
            proposed=proposed.to_dict(),
        )

    def update_trial(self, project_slug: str, exp_id: str, changes: Mapping[str, Any]) -> Trial:
        """Change fields of a stored trial; ``delta_vs_best`` is recomputed, never taken."""
        unknown = set(changes) - set(WRITABLE_FIELDS)
        if unknown:
            raise InvalidInput(sorted(unknown)[0], "is not a trial field")
        if "exp_id" in changes and changes["exp_id"] != exp_id:
            raise InvalidInput("exp_id", "cannot be changed; record a new trial instead")
        with self.store.write() as conn:
            project, _, _ = self.store.locked_project(conn, project_slug)
            current = self.store.trial(conn, project, exp_id)
            values = {k: v for k, v in changes.items() if k not in ("delta_vs_best", "exp_id")}
            if "status" in values and not isinstance(values["status"], FailureLabel):
                values["status"] = FailureLabel.parse(str(values["status"]))
            for name in ("parent_exp", "baseline_exp", "notes", "hypothesis", "expected_delta"):
                if name in values and values[name] is None:
                    values[name] = ""
            updated = validate_trial(current.with_changes(**values))
            if updated.parent_exp != current.parent_exp or updated.baseline_exp != current.baseline_exp:
                self._check_references(conn, project, updated)
            best_before = self._best(conn, project, before_seq=current.seq)
            delta = metric_delta(updated.core_metric, best_before.core_metric if best_before else None)
            return self.store.update_trial(conn, project, updated.with_changes(delta_vs_best=delta))

    def _check_references(self, conn: Connection, project: Project, trial: Trial) -> None:
        for name in ("parent_exp", "baseline_exp"):
            ref = getattr(trial, name)
            if not ref or ref == trial.exp_id and name == "baseline_exp":
                continue
            if self.store.find_trial(conn, project, ref) is None:
                elsewhere = self.store.projects_holding(conn, ref)
                hint = f" (it is a trial of project {', '.join(map(repr, elsewhere))})" if elsewhere else ""
                raise InvalidInput(name, f"trial {ref!r} is not in project {project.slug!r}{hint}")
        if trial.parent_exp:
            ancestors = self.store.chain_rows(conn, project, trial.parent_exp)
            if trial.exp_id in ancestors:
                raise InvalidInput(
                    "parent_exp",
                    f"{trial.parent_exp!r} descends from {trial.exp_id!r}; that parent would make a cycle",
                )

    # -- lineage ------------------------------------------------------------------------

    def _best(self, conn: Connection, project: Project, *, before_seq: int | None = None) -> Trial | None:
        """The best scored eligible trial (no fallback): what deltas are measured against."""
        return self.store.best_scored(conn, project, before_seq=before_seq)

    def _current_best(self, conn: Connection, project: Project) -> Trial | None:
        """The project's best, falling back to its first trial when nothing eligible is scored."""
        return self._best(conn, project) or self.store.first_trial(conn, project)

    @staticmethod
    def _beats_best(project: Project, trial: Trial, best_before: Trial | None) -> bool:
        if trial.core_metric is None or trial.status.value not in project.best_policy.eligible_statuses():
            return False
        if best_before is None or best_before.core_metric is None:
            return True
        return is_better(trial.core_metric, best_before.core_metric, lower_is_better=project.lower_is_better)

    def best(self, project_slug: str) -> Trial | None:
        with self.store.read() as conn:
            return self._current_best(conn, self.store.project(conn, project_slug))

    def chain(self, project_slug: str, exp_id: str | None = None) -> list[Trial]:
        """Root-first chain to ``exp_id`` (default: to the current best)."""
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            if exp_id is None:
                best = self._current_best(conn, project)
                if best is None:
                    return []
                exp_id = best.exp_id
            else:
                self.store.trial(conn, project, exp_id)
            return walk_chain(exp_id, self.store.chain_rows(conn, project, exp_id))

    def trial(self, project_slug: str, exp_id: str) -> Trial:
        with self.store.read() as conn:
            return self.store.trial(conn, self.store.project(conn, project_slug), exp_id)

    def children(self, project_slug: str, exp_id: str) -> list[Trial]:
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            self.store.trial(conn, project, exp_id)
            return self.store.children(conn, project, exp_id)

    def list_trials(self, project_slug: str, **filters: Any) -> list[Trial]:
        with self.store.read() as conn:
            return self.store.list_trials(conn, self.store.project(conn, project_slug), **filters)

    # -- the session-start prompt ---------------------------------------------------------

    def prompt_view(self, project_slug: str, *, top_k: int = 20, recent_n: int = 30, last_m: int = 10) -> PromptView:
        """What the prompt shows, read in one transaction with indexed queries only."""
        return self._project_and_view(project_slug, top_k=top_k, recent_n=recent_n, last_m=last_m)[1]

    def _prompt_view(self, conn: Connection, project: Project, *, top_k: int, recent_n: int, last_m: int) -> PromptView:
        best = self._current_best(conn, project)
        if best is None:
            return PromptView(best=None, chain=(), top_kept=(), recent=(), recent_full=())
        chain = walk_chain(best.exp_id, self.store.chain_rows(conn, project, best.exp_id))
        recent = self.store.recent(conn, project, max(recent_n, last_m))
        return PromptView(
            best=best,
            chain=tuple(chain),
            top_kept=tuple(self.store.top_kept(conn, project, top_k)),
            recent=tuple(recent[-recent_n:]),
            recent_full=tuple(recent[-last_m:]),
        )

    def render_prompt(
        self,
        project_slug: str,
        *,
        specialist: str,
        top_k: int = 20,
        recent_n: int = 30,
        last_m: int = 10,
        timestamp: str = "",
    ) -> str:
        """The full session-start prompt; byte-identical to fieldkit's for its inputs."""
        project, view = self._project_and_view(project_slug, top_k=top_k, recent_n=recent_n, last_m=last_m)
        return render_prompt(view, specialist=specialist, timestamp=timestamp, metric_name=project.metric_name)

    def render_knowledge(self, project_slug: str, *, recent_n: int = 30, last_m: int = 10) -> str:
        """The KNOWLEDGE.md part of the prompt alone."""
        project, view = self._project_and_view(project_slug, top_k=0, recent_n=recent_n, last_m=last_m)
        return render_knowledge(view, metric_name=project.metric_name)

    def _project_and_view(self, project_slug: str, *, top_k: int, recent_n: int, last_m: int) -> tuple[Project, PromptView]:
        _check_window("top_k", top_k, minimum=0)
        _check_window("recent_n", recent_n, minimum=1)
        _check_window("last_m", last_m, minimum=1)
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            return project, self._prompt_view(conn, project, top_k=top_k, recent_n=recent_n, last_m=last_m)

    # -- files --------------------------------------------------------------------------

    def import_trials(
        self,
        project_slug: str,
        rows: Iterable[Trial],
        *,
        progress: ProgressCallback | None = None,
        locate: Callable[[int], int | None] | None = None,
        create_with: Mapping[str, Any] | None = None,
    ) -> ImportReport:
        """Insert parsed rows atomically: one bad row and nothing is stored.

        ``rows`` is consumed once, streaming. Rows keep the ``delta_vs_best`` their file
        had. An exp_id that is already stored, or parent pointers that form a cycle, fail
        the whole import; ``locate(row_index)`` gives the file line for the error.
        ``create_with``: create the project with these options if it does not exist, in
        the same transaction (a failed import leaves no empty project behind).
        """
        with self.store.write() as conn:
            try:
                project, first_seq, _ = self.store.locked_project(conn, project_slug)
            except NotFound:
                if create_with is None:
                    raise
                self.store.insert_project(conn, new_project(project_slug, **create_with))
                project, first_seq, _ = self.store.locked_project(conn, project_slug)
            existing = self.store.exp_ids(conn, project)
            parents = self.store.parents(conn, project) if existing else {}
            row_of: dict[str, int] = {}
            max_number = -1

            def checked() -> Iterator[Trial]:
                nonlocal max_number
                for index, trial in enumerate(rows):
                    if trial.exp_id in existing or trial.exp_id in row_of:
                        raise InvalidInput(
                            "exp_id",
                            f"{trial.exp_id!r} is already a trial of project {project.slug!r}",
                            line=locate(index) if locate else None,
                            column=1,
                        )
                    row_of[trial.exp_id] = index
                    parents[trial.exp_id] = trial.parent_exp
                    if trial.exp_id.isdigit():
                        max_number = max(max_number, int(trial.exp_id))
                    if progress is not None and index % 1000 == 999:
                        progress(index + 1)
                    yield trial

            count = self.store.bulk_insert(conn, project, checked(), first_seq=first_seq)
            cycle = find_cycle(parents)
            if cycle:
                first_new = min((row_of[i] for i in cycle if i in row_of), default=None)
                raise InvalidInput(
                    "parent_exp",
                    f"parent pointers form a cycle: {' -> '.join(cycle + cycle[:1])}",
                    line=locate(first_new) if locate and first_new is not None else None,
                )
            self.store.advance_counters(conn, project, rows=count, exp_number=max_number + 1)
            if progress is not None:
                progress(count)
        return ImportReport(project=project.slug, rows=count)

    def import_file(
        self,
        project_slug: str,
        stream: IO[str],
        *,
        fmt: str = "fieldkit",
        source: str = "<stream>",
        progress: ProgressCallback | None = None,
        create_with: Mapping[str, Any] | None = None,
    ) -> ImportReport:
        """Import a results file atomically; every error names its line and column."""
        from lineage.formats import get_format

        lines: list[int] = []
        rows = get_format(fmt).read_trials(stream, source=source, row_lines=lines)
        return self.import_trials(
            project_slug, rows, progress=progress, locate=lines.__getitem__, create_with=create_with
        )

    def stream_trials(self, project_slug: str) -> Iterator[Trial]:
        """Every trial of a project in insertion order, streamed from one read transaction."""
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            yield from self.store.stream_trials(conn, project)

    def dataframe(self, project_slug: str):  # type: ignore[no-untyped-def]
        """The project's trials as a pandas DataFrame (one row per trial, insertion order).

        ``extra`` is its JSON text, so the frame writes to CSV and Parquet as it is.
        """
        import json

        import pandas as pd

        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            frame = pd.read_sql(self.store.trials_select(project), conn)
        frame["extra"] = frame["extra"].map(lambda value: json.dumps(value or {}, ensure_ascii=False, sort_keys=True))
        return frame.set_index("exp_id", drop=False)

    def backup(self, target: str) -> None:
        if not self.store.sqlite:
            raise InvalidInput(
                "db",
                "online backup is built in for SQLite only; for PostgreSQL run "
                f"pg_dump --format=custom --file {target} '<database url>'",
            )
        self.store.backup_sqlite(target)


def new_project(
    slug: str,
    *,
    title: str = "",
    metric_name: str = "core_metric",
    lower_is_better: bool = True,
    best_policy: BestPolicy | str = BestPolicy.KEPT,
    prompt_template: str | None = None,
    source_format: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Project:
    """A validated, not yet stored, project."""
    return Project(
        slug=validate_slug(slug),
        title=title or slug,
        metric_name=_checked_metric_name(metric_name),
        lower_is_better=bool(lower_is_better),
        best_policy=_checked_policy(best_policy),
        prompt_template=prompt_template,
        source_format=source_format,
        settings=dict(settings or {}),
    )


def _checked_policy(value: BestPolicy | str) -> BestPolicy:
    try:
        return BestPolicy(value)
    except ValueError:
        known = ", ".join(p.value for p in BestPolicy)
        raise InvalidInput("best_policy", f"unknown policy {value!r}; known: {known}") from None


def _checked_metric_name(value: str) -> str:
    if not value or len(value) > 100 or any(c in value for c in "\t\r\n|"):
        raise InvalidInput("metric_name", "must be 1-100 characters without tabs, newlines or '|'")
    return value


def _check_window(name: str, value: int, *, minimum: int) -> None:
    if not isinstance(value, int) or value < minimum or value > 100_000:
        raise InvalidInput(name, f"must be an integer from {minimum} to 100000, got {value!r}")


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, FailureLabel) or isinstance(b, FailureLabel):
        return str(getattr(a, "value", a)) == str(getattr(b, "value", b))
    return a == b


def _same_body(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(_same_value(a[k], b[k]) for k in a)
