"""initial schema: projects and trials

Revision ID: 0001
Revises: 
Create Date: 2026-11-23
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('projects',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('slug', sa.String(length=100), nullable=False),
    sa.Column('title', sa.String(length=300), nullable=False),
    sa.Column('metric_name', sa.String(length=100), nullable=False),
    sa.Column('lower_is_better', sa.Boolean(), nullable=False),
    sa.Column('best_policy', sa.String(length=20), nullable=False),
    sa.Column('prompt_template', sa.Text(), nullable=True),
    sa.Column('source_format', sa.String(length=40), nullable=True),
    sa.Column('settings', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('next_seq', sa.BigInteger(), nullable=False),
    sa.Column('next_exp_number', sa.BigInteger(), nullable=False),
    sa.Column('revision', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_projects')),
    sa.UniqueConstraint('slug', name=op.f('uq_projects_slug'))
    )
    op.create_table('trials',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('exp_id', sa.String(length=512), nullable=False),
    sa.Column('timestamp', sa.String(length=512), nullable=False),
    sa.Column('specialist', sa.String(length=512), nullable=False),
    sa.Column('parent_exp', sa.String(length=512), nullable=False),
    sa.Column('baseline_exp', sa.String(length=512), nullable=False),
    sa.Column('domain', sa.String(length=512), nullable=False),
    sa.Column('hypothesis', sa.Text(), nullable=False),
    sa.Column('expected_delta', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=40), nullable=False),
    sa.Column('core_metric', sa.Float(), nullable=True),
    sa.Column('val_bpb', sa.Float(), nullable=True),
    sa.Column('delta_vs_best', sa.Float(), nullable=True),
    sa.Column('train_s', sa.Float(), nullable=True),
    sa.Column('total_s', sa.Float(), nullable=True),
    sa.Column('job_name', sa.String(length=512), nullable=False),
    sa.Column('snapshot_path', sa.String(length=512), nullable=False),
    sa.Column('notes', sa.Text(), nullable=False),
    sa.Column('ig_clip_scale_mean', sa.Float(), nullable=True),
    sa.Column('ig_clip_scale_std', sa.Float(), nullable=True),
    sa.Column('ig_clip_scale_min', sa.Float(), nullable=True),
    sa.Column('ig_clip_scale_max', sa.Float(), nullable=True),
    sa.Column('ig_clip_scale_frac_low', sa.Float(), nullable=True),
    sa.Column('ig_clip_scale_frac_high', sa.Float(), nullable=True),
    sa.Column('extra', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_trials_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_trials')),
    sa.UniqueConstraint('project_id', 'exp_id', name=op.f('uq_trials_project_id_exp_id')),
    sa.UniqueConstraint('project_id', 'seq', name=op.f('uq_trials_project_id_seq'))
    )
    with op.batch_alter_table('trials', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_trials_project_id_core_metric_seq'), ['project_id', 'core_metric', 'seq'], unique=False)
        batch_op.create_index(batch_op.f('ix_trials_project_id_parent_exp'), ['project_id', 'parent_exp'], unique=False)
        batch_op.create_index(batch_op.f('ix_trials_project_id_status_core_metric_seq'), ['project_id', 'status', 'core_metric', 'seq'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('trials', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_trials_project_id_status_core_metric_seq'))
        batch_op.drop_index(batch_op.f('ix_trials_project_id_parent_exp'))
        batch_op.drop_index(batch_op.f('ix_trials_project_id_core_metric_seq'))

    op.drop_table('trials')
    op.drop_table('projects')
