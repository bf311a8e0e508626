"""Alerts from training code: a trial says "this run is diverging", and people and agents
hear of it.

Rules (:func:`check_alert`; a bad field is :class:`~lineage.errors.InvalidInput` naming it)
    ``level``: ``info``, ``warn`` or ``error`` (default ``info``). ``title``: 1-300
    characters without control characters. ``text``: at most 10,000 characters (line
    breaks allowed; default empty). ``step``: an integer from 0 to 2**53, or null.
    ``wall_time``: the sender's clock (seconds since the epoch), finite, or null.

Recording (:meth:`AlertUses.record_alert`)
    The alert is stored with its trial; in the same transaction the project's revision
    moves on (the prompt shows alerts, so its ETag must change) and an ``alert`` event is
    written to the webhook outbox (``lineage.monitor.hooks``): it exists exactly when the
    alert does. With an idempotency key (a durable client's retry), the same key and the
    same alert give back the stored alert (``created`` false) and another alert under that
    key is a :class:`~lineage.errors.Conflict` naming ``idempotency_key``.

Reading (:meth:`AlertUses.alerts`)
    Newest first, of the project or of one trial, at some levels, a page at a time
    (``before_id``: the id of the last alert seen).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from lineage.domain import check_idempotency_key
from lineage.errors import Conflict, InvalidInput
from lineage.monitor import hooks
from lineage.store.base import iso_stamp

if TYPE_CHECKING:  # pragma: no cover
    from lineage.store import Store

__all__ = [
    "ALERT_LEVELS",
    "MAX_TEXT",
    "MAX_TITLE",
    "Alert",
    "Alerts",
    "check_alert",
    "check_levels",
    "recent_alerts",
]

ALERT_LEVELS: tuple[str, ...] = ("info", "warn", "error")
MAX_TITLE = 300
MAX_TEXT = 10_000
MAX_STEP = 2**53
MAX_LIMIT = 1000
SCOPE = "alert"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_FIELDS = ("level", "title", "text", "step", "wall_time")


@dataclass(frozen=True, slots=True)
class Alert:
    id: int
    exp_id: str
    level: str
    title: str
    text: str
    step: int | None
    wall_time: float | None
    created_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _alert_from_row(row: Sequence[Any]) -> Alert:
    id_, exp_id, level, title, text, step, wall, created = row
    return Alert(
        int(id_),
        exp_id,
        level,
        title,
        text or "",
        None if step is None else int(step),
        None if wall is None else float(wall),
        iso_stamp(created),
    )


def check_alert(fields: Mapping[str, Any]) -> tuple[str, str, str, int | None, float | None]:
    """``(level, title, text, step, wall_time)`` of an alert, by the rules of the module doc."""
    unknown = sorted(set(fields) - set(_FIELDS))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a field of an alert; known: {', '.join(_FIELDS)}")
    level = fields.get("level") or "info"
    if level not in ALERT_LEVELS:
        raise InvalidInput("level", f"must be one of {', '.join(ALERT_LEVELS)}, got {level!r}")
    title = fields.get("title")
    if not isinstance(title, str) or not title.strip():
        raise InvalidInput("title", "must be a non-empty text")
    if len(title) > MAX_TITLE or _CONTROL.search(title):
        raise InvalidInput("title", f"must be at most {MAX_TITLE} characters without control characters")
    text = fields.get("text") or ""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        raise InvalidInput("text", f"must be a text of at most {MAX_TEXT} characters")
    step = fields.get("step")
    if step is not None and (type(step) is not int or not 0 <= step <= MAX_STEP):
        raise InvalidInput("step", f"must be an integer from 0 to {MAX_STEP} or null, got {step!r}")
    wall = fields.get("wall_time")
    if wall is not None:
        if type(wall) not in (int, float) or not math.isfinite(wall):
            raise InvalidInput("wall_time", f"must be a finite number or null, got {wall!r}")
        wall = float(wall)
    return level, title, text, step, wall


def check_levels(levels: Iterable[str] | str | None) -> list[str] | None:
    """The levels asked for (``"warn,error"`` or a list), each a known one; None: all."""
    if levels is None:
        return None
    names = [
        part.strip()
        for raw in ([levels] if isinstance(levels, str) else levels)
        for part in str(raw).split(",")
        if part.strip()
    ]
    for name in names:
        if name not in ALERT_LEVELS:
            raise InvalidInput("level", f"unknown level {name!r}; known: {', '.join(ALERT_LEVELS)}")
    return names or None


def recent_alerts(store: Store, conn: Any, project: Any, limit: int) -> list[Alert]:
    """The project's newest ``limit`` alerts, in the caller's transaction (the prompt's)."""
    return [_alert_from_row(row) for row in store.alerts.alert_rows(conn, project.id, limit=limit)]


def _hash(values: Sequence[Any]) -> str:
    return hashlib.sha256(json.dumps(list(values), ensure_ascii=False).encode()).hexdigest()


class Alerts:
    """record_alert, alerts, alerts_page."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def record_alert(
        self, project_slug: str, exp_id: str, fields: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> tuple[Alert, bool]:
        """Store an alert of trial ``exp_id`` with its webhook event (module doc);
        ``(the alert, whether it was stored now)``."""
        level, title, text, step, wall = check_alert(fields)
        key = check_idempotency_key(idempotency_key) if idempotency_key is not None else None
        digest = _hash([exp_id, level, title, text, step, wall])
        store = self.store
        with store.write() as conn:
            project = store.projects.project(conn, project_slug)
            trial_id = store.telemetry.trial_row_id(conn, project, exp_id)
            if key is not None and not store.tokens.claim_key(
                conn, project, SCOPE, key, exp_id=exp_id, body_hash=digest
            ):
                return self._replayed_alert(conn, project, key, digest, exp_id, level, title, text), False
            alert_id = store.alerts.insert_alert(
                conn, project.stored_id, trial_id, level=level, title=title, text=text, step=step, wall_time=wall
            )
            if key is not None:
                store.tokens.set_key_result(conn, project, SCOPE, key, {"alert_id": alert_id})
            store.progress.bump_revision(conn, project.stored_id)
            alert = _alert_from_row(store.alerts.alert_row(conn, project.stored_id, alert_id) or ())
            hooks.alert_event(store, conn, project, store.trials.trial(conn, project, exp_id), alert.to_dict())
        return alert, True

    def _replayed_alert(
        self, conn: Any, project: Any, key: str, digest: str, exp_id: str, level: str, title: str, text: str
    ) -> Alert:
        found = self.store.tokens.find_key(conn, project, SCOPE, key)
        stored_exp, stored_hash, result = found if found is not None else ("", "", {})
        row = self.store.alerts.alert_row(conn, project.id, int(result.get("alert_id", 0)))
        if stored_hash != digest or row is None:
            raise Conflict(
                f"Idempotency-Key {key!r} was used for another alert"
                + (f" (of trial {stored_exp!r})" if stored_exp != exp_id else ""),
                field="idempotency_key",
                existing=_alert_from_row(row).to_dict() if row is not None else {"exp_id": stored_exp},
                proposed={"exp_id": exp_id, "level": level, "title": title, "text": text},
            )
        return _alert_from_row(row)

    def alerts(
        self,
        project_slug: str,
        *,
        exp_id: str | None = None,
        levels: Iterable[str] | str | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[Alert]:
        """The project's alerts (of trial ``exp_id``), newest first (module doc)."""
        return self.alerts_page(project_slug, exp_id=exp_id, levels=levels, before_id=before_id, limit=limit)[0]

    def alerts_page(
        self,
        project_slug: str,
        *,
        exp_id: str | None = None,
        levels: Iterable[str] | str | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> tuple[list[Alert], int | None]:
        """:meth:`alerts`, and the ``before_id`` of the next page (None when none is left)."""
        chosen = check_levels(levels)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput("limit", f"must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
        if before_id is not None and (isinstance(before_id, bool) or not isinstance(before_id, int) or before_id < 1):
            raise InvalidInput("before_id", f"must be a positive integer, got {before_id!r}")
        store = self.store
        with store.read() as conn:
            project = store.projects.project(conn, project_slug)
            trial_id = store.telemetry.trial_row_id(conn, project, exp_id) if exp_id is not None else None
            rows = store.alerts.alert_rows(
                conn, project.stored_id, trial_id=trial_id, levels=chosen, before_id=before_id, limit=limit + 1
            )
        found = [_alert_from_row(row) for row in rows[:limit]]
        return found, (found[-1].id if len(rows) > limit else None)
