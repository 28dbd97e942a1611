"""An agent whose LangGraph checkpointer is tiermem: ``TieredSaver``.

Needs tiermem, ``tiermem-langgraph`` and ``tiermem-agents`` (``make install``). Run
``python examples/langgraph_checkpointer.py``; no API key needed (a scripted model
plays the agent). ``create_agent(..., checkpointer=TieredSaver.from_url(...))`` keeps
the thread's state: each message is stored once, as an entry of the tiermem session
named after the thread (searchable, exportable), and each checkpoint refers to the
entries it holds. An edit through ``update_state`` is a new revision, so the old
checkpoint still reads back what it held; made from an old checkpoint, the thread
goes on from there, and the entries it left behind are kept but retired (out of
the context and of search). ``prune(keep_latest)`` drops the old checkpoints and
keeps every message.
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from tiermem_agents.testing import ToolCallingFakeModel
from tiermem_langgraph import TieredSaver

DEFAULT_URL = "sqlite:///langgraph-checkpointer.db"
THREAD = "orders"
CONFIG: RunnableConfig = {"configurable": {"thread_id": THREAD}}
ORDERS = {"A-100": "shipped", "A-101": "packing", "A-102": "delayed: customs"}


@tool
def order_status(order_id: str) -> str:
    """Return the shipping status of an order."""
    return f"Order {order_id}: {ORDERS.get(order_id, 'unknown order')}."


def _script() -> list[AIMessage]:
    """The scripted agent: a tool call per question, then an answer."""
    messages = []
    for turn, order in enumerate(ORDERS):
        call = {"name": "order_status", "args": {"order_id": order}, "id": f"call-{turn}"}
        messages.append(AIMessage("", tool_calls=[call], id=f"ai-call-{turn}"))
        messages.append(AIMessage(f"{order} is {ORDERS[order]}.", id=f"ai-{turn}"))
    return messages


def main(url: str | None = None) -> None:
    """Run the agent on ``url`` (default: ``langgraph-checkpointer.db`` here).

    Args:
        url: A SQLAlchemy URL for the memory.
    """
    with TieredSaver.from_url(url or DEFAULT_URL, project="checkpointer-example") as saver:
        saver.setup()
        saver.delete_thread(THREAD)  # start over on every run
        memory = saver.memory
        model = ToolCallingFakeModel(messages=iter(_script()))
        agent = create_agent(model, [order_status], checkpointer=saver)
        for turn, order in enumerate(ORDERS):
            question = HumanMessage(f"Where is order {order}?", id=f"q{turn}")
            state = agent.invoke({"messages": [question]}, CONFIG)
            print(f"user: {question.content}  agent: {state['messages'][-1].content}")

        history = list(agent.get_state_history(CONFIG))
        entries = memory.get_entries(THREAD)
        print(f"{len(history)} checkpoints, {len(entries)} messages stored once each")

        first = next(s for s in reversed(history) if len(s.values.get("messages", [])) == 4)
        edit = HumanMessage("Where is order A-100, please?", id="q0")
        agent.update_state(first.config, {"messages": [edit]})
        old = agent.get_state(first.config).values["messages"][0]
        print(f"old checkpoint still reads: {old.content}")
        print(
            f"the session now holds {len(memory.get_entries(THREAD))} entries (one revision more)"
        )

        saver.prune([THREAD], strategy="keep_latest")
        left = len(list(saver.list(CONFIG)))
        kept = memory.get_entries(THREAD)
        retired = sum(entry.retired_at is not None for entry in kept)
        print(f"after prune: {left} checkpoint, {len(kept)} entries kept ({retired} retired)")
        hits = memory.search("customs", session_id=THREAD)
        print(f"search 'customs': {len(hits)} hits (the turns after the edit left the thread)")
        head = agent.get_state(CONFIG).values["messages"]
        print(
            f"the thread goes on from the edit: {len(head)} messages, the first: {head[0].content}"
        )


if __name__ == "__main__":
    main()
