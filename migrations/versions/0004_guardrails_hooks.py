"""Guardrail policies, webhooks and their outbox; the index of the progress summary

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

* ``guardrail_policies``: one row per project that has guardrails, with the trips in force.
* ``webhooks`` and ``hook_deliveries`` (the transactional outbox, see ``lineage.monitor.hooks``).
* ``trial_status_totals``: trials and the sum of ``total_s`` per project and status
  (``lineage.store.progress`` reads it), kept in step with ``trials`` by triggers (row
  triggers on SQLite, statement triggers with transition tables on PostgreSQL) and
  backfilled here.

This revision imports nothing from ``lineage``: the triggers' DDL is a frozen copy (an old
revision must not change when today's code changes).
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')

# -- the per-status totals' triggers and backfill, frozen ------------------------------------
#
# SQLite: a row trigger per insert, delete and update of ``status``/``total_s`` (an UPSERT
# of one small row). PostgreSQL: statement triggers with transition tables, so a COPY of
# 100,000 rows adds one grouped UPSERT, not 100,000.

SQLITE_TOTALS_DDL: tuple[str, ...] = (
    """CREATE TRIGGER trial_totals_insert AFTER INSERT ON trials BEGIN
        INSERT INTO trial_status_totals (project_id, status, trials, seconds)
        VALUES (new.project_id, new.status, 1, COALESCE(new.total_s, 0))
        ON CONFLICT (project_id, status) DO UPDATE SET trials = trials + 1, seconds = seconds + excluded.seconds;
    END""",
    """CREATE TRIGGER trial_totals_delete AFTER DELETE ON trials BEGIN
        UPDATE trial_status_totals SET trials = trials - 1, seconds = seconds - COALESCE(old.total_s, 0)
        WHERE project_id = old.project_id AND status = old.status;
    END""",
    """CREATE TRIGGER trial_totals_update AFTER UPDATE OF status, total_s ON trials BEGIN
        UPDATE trial_status_totals SET trials = trials - 1, seconds = seconds - COALESCE(old.total_s, 0)
        WHERE project_id = old.project_id AND status = old.status;
        INSERT INTO trial_status_totals (project_id, status, trials, seconds)
        VALUES (new.project_id, new.status, 1, COALESCE(new.total_s, 0))
        ON CONFLICT (project_id, status) DO UPDATE SET trials = trials + 1, seconds = seconds + excluded.seconds;
    END""",
)
SQLITE_TOTALS_DROP: tuple[str, ...] = tuple(
    f"DROP TRIGGER IF EXISTS trial_totals_{op}" for op in ("insert", "delete", "update")
)
POSTGRES_TOTALS_DDL: tuple[str, ...] = (
    """CREATE FUNCTION lineage_trial_totals() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE trial_status_totals t SET trials = t.trials - o.n, seconds = t.seconds - o.s
            FROM (SELECT project_id, status, COUNT(*) AS n, COALESCE(SUM(total_s), 0) AS s
                  FROM old_rows GROUP BY project_id, status) o
            WHERE t.project_id = o.project_id AND t.status = o.status;
        END IF;
        IF TG_OP IN ('UPDATE', 'INSERT') THEN
            INSERT INTO trial_status_totals (project_id, status, trials, seconds)
            SELECT project_id, status, COUNT(*), COALESCE(SUM(total_s), 0) FROM new_rows GROUP BY project_id, status
            ON CONFLICT (project_id, status) DO UPDATE
            SET trials = trial_status_totals.trials + EXCLUDED.trials,
                seconds = trial_status_totals.seconds + EXCLUDED.seconds;
        END IF;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER trial_totals_insert AFTER INSERT ON trials REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION lineage_trial_totals()",
    "CREATE TRIGGER trial_totals_update AFTER UPDATE ON trials REFERENCING OLD TABLE AS old_rows "
    "NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lineage_trial_totals()",
    "CREATE TRIGGER trial_totals_delete AFTER DELETE ON trials REFERENCING OLD TABLE AS old_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION lineage_trial_totals()",
)
POSTGRES_TOTALS_DROP: tuple[str, ...] = (
    *(f"DROP TRIGGER IF EXISTS trial_totals_{op} ON trials" for op in ("insert", "delete", "update")),
    "DROP FUNCTION IF EXISTS lineage_trial_totals()",
)
#: Fills the totals from the trials already stored (once).
TOTALS_BACKFILL = (
    "INSERT INTO trial_status_totals (project_id, status, trials, seconds) "
    "SELECT project_id, status, COUNT(*), COALESCE(SUM(total_s), 0) FROM trials GROUP BY project_id, status"
)


def upgrade() -> None:
    op.create_table('guardrail_policies',
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('max_crash_streak', sa.Integer(), nullable=True),
    sa.Column('max_trials_without_improvement', sa.Integer(), nullable=True),
    sa.Column('budget_hours', sa.Float(), nullable=True),
    sa.Column('tripped', _JSON, nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_guardrail_policies_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project_id', name=op.f('pk_guardrail_policies'))
    )
    op.create_table('webhooks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('url', sa.String(length=2000), nullable=False),
    sa.Column('events', _JSON, nullable=False),
    sa.Column('body_format', sa.String(length=20), nullable=False),
    sa.Column('secret', sa.String(length=100), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_webhooks_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhooks'))
    )
    with op.batch_alter_table('webhooks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhooks_project_id'), ['project_id'], unique=False)

    op.create_table('hook_deliveries',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('hook_id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('event_id', sa.String(length=36), nullable=False),
    sa.Column('event_type', sa.String(length=40), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('state', sa.String(length=20), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.Float(), nullable=False),
    sa.Column('claimed_until', sa.Float(), nullable=True),
    sa.Column('claim_token', sa.String(length=36), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['hook_id'], ['webhooks.id'], name=op.f('fk_hook_deliveries_hook_id_webhooks'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_hook_deliveries_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_hook_deliveries'))
    )
    with op.batch_alter_table('hook_deliveries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_hook_deliveries_hook_id_id'), ['hook_id', 'id'], unique=False)
        batch_op.create_index(batch_op.f('ix_hook_deliveries_state_next_attempt_at'), ['state', 'next_attempt_at'], unique=False)

    op.create_table('trial_status_totals',
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=40), nullable=False),
    sa.Column('trials', sa.BigInteger(), nullable=False),
    sa.Column('seconds', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_trial_status_totals_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project_id', 'status', name=op.f('pk_trial_status_totals'))
    )
    op.execute(TOTALS_BACKFILL)
    ddl = SQLITE_TOTALS_DDL if op.get_bind().dialect.name == 'sqlite' else POSTGRES_TOTALS_DDL
    for statement in ddl:
        op.execute(statement)


def downgrade() -> None:
    drop = SQLITE_TOTALS_DROP if op.get_bind().dialect.name == 'sqlite' else POSTGRES_TOTALS_DROP
    for statement in drop:
        op.execute(statement)
    op.drop_table('trial_status_totals')
    with op.batch_alter_table('hook_deliveries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_hook_deliveries_state_next_attempt_at'))
        batch_op.drop_index(batch_op.f('ix_hook_deliveries_hook_id_id'))
    op.drop_table('hook_deliveries')
    with op.batch_alter_table('webhooks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhooks_project_id'))
    op.drop_table('webhooks')
    op.drop_table('guardrail_policies')
