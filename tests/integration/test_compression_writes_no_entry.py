"""Compression writes no entry: it stores a summary and moves its session's
``compressed_seq``, and each compressed entry's summary is read off the ranges
(:mod:`tiermem._storage.coverage`). Every read sees what it saw when compression
wrote each entry's ``summary_id``; the active entries are read as two index ranges."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem._storage import statements
from tiermem._storage.coverage import covering
from tiermem.doctor import find_violations
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory


def _rows(engine: Engine) -> list[tuple[Any, ...]]:
    """Every entry row, with its row version on PostgreSQL (``xmin`` changes with any
    write of the row, even one that changes no value)."""
    version = "xmin::text" if engine.dialect.name == "postgresql" else "0"
    with engine.connect() as conn:
        return [
            tuple(row)
            for row in conn.exec_driver_sql(f"SELECT *, {version} FROM tiermem_entry ORDER BY id")
        ]


CONFIG = MemoryConfig(auto_compress=False)
#: A word only one question holds, by turn.
PLACES = ("lighthouse", "harbour", "ferry", "beacon", "quay", "pier")


def _conversation(memory: ConversationMemory) -> None:
    """Twelve messages, the third entry pinned context among them (seq 3)."""
    for turn, place in enumerate(PLACES):
        memory.add_user_message("s", f"question {turn} about the {place}")
        memory.add_assistant_message(
            "s", f"answer {turn}: the keeper logs the weather, the tides and every ship it sees"
        )
        if turn == 0:
            memory.add_context("s", "Answer briefly.", "setup", pinned=True)


def test_compression_covers_entries_without_writing_them(
    make_memory: MemoryFactory, engine: Engine
) -> None:
    memory = make_memory(
        config=MemoryConfig(auto_compress=False), summarizer=FakeSummarizer(digest_words=2)
    )
    _conversation(memory)
    before = _rows(engine)
    compressions = [memory.compress("s", force=True, keep=keep) for keep in (4, 2)]
    assert compressions[0] is not None and compressions[1] is not None
    first, second = compressions[0].summary, compressions[1].summary
    assert _rows(engine) == before  # not one entry row written
    with engine.connect() as conn:
        compressed_seq = conn.execute(
            sa.text("SELECT compressed_seq FROM tiermem_session")
        ).scalar()
    assert compressed_seq == second.last_seq

    entries = memory.get_entries("s")
    covered = {e.seq: e.summary_id for e in entries if e.compressed}
    assert covered == {
        **{seq: first.id for seq in range(first.first_seq, first.last_seq + 1) if seq != 3},
        **dict.fromkeys(range(second.first_seq, second.last_seq + 1), second.id),
    }
    assert entries[2].pinned and not entries[2].compressed  # inside the prefix, kept
    assert [e.id for e in memory.expand_summary(first.id)] == list(first.original_entry_ids)
    assert [e.seq for e in memory.get_entries("s", include_compressed=False)] == [3, 12, 13]
    hits = memory.search("lighthouse")
    assert hits and hits[0].entry.seq == 1 and hits[0].entry.summary_id == first.id
    messages = memory.get_messages("s")
    assert "Answer briefly." in [m.content for m in messages]
    assert messages[-1].text.startswith("answer 5: ")
    assert find_violations(engine, deep=True) == []


def test_the_doctor_reports_a_compressed_seq_its_summaries_do_not_end_at(
    make_memory: MemoryFactory, engine: Engine
) -> None:
    memory = make_memory(
        config=MemoryConfig(auto_compress=False), summarizer=FakeSummarizer(digest_words=2)
    )
    _conversation(memory)
    compression = memory.compress("s", force=True, keep=4)
    assert compression is not None
    summary = compression.summary
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE tiermem_session SET compressed_seq = compressed_seq + 2"))
    problems = find_violations(engine)
    assert any(
        f"compressed_seq {summary.last_seq + 2}, but its summaries end at seq {summary.last_seq}"
        in problem
        for problem in problems
    ), problems
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE tiermem_session SET compressed_seq = compressed_seq - 2"))


def test_the_active_entries_are_read_as_two_index_ranges(tmp_path: Path) -> None:
    """The read of a session's active entries (every turn's) looks only at the entries
    after its compressed prefix and at its pinned ones (never compressed): its cost
    follows the active window, not the conversation."""
    path = tmp_path / "plan.db"
    with ConversationMemory(f"sqlite:///{path}") as memory:
        memory.add_messages("s", [HumanMessage("hello")])
    with sqlite3.connect(path) as conn:
        for statement in (statements.SELECT_ACTIVE, statements.SELECT_MESSAGE_WINDOW):
            sql = str(statement.compile(dialect=sa.dialects.sqlite.dialect()))
            arguments = (1,) * sql.count("?")
            plan = [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", arguments)]
            reads = sorted(step for step in plan if "tiermem_entry" in step)
            # The unique (session, seq) index is SQLite's own for the constraint.
            assert len(reads) == 2, plan
            assert reads[0].endswith(" USING INDEX ix_tiermem_entry_pinned (session_pk=?)")
            assert reads[1].startswith("SEARCH tiermem_entry USING INDEX sqlite_autoindex_")
            assert reads[1].endswith(" (session_pk=? AND seq>?)")


def test_covering_finds_the_range_that_holds_a_seq() -> None:
    ranges = (12, [3, 10], [(8, 101), (12, 102)])
    found = [covering(ranges, seq) for seq in (1, 2, 3, 8, 9, 10, 12, 13)]
    assert found == [None, None, 101, 101, None, 102, 102, None]
    assert covering(None, 5) is None
    # Beyond the compressed prefix nothing is covered, whatever a range says.
    assert covering((9, [3, 10], [(8, 101), (12, 102)]), 10) is None
