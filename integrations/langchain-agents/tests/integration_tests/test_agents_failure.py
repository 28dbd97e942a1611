"""A failing summarizer never breaks a turn and never loses a message."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from tiermem import ConversationMemory, MemoryConfig, is_summary_message
from tiermem.errors import SummarizationError
from tiermem.testing import FakeSummarizer

from tiermem_agents import TieredMemoryMiddleware
from tiermem_agents.testing import ToolCallingFakeModel, assert_provider_valid, tool_turns

CONFIG: RunnableConfig = {"configurable": {"thread_id": "failing"}}


@pytest.fixture(name="failing_memory")
def fixture_failing_memory(memory_url: str) -> Iterator[ConversationMemory]:
    """A memory whose summarizer always raises."""
    config = MemoryConfig(max_tokens=1_000_000, max_entries=100_000, auto_compress=False)
    summarizer = FakeSummarizer(mode="raise")
    with ConversationMemory(url=memory_url, config=config, summarizer=summarizer) as mem:
        yield mem


def _failures(memory: ConversationMemory) -> list[BaseException]:
    """Record the errors of every compression_failed signal."""
    errors: list[BaseException] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        errors.append(kwargs["error"])

    memory.on("compression_failed", receiver)
    return errors


def test_turns_complete_uncompressed_when_summarizer_raises(
    failing_memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """Each turn still answers, the state keeps every message, compression_failed fires."""
    errors = _failures(failing_memory)
    middleware = TieredMemoryMiddleware(
        failing_memory, trigger=("messages", 6), keep=("messages", 2)
    )
    model = ToolCallingFakeModel(messages=tool_turns(5))
    agent = create_agent(
        model, [lookup_tool], middleware=[middleware], checkpointer=InMemorySaver()
    )
    for turn in range(5):
        result = agent.invoke({"messages": [HumanMessage(f"q{turn}", id=f"h{turn}")]}, CONFIG)
        assert result["messages"][-1].content == f"Answer {turn}: done."
        assert_provider_valid(result["messages"])
    assert errors and all(isinstance(error, SummarizationError) for error in errors)
    stats = failing_memory.get_stats("failing")
    assert stats.summaries == 0
    assert stats.active_entries == stats.total_entries == len(result["messages"])
    assert not any(is_summary_message(m) for m in result["messages"])


async def test_async_turns_complete_when_summarizer_raises(
    failing_memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """The async hooks also go on uncompressed and fire compression_failed."""
    errors = _failures(failing_memory)
    middleware = TieredMemoryMiddleware(
        failing_memory, trigger=("messages", 6), keep=("messages", 2)
    )
    model = ToolCallingFakeModel(messages=tool_turns(4))
    agent = create_agent(
        model, [lookup_tool], middleware=[middleware], checkpointer=InMemorySaver()
    )
    for turn in range(4):
        message = HumanMessage(f"q{turn}", id=f"h{turn}")
        result = await agent.ainvoke({"messages": [message]}, CONFIG)
        assert result["messages"][-1].content == f"Answer {turn}: done."
    assert errors
    assert (await failing_memory.aget_stats("failing")).active_entries == len(result["messages"])


@pytest.mark.parametrize("mode", ["raise", "empty"])
def test_the_model_never_gets_more_than_max_tokens_when_compression_fails(
    memory_url: str, lookup_tool: BaseTool, mode: str
) -> None:
    """With a summarizer that fails, every request the agent's model receives still fits
    the memory's max_tokens and stays provider-valid; every message stays stored and
    active."""
    config = MemoryConfig(max_tokens=300, max_entries=100_000, auto_compress=False)
    model = ToolCallingFakeModel(messages=tool_turns(8))
    summarizer = FakeSummarizer(mode=mode)
    with ConversationMemory(url=memory_url, config=config, summarizer=summarizer) as memory:
        middleware = TieredMemoryMiddleware(memory, keep=("messages", 2))
        agent = create_agent(
            model, [lookup_tool], middleware=[middleware], checkpointer=InMemorySaver()
        )
        for turn in range(8):
            agent.invoke({"messages": [HumanMessage(f"q{turn} " * 20, id=f"h{turn}")]}, CONFIG)
        assert len(model.requests) == 16
        for request in model.requests:
            assert memory.counter.count_messages(request) <= 300
            assert_provider_valid(request)
        assert is_summary_message(model.requests[-1][0])  # the head says what was left out
        stats = memory.get_stats("failing")
        assert stats.summaries == 0 and stats.active_entries == stats.total_entries
        assert stats.total_tokens > 3 * 300


@pytest.mark.parametrize(
    ("summarizer", "level"),
    [
        (lambda prompt: "long " * 5_000, logging.INFO),
        (FakeSummarizer(mode="raise"), logging.WARNING),
    ],
    ids=["not-shorter", "raises"],
)
def test_a_failed_compression_is_logged_at_its_errors_level(
    memory_url: str,
    lookup_tool: BaseTool,
    caplog: pytest.LogCaptureFixture,
    summarizer: Any,
    level: int,
) -> None:
    """A summary not shorter than its input is a normal event (INFO); a summarizer that
    raises is a warning."""
    config = MemoryConfig(max_tokens=1_000_000, max_entries=100_000, auto_compress=False)
    with ConversationMemory(url=memory_url, config=config, summarizer=summarizer) as memory:
        middleware = TieredMemoryMiddleware(memory, trigger=("messages", 6), keep=("messages", 2))
        model = ToolCallingFakeModel(messages=tool_turns(3))
        agent = create_agent(
            model, [lookup_tool], middleware=[middleware], checkpointer=InMemorySaver()
        )
        with caplog.at_level(logging.DEBUG, logger="tiermem_agents"):
            for turn in range(3):
                agent.invoke({"messages": [HumanMessage(f"q{turn}", id=f"h{turn}")]}, CONFIG)
    records = [r for r in caplog.records if "tiermem compression failed" in r.getMessage()]
    assert records and {r.levelno for r in records} == {level}
