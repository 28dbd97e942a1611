"""Type-checked usage of tiermem's public API (mypy --strict only; never executed).

Each function is what a user would write; ``assert_type`` pins the declared
types, so a change to a public signature fails the type check.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, assert_type

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda

from tiermem import (
    DEFAULT_SUMMARY_PROMPT,
    CompressionResult,
    ContextMessages,
    ConversationMemory,
    EntryType,
    MemoryConfig,
    MemoryEntry,
    MemorySummary,
    SessionInfo,
    SessionState,
    SessionStats,
    SessionView,
    TiermemError,
    TokenCounter,
    is_summary_message,
)
from tiermem.errors import (
    CompressionConflict,
    CompressionInProgress,
    EntryTooLarge,
    ImportValidationError,
    InvalidArgument,
    InvalidContent,
    InvalidSessionId,
    SummarizationError,
    SummarizerFailed,
    SummarizerOutputInvalid,
    SummarizerTimeout,
    TokenizerUnavailable,
)
from tiermem.history import TieredChatMessageHistory
from tiermem.testing import FakeSummarizer, ManualClock, SignalRecorder, check_invariants


def construct() -> ConversationMemory:
    """Every constructor argument."""
    config = MemoryConfig(
        max_tokens=50_000,
        max_entries=100,
        recent_window=10,
        min_entries_to_compress=5,
        auto_compress=True,
        compression_ratio=0.3,
        summary_prompt=DEFAULT_SUMMARY_PROMPT,
    )
    assert_type(config.replace(max_tokens=1_000), MemoryConfig)
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)  # noqa: E731
    return ConversationMemory(
        "sqlite:///tiermem.db",
        project="support-bot",
        config=config,
        summarizer=FakeSummarizer(),
        model="gpt-4o-mini",
        clock=clock,
        lock_timeout=5.0,
    )


def summarizers(memory: ConversationMemory) -> None:
    """A chat model, a Runnable, a function and a coroutine function all type-check."""

    def plain(prompt: str) -> str:
        return prompt[:10]

    async def coroutine(prompt: str) -> str:
        return prompt[:10]

    memory.set_summarizer(FakeSummarizer(mode="ok"))
    memory.set_summarizer(RunnableLambda(lambda prompt: AIMessage(str(prompt)[:10])))
    memory.set_summarizer(plain)
    memory.set_summarizer(coroutine)
    memory.set_summarizer(None)


def write(memory: ConversationMemory) -> None:
    """The writing methods return stored entries."""
    assert_type(memory.add_user_message("s", "hi", channel="web"), MemoryEntry)
    assert_type(memory.add_assistant_message("s", "hello"), MemoryEntry)
    call = memory.add_tool_call("s", "search", {"q": "x"}, call_id="c1")
    assert_type(memory.add_tool_result("s", "search", "found", call_id="c1"), MemoryEntry)
    assert_type(memory.add_context("s", "fact", source="kb", pinned=True), MemoryEntry)
    assert_type(memory.add_message("s", HumanMessage("x"), metadata={"k": 1}), MemoryEntry)
    batch = memory.add_messages("s", [HumanMessage("a"), AIMessage("b")], skip_existing=True)
    assert_type(batch, list[MemoryEntry])
    assert_type(call.type, EntryType)
    assert_type(call.message, BaseMessage)
    assert_type(call.to_message(), BaseMessage)
    assert_type(call.metadata["k"], Any)


def read(memory: ConversationMemory) -> None:
    """The reading methods return messages, entries, summaries and value types."""
    assert_type(memory.get_messages("s"), ContextMessages)
    assert_type(memory.get_messages("s").version, str)
    version = memory.get_messages("s").version
    turn = [HumanMessage("q"), AIMessage("a")]
    assert_type(memory.add_and_get_messages("s", turn, expected_version=version), ContextMessages)
    assert_type(memory.get_context_for_llm("s"), str)
    assert_type(memory.get_active_entries("s"), list[MemoryEntry])
    assert_type(memory.get_entries("s", include_compressed=False), list[MemoryEntry])
    summaries = memory.get_summaries("s")
    assert_type(summaries, list[MemorySummary])
    assert_type(memory.expand_summary(summaries[0].id), list[MemoryEntry])
    stats = memory.get_stats("s")
    assert_type(stats, SessionStats)
    assert_type(stats.context_tokens, int)
    assert_type(memory.list_sessions(limit=10, offset=0), list[SessionInfo])
    view = memory.peek("s")  # records no access
    assert_type(view.context, str)
    assert_type(view.stats, SessionStats)
    assert_type(memory.list_projects()[0].sessions, int)
    assert_type(memory.track_access("s"), SessionInfo)
    assert_type(memory.prune_expired(dry_run=True, progress=lambda done, total: None), int)
    assert_type(memory.embed_missing(progress=lambda stored: None), int)
    looking = ConversationMemory("sqlite:///tiermem.db", read_only=True)
    assert_type(looking.peek("s"), SessionView)
    assert_type(is_summary_message(memory.get_messages("s")[0]), bool)
    assert_type(memory.history("s"), TieredChatMessageHistory)
    history: BaseChatMessageHistory = memory.history("s")
    assert_type(history.messages, list[BaseMessage])


def compress_and_state(memory: ConversationMemory) -> None:
    """Compression results and export/import."""
    result = memory.compress("s", force=True, keep=2)
    assert_type(result, CompressionResult | None)
    if result is not None:
        assert_type(result.summary.time_range, tuple[datetime, datetime])
        assert_type(result.tokens_saved, int)
    state = memory.export_session("s")
    assert_type(state, SessionState)
    text: str = state.to_json()
    assert_type(SessionState.from_json(text), SessionState)
    assert_type(memory.import_session(text, overwrite=True, session_id="copy"), str)
    assert_type(memory.import_session(state), str)
    assert_type(memory.clear_session("copy"), int)
    assert_type(memory.update_config(max_tokens=10_000), MemoryConfig)


async def async_twins(memory: ConversationMemory) -> None:
    """Each twin awaits to what its sync method returns."""
    assert_type(await memory.aadd_user_message("s", "hi"), MemoryEntry)
    assert_type(await memory.aadd_messages("s", [HumanMessage("a")]), list[MemoryEntry])
    assert_type(await memory.aget_messages("s"), ContextMessages)
    assert_type(await memory.aget_stats("s"), SessionStats)
    assert_type(await memory.acompress("s", force=True), CompressionResult | None)
    assert_type(await memory.aexport_session("s"), SessionState)
    assert_type(await memory.aimport_session("{}", overwrite=True), str)
    assert_type(await memory.aclear_session("s"), int)


def signals(memory: ConversationMemory) -> None:
    """``on`` takes any callable, lambdas included, and returns a disconnect."""

    def on_added(sender: ConversationMemory, *, session_id: str, entry: MemoryEntry) -> None:
        print(session_id, entry.seq)  # noqa: T201

    disconnect = memory.on("entry:added", on_added)
    assert_type(disconnect, Callable[[], None])
    memory.on("compressed", lambda sender, **kwargs: None)
    disconnect()
    with SignalRecorder(memory).recording() as recorder:
        assert_type(recorder.names(), list[str])


def tokens() -> None:
    """The token counter counts texts and messages."""
    counter = TokenCounter(encoding="cl100k_base")
    assert_type(counter.count_text("hi"), int)
    assert_type(counter.count_message(HumanMessage("hi")), int)
    assert_type(counter([HumanMessage("hi")]), int)
    assert_type(counter.encoding_name, str)


def errors() -> None:
    """The error hierarchy callers catch."""
    caught: tuple[type[TiermemError], ...] = (
        InvalidArgument,
        InvalidSessionId,
        InvalidContent,
        EntryTooLarge,
        ImportValidationError,
        SummarizationError,
        SummarizerFailed,
        SummarizerTimeout,
        SummarizerOutputInvalid,
        CompressionInProgress,
        CompressionConflict,
        TokenizerUnavailable,
    )
    value_errors: tuple[type[ValueError], ...] = (InvalidArgument, ImportValidationError)
    try:
        construct()
    except caught:
        pass
    except value_errors:
        pass
    too_large = EntryTooLarge("big", size=10, limit=5)
    assert_type(too_large.limit, int)
    assert_type(ImportValidationError("bad", path="$.entries[0]").path, str)


def testing_helpers(memory: ConversationMemory) -> None:
    """The helpers of ``tiermem.testing``."""
    clock = ManualClock()
    assert_type(clock(), datetime)
    assert_type(clock.advance(seconds=5), datetime)
    fake = FakeSummarizer(mode="sleep", delay=1.0)
    assert_type(fake.calls, list[str])
    check_invariants(memory)
    check_invariants(memory.engine)
