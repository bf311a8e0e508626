"""trials.chain_depth and trials.chain_skip: a chain's length and skip pointers, stored

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27

A 100,000-trial loop has a chain to its best of about 20,000 steps; the pages walked it
whole (a recursive query of 20,000 look-ups, 0.6 s) to show its ends. ``chain_depth`` is
the length of the chain ending at a trial (a root, or a trial whose parent is not in the
project, is 1; otherwise its parent's + 1) and ``chain_skip`` the exp_id of its ancestor
at depth ``(depth - 1) // 64 * 64`` ('' when that is 0): the store reaches any depth of a
chain in at most ``depth / 64 + 64`` look-ups (``lineage.store.chain``). Filled here from
the roots down, with a frozen copy of the rule; a trial on a parent cycle (which no write
path lets in) is not reachable from a root and keeps 0, "unknown", which readers walk.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

#: frozen: lineage.store.chain.CHAIN_SKIP when this revision was written
_SKIP = 64

_FILL = f"""
WITH RECURSIVE link(id, exp_id, project_id, depth, skip) AS (
    SELECT t.id, t.exp_id, t.project_id, 1, '' FROM trials t
    WHERE t.parent_exp = '' OR NOT EXISTS (
        SELECT 1 FROM trials p WHERE p.project_id = t.project_id AND p.exp_id = t.parent_exp)
    UNION ALL
    SELECT c.id, c.exp_id, c.project_id, l.depth + 1,
           CASE WHEN l.depth % {_SKIP} = 0 THEN l.exp_id ELSE l.skip END
    FROM link l JOIN trials c ON c.project_id = l.project_id AND c.parent_exp = l.exp_id
)
UPDATE trials SET chain_depth = link.depth, chain_skip = link.skip FROM link WHERE trials.id = link.id
"""


def upgrade() -> None:
    bind = op.get_bind()
    op.add_column('trials', sa.Column('chain_depth', sa.Integer(), server_default='0', nullable=False))
    op.add_column('trials', sa.Column('chain_skip', sa.String(length=512), server_default='', nullable=False))
    bind.execute(sa.text(_FILL))
    if bind.dialect.name == 'postgresql':
        op.execute("ANALYZE trials")


def downgrade() -> None:
    op.drop_column('trials', 'chain_skip')  # SQLite >= 3.35 drops a column in place
    op.drop_column('trials', 'chain_depth')
