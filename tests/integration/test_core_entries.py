"""Writing every kind of entry and reading it back, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)
from sqlalchemy.engine import Engine

from tiermem import (
    MISSING_RESULT_MARKER,
    ConversationMemory,
    EntryType,
    MemoryConfig,
    SessionStats,
    is_summary_message,
)
from tiermem.errors import InvalidArgument, SessionNotFound
from tiermem.testing import FakeSummarizer, ManualClock, SignalRecorder

from ..conftest import MemoryFactory
from .helpers import assert_provider_valid

NO_AUTO = MemoryConfig(auto_compress=False)
IMAGE_B64 = "data:image/png;base64," + "iVBORw0KGgo" * 200

#: Messages whose every field must survive storage exactly (I7).
ROUND_TRIP: list[BaseMessage] = [
    HumanMessage(
        content=[
            {"type": "text", "text": "What is in these?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            {"type": "image_url", "image_url": {"url": IMAGE_B64, "detail": "high"}},
            {"type": "input_audio", "input_audio": {"data": "UklGRiQ=", "format": "wav"}},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": "JVBERi0="}},
            {"type": "custom", "unknown_key": [1, 2, {"nested": True}]},
        ],
        id="human-1",
        name="bob",
        additional_kwargs={"trace": {"a": [1, 2.5, None, True]}, "nul": "x\x00y"},
    ),
    AIMessage(
        content=[
            {"type": "thinking", "thinking": "Let me look it up.", "signature": "c2lnbmF0dXJl"},
            {"type": "text", "text": "Searching."},
            {"type": "tool_use", "id": "tu_1", "name": "search", "input": {"q": "cats"}},
        ],
        tool_calls=[{"name": "search", "args": {"q": "cats"}, "id": "tu_1"}],
        id="ai-1",
        response_metadata={"model_name": "fake", "stop_reason": "tool_use"},
        usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    ),
    ToolMessage(
        content=[{"type": "text", "text": "3 results"}],
        tool_call_id="tu_1",
        name="search",
        status="error",
        artifact={"raw": [1, 2, 3]},
        id="tool-1",
    ),
    SystemMessage("NUL \x00, emoji 👩‍👩‍👧, <|endoftext|>, RTL \u202e, \u2028, CRLF\r\n"),
    AIMessage("plain <|endoftext|> \x00 end", additional_kwargs={"refusal": None}),
]


def test_all_entry_types(make_memory: MemoryFactory) -> None:
    """Each add_* method stores its entry with the right type, role, seq and metadata."""
    memory = make_memory(config=NO_AUTO)
    user = memory.add_user_message("s", "hello", channel="web", n=1)
    assistant = memory.add_assistant_message("s", "hi there", mood="cheerful")
    call = memory.add_tool_call("s", "search", {"q": "cats"})
    result = memory.add_tool_result("s", "search", "3 cats")
    context = memory.add_context("s", "User prefers metric units", source="profile", pinned=True)
    loose = memory.add_context("s", "Today is Monday", source="calendar")
    message = memory.add_message("s", HumanMessage("via add_message"), metadata={"k": "v"})
    batch = memory.add_messages("s", [AIMessage("one"), HumanMessage("two")])
    stored = [user, assistant, call, result, context, loose, message, *batch]
    assert [e.seq for e in stored] == list(range(1, 10))
    assert [e.type for e in stored] == [
        EntryType.MESSAGE,
        EntryType.MESSAGE,
        EntryType.TOOL_CALL,
        EntryType.TOOL_RESULT,
        EntryType.CONTEXT,
        EntryType.CONTEXT,
        EntryType.MESSAGE,
        EntryType.MESSAGE,
        EntryType.MESSAGE,
    ]
    assert [e.role for e in stored] == [
        "user",
        "assistant",
        "assistant",
        "tool",
        "system",
        "system",
        "user",
        "assistant",
        "user",
    ]
    assert user.metadata == {"channel": "web", "n": 1}
    assert assistant.metadata == {"mood": "cheerful"}
    assert context.metadata == {"source": "profile"} and context.pinned and not loose.pinned
    assert message.metadata == {"k": "v"}
    assert isinstance(call.message, AIMessage) and isinstance(result.message, ToolMessage)
    call_id = call.message.tool_calls[0]["id"]
    assert call_id and result.message.tool_call_id == call_id
    assert result.message.name == "search"
    assert call.message.tool_calls[0]["args"] == {"q": "cats"}
    assert all(not e.compressed and e.summary_id is None for e in stored)
    assert all(e.timestamp == memory.now() and e.session_id == "s" for e in stored)
    assert [e.id for e in memory.get_entries("s")] == [e.id for e in stored]


def test_explicit_call_ids_pair_results(make_memory: MemoryFactory) -> None:
    """Results name their call explicitly or answer the oldest pending call of that tool."""
    memory = make_memory(config=NO_AUTO)
    memory.add_tool_call("s", "search", {"q": 1}, call_id="first")
    memory.add_tool_call("s", "search", {"q": 2}, call_id="second")
    memory.add_tool_call("s", "fetch", {"u": "x"}, call_id="third")
    second = memory.add_tool_result("s", "search", "r2", call_id="second")
    implicit = memory.add_tool_result("s", "search", "r1")
    fetch = memory.add_tool_result("s", "fetch", "page")
    ids = [
        e.message.tool_call_id
        for e in (second, implicit, fetch)
        if isinstance(e.message, ToolMessage)
    ]
    assert ids == ["second", "first", "third"]


def test_exact_round_trip(make_memory: MemoryFactory) -> None:
    """Content blocks, tool calls, ids, additional_kwargs, NUL, emoji and special tokens
    come back exactly, from the returned entry and from a fresh read (I7)."""
    memory = make_memory(config=NO_AUTO)
    returned = memory.add_messages("s", ROUND_TRIP)
    fresh = make_memory(config=NO_AUTO)
    for messages in (
        [e.message for e in returned],
        [e.message for e in fresh.get_entries("s")],
        [e.to_message() for e in fresh.get_active_entries("s")],
        fresh.get_messages("s"),
    ):
        assert [message_to_dict(m) for m in messages] == [message_to_dict(m) for m in ROUND_TRIP]
        assert messages == ROUND_TRIP
    assert fresh.get_entries("s")[3].content == ROUND_TRIP[3].content


def test_single_adds_round_trip(make_memory: MemoryFactory) -> None:
    """Text with NUL, emoji and special tokens round-trips through the add_* shortcuts."""
    memory = make_memory(config=NO_AUTO)
    text = "a\x00b 🧑‍💻 <|endoftext|> 😀 e\u0301 \u202eend"
    memory.add_user_message("s", text, note="n\x00l")
    memory.add_tool_call("s", "t\x00", {"k": "v\x00"}, call_id="c1")
    memory.add_tool_result("s", "t\x00", "out\x00", call_id="c1")
    memory.add_context("s", "ctx\x00", source="src\x00")
    entries = make_memory(config=NO_AUTO).get_entries("s")
    assert entries[0].message.content == text and entries[0].content == text
    assert entries[0].metadata == {"note": "n\x00l"}
    assert isinstance(entries[1].message, AIMessage)
    assert entries[1].message.tool_calls[0]["args"] == {"k": "v\x00"}
    assert entries[2].content == "out\x00" and entries[3].content == "ctx\x00"


def test_get_messages_is_provider_valid(make_memory: MemoryFactory) -> None:
    """A human message appended between a call and its results is moved after them."""
    memory = make_memory(config=NO_AUTO)
    memory.add_user_message("s", "look up two things")
    memory.add_message(
        "s",
        AIMessage(
            "",
            tool_calls=[
                {"name": "a", "args": {}, "id": "ca"},
                {"name": "b", "args": {}, "id": "cb"},
            ],
        ),
    )
    memory.add_tool_result("s", "b", "B", call_id="cb")
    memory.add_user_message("s", "are you done?")
    memory.add_tool_result("s", "a", "A", call_id="ca")
    memory.add_assistant_message("s", "done")
    messages = memory.get_messages("s")
    assert_provider_valid(messages)
    assert [type(m).__name__ for m in messages] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "HumanMessage",
        "AIMessage",
    ]
    assert [m.content for m in messages[2:5]] == ["A", "B", "are you done?"]  # call order
    # The stored order is untouched.
    assert [e.content for e in memory.get_entries("s")][2:5] == ["B", "are you done?", "A"]


def test_unanswered_call_at_tail_is_returned(make_memory: MemoryFactory) -> None:
    """A pending call is returned last (the caller is about to answer it)."""
    memory = make_memory(config=NO_AUTO)
    memory.add_user_message("s", "q")
    memory.add_tool_call("s", "t", {}, call_id="pending")
    messages = memory.get_messages("s")
    assert isinstance(messages[-1], AIMessage) and messages[-1].tool_calls[0]["id"] == "pending"


def test_call_the_conversation_went_on_without(make_memory: MemoryFactory) -> None:
    """A pending call followed by other messages reads back with a stand-in error
    result, so the context stays provider-valid; nothing extra is stored, and the
    real result, when it comes, takes the stand-in's place."""
    memory = make_memory(config=NO_AUTO)
    memory.add_tool_call("s", "slow_tool", {"q": 1}, call_id="late")
    memory.add_user_message("s", "never mind, tell me a joke")
    memory.add_assistant_message("s", "Why did the token cross the window?")
    messages = memory.get_messages("s")
    assert_provider_valid(messages)
    stand_in = messages[1]
    assert isinstance(stand_in, ToolMessage) and stand_in.tool_call_id == "late"
    assert stand_in.status == "error" and stand_in.additional_kwargs == {
        MISSING_RESULT_MARKER: True
    }
    assert memory.get_stats("s").total_entries == 3

    memory.add_tool_result("s", "slow_tool", "the real answer", call_id="late")
    messages = memory.get_messages("s")
    assert_provider_valid(messages)
    assert [m.text for m in messages[:3]] == ["", "the real answer", "never mind, tell me a joke"]
    assert not any(MISSING_RESULT_MARKER in m.additional_kwargs for m in messages)


def test_context_for_llm_format(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """The text context lists summaries with time ranges, then the recent conversation."""
    memory = make_memory(config=NO_AUTO, summarizer=lambda prompt: "they said hello")
    assert memory.get_context_for_llm("s") == ""
    memory.add_user_message("s", "hello")
    assert memory.get_context_for_llm("s") == "=== Recent Conversation ===\nuser: hello"
    clock.advance(minutes=5)
    memory.add_assistant_message("s", "hello to you too, how can I help today?")
    clock.advance(minutes=5)
    memory.add_tool_call("s", "search", {"q": "x"}, call_id="c")
    memory.add_tool_result("s", "search", "found x")
    memory.compress("s", force=True, keep=2)
    assert memory.get_context_for_llm("s") == (
        "=== Previous Conversation Summaries ===\n"
        "[2026-01-01 12:00 - 2026-01-01 12:05] they said hello\n"
        "\n"
        "=== Recent Conversation ===\n"
        'assistant: search({"q":"x"})\n'
        "tool (search): found x"
    )


def test_reading_apis(make_memory: MemoryFactory) -> None:
    """Active entries, all entries, summaries and stats agree after a compression."""
    memory = make_memory(config=NO_AUTO, summarizer=FakeSummarizer())
    for i in range(8):
        memory.add_user_message("s", f"question number {i} about something rather long")
        memory.add_assistant_message("s", f"answer number {i} with a fair amount of detail")
    result = memory.compress("s", force=True, keep=4)
    assert result is not None
    everything = memory.get_entries("s")
    active = memory.get_active_entries("s")
    assert memory.get_entries("s", include_compressed=False) == active
    assert len(everything) == 16 and len(active) == 4
    assert [e.seq for e in active] == [13, 14, 15, 16]
    summaries = memory.get_summaries("s")
    assert [s.id for s in summaries] == [result.summary.id]
    assert summaries[0].original_entry_ids == tuple(e.id for e in everything[:12])
    stats = memory.get_stats("s")
    assert stats == SessionStats(
        total_entries=16,
        active_entries=4,
        compressed_entries=12,
        summaries=1,
        total_tokens=sum(e.token_count for e in everything),
        active_tokens=sum(e.token_count for e in active),
        summary_tokens=summaries[0].token_count,
        context_tokens=sum(e.token_count for e in active) + summaries[0].token_count,
        memory_tier=stats.memory_tier,
        last_accessed=memory.now(),
        access_count=stats.access_count,
    )
    messages = memory.get_messages("s", query="")  # the window, without a recalled block
    assert is_summary_message(messages[0])
    assert messages[1:] == [e.message for e in active]


def test_unknown_session_reads(make_memory: MemoryFactory) -> None:
    """Reads of an unknown session are empty; stats and export raise SessionNotFound."""
    memory = make_memory(config=NO_AUTO)
    assert memory.get_messages("nope") == []
    assert memory.get_entries("nope") == [] and memory.get_active_entries("nope") == []
    assert memory.get_summaries("nope") == [] and memory.get_context_for_llm("nope") == ""
    with pytest.raises(SessionNotFound):
        memory.get_stats("nope")
    with pytest.raises(SessionNotFound):
        memory.export_session("nope")
    with pytest.raises(SessionNotFound):
        memory.expand_summary(12345)
    assert memory.list_sessions() == []


def test_list_sessions(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """Sessions of the project come most recently used first, paged by limit/offset."""
    memory = make_memory(config=NO_AUTO)
    other = make_memory(config=NO_AUTO, project="other")
    for name in ("a", "b", "c"):
        memory.add_user_message(name, f"hi from {name}")
        clock.advance(seconds=1)
    other.add_user_message("z", "elsewhere")
    clock.advance(seconds=1)
    memory.get_messages("a")  # a read is an access
    listed = memory.list_sessions()
    assert [s.session_id for s in listed] == ["a", "c", "b"]
    assert all(s.project == "default" and s.total_entries == 1 for s in listed)
    assert listed[0].last_accessed == clock.now and listed[0].context_tokens > 0
    assert [s.session_id for s in memory.list_sessions(limit=1, offset=1)] == ["c"]
    assert memory.list_sessions(limit=0) == []
    assert [s.session_id for s in other.list_sessions()] == ["z"]
    for bad in ({"limit": -1}, {"offset": -1}, {"limit": True}, {"limit": 1.5}):
        with pytest.raises(InvalidArgument):
            memory.list_sessions(**bad)


def test_clear_session(make_memory: MemoryFactory) -> None:
    """clear_session deletes entries and summaries, reports the count and signals it once."""
    memory = make_memory(config=NO_AUTO, summarizer=FakeSummarizer())
    for i in range(6):
        memory.add_user_message("s", f"message {i} with several words in it")
    memory.add_user_message("keep", "untouched")
    memory.compress("s", force=True, keep=2)
    with SignalRecorder(memory).recording() as recorder:
        assert memory.clear_session("s") == 6
        assert memory.clear_session("s") == 0
    assert recorder.names() == ["session:cleared"]
    assert recorder.of("session:cleared") == [{"session_id": "s", "entries_removed": 6}]
    assert memory.get_entries("s") == [] and memory.get_summaries("s") == []
    with pytest.raises(SessionNotFound):
        memory.get_stats("s")
    assert [e.content for e in memory.get_entries("keep")] == ["untouched"]
    memory.add_user_message("s", "fresh start")
    assert [e.seq for e in memory.get_entries("s")] == [1]


def test_projects_are_isolated(engine: Engine, make_memory: MemoryFactory) -> None:
    """Two projects on one database never see each other's sessions."""
    first = make_memory(config=NO_AUTO, project="one")
    second = make_memory(config=NO_AUTO, project="two")
    first.add_user_message("s", "from one")
    second.add_user_message("s", "from two")
    assert [e.content for e in first.get_entries("s")] == ["from one"]
    assert [e.content for e in second.get_entries("s")] == ["from two"]
    second.clear_session("s")
    assert [e.content for e in first.get_entries("s")] == ["from one"]


def test_memory_context_manager(engine: Engine, clock: ManualClock) -> None:
    """A memory used as a context manager closes itself and its data persists."""
    with ConversationMemory(engine=engine, clock=clock) as memory:
        memory.add_user_message("s", "persisted")
    reopened = ConversationMemory(engine=engine, clock=clock)
    try:
        assert [e.content for e in reopened.get_entries("s")] == ["persisted"]
    finally:
        reopened.close()


def test_call_id_reused_after_its_answer(engine: Engine, clock: ManualClock) -> None:
    """A call id reused once answered (as models numbering calls per turn do) keeps each
    result with its own call in get_messages and in compression."""
    memory = ConversationMemory(
        engine=engine, clock=clock, summarizer=lambda prompt: "gist", config=NO_AUTO
    )
    try:
        memory.add_tool_call("s", "lookup", {"n": 1}, call_id="call_0")
        memory.add_user_message("s", "meanwhile")
        memory.add_tool_result("s", "lookup", "first answer", call_id="call_0")
        memory.add_tool_call("s", "lookup", {"n": 2}, call_id="call_0")
        memory.add_tool_result("s", "lookup", "second answer", call_id="call_0")
        memory.add_assistant_message("s", "done")
        messages = memory.get_messages("s")
        assert_provider_valid(messages)
        assert [m.content for m in messages] == [
            "",
            "first answer",
            "meanwhile",
            "",
            "second answer",
            "done",
        ]
        result = memory.compress("s", force=True, keep=2)
        assert result is not None
        assert [e.content for e in memory.expand_summary(result.summary.id)] == [
            'lookup({"n":1})',
            "meanwhile",
            "first answer",
        ]
        assert [m.content for m in memory.get_messages("s")[1:]] == ["", "second answer", "done"]
    finally:
        memory.close()
