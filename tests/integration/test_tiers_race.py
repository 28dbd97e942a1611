"""Prune racing access (RELIABILITY T16): the access wins or the prune is complete,
never "the access returned OK, then the session is gone". Both backends."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage import failpoints as _failpoints
from tiermem.errors import SessionNotFound
from tiermem.testing import ManualClock, SignalRecorder

from ..conftest import MemoryFactory
from .test_tiers_prune import session_ids
from .test_tiers_recalc import add_at

EXPIRED_BY_A_SECOND = timedelta(days=30, seconds=1)
DEADLINE = 20.0


@dataclass
class Gate:
    """Holds the thread that reaches failpoint ``name`` until :attr:`release` is set."""

    name: str
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def hit(self, name: str) -> None:
        """The failpoint hook: park the caller at this gate's failpoint."""
        if name == self.name:
            self.reached.set()
            if not self.release.wait(DEADLINE):
                raise TimeoutError(f"gate {self.name} was never released")


@pytest.fixture(name="gate")
def fixture_gate(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Gate]:
    """Install a gate on a failpoint name (in-process stand-in for ``pause``)."""

    def install(name: str) -> Gate:
        gate = Gate(name)
        monkeypatch.setattr(_failpoints, "hit", gate.hit)
        return gate

    return install


@dataclass
class Worker:
    """A thread running one call, keeping its result or its exception."""

    name: str
    call: Callable[[], Any]
    result: Any = None
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def start(self) -> Worker:
        """Start the call on a thread named after the worker."""
        self.thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self.thread.start()
        return self

    def _main(self) -> None:
        try:
            self.result = self.call()
        except BaseException as exc:  # kept for the assertions
            self.error = exc

    def join(self) -> None:
        """Wait for the call; a hang fails the test."""
        assert self.thread is not None
        self.thread.join(DEADLINE)
        assert not self.thread.is_alive(), f"{self.name} deadlocked"


class LockWatch:
    """Tells when a named thread is blocked on the database's write or row lock."""

    def __init__(self, engine: Engine, backend: str) -> None:
        self.engine = engine
        self.backend = backend
        self.issued: dict[str, threading.Event] = {}

    def spy(self, *args: Any) -> None:
        """``before_cursor_execute`` hook: note a watched thread's locking statement."""
        name = threading.current_thread().name
        if name in self.issued and args[2] == "BEGIN IMMEDIATE":
            self.issued[name].set()

    def watch(self, thread_name: str) -> None:
        """Start watching the thread called ``thread_name`` (before starting it)."""
        self.issued[thread_name] = threading.Event()

    def wait_blocked(self, thread_name: str) -> None:
        """Return once the thread waits for the lock: on PostgreSQL its backend is
        seen waiting on a row lock; on SQLite it has sent its ``BEGIN IMMEDIATE``
        (which waits in ``busy_timeout``; the outcome is the same either way)."""
        if self.backend == "postgres":
            _poll_lock_wait(self.engine)
            return
        issued = self.issued[thread_name].wait(DEADLINE)
        assert issued, f"{thread_name} never began a write transaction"


@pytest.fixture(name="locks")
def fixture_locks(engine: Engine, backend: str) -> Iterator[LockWatch]:
    """A :class:`LockWatch` on the test engine."""
    watch = LockWatch(engine, backend)
    event.listen(engine, "before_cursor_execute", watch.spy)
    yield watch
    event.remove(engine, "before_cursor_execute", watch.spy)


def _poll_lock_wait(engine: Engine) -> None:
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE application_name = :app AND wait_event_type = 'Lock'"
    )
    end = time.monotonic() + DEADLINE
    with engine.connect() as conn:
        while conn.execute(query, {"app": f"tiermem-test-{os.getpid()}"}).scalar_one() < 1:
            assert time.monotonic() < end, "no backend ever waited on the lock"
            time.sleep(0.005)  # polling an observable state, not a guess at timing
            conn.rollback()


def test_access_holding_its_lock_saves_the_session(
    make_memory: MemoryFactory,
    clock: ManualClock,
    engine: Engine,
    gate: Callable[[str], Gate],
    locks: LockWatch,
) -> None:
    """A prune that starts while an access holds its lock re-checks and spares the session."""
    memory = make_memory()
    add_at(memory, clock, "s", clock.now - EXPIRED_BY_A_SECOND)
    add_at(memory, clock, "other", clock.now - timedelta(days=40))
    held = gate("touch.after_update")
    accessor = Worker("accessor", lambda: memory.track_access("s")).start()
    assert held.reached.wait(DEADLINE)
    locks.watch("pruner")
    pruner = Worker("pruner", memory.prune_expired).start()
    locks.wait_blocked("pruner")
    held.release.set()
    accessor.join()
    pruner.join()
    assert accessor.error is None and accessor.result.last_accessed == clock.now
    assert pruner.error is None and pruner.result == 1
    assert session_ids(engine) == {"s"}


@pytest.mark.parametrize("access", ["track", "read", "write"])
def test_prune_holding_its_lock_completes_before_a_later_access(
    make_memory: MemoryFactory,
    clock: ManualClock,
    engine: Engine,
    gate: Callable[[str], Gate],
    locks: LockWatch,
    access: str,
) -> None:
    """An access that waits for a prune finds the session gone: it raises, reads nothing,
    or starts a new session; it never reports success on a deleted one."""
    memory = make_memory()
    add_at(memory, clock, "s", clock.now - EXPIRED_BY_A_SECOND)
    calls: dict[str, Callable[[], Any]] = {
        "track": lambda: memory.track_access("s"),
        "read": lambda: memory.get_messages("s"),
        "write": lambda: memory.add_user_message("s", "back again"),
    }
    held = gate("prune.after_select")
    pruner = Worker("pruner", memory.prune_expired).start()
    assert held.reached.wait(DEADLINE)
    locks.watch("accessor")
    accessor = Worker("accessor", calls[access]).start()
    locks.wait_blocked("accessor")
    held.release.set()
    pruner.join()
    accessor.join()
    assert pruner.error is None and pruner.result == 1
    if access == "track":
        assert isinstance(accessor.error, SessionNotFound)
        assert session_ids(engine) == set()
    elif access == "read":
        assert accessor.error is None and accessor.result == []
        assert session_ids(engine) == set()
    else:
        assert accessor.error is None and accessor.result.seq == 1
        assert memory.get_stats("s").total_entries == 1


def _check_linearizable(
    ids: list[str], touched: set[str], missing: set[str], pruned: list[tuple[str, ...]]
) -> None:
    gone = {session_id for batch in pruned for session_id in batch}
    assert all(len(batch) <= 7 for batch in pruned)
    assert not touched & gone, "an access returned OK for a session that was then pruned"
    assert missing <= gone
    assert touched | gone == set(ids)


def test_accesses_and_limited_prunes_interleave_safely(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """50 borderline sessions touched in random order while prune(limit=7) loops: every
    session ends either touched and kept or pruned, never both."""
    setup = make_memory()
    ids = [f"s{index:02d}" for index in range(50)]
    for session_id in ids:
        add_at(setup, clock, session_id, clock.now - EXPIRED_BY_A_SECOND)
    accessor_memory, pruner_memory = make_memory(), make_memory()
    start = threading.Barrier(2, timeout=DEADLINE)
    touched: set[str] = set()
    missing: set[str] = set()
    recorder = SignalRecorder(pruner_memory)

    def access() -> None:
        start.wait()
        for session_id in random.sample(ids, len(ids)):
            try:
                accessor_memory.track_access(session_id)
                touched.add(session_id)
            except SessionNotFound:
                missing.add(session_id)

    def prune() -> None:
        start.wait()
        while pruner_memory.prune_expired(limit=7):
            pass

    with recorder.recording():
        workers = [Worker("accessor", access).start(), Worker("pruner", prune).start()]
        for worker in workers:
            worker.join()
            assert worker.error is None, worker.error
    pruned = [kwargs["session_ids"] for kwargs in recorder.of("pruned")]
    _check_linearizable(ids, touched, missing, pruned)
    assert session_ids(engine) == touched


def _process_worker(role: str, url: str, ids: list[str], barrier: Any, queue: Any) -> None:
    """One side of the cross-process race; reports its observations on ``queue``."""
    import datetime as dt

    moment = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    memory = ConversationMemory(url, clock=lambda: moment)
    recorder = SignalRecorder(memory)
    touched: list[str] = []
    missing: list[str] = []
    with recorder.recording():
        barrier.wait()
        if role == "accessor":
            for session_id in random.sample(ids, len(ids)):
                try:
                    memory.track_access(session_id)
                    touched.append(session_id)
                except SessionNotFound:
                    missing.append(session_id)
        else:
            while memory.prune_expired(limit=7):
                pass
    memory.close()
    queue.put((role, touched, missing, [kw["session_ids"] for kw in recorder.of("pruned")]))


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Any, request: pytest.FixtureRequest) -> str:
    """A database URL other processes can open: a SQLite file or a fresh PG schema."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'race.db'}"
    from ..conftest import PG_URL

    schema = request.getfixturevalue("pg_schema")
    return f"{PG_URL}?options=-csearch_path%3D{schema}"


@pytest.mark.slow
def test_processes_race_accesses_against_prunes(url: str) -> None:
    """Across two processes, each of 3 rounds of 50 borderline sessions ends linearizable."""
    import multiprocessing

    from tiermem.testing import check_invariants

    context = multiprocessing.get_context("spawn")
    clock = ManualClock()
    memory = ConversationMemory(url, clock=clock)
    for round_ in range(3):
        ids = [f"r{round_}-{index:02d}" for index in range(50)]
        for session_id in ids:
            add_at(memory, clock, session_id, clock.now - EXPIRED_BY_A_SECOND)
        barrier, queue = context.Barrier(2, timeout=60), context.Queue()
        procs = [
            context.Process(target=_process_worker, args=(role, url, ids, barrier, queue))
            for role in ("accessor", "pruner")
        ]
        for proc in procs:
            proc.start()
        reports = {report[0]: report for report in (queue.get(timeout=120) for _ in procs)}
        for proc in procs:
            proc.join(60)
            if proc.is_alive():  # a hang is a deadlock failure
                proc.kill()
                pytest.fail("a race worker deadlocked")
        _, touched, missing, _ = reports["accessor"]
        _check_linearizable(ids, set(touched), set(missing), reports["pruner"][3])
        kept = {i.session_id for i in memory.list_sessions() if i.session_id in ids}
        assert kept == set(touched)
    check_invariants(memory)
    memory.close()
