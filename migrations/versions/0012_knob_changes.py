"""knob_changes: the knobs each trial changed, old value to new

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28

One row per trial (``seq``) and normalised knob name (``knob``): the name as written, the
old and new values as written and as numbers, a factor ("double the batch size") and the
source it was read from (the git patch, ``extra.config`` or the hypothesis). The store
writes them with every trial; the rows of trials stored before this revision are filled
by ``lineage.migrate`` in the upgrade's transaction (the extraction is today's code, which
a frozen revision must not import).

This revision imports nothing from ``lineage``.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('knob_changes',
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('knob', sa.String(length=120), nullable=False),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('old_value', sa.String(length=200), nullable=True),
    sa.Column('new_value', sa.String(length=200), nullable=True),
    sa.Column('old_number', sa.Float(), nullable=True),
    sa.Column('new_number', sa.Float(), nullable=True),
    sa.Column('factor', sa.Float(), nullable=True),
    sa.Column('source', sa.String(length=20), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_knob_changes_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project_id', 'seq', 'knob', name=op.f('pk_knob_changes'))
    )
    op.create_index(op.f('ix_knob_changes_project_id_knob_seq'), 'knob_changes', ['project_id', 'knob', 'seq'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_knob_changes_project_id_knob_seq'), table_name='knob_changes')
    op.drop_table('knob_changes')
