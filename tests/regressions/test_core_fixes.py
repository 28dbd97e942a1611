"""Regressions for core bugs the reliability suite found (one test per fix)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tiermem import ConversationMemory, MemoryConfig
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


def test_first_connection_waits_for_another_writer_before_switching_to_wal(
    tmp_path: Path,
) -> None:
    """Switching a fresh file to WAL while another process holds its write lock makes
    SQLite answer ``database is locked`` at once, without calling the busy handler
    (several processes starting on one new file at once hit it). The connection must
    wait the writer out, not fail."""
    path = tmp_path / "fresh.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE other_app (a INTEGER)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO other_app VALUES (1)")
    released = threading.Event()

    def release() -> None:
        time.sleep(0.3)
        other.execute("COMMIT")
        released.set()

    releaser = threading.Thread(target=release)
    releaser.start()
    try:
        memory = ConversationMemory(url=f"sqlite:///{path}")
        memory.add_user_message("s", "hello")
        assert released.is_set()
        assert [e.content for e in memory.get_entries("s")] == ["hello"]
        memory.close()
    finally:
        releaser.join()
        other.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    check.close()
