"""Resuming agents from a langgraph checkpointer never duplicates or loses entries."""

from __future__ import annotations

from collections import Counter

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from tiermem import ConversationMemory, MemoryConfig, is_summary_message
from tiermem.testing import FakeSummarizer

from tiermem_agents import TieredMemoryMiddleware
from tiermem_agents.testing import ToolCallingFakeModel, assert_provider_valid, tool_turns

CONFIG: RunnableConfig = {"configurable": {"thread_id": "resumed"}}


def _keys(memory: ConversationMemory) -> list[str]:
    """One key per stored entry: the message id, or the tool_call_id of a result."""
    keys = []
    for entry in memory.get_entries("resumed"):
        message = entry.to_message()
        keys.append(
            f"result:{message.tool_call_id}"
            if isinstance(message, ToolMessage)
            else str(message.id)
        )
    return keys


def _comparable(messages: list[BaseMessage]) -> list[object]:
    """Ids, with the summary message shown by its content."""
    return [m.content if is_summary_message(m) else m.id for m in messages]


def _memory(url: str) -> ConversationMemory:
    """A fresh memory instance (a restarted process) on the same database."""
    config = MemoryConfig(max_tokens=1_000_000, max_entries=100_000, auto_compress=False)
    return ConversationMemory(url=url, config=config, summarizer=FakeSummarizer())


def test_restarted_process_resumes_exactly(memory_url: str, lookup_tool: BaseTool) -> None:
    """New memory, middleware and agent over the same checkpointer add each message once."""
    saver = InMemorySaver()
    script = tool_turns(16)
    for start in (0, 8):
        with _memory(memory_url) as memory:
            middleware = TieredMemoryMiddleware(
                memory, trigger=("messages", 9), keep=("messages", 3)
            )
            model = ToolCallingFakeModel(messages=script)
            agent = create_agent(model, [lookup_tool], middleware=[middleware], checkpointer=saver)
            for turn in range(start, start + 8):
                agent.invoke({"messages": [HumanMessage(f"q{turn}", id=f"h{turn}")]}, CONFIG)
            state = agent.get_state(CONFIG).values["messages"]
            assert_provider_valid(state)
            assert _comparable(state) == _comparable(memory.get_messages("resumed", query=""))
    with _memory(memory_url) as memory:
        keys = _keys(memory)
        assert not [key for key, n in Counter(keys).items() if n > 1]
        assert len(keys) == sum(3 + 1 + t % 2 for t in range(16))
        assert memory.get_stats("resumed").summaries >= 2


def test_interrupted_run_resumes_without_duplicates(
    memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """A run paused before its tools and resumed records the call and results once."""
    middleware = TieredMemoryMiddleware(memory, trigger=("messages", 7), keep=("messages", 2))
    model = ToolCallingFakeModel(messages=tool_turns(6))
    agent = create_agent(
        model,
        [lookup_tool],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
        interrupt_before=["tools"],
    )
    for turn in range(6):
        agent.invoke({"messages": [HumanMessage(f"q{turn}", id=f"h{turn}")]}, CONFIG)
        paused = _keys(memory)
        assert paused[-1] == f"ai_{turn}_call"
        result = agent.invoke(None, CONFIG)
        assert result["messages"][-1].id == f"ai_{turn}_answer"
        assert_provider_valid(result["messages"])
    keys = _keys(memory)
    assert len(keys) == len(set(keys)) == sum(3 + 1 + t % 2 for t in range(6))
    assert memory.get_stats("resumed").summaries >= 1


def test_replayed_input_is_not_recorded_twice(
    memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """Sending a message whose id is already in the thread adds no entry."""
    middleware = TieredMemoryMiddleware(memory, trigger=("messages", 100))
    model = ToolCallingFakeModel(messages=tool_turns(2))
    agent = create_agent(
        model, [lookup_tool], middleware=[middleware], checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [HumanMessage("q0", id="h0")]}, CONFIG)
    before = _keys(memory)
    agent.invoke({"messages": [HumanMessage("q0", id="h0"), HumanMessage("q1", id="h1")]}, CONFIG)
    after = _keys(memory)
    assert after[: len(before)] == before
    assert after.count("h0") == 1 and after.count("h1") == 1
