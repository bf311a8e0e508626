"""project_notes: the project's notebook, insights not tied to one trial

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29

* ``project_notes``: one row per note an agent or a person wrote ("LR above 0.06
  diverges at depth >= 12"): its text, the trials it cites (a JSON array of exp_ids),
  who wrote it, the project's newest trial ``seq`` when it was written (a trial after
  it can contradict it) and when. Indexed for a project's newest notes.

This revision imports nothing from ``lineage``.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('project_notes',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('cites', sa.JSON(), nullable=False),
    sa.Column('author', sa.String(length=512), nullable=False),
    sa.Column('after_seq', sa.BigInteger(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_project_notes_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_project_notes'))
    )
    op.create_index(op.f('ix_project_notes_project_id_id'), 'project_notes', ['project_id', 'id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_project_notes_project_id_id'), table_name='project_notes')
    op.drop_table('project_notes')
