"""trial_patches, and knob changes read again: results-file columns, unparsed values, concepts

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29

``trial_patches`` holds one row per trial that carries a git patch: the digest of what the
patch changes (its added and removed lines), so a trial that makes the same change as an
earlier one is named its repeat. After the upgrade, ``lineage.migrate`` reads every
trial's knob changes again with today's rules (a results file's own columns, binary files
and unparsed values, the concept table in knob names), fills ``trial_patches`` and
recomputes the stored search concepts and sketches under the new concept table, in the
upgrade's transaction.

This revision imports nothing from ``lineage``.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('trial_patches',
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('digest', sa.String(length=32), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_trial_patches_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project_id', 'seq', name=op.f('pk_trial_patches'))
    )
    op.create_index(op.f('ix_trial_patches_project_id_digest_seq'), 'trial_patches', ['project_id', 'digest', 'seq'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_trial_patches_project_id_digest_seq'), table_name='trial_patches')
    op.drop_table('trial_patches')
