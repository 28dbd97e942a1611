"""recall_tool lets an agent read back what tiermem summarized away."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from tiermem import ConversationMemory

from tiermem_agents import TieredMemoryMiddleware, recall_tool
from tiermem_agents.testing import ToolCallingFakeModel, tool_turns

CONFIG: RunnableConfig = {"configurable": {"thread_id": "recall"}}


def _compressed_conversation(memory: ConversationMemory, tool: BaseTool, turns: int) -> None:
    """Run a conversation long enough that its first turns are summarized."""
    middleware = TieredMemoryMiddleware(memory, trigger=("messages", 8), keep=("messages", 2))
    model = ToolCallingFakeModel(messages=tool_turns(turns))
    agent = create_agent(model, [tool], middleware=[middleware], checkpointer=InMemorySaver())
    for turn in range(turns):
        agent.invoke({"messages": [HumanMessage(f"q{turn}", id=f"h{turn}")]}, CONFIG)


def test_recall_finds_compressed_originals(
    memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """Searching a word of a summarized tool result returns that result, marked summarized."""
    _compressed_conversation(memory, lookup_tool, 8)
    first = memory.get_entries("recall")[2]
    assert first.compressed
    answer = recall_tool(memory).invoke({"query": "alpha0x0"}, CONFIG)
    assert "alpha0x0" in answer
    assert "summarized" in answer


def test_recall_is_scoped_to_the_current_session(
    memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """Another session's matching entries are never returned."""
    _compressed_conversation(memory, lookup_tool, 3)
    memory.add_user_message("someone-else", "my code word is alpha0x0 elsewhere")
    tool = recall_tool(memory, include_active=True)
    answer = tool.invoke({"query": "alpha0x0"}, CONFIG)
    assert "elsewhere" not in answer
    other: RunnableConfig = {"configurable": {"thread_id": "someone-else"}}
    assert "elsewhere" in tool.invoke({"query": "alpha0x0"}, other)


def test_recall_skips_what_the_model_still_sees(
    memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """By default only compressed entries are returned; include_active adds the rest."""
    _compressed_conversation(memory, lookup_tool, 8)
    newest = "alpha7x1"
    assert "Nothing" in recall_tool(memory).invoke({"query": newest}, CONFIG)
    assert "recent" in recall_tool(memory, include_active=True).invoke({"query": newest}, CONFIG)
    answer = recall_tool(memory, limit=2).invoke({"query": "code word"}, CONFIG)
    assert answer.startswith("2 passage(s)") and "recent" not in answer


def test_recall_reports_when_nothing_matches(memory: ConversationMemory) -> None:
    """A query without matches says so instead of returning an empty string."""
    memory.add_user_message("recall", "hello there")
    answer = recall_tool(memory).invoke({"query": "zeppelin"}, CONFIG)
    assert answer.startswith("Nothing in this conversation's earlier history matches")


async def test_recall_async(memory: ConversationMemory, lookup_tool: BaseTool) -> None:
    """The tool's async path searches the same history."""
    _compressed_conversation(memory, lookup_tool, 8)
    answer = await recall_tool(memory, limit=1).ainvoke({"query": "alpha1x0"}, CONFIG)
    assert "alpha1x0" in answer and answer.startswith("1 passage")


def test_agent_calls_recall_after_compression(
    memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """An agent whose early turns were summarized gets the exact original back from recall."""
    _compressed_conversation(memory, lookup_tool, 8)
    question = AIMessage(
        "", tool_calls=[{"name": "recall_memory", "args": {"query": "alpha0x0"}, "id": "r1"}]
    )
    model = ToolCallingFakeModel(messages=iter([question, AIMessage("It was alpha0x0.")]))
    middleware = TieredMemoryMiddleware(memory, trigger=("messages", 8), keep=("messages", 2))
    agent = create_agent(model, [recall_tool(memory)], middleware=[middleware])
    result = agent.invoke({"messages": [HumanMessage("What was the first code word?")]}, CONFIG)
    recalled = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert "alpha0x0" in str(recalled[-1].content)
    assert result["messages"][-1].content == "It was alpha0x0."
