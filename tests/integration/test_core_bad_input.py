"""Bad input is refused with a typed error and leaves the database untouched."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem.errors import EntryTooLarge, InvalidArgument, InvalidContent, InvalidSessionId
from tiermem.testing import SignalRecorder

from ..conftest import MemoryFactory
from .helpers import canonical_dump

BAD_SESSION_IDS: list[Any] = [
    "",
    "x" * 256,
    "a\x00b",
    "a\nb",
    "tail\n",
    "tab\tin",
    " leading",
    "trailing ",
    "\u2003em-space",
    "lone \ud800",
    5,
    None,
    b"bytes",
    ["list"],
]

#: Each public operation that takes a session id, called with ``sid``.
OPERATIONS: dict[str, Callable[[ConversationMemory, Any], object]] = {
    "add_user_message": lambda m, sid: m.add_user_message(sid, "hi"),
    "add_assistant_message": lambda m, sid: m.add_assistant_message(sid, "hi"),
    "add_tool_call": lambda m, sid: m.add_tool_call(sid, "t", {}),
    "add_tool_result": lambda m, sid: m.add_tool_result(sid, "t", "out", call_id="c"),
    "add_context": lambda m, sid: m.add_context(sid, "ctx", source="s"),
    "add_message": lambda m, sid: m.add_message(sid, HumanMessage("hi")),
    "add_messages": lambda m, sid: m.add_messages(sid, [HumanMessage("hi")]),
    "get_messages": lambda m, sid: m.get_messages(sid),
    "get_context_for_llm": lambda m, sid: m.get_context_for_llm(sid),
    "get_entries": lambda m, sid: m.get_entries(sid),
    "get_active_entries": lambda m, sid: m.get_active_entries(sid),
    "get_summaries": lambda m, sid: m.get_summaries(sid),
    "get_stats": lambda m, sid: m.get_stats(sid),
    "compress": lambda m, sid: m.compress(sid, force=True),
    "export_session": lambda m, sid: m.export_session(sid),
    "clear_session": lambda m, sid: m.clear_session(sid),
    "history": lambda m, sid: m.history(sid),
}


def test_bad_session_ids_are_refused(engine: Engine, make_memory: MemoryFactory) -> None:
    """Every operation refuses every bad session id with InvalidSessionId, writing nothing."""
    memory = make_memory()
    memory.add_user_message("existing", "keep me")
    before = canonical_dump(engine)
    for name, operation in OPERATIONS.items():
        for bad in BAD_SESSION_IDS:
            with pytest.raises(InvalidSessionId):
                operation(memory, bad)
                pytest.fail(f"{name} accepted {bad!r}")
    assert canonical_dump(engine) == before


def test_longest_and_unusual_valid_ids(make_memory: MemoryFactory) -> None:
    """Ids of 255 characters, SQL metacharacters, wildcards and inner spaces are exact keys."""
    memory = make_memory()
    ids = ["x" * 255, "'; DROP TABLE tiermem_entry; --", "a_c", "abc", "%", "a b", "ü😀"]
    for sid in ids:
        memory.add_user_message(sid, f"in {sid}")
    for sid in ids:
        assert [e.content for e in memory.get_entries(sid)] == [f"in {sid}"]
    assert sorted(s.session_id for s in memory.list_sessions()) == sorted(ids)


def test_bad_project_is_refused(engine: Engine) -> None:
    """A project name follows the session-id rule."""
    with pytest.raises(InvalidSessionId):
        ConversationMemory(engine=engine, project="bad\nproject")


class Opaque:
    """An object JSON cannot hold."""


BAD_MESSAGES: dict[str, BaseMessage] = {
    "lone surrogate in text": HumanMessage("bad \ud800 text"),
    "lone surrogate in kwargs": HumanMessage("ok", additional_kwargs={"k": "\udfff"}),
    "datetime in kwargs": HumanMessage("ok", additional_kwargs={"t": datetime.now(UTC)}),
    "bytes in kwargs": HumanMessage("ok", additional_kwargs={"b": b"\x00\x01"}),
    "object in kwargs": HumanMessage("ok", additional_kwargs={"o": Opaque()}),
    "nan in kwargs": HumanMessage("ok", additional_kwargs={"f": float("nan")}),
    "surrogate in block": HumanMessage(content=[{"type": "text", "text": "\ud83d"}]),
}


def test_unstorable_content_is_refused(engine: Engine, make_memory: MemoryFactory) -> None:
    """Content that cannot round-trip raises InvalidContent and writes nothing, no signal."""
    memory = make_memory()
    memory.add_user_message("s", "before")
    before = canonical_dump(engine)
    with SignalRecorder(memory).recording() as recorder:
        for case, message in BAD_MESSAGES.items():
            with pytest.raises(InvalidContent):
                memory.add_message("s", message)
                pytest.fail(f"{case} was accepted")
            with pytest.raises(InvalidContent):
                memory.add_messages("new", [HumanMessage("fine"), message])
                pytest.fail(f"{case} was accepted in a batch")
    assert recorder.events == []
    assert canonical_dump(engine) == before


def test_bad_metadata_and_arguments(engine: Engine, make_memory: MemoryFactory) -> None:
    """Non-text text, non-mapping tool args, bad metadata and non-messages are InvalidContent."""
    memory = make_memory()
    memory.add_user_message("s", "before")
    before = canonical_dump(engine)
    attempts: list[Callable[[], object]] = [
        lambda: memory.add_user_message("s", 42),  # type: ignore[arg-type]
        lambda: memory.add_user_message("s", None),  # type: ignore[arg-type]
        lambda: memory.add_user_message("s", "ok", when=datetime.now(UTC)),
        lambda: memory.add_user_message("s", "ok", bad="\ud800"),
        lambda: memory.add_assistant_message("s", b"bytes"),  # type: ignore[arg-type]
        lambda: memory.add_tool_call("s", "t", ["not", "a", "mapping"]),  # type: ignore[arg-type]
        lambda: memory.add_tool_call("s", "t", {"when": datetime.now(UTC)}),
        lambda: memory.add_context("s", 3.5, source="x"),  # type: ignore[arg-type]
        lambda: memory.add_message("s", "not a message"),  # type: ignore[arg-type]
        lambda: memory.add_message("s", HumanMessage("x"), metadata={"o": Opaque()}),
        lambda: memory.add_messages("s", [HumanMessage("x"), {"role": "user"}]),  # type: ignore[list-item]
    ]
    for attempt in attempts:
        with pytest.raises(InvalidContent):
            attempt()
    assert canonical_dump(engine) == before


def _fourth_unserializable() -> list[BaseMessage]:
    return [
        HumanMessage("one"),
        AIMessage("two"),
        HumanMessage("three"),
        HumanMessage("four", additional_kwargs={"t": datetime.now(UTC)}),
        AIMessage("five"),
    ]


def _fourth_orphan_result() -> list[BaseMessage]:
    return [
        HumanMessage("one"),
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]),
        ToolMessage("three", tool_call_id="c1"),
        ToolMessage("orphan", tool_call_id="nobody-called"),
        AIMessage("five"),
    ]


def _fourth_surrogate() -> list[BaseMessage]:
    return [*_fourth_unserializable()[:3], HumanMessage("\ud800"), AIMessage("five")]


@pytest.mark.parametrize(
    "batch", [_fourth_unserializable, _fourth_orphan_result, _fourth_surrogate]
)
def test_bad_batch_writes_nothing(
    engine: Engine, make_memory: MemoryFactory, batch: Callable[[], list[BaseMessage]]
) -> None:
    """A batch of five whose fourth message is bad stores none of the five."""
    memory = make_memory()
    memory.add_user_message("s", "before")
    before = canonical_dump(engine)
    with SignalRecorder(memory).recording() as recorder:
        with pytest.raises(InvalidContent):
            memory.add_messages("s", batch())
        with pytest.raises(InvalidContent):
            memory.add_messages("new-session", batch())
    assert recorder.events == []
    assert canonical_dump(engine) == before
    assert [e.content for e in memory.get_entries("s")] == ["before"]
    assert memory.list_sessions() and "new-session" not in {
        s.session_id for s in memory.list_sessions()
    }


def test_entry_too_large(engine: Engine, make_memory: MemoryFactory) -> None:
    """An entry over max_entry_chars raises EntryTooLarge with its size, writing nothing."""
    memory = make_memory(config=MemoryConfig(max_entry_chars=1_000))
    memory.add_user_message("s", "small")
    before = canonical_dump(engine)
    with pytest.raises(EntryTooLarge) as info:
        memory.add_user_message("s", "x" * 2_000)
    assert info.value.limit == 1_000 and info.value.size > 2_000
    assert isinstance(info.value, InvalidArgument)
    with pytest.raises(EntryTooLarge):
        memory.add_messages("s", [HumanMessage("ok"), HumanMessage("y" * 5_000)])
    assert canonical_dump(engine) == before
    assert memory.add_user_message("s", "z" * 800).token_count > 0


def test_tool_result_without_pending_call(engine: Engine, make_memory: MemoryFactory) -> None:
    """A tool result that answers no pending call is InvalidContent, whichever way it comes."""
    memory = make_memory()
    memory.add_tool_call("s", "search", {"q": 1}, call_id="c1")
    memory.add_tool_result("s", "search", "first answer", call_id="c1")
    before = canonical_dump(engine)
    attempts: list[Callable[[], object]] = [
        lambda: memory.add_message("s", ToolMessage("x", tool_call_id="never")),
        lambda: memory.add_tool_result("s", "search", "answered twice", call_id="c1"),
        lambda: memory.add_tool_result("s", "search", "no call pending"),
        lambda: memory.add_tool_result("s", "other_tool", "wrong tool"),
        lambda: memory.add_tool_result("fresh", "search", "unknown session"),
        lambda: memory.add_message("fresh", ToolMessage("x", tool_call_id="c1")),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidContent):
            attempt()
    assert canonical_dump(engine) == before


def test_duplicate_call_ids(engine: Engine, make_memory: MemoryFactory) -> None:
    """A call id that is already pending is InvalidContent (one without an id is stored)."""
    memory = make_memory()
    memory.add_tool_call("s", "t", {}, call_id="dup")
    before = canonical_dump(engine)
    with pytest.raises(InvalidContent):
        memory.add_tool_call("s", "t", {}, call_id="dup")
    with pytest.raises(InvalidContent):
        memory.add_message(
            "s",
            AIMessage(
                "",
                tool_calls=[
                    {"name": "a", "args": {}, "id": "x"},
                    {"name": "b", "args": {}, "id": "x"},
                ],
            ),
        )
    assert canonical_dump(engine) == before


def test_bad_config_and_arguments(make_memory: MemoryFactory) -> None:
    """Bad constructor and method arguments raise InvalidArgument."""
    memory = make_memory()
    with pytest.raises(InvalidArgument):
        ConversationMemory(engine=memory.engine, config={"max_tokens": 5})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        ConversationMemory(url="sqlite://", engine=memory.engine)
    with pytest.raises(InvalidArgument):
        memory.set_summarizer(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        memory.expand_summary("1")  # type: ignore[arg-type]
    memory.add_user_message("s", "hello")
    with pytest.raises(InvalidArgument):
        memory.compress("s", force=True, keep=-1)
