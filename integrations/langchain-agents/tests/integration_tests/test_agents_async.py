"""The async hooks of TieredMemoryMiddleware under ainvoke."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from tiermem import ConversationMemory, is_summary_message

from tiermem_agents import TieredMemoryMiddleware
from tiermem_agents.testing import ToolCallingFakeModel, assert_provider_valid, tool_turns

CONFIG: RunnableConfig = {"configurable": {"thread_id": "async-thread"}}


def _comparable(messages: list[BaseMessage]) -> list[object]:
    """Ids, with the summary message shown by its content."""
    return [m.content if is_summary_message(m) else m.id for m in messages]


async def test_async_agent_compresses_and_records_everything(
    memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """ainvoke compresses several times, keeps the state valid and stores every message once."""
    middleware = TieredMemoryMiddleware(memory, trigger=("messages", 10), keep=("messages", 4))
    model = ToolCallingFakeModel(messages=tool_turns(20))
    agent = create_agent(
        model, [lookup_tool], middleware=[middleware], checkpointer=InMemorySaver()
    )
    for turn in range(20):
        message = HumanMessage(f"question {turn}", id=f"h{turn}")
        result = await agent.ainvoke({"messages": [message]}, CONFIG)
        assert_provider_valid(result["messages"])
        rendered = await memory.aget_messages("async-thread", query="")
        assert _comparable(result["messages"]) == _comparable(rendered)
    for request in model.requests:
        assert_provider_valid(request)
    entries = await memory.aget_entries("async-thread")
    messages = [entry.to_message() for entry in entries]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert len(results) == len(set(results)) == sum(1 + t % 2 for t in range(20))
    assert len(messages) == len({m.id for m in messages})
    assert (await memory.aget_stats("async-thread")).summaries >= 3
