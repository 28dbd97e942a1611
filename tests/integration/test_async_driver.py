"""What the async driver guarantees for a transaction (``Database.arun``, which every
async operation's transactions go through), on both backends and on a database made
from a URL, as an application gets it: work that raises rolls back, conflicts are
retried, a memory serves several event loops, and a cancelled caller leaves no
connection checked out and no transaction open."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage

from tiermem import ConversationMemory
from tiermem._storage.database import Database
from tiermem.errors import StorageBusy

from ..conftest import store_url


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A URL on a fresh SQLite file or a fresh PostgreSQL schema."""
    return store_url(backend, tmp_path, request)


@pytest.fixture(name="database")
def fixture_database(url: str) -> Iterator[Database]:
    """A Database made from the URL, with a one-column table ``t``."""
    database = Database(url)
    database.run(lambda conn: conn.exec_driver_sql("CREATE TABLE t (x INTEGER)"))
    yield database
    database.dispose()


def _count(conn: sa.Connection) -> int:
    return int(conn.exec_driver_sql("SELECT count(*) FROM t").scalar_one())


def _checked_out(database: Database) -> int:
    pool = database.engine.pool
    assert isinstance(pool, sa.pool.QueuePool)
    return pool.checkedout()


async def test_work_that_raises_rolls_back(database: Database) -> None:
    """The work's own error reaches the caller unchanged and nothing it wrote stays."""

    def insert_then_fail(conn: sa.Connection) -> None:
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        raise ValueError("work failed")

    with pytest.raises(ValueError, match="work failed"):
        await database.arun(insert_then_fail)
    assert await database.arun(_count, write=False) == 0


async def test_conflicts_are_retried_then_busy(database: Database) -> None:
    """A serialization failure is retried in a new transaction (the failed try's write
    rolled back); when it persists the caller gets StorageBusy and nothing is written."""
    tries: list[int] = []

    def conflicting(limit: int) -> Callable[[sa.Connection], int]:
        def work(conn: sa.Connection) -> int:
            tries.append(len(tries))
            conn.exec_driver_sql("INSERT INTO t VALUES (1)")
            if len(tries) <= limit:
                raise sa.exc.OperationalError(
                    "INSERT", None, psycopg.errors.SerializationFailure("conflict")
                )
            return len(tries)

        return work

    assert await database.arun(conflicting(2)) == 3
    assert await database.arun(_count, write=False) == 1
    tries.clear()
    with pytest.raises(StorageBusy) as caught:
        await database.arun(conflicting(1000))
    assert 2 <= len(tries) <= 10
    assert isinstance(caught.value.__cause__, sa.exc.DBAPIError)
    assert await database.arun(_count, write=False) == 1


async def test_the_transaction_runs_off_the_event_loop(database: Database) -> None:
    """The work (and its waiting on the database) does not hold up the event loop."""
    seen: list[threading.Thread] = []

    def work(conn: sa.Connection) -> int:
        seen.append(threading.current_thread())
        return _count(conn)

    assert await database.arun(work) == 0
    assert seen and seen[0] is not threading.current_thread()


def test_a_memory_serves_several_event_loops(url: str) -> None:
    """One memory across ``asyncio.run`` calls one after another, and from two threads
    each running its own loop at the same time."""
    memory = ConversationMemory(url)

    async def turns(session: str, count: int) -> None:
        for turn in range(count):
            await memory.aadd_and_get_messages(
                session, [HumanMessage(f"q{turn}"), AIMessage(f"a{turn}")]
            )

    asyncio.run(turns("first", 2))
    asyncio.run(turns("second", 2))
    threads = [
        threading.Thread(target=asyncio.run, args=(turns(f"thread-{index}", 3),))
        for index in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for session, count in [("first", 2), ("second", 2), ("thread-0", 3), ("thread-1", 3)]:
        assert [m.content for m in memory.get_messages(session)][-2:] == [
            f"q{count - 1}",
            f"a{count - 1}",
        ]
        assert len(memory.get_entries(session)) == 2 * count
    memory.close()
    assert _checked_out(memory.database) == 0


async def test_a_cancelled_caller_leaves_no_connection_or_transaction(
    database: Database,
) -> None:
    """``asyncio.wait_for`` gives up on a slow transaction: the transaction still runs
    to its end on its thread (here: commits) and returns its connection, and the next
    write goes through."""
    await database.arun(_count)  # the connections kept between transactions (SQLite)
    await database.arun(_count, write=False)
    idle = _checked_out(database)
    release = threading.Event()

    def slow(conn: sa.Connection) -> None:
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        assert release.wait(10)

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(database.arun(slow), 0.1)
    assert await database.arun(_count, write=False) == 0  # still running on its thread
    release.set()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (
        _checked_out(database) != idle or await database.arun(_count, write=False) != 1
    ):
        await asyncio.sleep(0.01)
    assert _checked_out(database) == idle
    assert await database.arun(_count, write=False) == 1
    await database.arun(lambda conn: conn.exec_driver_sql("INSERT INTO t VALUES (2)"))
    assert await database.arun(_count, write=False) == 2
