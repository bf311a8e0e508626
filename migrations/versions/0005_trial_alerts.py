"""Alerts from training code: trial_alerts

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

* ``trial_alerts``: one row per alert a trial's training code raised (level, title,
  text, the step and the sender's clock), indexed for a project's newest alerts and a
  trial's. Their webhook events go through the existing outbox (``hook_deliveries``).

This revision imports nothing from ``lineage``.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('trial_alerts',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('trial_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('level', sa.String(length=10), nullable=False),
    sa.Column('title', sa.String(length=300), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('step', sa.BigInteger(), nullable=True),
    sa.Column('wall_time', sa.Float(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_trial_alerts_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['trial_id'], ['trials.id'], name=op.f('fk_trial_alerts_trial_id_trials'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_trial_alerts'))
    )
    with op.batch_alter_table('trial_alerts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_trial_alerts_project_id_id'), ['project_id', 'id'], unique=False)
        batch_op.create_index(batch_op.f('ix_trial_alerts_trial_id_id'), ['trial_id', 'id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('trial_alerts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_trial_alerts_trial_id_id'))
        batch_op.drop_index(batch_op.f('ix_trial_alerts_project_id_id'))
    op.drop_table('trial_alerts')
