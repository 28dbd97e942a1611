"""The package's public names."""

from __future__ import annotations

from langgraph.store.base import BaseStore

import tiermem_langgraph


def test_exports() -> None:
    """TieredStore is a LangGraph BaseStore that supports TTL; ItemState is exported."""
    assert tiermem_langgraph.__all__ == ["DEFAULT_VECTOR_CANDIDATES", "ItemState", "TieredStore"]
    assert issubclass(tiermem_langgraph.TieredStore, BaseStore)
    assert tiermem_langgraph.TieredStore.supports_ttl is True
