"""Trial text search: trials.search_text and its full-text index

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

``trials.search_text`` holds the tokens of a trial's hypothesis and notes
(``lineage.similar.search_text``), written by the store. Existing rows are backfilled
here. The index lives outside the ORM models (migrations/env.py and the migration test
skip it through ``lineage.store.search.is_search_object``):

* SQLite: the contentless FTS5 table ``trial_search`` (rowid = ``-trials.id``, so newest
  first is its ascending order), kept in step by three triggers (insert, delete, update of
  ``search_text``), so every write path, bulk imports and cascading deletes included,
  updates it in the same transaction.
* PostgreSQL: the stored generated column ``trials.search_vector``
  (``to_tsvector('simple', search_text)``) and the GIN index ``ix_trials_search`` on it.
* Both: the vocabulary table ``trial_search_terms`` (every indexed word of 3 or more
  characters; prefix terms are expanded through it, see ``lineage.store.search``),
  filled here from the backfilled texts and by the store on every write.

This revision imports nothing from ``lineage``: its DDL and the backfill's tokenizer are
frozen copies (an old revision must not change when today's code changes).
``tests/lineage/test_migrations.py`` checks that today's tokenizer still agrees with the
frozen one on a sample, so a divergence is a decision, not an accident.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Iterable

from alembic import op
import sqlalchemy as sa

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

_BACKFILL_BATCH = 5_000

# -- the search index's DDL, frozen ------------------------------------------------------------
#
# SQLite: a contentless FTS5 table whose rowid is ``-trials.id``, so that newest first is
# FTS5's ascending order, which it reads lazily (a descending scan first loads each
# term's whole doclist): 1.5-2x faster for the LIMITed candidate queries. Contentless
# rows are deleted by giving their indexed text back, which the triggers do.
#
# Bulk imports set a row in ``trial_search_bulk`` for the length of the import: the insert
# trigger then stands aside, and the import indexes its rows with one INSERT ... SELECT in
# ascending FTS rowid order. Through the trigger they would come in descending order, and
# FTS5 flushes its pending terms to a new segment whenever the rowid goes down (3x the
# whole import).
_SEARCH_TABLE = "trial_search"
_BULK_FLAG_TABLE = f"{_SEARCH_TABLE}_bulk"
SQLITE_SEARCH_DDL: tuple[str, ...] = (
    f"CREATE VIRTUAL TABLE {_SEARCH_TABLE} USING fts5(search_text, content='', "
    "tokenize='unicode61 remove_diacritics 0')",
    f"CREATE TABLE {_BULK_FLAG_TABLE} (importing INTEGER NOT NULL)",
    f"""CREATE TRIGGER {_SEARCH_TABLE}_insert AFTER INSERT ON trials
        WHEN NOT EXISTS (SELECT 1 FROM {_BULK_FLAG_TABLE}) BEGIN
        INSERT INTO {_SEARCH_TABLE}(rowid, search_text) VALUES (-new.id, new.search_text); END""",
    f"""CREATE TRIGGER {_SEARCH_TABLE}_delete AFTER DELETE ON trials BEGIN
        INSERT INTO {_SEARCH_TABLE}({_SEARCH_TABLE}, rowid, search_text) VALUES ('delete', -old.id, old.search_text); END""",
    f"""CREATE TRIGGER {_SEARCH_TABLE}_update AFTER UPDATE OF search_text ON trials BEGIN
        INSERT INTO {_SEARCH_TABLE}({_SEARCH_TABLE}, rowid, search_text) VALUES ('delete', -old.id, old.search_text);
        INSERT INTO {_SEARCH_TABLE}(rowid, search_text) VALUES (-new.id, new.search_text); END""",
)
#: Fills the SQLite index from the trials.
SQLITE_SEARCH_FILL = f"INSERT INTO {_SEARCH_TABLE}(rowid, search_text) SELECT -id, search_text FROM trials ORDER BY id DESC"
SQLITE_SEARCH_DROP: tuple[str, ...] = (
    f"DROP TRIGGER IF EXISTS {_SEARCH_TABLE}_update",
    f"DROP TRIGGER IF EXISTS {_SEARCH_TABLE}_delete",
    f"DROP TRIGGER IF EXISTS {_SEARCH_TABLE}_insert",
    f"DROP TABLE IF EXISTS {_SEARCH_TABLE}",
    f"DROP TABLE IF EXISTS {_BULK_FLAG_TABLE}",
)
# PostgreSQL: a GIN pending list of at most 128 kB (default 4 MB). New words wait in that
# list until it is full, and every search reads all of it: with 4 MB, searches after an
# import or a few thousand records are 5-10x slower. (fastupdate off: imports 2-3x slower.)
#
# The tsvector is a stored generated column, not an index expression: a plan that walks
# the (project_id, seq) index newest first and filters by the query (PostgreSQL's choice
# when many trials match) then reads it instead of parsing every row's text again
# (a common one-word query: 50 ms -> 1 ms on a 100,000-trial project).
_POSTGRES_SEARCH_INDEX = "ix_trials_search"
_POSTGRES_VECTOR_COLUMN = "search_vector"
POSTGRES_SEARCH_DDL: tuple[str, ...] = (
    f"ALTER TABLE trials ADD COLUMN {_POSTGRES_VECTOR_COLUMN} tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, search_text)) STORED",
    f"CREATE INDEX {_POSTGRES_SEARCH_INDEX} ON trials USING gin ({_POSTGRES_VECTOR_COLUMN}) "
    "WITH (gin_pending_list_limit = 128)",
)
POSTGRES_SEARCH_DROP: tuple[str, ...] = (
    f"DROP INDEX IF EXISTS {_POSTGRES_SEARCH_INDEX}",
    f"ALTER TABLE trials DROP COLUMN IF EXISTS {_POSTGRES_VECTOR_COLUMN}",
)
# Every word of 3 or more characters ever written to ``trials.search_text``. Binary ("C")
# order on both backends, so a prefix's words are one key range.
_TERMS_TABLE = "trial_search_terms"
SQLITE_TERMS_DDL = f"CREATE TABLE {_TERMS_TABLE} (term TEXT NOT NULL PRIMARY KEY) WITHOUT ROWID"
POSTGRES_TERMS_DDL = f'CREATE TABLE {_TERMS_TABLE} (term TEXT COLLATE "C" NOT NULL PRIMARY KEY)'

# -- the tokenizer of the backfill, frozen -----------------------------------------------------
#
# lineage.similar.tokens / search_text and the search index's vocabulary rule, copied here
# when this revision was frozen: NFKC-normalised, case-folded text; markup tags and
# combining marks dropped; every maximal run of letters and digits a token, cut at 64
# characters; the vocabulary is the words of 3 or more characters.
_MAX_TOKEN_CHARS = 64
_MIN_PREFIX_CHARS = 3
_TAG = re.compile(r"<[^<>]{0,200}>")
_WORD = re.compile(r"[^\W_]+")


def tokens(text: str) -> list[str]:
    """The search tokens of ``text`` in order, stop-words included."""
    if not text:
        return []
    text = unicodedata.normalize("NFKC", _TAG.sub(" ", text)).casefold()
    if not text.isascii():
        text = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
        text = unicodedata.normalize("NFKC", text)
    return [word[:_MAX_TOKEN_CHARS] for word in _WORD.findall(text)]


def search_text(hypothesis: str, notes: str) -> str:
    """``trials.search_text``: the tokens of both, space-joined."""
    return " ".join(tokens(hypothesis) + tokens(notes))


def vocabulary(search_texts: Iterable[str]) -> set[str]:
    """The words of ``trials.search_text`` values that go to the vocabulary table."""
    return {word for text in search_texts for word in text.split() if len(word) >= _MIN_PREFIX_CHARS}


def upgrade() -> None:
    with op.batch_alter_table('trials', schema=None) as batch_op:
        batch_op.add_column(sa.Column('search_text', sa.Text(), nullable=False, server_default=''))
    bind = op.get_bind()
    op.execute(SQLITE_TERMS_DDL if bind.dialect.name == 'sqlite' else POSTGRES_TERMS_DDL)
    _backfill()
    if bind.dialect.name == 'sqlite':
        for statement in SQLITE_SEARCH_DDL:
            op.execute(statement)
        op.execute(SQLITE_SEARCH_FILL)
    else:
        for statement in POSTGRES_SEARCH_DDL:
            op.execute(statement)


def _backfill() -> None:
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
        for statement in SQLITE_SEARCH_DROP:
            op.execute(statement)
    else:
        for statement in POSTGRES_SEARCH_DROP:
            op.execute(statement)
    op.execute("DROP TABLE IF EXISTS trial_search_terms")
    with op.batch_alter_table('trials', schema=None) as batch_op:
        batch_op.drop_column('search_text')
