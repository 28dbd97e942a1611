"""The hot statements run on the SQLite driver connection (tiermem._driver) and
must behave exactly as through ``Connection.execute``: same values and types,
same listeners, same error types."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage import _fast as _driver
from tiermem._storage import statements as _sql
from tiermem._storage.database import Database
from tiermem.errors import StorageError
from tiermem.testing import ManualClock

from ..conftest import sqlite_engine


def _memory(engine: Engine) -> ConversationMemory:
    return ConversationMemory(
        engine=engine, clock=ManualClock(datetime(2026, 1, 2, 3, 4, 5, 678901, UTC))
    )


def test_rows_match_sqlalchemy(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path / "d.db")
    memory = _memory(engine)
    memory.add_messages("s", [HumanMessage("hi", id="h1"), AIMessage("hello")])
    db = Database(engine=engine)
    keys = {"project": "default", "session_id": "s"}

    def both(conn: sa.Connection) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        fast = _driver.first(conn, _sql.SELECT_SESSION, keys)
        slow = dict(conn.execute(_sql.SELECT_SESSION, keys).mappings().one())
        return fast, slow

    fast, slow = db.run(both, write=False)
    assert fast == slow
    assert fast is not None
    assert isinstance(fast["last_accessed"], datetime)
    assert fast["last_accessed"].replace(tzinfo=UTC) == datetime(2026, 1, 2, 3, 4, 5, 678901, UTC)

    def entries(conn: sa.Connection) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        params = {"pk_": slow["pk"]}
        fast_rows = _driver.fetch(conn, _sql.SELECT_ACTIVE, params)
        slow_rows = [dict(r) for r in conn.execute(_sql.SELECT_ACTIVE, params).mappings()]
        return fast_rows, slow_rows

    fast_rows, slow_rows = db.run(entries, write=False)
    assert fast_rows == slow_rows
    assert [type(row["pinned"]) for row in fast_rows] == [bool, bool]
    assert [type(row["timestamp"]) for row in fast_rows] == [datetime, datetime]
    memory.close()
    db.dispose()


def test_listeners_see_every_hot_statement(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path / "d.db")
    memory = _memory(engine)
    memory.add_user_message("s", "first")
    seen: list[str] = []

    def spy(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement.split()[0].upper())

    sa.event.listen(engine, "before_cursor_execute", spy)
    try:
        memory.add_and_get_messages("s", [HumanMessage("a"), AIMessage("b")])
    finally:
        sa.event.remove(engine, "before_cursor_execute", spy)
    # BEGIN IMMEDIATE, the reserving UPDATE, one INSERT per entry, the entries'
    # change-feed events in one executemany, then the window SELECT.
    assert seen == ["BEGIN", "UPDATE", "INSERT", "INSERT", "INSERT", "SELECT"]
    memory.close()


def test_driver_errors_are_translated_and_roll_back(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path / "d.db")
    memory = _memory(engine)
    memory.add_user_message("s", "kept")
    with engine.begin() as conn:  # the second INSERT of the turn fails inside SQLite
        conn.exec_driver_sql(
            "CREATE TRIGGER refuse BEFORE INSERT ON tiermem_entry WHEN new.content = 'lost 2' "
            "BEGIN SELECT RAISE(ABORT, 'refused by trigger'); END"
        )
    with pytest.raises(StorageError, match="refused by trigger"):
        memory.add_messages("s", [HumanMessage("lost 1"), AIMessage("lost 2")])
    assert [m.text for m in memory.get_messages("s")] == ["kept"]
    assert memory.get_stats("s").total_entries == 1
    memory.close()


def test_a_constraint_violation_is_a_storage_error(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path / "d.db")
    memory = _memory(engine)
    memory.add_user_message("s", "one")
    db = Database(engine=engine)
    session = db.run(
        lambda conn: _driver.first(
            conn, _sql.SELECT_SESSION, {"project": "default", "session_id": "s"}
        )
    )
    assert session is not None
    row = {
        "session_pk": session["pk"],
        "seq": 1,  # taken: (session_pk, seq) is unique
        "type": "user",
        "role": "user",
        "content": "dup",
        "message": "{}",
        "message_id": None,
        "timestamp": datetime(2026, 1, 1, tzinfo=UTC),
        "token_count": 1,
        "pinned": False,
        "meta": "{}",
    }
    with pytest.raises(StorageError, match="UNIQUE"):
        db.run(
            lambda conn: _driver.fetch_rows(conn, _sql.INSERT_ENTRIES, row, column_keys=tuple(row))
        )
    assert memory.get_stats("s").total_entries == 1
    memory.close()
    db.dispose()


def test_a_missing_parameter_is_a_programming_error(tmp_path: Path) -> None:
    engine = sqlite_engine(tmp_path / "d.db")
    db = Database(engine=engine)
    with pytest.raises(sa.exc.ArgumentError, match="session_id"):
        db.run(lambda conn: _driver.first(conn, _sql.SELECT_SESSION, {"project": "default"}))
    db.dispose()
