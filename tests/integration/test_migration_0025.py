"""Migration 0025: compression writes no entry. The downgrade writes each current
compressed entry's summary into its row (as earlier versions read them) and drops
``compressed_seq``; the upgrade fills ``compressed_seq`` from the summaries and keeps
the rows as they are, which every read honours."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig, MemorySummary
from tiermem._storage.migrations import upgrade
from tiermem.doctor import find_violations
from tiermem.testing import FakeSummarizer

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)


def _entries(memory: ConversationMemory) -> list[tuple[int, bool, int | None]]:
    return [(e.seq, e.compressed, e.summary_id) for e in memory.get_entries("s")]


def _memory(url: str) -> ConversationMemory:
    config = MemoryConfig(auto_compress=False)
    return ConversationMemory(url, config=config, summarizer=FakeSummarizer(digest_words=2))


def _compressed_conversation(url: str) -> tuple[MemorySummary, list[tuple[int, bool, int | None]]]:
    """Ten messages at head, the first six compressed: the summary, and the entries."""
    upgrade(url)
    with _memory(url) as m:
        for turn in range(5):
            m.add_user_message("s", f"question {turn} about the tides and the harbour wall")
            m.add_assistant_message("s", f"answer {turn}: the wall holds at every spring tide")
        compression = m.compress("s", force=True, keep=4)
        assert compression is not None
        return compression.summary, _entries(m)


def _state(db: Engine) -> tuple[set[str], set[str], list[tuple[int, int | None]]]:
    inspector = sa.inspect(db)
    columns = {str(c["name"]) for c in inspector.get_columns("tiermem_session")}
    indexes = {str(i["name"]) for i in inspector.get_indexes("tiermem_entry")}
    with db.connect() as conn:
        rows = conn.execute(sa.text("SELECT seq, summary_id FROM tiermem_entry ORDER BY seq"))
        return columns, indexes, [(int(seq), summary) for seq, summary in rows]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_downgrade_writes_each_summary_and_the_upgrade_reads_both(url: str, db: Engine) -> None:
    summary, before = _compressed_conversation(url)
    columns, indexes, rows = _state(db)
    assert "compressed_seq" in columns and "ix_tiermem_entry_pinned" in indexes
    assert all(summary_id is None for _, summary_id in rows)  # compression wrote none

    downgrade(url, "0024")
    columns, indexes, rows = _state(db)
    assert "compressed_seq" not in columns
    assert "ix_tiermem_entry_active" in indexes and "ix_tiermem_entry_pinned" not in indexes
    covered = range(summary.first_seq, summary.last_seq + 1)
    assert rows == [(seq, summary.id if seq in covered else None) for seq, _ in rows]

    upgrade(url)
    columns, indexes, rows_after = _state(db)
    assert "compressed_seq" in columns and "ix_tiermem_entry_active" not in indexes
    assert rows_after == rows  # the upgrade rewrites no entry
    with db.connect() as conn:
        compressed_seq = conn.execute(sa.text("SELECT compressed_seq FROM tiermem_session"))
        assert compressed_seq.scalar() == summary.last_seq
    with _memory(url) as m:
        assert _entries(m) == before
        assert m.compress("s", force=True, keep=2) is not None  # the next one writes none
    assert _state(db)[2] == rows
    assert find_violations(db, deep=True) == []


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_database_not_migrated_yet_gets_the_prefix_on_first_use(url: str, db: Engine) -> None:
    """Opened by this version before ``tiermem db upgrade``, a database at 0024 gets
    ``compressed_seq`` and the index of pinned entries, and reads and compresses as
    one made by this version."""
    _, before = _compressed_conversation(url)
    downgrade(url, "0024")
    with _memory(url) as m:
        assert _entries(m) == before
        assert m.compress("s", force=True, keep=2) is not None
    columns, indexes, _ = _state(db)
    assert "compressed_seq" in columns and "ix_tiermem_entry_pinned" in indexes
    assert "ix_tiermem_entry_active" not in indexes
    assert find_violations(db, deep=True) == []
