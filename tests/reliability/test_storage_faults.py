"""T33-T35: disk full, a failure at every statement, lost connections and retried conflicts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig, SessionState
from tiermem.errors import StorageBusy, StorageError, StorageFull, StorageUnavailable
from tiermem.invariants import find_violations
from tiermem.testing import FakeSummarizer, ManualClock

from ..conftest import MemoryFactory, pg_admin
from .dump import canonical_dump
from .workers import tool_group

CONFIG = MemoryConfig(auto_compress=False, recent_window=2, min_entries_to_compress=2)
#: Compression bookkeeping a failed commit may leave behind (the lease and the backoff).
CLAIM = {"tiermem_session": {"claim_token", "claim_expires_at", "failures", "backoff_until"}}


def _healthy(engine: Engine) -> None:
    problems = find_violations(engine)
    assert problems == [], problems


def _words(seed: int, count: int) -> str:
    """Distinct words, so the text costs about one token per word."""
    return " ".join(f"w{seed}x{index}" for index in range(count))


# --------------------------------------------------------------------------- T33


def test_disk_full_is_typed_and_harmless(tmp_path: Path) -> None:
    """With the file capped (PRAGMA max_page_count), a 1 MB append, a compression commit and
    an import raise StorageFull and change nothing; with the cap raised they all succeed."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'full.db'}")
    cap: dict[str, int | None] = {"pages": None}

    def on_checkout(dbapi: Any, _record: Any, _proxy: Any) -> None:
        # max_page_count is per connection: apply the current cap to every checkout.
        dbapi.execute(f"PRAGMA max_page_count = {cap['pages'] or 1073741823}")

    sa.event.listen(engine, "checkout", on_checkout)

    def summarize(prompt: str) -> str:
        return "summary " + _words(99, 3000)

    memory = ConversationMemory(engine=engine, config=CONFIG, summarizer=summarize)
    for index in range(4):
        memory.add_user_message("big", _words(index, 5000))
    memory.add_user_message("small", "hello")
    # The export comes from another file: deleting it here would leave free pages.
    with ConversationMemory(f"sqlite:///{tmp_path / 'source.db'}", config=CONFIG) as source:
        source.add_messages("src", [HumanMessage(_words(50 + i, 2000)) for i in range(10)])
        state = source.export_session("src")
    with engine.connect() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
        conn.rollback()
    cap["pages"] = int(pages) + 2
    before = canonical_dump(engine)
    with pytest.raises(StorageFull):
        memory.add_user_message("small", "x" * 1_000_000)
    assert canonical_dump(engine) == before
    with pytest.raises(StorageFull):
        memory.compress("big", force=True, keep=0)
    assert canonical_dump(engine, ignore=CLAIM) == _without_claims(before)
    with pytest.raises(StorageFull):
        memory.import_session(state)
    assert canonical_dump(engine, ignore=CLAIM) == _without_claims(before)
    _healthy(engine)
    cap["pages"] = None
    assert memory.add_user_message("small", "x" * 1_000_000).seq == 2
    result = memory.compress("big", force=True, keep=0)
    assert result is not None and result.entries_compressed == 4
    assert memory.import_session(state) == "src"
    _healthy(engine)
    memory.close()


def _without_claims(dump: str) -> str:
    """``dump`` re-rendered without the claim columns (to compare with ignore=CLAIM)."""
    import json

    tables = json.loads(dump)
    for name, rows in tables.items():
        skip = CLAIM.get(name, set())
        tables[name] = sorted(
            json.dumps(
                {k: v for k, v in json.loads(row).items() if k not in skip},
                sort_keys=True,
                ensure_ascii=False,
            )
            for row in rows
        )
    return json.dumps(tables, sort_keys=True, ensure_ascii=False, indent=0)


# --------------------------------------------------------------------------- T34


@dataclass
class Fault:
    """Raise OperationalError on statement ``at`` (1-based), or on every one from it."""

    at: int
    always: bool
    seen: int = 0
    fired: int = 0

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        self.seen += 1
        if self.seen == self.at or (self.always and self.seen > self.at):
            self.fired += 1
            raise sa.exc.OperationalError(statement, None, Exception("disk I/O error"))


@contextmanager
def injected(engine: Engine, fault: Fault) -> Iterator[Fault]:
    """Install ``fault`` on every statement of ``engine`` for the block."""
    sa.event.listen(engine, "before_cursor_execute", fault)
    try:
        yield fault
    finally:
        sa.event.remove(engine, "before_cursor_execute", fault)


def _setup(memory: ConversationMemory, clock: ManualClock) -> SessionState:
    for index in range(8):
        memory.add_user_message("s", f"message {index} about the weather")
    memory.add_messages("s", tool_group("g"))
    memory.add_user_message("gone", "to be pruned")
    source = memory.export_session("s")
    clock.advance(days=31)
    memory.add_user_message("s", "recent")
    return source


OPERATIONS: dict[str, Callable[[ConversationMemory, SessionState], object]] = {
    "append": lambda m, _s: m.add_user_message("s", "new"),
    "add_messages": lambda m, _s: m.add_messages("s", tool_group("h")),
    "compress": lambda m, _s: m.compress("s", force=True),
    "clear_session": lambda m, _s: m.clear_session("s"),
    "import": lambda m, state: m.import_session(state, session_id="copy"),
    "track_access": lambda m, _s: m.track_access("s"),
    # limit=1: the one expired session, in one batch (an unlimited prune runs one more
    # batch transaction to find nothing left, so a fault there follows a committed batch).
    "prune": lambda m, _s: m.prune_expired(limit=1),
    "get_messages": lambda m, _s: m.get_messages("s"),
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_fail_at_every_statement(
    make_memory: MemoryFactory, clock: ManualClock, operation: str
) -> None:
    """For N = 1, 2, ... the operation fails at statement N (once, then at every statement
    from N on): each failure is a typed StorageError with the driver error as cause and
    leaves the store unchanged; once N passes the last statement the operation succeeds."""
    memory = make_memory(config=CONFIG, summarizer=FakeSummarizer())
    state = _setup(memory, clock)
    run = OPERATIONS[operation]
    ignore = CLAIM if operation == "compress" else None
    for always in (False, True):
        at = 1
        # A failed run leaves the store as it was, so one dump serves the whole loop.
        before = canonical_dump(memory.engine, ignore=ignore)
        while True:
            with injected(memory.engine, Fault(at, always)) as fault:
                try:
                    run(memory, state)
                except StorageError as error:
                    assert fault.fired, f"{operation}: StorageError without an injected fault"
                    assert isinstance(error.__cause__, sa.exc.DBAPIError)
                else:
                    assert not fault.fired, f"{operation} hid the fault at statement {at}"
            if not fault.fired:
                break
            assert canonical_dump(memory.engine, ignore=ignore) == before, (
                f"{operation} failed at statement {at} (always={always}) but changed the store"
            )
            clock.advance(seconds=CONFIG.claim_ttl + 1)  # a stuck lease expires
            at += 1
        assert at > 1, f"{operation} ran no statement"
        _healthy(memory.engine)
        # The successful run changed the store; start the second loop from a fresh copy.
        if not always:
            memory.clear_session("s")
            memory.clear_session("copy")
            state = _setup(memory, clock)


# --------------------------------------------------------------------------- T35


@pytest.mark.parametrize("backend", ["postgres"])
def test_connection_killed_mid_write(make_memory: MemoryFactory) -> None:
    """pg_terminate_backend during an append gives StorageUnavailable with nothing written;
    the next call reconnects through the pool and works (T35 a)."""
    memory = make_memory(config=CONFIG)
    memory.add_user_message("s", "first")
    before = canonical_dump(memory.engine)

    def kill_backend(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not statement.startswith("INSERT INTO tiermem_entry"):
            return
        pid = conn.connection.driver_connection.info.backend_pid
        admin = pg_admin()
        try:
            with admin.connect() as admin_conn:
                admin_conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        finally:
            admin.dispose()

    sa.event.listen(memory.engine, "before_cursor_execute", kill_backend)
    try:
        with pytest.raises(StorageError) as caught:
            memory.add_user_message("s", "lost")
    finally:
        sa.event.remove(memory.engine, "before_cursor_execute", kill_backend)
    assert isinstance(caught.value, StorageUnavailable)
    assert canonical_dump(memory.engine) == before
    assert memory.add_user_message("s", "second").seq == 2
    _healthy(memory.engine)


@pytest.mark.parametrize(
    "error", [psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected]
)
def test_conflicts_are_retried_then_busy(
    make_memory: MemoryFactory, error: type[psycopg.Error]
) -> None:
    """40001 and 40P01 are retried inside the operation; when they persist the caller gets
    StorageBusy (never a raw psycopg error) and nothing is written."""
    memory = make_memory(config=CONFIG)
    memory.add_user_message("s", "first")
    attempts: list[str] = []

    def conflict(limit: int) -> Callable[..., None]:
        def fail(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            if statement.startswith("INSERT INTO tiermem_entry"):
                attempts.append(statement)
                if len(attempts) <= limit:
                    raise sa.exc.OperationalError(statement, None, error("conflict"))

        return fail

    transient = conflict(2)
    sa.event.listen(memory.engine, "before_cursor_execute", transient)
    try:
        assert memory.add_user_message("s", "retried").seq == 2
    finally:
        sa.event.remove(memory.engine, "before_cursor_execute", transient)
    assert len(attempts) == 3
    attempts.clear()
    before = canonical_dump(memory.engine)
    persistent = conflict(1000)
    sa.event.listen(memory.engine, "before_cursor_execute", persistent)
    try:
        with pytest.raises(StorageBusy) as caught:
            memory.add_user_message("s", "never")
    finally:
        sa.event.remove(memory.engine, "before_cursor_execute", persistent)
    assert 2 <= len(attempts) <= 10
    assert isinstance(caught.value.__cause__, sa.exc.DBAPIError)
    assert canonical_dump(memory.engine) == before
