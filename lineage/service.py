"""The ledger's use-cases: what the CLI, the HTTP API, MCP and the pages all call.

Each rule lives in exactly one function here or in ``lineage.domain``: which trial is
the best, the chain to it, the next exp_id, ``delta_vs_best``, idempotent recording,
atomic imports. SQL stays in ``lineage.store``; rendering in ``lineage.render``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable, Iterator, Mapping, Sequence

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
from lineage import similar as similar_text
from lineage.similar import Candidate, Ranker, Similar
from lineage.store import Store
from lineage import guardrails, hooks, progress

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
    #: earlier trials close to this one (lineage.similar.PRIOR_THRESHOLD); new trials only
    similar_prior: tuple[Similar, ...] = ()


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
        if values.get("prompt_template") is not None:
            values["prompt_template"] = check_prompt_template(values["prompt_template"])
        if "title" in values:
            values["title"] = _checked_title(values["title"])
        with self.store.write() as conn:
            project = self.store.project(conn, slug)
            return self.store.update_project(conn, project, values)

    # -- recording trials ---------------------------------------------------------------

    def record_trial(
        self, project_slug: str, fields: Mapping[str, Any], *, idempotency_key: str | None = None,
        similar_prior: bool = False,
    ) -> RecordResult:
        """Record one trial, idempotently.

        ``exp_id`` omitted: the next free numeric id is allocated atomically. ``exp_id``
        already stored with the same fields: the stored trial comes back with
        ``created=False``. Stored with different fields: :class:`Conflict` with both.
        ``delta_vs_best`` is computed here from the best before this trial; a value the
        writer sent is ignored.

        ``idempotency_key``: the client's key for this creation, stored in the same
        transaction as the trial. A retry with the same key and the same fields gets the
        trial the first call stored (``created=False``), also when its exp_id was
        allocated; the same key with other fields is a :class:`Conflict` with both.

        ``similar_prior``: also find the earlier trials whose hypothesis and notes are
        close to the new trial's (``RecordResult.similar_prior``), in the same
        transaction, so they are exactly the trials recorded before it.
        """
        body = {k: v for k, v in fields.items() if k != "delta_vs_best"}
        proposed = trial_from_mapping(body, exp_id=body.get("exp_id") or "_")
        key_hash = _trial_body_hash(proposed, body.get("exp_id")) if idempotency_key is not None else ""
        with self.store.write() as conn:
            project, next_seq, next_number = self.store.locked_project(conn, project_slug)
            if idempotency_key is not None:
                keyed = self._keyed_replay(conn, project, _checked_key(idempotency_key), key_hash, proposed, body)
                if keyed is not None:
                    return keyed
            if not body.get("exp_id"):
                # above every numeric id stored so far, so it cannot be taken
                proposed = proposed.with_changes(exp_id=next_exp_id(next_number - 1 if next_number else None))
            else:
                existing = self.store.find_trial(conn, project, proposed.exp_id)
                if existing is not None:
                    replayed = self._replayed(conn, project, existing, proposed)
                    self._remember_key(conn, project, idempotency_key, key_hash, existing.exp_id)
                    return replayed
            self._check_references(conn, project, proposed)
            best_before = self._best(conn, project)
            delta = metric_delta(proposed.core_metric, best_before.core_metric if best_before else None)
            prior = self._similar_prior(conn, project, proposed) if similar_prior and next_seq else ()
            stored = self.store.insert_trial(conn, project, proposed.with_changes(delta_vs_best=delta), seq=next_seq)
            exp_number = int(stored.exp_id) + 1 if stored.exp_id.isdigit() else 0
            self.store.advance_counters(conn, project, rows=1, exp_number=exp_number)
            self._remember_key(conn, project, idempotency_key, key_hash, stored.exp_id)
            is_new_best = self._beats_best(project, stored, best_before)
            self._after_record(conn, project, stored, best_before, is_new_best, trial_count=next_seq + 1)
            return RecordResult(stored, True, best_before, is_new_best, prior)

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

    # -- "was this tried?" (lineage.similar: the text and ranking rules) ------------------

    def find_similar(
        self, project_slug: str, text: str, limit: int = 5, *, ranker: Ranker | None = None, field: str = "text",
    ) -> list[Similar]:
        """Past trials of the project closest to ``text`` (hypothesis and notes), best
        first, each with a score in [0, 1]; the rule is ``lineage.similar``'s docstring.

        ``ranker``: another scorer of the candidates (the seam for an embedding model).
        ``field``: the name bad input is reported under (``q`` on HTTP).
        """
        terms = similar_text.checked_query(text, field=field)
        limit = similar_text.checked_limit(limit)
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            return self._ranked_similar(conn, project, text, terms, limit=limit, ranker=ranker)

    def _ranked_similar(
        self, conn: Connection, project: Project, text: str, terms: Sequence[str], *, limit: int,
        min_score: float = similar_text.MIN_SCORE, ranker: Ranker | None = None,
        candidates: int = similar_text.CANDIDATES,
    ) -> list[Similar]:
        rows = self.store.candidate_rows(conn, project.id, terms, limit=candidates)
        return similar_text.rank(text, [Candidate(*row) for row in rows], limit=limit, min_score=min_score,
                                 ranker=ranker)

    def _similar_prior(self, conn: Connection, project: Project, trial: Trial) -> tuple[Similar, ...]:
        text = f"{trial.hypothesis}\n{trial.notes}"[:similar_text.MAX_QUERY_CHARS]
        terms = similar_text.query_terms(text)
        if not terms:
            return ()
        return tuple(self._ranked_similar(conn, project, text, terms, limit=similar_text.PRIOR_LIMIT,
                                          min_score=similar_text.PRIOR_THRESHOLD,
                                          candidates=similar_text.PRIOR_CANDIDATES))

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
            stored = self.store.update_trial(conn, project, updated.with_changes(delta_vs_best=delta))
            guardrails.reevaluate(self.store, conn, project, exp_id=exp_id)
            return stored

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
        chain = walk_chain(best.exp_id, self.store.chain_rows(conn, project, best.exp_id, brief=True))
        chain[-1:] = [best]  # the best itself in full
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
        project_changes: Mapping[str, Any] | None = None,
    ) -> ImportReport:
        """Insert parsed rows atomically: one bad row and nothing is stored.

        ``rows`` is consumed once, streaming. Rows keep the ``delta_vs_best`` their file
        had. An exp_id that is already stored, or parent pointers that form a cycle, fail
        the whole import; ``locate(row_index)`` gives the file line for the error.
        ``create_with``: create the project with these options if it does not exist, in
        the same transaction (a failed import leaves no empty project behind).
        ``project_changes``: columns of the project to set in the same transaction
        (``settings``, ``metric_name``; used by the results-file formats).
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
            guardrails.reevaluate(self.store, conn, project)
            if project_changes:
                self.store.update_project(conn, project, dict(project_changes))
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

        table_import = getattr(get_format(fmt), "import_file", None)
        if table_import is not None:  # a format that infers its columns (lineage.loops)
            return table_import(self, project_slug, stream, source=source, progress=progress, create_with=create_with)
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


    # -- read models for the web pages ---------------------------------------------------
    #
    # Each reads one transaction of bounded, indexed queries (see the ``Store`` methods
    # they call), so the pages of a 100,000-trial project stay fast.

    def overview(self, project_slug: str, *, bins: int = 60) -> "ProjectOverview":
        """A project with its best and its running best over time (for the index page)."""
        with self.store.read() as conn:
            return self._overview(conn, self.store.project(conn, project_slug), bins=bins)

    def overviews(self, *, bins: int = 60) -> "list[ProjectOverview]":
        with self.store.read() as conn:
            return [self._overview(conn, project, bins=bins) for project in self.store.projects(conn)]

    def _overview(self, conn: Connection, project: Project, *, bins: int) -> "ProjectOverview":
        latest = self.store.recent(conn, project, 1)
        return ProjectOverview(
            project=project,
            best=self._current_best(conn, project),
            latest=latest[0] if latest else None,
            running_best=tuple(self._running_best(conn, project, bins=bins)),
        )

    def _running_best(self, conn: Connection, project: Project, *, bins: int) -> list[tuple[int, float]]:
        """``(seq, best so far)`` at the start of each bin where the best changes."""
        width = _bin_width(project, bins)
        return _running_bins(self.store.best_per_bin(conn, project, width=width), width, project)

    def dashboard(
        self, project_slug: str, *, window: int = 1000, before_seq: int | None = None, recent_n: int = 20, bins: int = 200
    ) -> "Dashboard":
        """What the project dashboard shows: best, chain, counts, recent trials, and a
        window of ``window`` trials (the newest, or those before ``before_seq``) for the
        metric chart, with the running best through it."""
        _check_window("window", window, minimum=1)
        _check_window("recent_n", recent_n, minimum=1)
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            best = self._current_best(conn, project)
            chain = walk_chain(best.exp_id, self.store.chain_rows(conn, project, best.exp_id)) if best else []
            rows = self.store.metric_window(conn, project, before_seq=before_seq, limit=window)
            points = tuple(MetricPoint(*row) for row in rows)
            width = _bin_width(project, bins)
            per_bin = self.store.best_per_bin(conn, project, width=width)
            start_best = self._best_metric_before(conn, project, points[0].seq, per_bin, width) if points else None
            recent = self.store.recent(conn, project, recent_n)
            recent.reverse()
            return Dashboard(
                project=project,
                best=best,
                chain=tuple(chain),
                status_counts=self.store.status_counts(conn, project),
                recent=tuple(recent),
                window=points,
                window_running_best=tuple(_running(points, start_best, project)),
                has_earlier=bool(points) and points[0].seq > 0,
                running_best=tuple(_running_bins(per_bin, width, project)),
            )

    def _best_metric_before(
        self, conn: Connection, project: Project, seq: int, per_bin: list[tuple[int, float]], width: int
    ) -> float | None:
        """The best eligible metric among the trials before ``seq``: the bins wholly before
        it (already read) and the few trials of the bin it falls in (one index range)."""
        first = seq // width
        candidates = [metric for index, metric in per_bin if index < first]
        eligible = project.best_policy.eligible_statuses()
        partial = self.store.metric_window(conn, project, before_seq=seq, limit=seq - first * width) if seq > first * width else []
        candidates += [row[3] for row in partial if row[3] is not None and row[2] in eligible]
        if not candidates:
            return None
        return min(candidates) if project.lower_is_better else max(candidates)

    def trial_context(self, project_slug: str, exp_id: str, *, children_limit: int = 50) -> "TrialContext":
        """A trial with its parent, first children, chain from the root and neighbours."""
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            trial = self.store.trial(conn, project, exp_id)
            chain = walk_chain(exp_id, self.store.chain_rows(conn, project, exp_id))
            parent = chain[-2] if len(chain) > 1 and chain[-2].exp_id == trial.parent_exp else None
            best = self._current_best(conn, project)
            best_chain = (
                {t.exp_id for t in walk_chain(best.exp_id, self.store.chain_rows(conn, project, best.exp_id))}
                if best else set()
            )
            previous, following = self.store.neighbours(conn, project, trial.seq or 0)
            children = self.store.children_window(conn, project, [exp_id], limit=children_limit)[exp_id]
            return TrialContext(
                project=project,
                trial=trial,
                parent=parent,
                chain=tuple(chain),
                children=tuple(children),
                child_count=self.store.child_counts(conn, project, [exp_id]).get(exp_id, 0),
                best=best,
                on_best_chain=exp_id in best_chain,
                previous_id=previous,
                next_id=following,
            )

    def trials_by_ids(self, project_slug: str, exp_ids: Iterable[str]) -> "tuple[Project, list[Trial]]":
        """The project and those of ``exp_ids`` that are its trials, in the order asked;
        an unknown id raises :class:`NotFound`."""
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            found = self.store.trials_by_ids(conn, project, exp_ids)
            missing = [i for i in exp_ids if i not in found]
            if missing:
                raise NotFound("trial", f"{project.slug}/{missing[0]}", field="exp_id")
            return project, [found[i] for i in exp_ids]

    def tree_window(
        self,
        project_slug: str,
        *,
        root: str | None = None,
        focus: str | None = None,
        depth: int = 8,
        per_node: int = 25,
        budget: int = 400,
        offset: int = 0,
        orphan_scan_limit: int = 20_000,
    ) -> "TreeWindow":
        """A window of the lineage tree: from ``root`` (default: the top, trials without a
        parent) ``depth`` levels down, at most ``per_node`` children a node (the window
        root's from ``offset``) and ``budget`` nodes in all. The chain to the best and the
        path to ``focus`` are always included (``focus`` roots the window a few levels
        above it). Queries: one per level plus one count, each indexed."""
        for name, value in (("depth", depth), ("per_node", per_node), ("budget", budget)):
            _check_window(name, value, minimum=1)
        _check_window("offset", offset, minimum=0)
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            best = self._current_best(conn, project)
            best_chain = walk_chain(best.exp_id, self.store.chain_rows(conn, project, best.exp_id)) if best else []
            forced: dict[str, str] = {}  # parent -> child that must be shown
            for chain in (best_chain,):
                for parent, child in zip(chain, chain[1:]):
                    forced.setdefault(parent.exp_id, child.exp_id)
            focus_path: list[Trial] = []
            ancestors: list[Trial] = []
            if focus:
                self.store.trial(conn, project, focus)
                focus_path = walk_chain(focus, self.store.chain_rows(conn, project, focus))
                at = max(0, len(focus_path) - 1 - FOCUS_LEVELS_ABOVE)
                root = focus_path[at].exp_id if at > 0 else None
                ancestors = focus_path[:at] if at > 0 else []
                for parent, child in zip(focus_path, focus_path[1:]):
                    forced[parent.exp_id] = child.exp_id
            elif root:
                ancestors = walk_chain(root, self.store.chain_rows(conn, project, root))[:-1]
            root_trial = self.store.trial(conn, project, root) if root else None
            known: dict[str, Trial] = {t.exp_id: t for t in (*best_chain, *focus_path)}
            root_key = root or ""
            nodes: dict[str, TreeNode] = {}
            top: list[TreeNode] = []
            frontier = [root_key]
            shown = 0
            truncated = False
            for level in range(depth):
                if not frontier:
                    break
                # the forced path first, so it never runs out of budget
                frontier.sort(key=lambda i: (i not in forced, nodes[i].trial.seq if i in nodes else -1))
                expand: list[str] = []
                for parent_id in frontier:
                    if shown >= budget and parent_id not in forced:
                        truncated = True
                        continue
                    expand.append(parent_id)
                    shown += per_node
                page = self.store.children_window(
                    conn, project, expand, limit=per_node, offset=offset if level == 0 else 0
                )
                next_frontier: list[str] = []
                for parent_id in expand:
                    kids = page[parent_id]
                    # a later page of the window root's children shows just that page
                    must = forced.get(parent_id) if level or not offset else None
                    if must and all(k.exp_id != must for k in kids):
                        kid = known.get(must) or self.store.find_trial(conn, project, must)
                        if kid is not None:
                            kids = sorted([*kids, kid], key=lambda t: t.seq or 0)
                    made = [TreeNode(trial=kid) for kid in kids]
                    for node in made:
                        nodes[node.trial.exp_id] = node
                        next_frontier.append(node.trial.exp_id)
                    if parent_id == root_key:
                        top = made
                    else:
                        nodes[parent_id].children = made
                        nodes[parent_id].loaded = True
                frontier = next_frontier
            counts = self.store.child_counts(conn, project, [root_key, *nodes])
            for exp_id, node in nodes.items():
                node.child_count = counts.get(exp_id, 0)
            orphans: list[Trial] | None = None
            if not root and offset == 0:
                orphans = (
                    self.store.orphans(conn, project, limit=per_node)
                    if project.trial_count <= orphan_scan_limit else None
                )
            return TreeWindow(
                project=project,
                best=best,
                chain_ids=frozenset(t.exp_id for t in best_chain),
                focus_ids=frozenset(t.exp_id for t in focus_path),
                focus=focus,
                root=root_trial,
                ancestors=tuple(ancestors),
                nodes=top,
                top_count=counts.get(root_key, 0),
                offset=offset,
                per_node=per_node,
                depth=depth,
                truncated=truncated,
                orphans=tuple(orphans) if orphans is not None else None,
            )

    def trials_page(
        self,
        project_slug: str,
        *,
        sort: str = "seq",
        descending: bool = False,
        after: Sequence[Any] | None = None,
        limit: int = 50,
        count: bool = True,
        **filters: Any,
    ) -> "TrialsPage":
        """A page of the trials table (keyset pagination, see ``Store.page_trials``)."""
        if sort not in TRIAL_SORTS:
            raise InvalidInput("sort", f"unknown sort {sort!r}; known: {', '.join(TRIAL_SORTS)}")
        _check_window("limit", limit, minimum=1)
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            rows = self.store.page_trials(
                conn, project, sort=sort, descending=descending, after=after, limit=limit + 1, **filters
            )
            more = len(rows) > limit
            rows = rows[:limit]
            next_after: tuple[Any, ...] | None = None
            if more:
                last = rows[-1]
                next_after = {
                    "seq": (last.seq,),
                    "exp_id": (last.exp_id,),
                    "metric": (0 if last.core_metric is not None else 1, last.core_metric, last.seq),
                }[sort]
            unfiltered = not any(v not in (None, "", [], ()) for v in filters.values())
            total = (
                project.trial_count if unfiltered
                else self.store.count_matching(conn, project, **filters) if count else None
            )
            return TrialsPage(project=project, trials=tuple(rows), next_after=next_after, total=total)

    def iter_trials_page(self, project_slug: str, *, sort: str = "seq", descending: bool = False, **filters: Any) -> Iterator[Trial]:
        """Every trial matching ``filters`` in ``sort`` order, streamed a page at a time from
        one read transaction (the TSV export of a trials-table view)."""
        if sort not in TRIAL_SORTS:
            raise InvalidInput("sort", f"unknown sort {sort!r}; known: {', '.join(TRIAL_SORTS)}")
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            after: tuple[Any, ...] | None = None
            while True:
                rows = self.store.page_trials(
                    conn, project, sort=sort, descending=descending, after=after, limit=2_000, **filters
                )
                yield from rows
                if len(rows) < 2_000:
                    return
                last = rows[-1]
                after = {
                    "seq": (last.seq,),
                    "exp_id": (last.exp_id,),
                    "metric": (0 if last.core_metric is not None else 1, last.core_metric, last.seq),
                }[sort]

    def calibration(self, project_slug: str, *, limit: int = 10_000) -> "Calibration":
        """Expected vs observed delta of the last ``limit`` trials that state an expectation."""
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            rows = self.store.calibration_rows(conn, project, limit=limit)
        points: list[CalibrationPoint] = []
        unparsed = unobserved = 0
        for exp_id, specialist, expected_text, observed, status in reversed(rows):
            expected = parse_expected_delta(expected_text)
            if expected is None:
                unparsed += 1
            elif observed is None:
                unobserved += 1
            else:
                points.append(CalibrationPoint(exp_id, specialist, expected_text, expected, observed, status))
        return Calibration(project=project, points=tuple(points), unparsed=unparsed, unobserved=unobserved,
                           considered=len(rows), limit=limit)

    # -- tokens / telemetry / idempotency, and the reads of the HTTP API and MCP ---------
    #
    # Tokens are lineage.auth's and telemetry lineage.telemetry's (both over ``self.store``);
    # here: idempotency keys of trial creations, the ETag revision, project deletion, the
    # wrapped prompt, KNOWLEDGE.md as data, and the trials listing with opaque cursors.

    def _keyed_replay(
        self, conn: Connection, project: Project, key: str, key_hash: str, proposed: Trial, body: Mapping[str, Any]
    ) -> RecordResult | None:
        """The stored result of an earlier creation with ``key``; None when the key is new."""
        found = self.store.find_key(conn, project, "trial", key)
        if found is None:
            return None
        exp_id, stored_hash, _ = found
        existing = self.store.find_trial(conn, project, exp_id)
        if existing is None:  # trials are never deleted alone; treat the key as new
            return None
        if stored_hash == key_hash:
            return RecordResult(existing, False, None, False)
        described = proposed.to_dict()
        described["exp_id"] = body.get("exp_id") or None
        for name in ("seq", "created_at", "updated_at", "delta_vs_best"):
            described.pop(name, None)
        raise Conflict(
            f"Idempotency-Key {key!r} was used for trial {exp_id!r} with a different body",
            field="idempotency_key",
            existing=existing.to_dict(),
            proposed=described,
        )

    def _remember_key(self, conn: Connection, project: Project, key: str | None, key_hash: str, exp_id: str) -> None:
        if key is not None:
            self.store.claim_key(conn, project, "trial", key, exp_id=exp_id, body_hash=key_hash)

    def project_revision(self, project_slug: str) -> int:
        """The project's revision (bumped by every write): what ETags derive from."""
        with self.store.read() as conn:
            return self.store.project_revision(conn, project_slug)

    def delete_project(self, project_slug: str) -> None:
        """Delete a project with its trials, their telemetry and its idempotency keys."""
        with self.store.write() as conn:
            self.store.delete_project(conn, self.store.project(conn, project_slug))

    def prompt_document(
        self,
        project_slug: str,
        *,
        specialist: str,
        top_k: int = 20,
        recent_n: int = 30,
        last_m: int = 10,
        timestamp: str = "",
        wrap: bool = True,
        base_url: str | None = None,
    ) -> tuple[Project, str]:
        """The project (as read with the trials) and its session-start prompt.

        ``wrap=False``: exactly :meth:`render_prompt`'s text (``lineage prompt``'s bytes).
        ``wrap=True``: that text inside the project's ``prompt_template`` (default:
        ``templates/prompt_wrapper.md.j2``) with the next exp_id, the metric and its
        direction and how to record a trial (see :func:`wrap_prompt`).
        """
        _check_window("top_k", top_k, minimum=0)
        _check_window("recent_n", recent_n, minimum=1)
        _check_window("last_m", last_m, minimum=1)
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            view = self._prompt_view(conn, project, top_k=top_k, recent_n=recent_n, last_m=last_m)
            next_number = self.store.project_counters(conn, project)[1] if wrap else 0
            summary = self._summary(conn, project, last_n=progress.DEFAULT_LAST_N) if wrap else None
        text = render_prompt(view, specialist=specialist, timestamp=timestamp, metric_name=project.metric_name)
        if not wrap:
            return project, text
        return project, wrap_prompt(
            project, text, specialist=specialist, timestamp=timestamp, best=view.best, base_url=base_url,
            next_exp_id=next_exp_id(next_number - 1 if next_number else None), summary=summary,
        )

    # -- progress summary, guardrails and webhooks (issue 11) -------------------------------
    #
    # The rules are lineage.progress's (figures, trend), lineage.guardrails's (limits,
    # trips) and lineage.hooks's (events, the outbox); delivery is lineage.hook_delivery's.

    def summary(self, project_slug: str, *, last_n: int = progress.DEFAULT_LAST_N) -> "progress.Progress":
        """The project's progress summary with its guardrails, read in one transaction."""
        progress.check_last_n(last_n)
        with self.store.read() as conn:
            return self._summary(conn, self.store.project(conn, project_slug), last_n=last_n)

    def _summary(self, conn: Connection, project: Project, *, last_n: int) -> "progress.Progress":
        measured = progress.measure(self.store, conn, project, last_n=last_n)
        return measured.with_guardrails(guardrails.state(self.store, conn, project, measured))

    def _after_record(
        self, conn: Connection, project: Project, stored: Trial, best_before: Trial | None, is_new_best: bool,
        *, trial_count: int,
    ) -> None:
        """In a new trial's transaction: its events to the outbox and the guardrails' trips."""
        subscribed = hooks.subscriptions(self.store, conn, project)
        hooks.trial_events(self.store, conn, project, stored, best_before=best_before, is_new_best=is_new_best,
                           subscribed=subscribed)
        guardrails.after_trial(self.store, conn, project, stored, best=stored if is_new_best else best_before,
                               trial_count=trial_count, subscribed=subscribed)

    def guardrail_policy(self, project_slug: str) -> "guardrails.GuardrailPolicy":
        with self.store.read() as conn:
            return guardrails.policy(self.store, conn, self.store.project(conn, project_slug))

    def set_guardrails(self, project_slug: str, values: Mapping[str, Any]) -> "guardrails.GuardrailPolicy":
        """Replace the project's guardrail policy (a missing or null limit is off); a limit
        the project already reaches trips at once (and emits its event)."""
        guardrails.check_policy(values)
        with self.store.write() as conn:
            project, _, _ = self.store.locked_project(conn, project_slug)
            return guardrails.set_policy(self.store, conn, project, values)

    def add_hook(
        self, project_slug: str, url: str, *, events: Iterable[str] | None = None, body_format: str = "json"
    ) -> "tuple[hooks.Hook, str]":
        """Add a webhook; returns it and its signing secret (shown this once)."""
        hooks.check_url(url)
        with self.store.write() as conn:
            project = self.store.project(conn, project_slug)
            return hooks.add_hook(self.store, conn, project, url=url, events=events, body_format=body_format)

    def hooks(self, project_slug: str) -> "list[hooks.Hook]":
        with self.store.read() as conn:
            return hooks.list_hooks(self.store, conn, self.store.project(conn, project_slug))

    def remove_hook(self, project_slug: str, hook_id: int) -> None:
        """Remove a webhook with its outbox rows; :class:`NotFound` (field ``hook_id``)."""
        with self.store.write() as conn:
            project = self.store.project(conn, project_slug)
            if not self.store.delete_hook(conn, project.id, hook_id):
                raise NotFound("webhook", f"{project.slug}/{hook_id}", field="hook_id")

    def knowledge_document(self, project_slug: str, *, recent_n: int = 30, last_m: int = 10) -> tuple[Project, str]:
        """The project (as read with the trials) and its KNOWLEDGE.md text."""
        project, view = self._project_and_view(project_slug, top_k=0, recent_n=recent_n, last_m=last_m)
        return project, render_knowledge(view, metric_name=project.metric_name)

    def knowledge_data(self, project_slug: str, *, recent_n: int = 30) -> tuple[Project, "KnowledgeData"]:
        """What KNOWLEDGE.md says, as data: the best, the full chain to it (root first) and
        the last ``recent_n`` trials (oldest first), read in one transaction."""
        _check_window("recent_n", recent_n, minimum=1)
        with self.store.read() as conn:
            project = self.store.project(conn, project_slug)
            best = self._current_best(conn, project)
            chain = walk_chain(best.exp_id, self.store.chain_rows(conn, project, best.exp_id)) if best else []
            recent = self.store.recent(conn, project, recent_n)
        return project, KnowledgeData(best=best, chain=tuple(chain), recent=tuple(recent))

    def trials_query(
        self,
        project_slug: str,
        *,
        sort: str = "seq",
        descending: bool = False,
        cursor: str | None = None,
        limit: int = 100,
        count: bool = True,
        status: Sequence[str] | None = None,
        created_after: Any = None,
        created_before: Any = None,
        **filters: Any,
    ) -> "TrialsQuery":
        """A page of trials for the API and MCP: :meth:`trials_page` behind an opaque cursor.

        ``status`` values are checked labels; ``created_after``/``created_before`` are
        datetimes (naive means UTC); the other filters are ``Store._filter_sql``'s.
        """
        if sort not in TRIAL_SORTS:
            raise InvalidInput("sort", f"unknown sort {sort!r}; known: {', '.join(TRIAL_SORTS)}")
        statuses = [FailureLabel.parse(s).value for s in status] if status else None
        after = decode_cursor(cursor, sort=sort, descending=descending) if cursor else None
        for name, bound in (("created_after", created_after), ("created_before", created_before)):
            if bound is not None:
                filters[name] = self.store.db_time(bound)
        page = self.trials_page(
            project_slug, sort=sort, descending=descending, after=after, limit=limit, count=count,
            status=statuses, **filters,
        )
        next_cursor = encode_cursor(sort, descending, page.next_after) if page.next_after is not None else None
        return TrialsQuery(page=page, next_cursor=next_cursor)


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
        title=_checked_title(title or slug),
        metric_name=_checked_metric_name(metric_name),
        lower_is_better=bool(lower_is_better),
        best_policy=_checked_policy(best_policy),
        prompt_template=None if prompt_template is None else check_prompt_template(prompt_template),
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


# -- read models of the web pages ------------------------------------------------------------

#: Sort orders of the trials table (each walks an index).
TRIAL_SORTS = ("seq", "metric", "exp_id")
#: How many levels above a focused trial the tree window starts.
FOCUS_LEVELS_ABOVE = 3

_NUMBER = re.compile(r"[+\-\u2212]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+\-]?\d+)?")


def parse_expected_delta(text: str) -> float | None:
    """The number a writer put in ``expected_delta``: the first signed decimal in it.

    ``"+0.75 EM over turn-group"`` -> 0.75, ``"-0.001 bpb"`` -> -0.001, ``"−2%"`` -> -2.0
    (Unicode minus too); None when the text has no number or it is not finite.
    """
    match = _NUMBER.search(text or "")
    if match is None:
        return None
    value = float(match.group().replace("\u2212", "-"))
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class ProjectOverview:
    project: Project
    best: Trial | None
    #: the most recently recorded trial
    latest: Trial | None
    #: ``(seq, best so far)`` at each step of the running best, oldest first.
    running_best: tuple[tuple[int, float], ...]


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One trial in the metric chart: the few fields it draws."""

    seq: int
    exp_id: str
    status: str
    core_metric: float | None
    specialist: str
    delta_vs_best: float | None


def _bin_width(project: Project, bins: int) -> int:
    """Seqs per bin when a project's history is cut into ``bins`` bins."""
    return max(1, -(-project.trial_count // max(1, bins)))


def _running_bins(per_bin: Iterable[tuple[int, float]], width: int, project: Project) -> list[tuple[int, float]]:
    """``(seq, best so far)`` at the start of each bin where the best changes."""
    series: list[tuple[int, float]] = []
    for index, metric in per_bin:
        if not series or is_better(metric, series[-1][1], lower_is_better=project.lower_is_better):
            series.append((index * width, metric))
    return series


def _running(points: Iterable[MetricPoint], start: float | None, project: Project) -> Iterator[tuple[int, float]]:
    """``(seq, best so far)`` at each trial of ``points`` that moves the best (from ``start``)."""
    eligible = project.best_policy.eligible_statuses()
    current = start
    first = True
    for point in points:
        if first and current is not None:
            yield point.seq, current
        first = False
        if point.core_metric is None or point.status not in eligible:
            continue
        if current is None or is_better(point.core_metric, current, lower_is_better=project.lower_is_better):
            current = point.core_metric
            yield point.seq, current


@dataclass(frozen=True, slots=True)
class Dashboard:
    project: Project
    best: Trial | None
    chain: tuple[Trial, ...]
    status_counts: Mapping[str, int]
    #: newest first
    recent: tuple[Trial, ...]
    #: the metric chart's trials, oldest first
    window: tuple[MetricPoint, ...]
    #: ``(seq, best so far)`` through the window, starting with the best before it
    window_running_best: tuple[tuple[int, float], ...]
    has_earlier: bool
    #: the whole project's running best (binned), as in :class:`ProjectOverview`
    running_best: tuple[tuple[int, float], ...]


@dataclass(frozen=True, slots=True)
class TrialContext:
    project: Project
    trial: Trial
    parent: Trial | None
    #: root first, this trial last
    chain: tuple[Trial, ...]
    children: tuple[Trial, ...]
    child_count: int
    best: Trial | None
    on_best_chain: bool
    previous_id: str | None
    next_id: str | None


@dataclass(slots=True)
class TreeNode:
    trial: Trial
    children: list["TreeNode"] = field(default_factory=list)
    child_count: int = 0
    #: whether ``children`` were read (False at the window's depth or budget limit)
    loaded: bool = False


@dataclass(frozen=True, slots=True)
class TreeWindow:
    project: Project
    best: Trial | None
    chain_ids: frozenset[str]
    focus_ids: frozenset[str]
    focus: str | None
    #: the window's root trial; None for the top of the tree
    root: Trial | None
    #: root-first path to ``root`` (excluded)
    ancestors: tuple[Trial, ...]
    nodes: list[TreeNode]
    #: children of the window root (or top-level trials) in all
    top_count: int
    offset: int
    per_node: int
    depth: int
    truncated: bool
    #: trials whose parent is not in the project; None when the project is too big to look
    orphans: tuple[Trial, ...] | None


@dataclass(frozen=True, slots=True)
class TrialsPage:
    project: Project
    trials: tuple[Trial, ...]
    #: the keyset of the next page, None on the last one
    next_after: tuple[Any, ...] | None
    #: trials matching the filters, None when not counted
    total: int | None


@dataclass(frozen=True, slots=True)
class CalibrationPoint:
    exp_id: str
    specialist: str
    expected_text: str
    expected: float
    observed: float
    status: str


@dataclass(frozen=True, slots=True)
class Calibration:
    project: Project
    points: tuple[CalibrationPoint, ...]
    #: trials whose expected_delta holds no number
    unparsed: int
    #: trials with a numeric expectation but no observed delta_vs_best
    unobserved: int
    considered: int
    limit: int


# -- tokens / telemetry / idempotency, and the reads of the HTTP API and MCP -------------------

#: Longest idempotency key, in characters (printable ASCII without spaces).
MAX_IDEMPOTENCY_KEY = 255
#: Longest prompt template a project may hold, in characters.
MAX_PROMPT_TEMPLATE = 65_536
#: Where the default prompt wrapper lives (in ``lineage.templates``).
DEFAULT_PROMPT_TEMPLATE_FILE = "prompt_wrapper.md.j2"


@dataclass(frozen=True, slots=True)
class KnowledgeData:
    best: Trial | None
    #: root first, the best last
    chain: tuple[Trial, ...]
    #: oldest first
    recent: tuple[Trial, ...]


@dataclass(frozen=True, slots=True)
class TrialsQuery:
    page: "TrialsPage"
    #: the opaque cursor of the next page, None on the last one
    next_cursor: str | None


#: Longest project title (the column is 300 characters wide).
MAX_TITLE = 300


def _checked_title(title: str) -> str:
    if not isinstance(title, str) or len(title) > MAX_TITLE or "\x00" in title:
        raise InvalidInput("title", f"must be text of at most {MAX_TITLE} characters without NUL")
    return title


def _checked_key(key: str) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY or not all("!" <= c <= "~" for c in key):
        raise InvalidInput(
            "idempotency_key", f"must be 1-{MAX_IDEMPOTENCY_KEY} printable ASCII characters without spaces"
        )
    return key


def _trial_body_hash(proposed: Trial, exp_id: str | None) -> str:
    """SHA-256 of what a creation asks for: the fields compared on a replay, with every
    omitted field at its default, so two requests for the same trial hash alike."""
    import hashlib
    import json

    values = [exp_id or ""]
    for name in IDEMPOTENT_FIELDS:
        if name == "exp_id":
            continue
        value = getattr(proposed, name)
        values.append(value.value if isinstance(value, FailureLabel) else dict(value) if name == "extra" else value)
    text = json.dumps(values, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# The prompt wrapper ------------------------------------------------------------------------------


def _template_environment():  # type: ignore[no-untyped-def]
    """The Jinja2 environment of prompt templates: sandboxed (templates come from API
    users), no autoescaping (the output is Markdown), trailing newline kept."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        _ENVIRONMENT = ImmutableSandboxedEnvironment(autoescape=False, keep_trailing_newline=True)
    return _ENVIRONMENT


_ENVIRONMENT = None
_COMPILED: dict[str, Any] = {}


def _compiled(source: str):  # type: ignore[no-untyped-def]
    """The compiled template of ``source`` (a pure function of the text, so caching it is
    safe across projects and server instances)."""
    template = _COMPILED.get(source)
    if template is None:
        if len(_COMPILED) >= 64:
            _COMPILED.clear()
        template = _COMPILED[source] = _template_environment().from_string(source)
    return template


def default_prompt_template() -> str:
    """The text of ``templates/prompt_wrapper.md.j2``, the wrapper of projects without one."""
    global _DEFAULT_TEMPLATE
    if _DEFAULT_TEMPLATE is None:
        from importlib.resources import files

        _DEFAULT_TEMPLATE = files("lineage.templates").joinpath(DEFAULT_PROMPT_TEMPLATE_FILE).read_text(encoding="utf-8")
    return _DEFAULT_TEMPLATE


_DEFAULT_TEMPLATE: str | None = None


def check_prompt_template(source: str) -> str:
    """``source`` if it is a prompt template that compiles and renders; else
    :class:`InvalidInput` (field ``prompt_template``, with the line of a syntax error)."""
    if not isinstance(source, str):
        raise InvalidInput("prompt_template", "must be text")
    if len(source) > MAX_PROMPT_TEMPLATE:
        raise InvalidInput("prompt_template", f"is {len(source)} characters long; the limit is {MAX_PROMPT_TEMPLATE}")
    from jinja2 import TemplateSyntaxError

    try:
        _compiled(source)
    except TemplateSyntaxError as exc:
        raise InvalidInput("prompt_template", f"is not a valid Jinja2 template: {exc.message}", line=exc.lineno) from None
    sample = Project(slug="sample", title="Sample", metric_name="core_metric")
    wrap_prompt(sample, "# Session start\n", specialist="s", timestamp="", next_exp_id="001",
                best=Trial(exp_id="000", core_metric=1.0), base_url=None, source=source)
    return source


def wrap_prompt(
    project: Project,
    prompt: str,
    *,
    specialist: str,
    timestamp: str,
    next_exp_id: str,
    best: Trial | None,
    base_url: str | None,
    source: str | None = None,
    summary: "progress.Progress | None" = None,
) -> str:
    """The prompt inside the project's template (``source`` overrides it).

    The template sees: ``prompt`` (the lineage prompt, verbatim), ``project`` (slug,
    title, metric_name, lower_is_better, direction ``"lower"``/``"higher"``,
    best_policy, revision, trial_count), ``specialist``, ``timestamp``, ``next_exp_id``,
    ``best`` (the best trial's fields, or None), ``statuses`` (the labels),
    ``base_url``, ``record_url`` (where to POST a trial) and ``curl_example`` (a
    complete, shell-safe command that records a trial); ``progress`` (the short form of
    the progress summary, ``lineage.progress.Progress.short_text``; "" without
    ``summary``), ``trend`` and ``guardrails_tripped`` (a message per tripped guardrail).
    """
    import json
    from urllib.parse import quote

    root = (base_url or "$LINEAGE_URL").rstrip("/")
    record_url = f"{root}/api/v1/projects/{quote(project.slug, safe='')}/trials"
    example: dict[str, Any] = {"exp_id": next_exp_id}
    if best is not None:
        example["parent_exp"] = best.exp_id
    example.update(specialist=specialist, hypothesis="<what you changed and why>",
                   expected_delta="<e.g. -0.002 on " + project.metric_name + ">", status="keep", core_metric=None,
                   notes="")
    body = json.dumps(example, indent=2, ensure_ascii=False)
    curl_example = (
        f'curl -sS -X POST "{record_url}" \\\n'
        '  -H "Authorization: Bearer $LINEAGE_TOKEN" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        '  -H "Idempotency-Key: $(uuidgen)" \\\n'
        "  --data-binary @- <<'JSON'\n"
        f"{body}\nJSON"
    )
    context = {
        "prompt": prompt,
        "project": {
            "slug": project.slug, "title": project.title, "metric_name": project.metric_name,
            "lower_is_better": project.lower_is_better, "direction": "lower" if project.lower_is_better else "higher",
            "best_policy": project.best_policy.value, "revision": project.revision, "trial_count": project.trial_count,
        },
        "specialist": specialist,
        "timestamp": timestamp,
        "next_exp_id": next_exp_id,
        "best": best.to_dict() if best is not None else None,
        "statuses": [label.value for label in FailureLabel],
        "base_url": root,
        "record_url": record_url,
        "curl_example": curl_example,
        "progress": summary.short_text() if summary is not None else "",
        "trend": summary.trend if summary is not None else None,
        "guardrails_tripped": [t["message"] for t in ((summary.guardrails or {}).get("tripped", ()) if summary else ())],
    }
    text = source if source is not None else (project.prompt_template or default_prompt_template())
    try:
        return _compiled(text).render(context)
    except Exception as exc:  # a user's template: any failure is theirs to fix
        raise InvalidInput("prompt_template", f"fails to render: {type(exc).__name__}: {exc}") from None


# Cursors of the trials listing ---------------------------------------------------------------


def encode_cursor(sort: str, descending: bool, after: Sequence[Any]) -> str:
    """An opaque cursor: the keyset of the last row and the order it belongs to."""
    import base64
    import json

    raw = json.dumps({"s": sort, "d": bool(descending), "a": list(after)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, *, sort: str, descending: bool) -> tuple[Any, ...]:
    """The keyset in ``cursor``; :class:`InvalidInput` (field ``cursor``) for a cursor
    this server did not make, or one made for another sort order."""
    import base64
    import binascii
    import json

    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
        made_sort, made_desc, after = data["s"], data["d"], data["a"]
    except (binascii.Error, ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise InvalidInput("cursor", "is not a cursor of this listing; start again without it") from None
    if made_sort != sort or made_desc != descending:
        order = "descending" if made_desc else "ascending"
        raise InvalidInput("cursor", f"was made for sort={made_sort!r} ({order}); ask with the same order")
    shapes = {"seq": (int,), "exp_id": (str,), "metric": (int, (float, int, type(None)), int)}
    shape = shapes[sort]
    if (not isinstance(after, list) or len(after) != len(shape)
            or not all(isinstance(v, t) and not isinstance(v, bool) for v, t in zip(after, shape))
            or not all(-(2**63) <= v < 2**63 for v in after if isinstance(v, int))
            or not all(math.isfinite(v) for v in after if isinstance(v, float))):
        raise InvalidInput("cursor", "is not a cursor of this listing; start again without it")
    return tuple(after)
