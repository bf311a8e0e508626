"""Trial text search: trials.search_text and its full-text index

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

``trials.search_text`` holds the tokens of a trial's hypothesis and notes
(``lineage.similar.search_text``), written by the store. Existing rows are backfilled
here. The index lives outside the ORM models (migrations/env.py and the migration test
skip it through ``lineage.store_search.is_search_object``):

* SQLite: the contentless FTS5 table ``trial_search`` (rowid = ``-trials.id``, so newest
  first is its ascending order), kept in step by three triggers (insert, delete, update of
  ``search_text``), so every write path, bulk imports and cascading deletes included,
  updates it in the same transaction.
* PostgreSQL: the stored generated column ``trials.search_vector``
  (``to_tsvector('simple', search_text)``) and the GIN index ``ix_trials_search`` on it.
* Both: the vocabulary table ``trial_search_terms`` (every indexed word of 3 or more
  characters; prefix terms are expanded through it, see ``lineage.store_search``),
  filled here from the backfilled texts and by the store on every write.
"""
from __future__ import annotations

from alembic import op
import sqlalchemy as sa

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

_BACKFILL_BATCH = 5_000


def upgrade() -> None:
    with op.batch_alter_table('trials', schema=None) as batch_op:
        batch_op.add_column(sa.Column('search_text', sa.Text(), nullable=False, server_default=''))
    bind = op.get_bind()
    from lineage.store_search import POSTGRES_TERMS_DDL, SQLITE_TERMS_DDL

    op.execute(SQLITE_TERMS_DDL if bind.dialect.name == 'sqlite' else POSTGRES_TERMS_DDL)
    _backfill()
    if bind.dialect.name == 'sqlite':
        from lineage.store_search import SQLITE_SEARCH_DDL, SQLITE_SEARCH_FILL

        for statement in SQLITE_SEARCH_DDL:
            op.execute(statement)
        op.execute(SQLITE_SEARCH_FILL)
    else:
        from lineage.store_search import POSTGRES_SEARCH_DDL

        for statement in POSTGRES_SEARCH_DDL:
            op.execute(statement)


def _backfill() -> None:
    from lineage.similar import search_text
    from lineage.store_search import vocabulary

    bind = op.get_bind()
    conflict = "OR IGNORE " if bind.dialect.name == 'sqlite' else ""
    keep = "" if bind.dialect.name == 'sqlite' else " ON CONFLICT DO NOTHING"
    last_id = -1
    while True:
        rows = bind.execute(
            sa.text("SELECT id, hypothesis, notes FROM trials WHERE id > :last ORDER BY id LIMIT :n"),
            {"last": last_id, "n": _BACKFILL_BATCH},
        ).all()
        if not rows:
            return
        texts = [{"id": id_, "text": search_text(hypothesis or "", notes or "")} for id_, hypothesis, notes in rows]
        bind.execute(sa.text("UPDATE trials SET search_text = :text WHERE id = :id"), texts)
        words = vocabulary(row["text"] for row in texts)
        if words:
            bind.execute(sa.text(f"INSERT {conflict}INTO trial_search_terms (term) VALUES (:term){keep}"),
                         [{"term": word} for word in sorted(words)])
        last_id = rows[-1][0]


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == 'sqlite':
        from lineage.store_search import SQLITE_SEARCH_DROP

        for statement in SQLITE_SEARCH_DROP:
            op.execute(statement)
    else:
        from lineage.store_search import POSTGRES_SEARCH_DROP

        for statement in POSTGRES_SEARCH_DROP:
            op.execute(statement)
    op.execute("DROP TABLE IF EXISTS trial_search_terms")
    with op.batch_alter_table('trials', schema=None) as batch_op:
        batch_op.drop_column('search_text')
