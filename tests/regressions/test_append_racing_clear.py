"""An append racing ``clear_session`` creates the session anew, never fails.

On PostgreSQL an append that finds no session inserts it with ``ON CONFLICT DO
NOTHING`` and then locks it. Another writer may create the session between that
append's look and its insert, and a clear may hold the row meanwhile: the insert
then finds the row and does nothing, the clear deletes it, and the lock that
follows finds nothing. The append must create the session again instead of
raising ``SessionNotFound``. On SQLite ``BEGIN IMMEDIATE`` serializes the writers,
so the create and the clear can only run after the append commits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tests.conftest import MemoryFactory
from tiermem._storage import cascade, schema, sessions

DEADLINE = 30.0  # seconds: generous, every wait below ends as soon as its condition holds


def _pausing(
    real: Callable[..., Any], owner: str
) -> tuple[Callable[..., Any], threading.Event, threading.Event]:
    """``real`` wrapped to stop once, in the thread named ``owner``, until ``resume``
    is set; ``reached`` is set when it stops. (By name: the thread may reach ``real``
    before the test has stored its handle.)"""
    reached, resume = threading.Event(), threading.Event()

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == owner and not reached.is_set():
            reached.set()
            assert resume.wait(DEADLINE), "the test never resumed the paused writer"
        return real(*args, **kwargs)

    return wrapper, reached, resume


def _waiting_for_a_lock(engine: Engine) -> bool:
    """Whether a connection of this test process waits for a row lock."""
    with engine.connect() as conn:
        query = sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND application_name = current_setting('application_name')"
            " AND pid <> pg_backend_pid()"
        )
        return bool(conn.execute(query).scalar_one())


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def _run(target: Callable[[], Any], results: dict[str, Any], name: str) -> threading.Thread:
    def body() -> None:
        try:
            results[name] = target()
        except Exception as exc:  # reported by the assertions below
            results[name] = exc

    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    return thread


def test_an_append_racing_a_clear_creates_the_session_anew(
    make_memory: MemoryFactory, engine: Engine, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append looks for the session (none), another writer creates it, a clear
    locks it, the append's insert finds it, the clear deletes it: the append stores
    its message in a new session, and the clear reports the entry it removed."""
    appender, other = make_memory(), make_memory()
    threads: dict[str, threading.Thread] = {}
    results: dict[str, Any] = {}
    insert, append_at_insert, resume_append = _pausing(schema.dialect_insert, "append")
    delete, clear_holds_row, resume_clear = _pausing(cascade.delete_sessions, "clear")
    monkeypatch.setattr(sessions, "dialect_insert", insert)
    monkeypatch.setattr(cascade, "delete_sessions", delete)

    threads["append"] = _run(lambda: appender.add_user_message("s", "kept"), results, "append")
    assert append_at_insert.wait(DEADLINE)  # the append saw no session and will insert it

    if backend == "postgres":
        other.add_user_message("s", "cleared")  # another writer creates the session
        threads["clear"] = _run(lambda: other.clear_session("s"), results, "clear")
        assert clear_holds_row.wait(DEADLINE)  # the clear holds the row, not yet deleted
        resume_append.set()  # its insert finds the row and does nothing; its lock waits
        _wait_until(lambda: _waiting_for_a_lock(engine))
        resume_clear.set()  # the clear deletes the row the append waits for
    else:
        # SQLite: the append's BEGIN IMMEDIATE holds the write lock, so the other
        # writer's create and clear wait for its commit.
        def create_then_clear() -> int:
            other.add_user_message("s", "cleared")
            return other.clear_session("s")

        resume_clear.set()
        threads["clear"] = _run(create_then_clear, results, "clear")
        resume_append.set()

    for thread in threads.values():
        thread.join(DEADLINE)
        assert not thread.is_alive()
    assert not isinstance(results["append"], Exception), results["append"]
    assert results["append"].content == "kept"
    if backend == "postgres":
        assert results["clear"] == 1  # the other writer's entry, cleared before the append
        assert [m.content for m in appender.get_messages("s")] == ["kept"]
    else:
        assert results["clear"] == 2  # both entries: the clear ran after the append
        assert appender.get_messages("s") == []
