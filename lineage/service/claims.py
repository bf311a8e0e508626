"""Claims (``ledger.claims``): an agent reserves an idea before it runs it, and the frontier.

A claim is a running trial (:class:`lineage.domain.FailureLabel` ``running``) with an
owner and a heartbeat, recorded by :meth:`Claims.claim` in one write transaction with
the project locked, so concurrent claims (several servers on one PostgreSQL included)
are decided one after the other:

1. lapsed leases end first (:func:`lineage.leases.lapse`): a lapsed claim frees its idea;
2. the trial is recorded as ``running`` by the recording rules (exp_id, a parent left out
   is the branch tip, Idempotency-Key);
3. its near-duplicates are ranked by the rule of "was this tried?"'s ``similar_prior``
   (``lineage.similar``: the claim's hypothesis and notes as the query, scores of at
   least :data:`lineage.similar.PRIOR_THRESHOLD`): among the trials tried (the bounded
   ``similar_prior`` shortlist, running trials left out) and among every running claim of
   another owner (all of them: they are few, and an idea in flight must not be missed);
4. the project's setting :data:`DUPLICATE_SETTING` decides: ``warn`` (the default) keeps
   the claim and names the near-duplicates in its warnings; ``refuse`` refuses a claim
   close to another owner's running claim with a :class:`Conflict` naming that claim's
   exp_id and owner, and nothing is stored. A near-duplicate among the trials tried never
   refuses a claim (a repeat with another seed is a fair trial); it is only named;
5. the claim gets its owner, its lease (``lease_s``: its own, bounded by
   :func:`lineage.domain.check_claim_lease`; left out: the project's) and a heartbeat now
   (:meth:`lineage.store.leases.LeasesSql.beat`).

Heartbeats (:meth:`lineage.leases.Leases.heartbeat`) keep it; :meth:`Claims.finish`
records its result on it (the ledger's verdict rules, ``status: "auto"`` by default).
Both are for its holder alone (:func:`lineage.leases.check_holder`): another owner's
heartbeat or finish, or one for a claim already ended, is a :class:`Conflict` naming
the trial, its owner and its status, and nothing changes. :meth:`Claims.frontier` is the
shared view: the best, the branch tip and who is running what.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lineage import similar
from lineage.alerts import Alert, recent_alerts
from lineage.chain import current_best
from lineage.domain import FailureLabel, Lease, Project, Trial, check_claim_lease
from lineage.errors import Conflict, InvalidInput
from lineage.leases import check_holder, check_owner, lapse, settle
from lineage.service.record_modes import Counters
from lineage.service.recording import RecordingUses, Updated
from lineage.similar import Candidate, Similar
from lineage.store import Store
from lineage.store.base import utcnow

#: The project setting (``project.settings``) that decides what a duplicate claim gets.
DUPLICATE_SETTING = "duplicate_claims"
DUPLICATE_MODES = ("warn", "refuse")
DEFAULT_DUPLICATE_MODE = "warn"
#: The trial's other fields a claim may carry (the trainer client's plan), recorded as a
#: record would record them (``rerun_of``: the trial this one reruns, for the noise floor).
PLAN_FIELDS = (
    "exp_id",
    "timestamp",
    "specialist",
    "baseline_exp",
    "domain",
    "expected_delta",
    "job_name",
    "snapshot_path",
    "rerun_of",
)


def check_duplicate_mode(value: object) -> str:
    """``value`` if it is a duplicate-claims mode (:data:`DUPLICATE_MODES`)."""
    if value not in DUPLICATE_MODES:
        raise InvalidInput(DUPLICATE_SETTING, f"must be one of {', '.join(DUPLICATE_MODES)}")
    return str(value)


def duplicate_mode_of(project: Project) -> str:
    """The project's duplicate-claims mode (:data:`DUPLICATE_SETTING`, else ``warn``)."""
    value = project.settings.get(DUPLICATE_SETTING) if project.settings else None
    return DEFAULT_DUPLICATE_MODE if value is None else check_duplicate_mode(value)


@dataclass(frozen=True, slots=True)
class ClaimedDuplicate:
    """Another owner's running claim close to a new one: the trial as "was this tried?"
    ranks it, and who holds it."""

    similar: Similar
    owner: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.similar.to_dict(), "owner": self.owner}


@dataclass(frozen=True, slots=True)
class Claim:
    """What a claim gets back: the claimed trial (running) and its lease, whether this call
    stored it (False: the replay of an Idempotency-Key), its near-duplicates among the
    trials tried and among other owners' running claims, and warnings."""

    trial: Trial
    lease: Lease | None
    created: bool
    tried: tuple[Similar, ...] = ()
    running: tuple[ClaimedDuplicate, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "trial": self.trial.to_dict(),
            "lease": None if self.lease is None else self.lease.to_dict(),
            "created": self.created,
            "duplicates": {
                "tried": [item.to_dict() for item in self.tried],
                "running": [item.to_dict() for item in self.running],
            },
            "warnings": list(self.warnings),
        }


#: The title of the alert that keeps a refused duplicate claim ("... for OWNER").
REFUSED_TITLE = "duplicate claim refused"
#: Refused duplicate claims the frontier lists at most.
FRONTIER_REFUSED = 20


class _Refused(Conflict):
    """A duplicate claim refused (a :class:`Conflict`), with what the frontier keeps of it."""

    duplicate_of: str = ""
    owner: str = ""
    idea: str = ""


@dataclass(frozen=True, slots=True)
class Frontier:
    """Where the project's agents stand, read in one transaction: the best, the branch tip
    (what a trial without a parent forks from) and the running claims, oldest first."""

    best: Trial | None
    tip: Trial | None
    running: tuple[Lease, ...]
    #: the tip of every branch (a keep or baseline no later keep forked from), newest first
    tips: tuple[Trial, ...] = ()
    #: ideas refused as duplicates of a running claim, newest first (:data:`REFUSED_TITLE`
    #: alerts of the claim they duplicated)
    refused: tuple[Alert, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "best": None if self.best is None else self.best.to_dict(),
            "tip": None if self.tip is None else self.tip.to_dict(),
            "tips": [{"exp_id": t.exp_id, "core_metric": t.core_metric, "hypothesis": t.hypothesis} for t in self.tips],
            "running": [lease.to_dict() for lease in self.running],
            "refused": [
                {
                    "duplicate_of": a.exp_id,
                    "idea": a.text,
                    "owner": a.title.removeprefix(REFUSED_TITLE + " for "),
                    "at": a.created_at,
                }
                for a in self.refused
            ],
        }


def _checked_hypothesis(hypothesis: object) -> str:
    """A claim's hypothesis: text with words to compare (the rules of a search query)."""
    similar.checked_query(hypothesis, field="hypothesis")
    assert isinstance(hypothesis, str)
    return hypothesis


class Claims:
    """claim, frontier (who runs what alone: ``ledger.leases.running``)."""

    def __init__(self, store: Store, recording: RecordingUses) -> None:
        self.store = store
        self.recording = recording

    def claim(
        self,
        project_slug: str,
        hypothesis: str,
        *,
        owner: str,
        parent_exp: str | None = None,
        notes: str | None = None,
        extra: Mapping[str, Any] | None = None,
        lease_s: float | None = None,
        idempotency_key: str | None = None,
        plan: Mapping[str, Any] | None = None,
    ) -> Claim:
        """Claim an idea for ``owner``: record it as a running trial with its near-duplicates,
        or refuse it (the module's steps). ``parent_exp`` left out: the branch tip.
        ``lease_s``: how long the claim lives without a heartbeat (10 s to 24 h; left out:
        the project's lease). ``idempotency_key``: a retry of the same claim gets the same
        trial back. ``plan``: more of the trial's fields (:data:`PLAN_FIELDS`; None values
        left out), as a trainer plans its run."""
        if owner is None:
            raise InvalidInput("owner", "is required: who runs the claimed trial (a run id, an agent's name)")
        owner = check_owner(owner) or ""
        lease_s = check_claim_lease(lease_s)
        hypothesis = _checked_hypothesis(hypothesis)
        fields: dict[str, Any] = {"hypothesis": hypothesis, "status": FailureLabel.RUNNING.value}
        for name, value in (("parent_exp", parent_exp), ("notes", notes), ("extra", extra), *(plan or {}).items()):
            if name not in PLAN_FIELDS + ("parent_exp", "notes", "extra"):
                raise InvalidInput(name, f"is not a field a claim carries; known: {', '.join(PLAN_FIELDS)}")
            if value is not None:
                fields[name] = value
        asked = {**fields, "owner": owner, "lease_s": lease_s}  # what an Idempotency-Key compares
        try:
            with self.store.write() as conn:
                project, next_seq, next_number = self.store.projects.locked_project(conn, project_slug)
                lapse(self.store, conn, project)
                result = self.recording.record_locked(
                    conn,
                    project,
                    Counters(next_seq, next_number),
                    fields,
                    idempotency_key=idempotency_key,
                    similar_prior=True,  # stores its words' sketch: later claims find it however old
                    key_request=asked if idempotency_key is not None else None,
                )
                trial = result.trial
                if not result.created:  # a replay: the claim as it stands now
                    return Claim(trial, self.store.leases.lease(conn, project, trial.exp_id), False)
                tried, running = self._near_duplicates(conn, project, trial, owner)
                if running and duplicate_mode_of(project) == "refuse":
                    first = running[0]
                    refusal = _Refused(
                        f"the idea is claimed already: trial {first.similar.exp_id!r} by {first.owner!r} is running "
                        f"{first.similar.hypothesis!r} (closeness {first.similar.score:g}); this project refuses "
                        f"duplicate claims ({DUPLICATE_SETTING}: refuse)",
                        field="hypothesis",
                        existing=first.to_dict(),
                    )
                    refusal.duplicate_of, refusal.owner, refusal.idea = first.similar.exp_id, owner, hypothesis
                    raise refusal
                self.store.leases.beat(conn, project, trial.exp_id, owner=owner, at=utcnow(), lease_s=lease_s)
                warnings = list(result.warnings)
                warnings += [
                    f"trial {item.similar.exp_id} is running a close idea, claimed by {item.owner!r} "
                    f"(closeness {item.similar.score:g})"
                    for item in running
                ]
                warnings += [
                    f"trial {item.exp_id} tried a close idea ({item.status}, closeness {item.score:g})"
                    for item in tried
                ]
                return Claim(
                    trial, self.store.leases.lease(conn, project, trial.exp_id), True, tried, running, tuple(warnings)
                )
        except _Refused as refusal:
            self._note_refusal(project_slug, refusal)
            raise

    def _note_refusal(self, project_slug: str, refusal: _Refused) -> None:
        """Keep a refused duplicate claim (its write rolled back) where the frontier lists
        it: an info alert on the running claim it duplicated."""
        with self.store.write() as conn:
            project = self.store.projects.project(conn, project_slug)
            trial_id = self.store.telemetry.trial_row_id(conn, project, refusal.duplicate_of)
            self.store.alerts.insert_alert(
                conn,
                project.stored_id,
                trial_id,
                level="info",
                title=f"{REFUSED_TITLE} for {refusal.owner}"[:200],
                text=refusal.idea[:2000],
                step=None,
                wall_time=None,
            )
            self.store.progress.bump_revision(conn, project.stored_id)

    def finish(self, project_slug: str, exp_id: str, *, owner: str, changes: Mapping[str, Any]) -> Updated:
        """Record the result of ``owner``'s claim ``exp_id``: ``changes`` as a change of the
        trial (``ledger.recording.update_trial``'s rules; ``status`` left out: ``"auto"``,
        the ledger's verdict from ``core_metric``), in the transaction that checks the
        holder (:func:`lineage.leases.check_holder`: another owner's claim, or one no longer
        running, is a :class:`Conflict` and nothing changes). The finished trial
        (``.trial``) and its delta against the noise floor (``.noise``)."""
        if owner is None:
            raise InvalidInput("owner", "is required: the owner that claimed the trial")
        owner = check_owner(owner) or ""
        changes = {"status": "auto", **changes}
        if changes["status"] == FailureLabel.RUNNING.value:
            raise InvalidInput("status", "a finish records an outcome: 'auto', a keep/discard or a failure label")
        with self.store.write() as conn:
            project, _, _ = self.store.projects.locked_project(conn, project_slug)
            lapse(self.store, conn, project)  # a claim that lapsed before its finish stays ended
            trial = self.store.trials.trial(conn, project, exp_id)
            check_holder(trial, self.store.leases.holder(conn, project, exp_id) or "", owner, action="finish")
            return self.recording.update_locked(conn, project, trial, changes, judge_noise=True)

    def _near_duplicates(
        self, conn: Any, project: Project, trial: Trial, owner: str
    ) -> tuple[tuple[Similar, ...], tuple[ClaimedDuplicate, ...]]:
        """``trial``'s near-duplicates among the trials tried and other owners' running claims."""
        text, words = similar.prior_query(trial.hypothesis, trial.notes)
        if not words:
            return (), ()
        running_rows = [
            (row, held_by)
            for row, held_by in self.store.leases.running_candidates(conn, project)
            if row[1] != trial.exp_id and held_by != owner
        ]
        owners = {row[1]: held_by for row, held_by in running_rows}
        claimed = similar.rank(
            text,
            [Candidate(*row) for row, _ in running_rows],
            limit=max(len(running_rows), 1),
            min_score=similar.PRIOR_THRESHOLD,
            query_concepts=words,
        )
        shortlist = self.store.search.prior_rows(
            conn,
            project.stored_id,
            similar.sketch(words),
            recent=similar.PRIOR_RECENT,
            per_band=similar.PRIOR_PER_BAND,
        )
        done = [Candidate(*row) for row in shortlist if row[2] != FailureLabel.RUNNING.value]
        tried = similar.rank(
            text, done, limit=similar.PRIOR_LIMIT, min_score=similar.PRIOR_THRESHOLD, query_concepts=words
        )
        return tuple(tried), tuple(ClaimedDuplicate(item, owners[item.exp_id]) for item in claimed)

    def frontier(self, project_slug: str) -> Frontier:
        """The best, the branch tip and the running claims, read in one transaction."""
        settle(self.store, project_slug)
        with self.store.read() as conn:
            project = self.store.projects.project(conn, project_slug)
            refused = [
                alert
                for alert in recent_alerts(self.store, conn, project, 200)
                if alert.title.startswith(REFUSED_TITLE + " for ")
            ]
            return Frontier(
                current_best(self.store, conn, project),
                self.store.trials.tip(conn, project),
                tuple(self.store.leases.running(conn, project)),
                tuple(self.store.trials.branch_tips(conn, project)),
                tuple(refused[:FRONTIER_REFUSED]),
            )
