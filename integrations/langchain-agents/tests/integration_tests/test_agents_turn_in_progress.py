"""The middleware never hides what ``keep`` asked for nor the turn in progress."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from tiermem import ConversationMemory, MemoryConfig, is_summary_message
from tiermem.testing import FakeSummarizer, check_invariants

from tiermem_agents import TieredMemoryMiddleware
from tiermem_agents.testing import ToolCallingFakeModel, assert_provider_valid, tool_turns

CONFIG: RunnableConfig = {"configurable": {"thread_id": "thread-1"}}
#: About 6,500 tokens: more than the whole budget of 4,000.
BIG = " ".join(f"word{i}" for i in range(2500))


@tool
def fetch(query: str) -> str:
    """Fetch a long report."""
    return BIG


@pytest.fixture(name="memory")
def fixture_memory(tmp_path: Path) -> Iterator[ConversationMemory]:
    """A memory of 4,000 tokens that compresses only when the middleware asks."""
    config = MemoryConfig(max_tokens=4000, auto_compress=False)
    url = f"sqlite:///{tmp_path}/turn.db"
    with ConversationMemory(url=url, config=config, summarizer=FakeSummarizer()) as mem:
        yield mem
        check_invariants(mem.engine)


def _run(memory: ConversationMemory, turns: int) -> ToolCallingFakeModel:
    model = ToolCallingFakeModel(
        messages=tool_turns(turns, tool="fetch", calls_per_turn=lambda t: 1)
    )
    middleware = TieredMemoryMiddleware(memory, trigger=("tokens", 4000), keep=("messages", 20))
    agent = create_agent(model, [fetch], middleware=[middleware], checkpointer=InMemorySaver())
    for turn in range(turns):
        agent.invoke({"messages": [HumanMessage(f"question {turn}", id=f"h{turn}")]}, CONFIG)
    return model


def _conversation(request: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in request if not is_summary_message(m)]


def test_a_tool_result_larger_than_the_budget_leaves_the_question_in_view(
    memory: ConversationMemory,
) -> None:
    """The model's call after a 6,500-token tool result holds the question, the tool
    call and the result (truncated with a marker to fit the budget), never only a
    summary; the stored result keeps its whole text."""
    model = _run(memory, 1)
    after_tool = model.requests[1]
    assert_provider_valid(after_tool)
    shown = _conversation(after_tool)
    assert [m.id for m in shown[:2]] == ["h0", "ai_0_call"]
    result = shown[2]
    assert isinstance(result, ToolMessage)
    # Cut by tiermem's context or by the middleware's fit, each with its marker.
    assert "truncated to" in str(result.content) and "token budget" in str(result.content)
    assert str(result.content).startswith("word0 word1")
    assert memory.counter.count_messages(after_tool) <= 4000
    stored = [e.message for e in memory.get_entries("thread-1")]
    assert any(isinstance(m, ToolMessage) and m.content == BIG for m in stored)


def test_every_turn_shows_its_question_and_exchange(memory: ConversationMemory) -> None:
    """Over several turns each call of the model holds its turn's question and, after a
    tool ran, the call and its result; what is left out is counted in a note."""
    model = _run(memory, 3)
    for index, request in enumerate(model.requests):
        assert_provider_valid(request)
        turn = index // 2
        ids = [m.id for m in _conversation(request)]
        assert f"h{turn}" in ids
        if index % 2:
            assert f"ai_{turn}_call" in ids
            assert isinstance(_conversation(request)[-1], ToolMessage)
        assert memory.counter.count_messages(request) <= 4000


def test_keep_counts_stored_messages_not_the_shown_ones(memory: ConversationMemory) -> None:
    """keep=("messages", 20) keeps the 20 newest stored messages out of any summary,
    although tiermem's context (cut to the budget) showed fewer of them."""
    _run(memory, 2)
    assert memory.get_summaries("thread-1") == []
    assert len(memory.get_active_entries("thread-1")) == 8
