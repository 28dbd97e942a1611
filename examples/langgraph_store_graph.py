"""A LangGraph ``StateGraph`` compiled with ``store=TieredStore(...)``.

Needs tiermem and ``tiermem-langgraph`` (``make install``). Run
``python examples/langgraph_store_graph.py``. A node counts each user's visits in
the store; a time to live (``ttl=``) makes a visit counter forget after a day
without visits, and ``sweep_ttl`` deletes the expired counters.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from tiermem_langgraph import TieredStore

DEFAULT_URL = "sqlite:///langgraph-graph.db"


class Visit(TypedDict):
    """The graph's state: who visits, and their visit count after this one."""

    user: str
    visits: int


def count_visit(state: Visit, runtime: Runtime[Any]) -> dict[str, int]:
    """Add one to the user's visit counter in the store (it expires after a day)."""
    assert runtime.store is not None
    namespace = ("visits", state["user"])
    current = runtime.store.get(namespace, "counter")
    visits = (current.value["n"] if current else 0) + 1
    runtime.store.put(namespace, "counter", {"n": visits}, ttl=24 * 60)
    return {"visits": visits}


def main(url: str | None = None) -> None:
    """Run the graph for a few visits on ``url`` (default: ``langgraph-graph.db`` here).

    Args:
        url: A SQLAlchemy URL for the store.
    """
    builder = StateGraph(Visit)
    builder.add_node("count_visit", count_visit)
    builder.add_edge(START, "count_visit")
    builder.add_edge("count_visit", END)
    with TieredStore.from_url(url or DEFAULT_URL) as store:
        for item in store.search(("visits",), limit=1000):  # start afresh on every run
            store.delete(item.namespace, item.key)
        graph = builder.compile(store=store)
        for user in ("ada", "bob", "ada"):
            visits = graph.invoke({"user": user, "visits": 0})["visits"]
            print(f"{user}: visit {visits}")
        print("namespaces:", store.list_namespaces(prefix=("visits",)))
        print("swept:", store.sweep_ttl())
        stats = store.memory.get_tier_stats()
        print(f"documents: {stats.documents} ({stats.active_documents} active)")


if __name__ == "__main__":
    main()
