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
* Metrics are telemetry points at their steps (idempotent per batch, so a retried
  ``log-batch`` stores its points once); each batch of a running trial is its heartbeat.
* ``runs/update`` with ``FINISHED``: the ledger's own verdict (``status: "auto"``) on
  ``core_metric``, the last value of the project's metric (or of the one the run's tag
  ``lineage.metric`` names); ``FAILED`` is ``crash``; ``KILLED`` is ``harness_abort``.

Errors are :class:`MlflowError`, with MLflow's ``error_code``; the ledger's own errors
are translated by :func:`as_mlflow_error`.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lineage.auth import Forbidden, Unauthorized
from lineage.domain import FailureLabel, Project, Trial
from lineage.errors import Conflict, InvalidInput, LedgerError, NotFound
from lineage.telemetry import check_points

if TYPE_CHECKING:
    from lineage.service import Ledger

#: MLflow's limits (``mlflow.utils.validation``).
MAX_BATCH_METRICS = 1000
MAX_BATCH_PARAMS_TAGS = 100
MAX_BATCH_BYTES = 1_000_000
MAX_KEY = 250
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
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

#: A finished run's MLflow status, to the ledger's.
END_STATUS = {"FAILED": FailureLabel.CRASH.value, "KILLED": FailureLabel.HARNESS_ABORT.value}
RUN_STATUSES = ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")


class MlflowError(Exception):
    """An error MLflow clients parse: ``{"error_code": ..., "message": ...}`` with ``status``."""

    def __init__(self, error_code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.status = status

    def as_dict(self) -> dict[str, str]:
        return {"error_code": self.error_code, "message": self.message}


def invalid(message: str) -> MlflowError:
    return MlflowError("INVALID_PARAMETER_VALUE", message)


def missing(message: str) -> MlflowError:
    return MlflowError("RESOURCE_DOES_NOT_EXIST", message, 404)


def as_mlflow_error(error: LedgerError) -> MlflowError:
    """The ledger's error in MLflow's words: no or a bad token 401, a role too low 403, not
    found 404, a conflict or bad input 400."""
    if isinstance(error, Unauthorized):
        return MlflowError("UNAUTHENTICATED", str(error), 401)
    if isinstance(error, Forbidden):
        return MlflowError("PERMISSION_DENIED", str(error), 403)
    if isinstance(error, NotFound):
        return missing(str(error))
    if isinstance(error, Conflict):
        return MlflowError("INVALID_STATE", str(error))
    if isinstance(error, InvalidInput):
        return invalid(str(error))
    return MlflowError("INTERNAL_ERROR", str(error), 500)


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


def _key(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_KEY:
        raise invalid(f"{what} key must be 1-{MAX_KEY} characters, got {value!r:.300}")
    return value


def _text(value: object, what: str, limit: int) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        raise invalid(f"{what} value is {len(text)} characters long; the limit is {limit}")
    return text


def _pairs(items: object, what: str, limit: int) -> dict[str, str]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise invalid(f"{what}s must be a list of {{key, value}} objects")
    out: dict[str, str] = {}
    for item in items:
        if not isinstance(item, Mapping):
            raise invalid(f"each {what} must be a {{key, value}} object")
        key = _key(item.get("key"), what)
        out[key] = _text(item.get("value"), f"{what} {key!r}", limit)
    return out


def _millis(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"{what} must be milliseconds since the epoch, got {value!r}")
    return int(value)


@dataclass(frozen=True, slots=True)
class Batch:
    """A checked ``log-batch``: telemetry rows, params and tags."""

    rows: list[tuple[int, int, str, float, float | None]]
    params: dict[str, str]
    tags: dict[str, str]


def check_batch(body: Mapping[str, Any], *, size: int = 0) -> Batch:
    """A ``log-batch`` body held to MLflow's limits: over any, nothing is stored."""
    if size > MAX_BATCH_BYTES:
        raise invalid(f"the batch is {size} bytes; the limit is {MAX_BATCH_BYTES}")
    metrics = body.get("metrics") or []
    if not isinstance(metrics, list):
        raise invalid("metrics must be a list")
    if len(metrics) > MAX_BATCH_METRICS:
        raise invalid(f"a batch holds {len(metrics)} metrics; the limit is {MAX_BATCH_METRICS}")
    params = _pairs(body.get("params"), "param", MAX_PARAM_VALUE)
    tags = _pairs(body.get("tags"), "tag", MAX_TAG_VALUE)
    given = len(body.get("params") or []) + len(body.get("tags") or [])
    if given > MAX_BATCH_PARAMS_TAGS:
        raise invalid(f"a batch holds {given} params and tags; the limit is {MAX_BATCH_PARAMS_TAGS}")
    points = []
    for index, metric in enumerate(metrics):
        if not isinstance(metric, Mapping):
            raise invalid(f"metrics[{index}] must be a {{key, value, timestamp, step}} object")
        key = _key(metric.get("key"), "metric")
        stamp = _millis(metric.get("timestamp"), f"metrics[{index}].timestamp")
        step = _millis(metric.get("step", 0) or 0, f"metrics[{index}].step")
        points.append(
            {
                "name": key,
                "step": step,
                "value": metric.get("value"),
                "wall_time": None if stamp is None else stamp / 1e3,
            }
        )
    try:
        rows = check_points(points)
    except InvalidInput as error:  # name MLflow's field: metrics[i].step, not points[i].step
        raise invalid(str(error).replace("points[", "metrics[", 1)) from None
    return Batch(rows, params, tags)


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
        given = _pairs(tags, "tag", MAX_TAG_VALUE)
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

    # runs -----------------------------------------------------------------------

    def create_run(self, body: Mapping[str, Any]) -> dict[str, Any]:
        slug = project_of(body.get("experiment_id") or DEFAULT_EXPERIMENT_ID)
        project = self._project(slug)
        tags = _pairs(body.get("tags"), "tag", MAX_TAG_VALUE)
        run_name = _text(body.get("run_name") or tags.get(RUN_NAME_TAG), "run_name", MAX_TAG_VALUE)
        start = _millis(body.get("start_time"), "start_time") or int(time.time() * 1000)
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
        end = _millis(body.get("end_time"), "end_time")
        mlflow = dict(trial.extra.get("mlflow") or {})
        if body.get("run_name"):
            mlflow["run_name"] = _text(body["run_name"], "run_name", MAX_TAG_VALUE)
        if end is not None:
            mlflow["end_time"] = end
        changes: dict[str, Any] = {"extra": {**trial.extra, "mlflow": mlflow}}
        if end is not None and isinstance(mlflow.get("start_time"), int):
            changes["total_s"] = max(0.0, (end - mlflow["start_time"]) / 1e3)
        if status == "FINISHED":
            metric = self._metric_name(project, trial)
            changes.update(status="auto", core_metric=self._last_value(project.slug, trial.exp_id, metric))
        elif status in END_STATUS:
            changes["status"] = END_STATUS[status]
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
        limit = _millis(body.get("max_results"), "max_results") or 1000
        if not 1 <= limit <= 50_000:
            raise invalid(f"max_results must be from 1 to 50000, got {limit}")
        token = body.get("page_token") or "0"
        if not str(token).isdigit():
            raise invalid(f"page_token {token!r} is not one this server gave")
        runs = []
        for experiment_id in ids:
            project = self._project(project_of(experiment_id))
            for trial in reversed(self.ledger.trials.list_trials(project.slug)):  # newest first, as MLflow
                run = self.run(project, trial)
                if all(clause.matches(run) for clause in clauses):
                    runs.append(run)
        start = int(token)
        page = runs[start : start + limit]
        out: dict[str, Any] = {"runs": page}
        if start + limit < len(runs):
            out["next_page_token"] = str(start + limit)
        return out

    def log_batch(self, run_id: object, body: Mapping[str, Any], *, size: int = 0) -> dict[str, Any]:
        batch = check_batch(body, size=size)
        project, trial = self._trial(run_id)
        if batch.params or batch.tags:
            self._set_fields(project, trial, batch.params, batch.tags)
        if batch.rows:
            key = "mlflow-batch-" + _digest(trial.exp_id, batch.rows)
            self.ledger.telemetry.ingest_telemetry(project.slug, trial.exp_id, batch.rows, key=key)
            if trial.status is FailureLabel.RUNNING:
                self._beat(project.slug, trial)
        return {}

    def _beat(self, slug: str, trial: Trial) -> None:
        """Metrics are the run's sign of life: MLflow clients send no heartbeat, and without
        one a run that only logs metrics would lapse (``lineage.leases``) mid-training. The
        owner is the run's MLflow user (``mlflow`` when it sent none)."""
        owner = str((trial.extra.get("mlflow") or {}).get("user_id") or "mlflow")[:512]
        try:
            self.ledger.leases.heartbeat(slug, trial.exp_id, owner=owner)
        except Conflict:  # ended meanwhile (lapsed, or finished by another writer): keep logging
            pass

    def _set_fields(self, project: Project, trial: Trial, params: dict[str, str], tags: dict[str, str]) -> None:
        config = dict(trial.extra.get("config") or {})
        for key, value in params.items():
            if key in config and str(config[key]) != value:
                raise invalid(
                    f"Changing param values is not allowed. Param with key={key!r} was already logged with "
                    f"value={config[key]!r} for run ID={run_id_of(project.slug, trial.exp_id)!r}. "
                    f"Attempted logging new value {value!r}."
                )
            config[key] = value
        stored_tags = {**(trial.extra.get("tags") or {}), **tags}
        changes: dict[str, Any] = {"extra": {**trial.extra, "config": config, "tags": stored_tags}}
        if tags.get(NOTE_TAG):
            changes["hypothesis"] = tags[NOTE_TAG]
        parent = self._parent(project.slug, tags.get(PARENT_TAG))
        if parent is not None:
            changes["parent_exp"] = parent
        self.ledger.recording.update_trial(project.slug, trial.exp_id, changes)

    def get_metric_history(self, run_id: object, key: object) -> dict[str, Any]:
        project, trial = self._trial(run_id)
        name = _key(key, "metric")
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


def _metric(name: str, step: int, value: float, wall_time: float | None) -> dict[str, Any]:
    """A point as MLflow's ``Metric`` (its timestamp in milliseconds; 0 when none was sent)."""
    return {"key": name, "value": value, "timestamp": 0 if wall_time is None else round(wall_time * 1000), "step": step}


@dataclass(frozen=True, slots=True)
class Clause:
    """One ``field = 'value'`` (or ``!=``) of a search filter."""

    kind: str  # tags, params, attributes
    key: str
    negated: bool
    value: str

    def matches(self, run: Mapping[str, Any]) -> bool:
        if self.kind == "attributes":
            found = run["info"].get(self.key)
        else:
            found = next((p["value"] for p in run["data"][self.kind] if p["key"] == self.key), None)
        return (found is not None and str(found) == self.value) != self.negated


_CLAUSE = re.compile(
    r"""\s*(?:(?P<kind>tags?|params?|attributes?|attr|run)\.)?(?P<key>`[^`]+`|"[^"]+"|[\w.]+)\s*"""
    r"""(?P<op>!=|=)\s*(?P<value>'[^']*'|"[^"]*")\s*"""
)
_ATTRIBUTES = {"status": "status", "run_name": "run_name", "run_id": "run_id", "user_id": "user_id"}


def parse_filter(text: object) -> list[Clause]:
    """The subset of MLflow's search filter the ledger answers: ``=`` and ``!=`` on tags,
    params and the attributes status, run_name, run_id and user_id, joined by ``AND``."""
    if not isinstance(text, str):
        raise invalid("filter must be a string")
    clauses: list[Clause] = []
    for part in re.split(r"\s+and\s+", text.strip(), flags=re.IGNORECASE) if text.strip() else []:
        found = _CLAUSE.fullmatch(part)
        if found is None:
            raise invalid(
                f"filter clause {part!r} is not supported here: use tags.K, params.K or attributes.status / "
                "run_name / run_id / user_id with = or != and a quoted value, joined by AND"
            )
        kind = (found["kind"] or "attributes").rstrip("s")
        kind = {"tag": "tags", "param": "params"}.get(kind, "attributes")
        key = found["key"].strip('`"')
        if kind == "attributes":
            if key not in _ATTRIBUTES:
                raise invalid(f"filter attribute {key!r} is not supported; use one of {', '.join(_ATTRIBUTES)}")
            key = _ATTRIBUTES[key]
        clauses.append(Clause(kind, key, found["op"] == "!=", found["value"][1:-1]))
    return clauses
