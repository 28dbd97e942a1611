"""Regressions for core bugs the reliability suite found (one test per fix)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from tiermem import MemoryConfig
from tiermem.errors import StorageError
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory


def test_failed_summary_commit_releases_the_claim(make_memory: MemoryFactory) -> None:
    """When the summary commit fails, the claim is released, so an immediate retry
    compresses instead of raising CompressionInProgress until the lease runs out."""
    memory = make_memory(
        config=MemoryConfig(auto_compress=False, claim_ttl=3600, recent_window=2),
        summarizer=FakeSummarizer(),
    )
    for index in range(6):
        memory.add_user_message("s", f"message {index} with a handful of words")

    def fail_summary(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.startswith("INSERT INTO tiermem_summary"):
            raise sa.exc.OperationalError(statement, None, Exception("disk I/O error"))

    sa.event.listen(memory.engine, "before_cursor_execute", fail_summary)
    try:
        with pytest.raises(StorageError):
            memory.compress("s", force=True)
    finally:
        sa.event.remove(memory.engine, "before_cursor_execute", fail_summary)
    result = memory.compress("s", force=True)
    assert result is not None and memory.get_stats("s").summaries == 1
