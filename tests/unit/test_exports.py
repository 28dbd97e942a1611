"""The public names of the ``tiermem`` package."""

from __future__ import annotations

import tiermem

EXPECTED = [
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


def _isort_key(name: str) -> tuple[int, str]:
    """Constants first, then classes, then functions (ruff's RUF022 order)."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_pinned() -> None:
    """``tiermem.__all__`` lists exactly the documented public names."""
    assert tiermem.__all__ == EXPECTED


def test_all_is_sorted_and_importable() -> None:
    """Every name in ``__all__`` is importable and the list is kept sorted."""
    assert tiermem.__all__ == sorted(tiermem.__all__, key=_isort_key)
    for name in tiermem.__all__:
        assert getattr(tiermem, name) is not None, name


def test_version_is_the_distribution_version() -> None:
    """``__version__`` is the installed distribution's version string."""
    from importlib import metadata

    assert tiermem.__version__ == metadata.version("tiermem")
