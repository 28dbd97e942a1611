"""A follower whose PostgreSQL LISTEN connection drops.

``follow()`` died with a raw ``psycopg.OperationalError`` when its listening
connection was terminated (a server restart, ``pg_terminate_backend``). It now
opens a new one and goes on after the last event it yielded, or raises
``StorageUnavailable`` after a bounded number of attempts. PostgreSQL only: SQLite
followers poll and hold no such connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Generator, Iterator
from typing import Any, cast

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage import events
from tiermem.errors import StorageUnavailable
from tiermem.feed import ChangeEvent

from ..conftest import pg_admin, pg_engine_for


@pytest.fixture(name="memory")
def fixture_memory(pg_schema: str) -> Iterator[ConversationMemory]:
    """A memory on a fresh PostgreSQL schema."""
    engine = pg_engine_for(pg_schema)
    with ConversationMemory(engine=engine) as memory:
        yield memory
    engine.dispose()


@pytest.fixture(name="listeners")
def fixture_listeners(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every listener the followers of this test open (sync and async)."""
    made: list[Any] = []

    class Recorded(events.Listener):
        def __init__(self, engine: Engine) -> None:
            super().__init__(engine)
            made.append(self)

    class AsyncRecorded(events.AsyncListener):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(events, "Listener", Recorded)
    monkeypatch.setattr(events, "AsyncListener", AsyncRecorded)
    return made


def _backend(listener: Any) -> int:
    return int(listener._conn.info.backend_pid)


def terminate(pid: int) -> None:
    """End PostgreSQL backend ``pid`` and wait until it is gone."""
    admin = pg_admin()
    try:
        with admin.connect() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            deadline = time.monotonic() + 10
            while conn.execute(
                sa.text("SELECT 1 FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
            ).first():
                assert time.monotonic() < deadline, f"backend {pid} did not end"
                time.sleep(0.02)
    finally:
        admin.dispose()


def test_follow_reconnects_and_resumes(memory: ConversationMemory, listeners: list[Any]) -> None:
    """The listening connection is terminated between two events: the follower
    opens a new one and yields the next event, none twice, none lost."""
    memory.add_user_message("s", "one")
    follower = cast(Generator[ChangeEvent], memory.feed.follow(poll_interval=0.05, idle_timeout=30))
    try:
        first = next(follower)
        (listener,) = listeners
        dropped = _backend(listener)
        terminate(dropped)
        memory.add_user_message("s", "two")
        second = next(follower)
        assert [first.payload["seq"], second.payload["seq"]] == [1, 2]
        assert _backend(listener) != dropped
    finally:
        follower.close()


def test_afollow_reconnects_and_resumes(memory: ConversationMemory, listeners: list[Any]) -> None:
    """The same for the async follower."""

    async def scenario() -> list[int]:
        await memory.aadd_user_message("s", "one")
        follower = cast(
            AsyncGenerator[ChangeEvent], memory.feed.afollow(poll_interval=0.05, idle_timeout=30)
        )
        try:
            first = await anext(follower)
            (listener,) = listeners
            dropped = _backend(listener)
            await asyncio.to_thread(terminate, dropped)
            await memory.aadd_user_message("s", "two")
            second = await anext(follower)
            assert _backend(listener) != dropped
            return [first.payload["seq"], second.payload["seq"]]
        finally:
            await follower.aclose()

    assert asyncio.run(scenario()) == [1, 2]


def test_a_server_that_stays_away_is_a_typed_error(
    memory: ConversationMemory, listeners: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """When no new connection can be opened, the follower raises
    ``StorageUnavailable`` after ``LISTEN_ATTEMPTS`` attempts."""
    memory.add_user_message("s", "one")
    follower = cast(Generator[ChangeEvent], memory.feed.follow(poll_interval=0.05, idle_timeout=30))
    attempts: list[str] = []

    def refuse(conninfo: str, **_: Any) -> None:
        attempts.append(conninfo)
        raise psycopg.OperationalError("connection refused")

    try:
        next(follower)
        terminate(_backend(listeners[0]))
        monkeypatch.setattr(events, "LISTEN_BACKOFF", 0.001, raising=False)
        monkeypatch.setattr(psycopg, "connect", refuse)
        with pytest.raises(StorageUnavailable, match="8 attempts"):
            next(follower)
    finally:
        follower.close()
    assert len(attempts) == events.LISTEN_ATTEMPTS


def test_an_async_server_that_stays_away_is_a_typed_error(
    memory: ConversationMemory, listeners: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for the async follower."""
    attempts: list[str] = []

    async def refuse(conninfo: str, **_: Any) -> None:
        attempts.append(conninfo)
        raise psycopg.OperationalError("connection refused")

    async def scenario() -> None:
        await memory.aadd_user_message("s", "one")
        follower = cast(
            AsyncGenerator[ChangeEvent], memory.feed.afollow(poll_interval=0.05, idle_timeout=30)
        )
        try:
            await anext(follower)
            await asyncio.to_thread(terminate, _backend(listeners[0]))
            monkeypatch.setattr(events, "LISTEN_BACKOFF", 0.001, raising=False)
            monkeypatch.setattr(psycopg.AsyncConnection, "connect", refuse)
            with pytest.raises(StorageUnavailable):
                await anext(follower)
        finally:
            await follower.aclose()

    asyncio.run(scenario())
    assert len(attempts) == events.LISTEN_ATTEMPTS


def test_follow_survives_losing_every_connection(
    memory: ConversationMemory, listeners: list[Any]
) -> None:
    """The listening connection and the memory's pooled ones are all terminated, as
    a server restart does: the follower goes on with the next event."""
    memory.add_user_message("s", "one")
    follower = cast(Generator[ChangeEvent], memory.feed.follow(poll_interval=0.05, idle_timeout=30))
    try:
        first = next(follower)
        with memory.engine.connect() as conn:
            pooled = conn.exec_driver_sql(
                "SELECT pid FROM pg_stat_activity "
                "WHERE application_name = current_setting('application_name')"
            ).scalars()
            pids = [*pooled, _backend(listeners[0])]
        for pid in pids:
            terminate(pid)
        memory.add_user_message("t", "two")
        second = next(follower)
        assert [(first.session_id, second.session_id)] == [("s", "t")]
    finally:
        follower.close()
