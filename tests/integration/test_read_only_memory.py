"""``ConversationMemory(read_only=True)`` and ``peek``: looking is not using.

A read-only memory never creates a database or tiermem's tables, serves the reads
that record no access, and refuses anything that would change a row (an access
record included) with ``ReadOnlyMemory``, leaving the database as it was.
``peek`` reads a session's context and counters without recording an access, on
any memory. ``Database.has_tables`` reports a failing database as a typed error.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem.errors import (
    ReadOnlyMemory,
    SessionNotFound,
    StorageCorrupt,
    StorageUnavailable,
)
from tiermem.testing import ManualClock, wait_for_feed

from ..reliability.dump import canonical_dump


def _conversation(engine: Engine, clock: ManualClock) -> None:
    """A session of three messages (the last one still waiting for the SQLite
    full-text index) in an ordinary memory."""
    with ConversationMemory(engine=engine, clock=clock) as writer:
        writer.add_user_message("s", "the heron nests by the river")
        writer.add_assistant_message("s", "herons nest in colonies")
        writer.add_user_message("s", "what about kingfishers")


def _stored(engine: Engine) -> dict[str, Any]:
    """Every row of tiermem's tables, the full-text index's apart (a read-only search
    on SQLite may index rows a writer left pending: upkeep of a derived index)."""
    dump = json.loads(canonical_dump(engine))
    return {table: rows for table, rows in dump.items() if "fts" not in table}


def test_a_missing_sqlite_file_is_an_error_and_stays_missing(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    with pytest.raises(StorageUnavailable, match="no database at"):
        ConversationMemory(f"sqlite:///{path}", read_only=True)
    assert not path.exists()


def test_a_database_without_tables_is_an_error_and_gets_none(engine: Engine) -> None:
    engine.connect().close()  # an empty database (on SQLite, an empty file)
    memory = ConversationMemory(engine=engine, read_only=True)
    with pytest.raises(StorageUnavailable, match="no tiermem tables"):
        memory.list_sessions()
    with pytest.raises(StorageUnavailable, match="no tiermem tables"):
        memory.peek("s")
    assert not memory.database.has_tables()
    assert sa.inspect(engine).get_table_names() == []
    memory.close()


def test_reads_that_record_no_access_work_and_change_nothing(
    engine: Engine, clock: ManualClock
) -> None:
    _conversation(engine, clock)
    with ConversationMemory(engine=engine, clock=clock) as ordinary:
        wait_for_feed(ordinary)  # on PostgreSQL, other clients' transactions end first
        events = ordinary.feed.changes()
    before = _stored(engine)
    reader = ConversationMemory(engine=engine, clock=clock, read_only=True)
    view = reader.peek("s")
    assert view.context.endswith("user: what about kingfishers")
    assert view.stats.total_entries == 3 and view.stats.access_count == 3
    assert reader.get_stats("s") == view.stats
    assert [info.session_id for info in reader.list_sessions()] == ["s"]
    if engine.dialect.name == "sqlite":  # the writer left its entries to be indexed
        assert json.loads(canonical_dump(engine))["tiermem_entry_fts_pending"]
    hits = reader.search("kingfishers")
    assert [hit.entry.content for hit in hits] == ["what about kingfishers"]
    assert reader.export_session("s").session_id == "s"
    assert [counts.project for counts in reader.list_projects()] == ["default"]
    assert reader.feed.changes() == events
    assert asyncio.run(reader.apeek("s")) == view
    reader.close()
    after = _stored(engine)
    assert after == before


WRITES: dict[str, Callable[[ConversationMemory], Any]] = {
    "add a message": lambda m: m.add_user_message("s", "one more"),
    "add a turn": lambda m: m.add_and_get_messages("s", [HumanMessage("one more")]),
    "add to a new session": lambda m: m.add_user_message("new", "first"),
    "read recording an access": lambda m: m.get_messages("s"),
    "read text recording an access": lambda m: m.get_context_for_llm("s"),
    "record an access": lambda m: m.track_access("s"),
    "load recording accesses": lambda m: m.load_context(),
    "compress": lambda m: m.compress("s", force=True, keep=0),
    "delete": lambda m: m.clear_session("s"),
    "rename": lambda m: m.rename_session("s", "renamed"),
    "import": lambda m: m.import_session(m.export_session("s"), session_id="copy"),
    "learn": lambda m: m.layers("scope").learn("heron", "nests in colonies"),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_a_write_raises_read_only_and_leaves_the_database_as_it_was(
    engine: Engine, clock: ManualClock, write: Callable[[ConversationMemory], Any]
) -> None:
    _conversation(engine, clock)
    before = _stored(engine)
    clock.advance(hours=1)  # an access would now change ``last_accessed``
    reader = ConversationMemory(engine=engine, clock=clock, read_only=True)
    with pytest.raises(ReadOnlyMemory):
        write(reader)
    reader.close()
    assert _stored(engine) == before


NOTHING_TO_CHANGE: dict[str, Callable[[ConversationMemory], Any]] = {
    "prune nothing expired": lambda m: m.prune_expired(),
    "recalculate unchanged tiers": lambda m: m.recalculate_tiers(),
    "clear an unknown session": lambda m: m.clear_session("unknown"),
    "count what forgetting would erase": lambda m: m.forget(sessions=["s"], dry_run=True).dry_run,
}


@pytest.mark.parametrize("operation", NOTHING_TO_CHANGE.values(), ids=NOTHING_TO_CHANGE.keys())
def test_an_operation_finding_nothing_to_change_succeeds_alike_on_both_backends(
    engine: Engine, clock: ManualClock, operation: Callable[[ConversationMemory], Any]
) -> None:
    _conversation(engine, clock)
    before = _stored(engine)
    reader = ConversationMemory(engine=engine, clock=clock, read_only=True)
    assert operation(reader) in (0, True)
    reader.close()
    assert _stored(engine) == before


def test_peek_records_no_access(memory: ConversationMemory, clock: ManualClock) -> None:
    memory.add_user_message("s", "hello")
    stored = memory.get_stats("s")
    clock.advance(days=40)
    view = memory.peek("s")
    assert view.stats == stored
    assert view.context == memory.get_context_for_llm("s")  # this read is an access
    assert memory.get_stats("s").access_count == stored.access_count + 1
    with pytest.raises(SessionNotFound):
        memory.peek("unknown")


def test_has_tables_reports_a_damaged_sqlite_file_as_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    path.write_bytes(b"not a database " * 512)
    memory = ConversationMemory(f"sqlite:///{path}")
    with pytest.raises(StorageCorrupt):
        memory.database.has_tables()
    memory.close()


def test_has_tables_reports_an_unreachable_server_as_a_typed_error() -> None:
    memory = ConversationMemory("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(StorageUnavailable):
        memory.database.has_tables()
    memory.close()


def test_an_empty_sqlite_file_has_no_tables(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    memory = ConversationMemory(f"sqlite:///{path}", read_only=True)
    with pytest.raises(StorageUnavailable, match="no tiermem tables"):
        memory.search("anything")
    memory.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []
