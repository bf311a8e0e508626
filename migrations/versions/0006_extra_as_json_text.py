"""trials.extra as JSON text on PostgreSQL (``json``, not ``jsonb``)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25

``jsonb`` stores numbers as ``numeric`` and objects with their keys sorted: a float written
in exponent form (``1e+23``, any float from 1e16 up in Python's form) came back as an
integer, ``-0.0`` as ``0.0``, and the keys in another order, so what a POST returned
differed from a later GET and an identical retry by exp_id was a 409. ``json`` keeps the
text the ledger writes, as SQLite does; nothing queries inside ``extra``, so no
operator or index is lost. Rows written before keep the values jsonb had made of them.

SQLite: nothing to do (its JSON column is the text as written).
"""
from __future__ import annotations

from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("ALTER TABLE trials ALTER COLUMN extra TYPE json USING extra::json")


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("ALTER TABLE trials ALTER COLUMN extra TYPE jsonb USING extra::jsonb")
