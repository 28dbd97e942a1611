"""A session's events in commit order, however long their writers waited for its row.

PostgreSQL gives an UPDATE its transaction id before the UPDATE waits for a row's
lock, while ``SELECT ... FOR UPDATE`` waits without one: an append that queued for a
session behind a ``clear_session`` had the older id, and its event was delivered
before the clear that committed first, so a consumer mirroring the session dropped
the message the store kept.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage import events
from tiermem.feed import ChangeEvent
from tiermem.testing import wait_for_feed

from ..conftest import MemoryFactory, pg_engine_for


def _settled(memory: ConversationMemory) -> list[ChangeEvent]:
    """Every event so far (on PostgreSQL once other clients' older transactions let
    every committed one be delivered)."""
    wait_for_feed(memory)
    return list(memory.feed.follow(poll_interval=0.02, idle_timeout=0.05))


def mirrored_seqs(events: list[ChangeEvent]) -> dict[str, list[int]]:
    """The seqs of each session's entries as a consumer replaying ``events`` holds
    them; a seq that does not follow the one before fails (an event out of order)."""
    sessions: dict[str, list[int]] = {}
    for event in events:
        if event.session_id is None:
            continue
        seqs = sessions.setdefault(event.session_id, [])
        if event.kind == "session:cleared":
            seqs.clear()
        elif event.kind == "entry:added":
            seq = event.payload["seq"]
            assert seq == len(seqs) + 1, f"{event.session_id}: seq {seq} after {seqs}"
            seqs.append(seq)
    return sessions


def _waiting(engine: Engine) -> int:
    """How many of this test's PostgreSQL connections wait for a lock."""
    with engine.connect() as conn:
        name = conn.exec_driver_sql("SELECT current_setting('application_name')").scalar()
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = %(name)s AND wait_event_type = 'Lock'",
                {"name": name},
            ).scalar_one()
        )


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


@contextmanager
def _session_locked(engine: Engine, project: str, session_id: str) -> Iterator[None]:
    """Hold the session's row lock from another connection (SQLite: the write lock)."""
    if engine.dialect.name == "sqlite":
        database = sqlite3.connect(str(engine.url.database), isolation_level=None)
        try:
            database.execute("BEGIN IMMEDIATE")
            yield
            database.execute("COMMIT")
        finally:
            database.close()
        return
    with engine.connect() as conn, conn.begin():
        conn.execute(
            sa.text(
                "SELECT 1 FROM tiermem_session WHERE project = :p AND session_id = :s FOR UPDATE"
            ),
            {"p": project, "s": session_id},
        )
        yield


def test_an_append_queued_behind_a_clear_is_delivered_after_it(
    engine: Engine, make_memory: MemoryFactory
) -> None:
    """A clear and then an append queue for a locked session, in that order; when
    the lock goes, the clear commits first and the append creates the session anew.
    The feed delivers the clear before the append, so a consumer replaying it holds
    what the store holds. (On SQLite writers queue for the database: whichever
    commits first, the feed follows.)"""
    memory = make_memory()
    memory.add_user_message("s", "before")
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> threading.Thread:
        def target() -> None:
            try:
                call()
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)

        thread = threading.Thread(target=target)
        thread.start()
        return thread

    postgres = engine.dialect.name == "postgresql"
    with _session_locked(engine, memory.project, "s"):
        clear = run(lambda: memory.clear_session("s"))
        if postgres:  # waits for the row without a transaction id
            _until(lambda: _waiting(engine) == 1, "the clear waits")
        append = run(lambda: memory.add_user_message("s", "after"))
        if postgres:  # takes its transaction id, then queues behind the clear
            _until(lambda: _waiting(engine) == 2, "the append waits")
        else:
            time.sleep(0.2)
    clear.join()
    append.join()
    assert errors == []

    stored = [entry.seq for entry in memory.get_entries("s")]
    assert mirrored_seqs(_settled(memory)) == {"s": stored}
    if postgres:
        assert stored == [1]  # the clear went first: the append made the session anew


def test_concurrent_writers_deliver_each_session_in_seq_order(
    make_memory: MemoryFactory,
) -> None:
    """Writers appending to a few shared sessions from several threads, each new
    session created by whichever comes first: every session's entries are delivered
    in seq order, and all of them."""
    memory = make_memory()
    sessions = [f"s{number}" for number in range(6)]
    errors: list[BaseException] = []

    def writer(number: int) -> None:
        try:
            for turn in range(24):
                session = sessions[(turn // 4 + number) % len(sessions)]
                memory.add_user_message(session, f"writer {number} turn {turn}")
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    mirror = mirrored_seqs(_settled(memory))
    for session in sessions:
        stored = [entry.seq for entry in memory.get_entries(session)]
        assert mirror.get(session, []) == stored


def test_an_ordering_id_is_one_already_given_out(pg_schema: str) -> None:
    """A writer whose own transaction id is older than one that completed since takes
    that completed id as its events' ordering id, never the next id not yet given
    out: its events would then wait for some later transaction to be delivered, and
    on a server with no other writes they would never be (PostgreSQL)."""
    engine = pg_engine_for(pg_schema)
    try:
        with engine.connect() as writer, writer.begin():
            own = writer.exec_driver_sql("SELECT pg_current_xact_id()::text::bigint").scalar_one()
            with engine.begin() as other:
                newer = other.exec_driver_sql(
                    "SELECT pg_current_xact_id()::text::bigint"
                ).scalar_one()
            order, unassigned = writer.exec_driver_sql(
                f"SELECT {events.ORDER_XID}, pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
            ).one()
        assert own < newer <= order < unassigned
    finally:
        engine.dispose()
