"""trial_repeats: which trials ran the same code, for the noise floor

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29

One row per trial and repeat key (``lineage.noise``: a declared ``rerun_of``, the same
commit, the same patch, or a baseline): the key, the declared
``rerun_of``, the trial's scored metric and, once a second trial shares the key, the
seq of the key's first trial (``group_seq``). The rows of trials stored before this
revision are filled by ``lineage.migrate`` in the upgrade's transaction (the key is
today's code, which a frozen revision must not import).

This revision imports nothing from ``lineage``.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('trial_repeats',
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('code_key', sa.String(length=200), nullable=False),
    sa.Column('rerun_of', sa.String(length=512), nullable=True),
    sa.Column('metric', sa.Float(), nullable=True),
    sa.Column('group_seq', sa.BigInteger(), nullable=True),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_trial_repeats_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project_id', 'seq', 'code_key', name=op.f('pk_trial_repeats'))
    )
    op.create_index(op.f('ix_trial_repeats_project_id_code_key_seq'), 'trial_repeats', ['project_id', 'code_key', 'seq'], unique=False)
    op.create_index(op.f('ix_trial_repeats_project_id_group_seq'), 'trial_repeats', ['project_id', 'group_seq'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_trial_repeats_project_id_group_seq'), table_name='trial_repeats')
    op.drop_index(op.f('ix_trial_repeats_project_id_code_key_seq'), table_name='trial_repeats')
    op.drop_table('trial_repeats')
