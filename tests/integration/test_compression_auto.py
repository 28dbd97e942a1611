"""Automatic compression: triggers, the token budget, summary merging and background mode."""

from __future__ import annotations

import asyncio
import threading
import time

from langchain_core.messages import AIMessage, ToolMessage

from tiermem import ConversationMemory, MemoryConfig, is_summary_message
from tiermem.testing import FakeSummarizer, SignalRecorder

from ..conftest import MemoryFactory
from .helpers import assert_provider_valid


def talk(memory: ConversationMemory, sid: str, turns: int, start: int = 0) -> None:
    """``turns`` user/assistant exchanges of a few dozen tokens each."""
    for turn in range(start, start + turns):
        memory.add_user_message(sid, f"Question {turn}: what should I know about subject {turn}?")
        memory.add_assistant_message(
            sid, f"Answer {turn}: subject {turn} has three parts, each explained in turn."
        )


def test_triggered_by_max_tokens(make_memory: MemoryFactory) -> None:
    """Passing max_tokens compresses; the context handed to the model stays within it."""
    memory = make_memory(
        config=MemoryConfig(
            max_tokens=300, max_entries=1_000, recent_window=4, min_entries_to_compress=3
        ),
        summarizer=FakeSummarizer(),
    )
    with SignalRecorder(memory).recording() as recorder:
        talk(memory, "s", 30)
    assert recorder.names().count("compressed") >= 2
    for _ in range(3):
        talk(memory, "s", 1, start=99)
        messages = memory.get_messages("s")
        assert memory.counter.count_messages(messages) <= 300
        assert_provider_valid(messages)
    stats = memory.get_stats("s")
    assert stats.context_tokens <= 300
    assert stats.total_entries == 66 and stats.compressed_entries > 0


def test_triggered_by_max_entries(make_memory: MemoryFactory) -> None:
    """Passing max_entries compresses even far below the token budget."""
    memory = make_memory(
        config=MemoryConfig(max_entries=10, recent_window=3, min_entries_to_compress=2),
        summarizer=FakeSummarizer(),
    )
    for i in range(10):
        memory.add_user_message("s", f"m{i}")
    assert memory.get_stats("s").summaries == 0
    memory.add_user_message("s", "the eleventh")
    stats = memory.get_stats("s")
    assert stats.summaries == 1 and stats.active_entries <= 10
    for i in range(30):
        memory.add_user_message("s", f"n{i}")
        assert memory.get_stats("s").active_entries <= 10


def test_no_trigger_without_auto_compress(make_memory: MemoryFactory) -> None:
    """With auto_compress off, nothing is summarized however large the session grows."""
    summarizer = FakeSummarizer()
    memory = make_memory(
        config=MemoryConfig(max_entries=5, max_tokens=100, auto_compress=False),
        summarizer=summarizer,
    )
    talk(memory, "s", 10)
    assert summarizer.calls == [] and memory.get_stats("s").summaries == 0


def test_summaries_merge_past_their_share(make_memory: MemoryFactory) -> None:
    """Summaries beyond summary_share of the budget are merged into a higher-level summary
    that still expands to every original, in order."""
    memory = make_memory(
        config=MemoryConfig(
            max_tokens=300, recent_window=2, min_entries_to_compress=2, summary_share=0.15
        ),
        summarizer=FakeSummarizer(digest_words=20),
    )
    with SignalRecorder(memory).recording() as recorder:
        talk(memory, "s", 40)
    merges = [kw["result"] for kw in recorder.of("compressed") if kw["result"].merged_summaries]
    assert merges, "no merge happened"
    top = memory.get_summaries("s")
    assert any(summary.level >= 2 for summary in top)
    entries = memory.get_entries("s")
    assert len(entries) == 80  # lossless: every original is still stored
    expanded = [e for summary in top for e in memory.expand_summary(summary.id)]
    assert [e.id for e in expanded] == [e.id for e in entries if e.compressed]
    assert [e.seq for e in expanded] == list(range(1, len(expanded) + 1))
    merged = merges[-1]
    assert merged.summary.level >= 2 and merged.merged_summaries >= 2
    assert memory.get_stats("s").summary_tokens <= 0.15 * 300 + max(s.token_count for s in top)
    assert memory.counter.count_messages(memory.get_messages("s")) <= 300


def test_tool_groups_survive_automatic_compression(make_memory: MemoryFactory) -> None:
    """Automatic compression never splits a tool call from its results."""
    memory = make_memory(
        config=MemoryConfig(max_tokens=250, recent_window=1, min_entries_to_compress=1),
        summarizer=FakeSummarizer(),
    )
    for turn in range(15):
        memory.add_user_message("s", f"please run tools for case {turn}")
        call_ids = [f"t{turn}a", f"t{turn}b"]
        memory.add_message(
            "s",
            AIMessage(
                "", tool_calls=[{"name": "probe", "args": {"n": turn}, "id": i} for i in call_ids]
            ),
        )
        memory.add_message("s", ToolMessage(f"result b {turn}", tool_call_id=call_ids[1]))
        memory.add_user_message("s", "still waiting for the other one")
        memory.add_message("s", ToolMessage(f"result a {turn}", tool_call_id=call_ids[0]))
        assert_provider_valid(memory.get_messages("s"))
    summaries = memory.get_summaries("s")
    assert summaries
    for summary in summaries:
        covered = [e.message for e in memory.expand_summary(summary.id)]
        calls = {c["id"] for m in covered if isinstance(m, AIMessage) for c in m.tool_calls}
        results = {m.tool_call_id for m in covered if isinstance(m, ToolMessage)}
        assert calls == results and calls


def test_background_mode(make_memory: MemoryFactory) -> None:
    """In background mode add_* returns without waiting; close() drains the worker."""
    release = threading.Event()
    summarizer = FakeSummarizer(mode="sleep", release=release, delay=10)
    memory = make_memory(
        config=MemoryConfig(
            max_entries=6, recent_window=2, min_entries_to_compress=2, background=True
        ),
        summarizer=summarizer,
    )
    started = time.monotonic()
    for i in range(10):
        memory.add_user_message("s", f"message {i}")
    assert time.monotonic() - started < 5, "add_* waited for the summarizer"
    assert memory.get_stats("s").summaries == 0
    deadline = time.monotonic() + 5
    while not summarizer.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert summarizer.calls, "the worker did not start"
    release.set()
    memory.close()
    reader = make_memory()
    stats = reader.get_stats("s")
    assert stats.summaries >= 1 and stats.compressed_entries >= 2
    assert stats.total_entries == 10


def test_async_context_manager_drains_background_compression(
    make_memory: MemoryFactory,
) -> None:
    """``async with`` / ``aclose()`` wait for the background worker without blocking
    the event loop: a task on the loop keeps running while the drain waits."""
    release = threading.Event()
    summarizer = FakeSummarizer(mode="sleep", release=release, delay=10)
    config = MemoryConfig(
        max_entries=6, recent_window=2, min_entries_to_compress=2, background=True
    )
    memory = make_memory(config=config, summarizer=summarizer)

    async def scenario() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                if ticks == 5:
                    release.set()  # the summarizer answers only once the loop has run
                await asyncio.sleep(0.01)

        async with memory:
            for i in range(10):
                await memory.aadd_user_message("s", f"message {i}")
            task = asyncio.create_task(ticker())
        task.cancel()
        return ticks

    assert asyncio.run(scenario()) >= 5
    stats = make_memory().get_stats("s")
    assert stats.summaries >= 1 and stats.total_entries == 10


def test_first_messages_of_a_new_session_in_context(make_memory: MemoryFactory) -> None:
    """Before any compression get_messages is exactly the stored messages."""
    memory = make_memory(summarizer=FakeSummarizer())
    talk(memory, "s", 3)
    messages = memory.get_messages("s")
    assert not any(is_summary_message(m) for m in messages)
    assert messages == [e.message for e in memory.get_entries("s")]
