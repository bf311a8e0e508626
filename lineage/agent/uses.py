"""Agent (``ledger.agent``): what an agent reads and is told, and the loop's health it acts on.

Owns: the session-start prompt (:meth:`Agent.prompt_view`, ``render_prompt``,
``prompt_document``: fieldkit's text or the loop's own, :mod:`lineage.agent.loop_render`,
with the wrapper of :mod:`lineage.agent.prompt`, which lists the newest alerts of the
training code, :mod:`lineage.alerts`, and the best notes of the notebook,
:mod:`lineage.notebook`), KNOWLEDGE.md as
text and as data, "was this tried?" (:meth:`Agent.find_similar`; the text and ranking
rules are :mod:`lineage.similar`'s), the progress summary, guardrail policies and webhooks
(the rules are :mod:`lineage.monitor`'s).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from lineage import similar as similar_text
from lineage.agent.knob_section import knobs_tried_lines
from lineage.agent.loop_render import (
    CHAIN_SHOWN,
    LoopView,
    loop_columns,
    loop_statuses,
    render_loop_prompt,
)
from lineage.agent.prompt import PROMPT_FACES, wrap_prompt
from lineage.agent.reading import PRECISION_SAMPLE, metric_decimals
from lineage.agent.render import PromptView, render_knowledge, render_prompt
from lineage.alerts import recent_alerts
from lineage.chain import chain_to, current_best, walk_chain
from lineage.domain import Project, Trial, check_window, next_exp_id
from lineage.errors import InvalidInput, NotFound
from lineage.leases import settle
from lineage.loops.importing import layout_of
from lineage.monitor import guardrails, hooks, progress
from lineage.notebook import prompt_notes
from lineage.similar import Candidate, Ranker, Similar
from lineage.store import Store

if TYPE_CHECKING:
    from lineage.service.knobs import Knobs

#: alerts of the training code the wrapped prompt lists (the newest)
PROMPT_ALERTS = 5


@dataclass(frozen=True, slots=True)
class KnowledgeData:
    best: Trial | None
    #: root first, the best last
    chain: tuple[Trial, ...]
    #: oldest first
    recent: tuple[Trial, ...]

    def to_dict(self, project: Project) -> dict[str, Any]:
        """KNOWLEDGE.md as JSON, as every face answers it (``project`` as read with it)."""
        return {
            "project": project.slug,
            "revision": project.revision,
            "metric_name": project.metric_name,
            "lower_is_better": project.lower_is_better,
            "best": self.best.to_dict() if self.best is not None else None,
            "chain": [t.to_dict() for t in self.chain],
            "recent": [t.to_dict() for t in self.recent],
        }


#: How the prompt is written (``prompt_document``'s ``style``; ``format`` on the faces).
PROMPT_STYLES = ("auto", "fieldkit", "loop")


class Agent:
    """prompt_view, render_prompt, render_knowledge, prompt_document, knowledge_document,
    knowledge_data, find_similar, metric_decimals, summary, guardrail_policy, set_guardrails,
    add_hook, hooks, remove_hook."""

    def __init__(self, store: Store, knobs: Knobs | None = None) -> None:
        self.store = store
        #: the knobs part (``ledger.knobs``), for the prompt's "Knobs tried"; None: none shown
        self.knobs = knobs

    def prompt_view(self, project_slug: str, *, top_k: int = 20, recent_n: int = 30, last_m: int = 10) -> PromptView:
        """What the prompt shows, read in one transaction with indexed queries only."""
        return self._project_and_view(project_slug, top_k=top_k, recent_n=recent_n, last_m=last_m)[1]

    def _prompt_view(self, conn: Connection, project: Project, *, top_k: int, recent_n: int, last_m: int) -> PromptView:
        best = current_best(self.store, conn, project)
        if best is None:
            return PromptView(best=None, chain=(), top_kept=(), recent=(), recent_full=())
        chain = chain_to(self.store, conn, project, best.exp_id, brief=True)
        chain[-1:] = [best]  # the best itself in full
        recent = self.store.trials.recent(conn, project, max(recent_n, last_m))
        return PromptView(
            best=best,
            chain=tuple(chain),
            top_kept=tuple(self.store.trials.top_kept(conn, project, top_k)),
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

    def _project_and_view(
        self, project_slug: str, *, top_k: int, recent_n: int, last_m: int
    ) -> tuple[Project, PromptView]:
        _check_prompt_windows(top_k, recent_n, last_m)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            return project, self._prompt_view(conn, project, top_k=top_k, recent_n=recent_n, last_m=last_m)

    def prompt_document(
        self,
        project_slug: str,
        *,
        specialist: str = "",
        top_k: int = 20,
        recent_n: int = 30,
        last_m: int = 10,
        timestamp: str = "",
        wrap: bool = True,
        base_url: str | None = None,
        face: str = "http",
        style: str = "auto",
    ) -> tuple[Project, str]:
        """The project (as read with the trials) and its session-start prompt.

        ``style``: ``fieldkit`` is :meth:`render_prompt`'s text, byte-identical to
        fieldkit's (``lineage prompt``'s bytes); ``loop`` is the loop's own sections
        (``lineage.agent.loop_render``: commits, the file's columns, diff sizes, the loop's
        status words, no empty columns); ``auto`` (default) is ``fieldkit`` for a project
        not fed by a results file when a ``specialist`` is given, else ``loop``.

        ``wrap=False``: that text alone. ``wrap=True``: inside the project's
        ``prompt_template`` (default: ``templates/prompt_wrapper.md.j2``) with the next
        exp_id, the metric and its direction and how to record a trial, as fits how the
        project is fed (a watched results file: append the row) and ``face``, the face
        asking (``mcp``: the record_trial tool; ``http``: a POST with an Idempotency-Key;
        ``cli``: ``lineage record``) (see :func:`wrap_prompt`).
        """
        _check_prompt_windows(top_k, recent_n, last_m)
        if style not in PROMPT_STYLES:
            raise InvalidInput("format", f"must be one of {', '.join(PROMPT_STYLES)}, got {style!r}")
        if face not in PROMPT_FACES:
            raise InvalidInput("face", f"must be one of {', '.join(PROMPT_FACES)}, got {face!r}")
        settle(self.store, project_slug)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            layout = layout_of(project)
            fieldkit = style == "fieldkit" or (style == "auto" and layout is None and bool(specialist))
            if fieldkit:
                view = self._prompt_view(conn, project, top_k=top_k, recent_n=recent_n, last_m=last_m)
                best = view.best
                text = render_prompt(view, specialist=specialist, timestamp=timestamp, metric_name=project.metric_name)
            else:
                loop = self._loop_view(conn, project, layout, top_k=top_k, recent_n=recent_n, last_m=last_m)
                best = loop.best
                text = render_loop_prompt(loop, specialist=specialist, timestamp=timestamp)
            if not wrap:
                return project, text
            next_number = self.store.projects.project_counters(conn, project)[1]
            summary = self._summary(conn, project, last_n=progress.DEFAULT_LAST_N)
            alerts = recent_alerts(self.store, conn, project, PROMPT_ALERTS)
            notes, notes_total = prompt_notes(self.store, conn, project, best.exp_id if best is not None else None)
            tokens = self.store.tokens.active_token_exists(conn)
            running = self.store.leases.running(conn, project)
            tip = self.store.trials.tip(conn, project)
            knobs = self.knobs.knobs_in(conn, project.stored_id)["knobs"] if self.knobs is not None else []
        knobs_tried = knobs_tried_lines(knobs, best.exp_id if best is not None else None)
        return project, wrap_prompt(
            project,
            text,
            specialist=specialist,
            timestamp=timestamp,
            best=best,
            tip=tip,
            base_url=base_url,
            next_exp_id=next_exp_id(next_number - 1 if next_number else None),
            summary=summary,
            alerts=alerts,
            notes=notes,
            notes_total=notes_total,
            face=face,
            layout=layout,
            tokens=tokens,
            running=running,
            knobs_tried=knobs_tried,
        )

    def _loop_view(
        self, conn: Connection, project: Project, layout: Any, *, top_k: int, recent_n: int, last_m: int
    ) -> LoopView:
        columns = loop_columns(layout)
        best = current_best(self.store, conn, project)
        if best is None:
            return LoopView(project, None, (), False, (), (), 0, columns, (), project.trial_count)
        tail = walk_chain(best.exp_id, self.store.trials.chain_tail(conn, project, best.exp_id, CHAIN_SHOWN + 1))
        chain = tuple(tail[-CHAIN_SHOWN:])
        earlier = len(tail) > CHAIN_SHOWN  # more links before these (not counted: the walk stops here)
        recent = self.store.trials.recent(conn, project, recent_n, lean=True)
        top = self.store.trials.top_kept(conn, project, top_k, lean=True)
        seen = [t.status.value for t in (*chain, *recent, *top)]
        return LoopView(
            project=project,
            best=chain[-1] if chain else best,
            chain=chain,
            earlier=earlier,
            top_kept=tuple(top),
            recent=tuple(recent),
            full=min(last_m, len(recent)),
            columns=columns,
            statuses=loop_statuses(seen, columns),
            trial_count=project.trial_count,
        )

    def knowledge_document(self, project_slug: str, *, recent_n: int = 30, last_m: int = 10) -> tuple[Project, str]:
        """The project (as read with the trials) and its KNOWLEDGE.md text."""
        project, view = self._project_and_view(project_slug, top_k=0, recent_n=recent_n, last_m=last_m)
        return project, render_knowledge(view, metric_name=project.metric_name)

    def knowledge_data(self, project_slug: str, *, recent_n: int = 30) -> tuple[Project, KnowledgeData]:
        """What KNOWLEDGE.md says, as data: the best, the full chain to it (root first) and
        the last ``recent_n`` trials (oldest first), read in one transaction."""
        check_window("recent_n", recent_n, minimum=1)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            best = current_best(self.store, conn, project)
            chain = chain_to(self.store, conn, project, best.exp_id) if best else []
            recent = self.store.trials.recent(conn, project, recent_n)
        return project, KnowledgeData(best=best, chain=tuple(chain), recent=tuple(recent))

    # -- "was this tried?" ---------------------------------------------------------------

    def find_similar(
        self,
        project_slug: str,
        text: str,
        limit: int = 5,
        *,
        ranker: Ranker | None = None,
        field: str = "text",
    ) -> list[Similar]:
        """Past trials of the project closest to ``text`` (hypothesis and notes), best
        first, each with a score in [0, 1]; the rule is ``lineage.similar``'s docstring.

        ``ranker``: another scorer of the candidates (the seam for an embedding model).
        ``field``: the name bad input is reported under (``q`` on HTTP).
        """
        terms = similar_text.checked_query(text, field=field)
        limit = similar_text.checked_limit(limit)
        settle(self.store, project_slug)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            return self._ranked_similar(conn, project, text, terms, limit=limit, ranker=ranker)

    def _ranked_similar(
        self,
        conn: Connection,
        project: Project,
        text: str,
        terms: Sequence[str],
        *,
        limit: int,
        min_score: float = similar_text.MIN_SCORE,
        ranker: Ranker | None = None,
        candidates: int = similar_text.CANDIDATES,
    ) -> list[Similar]:
        rows = self.store.search.candidate_rows(conn, project.stored_id, terms, limit=candidates)
        return similar_text.rank(
            text, [Candidate(*row) for row in rows], limit=limit, min_score=min_score, ranker=ranker
        )

    # -- the loop's health: progress summary, guardrails, webhooks (rules: lineage.monitor) --

    def metric_decimals(self, project_slug: str) -> int | None:
        """The precision of the project's metrics, which agents' answers are written at
        (:func:`lineage.agent.reading.metric_decimals`); None: nothing scored yet."""
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            return metric_decimals(self.store.columns.recent_metrics(conn, project.stored_id, PRECISION_SAMPLE))

    def summary(self, project_slug: str, *, last_n: int = progress.DEFAULT_LAST_N) -> progress.Progress:
        """The project's progress summary with its guardrails, read in one transaction."""
        progress.check_last_n(last_n)
        settle(self.store, project_slug)
        with self.store.read() as conn:
            return self._summary(conn, self.store.projects.project(conn, project_slug), last_n=last_n)

    def _summary(self, conn: Connection, project: Project, *, last_n: int) -> progress.Progress:
        measured = progress.measure(self.store, conn, project, last_n=last_n)
        return measured.with_guardrails(guardrails.state(self.store, conn, project, measured))

    def guardrail_policy(self, project_slug: str) -> guardrails.GuardrailPolicy:
        with self.store.read() as conn:
            return guardrails.policy(self.store, conn, self.store.projects.project(conn, project_slug))

    def set_guardrails(self, project_slug: str, values: Mapping[str, Any]) -> guardrails.GuardrailPolicy:
        """Replace the project's guardrail policy (a missing or null limit is off); a limit
        the project already reaches trips at once (and emits its event)."""
        guardrails.check_policy(values)
        with self.store.write() as conn:
            project, _, _ = self.store.projects.locked_project(conn, project_slug)
            return guardrails.set_policy(self.store, conn, project, values)

    def add_hook(
        self, project_slug: str, url: str, *, events: Iterable[str] | None = None, body_format: str = "json"
    ) -> tuple[hooks.Hook, str]:
        """Add a webhook; returns it and its signing secret (shown this once)."""
        hooks.check_url(url)
        with self.store.write() as conn:
            project = self.store.projects.project(conn, project_slug)
            return hooks.add_hook(self.store, conn, project, url=url, events=events, body_format=body_format)

    def hooks(self, project_slug: str) -> list[hooks.Hook]:
        with self.store.read() as conn:
            return hooks.list_hooks(self.store, conn, self.store.projects.project(conn, project_slug))

    def remove_hook(self, project_slug: str, hook_id: int) -> None:
        """Remove a webhook with its outbox rows; :class:`NotFound` (field ``hook_id``)."""
        with self.store.write() as conn:
            project = self.store.projects.project(conn, project_slug)
            if not self.store.outbox.delete_hook(conn, project.stored_id, hook_id):
                raise NotFound("webhook", f"{project.slug}/{hook_id}", field="hook_id")


def _check_prompt_windows(top_k: int, recent_n: int, last_m: int) -> None:
    check_window("top_k", top_k, minimum=0)
    check_window("recent_n", recent_n, minimum=1)
    check_window("last_m", last_m, minimum=1)
