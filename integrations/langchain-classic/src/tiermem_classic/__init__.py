"""tiermem for legacy LangChain chains: ``TieredConversationMemory``."""

from __future__ import annotations

from importlib import metadata

from .memory import TieredConversationMemory

__version__ = metadata.version("tiermem-classic")

__all__ = ["TieredConversationMemory"]
