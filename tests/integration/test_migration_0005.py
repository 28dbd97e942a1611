"""Migration 0005: the message-id index keeps only entries that have an id."""

from __future__ import annotations

import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, create_tables
from tiermem._storage.migrations import upgrade

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

INDEX = "ix_tiermem_entry_message_id"


def _definition(db: Engine) -> str:
    """The index's SQL as the database keeps it."""
    with db.connect() as conn:
        if db.dialect.name == "sqlite":
            query = "SELECT sql FROM sqlite_master WHERE name = :name"
        else:
            query = (
                "SELECT indexdef FROM pg_indexes"
                " WHERE indexname = :name AND schemaname = current_schema()"
            )
        return str(conn.execute(sa.text(query), {"name": INDEX}).scalar_one())


def _partial(db: Engine) -> bool:
    # PostgreSQL spells the predicate "WHERE (message_id IS NOT NULL)".
    return "WHERE message_id IS NOT NULL" in _definition(db).replace("(", "").replace(")", "")


def _skips_known_ids(url: str) -> None:
    """Messages already stored, by id, are skipped: the lookup the index serves."""
    messages = [HumanMessage("hello", id="h1"), AIMessage("hi", id="a1")]
    with ConversationMemory(url) as memory:
        memory.add_messages("s", messages, skip_existing=True)
        memory.add_messages("s", [*messages, HumanMessage("no id")], skip_existing=True)
        assert [m.id for m in memory.get_messages("s")] == ["h1", "a1", None]
        memory.clear_session("s")


def test_new_tables_have_the_partial_index(url: str, db: Engine) -> None:
    """create_tables and a fresh upgrade both make the index partial."""
    create_tables(db)
    assert _partial(db)
    upgrade(url)
    assert _partial(db)
    _skips_known_ids(url)


def test_downgrade_and_upgrade_rebuild_the_index(url: str, db: Engine) -> None:
    """Downgrading to 0004 indexes every entry again; upgrading makes it partial."""
    upgrade(url)
    downgrade(url, "0004")
    assert not _partial(db)  # (a memory needs later columns: it is used once upgraded)
    upgrade(url)
    assert _partial(db)
    _skips_known_ids(url)
