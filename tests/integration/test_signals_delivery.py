"""Signals: sent after commit with documented kwargs, receivers isolated, strong ``on``."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from tiermem import CompressionResult, ConversationMemory, MemoryConfig, MemoryEntry
from tiermem import signals as tiermem_signals
from tiermem.errors import InvalidArgument, InvalidContent, SummarizerFailed
from tiermem.testing import FakeSummarizer, SignalRecorder

from ..conftest import MemoryFactory

Call = tuple[object, dict[str, Any]]


def test_entry_added_after_commit(make_memory: MemoryFactory) -> None:
    """entry:added carries session_id and the stored entry, sender is the memory, and the
    entry is already visible to another connection when the receiver runs."""
    memory = make_memory()
    observer = make_memory()
    seen: list[tuple[object, dict[str, Any], list[str]]] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        visible = [e.content for e in observer.get_entries(kwargs["session_id"])]
        seen.append((sender, kwargs, visible))

    memory.on("entry:added", receiver)
    entry = memory.add_user_message("s", "hello")
    assert memory.add_messages("s", []) == []  # an empty batch sends nothing
    assert len(seen) == 1
    sender, kwargs, visible = seen[0]
    assert sender is memory
    assert set(kwargs) == {"session_id", "entry"}
    assert kwargs["session_id"] == "s" and kwargs["entry"] == entry
    assert isinstance(kwargs["entry"], MemoryEntry)
    assert visible == ["hello"]


def test_batch_sends_one_signal_per_entry(make_memory: MemoryFactory) -> None:
    """add_messages sends entry:added once per stored entry, in order."""
    memory = make_memory()
    memory.add_tool_call("s", "t", {}, call_id="c")
    with SignalRecorder(memory).recording() as recorder:
        stored = memory.add_messages(
            "s", [ToolMessage("r", tool_call_id="c"), HumanMessage("x"), HumanMessage("y")]
        )
    assert [kw["entry"] for kw in recorder.of("entry:added")] == stored
    assert [e.seq for e in stored] == [2, 3, 4]


def test_receiver_may_write_to_the_same_session(make_memory: MemoryFactory) -> None:
    """A receiver that appends to the same session does not deadlock (locks are released)."""
    memory = make_memory()

    def echo(sender: ConversationMemory, *, session_id: str, entry: MemoryEntry) -> None:
        if entry.role == "user":
            sender.add_assistant_message(session_id, f"echo: {entry.content}")

    memory.on("entry:added", echo)
    started = time.monotonic()
    memory.add_user_message("s", "ping")
    assert time.monotonic() - started < 5
    assert [e.content for e in memory.get_entries("s")] == ["ping", "echo: ping"]


def test_raising_receiver_is_isolated(
    make_memory: MemoryFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A raising receiver is logged; the others still run and the write is committed."""
    memory = make_memory()
    calls: list[str] = []

    def first(sender: object, **kwargs: Any) -> None:
        calls.append("first")

    def broken(sender: object, **kwargs: Any) -> None:
        calls.append("broken")
        raise RuntimeError("receiver bug")

    def third(sender: object, **kwargs: Any) -> None:
        calls.append("third")

    for receiver in (first, broken, third):
        memory.on("entry:added", receiver)
    with caplog.at_level(logging.ERROR, logger="tiermem.signals"):
        entry = memory.add_user_message("s", "still stored")
    assert sorted(calls) == ["broken", "first", "third"]
    assert [e.id for e in memory.get_entries("s")] == [entry.id]
    errors = [r for r in caplog.records if r.name == "tiermem.signals"]
    assert len(errors) == 1 and errors[0].exc_info is not None
    assert isinstance(errors[0].exc_info[1], RuntimeError)


def test_on_holds_lambdas_and_disconnects(make_memory: MemoryFactory) -> None:
    """``on`` keeps a lambda alive, is per instance, and returns a working disconnect."""
    memory = make_memory()
    other = make_memory()
    calls: list[str] = []
    disconnect = memory.on("entry:added", lambda sender, **kw: calls.append(kw["entry"].content))
    gc.collect()
    memory.add_user_message("s", "one")
    other.add_user_message("s2", "not mine")
    assert calls == ["one"]
    disconnect()
    memory.add_user_message("s", "two")
    assert calls == ["one"]
    disconnect()  # idempotent


def test_unknown_signal_name(make_memory: MemoryFactory) -> None:
    """Connecting to a name that is not a tiermem signal raises InvalidArgument."""
    memory = make_memory()
    with pytest.raises(InvalidArgument, match="entry:added"):
        memory.on("entry_added", lambda sender, **kw: None)


def test_global_signal_subscription(make_memory: MemoryFactory) -> None:
    """The raw blinker signals reach every memory (weakly held, as documented)."""
    first, second = make_memory(), make_memory()
    senders: list[object] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        senders.append(sender)

    tiermem_signals.entry_added.connect(receiver)
    try:
        first.add_user_message("a", "x")
        second.add_user_message("b", "y")
    finally:
        tiermem_signals.entry_added.disconnect(receiver)
    assert senders == [first, second]
    assert set(tiermem_signals.SIGNAL_NAMES) >= {
        "entry:added",
        "compressed",
        "compression_failed",
        "session:cleared",
    }


def test_compressed_and_cleared_kwargs(make_memory: MemoryFactory) -> None:
    """compressed carries the CompressionResult and session:cleared the removed count."""
    memory = make_memory(summarizer=FakeSummarizer())
    for i in range(12):
        memory.add_user_message("s", f"message {i} with quite a few words in it")
    with SignalRecorder(memory).recording() as recorder:
        result = memory.compress("s", force=True, keep=2)
        memory.clear_session("s")
    assert recorder.names() == ["compressed", "session:cleared"]
    compressed = recorder.of("compressed")[0]
    assert set(compressed) == {"session_id", "result"}
    assert compressed["session_id"] == "s" and compressed["result"] == result
    assert isinstance(result, CompressionResult)
    assert recorder.of("session:cleared") == [{"session_id": "s", "entries_removed": 12}]


def test_failures_send_no_success_signal(make_memory: MemoryFactory) -> None:
    """A refused write sends nothing; a failed compression sends only compression_failed."""
    memory = make_memory(
        config=MemoryConfig(auto_compress=False),
        summarizer=FakeSummarizer(mode="raise", error=ConnectionError("down")),
    )
    for i in range(8):
        memory.add_user_message("s", f"message {i} with quite a few words in it")
    with SignalRecorder(memory).recording() as recorder:
        with pytest.raises(InvalidContent):
            memory.add_message("s", ToolMessage("orphan", tool_call_id="none"))
        with pytest.raises(SummarizerFailed) as info:
            memory.compress("s", force=True, keep=2)
    assert recorder.names() == ["compression_failed"]
    assert recorder.of("compression_failed") == [{"session_id": "s", "error": info.value}]


async def test_async_receivers_are_awaited(make_memory: MemoryFactory) -> None:
    """Coroutine receivers finish before the async call returns; sync receivers run too."""
    memory = make_memory()
    order: list[str] = []

    async def slow(sender: object, **kwargs: Any) -> None:
        await asyncio.sleep(0.01)
        order.append(f"async:{kwargs['entry'].content}")

    async def broken(sender: object, **kwargs: Any) -> None:
        raise RuntimeError("async receiver bug")

    memory.on("entry:added", slow)
    memory.on("entry:added", broken)
    memory.on("entry:added", lambda sender, **kw: order.append(f"sync:{kw['entry'].content}"))
    await memory.aadd_user_message("s", "a")
    assert sorted(order) == ["async:a", "sync:a"]
    await memory.aclear_session("s")


def test_async_receiver_from_sync_api(make_memory: MemoryFactory) -> None:
    """Without a running loop, a coroutine receiver is run to completion by the sync API."""
    memory = make_memory()
    done: list[str] = []

    async def receiver(sender: object, **kwargs: Any) -> None:
        await asyncio.sleep(0)
        done.append(kwargs["entry"].content)

    memory.on("entry:added", receiver)
    memory.add_user_message("s", "from sync")
    assert done == ["from sync"]
