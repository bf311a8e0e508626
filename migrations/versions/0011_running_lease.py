"""trials.owner and trials.heartbeat_at: a running trial's lease

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28

``running`` became a status of its own (a trial under way: never the best, never a
failure). Its lease is two columns: ``owner`` (who holds it, '' when unnamed) and
``heartbeat_at`` (its last heartbeat; NULL: none yet, and then ``updated_at`` stands in).
Its start is ``created_at``. A running trial whose last sign of life is older than the
project's lease becomes ``harness_abort`` with a note (``lineage.service.leases``).

Before this revision a trainer's planned trial was stored as ``harness_abort`` with
``extra.state == "running"``. Those rows become ``running`` with ``heartbeat_at =
updated_at`` and the plan's ``extra.run_id`` as their owner, so the server's next lapse
sweep ends the ones whose trainer is gone, with a note saying why; a trainer still
running finishes its trial as before. ``extra`` is kept as written.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None

#: frozen: how the trainer client marked a planned trial before this revision
_PLANNED = {
    'sqlite': (
        "json_valid(extra) AND json_extract(extra, '$.state') = 'running'",
        "CASE WHEN json_type(extra, '$.run_id') = 'text' THEN substr(json_extract(extra, '$.run_id'), 1, 512) "
        "ELSE '' END",
    ),
    'postgresql': (
        "extra::jsonb ->> 'state' = 'running'",
        "CASE WHEN jsonb_typeof(extra::jsonb -> 'run_id') = 'string' "
        "THEN substr(extra::jsonb ->> 'run_id', 1, 512) ELSE '' END",
    ),
}


def upgrade() -> None:
    bind = op.get_bind()
    op.add_column('trials', sa.Column('owner', sa.String(length=512), server_default='', nullable=False))
    op.add_column('trials', sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True))
    running, owner = _PLANNED[bind.dialect.name]
    bind.execute(
        sa.text(
            f"UPDATE trials SET status = 'running', heartbeat_at = updated_at, owner = {owner} "
            f"WHERE status = 'harness_abort' AND {running}"
        )
    )


def downgrade() -> None:
    # a running trial was a planned harness_abort before this revision
    op.execute("UPDATE trials SET status = 'harness_abort' WHERE status = 'running'")
    op.drop_column('trials', 'heartbeat_at')  # SQLite >= 3.35 drops a column in place
    op.drop_column('trials', 'owner')
