"""The recording rules every writer shares, as pure functions of a body (nothing read).

Owns :func:`prepare_record` (a parent left out, a failure's "no result" metric, a keep
without a metric, the metric under its own name), :func:`draft_record` (what a body
makes before anything is read), and what counts as "the same body" when a creation is
retried (:func:`same_body`, :func:`trial_body_hash`). :mod:`lineage.service.recording`
applies them inside the write transaction.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from lineage.domain import (
    AUTO_STATUS,
    FLOAT_COLUMNS,
    MAX_SHORT_TEXT,
    TRIAL_FIELD_NAMES,
    WRITABLE_FIELDS,
    FailureLabel,
    Project,
    RecordResult,
    Trial,
    check_keep_margin,
    is_no_result,
    trial_from_mapping,
)
from lineage.errors import InvalidInput
from lineage.similar import prior_query, stored_concepts
from lineage.similar import sketch as similar_sketch

#: Fields compared when a create is retried with the same exp_id (server-computed ones excluded).
IDEMPOTENT_FIELDS = tuple(name for name in WRITABLE_FIELDS if name not in ("delta_vs_best",))
#: Where the metric a writer sent is kept, verbatim, when it means "no result".
REPORTED_METRIC_KEY = "_reported_metric"
_ADVANCING = (FailureLabel.KEEP, FailureLabel.BASELINE)


@dataclass(frozen=True, slots=True)
class PreparedRecord:
    """A writer's trial body after the recording rules (:func:`prepare_record`)."""

    #: the body to store (``delta_vs_best`` dropped; ``parent_exp`` absent when omitted)
    body: dict[str, Any]
    #: the writer left ``parent_exp`` out of a creation: the ledger fills in the branch tip
    parent_omitted: bool
    #: what the rules did to the body, in words, for the writer's answer
    warnings: tuple[str, ...]
    #: the writer sent ``status: "auto"``: the margin the verdict needs (the body's status
    #: is ``discard`` until the ledger decides, :func:`lineage.domain.auto_verdict`); None:
    #: the writer's own status
    keep_margin: float | None = None
    #: the trial the writer says this one reruns (the same code again): checked against
    #: the project when the write reads (``RecordingUses.decide``); None: not declared
    rerun_of: str | None = None


@dataclass(frozen=True, slots=True)
class Draft:
    """What a record's body makes before anything is read: the recording rules applied
    (:func:`prepare_record`), the trial proposed (its id and parent not decided yet), its
    stored concepts, ``similar_prior``'s query and its sketch keys (those its stored sketch gets)."""

    prepared: PreparedRecord
    proposed: Trial
    concepts: str
    #: None: not made (:func:`draft_record`'s ``sketch``)
    query: tuple[str, list[str]] | None
    keys: tuple[int, ...] | None


def draft_record(project: Project, fields: Mapping[str, Any], *, sketch: bool) -> Draft:
    """The :class:`Draft` of a new trial's body (``sketch``: with the query and sketch
    keys); the recording rules' refusals raised."""
    prepared = prepare_record(project, fields)
    body = prepared.body
    proposed = trial_from_mapping(body, exp_id=body.get("exp_id") or "_")
    concepts = stored_concepts(proposed.hypothesis, proposed.notes)
    if not sketch:
        return Draft(prepared, proposed, concepts, None, None)
    query = prior_query(proposed.hypothesis, proposed.notes, concepts)
    return Draft(prepared, proposed, concepts, query, tuple(similar_sketch(query[1])))


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def prepare_record(project: Project, fields: Mapping[str, Any], *, current: Trial | None = None) -> PreparedRecord:
    """The recording rules every writer of single trials shares (HTTP, MCP, ``lineage
    record``, the trainer's client, batches), applied to a body before it is stored.

    1. **The metric under its own name.** A body that carries the project's metric under
       its name (``val_bpb``, ``score``): read as ``core_metric``, with a warning; refused
       (:class:`InvalidInput` naming that key) when it is not a number or differs from
       the ``core_metric`` sent. In a project whose metric is ``val_bpb`` (also a trial
       field), ``val_bpb`` and ``core_metric`` are one value.
    2. **No result.** A metric that means "no result" (:func:`lineage.domain.is_no_result`:
       ``0`` on a failure status, ``-999``/``-9999`` on any) is stored as none, never a
       delta and never the best; the value sent stays in ``extra["_reported_metric"]``.
    3. **A keep or baseline without a metric** is accepted, with a warning.
    4. **The parent.** ``parent_exp`` left out of a creation: ``parent_omitted`` (the
       ledger fills in the branch tip, the last keep or baseline, ``parent_defaulted``); ``""`` or ``null``: a root.

    ``delta_vs_best`` is dropped (the ledger computes it). ``current``: the stored trial
    of an update (``fields`` are changes to it): its status and metric count where the
    changes leave them out, and no parent is defaulted.
    """
    body = {name: value for name, value in fields.items() if name != "delta_vs_best"}
    warnings: list[str] = []
    keep_margin = _auto_margin(body)
    rerun_of = _rerun_of(body, current)
    name = project.metric_name
    if name and name != "core_metric" and name in body and (name in FLOAT_COLUMNS or name not in TRIAL_FIELD_NAMES):
        own = body[name]
        if own is not None and not _number(own):
            raise InvalidInput(name, f"is this project's metric and must be a number, got {own!r}")
        if name not in FLOAT_COLUMNS:
            del body[name]
        sent = body.get("core_metric")
        if sent is None and own is not None:
            body["core_metric"] = own
            warnings.append(f"{name} is this project's metric: read as core_metric={own!r} (send it as core_metric)")
        elif own is not None and own != sent:
            raise InvalidInput(
                name,
                f"{name}={own!r} conflicts with core_metric={sent!r}; {name} is this "
                "project's metric, so send it once, as core_metric",
            )
    if name == "val_bpb" and _number(body.get("core_metric")) and body.get("val_bpb") is None:
        body["val_bpb"] = body["core_metric"]

    raw = body.get("status", current.status if current is not None else FailureLabel.DISCARD)
    label = raw if isinstance(raw, FailureLabel) else FailureLabel.parse(str(raw))
    extra_sent = body.get("extra")
    if current is None and label is FailureLabel.HARNESS_ABORT and isinstance(extra_sent, Mapping):
        if extra_sent.get("state") == "running":  # an older trainer client's plan: it is running
            label = FailureLabel.RUNNING
            body["status"] = label.value
    metric = body["core_metric"] if "core_metric" in body else (current.core_metric if current else None)
    touched = current is None or "status" in body or "core_metric" in body
    if touched and _number(metric) and is_no_result(float(metric), label):
        extra = body.get("extra", current.extra if current is not None else {})
        if extra is None:
            extra = {}
        if isinstance(extra, Mapping):
            body["extra"] = {**extra, REPORTED_METRIC_KEY: metric}
            body["core_metric"] = None
            if name == "val_bpb" and body.get("val_bpb", current.val_bpb if current else None) == metric:
                body["val_bpb"] = None
            warnings.append(
                f"core_metric={metric!r} on a {label.value} means no result: stored without a metric "
                f"(the value sent is kept in extra.{REPORTED_METRIC_KEY})"
            )
            metric = None
    if keep_margin is not None and metric is None:
        warnings.append(
            f'status "auto" without a metric: stored as a discard with no result; send core_metric '
            f"(this project's metric: {name})"
        )
    elif touched and label in _ADVANCING and metric is None:
        warnings.append(
            f"a {label.value} without a metric can never be the best; send core_metric (this project's metric: {name})"
        )
    elif touched and label in _ADVANCING and _number(metric) and metric == 0.0:
        # autoresearch's loops write 0.000000 for a crash: kept, it would be a lower-is-better best
        warnings.append(
            f"core_metric=0 on a {label.value} is how a results file marks a crash; if the run "
            "crashed, record it as crash (its 0 is then read as no result)"
        )

    parent_omitted = current is None and "parent_exp" not in body
    return PreparedRecord(body, parent_omitted, tuple(warnings), keep_margin, rerun_of)


def _rerun_of(body: dict[str, Any], current: Trial | None) -> str | None:
    """Take ``rerun_of`` out of ``body``: an exp_id (text), declared when the trial is
    created; null or "": none. Whether it names a trial of the project is checked when
    the write reads (``RecordingUses.decide``)."""
    value = body.pop("rerun_of", None)
    if value is None or value == "":
        return None
    if current is not None:
        raise InvalidInput("rerun_of", "is declared when the trial is recorded; it cannot be changed later")
    if not isinstance(value, str) or len(value) > MAX_SHORT_TEXT or value != value.strip():
        raise InvalidInput("rerun_of", f"must be the exp_id of a trial of this project, got {value!r}")
    return value


def _auto_margin(body: dict[str, Any]) -> float | None:
    """Take ``keep_margin`` out of ``body``; for ``status: "auto"`` its margin (default 0)
    and the status set to ``discard`` until the ledger decides; else None. A margin with
    another status is refused: it would be ignored."""
    margin = body.pop("keep_margin", None)
    if body.get("status") != AUTO_STATUS:
        if margin is not None:
            raise InvalidInput("keep_margin", 'applies only to status "auto" (the ledger\'s verdict)')
        return None
    body["status"] = FailureLabel.DISCARD.value
    return check_keep_margin(margin) if margin is not None else 0.0


def replay_result(existing: Trial, prepared: PreparedRecord) -> RecordResult:
    """The answer to a retry: the stored trial, with what the rules said about the body."""
    return RecordResult(
        existing,
        False,
        None,
        False,
        parent_defaulted=prepared.parent_omitted and bool(existing.parent_exp),
        warnings=prepared.warnings,
    )


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, FailureLabel) or isinstance(b, FailureLabel):
        return str(getattr(a, "value", a)) == str(getattr(b, "value", b))
    return a == b


def same_field(name: str, a: Any, b: Any) -> bool:
    return _same_extra(a, b) if name == "extra" else _same_value(a, b)


def _same_extra(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two ``extra`` objects are the same JSON: the same text with the keys sorted.
    Stricter than Python's ``==`` where JSON is (``true`` is not ``1``, ``1.0`` is not
    ``1``, ``-0.0`` is not ``0.0``), as the Idempotency-Key's body hash is; both backends
    give back the text they were given (``models.JSONText``), so an identical retry matches."""
    if a == {} or b == {}:
        return a == b
    return _canonical_json(a) == _canonical_json(b)


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def same_body(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(same_field(k, a[k], b[k]) for k in a)


def request_hash(request: Mapping[str, Any]) -> str:
    """SHA-256 of a request the writer described itself (``record_trial``'s
    ``key_request``), kept apart from every trial body's hash."""
    text = _canonical_json({"request": request})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def trial_body_hash(
    proposed: Trial,
    exp_id: str | None,
    parent_omitted: bool = False,
    keep_margin: float | None = None,
    rerun_of: str | None = None,
) -> str:
    """SHA-256 of what a creation asks for: the fields compared on a replay, with every
    omitted field at its default, so two requests for the same trial hash alike (a parent
    left out hashes apart from a root: the ledger chose the first's)."""
    values: list[Any] = [exp_id or ""]
    if parent_omitted:
        values.append({"parent_exp": "omitted"})
    if keep_margin is not None:  # the ledger's verdict asked for: not the discard it stands as
        values.append({"status": AUTO_STATUS, "keep_margin": keep_margin})
    if rerun_of is not None:
        values.append({"rerun_of": rerun_of})
    for name in IDEMPOTENT_FIELDS:
        if name == "exp_id":
            continue
        value = getattr(proposed, name)
        values.append(value.value if isinstance(value, FailureLabel) else dict(value) if name == "extra" else value)
    text = json.dumps(values, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
