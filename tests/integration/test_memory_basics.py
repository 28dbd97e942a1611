"""Writing and reading a conversation on SQLite and PostgreSQL."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from tiermem import ConversationMemory, EntryType, is_summary_message

from ..conftest import MemoryFactory


def test_add_and_read_round_trip(memory: ConversationMemory) -> None:
    """Entries come back in order with their types, roles and exact messages."""
    user = memory.add_user_message("s", "hello", channel="web")
    call = memory.add_tool_call("s", "search", {"q": "x"}, call_id="c1")
    result = memory.add_tool_result("s", "search", "found")
    reply = memory.add_assistant_message("s", "done")
    assert [e.seq for e in (user, call, result, reply)] == [1, 2, 3, 4]
    assert [e.type for e in (user, call, result, reply)] == [
        EntryType.MESSAGE,
        EntryType.TOOL_CALL,
        EntryType.TOOL_RESULT,
        EntryType.MESSAGE,
    ]
    assert user.metadata == {"channel": "web"}
    messages = memory.get_messages("s")
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert isinstance(messages[2], ToolMessage) and messages[2].tool_call_id == "c1"


def test_compression_keeps_budget_and_originals(make_memory: MemoryFactory) -> None:
    """Past max_tokens the context shrinks to summaries plus recent entries; nothing is lost."""
    from tiermem import MemoryConfig
    from tiermem.testing import FakeSummarizer

    memory = make_memory(
        config=MemoryConfig(max_tokens=300, recent_window=4, min_entries_to_compress=2),
        summarizer=FakeSummarizer(),
    )
    for turn in range(40):
        memory.add_user_message("s", f"question {turn} about the weather in a far away city")
        memory.add_assistant_message("s", f"answer {turn}: sunny with a light breeze all day")
    messages = memory.get_messages("s")
    assert is_summary_message(messages[0]) and isinstance(messages[0], SystemMessage)
    assert memory.counter.count_messages(messages) <= 300
    assert len(memory.get_entries("s")) == 80
    stats = memory.get_stats("s")
    assert stats.total_entries == 80 and stats.compressed_entries > 0
