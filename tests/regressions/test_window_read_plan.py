"""The turn's one read of its context does not sort the session's message bodies.

``get_messages`` and ``add_and_get_messages`` read the top-level summaries and the
active entries' messages in one statement. Ordered by kind and level as well as by
seq, SQLite copied every active message body into a temporary B-tree to sort them,
on every turn (about a third of the statement's time); ordered by seq alone it walks
the indexes of the active entries in order and merges them. Summaries and messages
still come back in order.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from tiermem import ConversationMemory, MemoryConfig
from tiermem._storage import statements
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory


def _turns(memory: ConversationMemory, count: int) -> None:
    for turn in range(count):
        memory.add_and_get_messages(
            "s", [HumanMessage(f"question {turn} " * 20), AIMessage(f"answer {turn} " * 40)]
        )


def test_the_active_messages_are_read_in_index_order_without_a_sort(tmp_path: Path) -> None:
    path = tmp_path / "plan.db"
    memory = ConversationMemory(
        url=f"sqlite:///{path}",
        config=MemoryConfig(max_tokens=1500),
        summarizer=FakeSummarizer(),
    )
    _turns(memory, 40)
    sql = str(statements.SELECT_MESSAGE_WINDOW.compile(dialect=memory.database.engine.dialect))
    memory.close()
    with sqlite3.connect(path) as conn:
        arguments = (1,) * sql.count("?")
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", arguments)]
    entries = next(i for i, step in enumerate(plan) if "tiermem_entry" in step)
    # The entries after the compressed prefix, then the pinned ones, each in index order.
    assert plan[entries].endswith("(session_pk=? AND seq>?)")
    assert any("ix_tiermem_entry_pinned" in step for step in plan[entries:])
    assert not any("TEMP B-TREE" in step for step in plan[entries:])


def test_summaries_come_first_oldest_first_then_messages_in_order(
    make_memory: MemoryFactory,
) -> None:
    """After compressions and merges, the context is the summaries in the order of the
    conversation, then the active messages in seq order (on both backends)."""
    memory = make_memory(config=MemoryConfig(max_tokens=1500), summarizer=FakeSummarizer())
    _turns(memory, 60)
    context = memory.get_messages("s", query="")  # no recalled block: the window alone
    kinds = [isinstance(message, SystemMessage) for message in context]
    assert kinds == sorted(kinds, reverse=True) and kinds[0]
    top = sorted(
        (s for s in memory.get_summaries("s") if s.parent_id is None), key=lambda s: s.first_seq
    )
    assert len(top) > 1
    shown = "\n".join(m.text for m in context if isinstance(m, SystemMessage))
    places = [shown.find(s.content) for s in top]
    assert -1 not in places and places == sorted(places)
    active = sorted((e for e in memory.get_entries("s") if not e.compressed), key=lambda e: e.seq)
    # The budget guard may leave out the oldest active messages; the rest are in order.
    shown_texts = [m.text for m in context if not isinstance(m, SystemMessage)]
    assert shown_texts and shown_texts == [e.message.text for e in active][-len(shown_texts) :]
