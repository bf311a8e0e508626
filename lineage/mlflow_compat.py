"""MLflow's tracking API over the ledger: the mapping rules, in one place.

Every client that speaks MLflow's REST API (``mlflow.log_*``, transformers'
``report_to="mlflow"``, verl's ``trainer.logger=[mlflow]``, accelerate's MLflow tracker)
logs into the ledger through ``MLFLOW_TRACKING_URI`` alone. The HTTP face is
``api.routes.mlflow``; the rules are here:

* **An experiment is a project.** Its id is the project's slug. A name becomes a slug by
  :func:`experiment_slug` (lower case; every run of other characters than ``a-z0-9``
  becomes one ``-``; at most 64 characters, MLflow's limit on an experiment id); the
  name is the project's title. MLflow's default experiment ``"0"`` is the project
  ``default``, created on first use. Experiment tags ``lineage.metric`` and
  ``lineage.direction`` (``min`` or ``max``) set the project's metric and direction.
* **A run is a trial.** Its run id is ``<slug>__<exp_id>`` (stable: a retry names the
  same trial). ``runs/create`` records a ``running`` trial whose hypothesis is the tag
  ``mlflow.note.content``, else the run name; a retried create (the same body) is the
  same trial, through an idempotency key made of the body.
* Params go to ``extra.config`` (a param logged again with another value is MLflow's
  ``INVALID_PARAMETER_VALUE``), tags to ``extra.tags``, the run's name, user and times to
  ``extra.mlflow``; ``mlflow.parentRunId`` naming a run of the same experiment is the
  trial's ``parent_exp`` (a root run gets the ledger's default parent, the branch tip).
  They are merged into the stored trial inside its write (``update_trial`` with a
  function), so batches a client sends at once (MLflow's async logging) all keep theirs.
* Metrics are telemetry points at their steps (idempotent per batch, so a retried
  ``log-batch`` stores its points once); each batch of a running trial is its heartbeat.
  A NaN, an infinity or a value beyond 1e150 is left out and counted in
  ``extra.nonfinite_dropped``, as the ledger's trainer client does
  (:mod:`lineage.mlflow_checks`).
* ``runs/update`` with ``FINISHED``: the ledger's own verdict (``status: "auto"``) on
  ``core_metric``, the last value of the project's metric (or of the one the run's tag
  ``lineage.metric`` names); ``FAILED`` is ``crash``; ``KILLED`` is ``harness_abort``.
* ``experiments/search`` and ``runs/search`` answer the filters of
  :mod:`lineage.mlflow_search`.

Errors are :class:`~lineage.mlflow_checks.MlflowError`, with MLflow's ``error_code``; the
ledger's own errors are translated by :func:`~lineage.mlflow_checks.as_mlflow_error`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lineage.domain import FailureLabel, Project, Trial, lease_of
from lineage.errors import Conflict, NotFound
from lineage.mlflow_checks import (
    MAX_TAG_VALUE,
    MlflowError,
    as_mlflow_error,
    check_batch,
    invalid,
    key_of,
    millis_of,
    missing,
    pairs_of,
    text_of,
)
from lineage.mlflow_search import EXPERIMENT_ATTRIBUTES, experiment_matches, parse_filter, run_matches

if TYPE_CHECKING:
    from lineage.service import Ledger

__all__ = ["MlflowError", "MlflowTracking", "as_mlflow_error", "experiment_slug", "invalid", "missing"]

#: MLflow's experiment ids: an alphanumeric, then up to 63 of ``\w`` and ``-``.
MAX_EXPERIMENT_ID = 64
DEFAULT_EXPERIMENT_ID = "0"
DEFAULT_PROJECT = "default"
RUN_ID_SEPARATOR = "__"

NOTE_TAG = "mlflow.note.content"
PARENT_TAG = "mlflow.parentRunId"
RUN_NAME_TAG = "mlflow.runName"
METRIC_TAG = "lineage.metric"
DIRECTION_TAG = "lineage.direction"

#: Seconds between the heartbeats a run's metrics give (``MlflowTracking._beat``): the
#: ledger's trainer client beats as often; a lease lasts minutes.
BEAT_INTERVAL_S = 60.0
#: Runs whose last beat a server process remembers before it forgets the stale ones.
MAX_BEATS_HELD = 10_000
#: per ledger, ``(slug, exp_id) -> (time.monotonic() of the run's last beat from this
#: process, seconds until the next)``
_BEATS: weakref.WeakKeyDictionary[Ledger, dict[tuple[str, str], tuple[float, float]]] = weakref.WeakKeyDictionary()

#: A finished run's MLflow status, to the ledger's.
END_STATUS = {"FAILED": FailureLabel.CRASH.value, "KILLED": FailureLabel.HARNESS_ABORT.value}
RUN_STATUSES = ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")


def experiment_slug(name: object) -> str:
    """The project slug of an experiment name (module doc)."""
    if not isinstance(name, str) or not name.strip():
        raise invalid("experiment name must be a non-empty string")
    if name == "Default":
        return DEFAULT_PROJECT
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:MAX_EXPERIMENT_ID].strip("-")
    if not slug:
        raise invalid(f"experiment name {name!r} has no letter or digit to make a project slug of")
    return slug


def project_of(experiment_id: object) -> str:
    """The slug an experiment id names (``"0"``: the default project)."""
    if not isinstance(experiment_id, str) or not experiment_id:
        raise invalid("experiment_id must be a non-empty string")
    return DEFAULT_PROJECT if experiment_id == DEFAULT_EXPERIMENT_ID else experiment_id


def _same_name(name: str, experiment_id: str) -> bool:
    """Whether ``name`` makes the slug ``experiment_id`` (as ``get-by-name`` reads it)."""
    try:
        return experiment_slug(name) == experiment_id
    except MlflowError:
        return False


def run_id_of(project_slug: str, exp_id: str) -> str:
    return f"{project_slug}{RUN_ID_SEPARATOR}{exp_id}"


def parse_run_id(run_id: object) -> tuple[str, str]:
    """``(project slug, exp_id)`` of a run id; a malformed one is MLflow's 404."""
    if not isinstance(run_id, str) or RUN_ID_SEPARATOR not in run_id:
        raise missing(f"Run with id={run_id!r} not found")
    slug, exp_id = run_id.rsplit(RUN_ID_SEPARATOR, 1)
    if not slug or not exp_id:
        raise missing(f"Run with id={run_id!r} not found")
    return slug, exp_id


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:40]


def mlflow_status(trial: Trial) -> str:
    """The MLflow status a trial shows: running, a verdict (finished), a failure, an abort."""
    if trial.status is FailureLabel.RUNNING:
        return "RUNNING"
    if trial.status in (FailureLabel.KEEP, FailureLabel.DISCARD):
        return "FINISHED"
    if trial.status is FailureLabel.HARNESS_ABORT:
        return "KILLED"
    return "FAILED"


class MlflowTracking:
    """MLflow's tracking calls over a :class:`~lineage.service.Ledger` (module doc). Each
    method takes and returns MLflow's JSON shapes."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    # experiments ----------------------------------------------------------------

    def experiment(self, project: Project) -> dict[str, Any]:
        tags = [{"key": METRIC_TAG, "value": project.metric_name}]
        tags.append({"key": DIRECTION_TAG, "value": "min" if project.lower_is_better else "max"})
        return {
            "experiment_id": project.slug,
            "name": "Default" if project.slug == DEFAULT_PROJECT else project.title or project.slug,
            "artifact_location": "",
            "lifecycle_stage": "active",
            "tags": tags,
        }

    def _project(self, slug: str) -> Project:
        try:
            return self.ledger.projects.project(slug)
        except NotFound:
            if slug == DEFAULT_PROJECT:
                return self._ensure_default()
            raise missing(f"No Experiment with id={slug!r} exists") from None

    def _ensure_default(self) -> Project:
        try:
            return self.ledger.projects.create_project(DEFAULT_PROJECT, title="Default")
        except Conflict:  # created meanwhile
            return self.ledger.projects.project(DEFAULT_PROJECT)

    def get_experiment(self, experiment_id: object) -> dict[str, Any]:
        return {"experiment": self.experiment(self._project(project_of(experiment_id)))}

    def get_experiment_by_name(self, name: object) -> dict[str, Any]:
        slug = experiment_slug(name)
        try:
            project = self.ledger.projects.project(slug)
        except NotFound:
            if slug != DEFAULT_PROJECT:
                raise missing(f"Could not find experiment with name {name!r}") from None
            project = self._ensure_default()
        return {"experiment": self.experiment(project)}

    def create_experiment(self, name: object, tags: object = None) -> dict[str, Any]:
        slug = experiment_slug(name)
        given = pairs_of(tags, "tag", MAX_TAG_VALUE)
        options: dict[str, Any] = {"title": str(name)}
        if METRIC_TAG in given:
            options["metric_name"] = given[METRIC_TAG]
        if DIRECTION_TAG in given:
            if given[DIRECTION_TAG] not in ("min", "max"):
                raise invalid(f"tag {DIRECTION_TAG} must be 'min' or 'max', got {given[DIRECTION_TAG]!r}")
            options["lower_is_better"] = given[DIRECTION_TAG] == "min"
        try:
            project = self.ledger.projects.create_project(slug, **options)
        except Conflict:
            raise MlflowError(
                "RESOURCE_ALREADY_EXISTS", f"Experiment {name!r} already exists (project {slug!r})"
            ) from None
        return {"experiment_id": project.slug}

    def search_experiments(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Projects as experiments, by MLflow's filter on ``name`` and ``tags.K``
        (``lineage.mlflow_search``); the default experiment is listed once it exists."""
        clauses = parse_filter(body.get("filter") or "", EXPERIMENT_ATTRIBUTES)
        limit, token = _paging(body, 1000, 50_000)
        found = [self.experiment(project) for project in self.ledger.projects.projects()]
        kept = [e for e in found if experiment_matches(clauses, e, _same_name)]
        return _page(kept, "experiments", limit, token)

    # runs -----------------------------------------------------------------------

    def create_run(self, body: Mapping[str, Any]) -> dict[str, Any]:
        slug = project_of(body.get("experiment_id") or DEFAULT_EXPERIMENT_ID)
        project = self._project(slug)
        tags = pairs_of(body.get("tags"), "tag", MAX_TAG_VALUE)
        run_name = text_of(body.get("run_name") or tags.get(RUN_NAME_TAG), "run_name", MAX_TAG_VALUE)
        start = millis_of(body.get("start_time"), "start_time") or int(time.time() * 1000)
        fields: dict[str, Any] = {
            "hypothesis": tags.get(NOTE_TAG) or run_name or "mlflow run",
            "status": FailureLabel.RUNNING.value,
            "job_name": run_name[:512],
            "extra": {
                "config": {},
                "tags": tags,
                "mlflow": {"run_name": run_name, "user_id": str(body.get("user_id") or ""), "start_time": start},
            },
        }
        parent = self._parent(project.slug, tags.get(PARENT_TAG))
        if parent is not None:
            fields["parent_exp"] = parent
        key = "mlflow-run-" + _digest(project.slug, dict(body))
        result = self.ledger.recording.record_trial(project.slug, fields, idempotency_key=key)
        return {"run": self.run(project, result.trial)}

    def _parent(self, slug: str, parent_run_id: str | None) -> str | None:
        """The parent's exp_id when ``mlflow.parentRunId`` names a run of this experiment."""
        if not parent_run_id:
            return None
        parent_slug, exp_id = parse_run_id(parent_run_id)
        return exp_id if parent_slug == slug else None

    def _trial(self, run_id: object) -> tuple[Project, Trial]:
        slug, exp_id = parse_run_id(run_id)
        try:
            project = self.ledger.projects.project(slug)
            return project, self.ledger.trials.trial(slug, exp_id)
        except NotFound:
            raise missing(f"Run with id={run_id!r} not found") from None

    def get_run(self, run_id: object) -> dict[str, Any]:
        project, trial = self._trial(run_id)
        return {"run": self.run(project, trial, metrics=True)}

    def update_run(self, body: Mapping[str, Any]) -> dict[str, Any]:
        project, trial = self._trial(body.get("run_id") or body.get("run_uuid"))
        status = body.get("status")
        if status is not None and status not in RUN_STATUSES:
            raise invalid(f"status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
        end = millis_of(body.get("end_time"), "end_time")
        run_name = text_of(body.get("run_name"), "run_name", MAX_TAG_VALUE)
        ending: dict[str, Any] = {}
        if status == "FINISHED":
            metric = self._metric_name(project, trial)
            ending = {"status": "auto", "core_metric": self._last_value(project.slug, trial.exp_id, metric)}
        elif status in END_STATUS:
            ending = {"status": END_STATUS[status]}

        def changes(current: Trial) -> dict[str, Any]:  # in the write: a concurrent log-batch keeps its params
            mlflow = dict(current.extra.get("mlflow") or {})
            if run_name:
                mlflow["run_name"] = run_name
            if end is not None:
                mlflow["end_time"] = end
            out: dict[str, Any] = {"extra": {**current.extra, "mlflow": mlflow}, **ending}
            if end is not None and isinstance(mlflow.get("start_time"), int):
                out["total_s"] = max(0.0, (end - mlflow["start_time"]) / 1e3)
            return out

        updated = self.ledger.recording.update_trial(project.slug, trial.exp_id, changes)
        return {"run_info": self.run(project, updated)["info"]}

    def _metric_name(self, project: Project, trial: Trial) -> str:
        tags = trial.extra.get("tags") or {}
        return str(tags.get(METRIC_TAG) or project.metric_name)

    def _last_value(self, slug: str, exp_id: str, name: str) -> float | None:
        found = self.ledger.telemetry.metric_history(slug, exp_id, name, last=True)
        return found[0][1] if found else None

    def search_runs(self, body: Mapping[str, Any]) -> dict[str, Any]:
        ids = body.get("experiment_ids") or [DEFAULT_EXPERIMENT_ID]
        if not isinstance(ids, list):
            raise invalid("experiment_ids must be a list")
        clauses = parse_filter(body.get("filter") or "")
        limit, token = _paging(body, 1000, 50_000)
        runs = []
        for experiment_id in ids:
            project = self._project(project_of(experiment_id))
            for trial in reversed(self.ledger.trials.list_trials(project.slug)):  # newest first, as MLflow
                run = self.run(project, trial)
                if run_matches(clauses, run):
                    runs.append(run)
        return _page(runs, "runs", limit, token)

    def log_batch(self, run_id: object, body: Mapping[str, Any], *, size: int = 0) -> dict[str, Any]:
        """Params, tags and metrics of a run. Metrics alone (a training step's call) cost one
        write: the trial is read only to merge params or tags, or when a heartbeat is due."""
        batch = check_batch(body, size=size)
        slug, exp_id = parse_run_id(run_id)
        if batch.params or batch.tags or not (batch.rows or batch.dropped):
            project, trial = self._trial(run_id)  # an empty batch still names a run that exists
            if batch.params or batch.tags:
                self._set_fields(project, trial, batch.params, batch.tags)
        if batch.rows or batch.dropped:
            key = "mlflow-batch-" + _digest(exp_id, batch.rows, batch.dropped)
            try:
                done = self.ledger.telemetry.ingest_telemetry(slug, exp_id, batch.rows, key=key)
            except NotFound:
                raise missing(f"Run with id={run_id!r} not found") from None
            if batch.dropped and not done.replayed:
                self._count_dropped(slug, exp_id, len(batch.dropped))
            self._beat(slug, exp_id)
        return {}

    def _count_dropped(self, slug: str, exp_id: str, count: int) -> None:
        """Metrics left out for a value the ledger does not store (NaN, infinities, beyond
        1e150: ``lineage.mlflow_checks``), counted as the trainer client counts them."""

        def changes(current: Trial) -> dict[str, Any]:
            dropped = int(current.extra.get("nonfinite_dropped") or 0) + count
            return {"extra": {**current.extra, "nonfinite_dropped": dropped}}

        self.ledger.recording.update_trial(slug, exp_id, changes)

    def _beat(self, slug: str, exp_id: str) -> None:
        """Metrics are the run's sign of life: MLflow clients send no heartbeat, and without
        one a run that only logs metrics would lapse (``lineage.leases``) mid-training. A
        running trial is beaten at its first batch and then at most every
        :data:`BEAT_INTERVAL_S` (as often as the ledger's own trainer client beats), or a
        third of the project's lease when that is shorter, by this server process. The
        owner is the run's MLflow user (``mlflow`` when it sent none)."""
        beats = _BEATS.setdefault(self.ledger, {})
        now = time.monotonic()
        last, interval = beats.get((slug, exp_id), (-math.inf, BEAT_INTERVAL_S))
        if now - last < interval:
            return
        if len(beats) > MAX_BEATS_HELD:  # forget runs not beaten for an interval
            for held in [k for k, (at, every) in beats.items() if now - at >= every]:
                del beats[held]
        trial = self.ledger.trials.trial(slug, exp_id)
        interval = min(BEAT_INTERVAL_S, lease_of(self.ledger.projects.project(slug)) / 3)
        beats[(slug, exp_id)] = (now, interval)
        if trial.status is not FailureLabel.RUNNING:
            return
        owner = str((trial.extra.get("mlflow") or {}).get("user_id") or "mlflow")[:512]
        try:
            self.ledger.leases.heartbeat(slug, exp_id, owner=owner)
        except Conflict:  # ended meanwhile (lapsed, or finished by another writer): keep logging
            pass

    def _set_fields(self, project: Project, trial: Trial, params: dict[str, str], tags: dict[str, str]) -> None:
        run_id = run_id_of(project.slug, trial.exp_id)
        parent = self._parent(project.slug, tags.get(PARENT_TAG))

        def changes(current: Trial) -> dict[str, Any]:  # in the write: concurrent batches merge, none is lost
            config = dict(current.extra.get("config") or {})
            for key, value in params.items():
                if key in config and str(config[key]) != value:
                    raise invalid(
                        f"Changing param values is not allowed. Param with key={key!r} was already logged with "
                        f"value={config[key]!r} for run ID={run_id!r}. Attempted logging new value {value!r}."
                    )
                config[key] = value
            stored_tags = {**(current.extra.get("tags") or {}), **tags}
            out: dict[str, Any] = {"extra": {**current.extra, "config": config, "tags": stored_tags}}
            if tags.get(NOTE_TAG):
                out["hypothesis"] = tags[NOTE_TAG]
            if parent is not None:
                out["parent_exp"] = parent
            return out

        self.ledger.recording.update_trial(project.slug, trial.exp_id, changes)

    def get_metric_history(self, run_id: object, key: object) -> dict[str, Any]:
        project, trial = self._trial(run_id)
        name = key_of(key, "metric")
        points = self.ledger.telemetry.metric_history(project.slug, trial.exp_id, name)
        return {"metrics": [_metric(name, *point) for point in points]}

    # shapes ---------------------------------------------------------------------

    def run(self, project: Project, trial: Trial, *, metrics: bool = False) -> dict[str, Any]:
        """A trial as MLflow's ``Run``: info, and data (params, tags, and with ``metrics``
        the latest value of each metric)."""
        mlflow = trial.extra.get("mlflow") or {}
        run_id = run_id_of(project.slug, trial.exp_id)
        run_name = str(mlflow.get("run_name") or trial.job_name or f"trial-{trial.exp_id}")
        info = {
            "run_id": run_id,
            "run_uuid": run_id,
            "run_name": run_name,
            "experiment_id": project.slug,
            "user_id": str(mlflow.get("user_id") or ""),
            "status": mlflow_status(trial),
            "start_time": mlflow.get("start_time", 0),
            "artifact_uri": "",
            "lifecycle_stage": "active",
        }
        if "end_time" in mlflow:
            info["end_time"] = mlflow["end_time"]
        tags = {str(k): str(v) for k, v in (trial.extra.get("tags") or {}).items()}
        tags.update(
            {
                RUN_NAME_TAG: run_name,
                "lineage.exp_id": trial.exp_id,
                "lineage.status": trial.status.value,
            }
        )
        if trial.parent_exp:
            tags.setdefault(PARENT_TAG, run_id_of(project.slug, trial.parent_exp))
        params = trial.extra.get("config") or {}
        data: dict[str, Any] = {
            "params": [{"key": str(k), "value": str(v)} for k, v in params.items()],
            "tags": [{"key": k, "value": v} for k, v in tags.items()],
        }
        if metrics:
            data["metrics"] = self._latest_metrics(project.slug, trial.exp_id)
        return {"info": info, "data": data}

    def _latest_metrics(self, slug: str, exp_id: str) -> list[dict[str, Any]]:
        latest = self.ledger.telemetry.latest_points(slug, exp_id)
        return [_metric(name, *point) for name, point in latest.items()]


def _paging(body: Mapping[str, Any], default: int, most: int) -> tuple[int, int]:
    """``(max_results, offset)`` of a search; the page token is the offset this server gave."""
    limit = millis_of(body.get("max_results"), "max_results") or default
    if not 1 <= limit <= most:
        raise invalid(f"max_results must be from 1 to {most}, got {limit}")
    token = body.get("page_token") or "0"
    if not str(token).isdigit():
        raise invalid(f"page_token {token!r} is not one this server gave")
    return limit, int(token)


def _page(items: list[dict[str, Any]], name: str, limit: int, start: int) -> dict[str, Any]:
    out: dict[str, Any] = {name: items[start : start + limit]}
    if start + limit < len(items):
        out["next_page_token"] = str(start + limit)
    return out


def _metric(name: str, step: int, value: float, wall_time: float | None) -> dict[str, Any]:
    """A point as MLflow's ``Metric`` (its timestamp in milliseconds; 0 when none was sent)."""
    return {"key": name, "value": value, "timestamp": 0 if wall_time is None else round(wall_time * 1000), "step": step}
