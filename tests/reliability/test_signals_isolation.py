"""T21: receivers are isolated, run after the commit, and never run for failed work."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import ToolMessage

from tiermem import ConversationMemory, MemoryConfig
from tiermem.errors import InvalidContent, StorageError, SummarizerFailed
from tiermem.testing import FakeSummarizer, ManualClock

from ..conftest import MemoryFactory

CONFIG = MemoryConfig(auto_compress=False, recent_window=2, min_entries_to_compress=2)


def _seed(memory: ConversationMemory, session_id: str = "s", count: int = 8) -> None:
    for index in range(count):
        memory.add_user_message(session_id, f"message {index} with a few words in it")


def _trigger(name: str, memory: ConversationMemory, clock: ManualClock) -> Callable[[], object]:
    """The operation that sends signal ``name``, after any setup it needs."""
    if name == "entry:added":
        return lambda: memory.add_user_message("s", "new")
    if name == "compressed":
        _seed(memory)
        return lambda: memory.compress("s", force=True)
    if name == "session:cleared":
        _seed(memory)
        return lambda: memory.clear_session("s")
    if name == "compression_failed":
        _seed(memory)
        memory.set_summarizer(FakeSummarizer(mode="raise", error=ConnectionError("down")))

        def failing() -> object:
            with pytest.raises(SummarizerFailed):
                memory.compress("s", force=True)
            return None

        return failing
    if name == "tier_changed":
        _seed(memory)
        clock.advance(hours=2)
        return lambda: memory.recalculate_tiers()
    assert name == "pruned"
    _seed(memory)
    clock.advance(days=31)
    return lambda: memory.prune_expired()


def _committed(name: str, memory: ConversationMemory) -> bool:
    """Whether the effect of the operation behind ``name`` is visible in a new memory."""
    fresh = ConversationMemory(engine=memory.engine, config=CONFIG)  # shares the pool
    if name == "entry:added":
        return [str(e.message.content) for e in fresh.get_entries("s")] == ["new"]
    if name == "compressed":
        return fresh.get_stats("s").summaries == 1
    if name in ("session:cleared", "pruned"):
        return fresh.list_sessions() == []
    if name == "compression_failed":
        return fresh.get_stats("s").summaries == 0
    return fresh.list_sessions()[0].memory_tier == "recent"


@pytest.mark.parametrize(
    "name",
    [
        "entry:added",
        "compressed",
        "session:cleared",
        "compression_failed",
        "tier_changed",
        "pruned",
    ],
)
def test_raising_receiver_is_isolated(
    make_memory: MemoryFactory, clock: ManualClock, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    """With three receivers of which the second raises, all three run, the failure is
    logged, and the operation's effects are committed."""
    memory = make_memory(config=CONFIG, summarizer=FakeSummarizer())
    operation = _trigger(name, memory, clock)
    calls: list[int] = []

    def receiver(number: int) -> Callable[..., None]:
        def receive(sender: object, **kwargs: Any) -> None:
            calls.append(number)
            if number == 2:
                raise RuntimeError("receiver 2 failed")

        return receive

    for number in (1, 2, 3):
        memory.on(name, receiver(number))
    with caplog.at_level(logging.ERROR, logger="tiermem"):
        operation()
    assert sorted(calls) == [1, 2, 3]
    assert "receiver 2 failed" in caplog.text
    assert _committed(name, memory)


def test_reentrant_receiver_does_not_deadlock(make_memory: MemoryFactory) -> None:
    """A receiver that appends to the same session runs after the lock is released: both
    entries are stored and nothing hangs (5 s watchdog)."""
    memory = make_memory(config=CONFIG)

    def reply(sender: object, *, session_id: str, entry: Any) -> None:
        if entry.content == "question":
            memory.add_assistant_message(session_id, "answer")

    memory.on("entry:added", reply)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            memory.add_user_message("s", "question")
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "a re-entrant receiver deadlocked"
    assert errors == []
    assert [e.content for e in memory.get_entries("s")] == ["question", "answer"]


def test_slow_receiver_does_not_block_other_writers(make_memory: MemoryFactory) -> None:
    """While a receiver sleeps 2 s after a commit, another memory appends to the same
    session at once: no lock is held during delivery."""
    memory = make_memory(config=CONFIG)
    other = make_memory(config=CONFIG)
    memory.add_user_message("s", "first")
    entered = threading.Event()

    def slow(sender: object, **kwargs: Any) -> None:
        entered.set()
        time.sleep(2)

    memory.on("entry:added", slow)
    worker = threading.Thread(target=lambda: memory.add_user_message("s", "slow"), daemon=True)
    worker.start()
    assert entered.wait(5)
    started = time.monotonic()
    other.add_user_message("s", "fast")
    assert time.monotonic() - started < 1.0
    worker.join(10)
    assert [e.content for e in other.get_entries("s")] == ["first", "slow", "fast"]


def test_failed_operations_send_no_success_signal(make_memory: MemoryFactory) -> None:
    """A rejected append, an append whose commit fails and a failed compression send no
    entry:added and no compressed signal (only compression_failed)."""
    memory = make_memory(
        config=CONFIG, summarizer=FakeSummarizer(mode="raise", error=RuntimeError("down"))
    )
    _seed(memory)
    names: list[str] = []
    for name in ("entry:added", "compressed", "compression_failed", "session:cleared"):
        memory.on(name, lambda sender, _name=name, **kwargs: names.append(_name))

    def fail_insert(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "INSERT INTO tiermem_entry (" in statement:
            raise sa.exc.OperationalError(statement, None, Exception("disk I/O error"))

    with pytest.raises(InvalidContent):
        memory.add_message("s", ToolMessage("orphan", tool_call_id="nobody"))
    sa.event.listen(memory.engine, "before_cursor_execute", fail_insert)
    try:
        with pytest.raises(StorageError):
            memory.add_user_message("s", "lost")
    finally:
        sa.event.remove(memory.engine, "before_cursor_execute", fail_insert)
    with pytest.raises(SummarizerFailed):
        memory.compress("s", force=True)
    assert names == ["compression_failed"]
    assert memory.get_stats("s").total_entries == 8
