"""tiermem: tiered, token-aware conversation memory for LangChain."""

from __future__ import annotations

from importlib import metadata

from ._compression.policy import DEFAULT_SUMMARY_PROMPT
from ._core.current_turn import TRUNCATED_MARKER
from ._core.recall_block import RECALL_MARKER, RECALLED_ITEMS_MARKER
from ._core.render import MISSING_RESULT_MARKER, OMITTED_MARKER, is_summary_message
from ._storage.database import Database
from ._storage.tables import create_tables
from .copying import CopyResult, copy_project
from .errors import TiermemError
from .memory import ConversationMemory
from .state import SessionState
from .tiers import MemoryTier, TierPolicy, calculate_tier
from .tokens import TokenCounter
from .types import (
    CompressionResult,
    ContextMessages,
    EntryType,
    ForgetResult,
    LoadedSession,
    MemoryConfig,
    MemoryEntry,
    MemorySummary,
    SearchHit,
    SessionInfo,
    SessionStats,
    SessionView,
    TierStats,
)

__version__ = metadata.version("tiermem")

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "MISSING_RESULT_MARKER",
    "OMITTED_MARKER",
    "RECALLED_ITEMS_MARKER",
    "RECALL_MARKER",
    "TRUNCATED_MARKER",
    "CompressionResult",
    "ContextMessages",
    "ConversationMemory",
    "CopyResult",
    "Database",
    "EntryType",
    "ForgetResult",
    "LoadedSession",
    "MemoryConfig",
    "MemoryEntry",
    "MemorySummary",
    "MemoryTier",
    "SearchHit",
    "SessionInfo",
    "SessionState",
    "SessionStats",
    "SessionView",
    "TierPolicy",
    "TierStats",
    "TiermemError",
    "TokenCounter",
    "__version__",
    "calculate_tier",
    "copy_project",
    "create_tables",
    "is_summary_message",
]
