"""Stored concepts and min-hash sketches of trials, for similar_prior

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25

* ``trials.search_concepts``: the content concepts of hypothesis and notes, written by the
  store with the trial (NULL: not computed yet; ``lineage.migrate`` fills in the rows of
  a database upgraded from before this revision, and the ranker computes a NULL one).
* ``trial_sketch``: ``(project_id, band, seq)``, the min-hash keys of each trial's concept
  set; ``similar_prior`` reads the newest trials sharing each band of a new trial.

This revision imports nothing from ``lineage``.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('trials', schema=None) as batch_op:
        batch_op.add_column(sa.Column('search_concepts', sa.Text(), nullable=True))
    op.create_table('trial_sketch',
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('band', sa.BigInteger(), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_trial_sketch_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project_id', 'band', 'seq', name=op.f('pk_trial_sketch'))
    )


def downgrade() -> None:
    op.drop_table('trial_sketch')
    with op.batch_alter_table('trials', schema=None) as batch_op:
        batch_op.drop_column('search_concepts')
