"""trials.exp_key: the numeric-aware sort key of exp_id, indexed

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26

Sorting by exp_id was by text (``…099, 100, 1000, …, 1009, 101``). ``exp_key``
(``lineage.exp_ids.exp_sort_key``: each run of digits as its length and its digits) sorts
as a reader counts, by plain byte comparison (``COLLATE "C"`` on PostgreSQL), on the
index ``(project_id, exp_key, seq)``. The store writes it with every insert; existing
rows are filled here with a frozen copy of the rule (an old revision must not change
when today's code changes; ``tests/lineage/test_exp_ids.py`` holds the two equal).
"""
from __future__ import annotations

import re

from alembic import op
import sqlalchemy as sa

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

_BATCH = 5_000
_RUNS = re.compile(r"(\d+)")


def frozen_exp_sort_key(exp_id: str) -> str:
    out = []
    for index, part in enumerate(_RUNS.split(exp_id)):
        if not part:
            continue
        if index % 2:
            digits = part.lstrip("0") or "0"
            out.append(f"{min(len(digits), 99):02d}{digits}")
        else:
            out.append(part)
    return "".join(out)


def upgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == 'postgresql'
    column_type = sa.String(length=1024, collation="C") if postgres else sa.String(length=1024)
    op.add_column('trials', sa.Column('exp_key', column_type, server_default='', nullable=False))
    rows = bind.execute(sa.text("SELECT id, exp_id FROM trials ORDER BY id")).all()
    update = sa.text("UPDATE trials SET exp_key = :key WHERE id = :id")
    for start in range(0, len(rows), _BATCH):
        batch = rows[start:start + _BATCH]
        bind.execute(update, [{"id": row[0], "key": frozen_exp_sort_key(row[1])} for row in batch])
    op.create_index(op.f('ix_trials_project_id_exp_key_seq'), 'trials', ['project_id', 'exp_key', 'seq'], unique=False)
    if postgres and rows:
        op.execute("ANALYZE trials")


def downgrade() -> None:
    op.drop_index(op.f('ix_trials_project_id_exp_key_seq'), table_name='trials')
    op.drop_column('trials', 'exp_key')  # SQLite >= 3.35 drops a column in place (its triggers stay)
