"""Migration 0010: the layer item vector table."""

from __future__ import annotations

import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage.migrations import upgrade

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)


def _has_vectors(db: Engine) -> bool:
    return sa.inspect(db).has_table("tiermem_layer_item_vector")


def test_upgrade_adds_item_vectors_and_downgrade_removes_them(url: str, db: Engine) -> None:
    """The upgrade creates the table with its index, the downgrade to 0009 drops it
    (and nothing else), and items stored at 0009 are embedded after the upgrade."""
    upgrade(url)
    assert _has_vectors(db)
    indexes = {ix["name"] for ix in sa.inspect(db).get_indexes("tiermem_layer_item_vector")}
    assert "ix_tiermem_layer_item_vector_scope" in indexes
    downgrade(url, "0009")
    assert not _has_vectors(db)
    assert sa.inspect(db).has_table("tiermem_entry_vector")
    assert sa.inspect(db).has_table("tiermem_event")
    with db.begin() as conn:  # an item written by revision 0009's schema
        conn.execute(
            sa.text(
                "INSERT INTO tiermem_layer_scope (project, scope, created_at)"
                " VALUES ('default', 'u', '2026-01-01')"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO tiermem_layer_item (scope_pk, layer, content, meta, token_count,"
                " byte_size, created_at, updated_at, last_accessed, access_count, memory_tier)"
                " SELECT pk, 'episodic', 'we booked two trips', '{}', 5, 19, '2026-01-01',"
                " '2026-01-01', '2026-01-01', 0, 'active' FROM tiermem_layer_scope"
            )
        )
    upgrade(url)
    assert _has_vectors(db)
    with ConversationMemory(url, embeddings=DeterministicFakeEmbedding(size=8)) as memory:
        assert memory.embed_missing() == 1
        with db.connect() as conn:
            count = conn.execute(sa.text("SELECT count(*) FROM tiermem_layer_item_vector"))
            assert count.scalar_one() == 1
        memory.layers("u").clear()
        with db.connect() as conn:
            count = conn.execute(sa.text("SELECT count(*) FROM tiermem_layer_item_vector"))
            assert count.scalar_one() == 0  # deleted with its item
