"""tiermem: tiered, token-aware conversation memory for LangChain."""

from __future__ import annotations

from importlib import metadata

from .compression import DEFAULT_SUMMARY_PROMPT
from .context_loading import LoadedSession
from .db import Database
from .errors import TiermemError
from .lifecycle import TierStats
from .memory import ConversationMemory
from .models import (
    CompressionResult,
    EntryType,
    MemoryConfig,
    MemoryEntry,
    MemorySummary,
    SearchHit,
    SessionInfo,
    SessionStats,
)
from .rendering import MISSING_RESULT_MARKER, OMITTED_MARKER, is_summary_message
from .state import SessionState
from .tables import create_tables
from .tiers import MemoryTier, TierPolicy, calculate_tier
from .tokens import TokenCounter

__version__ = metadata.version("tiermem")

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "MISSING_RESULT_MARKER",
    "OMITTED_MARKER",
    "CompressionResult",
    "ConversationMemory",
    "Database",
    "EntryType",
    "LoadedSession",
    "MemoryConfig",
    "MemoryEntry",
    "MemorySummary",
    "MemoryTier",
    "SearchHit",
    "SessionInfo",
    "SessionState",
    "SessionStats",
    "TierPolicy",
    "TierStats",
    "TiermemError",
    "TokenCounter",
    "__version__",
    "calculate_tier",
    "create_tables",
    "is_summary_message",
]
