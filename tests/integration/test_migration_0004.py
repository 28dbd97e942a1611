"""Migration 0004: conversation entries indexed in batches (SQLite)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage.migrations import upgrade

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

PENDING = "tiermem_entry_fts_pending"


def _has_pending_table(db: Engine) -> bool:
    return PENDING in sa.inspect(db).get_table_names()


def _found(url: str, word: str) -> int:
    with ConversationMemory(url) as memory:
        return len(memory.search(word, limit=100))


def _indexed(db: Engine, word: str) -> int:
    """Entries the full-text index finds ``word`` in, read as the tables stand (a
    memory needs the columns of later revisions)."""
    if db.dialect.name == "sqlite":
        query = "SELECT count(*) FROM tiermem_entry_fts WHERE tiermem_entry_fts MATCH :word"
    else:
        query = "SELECT count(*) FROM tiermem_entry WHERE fts @@ to_tsquery('english', :word)"
    with db.connect() as conn:
        return int(conn.execute(sa.text(query), {"word": word}).scalar_one())


def test_downgrade_and_upgrade_keep_every_entry_searchable(url: str, db: Engine) -> None:
    """Entries stay searchable across 0004's downgrade (per-row triggers, pending
    entries indexed) and upgrade (pending entries again)."""
    upgrade(url)
    sqlite = db.dialect.name == "sqlite"
    assert _has_pending_table(db) == sqlite
    with ConversationMemory(url) as memory:
        for index in range(5):
            memory.add_user_message("s", f"a kingfisher sighting number {index}")
    downgrade(url, "0003")
    assert not _has_pending_table(db)
    assert _indexed(db, "kingfisher") == 5
    upgrade(url)
    assert _has_pending_table(db) == sqlite
    assert _found(url, "kingfisher") == 5
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", "one more kingfisher")
        assert len(memory.search("kingfisher", limit=100)) == 6
