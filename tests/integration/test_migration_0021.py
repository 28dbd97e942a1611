"""Migration 0021 and fresh databases: on PostgreSQL the entries' and layer items'
search vectors keep no word positions (the documents' keep theirs, which ``ts_rank``
reads), and search finds the same rows either way."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage import fts
from tiermem._storage.migrations import upgrade

from .helpers import has_stored_vector, pg_vector_sql
from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

TABLES = ("tiermem_entry", "tiermem_layer_item", "tiermem_document")
TEXT = "Herons nest by the lake; the herons came back in March."
_ENTRY_VECTOR = fts.pg_vector(fts.ENTRY_INDEX, "")


def _stripped(db: Engine) -> dict[str, bool]:
    """Per table, whether its search vector strips positions (a stored column's, or
    its index's where the vector is not stored)."""
    with db.connect() as conn:
        return {table: pg_vector_sql(conn, table).startswith("strip(") for table in TABLES}


def _vector(db: Engine) -> str:
    with db.connect() as conn:
        vector = "fts" if has_stored_vector(conn, "tiermem_entry") else _ENTRY_VECTOR
        return str(conn.exec_driver_sql(f"SELECT {vector} FROM tiermem_entry").scalar_one())


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_fresh_entry_vector_holds_each_word_once_without_positions(url: str, db: Engine) -> None:
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", TEXT)
        assert [hit.entry.content for hit in memory.search("heron")] == [TEXT]
    assert _stripped(db) == {
        "tiermem_entry": True,
        "tiermem_layer_item": True,
        "tiermem_document": False,
    }
    assert _vector(db) == "'back' 'came' 'heron' 'lake' 'march' 'nest'"


@pytest.mark.parametrize("backend", ["postgres"])
def test_the_upgrade_strips_positions_and_the_downgrade_restores_them(url: str, db: Engine) -> None:
    upgrade(url)
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", TEXT)

    downgrade(url, "0020")
    assert _stripped(db) == dict.fromkeys(TABLES, False)
    assert _vector(db) == "'back':9 'came':8 'heron':1,7 'lake':5 'march':11 'nest':2"
    with ConversationMemory(url) as memory:
        assert [hit.entry.content for hit in memory.search("herons")] == [TEXT]

    upgrade(url)
    assert _stripped(db)["tiermem_entry"] and _stripped(db)["tiermem_layer_item"]
    assert _vector(db) == "'back' 'came' 'heron' 'lake' 'march' 'nest'"
    with ConversationMemory(url) as memory:
        assert [hit.entry.content for hit in memory.search("lake herons")] == [TEXT]
