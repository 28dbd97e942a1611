"""Migration 0019: ``tiermem_entry.retired_at``, added to a store's entries (every one
current) and dropped by a downgrade, its entries kept."""

from __future__ import annotations

import sqlalchemy as sa
from langchain_core.messages import HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph
from sqlalchemy.engine import Engine
from tiermem_langgraph import TieredSaver

from tiermem import ConversationMemory
from tiermem._storage.migrations import upgrade
from tiermem.testing import check_invariants

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

THREAD: RunnableConfig = {"configurable": {"thread_id": "t"}}


def _columns(db: Engine) -> set[str]:
    return {str(column["name"]) for column in sa.inspect(db).get_columns("tiermem_entry")}


def _entries(db: Engine) -> list[tuple[int, str]]:
    with db.connect() as conn:
        return [
            (int(r[0]), str(r[1]))
            for r in conn.execute(sa.text("SELECT id, content FROM tiermem_entry ORDER BY id"))
        ]


def _edit(url: str) -> None:
    """A thread whose first message is removed: its entry is retired."""
    with ConversationMemory(url) as memory:
        builder = StateGraph(MessagesState)
        builder.add_node("noop", lambda state: {})
        builder.add_edge(START, "noop")
        graph = builder.compile(checkpointer=TieredSaver(memory))
        graph.invoke({"messages": [HumanMessage("herons nest", id="h0")]}, THREAD)
        graph.invoke({"messages": [HumanMessage("egrets wade", id="h1")]}, THREAD)
        graph.update_state(THREAD, {"messages": [RemoveMessage(id="h0")]})
        assert [hit.entry.content for hit in memory.search("herons egrets")] == ["egrets wade"]


def test_the_column_is_added_and_dropped_with_the_entries_kept(url: str, db: Engine) -> None:
    """Upgraded, a removal retires an entry; a downgrade drops the column and keeps
    every entry, current (and counted) again; upgraded again, all are current."""
    upgrade(url)
    assert "retired_at" in _columns(db)
    _edit(url)
    entries = _entries(db)
    assert len(entries) == 2

    downgrade(url, "0018")
    assert "retired_at" not in _columns(db)
    assert _entries(db) == entries

    upgrade(url)
    assert "retired_at" in _columns(db)
    assert _entries(db) == entries
    with ConversationMemory(url) as memory:
        assert sorted(hit.entry.content for hit in memory.search("herons egrets")) == [
            "egrets wade",
            "herons nest",
        ]
        assert all(entry.retired_at is None for entry in memory.get_entries("t"))
        assert [m.content for m in memory.get_messages("t")] == ["herons nest", "egrets wade"]
        check_invariants(memory)  # the counters count both entries again
