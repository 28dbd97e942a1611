"""The package's public names."""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

import tiermem_langgraph


def test_exports() -> None:
    """TieredStore is a LangGraph BaseStore that supports TTL, TieredSaver a checkpoint
    saver; ItemState is exported."""
    assert tiermem_langgraph.__all__ == [
        "DEFAULT_VECTOR_CANDIDATES",
        "ItemState",
        "TieredSaver",
        "TieredStore",
    ]
    assert issubclass(tiermem_langgraph.TieredSaver, BaseCheckpointSaver)
    assert issubclass(tiermem_langgraph.TieredStore, BaseStore)
    assert tiermem_langgraph.TieredStore.supports_ttl is True
