"""Migration 0018: on SQLite the tables of checkpoint values and pending writes are
``WITHOUT ROWID``; their rows are kept through the upgrade and a downgrade, and a
thread reads back the same. PostgreSQL's tables do not change."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from sqlalchemy.engine import Engine
from tiermem_langgraph import TieredSaver

from tiermem import ConversationMemory
from tiermem._storage.migrations import upgrade

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

TABLES = ("tiermem_checkpoint_blob", "tiermem_checkpoint_write")
THREAD: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def _without_rowid(db: Engine) -> dict[str, bool]:
    with db.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)", TABLES
        )
        return {
            str(name): str(sql).rstrip().upper().endswith("WITHOUT ROWID") for name, sql in rows
        }


def _rows(db: Engine) -> dict[str, list[tuple[Any, ...]]]:
    with db.connect() as conn:
        return {
            table: sorted(tuple(row) for row in conn.execute(sa.text(f"SELECT * FROM {table}")))
            for table in TABLES
        }


def _write(url: str) -> dict[str, Any]:
    """A checkpoint with a value and a pending write; what the thread reads back."""
    with ConversationMemory(url) as memory:
        saver = TieredSaver(memory)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"topic": "herons"}
        config = saver.put(THREAD, checkpoint, {"step": 1}, {"topic": "1"})
        saver.put_writes(config, [("topic", "egrets")], "task-1")
        found = saver.get_tuple(config)
        assert found is not None
        return {"values": found.checkpoint["channel_values"], "writes": found.pending_writes}


def _read(url: str) -> dict[str, Any]:
    with ConversationMemory(url) as memory:
        found = TieredSaver(memory).get_tuple(THREAD)
        assert found is not None
        return {"values": found.checkpoint["channel_values"], "writes": found.pending_writes}


def test_the_tables_lose_their_rowid_and_keep_their_rows(url: str, db: Engine) -> None:
    upgrade(url)
    written = _write(url)
    rows = _rows(db)
    assert all(rows.values())
    sqlite = db.dialect.name == "sqlite"
    if sqlite:
        assert _without_rowid(db) == dict.fromkeys(TABLES, True)

    downgrade(url, "0017")
    if sqlite:
        assert _without_rowid(db) == dict.fromkeys(TABLES, False)
    assert _rows(db) == rows
    assert _read(url) == written

    upgrade(url)
    if sqlite:
        assert _without_rowid(db) == dict.fromkeys(TABLES, True)
        with db.connect() as conn:
            names = conn.exec_driver_sql("SELECT name FROM sqlite_master").scalars().all()
        assert not [name for name in names if "before_0018" in name]
    assert _rows(db) == rows
    assert _read(url) == written
