"""LangMem's memory tools on ``TieredStore``.

Needs tiermem, ``tiermem-langgraph`` and ``langmem`` (``pip install langmem``).
Run ``python examples/langgraph_langmem.py``. ``create_manage_memory_tool`` and
``create_search_memory_tool`` work unchanged: the agent stores a memory under the
user's namespace and later finds it by words with tiermem's full-text search. A
scripted model plays the agent, so no API key is needed.
"""

from __future__ import annotations

import warnings
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.warnings import LangGraphDeprecatedSinceV10
from tiermem_agents.testing import ToolCallingFakeModel
from tiermem_langgraph import TieredStore

with warnings.catch_warnings():
    # trustcall, a LangMem dependency, imports Send from its pre-1.0 module.
    warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
    from langmem import create_manage_memory_tool, create_search_memory_tool

DEFAULT_URL = "sqlite:///langgraph-langmem.db"
NAMESPACE = ("memories", "{langgraph_user_id}")


def _call(name: str, call_id: str, **args: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


SCRIPT = [
    _call("manage_memory", "m1", content="The user's dog is called Pixel", action="create"),
    AIMessage("I'll remember Pixel."),
    _call("search_memory", "s1", query="dog name"),
    AIMessage("Your dog is called Pixel."),
]


def forget(store: TieredStore, prefix: tuple[str, ...]) -> None:
    """Delete the items under ``prefix``: each run starts afresh (the file keeps an
    earlier run's)."""
    for item in store.search(prefix, limit=1000):
        store.delete(item.namespace, item.key)


def main(url: str | None = None) -> None:
    """Run two turns on ``url`` (default: ``langgraph-langmem.db`` here).

    Args:
        url: A SQLAlchemy URL for the store.
    """
    tools = [
        create_manage_memory_tool(namespace=NAMESPACE),
        create_search_memory_tool(namespace=NAMESPACE),
    ]
    config: Any = {"configurable": {"langgraph_user_id": "ada"}}
    with TieredStore.from_url(url or DEFAULT_URL) as store:
        forget(store, ("memories", "ada"))
        agent = create_agent(ToolCallingFakeModel(messages=iter(SCRIPT)), tools, store=store)
        for question in ("My dog is called Pixel.", "What is my dog's name?"):
            print(f"user> {question}")
            result = agent.invoke({"messages": [HumanMessage(question)]}, config)
            print(f"agent> {result['messages'][-1].content}")
        for item in store.search(("memories", "ada")):
            print(f"  memory: {item.value['content']}")  # its key is a new UUID every run


if __name__ == "__main__":
    main()
