"""tiermem for LangChain agents: ``TieredMemoryMiddleware`` and ``recall_tool``."""

from __future__ import annotations

from importlib import metadata

from .middleware import TieredMemoryMiddleware, session_id_from_config
from .recall import recall_tool

__version__ = metadata.version("tiermem-agents")

__all__ = ["TieredMemoryMiddleware", "recall_tool", "session_id_from_config"]
