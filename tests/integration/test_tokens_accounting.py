"""Token totals are kept incrementally: exact, and flat in the length of the session."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from sqlalchemy import event
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem._storage.fts import ENTRY_INDEX
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory


def assert_totals_exact(memory: ConversationMemory, sid: str) -> None:
    """The session's counters equal the sums over its stored entries and summaries."""
    entries = memory.get_entries(sid)
    active = [e for e in entries if not e.compressed]
    summaries = memory.get_summaries(sid)
    stats = memory.get_stats(sid)
    for entry in entries:
        assert entry.token_count == memory.counter.count_message(entry.message), entry.seq
    for summary in summaries:
        assert summary.token_count == memory.counter.count_text(summary.content)
    assert stats.total_entries == len(entries)
    assert stats.active_entries == len(active)
    assert stats.compressed_entries == len(entries) - len(active)
    assert stats.summaries == len(summaries)
    assert stats.total_tokens == sum(e.token_count for e in entries)
    assert stats.active_tokens == sum(e.token_count for e in active)
    assert stats.summary_tokens == sum(s.token_count for s in summaries)
    assert stats.context_tokens == stats.active_tokens + stats.summary_tokens


def test_totals_after_adds_and_compressions(make_memory: MemoryFactory) -> None:
    """get_stats equals the sums of the entries' counts after adds, compressions and merges."""
    memory = make_memory(
        config=MemoryConfig(
            max_tokens=300, recent_window=4, min_entries_to_compress=3, summary_share=0.1
        ),
        summarizer=FakeSummarizer(),
    )
    for turn in range(40):
        memory.add_user_message("s", f"turn {turn}: please explain topic {turn} in some detail")
        if turn % 5 == 0:
            memory.add_tool_call("s", "lookup", {"topic": turn}, call_id=f"c{turn}")
            memory.add_tool_result("s", "lookup", f"facts about {turn}", call_id=f"c{turn}")
        memory.add_assistant_message("s", f"topic {turn} is about things and more things")
        if turn % 7 == 0:
            assert_totals_exact(memory, "s")
    assert memory.get_stats("s").summaries >= 1
    assert any(s.level > 1 for s in memory.get_summaries("s")), "a merge happened"
    assert_totals_exact(memory, "s")
    memory.compress("s", force=True, keep=1)
    assert_totals_exact(memory, "s")


def test_entry_count_is_stored_once(make_memory: MemoryFactory) -> None:
    """An entry's token count is the counter's, for every kind of message."""
    memory = make_memory()
    entries = memory.add_messages(
        "s",
        [
            HumanMessage("hello", name="alice"),
            AIMessage("", tool_calls=[{"name": "f", "args": {"x": [1, 2]}, "id": "c"}]),
        ],
    )
    for entry in entries:
        assert entry.token_count == memory.counter.count_message(entry.message)
    assert memory.get_stats("s").total_tokens == sum(e.token_count for e in entries)


#: The statements of the batched full-text flush (SQLite).
FLUSH_STATEMENTS = (f"INSERT INTO {ENTRY_INDEX.name}(", f"DELETE FROM {ENTRY_INDEX.name}_pending")


@contextmanager
def count_statements(engine: Engine) -> Iterator[list[str]]:
    """Collect the SQL statements ``engine`` executes inside the block."""
    statements: list[str] = []

    def record(*args: Any) -> None:
        statements.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _grow(memory: ConversationMemory, sid: str, count: int) -> None:
    for start in range(0, count, 2_000):
        memory.add_messages(
            sid,
            [
                HumanMessage(f"message {i} of the long conversation")
                for i in range(start, start + 2_000)
            ][: count - start],
        )


def test_append_cost_is_flat_in_session_length(engine: Engine, make_memory: MemoryFactory) -> None:
    """Appending to a 10,000-entry session runs the same SQL statements as to a 10-entry
    one (apart from the batched full-text flush, which comes every FTS_BATCH entries stored
    anywhere, whatever the session's length)."""
    memory = make_memory(
        config=MemoryConfig(max_entries=1_000_000, max_tokens=100_000_000),
        summarizer=FakeSummarizer(),
    )
    _grow(memory, "short", 10)
    _grow(memory, "long", 10_000)
    assert memory.get_stats("long").total_entries == 10_000
    per_session: dict[str, list[list[str]]] = {}
    for sid in ("short", "long"):
        runs: list[list[str]] = []
        for _ in range(2):
            with count_statements(engine) as statements:
                memory.add_user_message(sid, "one more")
                memory.add_assistant_message(sid, "and a reply")
                memory.add_tool_call(sid, "t", {"a": 1}, call_id=f"call-{len(runs)}")
                memory.add_tool_result(sid, "t", "done", call_id=f"call-{len(runs)}")
            runs.append([s for s in statements if not s.startswith(FLUSH_STATEMENTS)])
        per_session[sid] = runs
    short, long = per_session["short"][1], per_session["long"][1]
    assert len(short) == len(long) and short == long
    assert len(short) <= 4 * 6, short  # a handful of statements per append
    assert memory.get_stats("long").total_entries == 10_008
