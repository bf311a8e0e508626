"""The schema as SQLAlchemy Core tables (one :data:`metadata`). Alembic's migrations/ are
generated from these and a test proves the two agree on SQLite and PostgreSQL.

Core, not the ORM: the store runs SQL and Core statements only, and importing
``sqlalchemy.orm`` cost the server 5.7 MiB of idle memory (issue 23;
``tests/test_startup_imports.py`` keeps it out). Columns are ``nullable=False`` unless
they say otherwise.

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

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class _JSONB(TypeDecorator):
    """JSON, as ``jsonb`` on PostgreSQL: the PostgreSQL dialect's type is imported when a
    PostgreSQL connection needs it, so a SQLite server never loads that dialect."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect):
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
#: a 64-bit id on PostgreSQL; INTEGER on SQLite, whose INTEGER PRIMARY KEY is the rowid
BigId = BigInteger().with_variant(Integer(), "sqlite")
Stamp = DateTime(timezone=True)

metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _project_id(**kw: Any) -> Column:
    """The owning project: deleting a project deletes its rows."""
    return Column("project_id", Integer, ForeignKey("projects.id", ondelete="CASCADE"), nullable=False, **kw)


projects = Table(
    "projects",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("slug", String(100), nullable=False, unique=True),
    Column("title", String(300), nullable=False, default=""),
    Column("metric_name", String(100), nullable=False, default="core_metric"),
    Column("lower_is_better", Boolean, nullable=False, default=True),
    Column("best_policy", String(20), nullable=False, default="kept"),
    Column("prompt_template", Text, nullable=True),
    Column("source_format", String(40), nullable=True),
    Column("settings", JSONType, nullable=False, default=dict),
    Column("next_seq", BigInteger, nullable=False, default=0),
    Column("next_exp_number", BigInteger, nullable=False, default=0),
    Column("revision", BigInteger, nullable=False, default=0),
    Column("created_at", Stamp, nullable=False),
    Column("updated_at", Stamp, nullable=False),
)


trials = Table(
    "trials",
    metadata,
    Column("id", BigId, primary_key=True),
    _project_id(),
    Column("seq", BigInteger, nullable=False),
    Column("exp_id", ShortText, nullable=False),
    Column("timestamp", ShortText, nullable=False, default=""),
    Column("specialist", ShortText, nullable=False, default=""),
    Column("parent_exp", ShortText, nullable=False, default=""),
    Column("baseline_exp", ShortText, nullable=False, default=""),
    Column("domain", ShortText, nullable=False, default=""),
    Column("hypothesis", Text, nullable=False, default=""),
    Column("expected_delta", Text, nullable=False, default=""),
    Column("status", String(40), nullable=False),
    Column("core_metric", Float, nullable=True),
    Column("val_bpb", Float, nullable=True),
    Column("delta_vs_best", Float, nullable=True),
    Column("train_s", Float, nullable=True),
    Column("total_s", Float, nullable=True),
    Column("job_name", ShortText, nullable=False, default=""),
    Column("snapshot_path", ShortText, nullable=False, default=""),
    Column("notes", Text, nullable=False, default=""),
    # the tokens of hypothesis and notes (lineage.similar.search_text), written by the
    # store; the full-text index on it is not in this metadata (lineage.store.search)
    Column("search_text", Text, nullable=False, default="", server_default=""),
    # the numeric-aware sort key of exp_id (lineage.exp_ids.exp_sort_key), written by the
    # store with every insert; byte order on both backends (COLLATE "C" on PostgreSQL)
    Column("exp_key", ExpKeyText, nullable=False, default="", server_default=""),
    # the content concepts of hypothesis and notes (lineage.similar.stored_concepts),
    # written by the store so ranking needs no tokenizing; NULL: not computed yet
    Column("search_concepts", Text, nullable=True),
    # the length of the chain ending at this trial (lineage.store.chain: the root is 1,
    # a trial parent's + 1; 0 only for a trial on a parent cycle older data may hold) and
    # the ancestor at the last multiple of ``CHAIN_SKIP`` below it ('' in the first
    # block): written by the store with every insert and re-parenting, so a page reads the
    # part of a 20,000-step chain it shows without walking the rest
    Column("chain_depth", Integer, nullable=False, default=0, server_default="0"),
    Column("chain_skip", ShortText, nullable=False, default="", server_default=""),
    # a running trial's lease (lineage.service.leases): who holds it ('' unnamed) and its
    # last heartbeat (NULL: none yet; updated_at stands in). Its start is created_at.
    Column("owner", ShortText, nullable=False, default="", server_default=""),
    Column("heartbeat_at", Stamp, nullable=True),
    # a claim's own lease in seconds (migration 0013); NULL: the project's lease
    Column("lease_s", Float, nullable=True),
    Column("ig_clip_scale_mean", Float, nullable=True),
    Column("ig_clip_scale_std", Float, nullable=True),
    Column("ig_clip_scale_min", Float, nullable=True),
    Column("ig_clip_scale_max", Float, nullable=True),
    Column("ig_clip_scale_frac_low", Float, nullable=True),
    Column("ig_clip_scale_frac_high", Float, nullable=True),
    # the client's JSON object, kept as written (JSONText)
    Column("extra", JSONText, nullable=False, default=dict),
    Column("created_at", Stamp, nullable=False),
    Column("updated_at", Stamp, nullable=False),
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


# -- tokens / telemetry / idempotency ---------------------------------------------------------

#: A bearer token of the HTTP API. Only the SHA-256 of the secret is stored.
#:
#: ``name`` is unique; a revoked token keeps its row (``revoked_at``) until a new token
#: takes its name. ``last_used_at`` is written at most once a minute per token.
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(100), nullable=False, unique=True),
    Column("role", String(20), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", Stamp, nullable=False),
    Column("last_used_at", Stamp, nullable=True),
    Column("revoked_at", Stamp, nullable=True),
)

#: A setting of the whole ledger (``lineage.auth``: ``anonymous_writes``), with who
#: changed it last and when (the change is also logged).
ledger_settings = Table(
    "ledger_settings",
    metadata,
    Column("name", String(100), primary_key=True),
    Column("value", String(100), nullable=False),
    Column("updated_at", Stamp, nullable=False),
    Column("updated_by", String(200), nullable=False),
)

#: A client's idempotency key, stored in the transaction of the write it guards.
#:
#: ``scope`` is ``trial`` (a trial creation: ``exp_id`` is the trial it made) or
#: ``telemetry`` (a batch of points for trial ``exp_id``; ``result`` holds the count).
#: ``body_hash`` is the SHA-256 of the canonical request body, so a replay with another
#: body is told apart from a retry.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("id", BigId, primary_key=True),
    _project_id(),
    Column("scope", String(20), nullable=False),
    Column("key", String(255), nullable=False),
    Column("exp_id", ShortText, nullable=False),
    Column("body_hash", String(64), nullable=False),
    Column("result", JSONType, nullable=False, default=dict),
    Column("created_at", Stamp, nullable=False),
    UniqueConstraint("project_id", "scope", "key"),
)

#: One telemetry value of a trial: ``name`` at ``step`` (and ``turn``; -1 when the
#: quantity is not per turn). ``wall_time`` is the sender's clock, seconds since the epoch.
telemetry_points = Table(
    "telemetry_points",
    metadata,
    Column("id", BigId, primary_key=True),
    Column("trial_id", BigId, ForeignKey("trials.id", ondelete="CASCADE"), nullable=False),
    Column("step", BigInteger, nullable=False),
    Column("turn", Integer, nullable=False, default=-1),
    Column("name", String(200), nullable=False),
    Column("value", Float, nullable=False),
    Column("wall_time", Float, nullable=True),
    Index(None, "trial_id", "name", "turn", "step"),
)


# -- guardrails and webhooks (lineage.monitor.guardrails, lineage.monitor.hooks) -----------------------------

#: Trials and the sum of their ``total_s`` per project and status: what the progress
#: summary reads instead of aggregating the trials. Kept in step by database triggers on
#: ``trials`` (created by migration 0004), so every write path, bulk imports and
#: cascading deletes included, updates it in the writer's transaction.
trial_status_totals = Table(
    "trial_status_totals",
    metadata,
    _project_id(primary_key=True),
    Column("status", String(40), primary_key=True),
    Column("trials", BigInteger, nullable=False, default=0),
    Column("seconds", Float, nullable=False, default=0.0),
)

#: The min-hash sketch of a trial's concepts (``lineage.similar.sketch``): one row per
#: band, written by the store with the trial. ``similar_prior`` reads, per band of the new
#: trial, the newest trials sharing it: a bounded index walk, however large the project.
trial_sketch = Table(
    "trial_sketch",
    metadata,
    _project_id(primary_key=True),
    Column("band", BigInteger, primary_key=True),
    Column("seq", BigInteger, primary_key=True),
)

#: The knobs each trial changed (``lineage.knobs.extract_changes``): one row per trial
#: ``seq`` and normalised ``knob``, written by the store with the trial (and again when
#: it is updated). ``name`` is the knob as written, ``old_value``/``new_value`` the values
#: as written (NULL: not known), their numbers when they are numbers, ``factor`` for
#: "double the batch size", ``source`` where it was read (patch, config, hypothesis).
#: A knob's history is a walk of ``(project_id, knob, seq)``.
knob_changes = Table(
    "knob_changes",
    metadata,
    _project_id(primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("knob", String(120), primary_key=True),
    Column("name", String(120), nullable=False),
    Column("old_value", String(200), nullable=True),
    Column("new_value", String(200), nullable=True),
    Column("old_number", Float, nullable=True),
    Column("new_number", Float, nullable=True),
    Column("factor", Float, nullable=True),
    Column("source", String(20), nullable=False),
    Index(None, "project_id", "knob", "seq"),
)

#: The repeat keys of each trial that has one (``lineage.noise.code_keys``, or a key of
#: the trial a declared ``rerun_of`` names), with its scored metric (NULL: its status
#: does not score the code). ``group_seq`` is the seq of the key's first trial once a
#: second trial shares the key (NULL while it is alone), so the noise floor reads only
#: the trials that have a repeat.
trial_repeats = Table(
    "trial_repeats",
    metadata,
    _project_id(primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("code_key", String(200), primary_key=True),
    Column("rerun_of", ShortText, nullable=True),
    Column("metric", Float, nullable=True),
    Column("group_seq", BigInteger, nullable=True),
    Index(None, "project_id", "code_key", "seq"),
    Index(None, "project_id", "group_seq"),
)

#: The project's notebook (``ledger.notes``): insights not tied to one trial, each citing
#: the trials that support it (``cites``: a JSON array of stored exp_ids), with who wrote
#: it and ``after_seq``, the project's newest trial when it was written (a later trial
#: may contradict it). A project's newest notes are a walk of ``(project_id, id)``.
project_notes = Table(
    "project_notes",
    metadata,
    Column("id", BigId, primary_key=True),
    _project_id(),
    Column("text", Text, nullable=False),
    Column("cites", JSONText, nullable=False),
    Column("author", ShortText, nullable=False),
    Column("after_seq", BigInteger, nullable=True),
    Column("created_at", Stamp, nullable=False),
    Index(None, "project_id", "id"),
)

#: What each trial's git patch changes, as a digest of its added and removed lines
#: (``lineage.knobs.patch_digest``): two trials with one digest made the same change, so
#: the second is a repeat of the first. Trials without a patch have no row.
trial_patches = Table(
    "trial_patches",
    metadata,
    _project_id(primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("digest", String(32), nullable=False),
    Index(None, "project_id", "digest", "seq"),
)

#: A project's guardrails (NULL: that guardrail is off) and which of them are tripped.
#:
#: ``tripped`` maps a guardrail's name to the trip (``value``, ``limit``, ``exp_id``,
#: ``at``). It is written by the trial writer under the project's lock, so whether a
#: trip is new is decided by the database, not by a server's memory.
guardrail_policies = Table(
    "guardrail_policies",
    metadata,
    _project_id(primary_key=True),
    Column("max_crash_streak", Integer, nullable=True),
    Column("max_trials_without_improvement", Integer, nullable=True),
    Column("budget_hours", Float, nullable=True),
    Column("tripped", JSONType, nullable=False, default=dict),
    Column("updated_at", Stamp, nullable=False),
)

#: A project's webhook. ``secret`` signs every delivery (HMAC-SHA256), so it is kept
#: in clear; it is shown once, when the hook is made. ``events``: the event types sent.
webhooks = Table(
    "webhooks",
    metadata,
    Column("id", Integer, primary_key=True),
    _project_id(),
    Column("url", String(2000), nullable=False),
    Column("events", JSONType, nullable=False, default=list),
    Column("body_format", String(20), nullable=False, default="json"),
    Column("secret", String(100), nullable=False),
    Column("created_at", Stamp, nullable=False),
    Index(None, "project_id"),
)

#: The outbox: one event for one webhook, written in the transaction of the write
#: that caused it and sent later by ``lineage.monitor.delivery``.
#:
#: ``state`` is ``pending``, ``delivered`` or ``failed``. Times of the delivery loop are
#: seconds since the epoch: ``next_attempt_at`` (backoff) and ``claimed_until`` (the
#: lease of the worker sending it; another worker takes the row once it lapses).
#: ``body`` is the exact JSON sent, so every retry signs the same bytes.
hook_deliveries = Table(
    "hook_deliveries",
    metadata,
    Column("id", BigId, primary_key=True),
    Column("hook_id", Integer, ForeignKey("webhooks.id", ondelete="CASCADE"), nullable=False),
    _project_id(),
    Column("event_id", String(36), nullable=False),
    Column("event_type", String(40), nullable=False),
    Column("body", Text, nullable=False),
    Column("state", String(20), nullable=False, default="pending"),
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", Float, nullable=False),
    Column("claimed_until", Float, nullable=True),
    Column("claim_token", String(36), nullable=True),
    Column("last_error", Text, nullable=False, default=""),
    Column("created_at", Stamp, nullable=False),
    Column("delivered_at", Stamp, nullable=True),
    Index(None, "state", "next_attempt_at"),
    Index(None, "hook_id", "id"),
)


# -- alerts from training code (lineage.alerts) ------------------------------------------------

#: An alert a trial's training code raised ("this run is diverging"): ``level`` is
#: ``info``, ``warn`` or ``error``; ``step`` and ``wall_time`` (the sender's clock,
#: seconds since the epoch) say when, if the sender knew. Written with its webhook
#: events in one transaction (``lineage.alerts``).
trial_alerts = Table(
    "trial_alerts",
    metadata,
    Column("id", BigId, primary_key=True),
    _project_id(),
    Column("trial_id", BigId, ForeignKey("trials.id", ondelete="CASCADE"), nullable=False),
    Column("level", String(10), nullable=False),
    Column("title", String(300), nullable=False),
    Column("text", Text, nullable=False, default=""),
    Column("step", BigInteger, nullable=True),
    Column("wall_time", Float, nullable=True),
    Column("created_at", Stamp, nullable=False),
    Index(None, "project_id", "id"),
    Index(None, "trial_id", "id"),
)
