"""trials.lease_s: a claim's own lease

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29

A claim names its lease (``lease_s``, seconds, bounded by ``lineage.domain``): a running
trial whose last sign of life is older than its own lease ends as ``harness_abort``.
NULL (every trial stored before this revision, and a running trial recorded without a
claim): the project's lease (``running_lease_s``, default 600 s) applies, as before.

This revision imports nothing from ``lineage``.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('trials', sa.Column('lease_s', sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column('trials', 'lease_s')  # SQLite >= 3.35 drops a column in place
