"""Migrations 0007 (stemmed full-text indexes) and 0008 (entry vectors)."""

from __future__ import annotations

import json

import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import HumanMessage, message_to_dict
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage.migrations import upgrade

from .helpers import pg_vector_sql
from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)


def _stemmed(db: Engine) -> bool:
    """Whether the entry index stems words (FTS5 porter, or the english configuration)."""
    with db.connect() as conn:
        if db.dialect.name == "sqlite":
            sql = conn.execute(
                sa.text("SELECT sql FROM sqlite_master WHERE name = 'tiermem_entry_fts'")
            ).scalar_one()
            return "porter" in str(sql)
        return "'english'" in pg_vector_sql(conn, "tiermem_entry")


def _has_vectors(db: Engine) -> bool:
    return sa.inspect(db).has_table("tiermem_entry_vector")


def test_upgrade_stems_and_adds_vectors_downgrade_undoes_both(url: str, db: Engine) -> None:
    """The downgrade to 0006 unstems the index and drops the vectors; entries stored
    then are found by another form of a word after the upgrade (the index is rebuilt
    over them) and can be embedded."""
    upgrade(url)
    assert _stemmed(db) and _has_vectors(db)
    downgrade(url, "0006")
    assert not _stemmed(db) and not _has_vectors(db)
    with db.begin() as conn:  # an entry written by revision 0006's schema
        conn.execute(
            sa.text(
                "INSERT INTO tiermem_session (project, session_id, created_at, last_accessed,"
                " access_count, memory_tier, last_seq, entry_count, entry_tokens,"
                " active_count, active_tokens, summary_count, summary_tokens, encoding,"
                " pending_calls, failures) VALUES ('default', 's', '2026-01-01',"
                " '2026-01-01', 0, 'active', 1, 1, 5, 1, 5, 0, 0, 'cl100k_base', '{}', 0)"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO tiermem_entry (session_pk, seq, type, role, content, message,"
                " timestamp, token_count, pinned, meta) SELECT pk, 1, 'message', 'user',"
                " 'we booked two trips', :message, '2026-01-01', 5, false, '{}'"
                " FROM tiermem_session"
            ),
            {"message": json.dumps(message_to_dict(HumanMessage("we booked two trips")))},
        )
    upgrade(url)
    assert _stemmed(db) and _has_vectors(db)
    with ConversationMemory(url, embeddings=DeterministicFakeEmbedding(size=8)) as memory:
        assert [hit.entry.content for hit in memory.search("trip", session_id="s")] == [
            "we booked two trips"
        ]
        assert memory.embed_missing() == 1
