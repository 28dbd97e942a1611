"""SQLite reads the change feed along its position index, from the position on.

Since migration 0017 the index is on ``project`` alone, SQLite ending each entry with
the row's id; a database not migrated yet still has the one on ``(project, xid, id)``.
A follower's read, the newest position and retention's walk ask for ``xid = 0``
(every SQLite event's) and ids after the position, which both indexes serve in
delivery order: without that, SQLite sorts all of a project's events in a temporary
B-tree on every poll.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tiermem import ConversationMemory
from tiermem._storage.migrations import upgrade

from ..integration.test_tiers_migration import downgrade


def _feed_statements(url: str) -> list[tuple[str, Any]]:
    """The SELECTs on the event table of a read after a position, of the newest
    position and of a retention run."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, sql: str, params: Any, *_args: Any) -> None:
        if "FROM tiermem_event" in sql:
            seen.append((sql, params))

    with ConversationMemory(url) as memory:
        for turn in range(30):
            memory.add_user_message(f"s{turn % 3}", f"message {turn}")
        sa.event.listen(memory.engine, "before_cursor_execute", record)
        (first, *_) = memory.feed.changes(limit=1)
        assert len(memory.feed.changes(after=first, limit=5, session_id="s1")) == 5
        assert memory.feed.last_position() != "0:0"
        memory.feed.prune(timedelta(days=1))
    return seen


@pytest.mark.parametrize("revision", ["head", "0016"])
def test_feed_reads_walk_the_position_index_without_a_sort(tmp_path: Path, revision: str) -> None:
    """On the index of 0017 and on 0016's, no read of the feed sorts or scans the table."""
    path = tmp_path / "feed.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    if revision != "head":
        downgrade(url, revision)
    statements = _feed_statements(url)
    assert len(statements) == 4  # two reads, the newest position, one retention batch
    with sqlite3.connect(path) as conn:
        for sql, params in statements:
            plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
            walk = [step for step in plan if "tiermem_event" in step and "rowid=?" not in step]
            assert walk and all("ix_tiermem_event_position" in step for step in walk), plan
            assert not any("TEMP B-TREE" in step for step in plan), plan
