"""A ``create_agent`` agent whose tools keep long-term memory in ``TieredStore``.

Needs tiermem and ``tiermem-langgraph`` (``make install``, or from the repository's
root ``pip install -e '.[offline]' -e integrations/langgraph -e
integrations/langchain-agents``). Run ``python examples/langgraph_store_agent.py``.
The tools read and write ``runtime.store`` exactly as they would any LangGraph
store; the items land in tiermem's database, searchable by words, with access tiers.
A scripted model plays the agent, so no API key is needed.
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.messages import AIMessage, HumanMessage
from tiermem_agents.testing import ToolCallingFakeModel
from tiermem_langgraph import TieredStore

DEFAULT_URL = "sqlite:///langgraph-store.db"
USER = "ada"


@tool
def save_preference(text: str, runtime: ToolRuntime) -> str:
    """Save a preference of the user."""
    assert runtime.store is not None
    namespace = ("preferences", USER)
    key = f"p{len(runtime.store.search(namespace, limit=1000))}"
    runtime.store.put(namespace, key, {"text": text})
    return f"saved {key}"


@tool
def find_preferences(query: str, runtime: ToolRuntime) -> str:
    """Find the user's preferences about a topic."""
    assert runtime.store is not None
    hits = runtime.store.search(("preferences", USER), query=query, limit=3)
    return "; ".join(hit.value["text"] for hit in hits) or "nothing saved about that"


def _call(name: str, call_id: str, **args: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


SCRIPT = [
    _call("save_preference", "c1", text="Prefers aisle seats on flights"),
    _call("save_preference", "c2", text="Vegetarian meals"),
    AIMessage("Saved both preferences."),
    _call("find_preferences", "c3", query="seat on a flight"),
    AIMessage("You prefer aisle seats."),
]


def forget(store: TieredStore, prefix: tuple[str, ...]) -> None:
    """Delete the items under ``prefix``: each run starts afresh (the file keeps an
    earlier run's)."""
    for item in store.search(prefix, limit=1000):
        store.delete(item.namespace, item.key)


def main(url: str | None = None) -> None:
    """Run two turns of the agent on ``url`` (default: ``langgraph-store.db`` here).

    Args:
        url: A SQLAlchemy URL for the store.
    """
    with TieredStore.from_url(url or DEFAULT_URL) as store:
        forget(store, ("preferences", USER))
        agent = create_agent(
            ToolCallingFakeModel(messages=iter(SCRIPT)),
            [save_preference, find_preferences],
            store=store,
        )
        for question in ("I like aisle seats and eat vegetarian.", "Which seat do I like?"):
            print(f"user> {question}")
            result = agent.invoke({"messages": [HumanMessage(question)]})
            print(f"agent> {result['messages'][-1].content}")
        for item in store.search(("preferences", USER)):
            state = store.item_state(item.namespace, item.key)
            assert state is not None
            print(f"  {item.key}: {item.value['text']} [{state.tier.value}, {state.access_count}]")


if __name__ == "__main__":
    main()
