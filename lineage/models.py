"""ORM tables (SQLAlchemy 2, typed). Alembic's migrations/ are generated from these and a
test proves the two agree on SQLite and PostgreSQL.

Design notes:
* ``trials.seq`` is the insertion order inside a project (the line order of a
  results.tsv). "Recent", "first trial" and tie-breaks all use it.
* ``projects.next_seq`` doubles as the per-project write lock: every trial write updates
  that row first, which serializes writers of one project on both backends.
* ``projects.next_exp_number`` is one more than the largest all-digit exp_id, so an
  omitted exp_id is allocated without scanning the trials.
* ``projects.revision`` increases with every write to the project; ETags derive from it,
  so every server instance on one database agrees on them.
* ``parent_exp`` is text, not a foreign key: imported files may name parents that are
  not in the file, and the chain walk stops there (as fieldkit's does).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

class _JSONB(TypeDecorator):  # type: ignore[type-arg]
    """JSON, as ``jsonb`` on PostgreSQL: the PostgreSQL dialect's type is imported when a
    PostgreSQL connection needs it, so a SQLite server never loads that dialect."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect):  # type: ignore[no-untyped-def]
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


JSONType = _JSONB()
#: JSON kept as the text written, on both backends (``json`` on PostgreSQL): ``jsonb`` would
#: turn ``1e+23`` into an integer, ``-0.0`` into ``0.0`` and reorder keys (migration 0006).
JSONText = JSON()
ShortText = String(512)
#: compared byte by byte on both backends (SQLite's default; "C" on PostgreSQL)
ExpKeyText = String(1024).with_variant(String(1024, collation="C"), "postgresql")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class ProjectRow(Base):
    __tablename__ = "projects"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(100), unique=True)
    title: Mapped[str] = mapped_column(String(300), default="")
    metric_name: Mapped[str] = mapped_column(String(100), default="core_metric")
    lower_is_better: Mapped[bool] = mapped_column(Boolean, default=True)
    best_policy: Mapped[str] = mapped_column(String(20), default="kept")
    prompt_template: Mapped[str | None] = mapped_column(Text, nullable=True)
    source_format: Mapped[str | None] = mapped_column(String(40), nullable=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    next_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    next_exp_number: Mapped[int] = mapped_column(BigInteger, default=0)
    revision: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class TrialRow(Base):
    __tablename__ = "trials"
    __table_args__ = (
        UniqueConstraint("project_id", "exp_id"),
        UniqueConstraint("project_id", "seq"),
        # best (kept policy): per eligible status, the best metric, ties to lowest seq
        Index(None, "project_id", "status", "core_metric", "seq"),
        # best (fieldkit policy): every status but one, in metric order
        Index(None, "project_id", "core_metric", "seq"),
        # children of a trial (lineage tree, cycle checks)
        Index(None, "project_id", "parent_exp"),
        # numeric-aware id order (lineage.exp_ids): sorts, pages and exp_id ranges
        Index(None, "project_id", "exp_key", "seq"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(BigInteger)
    exp_id: Mapped[str] = mapped_column(ShortText)
    timestamp: Mapped[str] = mapped_column(ShortText, default="")
    specialist: Mapped[str] = mapped_column(ShortText, default="")
    parent_exp: Mapped[str] = mapped_column(ShortText, default="")
    baseline_exp: Mapped[str] = mapped_column(ShortText, default="")
    domain: Mapped[str] = mapped_column(ShortText, default="")
    hypothesis: Mapped[str] = mapped_column(Text, default="")
    expected_delta: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(40))
    core_metric: Mapped[float | None] = mapped_column(Float, nullable=True)
    val_bpb: Mapped[float | None] = mapped_column(Float, nullable=True)
    delta_vs_best: Mapped[float | None] = mapped_column(Float, nullable=True)
    train_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    total_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    job_name: Mapped[str] = mapped_column(ShortText, default="")
    snapshot_path: Mapped[str] = mapped_column(ShortText, default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    #: the tokens of hypothesis and notes (lineage.similar.search_text), written by the
    #: store; the full-text index on it is not a model (lineage.store.search)
    search_text: Mapped[str] = mapped_column(Text, default="", server_default="")
    #: the numeric-aware sort key of exp_id (lineage.exp_ids.exp_sort_key), written by the
    #: store with every insert; byte order on both backends (COLLATE "C" on PostgreSQL)
    exp_key: Mapped[str] = mapped_column(ExpKeyText, default="", server_default="")
    #: the content concepts of hypothesis and notes (lineage.similar.stored_concepts),
    #: written by the store so ranking needs no tokenizing; NULL: not computed yet
    search_concepts: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: the length of the chain ending at this trial (lineage.store.chain: the root is 1,
    #: a trial parent's + 1; 0 only for a trial on a parent cycle older data may hold) and
    #: the ancestor at the last multiple of ``CHAIN_SKIP`` below it ('' in the first
    #: block): written by the store with every insert and re-parenting, so a page reads the
    #: part of a 20,000-step chain it shows without walking the rest
    chain_depth: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    chain_skip: Mapped[str] = mapped_column(ShortText, default="", server_default="")
    ig_clip_scale_mean: Mapped[float | None] = mapped_column(Float, nullable=True)
    ig_clip_scale_std: Mapped[float | None] = mapped_column(Float, nullable=True)
    ig_clip_scale_min: Mapped[float | None] = mapped_column(Float, nullable=True)
    ig_clip_scale_max: Mapped[float | None] = mapped_column(Float, nullable=True)
    ig_clip_scale_frac_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    ig_clip_scale_frac_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: the client's JSON object, kept as written (JSONText)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONText, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


# -- tokens / telemetry / idempotency ---------------------------------------------------------


class ApiTokenRow(Base):
    """A bearer token of the HTTP API. Only the SHA-256 of the secret is stored.

    ``name`` is unique; a revoked token keeps its row (``revoked_at``) until a new token
    takes its name. ``last_used_at`` is written at most once a minute per token.
    """

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    role: Mapped[str] = mapped_column(String(20))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class LedgerSettingRow(Base):
    """A setting of the whole ledger (``lineage.auth``: ``anonymous_writes``), with who
    changed it last and when (the change is also logged)."""

    __tablename__ = "ledger_settings"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(String(100))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_by: Mapped[str] = mapped_column(String(200))


class IdempotencyKeyRow(Base):
    """A client's idempotency key, stored in the transaction of the write it guards.

    ``scope`` is ``trial`` (a trial creation: ``exp_id`` is the trial it made) or
    ``telemetry`` (a batch of points for trial ``exp_id``; ``result`` holds the count).
    ``body_hash`` is the SHA-256 of the canonical request body, so a replay with another
    body is told apart from a retry.
    """

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("project_id", "scope", "key"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    scope: Mapped[str] = mapped_column(String(20))
    key: Mapped[str] = mapped_column(String(255))
    exp_id: Mapped[str] = mapped_column(ShortText)
    body_hash: Mapped[str] = mapped_column(String(64))
    result: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class TelemetryPointRow(Base):
    """One telemetry value of a trial: ``name`` at ``step`` (and ``turn``; -1 when the
    quantity is not per turn). ``wall_time`` is the sender's clock, seconds since the epoch."""

    __tablename__ = "telemetry_points"
    __table_args__ = (Index(None, "trial_id", "name", "turn", "step"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    trial_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), ForeignKey("trials.id", ondelete="CASCADE")
    )
    step: Mapped[int] = mapped_column(BigInteger)
    turn: Mapped[int] = mapped_column(Integer, default=-1)
    name: Mapped[str] = mapped_column(String(200))
    value: Mapped[float] = mapped_column(Float)
    wall_time: Mapped[float | None] = mapped_column(Float, nullable=True)


# -- guardrails and webhooks (lineage.monitor.guardrails, lineage.monitor.hooks) -----------------------------


class TrialStatusTotalRow(Base):
    """Trials and the sum of their ``total_s`` per project and status: what the progress
    summary reads instead of aggregating the trials. Kept in step by database triggers on
    ``trials`` (created by migration 0004), so every write path, bulk imports and
    cascading deletes included, updates it in the writer's transaction."""

    __tablename__ = "trial_status_totals"

    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True)
    status: Mapped[str] = mapped_column(String(40), primary_key=True)
    trials: Mapped[int] = mapped_column(BigInteger, default=0)
    seconds: Mapped[float] = mapped_column(Float, default=0.0)


class TrialSketchRow(Base):
    """The min-hash sketch of a trial's concepts (``lineage.similar.sketch``): one row per
    band, written by the store with the trial. ``similar_prior`` reads, per band of the new
    trial, the newest trials sharing it: a bounded index walk, however large the project."""

    __tablename__ = "trial_sketch"

    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True)
    band: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)


class GuardrailPolicyRow(Base):
    """A project's guardrails (NULL: that guardrail is off) and which of them are tripped.

    ``tripped`` maps a guardrail's name to the trip (``value``, ``limit``, ``exp_id``,
    ``at``). It is written by the trial writer under the project's lock, so whether a
    trip is new is decided by the database, not by a server's memory.
    """

    __tablename__ = "guardrail_policies"

    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True)
    max_crash_streak: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_trials_without_improvement: Mapped[int | None] = mapped_column(Integer, nullable=True)
    budget_hours: Mapped[float | None] = mapped_column(Float, nullable=True)
    tripped: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class WebhookRow(Base):
    """A project's webhook. ``secret`` signs every delivery (HMAC-SHA256), so it is kept
    in clear; it is shown once, when the hook is made. ``events``: the event types sent."""

    __tablename__ = "webhooks"
    __table_args__ = (Index(None, "project_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(String(2000))
    events: Mapped[list[str]] = mapped_column(JSONType, default=list)
    body_format: Mapped[str] = mapped_column(String(20), default="json")
    secret: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class HookDeliveryRow(Base):
    """The outbox: one event for one webhook, written in the transaction of the write
    that caused it and sent later by ``lineage.monitor.delivery``.

    ``state`` is ``pending``, ``delivered`` or ``failed``. Times of the delivery loop are
    seconds since the epoch: ``next_attempt_at`` (backoff) and ``claimed_until`` (the
    lease of the worker sending it; another worker takes the row once it lapses).
    ``body`` is the exact JSON sent, so every retry signs the same bytes.
    """

    __tablename__ = "hook_deliveries"
    __table_args__ = (Index(None, "state", "next_attempt_at"), Index(None, "hook_id", "id"))

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    hook_id: Mapped[int] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"))
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    event_id: Mapped[str] = mapped_column(String(36))
    event_type: Mapped[str] = mapped_column(String(40))
    body: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(20), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[float] = mapped_column(Float)
    claimed_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    claim_token: Mapped[str | None] = mapped_column(String(36), nullable=True)
    last_error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


# -- alerts from training code (lineage.alerts) ------------------------------------------------


class TrialAlertRow(Base):
    """An alert a trial's training code raised ("this run is diverging"): ``level`` is
    ``info``, ``warn`` or ``error``; ``step`` and ``wall_time`` (the sender's clock,
    seconds since the epoch) say when, if the sender knew. Written with its webhook
    events in one transaction (``lineage.alerts``)."""

    __tablename__ = "trial_alerts"
    __table_args__ = (Index(None, "project_id", "id"), Index(None, "trial_id", "id"))

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    trial_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), ForeignKey("trials.id", ondelete="CASCADE")
    )
    level: Mapped[str] = mapped_column(String(10))
    title: Mapped[str] = mapped_column(String(300))
    text: Mapped[str] = mapped_column(Text, default="")
    step: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    wall_time: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
