"""TieredStore where LangGraph stores are used, unchanged: create_agent tools through
runtime.store, a StateGraph compiled with store=, and LangMem's memory tools."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, TypedDict

from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.warnings import LangGraphDeprecatedSinceV10

from tiermem_langgraph import TieredStore

with warnings.catch_warnings():
    # trustcall, a LangMem dependency, imports Send from its pre-1.0 module.
    warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
    from langmem import create_manage_memory_tool, create_search_memory_tool


class ToolCallingFake(GenericFakeChatModel):
    """``GenericFakeChatModel`` that accepts ``bind_tools`` (its answers are scripted)."""

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Ignore the tools: the scripted messages already name the calls."""
        return self


def scripted(*turns: AIMessage) -> ToolCallingFake:
    """A fake model answering with ``turns`` in order."""
    return ToolCallingFake(messages=iter(turns))


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    """An assistant message calling one tool."""
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


@tool
def remember(fact: str, runtime: ToolRuntime) -> str:
    """Remember a fact about the user."""
    assert runtime.store is not None
    key = f"fact-{len(runtime.store.search(('facts',), limit=100))}"
    runtime.store.put(("facts",), key, {"fact": fact})
    return f"stored {key}"


@tool
def recall(topic: str, runtime: ToolRuntime) -> str:
    """Recall what is known about a topic."""
    assert runtime.store is not None
    hits = runtime.store.search(("facts",), query=topic)
    return "; ".join(hit.value["fact"] for hit in hits) or "nothing"


def _tool_outputs(messages: list[Any]) -> list[str]:
    return [str(m.content) for m in messages if isinstance(m, ToolMessage)]


def test_create_agent_tools_use_the_store(store: TieredStore) -> None:
    """An agent's tools write and search the store through runtime.store; the facts
    persist in tiermem and a later run finds them."""
    model = scripted(
        call("remember", "c1", fact="The user likes green tea"),
        call("remember", "c2", fact="The user lives in Lyon"),
        AIMessage("Noted."),
        call("recall", "c3", topic="tea"),
        AIMessage("You like green tea."),
    )
    agent = create_agent(model, [remember, recall], store=store)
    agent.invoke({"messages": [HumanMessage("I like green tea and live in Lyon")]})
    assert sorted(i.value["fact"] for i in store.search(("facts",))) == [
        "The user likes green tea",
        "The user lives in Lyon",
    ]
    result = agent.invoke({"messages": [HumanMessage("What do I drink?")]})
    assert _tool_outputs(result["messages"]) == ["The user likes green tea"]


async def test_create_agent_async(store: TieredStore) -> None:
    """The same agent run asynchronously uses the store's async methods."""
    model = scripted(
        call("remember", "c1", fact="Prefers window seats"),
        call("recall", "c2", topic="window"),
        AIMessage("Done."),
    )
    agent = create_agent(model, [remember, recall], store=store)
    result = await agent.ainvoke({"messages": [HumanMessage("Book me a seat")]})
    assert _tool_outputs(result["messages"]) == ["stored fact-0", "Prefers window seats"]


class Counter(TypedDict):
    """The graph's state: the user and the visits seen."""

    user: str
    visits: int


def test_state_graph_with_store(store: TieredStore) -> None:
    """A StateGraph compiled with store= reads and writes the store from its nodes."""

    def visit(state: Counter, runtime: Runtime[Any]) -> dict[str, int]:
        assert runtime.store is not None
        namespace = ("visits", state["user"])
        current = runtime.store.get(namespace, "count")
        visits = (current.value["n"] if current else 0) + 1
        runtime.store.put(namespace, "count", {"n": visits})
        return {"visits": visits}

    builder = StateGraph(Counter)
    builder.add_node("visit", visit)
    builder.add_edge(START, "visit")
    builder.add_edge("visit", END)
    graph = builder.compile(store=store)
    assert graph.invoke({"user": "ada", "visits": 0})["visits"] == 1
    assert graph.invoke({"user": "ada", "visits": 0})["visits"] == 2
    assert graph.invoke({"user": "bob", "visits": 0})["visits"] == 1
    assert store.list_namespaces(prefix=("visits",)) == [("visits", "ada"), ("visits", "bob")]


def test_langmem_memory_tools(store: TieredStore) -> None:
    """LangMem's manage and search memory tools create, update, search and delete
    memories in the store, inside an agent with a templated namespace."""
    namespace = ("memories", "{langgraph_user_id}")
    manage = create_manage_memory_tool(namespace=namespace)
    search = create_search_memory_tool(namespace=namespace)
    model = scripted(
        call("manage_memory", "m1", content="User prefers dark mode", action="create"),
        AIMessage("Saved."),
        call("search_memory", "s1", query="dark mode"),
        AIMessage("Found it."),
    )
    agent = create_agent(model, [manage, search], store=store)
    config: Any = {"configurable": {"langgraph_user_id": "u1"}}
    agent.invoke({"messages": [HumanMessage("I prefer dark mode")]}, config)
    memories = store.search(("memories", "u1"))
    assert [m.value["content"] for m in memories] == ["User prefers dark mode"]
    result = agent.invoke({"messages": [HumanMessage("What do I prefer?")]}, config)
    assert "User prefers dark mode" in _tool_outputs(result["messages"])[0]
    key = memories[0].key
    update = create_manage_memory_tool(namespace=("memories", "u1"), store=store)
    update.invoke({"content": "User prefers light mode", "action": "update", "id": key})
    item = store.get(("memories", "u1"), key)
    assert item is not None and item.value["content"] == "User prefers light mode"
    update.invoke({"action": "delete", "id": key})
    assert store.get(("memories", "u1"), key) is None
