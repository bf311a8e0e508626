"""Guardrail policies, webhooks and their outbox; the index of the progress summary

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

* ``guardrail_policies``: one row per project that has guardrails, with the trips in force.
* ``webhooks`` and ``hook_deliveries`` (the transactional outbox, see ``lineage.monitor.hooks``).
* ``trial_status_totals``: trials and the sum of ``total_s`` per project and status, kept
  in step with ``trials`` by triggers (``lineage.store_progress``; row triggers on SQLite,
  statement triggers with transition tables on PostgreSQL) and backfilled here.
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
    from lineage import store_progress

    op.execute(store_progress.TOTALS_BACKFILL)
    ddl = store_progress.SQLITE_TOTALS_DDL if op.get_bind().dialect.name == 'sqlite' else store_progress.POSTGRES_TOTALS_DDL
    for statement in ddl:
        op.execute(statement)


def downgrade() -> None:
    from lineage import store_progress

    drop = store_progress.SQLITE_TOTALS_DROP if op.get_bind().dialect.name == 'sqlite' else store_progress.POSTGRES_TOTALS_DROP
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
