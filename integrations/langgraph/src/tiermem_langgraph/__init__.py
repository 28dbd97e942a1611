"""tiermem-langgraph: a LangGraph ``BaseStore`` on tiermem's tables.

``TieredStore`` gives ``create_agent(store=...)``, ``runtime.store`` in tools,
a ``StateGraph`` compiled with ``store=`` and LangMem's memory tools a store on
SQLite or PostgreSQL with full-text search, SQL filters, time to live and
tiermem's access tiers. ``TieredSaver`` is a checkpoint saver that keeps each
message of a thread once, as an entry of the thread's tiermem session.
"""

from __future__ import annotations

from .checkpoint import TieredSaver
from .store import DEFAULT_VECTOR_CANDIDATES, ItemState, TieredStore

__all__ = ["DEFAULT_VECTOR_CANDIDATES", "ItemState", "TieredSaver", "TieredStore"]
