"""ledger_settings: settings of the whole ledger; anonymous writes closed once a token existed

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25

``anonymous_writes`` (``lineage.auth``): ``closed`` from the first token on, until an admin
sets ``open``. A ledger that has a token row already (active or revoked) is closed here, so
revoking its last token no longer re-opens anonymous writes on a running server.
"""
from __future__ import annotations

from datetime import datetime, timezone

from alembic import op
import sqlalchemy as sa

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    settings = op.create_table('ledger_settings',
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('value', sa.String(length=100), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_by', sa.String(length=200), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_ledger_settings'))
    )
    had_token = op.get_bind().execute(sa.text("SELECT 1 FROM api_tokens LIMIT 1")).first() is not None
    if had_token:
        op.bulk_insert(settings, [{"name": "anonymous_writes", "value": "closed",
                                   "updated_at": datetime.now(timezone.utc), "updated_by": "migration 0007"}])


def downgrade() -> None:
    op.drop_table('ledger_settings')
