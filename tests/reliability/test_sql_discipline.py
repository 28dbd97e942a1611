"""T20: every write unit takes its lock up front; pooled SQLite connections are set up."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem._storage import database
from tiermem.errors import StorageBusy, StorageError
from tiermem.testing import FakeSummarizer, ManualClock

from ..conftest import PG_URL, MemoryFactory, pg_engine_for
from .commit_faults import terminate_backend

WRITES = ("INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER")
MARK_BEGIN, MARK_END = "<begin>", "<end>"


@contextmanager
def captured(engine: Engine) -> Iterator[list[str]]:
    """Every statement sent on ``engine``, with transaction boundaries as markers."""
    log: list[str] = []

    def on_begin(_conn: Any) -> None:
        log.append(MARK_BEGIN)

    def on_end(_conn: Any) -> None:
        log.append(MARK_END)

    def on_statement(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        log.append(" ".join(statement.split()))

    listeners: list[tuple[str, Callable[..., None]]] = [
        ("begin", on_begin),
        ("commit", on_end),
        ("rollback", on_end),
        ("before_cursor_execute", on_statement),
    ]
    for name, listener in listeners:
        sa.event.listen(engine, name, listener)
    try:
        yield log
    finally:
        for name, listener in listeners:
            sa.event.remove(engine, name, listener)


def units(log: list[str]) -> list[list[str]]:
    """The statements of each transaction, in order (markers removed).

    On SQLite tiermem sends its ``BEGIN`` from a ``begin`` listener of its own,
    just before the marker; it is counted as the unit's first statement.
    """
    result: list[list[str]] = []
    current: list[str] | None = None
    opening: str | None = None
    for item in log:
        if item == MARK_BEGIN:
            current = [opening] if opening else []
            opening = None
            result.append(current)
        elif item == MARK_END:
            current = None
        elif current is None and item.upper().startswith("BEGIN"):
            opening = item
        else:
            assert current is not None or item.upper().startswith("PRAGMA"), (
                f"statement outside a transaction: {item[:80]}"
            )
            if current is not None:
                current.append(item)
    return result


def _is_write(statement: str) -> bool:
    return statement.upper().startswith(WRITES) or " RETURNING " in statement.upper()


def _locks_session(statement: str) -> bool:
    """Whether ``statement`` locks the rows its unit writes: a session (or, for the
    maintenance of layer items, the items themselves) or the schema."""
    upper = statement.upper()
    return (
        any(f"FROM {table}" in upper and "FOR UPDATE" in upper for table in _LOCKED)
        or upper.startswith(tuple(f"UPDATE {table}" for table in _LOCKED))
        or "PG_ADVISORY_XACT_LOCK" in upper
    )


_LOCKED = ("TIERMEM_SESSION", "TIERMEM_LAYER_ITEM")


def _feed_only(statement: str) -> bool:
    """Whether ``statement`` writes only the change feed's own tables."""
    upper = statement.upper()
    return upper.startswith(("DELETE FROM TIERMEM_EVENT", "INSERT INTO TIERMEM_CONSUMER"))


def _exercise(memory: ConversationMemory, clock: ManualClock) -> None:
    """One call of every public write path of a memory."""
    memory.add_user_message("s", "hello")
    memory.add_messages(
        "s",
        [
            AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
            ToolMessage("r", tool_call_id="c1", name="f"),
            HumanMessage("more"),
        ],
    )
    for index in range(6):
        memory.add_assistant_message("s", f"answer {index}")
    memory.get_messages("s")
    memory.compress("s", force=True)
    state = memory.export_session("s")
    memory.import_session(state, session_id="copy")
    memory.track_access("copy")
    clock.advance(days=31)
    memory.add_user_message("fresh", "x")
    memory.recalculate_tiers()
    memory.prune_expired()
    memory.clear_session("fresh")


def test_every_write_unit_locks_first(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """On SQLite every write transaction starts with BEGIN IMMEDIATE; on PostgreSQL with
    SET LOCAL lock_timeout and then the session lock (FOR UPDATE, UPDATE of the session
    row, or the schema advisory lock) before any other write."""
    memory = make_memory(config=MemoryConfig(auto_compress=False), summarizer=FakeSummarizer())
    memory.list_sessions()
    # Expired by the time _exercise recalculates and prunes: those runs write items too.
    memory.layers("l").append("episodic", "soon expired")
    with captured(memory.engine) as log:
        _exercise(memory, clock)
    transactions = units(log)
    writes = [unit for unit in transactions if any(_is_write(s) for s in unit)]
    assert len(writes) >= 12
    for item_write in (
        "UPDATE TIERMEM_LAYER_ITEM SET MEMORY_TIER",
        "DELETE FROM TIERMEM_LAYER_ITEM",
    ):
        assert any(s.upper().startswith(item_write) for unit in writes for s in unit), item_write
    for unit in writes:
        if memory.engine.dialect.name == "sqlite":
            assert unit[0] == "BEGIN IMMEDIATE", unit[:3]
            continue
        assert unit[0].startswith("SET LOCAL lock_timeout"), unit[:3]
        if all(_feed_only(s) for s in unit[1:] if _is_write(s)):
            continue  # retention deletes old events only: no row another unit locks
        first_write = next(i for i, s in enumerate(unit) if _is_write(s))
        assert any(_locks_session(s) for s in unit[1 : first_write + 1]), unit[:4]
    if memory.engine.dialect.name == "sqlite":
        reads = [unit for unit in transactions if unit not in writes]
        assert all(unit[0] in ("BEGIN", "BEGIN IMMEDIATE") for unit in reads)


def test_postgres_transactions_plan_for_their_parameters(pg_schema: str) -> None:
    """On PostgreSQL every tiermem transaction, read or write, plans each statement
    for its actual parameters: a generic plan kept for a prepared statement since a
    session's tables were tiny made every read slower as the conversation grew. The
    setting is transaction-local, so the application's use of a shared pool is not
    changed."""
    engine = pg_engine_for(pg_schema)
    memory = ConversationMemory(engine=engine)
    try:
        memory.add_user_message("s", "hello")

        def mode(conn: sa.Connection) -> str:
            return str(conn.exec_driver_sql("SHOW plan_cache_mode").scalar())

        assert memory.database.run(mode, write=True) == "force_custom_plan"
        assert memory.database.run(mode, write=False) == "force_custom_plan"
        with engine.connect() as conn:
            assert mode(conn) == "auto"
    finally:
        memory.close()
        engine.dispose()


def test_postgres_settings_of_a_memorys_own_engine(pg_schema: str) -> None:
    """A memory made from a URL sets lock_timeout and plan_cache_mode once per
    connection, not in every transaction: its transactions start with their first
    real statement, the settings hold in reads and writes (also after a rolled back
    transaction returned the connection to the pool), and a write still waits at
    most lock_timeout for a session another connection holds."""
    memory = ConversationMemory(f"{PG_URL}?options=-csearch_path%3D{pg_schema}", lock_timeout=0.5)
    try:
        memory.add_user_message("s", "hello")

        def settings(conn: sa.Connection) -> tuple[str, str]:
            lock = str(conn.exec_driver_sql("SHOW lock_timeout").scalar())
            return lock, str(conn.exec_driver_sql("SHOW plan_cache_mode").scalar())

        def fail(conn: sa.Connection) -> None:
            conn.exec_driver_sql("SELECT 1/0")

        with pytest.raises(StorageError):
            memory.database.run(fail, write=True)
        for write in (True, False):
            assert memory.database.run(settings, write=write) == ("500ms", "force_custom_plan")
        with captured(memory.engine) as log:
            memory.add_user_message("s", "again")
        (unit,) = units(log)
        assert _locks_session(unit[0]), unit[:2]
        holder = pg_engine_for(pg_schema)
        try:
            with holder.begin() as conn:
                conn.exec_driver_sql("SELECT 1 FROM tiermem_session FOR UPDATE")
                started = time.monotonic()
                with pytest.raises(StorageBusy):
                    memory.add_user_message("s", "blocked")
                assert time.monotonic() - started < 5
        finally:
            holder.dispose()
    finally:
        memory.close()


def test_postgres_pings_only_connections_that_sat_idle(
    pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory made from a URL pings a pooled connection before a transaction only
    when the connection sat unused longer than PING_AFTER_IDLE_SECONDS (a busy
    service pays no round trip per transaction for it); a connection that died while
    idle is replaced, and the call works."""
    memory = ConversationMemory(f"{PG_URL}?options=-csearch_path%3D{pg_schema}")
    dialect = memory.engine.dialect
    ping = dialect.do_ping
    pings: list[int] = []

    def counted(dbapi_connection: Any) -> bool:
        pings.append(1)
        return ping(dbapi_connection)

    monkeypatch.setattr(dialect, "do_ping", counted)
    try:
        memory.add_user_message("s", "hello")
        memory.get_messages("s")
        memory.add_messages("s", [AIMessage("hi")])
        assert pings == []
        pid = memory.database.run(
            lambda c: c.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        )
        monkeypatch.setattr(database, "PING_AFTER_IDLE_SECONDS", 0.05)
        terminate_backend(pid)
        time.sleep(0.1)
        assert memory.add_user_message("s", "after the restart").seq == 3
        assert len(pings) == 1
    finally:
        memory.close()


@contextmanager
def commit_modes(engine: Engine) -> Iterator[list[str | None]]:
    """``synchronous_commit`` as each transaction on ``engine`` commits (PostgreSQL;
    ``None`` on SQLite, which has no such setting)."""
    modes: list[str | None] = []

    def on_commit(conn: sa.Connection) -> None:
        if conn.dialect.name != "postgresql":
            modes.append(None)
            return
        driver = conn.connection.driver_connection
        assert driver is not None
        row = driver.execute("SHOW synchronous_commit").fetchone()
        modes.append(str(row[0]))

    sa.event.listen(engine, "commit", on_commit)
    try:
        yield modes
    finally:
        sa.event.remove(engine, "commit", on_commit)


def test_only_access_records_commit_without_waiting(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """On PostgreSQL a read whose transaction writes only the access record commits
    without waiting for the disk; an append, and a read that woke the session (a
    tier change, with its event), commit synchronously. SQLite never asks."""
    memory = make_memory(config=MemoryConfig(auto_compress=False))
    memory.add_user_message("s", "hello")
    on_pg = memory.engine.dialect.name == "postgresql"
    with commit_modes(memory.engine) as modes:
        memory.get_messages("s")
    assert modes == ["off" if on_pg else None]
    with commit_modes(memory.engine) as modes:
        memory.add_user_message("s", "again")
    assert modes == ["on" if on_pg else None]
    clock.advance(days=10)
    memory.recalculate_tiers()
    with captured(memory.engine) as log, commit_modes(memory.engine) as modes:
        memory.get_messages("s")  # wakes the session: tier_changed
    (woken,) = units(log)
    assert modes == ["on" if on_pg else None]
    assert any("TIERMEM_EVENT" in statement.upper() for statement in woken) is True
    with commit_modes(memory.engine) as modes:
        memory.get_messages("s")  # ACTIVE again: the access record alone
    assert modes == ["off" if on_pg else None]


def test_pooled_sqlite_connections_are_configured(tmp_path: Path) -> None:
    """Every pooled SQLite connection has foreign keys on, WAL, a busy timeout >= 10 s
    and reads through a memory map."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    memory = ConversationMemory(engine=engine)
    memory.add_user_message("s", "warm")
    connections = [engine.connect() for _ in range(3)]
    try:
        for conn in connections:
            raw = conn.connection.driver_connection
            assert raw is not None
            assert raw.execute("PRAGMA foreign_keys").fetchone() == (1,)
            assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            assert raw.execute("PRAGMA busy_timeout").fetchone()[0] >= 10_000
            assert raw.execute("PRAGMA mmap_size").fetchone()[0] >= 1 << 28
    finally:
        for conn in connections:
            conn.close()
        memory.close()


def _raw(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    conn.execute("PRAGMA busy_timeout = 100")
    return conn


def test_writer_waits_for_a_write_lock_instead_of_failing(tmp_path: Path) -> None:
    """While another connection holds the write lock, an append waits (no instant
    SQLITE_BUSY) and succeeds when the lock is released (the deferred-upgrade trap)."""
    path = tmp_path / "x.db"
    memory = ConversationMemory(f"sqlite:///{path}")
    memory.add_user_message("s", "first")
    holder = _raw(path)
    holder.execute("BEGIN")
    holder.execute("SELECT count(*) FROM tiermem_entry").fetchone()
    holder.execute("UPDATE tiermem_session SET access_count = access_count")
    done: list[float] = []

    def append() -> None:
        started = time.monotonic()
        memory.add_user_message("s", "second")
        done.append(time.monotonic() - started)

    thread = threading.Thread(target=append)
    thread.start()
    time.sleep(0.5)
    assert done == [], "the append did not wait for the write lock"
    holder.execute("COMMIT")
    thread.join(10)
    assert not thread.is_alive() and done and done[0] >= 0.4
    # A reader holding an old snapshot never blocks an append either.
    holder.execute("BEGIN")
    holder.execute("SELECT count(*) FROM tiermem_entry").fetchone()
    started = time.monotonic()
    memory.add_user_message("s", "third")
    assert time.monotonic() - started < 1.0
    holder.execute("COMMIT")
    holder.close()
    assert [e.seq for e in memory.get_entries("s")] == [1, 2, 3]
    memory.close()


def test_lock_timeout_raises_busy(make_memory: MemoryFactory, backend: str) -> None:
    """A writer blocked longer than lock_timeout=0.3 raises StorageBusy after about 0.3 s
    (not a fixed 30 s) and leaves no trace: the SQLite file lock, or on PostgreSQL the
    session row held FOR UPDATE (T35 b)."""
    memory = make_memory(lock_timeout=0.3)
    memory.add_user_message("s", "first")
    with ExitStack() as stack:
        if backend == "sqlite":
            assert memory.engine.url.database is not None
            holder = stack.enter_context(closing(_raw(Path(memory.engine.url.database))))
            holder.execute("BEGIN IMMEDIATE")
        else:
            conn = stack.enter_context(memory.engine.connect())
            conn.execute(sa.text("SELECT pk FROM tiermem_session FOR UPDATE")).all()
        started = time.monotonic()
        with pytest.raises(StorageBusy):
            memory.add_user_message("s", "blocked")
        elapsed = time.monotonic() - started
    assert 0.2 <= elapsed < 5.0
    assert [e.seq for e in memory.get_entries("s")] == [1]
