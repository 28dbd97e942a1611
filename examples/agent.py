"""A tool-calling agent whose history tiermem compresses losslessly.

Needs tiermem and ``tiermem-agents`` (which brings ``langchain``), not on a package index:
``make demo`` installs both, or from the repository's root
``pip install -e '.[offline]' -e integrations/langchain-agents``.
Run ``python examples/agent.py``. ``create_agent`` gets two tools, tiermem's
``recall_memory`` tool and ``TieredMemoryMiddleware``: every message is stored, the
agent state is compressed to a summary plus recent messages when it passes 12
messages, and the last question is answered by recalling a summarized tool result.
With ``TIERMEM_CHAT_MODEL`` set (e.g. ``openai:gpt-4o-mini``) a real model plays the
agent and writes the summaries; otherwise a scripted model does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from tiermem_agents import TieredMemoryMiddleware, recall_tool
from tiermem_agents.testing import ToolCallingFakeModel

from tiermem import ConversationMemory, MemoryConfig

DEFAULT_URL = "sqlite:///agent.db"
THREAD = "ops-desk"
ORDERS = {"A-100": "shipped", "A-101": "packing", "A-102": "delayed: customs", "A-103": "delivered"}
RATES = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85}


@tool
def order_status(order_id: str) -> str:
    """Return the shipping status of an order."""
    return f"Order {order_id}: {ORDERS.get(order_id, 'unknown order')}."


@tool
def convert(amount: float, currency: str) -> str:
    """Convert an amount in euros to another currency."""
    return f"{amount} EUR = {amount * RATES.get(currency, 1.0):.2f} {currency}."


QUESTIONS = [f"What is the status of order {order}?" for order in ORDERS] + [
    "How much is 250 euros in dollars?",
    "And 99 euros in pounds?",
    "What was the status of order A-100 again?",
]


def _script() -> Iterator[AIMessage]:
    """The scripted agent: one tool call per question, then an answer."""
    calls = [("order_status", {"order_id": order}) for order in ORDERS] + [
        ("convert", {"amount": 250, "currency": "USD"}),
        ("convert", {"amount": 99, "currency": "GBP"}),
        ("recall_memory", {"query": "A-100"}),
    ]
    for turn, (name, args) in enumerate(calls):
        yield AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{turn}"}])
        yield AIMessage(f"Done: see the {name} result above.")


def _model() -> BaseChatModel:
    """A real chat model if TIERMEM_CHAT_MODEL names one, else the scripted agent."""
    name = os.environ.get("TIERMEM_CHAT_MODEL")
    return init_chat_model(name) if name else ToolCallingFakeModel(messages=_script())


def main(url: str | None = None) -> None:
    """Run the agent conversation on ``url`` (default: ``agent.db`` here).

    Args:
        url: A SQLAlchemy URL for the memory.
    """
    model = _model()
    real = os.environ.get("TIERMEM_CHAT_MODEL")
    config = MemoryConfig(max_tokens=4_000, recent_window=4, auto_compress=False)
    with ConversationMemory(
        url=url or DEFAULT_URL, config=config, summarizer=model if real else None
    ) as mem:
        mem.clear_session(THREAD)  # start afresh: agent.db keeps what an earlier run stored
        mem.on("compressed", lambda _, **kw: print(f"  [tiermem] {kw['result'].summary.content}"))
        agent = create_agent(
            model,
            tools=[order_status, convert, recall_tool(mem)],
            middleware=[
                TieredMemoryMiddleware(mem, trigger=("messages", 12), keep=("messages", 4))
            ],
            checkpointer=InMemorySaver(),
        )
        run: RunnableConfig = {"configurable": {"thread_id": THREAD}}
        for question in QUESTIONS:
            print(f"user> {question}")
            result = agent.invoke({"messages": [HumanMessage(question)]}, run)
            for message in result["messages"][-3:-1]:
                if message.type == "tool":
                    print(f"  tool {message.name}: {message.content}")
            print(f"agent> {result['messages'][-1].content}")
        stats = mem.get_stats(THREAD)
        print(
            f"stored {stats.total_entries} messages, {stats.compressed_entries} compressed into "
            f"{stats.summaries} summaries; the agent state holds {len(result['messages'])}"
        )


if __name__ == "__main__":
    main()
