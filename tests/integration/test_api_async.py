"""The async twins behave like their sync counterparts, on one event loop."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from tiermem import ConversationMemory, EntryType, MemoryConfig, is_summary_message
from tiermem.errors import InvalidContent, InvalidSessionId, SessionNotFound
from tiermem.testing import FakeSummarizer, SignalRecorder

from ..conftest import MemoryFactory
from .helpers import assert_provider_valid


@pytest.fixture(name="memory")
def fixture_memory(make_memory: MemoryFactory) -> ConversationMemory:
    """A memory with manual compression and the fake summarizer."""
    return make_memory(
        config=MemoryConfig(auto_compress=False, recent_window=2, min_entries_to_compress=2),
        summarizer=FakeSummarizer(),
    )


async def test_async_writes(memory: ConversationMemory) -> None:
    """Every async add_* stores the same entry its sync twin would."""
    user = await memory.aadd_user_message("s", "hello", channel="web")
    reply = await memory.aadd_assistant_message("s", "hi", mood="ok")
    call = await memory.aadd_tool_call("s", "search", {"q": "x"}, call_id="c1")
    result = await memory.aadd_tool_result("s", "search", "found")
    context = await memory.aadd_context("s", "pinned fact", source="kb", pinned=True)
    message = await memory.aadd_message("s", HumanMessage("direct"), metadata={"k": 1})
    batch = await memory.aadd_messages("s", [AIMessage("a", id="m-a"), HumanMessage("b")])
    again = await memory.aadd_messages("s", [AIMessage("a", id="m-a")], skip_existing=True)
    stored = [user, reply, call, result, context, message, *batch]
    assert again == []
    assert [e.seq for e in stored] == list(range(1, 9))
    assert [e.type for e in stored[:5]] == [
        EntryType.MESSAGE,
        EntryType.MESSAGE,
        EntryType.TOOL_CALL,
        EntryType.TOOL_RESULT,
        EntryType.CONTEXT,
    ]
    assert user.metadata == {"channel": "web"} and context.pinned and message.metadata == {"k": 1}
    assert [e.id for e in await memory.aget_entries("s")] == [e.id for e in stored]
    assert [e.id for e in memory.get_entries("s")] == [e.id for e in stored]


async def test_async_reads_match_sync(memory: ConversationMemory) -> None:
    """Async reads return what the sync reads return."""
    for i in range(6):
        await memory.aadd_user_message("s", f"question {i} with some words")
        await memory.aadd_assistant_message("s", f"answer {i} with some words")
    result = await memory.acompress("s", force=True)
    assert result is not None
    messages = await memory.aget_messages("s")
    assert is_summary_message(messages[0]) and messages == memory.get_messages("s")
    assert_provider_valid(messages)
    assert await memory.aget_context_for_llm("s") == memory.get_context_for_llm("s")
    assert await memory.aget_active_entries("s") == memory.get_active_entries("s")
    assert await memory.aget_entries("s", include_compressed=False) == memory.get_entries(
        "s", include_compressed=False
    )
    assert await memory.aget_summaries("s") == memory.get_summaries("s") == [result.summary]
    assert [e.id for e in await memory.aexpand_summary(result.summary.id)] == list(
        result.summary.original_entry_ids
    )
    sync_stats, async_stats = memory.get_stats("s"), await memory.aget_stats("s")
    assert (async_stats.total_entries, async_stats.context_tokens) == (
        sync_stats.total_entries,
        sync_stats.context_tokens,
    )
    assert [s.session_id for s in await memory.alist_sessions()] == ["s"]


async def test_async_export_import_clear(memory: ConversationMemory) -> None:
    """Export, import and clear have async twins with the same results."""
    await memory.aadd_user_message("s", "keep this \x00 exactly")
    state = await memory.aexport_session("s")
    assert state.to_json() == memory.export_session("s").to_json()
    assert await memory.aimport_session(state.to_json(), session_id="copy") == "copy"
    with SignalRecorder(memory).recording() as recorder:
        assert await memory.aclear_session("s") == 1
    assert recorder.of("session:cleared") == [{"session_id": "s", "entries_removed": 1}]
    assert [e.content for e in await memory.aget_entries("copy")] == ["keep this \x00 exactly"]
    with pytest.raises(SessionNotFound):
        await memory.aget_stats("s")


async def test_async_errors_are_the_sync_errors(memory: ConversationMemory) -> None:
    """Bad input raises the same typed errors from the async twins."""
    with pytest.raises(InvalidSessionId):
        await memory.aadd_user_message("bad\n", "x")
    with pytest.raises(InvalidContent):
        await memory.aadd_tool_result("s", "search", "no call pending")
    with pytest.raises(InvalidContent):
        await memory.aadd_user_message("s", "\ud800")
    assert await memory.aget_messages("s") == []


async def test_concurrent_async_appends_keep_order(memory: ConversationMemory) -> None:
    """Appends gathered on one loop all land, with dense seqs and each writer's order kept."""

    async def writer(name: str) -> None:
        for i in range(10):
            await memory.aadd_user_message("s", f"{name}-{i}")

    await asyncio.gather(*(writer(name) for name in "abcd"))
    entries = await memory.aget_entries("s")
    assert [e.seq for e in entries] == list(range(1, 41))
    for name in "abcd":
        mine = [e.content for e in entries if e.content.startswith(name)]
        assert mine == [f"{name}-{i}" for i in range(10)]


async def test_async_auto_compression(make_memory: MemoryFactory) -> None:
    """The automatic trigger runs from the async API and calls the model asynchronously."""
    memory = make_memory(
        config=MemoryConfig(max_entries=6, recent_window=2, min_entries_to_compress=2),
        summarizer=FakeSummarizer(),
    )
    with SignalRecorder(memory).recording() as recorder:
        for i in range(10):
            await memory.aadd_user_message("s", f"message {i}")
    assert "compressed" in recorder.names()
    assert (await memory.aget_stats("s")).active_entries <= 6
