"""T06 and T33-T35: a failed summary commit, disk full, a failure at every statement,
lost connections and retried conflicts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig, SessionState
from tiermem._storage import failpoints as _failpoints
from tiermem.doctor import find_violations
from tiermem.errors import StorageBusy, StorageError, StorageFull, StorageUnavailable
from tiermem.testing import FakeSummarizer, ManualClock, SignalRecorder

from ..conftest import (
    MemoryFactory,
    _create_schema,
    _drop_schema,
    pg_admin,
    pg_engine_for,
    sqlite_engine,
)
from .commit_faults import (
    COMMIT,
    FAILED_COMMIT,
    SUMMARY_COMMIT_TRACE,
    FailingSummaryCommit,
    Trace,
    terminate_backend,
)
from .dump import canonical_dump
from .statement_faults import Fault, injected
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


@contextmanager
def _fresh_engine(backend: str, path: Path) -> Iterator[Engine]:
    """An engine on a database tiermem has never used: a new SQLite file at ``path``, or
    a new PostgreSQL schema (dropped afterwards)."""
    if backend == "sqlite":
        engine = sqlite_engine(path)
        try:
            yield engine
        finally:
            engine.dispose()
        return
    schema = _create_schema()
    engine = pg_engine_for(schema)
    try:
        yield engine
    finally:
        engine.dispose()
        _drop_schema(schema)


def _objects(engine: Engine) -> list[tuple[str, str]]:
    """Every object of the database (SQLite) or of the test's schema (PostgreSQL):
    tables, indexes, views, triggers, sequences, as (kind, name)."""
    if engine.dialect.name == "sqlite":
        query = "SELECT type, name FROM sqlite_master"
    else:
        query = (
            "SELECT c.relkind::text, c.relname FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()"
        )
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(query).all()
        conn.rollback()
    return sorted((str(kind), str(name)) for kind, name in rows)


# The PostgreSQL sweep runs ~55 DDL transactions (a few ms of server time per statement).
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def test_fail_at_every_statement_of_schema_creation(
    backend: str, tmp_path: Path, clock: ManualClock
) -> None:
    """Schema creation on a fresh database (the first use of a memory) fails at statement
    N = 1, 2, ... (once, then at every statement from N on): each failure is a typed
    StorageError and leaves no table, index or trigger behind; the retry that passes the
    last statement creates a schema the memory works on."""
    for always in (False, True):
        with _fresh_engine(backend, tmp_path / f"schema-{always}.db") as engine:
            memory = ConversationMemory(engine=engine, config=CONFIG, clock=clock)
            before = _objects(engine)
            at = 1
            while True:
                with injected(engine, Fault(at, always)) as fault:
                    try:
                        memory.database.ensure_schema()
                    except StorageError as error:
                        assert fault.fired, "schema creation failed without an injected fault"
                        assert isinstance(error.__cause__, sa.exc.DBAPIError)
                    else:
                        assert not fault.fired, f"schema creation hid the fault at {at}"
                if not fault.fired:
                    break
                assert _objects(engine) == before, (
                    f"schema creation failed at statement {at} (always={always}) "
                    "but left objects behind"
                )
                at += 1
            assert at > 1, "schema creation ran no statement"
            assert _objects(engine) != before
            assert memory.add_user_message("s", "hello").seq == 1
            assert [m.content for m in memory.get_messages("s")] == ["hello"]
            _healthy(engine)
            memory.close()


# --------------------------------------------------------------------------- T35


@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.parametrize(
    "statement_start",
    [
        "UPDATE tiermem_session SET ",  # the reserve, sent on the driver connection
        "WITH new AS (INSERT INTO tiermem_entry (",  # through Connection.exec_driver_sql
    ],
)
def test_connection_killed_mid_write(make_memory: MemoryFactory, statement_start: str) -> None:
    """pg_terminate_backend during an append gives StorageUnavailable with nothing written;
    the next call reconnects through the pool and works (T35 a), whichever way the
    statement that finds the connection dead was sent."""
    memory = make_memory(config=CONFIG)
    memory.add_user_message("s", "first")
    before = canonical_dump(memory.engine)

    def kill_backend(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not statement.startswith(statement_start):
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
            if "INSERT INTO tiermem_entry (" in statement:
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


# --------------------------------------------------------------------------- T06

#: What a failed summary commit may change: the backoff of automatic compression.
#: The claim columns stay in the comparison, so they must be back to what they were.
BACKOFF = {"tiermem_session": {"failures", "backoff_until"}}


def _seed_compressible(memory: ConversationMemory) -> None:
    """Eight entries: a forced compress() takes the six outside the recent window."""
    for index in range(8):
        memory.add_user_message("s", f"message {index} about the weather")


def _failed_commit_changed_nothing(
    memory: ConversationMemory, fake: FakeSummarizer, recorder: SignalRecorder, before: str
) -> None:
    """After a compress() whose summary transaction did not commit: the store is as it
    was (no summary, no entry linked, no claim left), the summary had been made, and no
    signal was sent: ``compressed`` only follows a commit, and ``compression_failed`` is
    sent for summarizer failures (before the second transaction), not storage ones."""
    assert canonical_dump(memory.engine, ignore=BACKOFF) == before
    _healthy(memory.engine)
    assert len(fake.calls) == 1, "the fault was meant to hit after the summary was made"
    assert recorder.of("compressed") == []
    assert recorder.of("compression_failed") == []


def _retry_compresses(
    memory: ConversationMemory, fake: FakeSummarizer, recorder: SignalRecorder
) -> None:
    """compress() again at the same instant (a claim left behind would still be live and
    raise CompressionInProgress) succeeds, asks the summarizer again for the same
    entries, and is the only attempt that signals ``compressed``."""
    result = memory.compress("s", force=True)
    assert result is not None and result.entries_compressed == 6
    assert len(fake.calls) == 2 and fake.calls[1] == fake.calls[0]
    assert [kwargs["result"] for kwargs in recorder.of("compressed")] == [result]
    assert memory.get_stats("s").summaries == 1
    _healthy(memory.engine)


def test_failpoint_before_summary_commit_changes_nothing(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compress.before_commit=raise:OperationalError: compress() raises a StorageError
    caused by the failpoint and changes nothing (the claim is released); a retry at once
    succeeds and calls the summarizer again."""
    fake = FakeSummarizer()
    memory = make_memory(config=CONFIG, summarizer=fake)
    _seed_compressible(memory)
    before = canonical_dump(memory.engine, ignore=BACKOFF)
    monkeypatch.setitem(_failpoints._POINTS, "compress.before_commit", "raise:OperationalError")
    with SignalRecorder(sender=memory).recording() as recorder:
        with pytest.raises(StorageError) as caught:
            memory.compress("s", force=True)
        cause = caught.value.__cause__
        assert isinstance(cause, sa.exc.OperationalError)
        assert "failpoint compress.before_commit" in str(cause)
        _failed_commit_changed_nothing(memory, fake, recorder, before)
        monkeypatch.delitem(_failpoints._POINTS, "compress.before_commit")
        _retry_compresses(memory, fake, recorder)


def test_failed_summary_commit_changes_nothing(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's COMMIT of the summary transaction raises OperationalError once:
    compress() raises a StorageError with that error as cause and changes nothing (the
    claim is released in a transaction of its own); a retry at once succeeds and calls
    the summarizer again."""
    fake = FakeSummarizer()
    memory = make_memory(config=CONFIG, summarizer=fake)
    _seed_compressible(memory)
    before = canonical_dump(memory.engine, ignore=BACKOFF)
    trace = Trace()
    trace.install(monkeypatch)
    commit = FailingSummaryCommit(memory.engine, trace, memory.engine.dialect.do_commit)
    commit.install(monkeypatch)
    with SignalRecorder(sender=memory).recording() as recorder:
        with pytest.raises(StorageError) as caught:
            memory.compress("s", force=True)
        # The claim's transaction committed; the refused COMMIT was the second
        # transaction's, which held the (uncommitted) summary; the release followed.
        assert trace.events == [
            *SUMMARY_COMMIT_TRACE,
            FAILED_COMMIT,
            "transaction.before_commit",
            COMMIT,
        ]
        assert commit.summaries_in_failed == 1
        cause = caught.value.__cause__
        assert isinstance(cause, sa.exc.DBAPIError) and cause.orig is commit.error
        _failed_commit_changed_nothing(memory, fake, recorder, before)
        _retry_compresses(memory, fake, recorder)


@pytest.mark.parametrize("backend", ["postgres"])
def test_backend_terminated_before_summary_commit(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pg_terminate_backend of the connection about to COMMIT the summary (phase 3):
    StorageUnavailable, nothing changed, the claim released; the retry runs on a new
    connection, succeeds and calls the summarizer again."""
    fake = FakeSummarizer()
    memory = make_memory(config=CONFIG, summarizer=fake)
    _seed_compressible(memory)
    before = canonical_dump(memory.engine, ignore=BACKOFF)
    inserted_by: list[int] = []  # backend pid of each summary INSERT
    terminated: list[int] = []

    def note_summary_insert(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.startswith("INSERT INTO tiermem_summary"):
            inserted_by.append(conn.connection.driver_connection.info.backend_pid)

    original = _failpoints.hit

    def terminate_before_commit(name: str) -> None:
        if name == "compress.before_commit" and not terminated:
            assert len(inserted_by) == 1, "no summary written in this transaction"
            terminated.append(inserted_by[0])
            terminate_backend(inserted_by[0])
        original(name)

    monkeypatch.setattr(_failpoints, "hit", terminate_before_commit)
    sa.event.listen(memory.engine, "before_cursor_execute", note_summary_insert)
    try:
        with SignalRecorder(sender=memory).recording() as recorder:
            with pytest.raises(StorageError) as caught:
                memory.compress("s", force=True)
            assert isinstance(caught.value, StorageUnavailable)
            assert terminated == inserted_by
            _failed_commit_changed_nothing(memory, fake, recorder, before)
            _retry_compresses(memory, fake, recorder)
    finally:
        sa.event.remove(memory.engine, "before_cursor_execute", note_summary_insert)
    assert len(inserted_by) == 2 and inserted_by[1] != inserted_by[0]
