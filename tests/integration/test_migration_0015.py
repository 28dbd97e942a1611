"""Migration 0015: the checkpoint tables of ``tiermem.threads``."""

from __future__ import annotations

import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage.migrations import upgrade
from tiermem.checkpoints import CheckpointQuery, NewCheckpoint
from tiermem.threads import Threads

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

TABLES = ("tiermem_checkpoint", "tiermem_checkpoint_blob", "tiermem_checkpoint_write")


def _tables(db: Engine) -> set[str]:
    return set(TABLES) & set(sa.inspect(db).get_table_names())


def _checkpoint(checkpoint_id: str) -> NewCheckpoint:
    return NewCheckpoint(
        thread_id="t-1",
        checkpoint_ns="",
        checkpoint_id=checkpoint_id,
        parent_id=None,
        run_id=None,
        versions={"messages": "1"},
        checkpoint=("json", b"{}"),
        metadata=("json", b"{}"),
        messages={("messages", "1"): [HumanMessage("hello", id="h0")]},
    )


def test_upgrade_adds_the_checkpoint_tables_and_downgrade_removes_them(
    url: str, db: Engine
) -> None:
    """The upgrade creates the three tables, the downgrade to 0010 drops them (and
    nothing else); on the upgraded schema a thread's checkpoints are stored with its
    messages as entries, and deleting the session deletes them."""
    upgrade(url)
    assert _tables(db) == set(TABLES)
    downgrade(url, "0010")
    assert _tables(db) == set()
    assert sa.inspect(db).has_table("tiermem_layer_item_vector")
    upgrade(url)
    with ConversationMemory(url) as memory:
        threads = Threads(memory)
        threads.put(_checkpoint("c1"))
        [stored] = threads.read(CheckpointQuery(thread_id="t-1", limit=1))
        assert stored.messages == {"messages": [HumanMessage("hello", id="h0")]}
        assert [e.content for e in memory.get_entries("t-1")] == ["hello"]
        memory.clear_session("t-1")
        assert threads.read(CheckpointQuery(thread_id="t-1")) == []
    with db.connect() as conn:
        for table in TABLES:
            assert conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one() == 0
